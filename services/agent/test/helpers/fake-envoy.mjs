#!/usr/bin/env node
// A TEST DOUBLE for Envoy, not Envoy: the agent's tests start it as
// ENVOY_BINARY. It reads the bootstrap given with -c, serves the admin
// endpoints the agent uses on the bootstrap's admin address, opens an ADS
// stream on the bootstrap's xds-grpc socket, and becomes LIVE (with one CDS
// and one LDS update counted) only once that stream has brought a response.
// Every step goes, one JSON line each, to the file FAKE_ENVOY_LOG names:
// its argv, each admin request, the first xDS response, signals, its exit.
// On SIGTERM it exits with FAKE_ENVOY_EXIT_CODE (default 0).
import { appendFileSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import grpc from "@grpc/grpc-js";

const argv = process.argv.slice(2);
const log = (event, fields = {}) => {
  if (process.env.FAKE_ENVOY_LOG)
    appendFileSync(process.env.FAKE_ENVOY_LOG, `${JSON.stringify({ event, pid: process.pid, ...fields })}\n`);
};
log("start", { argv });

const configIndex = argv.indexOf("-c");
if (configIndex < 0 || !argv[configIndex + 1]) {
  process.stderr.write("fake-envoy: no -c <bootstrap>\n");
  process.exit(1);
}
const bootstrap = JSON.parse(readFileSync(argv[configIndex + 1], "utf8"));
const admin = bootstrap.admin.address.socket_address;
const xdsCluster = bootstrap.static_resources.clusters.find((cluster) => cluster.name === "xds-grpc");
const xdsSocket = xdsCluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.pipe.path;

let live = false;

// DiscoveryRequest { node = 2 { id = 1 }, type_url = 4 }, by hand: the double needs no generated code.
function field(number, bytes) {
  const length = [];
  let rest = bytes.length;
  while (rest >= 0x80) {
    length.push((rest & 0x7f) | 0x80);
    rest >>>= 7;
  }
  length.push(rest);
  return Buffer.concat([Buffer.from([(number << 3) | 2, ...length]), bytes]);
}
const discoveryRequest = Buffer.concat([
  field(2, field(1, Buffer.from(bootstrap.node.id))),
  field(4, Buffer.from("type.googleapis.com/envoy.config.cluster.v3.Cluster")),
]);

function connectAds() {
  const client = new grpc.Client(`unix://${xdsSocket}`, grpc.credentials.createInsecure());
  const call = client.makeBidiStreamRequest(
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
    (message) => message,
    (message) => message,
  );
  call.on("data", () => {
    if (live) return;
    live = true;
    log("xds-response");
  });
  call.on("error", () => {
    client.close();
    if (!live) setTimeout(connectAds, 200);
  });
  call.write(discoveryRequest);
}
connectAds();

const server = createServer((request, response) => {
  log("request", { method: request.method, url: request.url });
  const url = new URL(request.url, "http://admin");
  const text = (status, body, type = "text/plain") =>
    response.writeHead(status, { "content-type": type }).end(body);
  if (request.method === "GET" && url.pathname === "/ready")
    return live ? text(200, "LIVE\n") : text(503, "PRE_INITIALIZING\n");
  if (request.method === "GET" && url.pathname === "/stats") {
    const updates = live ? 1 : 0;
    return text(
      200,
      `cluster_manager.cds.update_success: ${updates}\nlistener_manager.lds.update_success: ${updates}\n`,
    );
  }
  if (request.method === "GET" && url.pathname === "/stats/prometheus")
    return text(
      200,
      `# TYPE envoy_server_live gauge\nenvoy_server_live 1\n# TYPE envoy_fake_scrape gauge\nenvoy_fake_scrape{query="${url.search}"} 1\n`,
      "text/plain; version=0.0.4",
    );
  if (request.method === "POST" && url.pathname === "/drain_listeners") return text(200, "OK\n");
  if (request.method === "POST" && url.pathname === "/quitquitquit") {
    text(200, "OK\n");
    log("exit", { code: 0 });
    process.exit(0);
  }
  return text(404, "no such admin endpoint\n");
});
server.listen(admin.port_value, admin.address);

process.on("SIGTERM", () => {
  const code = Number(process.env.FAKE_ENVOY_EXIT_CODE ?? "0");
  log("signal", { signal: "SIGTERM" });
  log("exit", { code });
  process.exit(code);
});
