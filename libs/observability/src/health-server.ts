import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";

/**
 * ReadinessGate collects the conditions a service waits for before it is
 * ready (an initial sync, a connection). `/ready` answers 200 only when every
 * registered condition has been marked done.
 */
export class ReadinessGate {
  readonly #pending = new Set<string>();

  /** Registers a condition that must be met before the service is ready. */
  require(condition: string): void {
    this.#pending.add(condition);
  }

  /** Marks a condition as met. */
  done(condition: string): void {
    this.#pending.delete(condition);
  }

  /** Marks a condition as unmet again (for example, a lost connection). */
  undo(condition: string): void {
    this.#pending.add(condition);
  }

  get ready(): boolean {
    return this.#pending.size === 0;
  }

  /** The conditions still pending, sorted. */
  get pending(): string[] {
    return [...this.#pending].sort();
  }
}

/** Options of {@link startHealthServer}. */
export interface HealthServerOptions {
  port: number;
  host?: string;
  registry: Registry;
  readiness: ReadinessGate;
  /** Extra GET routes (for example /debug/syncz), keyed by path; they answer JSON. */
  routes?: Record<string, JsonRoute>;
}

/**
 * A JSON route: given the query (and the request, for its headers), returns
 * the body (or a {@link JsonAnswer} for another status than 200).
 */
export type JsonRoute = (query: URLSearchParams, request: IncomingMessage) => unknown | Promise<unknown>;

/** A JSON answer with a status other than 200 (and headers, e.g. WWW-Authenticate), for routes. */
export class JsonAnswer {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {}
}

/** A handler for every request the health server does not answer itself. */
export type RequestHandler = (request: IncomingMessage, response: ServerResponse) => void;

/** A running health server. */
export interface HealthServer {
  readonly port: number;
  /**
   * Serves every other path with handler (a service's own API, as ingest
   * serves its config API on the same port as /metrics and /ready);
   * undefined removes it.
   */
  mount(handler: RequestHandler | undefined): void;
  /** Adds (or replaces) a JSON GET route, such as /debug/syncz. */
  route(path: string, handler: JsonRoute): void;
  close(): Promise<void>;
}

/**
 * Starts the per-service HTTP server: `/metrics` (Prometheus text), `/ready`
 * (200, or 503 with the pending conditions) and any extra JSON routes.
 */
export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  let mounted: RequestHandler | undefined;
  const routes: Record<string, JsonRoute> = { ...options.routes };
  const server: Server = createServer(async (request, response) => {
    const path = (request.url ?? "/").split("?")[0] ?? "/";
    const own = path === "/metrics" || path === "/ready" || Boolean(routes[path]);
    try {
      if (!own && mounted) {
        mounted(request, response);
      } else if (request.method !== "GET" && request.method !== "HEAD") {
        response.writeHead(405, { allow: "GET, HEAD" }).end();
      } else if (path === "/metrics") {
        const body = await options.registry.metrics();
        response.writeHead(200, { "content-type": options.registry.contentType }).end(body);
      } else if (path === "/ready") {
        const ready = options.readiness.ready;
        const body = JSON.stringify({ ready, pending: options.readiness.pending });
        response.writeHead(ready ? 200 : 503, { "content-type": "application/json" }).end(body);
      } else if (routes[path]) {
        const query = new URL(request.url ?? "/", "http://localhost").searchParams;
        const result = await routes[path](query, request);
        const answer = result instanceof JsonAnswer ? result : new JsonAnswer(200, result);
        response
          .writeHead(answer.status, { ...answer.headers, "content-type": "application/json" })
          .end(JSON.stringify(answer.body, null, 2));
      } else {
        response.writeHead(404, { "content-type": "text/plain" }).end(`no route ${path}\n`);
      }
    } catch (error) {
      response.writeHead(500, { "content-type": "text/plain" }).end(`${(error as Error).message}\n`);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host ?? "0.0.0.0", () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    mount: (handler) => {
      mounted = handler;
    },
    route: (path, handler) => {
      routes[path] = handler;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
