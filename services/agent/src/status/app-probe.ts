import {
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { request as httpsRequest } from "node:https";
import { connect, isIPv6 } from "node:net";
import type { Logger } from "@sextant/observability";
import type { AppProber, AppProbers } from "./app-probers.js";
import { grpcHealthServing } from "./grpc-health.js";

/** Where and how the agent probes the application. */
export interface AppProbeOptions {
  probers: AppProbers;
  /** The pod's IP (Kubernetes probes it there), or `localhost` with Istio's legacy setting. */
  destination: string;
  /** The status port, whose number in a Host header becomes the probed port's. */
  statusPort: number;
  logger: Logger;
}

/** Kubernetes' default probe timeout, for a prober without one. */
const DEFAULT_TIMEOUT_SECONDS = 1;
/** Redirects on the application's own host that an HTTP probe follows (kubelet's limit). */
const MAX_REDIRECTS = 10;
/** At most this much of the application's answer is passed back (as Istio). */
const MAX_BODY_BYTES = 10 * 1024;
/**
 * The source address of the agent's probes, as istio-agent's: Istio's
 * iptables rules let 127.0.0.6 (Envoy's inbound passthrough source) reach
 * the application directly, so the probe does not pass through Envoy.
 */
const PROBE_SOURCE = { v4: "127.0.0.6", v6: "::6" };
/** Hop-by-hop headers of the kubelet's request, which are not the probe's. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "upgrade",
  "host",
  "content-length",
]);

/** Whether path is one of the application probe paths the status port serves. */
export const isAppProbePath = (path: string) =>
  path.startsWith("/app-health/") || path.startsWith("/app-lifecycle/");

/**
 * Answers a kubelet probe on `/app-health/<container>/<probe>` by performing
 * the container's original probe (ISTIO_KUBE_APP_PROBERS) against the
 * application, as istio-agent does: an HTTP probe's status (a redirect
 * counts as 200) and the start of its body, 200 for a TCP connection or a
 * SERVING gRPC health check, 500 when the application cannot be reached.
 */
export async function handleAppProbe(
  options: AppProbeOptions,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const path = new URL(request.url ?? "/", "http://agent").pathname;
  const prober = options.probers.get(path);
  if (!prober) {
    response
      .writeHead(400, { "content-type": "text/plain" })
      .end(`app prober config does not exists for ${path}`);
    return;
  }
  const timeoutMs = (prober.timeoutSeconds || DEFAULT_TIMEOUT_SECONDS) * 1000;
  const source = isIPv6(options.destination) ? PROBE_SOURCE.v6 : PROBE_SOURCE.v4;
  try {
    if (prober.httpGet) {
      const answer = await probeHttp(options, prober.httpGet, request.headers, source, timeoutMs);
      response.writeHead(answer.status >= 300 && answer.status < 400 ? 200 : answer.status).end(answer.body);
    } else if (prober.tcpSocket) {
      await probeTcp(options.destination, prober.tcpSocket.port, source, timeoutMs);
      response.writeHead(200).end();
    } else if (prober.grpc) {
      const address = isIPv6(options.destination) ? `[${options.destination}]` : options.destination;
      const serving = await grpcHealthServing(
        `${address}:${prober.grpc.port}`,
        prober.grpc.service ?? "",
        timeoutMs,
        request.headers["user-agent"],
      );
      if (!serving) options.logger.info({ path }, "application probe: gRPC health is not SERVING");
      response.writeHead(serving ? 200 : 500).end();
    }
  } catch (error) {
    options.logger.info({ path, err: error }, "application probe failed");
    if (!response.headersSent) response.writeHead(500).end();
  }
}

async function probeHttp(
  options: AppProbeOptions,
  action: NonNullable<AppProber["httpGet"]>,
  incoming: IncomingHttpHeaders,
  localAddress: string,
  timeoutMs: number,
): Promise<{ status: number; body: Buffer }> {
  const headers: Record<string, string | string[]> = {};
  for (const header of action.httpHeaders) headers[header.name] = header.value;
  for (const [name, value] of Object.entries(incoming))
    if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  // The kubelet's Host names the status port; the application expects its own.
  let host = incoming.host;
  const hostPort = host ? /^(.*):(\d+)$/.exec(host) : null;
  if (hostPort && Number(hostPort[2]) === options.statusPort) host = `${hostPort[1]}:${action.port}`;
  const configuredHost = action.httpHeaders.find((header) => header.name.toLowerCase() === "host");
  headers.host = configuredHost?.value ?? host ?? `${options.destination}:${action.port}`;
  const host6 = isIPv6(options.destination) ? `[${options.destination}]` : options.destination;
  const path = action.path.startsWith("/") ? action.path : `/${action.path}`;
  const first = new URL(`${action.scheme.toLowerCase()}://${host6}:${action.port}${path}`);
  // kubelet's rule, which istio-agent copies: follow redirects on the same host, up to 10; a redirect
  // elsewhere is the answer (and counts as a success).
  let url = first;
  for (let redirects = 0; ; redirects++) {
    const answer = await getOnce(url, headers, localAddress, timeoutMs);
    const location = answer.location;
    if (answer.status < 300 || answer.status >= 400 || !location) return answer;
    const next = new URL(location, url);
    if (next.hostname !== first.hostname) return answer;
    if (redirects >= MAX_REDIRECTS) throw new Error(`stopped after ${MAX_REDIRECTS} redirects`);
    url = next;
  }
}

/** One GET, with at most MAX_BODY_BYTES of the answer's body kept. */
function getOnce(
  url: URL,
  headers: Record<string, string | string[]>,
  localAddress: string,
  timeoutMs: number,
): Promise<{ status: number; body: Buffer; location: string | undefined }> {
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const outgoing = send(
      {
        host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
        port: url.port,
        path: `${url.pathname}${url.search}`,
        method: "GET",
        headers,
        localAddress,
        agent: false,
        timeout: timeoutMs,
        // Kubernetes does not verify an HTTPS probe's certificate either.
        rejectUnauthorized: false,
      },
      (answer) => {
        const chunks: Buffer[] = [];
        let length = 0;
        answer.on("data", (chunk: Buffer) => {
          if (length < MAX_BODY_BYTES) chunks.push(chunk.subarray(0, MAX_BODY_BYTES - length));
          length += chunk.length;
        });
        answer.on("end", () =>
          resolve({
            status: answer.statusCode ?? 500,
            body: Buffer.concat(chunks),
            location: answer.headers.location,
          }),
        );
        answer.on("error", reject);
      },
    );
    outgoing.on("timeout", () => outgoing.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    outgoing.on("error", reject);
    outgoing.end();
  });
}

function probeTcp(host: string, port: number, localAddress: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, localAddress, timeout: timeoutMs });
    socket.once("connect", () => {
      socket.destroy();
      resolve();
    });
    socket.once("timeout", () => socket.destroy(new Error(`no connection within ${timeoutMs} ms`)));
    socket.once("error", reject);
  });
}
