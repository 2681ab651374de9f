/**
 * Polls until check returns a truthy value, or fails after the deadline with
 * the message. Tests use it for convergence instead of timing assertions: the
 * deadline is generous, and only its expiry is a failure.
 */
export async function eventually<T>(
  check: () => T | Promise<T>,
  options: { timeoutMs?: number; intervalMs?: number; message?: string; signal?: AbortSignal } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  let lastError: unknown;
  for (;;) {
    if (options.signal?.aborted) throw new Error(`${options.message ?? "condition"}: gave up (aborted)`);
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const reason = lastError instanceof Error ? `: ${lastError.message}` : "";
      throw new Error(
        `${options.message ?? "condition not met"} within ${options.timeoutMs ?? 10_000} ms${reason}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 25));
  }
}
