// The demo's gateway view, run by `npm run demo` as its own process after
// the Bookinfo samples (bookinfo-gateway.yaml among them) are applied. It
// connects to push as Istio's ingress gateway would, a router node labelled
// istio=ingressgateway, over ADS: it asks for the router's listeners, then
// for the route configurations they name, ACKing each answer. Then it prints
// what push holds for that node, from push's /debug/config_dump, as a user
// would read it, including the effect of the extension samples (a
// Telemetry's access log, an EnvoyFilter's response header). No Envoy runs
// here, so this stream stands in for its ADS client; the resources are the
// ones an Envoy gateway would receive.
//
//   node gateway-view.js <push-xds-address> <push-debug-url>
//
// PUSH_TOKEN_FILE names a file holding a bearer token allowed push's
// `debug` verb (the demo's admin token).
import { readFileSync } from "node:fs";
import { credentials } from "@grpc/grpc-js";
import {
  AggregatedDiscoveryServiceClient,
  DiscoveryRequest,
  type DiscoveryResponse,
  TypeUrl,
} from "@sextant/proto/envoy";

const [xdsAddress = "", debugUrl = ""] = process.argv.slice(2);
const NODE_ID = "router~127.0.0.200~istio-ingressgateway-0.istio-system~istio-system.svc.cluster.local";
const node = {
  id: NODE_ID,
  metadata: {
    NAMESPACE: "istio-system",
    LABELS: { istio: "ingressgateway", app: "istio-ingressgateway" },
    INSTANCE_IPS: "127.0.0.200",
  },
};
const ANSWER_LIMIT_MS = 10_000;
const tty = process.stdout.isTTY;
const bold = (text: string) => (tty ? `\x1b[1m${text}\x1b[0m` : text);

type Json = Record<string, unknown>;

/** One ADS stream; `ask` subscribes to a type and resolves with push's first answer for it, ACKed. */
function openStream() {
  const client = new AggregatedDiscoveryServiceClient(xdsAddress, credentials.createInsecure());
  const stream = client.streamAggregatedResources();
  const waiting = new Map<string, (response: DiscoveryResponse) => void>();
  // A state-of-the-world request replaces the subscription: an ACK repeats the names.
  const subscribed = new Map<string, string[]>();
  stream.on("data", (response: DiscoveryResponse) => {
    stream.write(
      DiscoveryRequest.fromPartial({
        typeUrl: response.typeUrl,
        versionInfo: response.versionInfo,
        responseNonce: response.nonce,
        resourceNames: subscribed.get(response.typeUrl) ?? [],
      }),
    );
    waiting.get(response.typeUrl)?.(response);
    waiting.delete(response.typeUrl);
  });
  stream.on("error", () => {});
  let first = true;
  return {
    ask(typeUrl: string, resourceNames: string[]): Promise<DiscoveryResponse> {
      const answer = new Promise<DiscoveryResponse>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`push sent no ${typeUrl} within ${ANSWER_LIMIT_MS} ms`)),
          ANSWER_LIMIT_MS,
        );
        waiting.set(typeUrl, (response) => {
          clearTimeout(timer);
          resolve(response);
        });
      });
      subscribed.set(typeUrl, resourceNames);
      stream.write(DiscoveryRequest.fromPartial({ ...(first ? { node } : {}), typeUrl, resourceNames }));
      first = false;
      return answer;
    },
    close() {
      stream.end();
      client.close();
    },
  };
}

async function configDump(): Promise<Array<{ typeUrl: string; resources: Json[] }>> {
  const token = process.env.PUSH_TOKEN_FILE ? readFileSync(process.env.PUSH_TOKEN_FILE, "utf8").trim() : "";
  const response = await fetch(`${debugUrl}/debug/config_dump?proxyID=${encodeURIComponent(NODE_ID)}`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  if (!response.ok)
    throw new Error(`push's config_dump answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { configs: Array<{ typeUrl: string; resources: Json[] }> }).configs;
}

/** Every value of `key` anywhere inside `value`. */
function valuesOf(value: unknown, key: string): unknown[] {
  if (Array.isArray(value)) return value.flatMap((item) => valuesOf(item, key));
  if (value === null || typeof value !== "object") return [];
  return Object.entries(value as Json).flatMap(([k, inner]) => [
    ...(k === key ? [inner] : []),
    ...valuesOf(inner, key),
  ]);
}

function describeChain(chain: Json): string {
  const match = (chain.filterChainMatch ?? {}) as Json;
  const sni = (match.serverNames as string[] | undefined)?.join(",");
  const secrets = valuesOf(chain.transportSocket, "name").filter(
    (name): name is string => typeof name === "string" && name !== "envoy.transport_sockets.tls",
  );
  const routes = valuesOf(chain.filters, "routeConfigName");
  const clusters = valuesOf(chain.filters, "cluster");
  const logs = accessLogPaths(chain.filters);
  return [
    sni ? `SNI ${sni}` : "any SNI",
    secrets.length > 0 ? `TLS (${secrets.join(", ")})` : "plaintext",
    routes.length > 0 ? `→ HTTP routes ${routes.join(", ")}` : `→ TCP ${clusters.join(", ") || "(no route)"}`,
    logs.length > 0 ? `access log ${logs.join(", ")}` : "no access log",
  ].join("  ");
}

/** Where the file access loggers inside `value` write (a Telemetry's accessLogging puts them on HCMs and TCP proxies). */
function accessLogPaths(value: unknown): string[] {
  const loggers = (valuesOf(value, "accessLog") as unknown[]).flat() as Json[];
  return [
    ...new Set(loggers.map((logger) => (logger.typedConfig as Json | undefined)?.path as string)),
  ].filter(Boolean);
}

/** The response headers a route configuration adds (an EnvoyFilter's MERGE shows here). */
function addedHeaders(config: Json): string[] {
  const options = (config.responseHeadersToAdd as Json[] | undefined) ?? [];
  return options.map((option) => {
    const header = (option.header ?? {}) as Json;
    return `${header.key}: ${header.value}`;
  });
}

function describeRoute(route: Json): string {
  const match = (route.match ?? {}) as Json;
  const path =
    match.prefix ?? match.path ?? (match.safeRegex as Json | undefined)?.regex ?? match.pathSeparatedPrefix;
  const action = (route.route ?? {}) as Json;
  const weighted = (action.weightedClusters as Json | undefined)?.clusters as Json[] | undefined;
  const to =
    action.cluster ??
    weighted?.map((c) => `${c.name} ${c.weight}`).join(" + ") ??
    (route.redirect ? "redirect" : route.directResponse ? "direct response" : "?");
  return `${String(path ?? "*").padEnd(16)} → ${to}`;
}

const stream = openStream();
try {
  const listeners = await stream.ask(TypeUrl.Listener, []);
  const dumpedListeners =
    (await configDump()).find((config) => config.typeUrl === TypeUrl.Listener)?.resources ?? [];
  const routeNames = [...new Set(valuesOf(dumpedListeners, "routeConfigName") as string[])].sort();
  if (routeNames.length > 0) await stream.ask(TypeUrl.RouteConfiguration, routeNames);
  const dump = await configDump();
  const routes = dump.find((config) => config.typeUrl === TypeUrl.RouteConfiguration)?.resources ?? [];

  console.log(
    `\n${bold("Ingress gateway")} (a router labelled istio=ingressgateway on push's ADS; push's config_dump for ${NODE_ID}): ${listeners.resources.length} listeners, ${routes.length} route configs`,
  );
  for (const listener of dumpedListeners) {
    const address = ((listener.address as Json | undefined)?.socketAddress ?? {}) as Json;
    console.log(`  listener ${listener.name} (${address.address}:${address.portValue})`);
    for (const chain of (listener.filterChains as Json[] | undefined) ?? [])
      console.log(`    ${describeChain(chain)}`);
  }
  for (const config of routes) {
    const headers = addedHeaders(config);
    console.log(
      `  routes ${config.name}${headers.length > 0 ? `  adds response header ${headers.join(", ")}` : ""}`,
    );
    for (const host of (config.virtualHosts as Json[] | undefined) ?? []) {
      console.log(`    ${(host.domains as string[]).join(", ")}`);
      for (const route of (host.routes as Json[] | undefined) ?? [])
        console.log(`      ${describeRoute(route)}`);
    }
  }
  if (dumpedListeners.length === 0) {
    console.log("  (no listener: no Gateway selects istio=ingressgateway)");
    process.exitCode = 1;
  }
  // The demo applied samples/extensions: the mesh-default Telemetry (access logs on) and an EnvoyFilter
  // adding a response header to the gateway's port-8080 routes. Both must show in what push serves.
  const logged = accessLogPaths(dumpedListeners.map((listener) => listener.filterChains));
  const patched = routes.filter((config) => addedHeaders(config).length > 0).map((config) => config.name);
  console.log(
    `  Telemetry istio-system/mesh-default: ${logged.length > 0 ? `access log to ${logged.join(", ")} on the gateway's connection managers` : "NO access log"}`,
  );
  console.log(
    `  EnvoyFilter istio-system/gateway-response-header: ${patched.length > 0 ? `merged into route config ${patched.join(", ")}` : "NOT applied"}`,
  );
  if (logged.length === 0 || patched.length === 0) process.exitCode = 1;
} catch (error) {
  console.error(`gateway view failed: ${(error as Error).message}`);
  process.exitCode = 1;
} finally {
  stream.close();
}
