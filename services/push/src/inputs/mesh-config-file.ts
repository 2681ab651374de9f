import { existsSync, type FSWatcher, readFileSync, watch } from "node:fs";
import { basename, dirname } from "node:path";
import type { Logger } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import { EMPTY_MESH_CONFIG, type MeshConfig, parseMeshConfig } from "../model/mesh-config.js";

/** How soon after a change event the file is read again: a writer's several events give one reload. */
const RELOAD_DELAY_MS = 100;

/**
 * MESH_CONFIG_FILE, followed as istiod follows its mesh config file
 * (`/etc/istio/config/mesh`, mounted from the ConfigMap `istio`): read at
 * construction, then again whenever its directory changes (a ConfigMap
 * volume swaps a symlink rather than writing the file). A missing file is no
 * MeshConfig (an optional ConfigMap that does not exist yet); an invalid one
 * stops push at start, and later keeps the last good MeshConfig and logs why.
 */
export class MeshConfigFile implements Runner {
  readonly name = "mesh-config-file";
  #current: MeshConfig;
  #text: string | undefined;
  #watcher: FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  #onChange: ((mesh: MeshConfig) => void) | undefined;

  constructor(
    private readonly path: string,
    private readonly logger: Logger,
  ) {
    this.#text = this.read();
    this.#current = this.#text === undefined ? EMPTY_MESH_CONFIG : parseMeshConfig(this.#text);
    if (this.#text === undefined) logger.warn({ file: path }, "no MeshConfig file: no extension providers");
  }

  /** The MeshConfig last read successfully. */
  get current(): MeshConfig {
    return this.#current;
  }

  /** Called with each new MeshConfig after a change of the file's content. */
  onChange(listener: (mesh: MeshConfig) => void): void {
    this.#onChange = listener;
  }

  async start(): Promise<void> {
    const file = basename(this.path);
    try {
      this.#watcher = watch(dirname(this.path), (_event, changed) => {
        // Any change in a ConfigMap volume may be the swap that replaced the file.
        if (changed !== null && changed !== file && !changed.startsWith("..")) return;
        clearTimeout(this.#timer);
        this.#timer = setTimeout(() => this.reload(), RELOAD_DELAY_MS);
      });
      this.#watcher.on("error", (error) =>
        this.logger.warn({ err: error, file: this.path }, "MeshConfig file watch failed"),
      );
    } catch (error) {
      // No directory to watch: the MeshConfig read at start stays.
      this.logger.warn(
        { err: (error as Error).message, file: this.path },
        "cannot watch the MeshConfig file",
      );
    }
  }

  async close(): Promise<void> {
    clearTimeout(this.#timer);
    this.#watcher?.close();
    this.#watcher = undefined;
  }

  /** Reads the file again; a new valid content replaces the MeshConfig and is reported. */
  reload(): void {
    const text = this.read();
    if (text === this.#text) return;
    try {
      const mesh = text === undefined ? EMPTY_MESH_CONFIG : parseMeshConfig(text);
      this.#text = text;
      this.#current = mesh;
      this.logger.info(
        { file: this.path, extensionProviders: mesh.extensionProviders.length },
        "MeshConfig reloaded",
      );
      this.#onChange?.(mesh);
    } catch (error) {
      this.logger.error(
        { file: this.path, err: (error as Error).message },
        "MeshConfig is invalid; keeping the one read before",
      );
    }
  }

  private read(): string | undefined {
    return existsSync(this.path) ? readFileSync(this.path, "utf8") : undefined;
  }
}
