import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/** A file written under a temporary name beside its target, not yet in place. */
export interface PreparedFile {
  readonly path: string;
  /** Renames the temporary file over the target: readers see the old or the new content, never a mix. */
  commit(): void;
  /** Removes the temporary file. */
  abort(): void;
}

/**
 * Writes data to a temporary file in the target's directory (rename is only
 * atomic within one filesystem) with the given mode, flushed to disk, and
 * returns it ready to be renamed into place. The mode is set explicitly
 * because the creating umask may only remove bits, and a key must never be
 * readable by others, not even for a moment.
 */
export function prepareFile(path: string, data: string, mode: number): PreparedFile {
  mkdirSync(dirname(path), { recursive: true });
  const temporary = join(
    dirname(path),
    `.${basename(path)}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`,
  );
  const fd = openSync(temporary, "wx", mode);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  chmodSync(temporary, mode);
  return {
    path,
    commit: () => renameSync(temporary, path),
    abort: () => rmSync(temporary, { force: true }),
  };
}

/** Replaces path with data atomically (temporary file, then rename). */
export function writeFileAtomic(path: string, data: string, mode = 0o644): void {
  const prepared = prepareFile(path, data, mode);
  try {
    prepared.commit();
  } catch (error) {
    prepared.abort();
    throw error;
  }
}
