import type { IncomingMessage, ServerResponse } from "node:http";
import { isIPv4 } from "node:net";

/** The status port's lifecycle paths (istio-agent's): start Envoy's drain, or stop the agent. */
export const DRAIN_PATH = "/drain";
export const QUIT_PATH = "/quitquitquit";

/** Whether the request comes from this pod's loopback: only the pod itself may stop its proxy. */
function fromLocalhost(request: IncomingMessage): boolean {
  const address = request.socket.remoteAddress ?? "";
  const v4 = address.startsWith("::ffff:") ? address.slice("::ffff:".length) : address;
  return address === "::1" || (isIPv4(v4) && v4.startsWith("127."));
}

/**
 * POST /drain and POST /quitquitquit as istio-agent answers them: from
 * localhost only (403 otherwise), POST only (405 otherwise), then 200 "OK"
 * and the action, which runs after the answer is sent.
 */
export function handleLifecycle(
  request: IncomingMessage,
  response: ServerResponse,
  action: () => Promise<void>,
  onError: (error: unknown) => void,
): void {
  if (!fromLocalhost(request)) {
    response
      .writeHead(403, { "content-type": "text/plain" })
      .end("Only requests from localhost are allowed\n");
    return;
  }
  if (request.method !== "POST") {
    response.writeHead(405, { "content-type": "text/plain" }).end("Method Not Allowed\n");
    return;
  }
  response.writeHead(200, { "content-type": "text/plain" }).end("OK");
  action().catch(onError);
}
