import { createHash } from "node:crypto";
import { type FSWatcher, watch } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { type ConfigRefLike, describeRef } from "@sextant/model";
import type { Logger, ReadinessGate } from "@sextant/observability";
import { type Runner, SerialTasks } from "@sextant/runtime";
import type { Applier } from "../apply/applier.js";
import type { DocumentError } from "../apply/prepare.js";
import type { ConfigStore } from "../store/config-store.js";

/** Options of {@link FileSource}. */
export interface FileSourceOptions {
  dir: string;
  applier: Applier;
  store: ConfigStore;
  logger: Logger;
  readiness: ReadinessGate;
  /** Full rescan period: a safety net for file systems where change events are lost. */
  rescanMs: number;
  /** Quiet time after a change event before rescanning. */
  debounceMs?: number;
}

/** A file that failed to apply, and why. */
export interface SourceErrors {
  readonly source: string;
  readonly errors: DocumentError[];
}

interface FileState {
  readonly hash: string;
  readonly refs: ConfigRefLike[];
}

const CONFIG_FILE = /\.(ya?ml|json)$/i;

/**
 * FileSource keeps the config store in step with a directory of YAML/JSON
 * files: a new or edited file is applied; a file that no longer holds a
 * resource, or is removed, deletes it; a broken file is reported and leaves
 * everything stored from it, and from other files, as it was. What each file
 * owns is recorded as the resource's status source (`file:<path>`), so a
 * restart also deletes what a file removed while ingest was down.
 */
export class FileSource implements Runner {
  readonly name = "file-source";
  readonly #files = new Map<string, FileState>();
  readonly #errors = new Map<string, DocumentError[]>();
  #watcher: FSWatcher | undefined;
  #interval: NodeJS.Timeout | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #tasks: SerialTasks;

  constructor(private readonly options: FileSourceOptions) {
    this.#tasks = new SerialTasks((error) =>
      options.logger.error({ err: error }, "config directory scan failed"),
    );
  }

  async start(): Promise<void> {
    this.options.readiness.require("config directory initial sync");
    await this.scan();
    await this.collectOrphans();
    try {
      this.#watcher = watch(this.options.dir, { recursive: true }, () => this.scheduleScan());
      this.#watcher.on("error", (error) =>
        this.options.logger.warn({ err: error }, "config directory watch failed"),
      );
    } catch (error) {
      this.options.logger.warn(
        { err: error, dir: this.options.dir },
        "cannot watch the config directory; rescanning only",
      );
    }
    this.#interval = setInterval(() => this.scheduleScan(0), this.options.rescanMs);
    this.options.readiness.done("config directory initial sync");
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#watcher?.close();
    clearInterval(this.#interval);
    clearTimeout(this.#debounce);
    await this.#tasks.idle();
  }

  /** Files that failed to apply, for GET /v1/analyze. */
  errors(): SourceErrors[] {
    return [...this.#errors].map(([file, errors]) => ({ source: this.sourceOf(file), errors }));
  }

  /** Rescans now; resolves once the store reflects the directory. */
  scan(): Promise<void> {
    return this.#tasks.run(() => this.scanOnce());
  }

  private scheduleScan(delay = this.options.debounceMs ?? 100): void {
    if (this.#closed) return;
    clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => void this.scan(), delay);
  }

  private async scanOnce(): Promise<void> {
    const present = new Set(await listConfigFiles(this.options.dir));
    for (const file of present) {
      let content: Buffer;
      try {
        content = await readFile(file);
      } catch {
        continue; // removed between listing and reading: the next scan sees it gone
      }
      const hash = createHash("sha256").update(content).digest("hex");
      if (this.#files.get(file)?.hash === hash) continue;
      await this.syncFile(file, content, hash);
    }
    for (const file of [...this.#files.keys()]) {
      if (present.has(file)) continue;
      await this.deleteOwned(file, this.#files.get(file)?.refs ?? []);
      this.#files.delete(file);
      this.#errors.delete(file);
      this.options.logger.info({ file: this.relativePath(file) }, "config file removed");
    }
    for (const file of [...this.#errors.keys()]) if (!present.has(file)) this.#errors.delete(file);
  }

  private async syncFile(file: string, content: Buffer, hash: string): Promise<void> {
    const source = this.sourceOf(file);
    const outcome = await this.options.applier.apply(content, source);
    if (!outcome.ok && outcome.reason === "invalid") {
      this.#errors.set(file, outcome.errors);
      this.options.logger.warn(
        { file: this.relativePath(file), errors: outcome.errors.length, first: outcome.errors[0]?.message },
        "config file rejected; its resources are left as they were",
      );
      // Remember the hash: the file is retried when it changes, not every scan.
      this.#files.set(file, { hash, refs: this.#files.get(file)?.refs ?? [] });
      return;
    }
    if (!outcome.ok) {
      // The store is unavailable: leave the hash unrecorded so the next scan retries.
      this.options.logger.warn(
        { file: this.relativePath(file), reason: outcome.message },
        "config file not applied",
      );
      return;
    }
    this.#errors.delete(file);
    const refs = outcome.applied.map((applied) => applied.ref);
    const kept = new Set(refs.map(describeRef));
    const dropped = (this.#files.get(file)?.refs ?? []).filter((ref) => !kept.has(describeRef(ref)));
    await this.deleteOwned(file, dropped);
    this.#files.set(file, { hash, refs });
    this.options.logger.info(
      { file: this.relativePath(file), resources: refs.length, deleted: dropped.length },
      "config file applied",
    );
  }

  /** After the first scan: delete what files owned before a restart and no longer hold. */
  private async collectOrphans(): Promise<void> {
    const prefix = `file:${this.options.dir}/`;
    const current = new Set([...this.#files.values()].flatMap((state) => state.refs.map(describeRef)));
    const owned = await this.options.store.ownedByWithSource((source) => source.startsWith(prefix));
    for (const { ref, source } of owned) {
      if (current.has(describeRef(ref))) continue;
      // A broken file keeps what it had: do not collect resources of files that failed.
      const file = source.slice("file:".length);
      if (this.#errors.has(file)) continue;
      await this.options.store.deleteIfOwned(ref, source);
      this.options.logger.info(
        { resource: describeRef(ref), source },
        "deleted a resource whose file no longer holds it",
      );
    }
  }

  private async deleteOwned(file: string, refs: ConfigRefLike[]): Promise<void> {
    for (const ref of refs) await this.options.store.deleteIfOwned(ref, this.sourceOf(file));
  }

  private sourceOf(file: string): string {
    return `file:${file}`;
  }

  private relativePath(file: string): string {
    return relative(this.options.dir, file);
  }
}

/**
 * The config files under dir. Paths with a segment starting with "." are
 * skipped: editors' swap files, and the `..data` / `..<timestamp>` folders of
 * a Kubernetes ConfigMap mount, whose files are reached through the top-level
 * symlinks instead (so each resource is read once).
 */
async function listConfigFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  const files: string[] = [];
  for (const entry of entries) {
    const path = join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name);
    if (
      !CONFIG_FILE.test(entry.name) ||
      relative(dir, path)
        .split(sep)
        .some((part) => part.startsWith("."))
    )
      continue;
    if (
      entry.isFile() ||
      (entry.isSymbolicLink() &&
        (await stat(path).then(
          (s) => s.isFile(),
          () => false,
        )))
    ) {
      files.push(path);
    }
  }
  return files.sort();
}
