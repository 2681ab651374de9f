import { sameRoots } from "./roots.js";

/** Where a workload learns the mesh's trust bundle. */
export interface TrustBundleSource {
  /** Resolves once the first bundle arrived (and was given to onBundle); keeps calling onBundle on every change. rootsPem: active root first. */
  start(onBundle: (rootsPem: string[]) => void): Promise<void>;
  close(): void;
}

/**
 * What the trust bundle sources share: onBundle hears only real changes (a
 * reconnect that replays the same bundle is not one), and start() settles
 * with the first bundle, or fails if the source closes before it.
 */
export class RootsRelay {
  #latest: string[] | undefined;
  #settled = false;
  #resolve!: () => void;
  #reject!: (error: Error) => void;
  /** start()'s promise. */
  readonly first = new Promise<void>((resolve, reject) => {
    this.#resolve = resolve;
    this.#reject = reject;
  });

  constructor(private readonly onBundle: (rootsPem: string[]) => void) {
    // A close() may fail `first` before start() returns it (while it opens its
    // watch); the caller still sees the rejection, but it must not count as unhandled.
    this.first.catch(() => {});
  }

  /** The roots last handed on, if any. */
  get latest(): readonly string[] | undefined {
    return this.#latest;
  }

  /** True once start() has settled: later waits need not keep the process alive. */
  get settled(): boolean {
    return this.#settled;
  }

  /** Hands roots to onBundle unless they are the ones it has. */
  offer(rootsPem: string[]): void {
    if (this.#latest && sameRoots(this.#latest, rootsPem)) return;
    this.#latest = rootsPem;
    this.onBundle(rootsPem);
    this.#settled = true;
    this.#resolve();
  }

  /** Fails start() if no bundle has arrived yet. */
  fail(error: Error): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#reject(error);
  }
}
