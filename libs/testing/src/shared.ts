import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/**
 * The path of a file in the project's shared/ folder (samples, design docs),
 * which sits beside the repository's root in development and in CI.
 * SEXTANT_SHARED_DIR overrides it. A missing folder fails loudly: a test
 * must never pass by finding no samples.
 */
export function sharedPath(...segments: string[]): string {
  const base = process.env.SEXTANT_SHARED_DIR ?? join(repositoryRoot(), "..", "shared");
  const path = join(base, ...segments);
  if (!existsSync(path)) {
    throw new Error(
      `${path} does not exist: shared/ must sit beside the repository (or set SEXTANT_SHARED_DIR)`,
    );
  }
  return path;
}

/** The Bookinfo networking samples folder (Istio's own YAML, applied unchanged). */
export const bookinfoNetworkingDir = (): string => sharedPath("samples", "bookinfo", "networking");

/** The repository's root: the nearest folder above the working directory with pnpm-workspace.yaml. */
export function repositoryRoot(from = process.cwd()): string {
  for (let dir = resolve(from); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "pnpm-workspace.yaml"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no pnpm-workspace.yaml above ${from}`);
  }
}
