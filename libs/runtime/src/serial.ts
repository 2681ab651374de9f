/**
 * SerialTasks runs tasks one at a time, in the order they were asked for
 * (a rescan, an analysis pass, a status flush): a task never overlaps the
 * previous one, and a failing task is reported without stopping the next.
 */
export class SerialTasks {
  #tail: Promise<void> = Promise.resolve();

  constructor(private readonly onError: (error: unknown) => void) {}

  /** Queues task after the ones already queued; resolves when it has run. */
  run(task: () => Promise<void> | void): Promise<void> {
    this.#tail = this.#tail.then(task).catch(this.onError);
    return this.#tail;
  }

  /** Resolves when every task queued so far has run. */
  idle(): Promise<void> {
    return this.#tail;
  }
}
