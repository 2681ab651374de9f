/**
 * One fuzz target: production code that takes untrusted bytes. Its property:
 * every input is either accepted or refused with one of the target's defined,
 * named errors; any other exception, and any input that takes longer than the
 * per-input time limit, is a failure.
 */
export interface FuzzTarget {
  /** Tokens of the input's language, spliced into inputs (libFuzzer's -dict). */
  readonly tokens: readonly string[];
  /** Builds what every input shares (a server, a config); once per worker. */
  setup?(): Promise<void>;
  /** Feeds one input to the production code. */
  run(input: Uint8Array): void | Promise<void>;
  /** True for an error the code under test defines as a refusal of bad input. */
  refusal(error: unknown): boolean;
}

/** The targets, by name (each a directory of fuzz/corpus/), loaded lazily: a worker imports only its own. */
export const TARGETS = {
  "ingest-documents": () => import("./targets/ingest-documents.js"),
  "ca-csr": () => import("./targets/ca-csr.js"),
  "webhook-admission": () => import("./targets/webhook-admission.js"),
  settings: () => import("./targets/settings.js"),
  "push-ads": () => import("./targets/push-ads.js"),
  "agent-xds-proxy": () => import("./targets/agent-xds-proxy.js"),
  "agent-sds": () => import("./targets/agent-sds.js"),
} satisfies Record<string, () => Promise<{ target: FuzzTarget }>>;

export type TargetName = keyof typeof TARGETS;

export const TARGET_NAMES = Object.keys(TARGETS) as TargetName[];
