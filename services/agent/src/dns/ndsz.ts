import { isIP } from "node:net";
import { JsonAnswer, type JsonRoute } from "@sextant/observability";
import { NameTable } from "@sextant/proto/gen/istio/networking/nds/v1/nds";
import type { DnsProxy } from "./dns-proxy.js";

/** istio-agent's debug path for the DNS proxy's table, on its status port. */
export const NDSZ_PATH = "/debug/ndsz";

/** A loopback peer (127.0.0.0/8, ::1, or IPv4 loopback mapped into IPv6). */
function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const ip = address.replace(/^::ffff:/, "");
  return ip === "::1" || (isIP(ip) === 4 && ip.startsWith("127."));
}

/**
 * `/debug/ndsz` as istio-agent serves it: the name table in use, in proto
 * JSON, each host with the other names it answers to (`altHosts`); 404 and
 * `{}` before the first table. Only local callers are answered: the table
 * lists every service the workload can see.
 */
export function ndszRoute(proxy: () => DnsProxy | undefined): JsonRoute {
  return (_query, request) => {
    if (!isLoopback(request.socket.remoteAddress))
      return new JsonAnswer(403, { error: "Only requests from localhost are allowed" });
    const table = proxy()?.table;
    if (!table) return new JsonAnswer(404, {});
    return NameTable.toJSON(table.debugView);
  };
}
