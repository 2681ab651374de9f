import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/**
 * The path of a file in the repository's own samples/ folder (the Bookinfo
 * platform objects and networking walk-through). A missing file fails loudly:
 * a test must never pass by finding no samples.
 */
export function samplesPath(...segments: string[]): string {
  const path = join(repositoryRoot(), "samples", ...segments);
  if (!existsSync(path)) throw new Error(`${path} does not exist`);
  return path;
}

/** samples/bookinfo/networking: the walk-through's Istio config, one scenario a file. */
export const bookinfoNetworkingDir = (): string => samplesPath("bookinfo", "networking");

/** samples/bookinfo/platform/kube/bookinfo.yaml: the Services, ServiceAccounts and Deployments. */
export const bookinfoPlatformFile = (): string =>
  samplesPath("bookinfo", "platform", "kube", "bookinfo.yaml");

/** The repository's root: the nearest folder above the working directory with pnpm-workspace.yaml. */
export function repositoryRoot(from = process.cwd()): string {
  for (let dir = resolve(from); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "pnpm-workspace.yaml"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no pnpm-workspace.yaml above ${from}`);
  }
}
