import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { createSecureContext } from "node:tls";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";

/** What the HTTPS runner serves and from which files. */
export interface HttpsRunnerOptions {
  port: number;
  host?: string;
  certFile: string;
  keyFile: string;
  /** How often the files are re-read; a changed pair is swapped in without a restart. */
  reloadIntervalMs: number;
  handler: () => Parameters<typeof createServer>[1];
  logger: Logger;
  readiness: ReadinessGate;
}

const READY = "webhook-https";

/**
 * Serves the admission app over HTTPS with a certificate from mounted files,
 * reloaded when they change (a rotated Secret, or the CA's renewal): polling
 * rather than fs.watch, since Kubernetes swaps a symlink that watchers miss.
 */
export class HttpsServerRunner implements Runner {
  readonly name = "webhook-https";
  #server: Server | undefined;
  #timer: NodeJS.Timeout | undefined;
  #loaded = "";

  constructor(private readonly options: HttpsRunnerOptions) {}

  /** The bound port (useful when 0 was asked for). */
  get port(): number {
    return (this.#server?.address() as AddressInfo | null)?.port ?? 0;
  }

  async start(): Promise<void> {
    const { options } = this;
    options.readiness.require(READY);
    const { cert, key } = await this.#read();
    this.#loaded = cert + key;
    const server = createServer({ cert, key }, options.handler());
    // The API server gives up after 10 s; a stuck connection should not outlive that by much.
    server.requestTimeout = 10_000;
    server.headersTimeout = 10_000;
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port, options.host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    server.on("error", (err) => options.logger.error({ err }, "https server error"));
    this.#timer = setInterval(() => void this.reload(), options.reloadIntervalMs);
    this.#timer.unref();
    options.readiness.done(READY);
    options.logger.info(
      { port: this.port, cert: options.certFile },
      "serving /inject and /validate over HTTPS",
    );
  }

  /** Re-reads the files and swaps the certificate if they changed and form a valid pair. */
  async reload(): Promise<boolean> {
    try {
      const { cert, key } = await this.#read();
      if (cert + key === this.#loaded || !this.#server) return false;
      // A half-written rotation fails here and is retried next tick, keeping the old pair.
      createSecureContext({ cert, key });
      this.#server.setSecureContext({ cert, key });
      this.#loaded = cert + key;
      this.options.logger.info({ cert: this.options.certFile }, "serving certificate reloaded");
      return true;
    } catch (err) {
      this.options.logger.warn({ err }, "serving certificate not reloaded; keeping the current one");
      return false;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  async #read(): Promise<{ cert: string; key: string }> {
    const [cert, key] = await Promise.all([
      readFile(this.options.certFile, "utf8"),
      readFile(this.options.keyFile, "utf8"),
    ]);
    return { cert, key };
  }
}
