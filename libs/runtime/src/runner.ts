import type { Logger } from "@sextant/observability";

/**
 * A Runner is one long-lived part of a service (a watch, a server, a
 * connection). A service's main lists its runners; they start in order and
 * close in reverse, so a runner may rely on the ones listed before it.
 */
export interface Runner {
  readonly name: string;
  start(): Promise<void>;
  close(): Promise<void>;
}

/** A set of runners started together and closed in reverse order. */
export class RunnerGroup {
  readonly #started: Runner[] = [];
  #closing: string | undefined;

  constructor(private readonly logger: Logger) {}

  /** Starts the runners one after the other; if one fails, closes those already started. */
  async start(runners: Runner[]): Promise<void> {
    for (const runner of runners) {
      try {
        await runner.start();
      } catch (error) {
        this.logger.error({ runner: runner.name, err: error }, "runner failed to start");
        await this.close();
        throw error;
      }
      this.#started.push(runner);
      this.logger.debug({ runner: runner.name }, "runner started");
    }
  }

  /** Closes the started runners in reverse order; a failing close does not stop the others. */
  async close(): Promise<void> {
    while (this.#started.length > 0) {
      const runner = this.#started.pop()!;
      this.#closing = runner.name;
      const started = Date.now();
      try {
        await runner.close();
      } catch (error) {
        this.logger.warn({ runner: runner.name, err: error }, "runner failed to close");
      }
      this.logger.debug({ runner: runner.name, ms: Date.now() - started }, "runner closed");
    }
    this.#closing = undefined;
  }

  /** The runner being closed right now, for a message when shutdown hangs. */
  get closing(): string | undefined {
    return this.#closing;
  }
}
