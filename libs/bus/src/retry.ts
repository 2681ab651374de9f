// Riding out a JetStream leader change. While a replicated KV stream elects a
// new leader (a step-down, a node restart), requests to it time out, find no
// responder, or are answered 503 "JetStream system temporarily unavailable".
// Such an error says nothing about whether a write landed, so a write is
// retried only in a form that cannot apply twice: see TypedBucket's writes
// (the same Nats-Msg-Id on every attempt, conditional on the revision read).
import { setTimeout as sleep } from "node:timers/promises";

/** How long and how often a bus operation is retried across a leader change. */
export interface RetryPolicy {
  /** The total time an operation may take, retries included, before it fails. */
  readonly deadlineMs: number;
  /** How long one attempt waits for its answer. */
  readonly attemptTimeoutMs: number;
  /** The pause after the first failed attempt; it doubles up to maxBackoffMs. */
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
}

/**
 * The default: a NATS stream leader election takes a few seconds (its Raft
 * election timeout), so 20 s covers a step-down or a node restart, and stays
 * under the 2-minute duplicate window in which JetStream recognises a
 * retried Nats-Msg-Id. One attempt waits 2 s, the kv client's own timeout.
 */
export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  deadlineMs: 20_000,
  attemptTimeoutMs: 2_000,
  initialBackoffMs: 50,
  maxBackoffMs: 1_000,
};

/** Thrown when an operation still failed transiently when its deadline passed; `cause` is the last error. */
export class BusUnavailableError extends Error {
  constructor(
    readonly operation: string,
    readonly attempts: number,
    cause: unknown,
  ) {
    super(
      `${operation} failed after ${attempts} attempts: NATS JetStream stayed unavailable (${(cause as Error)?.message ?? cause})`,
      { cause },
    );
    this.name = "BusUnavailableError";
  }
}

/**
 * True for the errors of a JetStream that is briefly without a leader or a
 * connection: the request timed out, nobody answered, or the server said
 * 503. Anything else (a wrong last sequence, a closed connection, a bad
 * request) is an answer and is not retried.
 */
export function isTransient(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  switch (error.name) {
    case "TimeoutError":
    case "NoResponders":
    // The jetstream client's name for "no responders" on a publish.
    case "JetStreamNotEnabled":
      return true;
    case "RequestError":
      return (error as Error & { isNoResponders?: () => boolean }).isNoResponders?.() === true;
  }
  const status = (error as Error & { status?: unknown; code?: unknown }).status ?? undefined;
  const code = (error as Error & { code?: unknown }).code;
  // JetStreamApiError carries the HTTP-like status; JetStreamStatusError its code.
  if (status === 503 || (error.name === "JetStreamStatusError" && (code === 503 || code === "503")))
    return true;
  return /temporarily unavailable|no responders|stream is offline|no leader/i.test(error.message);
}

/**
 * Runs attempt until it succeeds, throws a non-transient error, or the
 * deadline passes (BusUnavailableError). attempt receives its own timeout,
 * cut short so that it ends by the deadline. alsoTransient widens
 * isTransient for one operation.
 */
export async function retryTransient<R>(
  operation: string,
  policy: RetryPolicy,
  attempt: (timeoutMs: number, attemptNumber: number) => Promise<R>,
  onRetry?: (error: unknown, attemptNumber: number) => void,
  alsoTransient?: (error: unknown) => boolean,
): Promise<R> {
  const deadline = Date.now() + policy.deadlineMs;
  let backoff = policy.initialBackoffMs;
  for (let attemptNumber = 1; ; attemptNumber++) {
    const remaining = deadline - Date.now();
    try {
      return await attempt(Math.max(1, Math.min(policy.attemptTimeoutMs, remaining)), attemptNumber);
    } catch (error) {
      if (!isTransient(error) && !alsoTransient?.(error)) throw error;
      if (Date.now() + backoff >= deadline) throw new BusUnavailableError(operation, attemptNumber, error);
      onRetry?.(error, attemptNumber);
    }
    await sleep(backoff);
    backoff = Math.min(backoff * 2, policy.maxBackoffMs);
  }
}
