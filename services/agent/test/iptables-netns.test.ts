// `agent istio-iptables` for real: a "pod" network namespace joined to a
// "peer" namespace by a veth pair, the agent's rules applied inside the pod,
// listeners standing in for Envoy (15001, 15006) and the DNS proxy (15053).
// Traffic goes only to the addresses this suite gives the two namespaces.
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { onCleanup, trackChildProcess } from "@sextant/testing";

const packageDir = join(import.meta.dirname, "..");
const echo = join(import.meta.dirname, "helpers", "netns-echo.py");
const PYTHON = "/usr/bin/python3";

/** The one reason this suite cannot run here, or undefined when it can. */
function unavailable(): string | undefined {
  const missing = ["ip", "iptables-restore", "iptables-save", "setpriv"].filter((tool) => {
    try {
      execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" });
      return false;
    } catch {
      return true;
    }
  });
  if (process.getuid?.() !== 0 || missing.length > 0 || !existsSync(PYTHON))
    return "agent iptables netns suite: needs root, iproute2, iptables, setpriv and /usr/bin/python3";
  return undefined;
}

const skip = unavailable();

const id = `${process.pid.toString(36)}${randomBytes(2).toString("hex")}`;
const POD = `sxpod-${id}`;
const PEER = `sxpeer-${id}`;
const POD_IP = "10.200.0.1";
const PEER_IP = "10.200.0.2";
/** A second peer address, in the range the pod excludes with -x. */
const PEER_EXCLUDED_IP = "10.200.1.2";
const APP_UID = "1000";
const PROXY_UID = "1337";

function sh(command: string, args: string[]): string {
  return execFileSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

const inNetns = (netns: string, command: string, args: string[]) =>
  sh("ip", ["netns", "exec", netns, command, ...args]);

/** Creates a network namespace with lo up; removed when the file ends, even after a failure. */
function createNetns(name: string): void {
  sh("ip", ["netns", "add", name]);
  onCleanup(`netns ${name}`, () => sh("ip", ["netns", "del", name]));
  inNetns(name, "ip", ["link", "set", "lo", "up"]);
}

/** Starts netns-echo.py's listeners in a namespace; resolves once they are bound. */
function serve(netns: string, name: string, sockets: string[]): Promise<ChildProcess> {
  const child = spawn("ip", ["netns", "exec", netns, PYTHON, echo, "serve", name, ...sockets], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  trackChildProcess(child);
  onCleanup(`listeners ${name}`, () => child.kill("SIGKILL"));
  return new Promise((resolve, reject) => {
    let stderr = "";
    child.stderr!.on("data", (chunk) => {
      stderr += chunk;
    });
    child.stdout!.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("ready")) resolve(child);
    });
    child.on("exit", (code) => reject(new Error(`listeners ${name} exited (${code}): ${stderr}`)));
  });
}

interface Answer {
  at: string;
  original: string | null;
  /** The client's address as the listener saw it (TPROXY listeners only). */
  client?: string;
}

/** Connects (or sends a datagram) from a namespace as a user; returns which listener answered. */
function reach(
  netns: string,
  uid: string | undefined,
  protocol: "tcp" | "udp",
  host: string,
  port: number,
): Answer {
  const asUser = uid ? ["setpriv", `--reuid=${uid}`, `--regid=${uid}`, "--clear-groups"] : [];
  const [command, ...args] = [...asUser, PYTHON, echo, protocol, host, String(port)];
  return JSON.parse(inNetns(netns, command!, args)) as Answer;
}

/** Runs `agent istio-iptables <args>` inside a namespace; returns its exit code and stderr. */
function agentIptables(netns: string, args: string[]): { code: number | null; stderr: string } {
  const result = spawnSync(
    "ip",
    [
      "netns",
      "exec",
      netns,
      process.execPath,
      "--conditions=@sextant/source",
      "--import",
      "tsx",
      "src/main.ts",
      "istio-iptables",
      ...args,
    ],
    { cwd: packageDir, encoding: "utf8", env: { ...process.env, OTEL_SDK_DISABLED: "true" } },
  );
  return { code: result.status, stderr: result.stderr };
}

/** iptables-save of a namespace without its comments (which carry timestamps). */
const saved = (netns: string) =>
  inNetns(netns, "iptables-save", [])
    .split("\n")
    .filter((line) => !line.startsWith("#"))
    .join("\n");

/** The injected init container's flags (webhook template), plus this suite's exclusions and DNS capture. */
const POD_FLAGS = [
  "-p",
  "15001",
  "-z",
  "15006",
  "-u",
  PROXY_UID,
  "-m",
  "REDIRECT",
  "-i",
  "*",
  "-x",
  `${PEER_EXCLUDED_IP.replace(/\.2$/, ".0")}/24`,
  "-b",
  "*",
  "-d",
  "15090,15021,15020",
  "-o",
  "9000",
  "--redirect-dns",
  "--log_output_level=default:info",
];

describe("agent iptables in network namespaces", { skip }, () => {
  before(async () => {
    createNetns(POD);
    createNetns(PEER);
    const podNic = `vp${id}`.slice(0, 15);
    const peerNic = `vq${id}`.slice(0, 15);
    sh("ip", ["link", "add", podNic, "netns", POD, "type", "veth", "peer", "name", peerNic, "netns", PEER]);
    inNetns(POD, "ip", ["addr", "add", `${POD_IP}/24`, "dev", podNic]);
    inNetns(POD, "ip", ["link", "set", podNic, "up"]);
    inNetns(POD, "ip", ["route", "add", "10.200.1.0/24", "dev", podNic]);
    inNetns(PEER, "ip", ["addr", "add", `${PEER_IP}/24`, "dev", peerNic]);
    inNetns(PEER, "ip", ["addr", "add", `${PEER_EXCLUDED_IP}/24`, "dev", peerNic]);
    inNetns(PEER, "ip", ["link", "set", peerNic, "up"]);

    // `ip netns exec` mounts /etc/netns/<name>/resolv.conf over /etc/resolv.conf:
    // the pod's nameserver is the peer, so DNS capture covers queries to it (Istio reads resolv.conf).
    const etc = `/etc/netns/${POD}`;
    mkdirSync(etc, { recursive: true });
    onCleanup(`${etc}`, () => rmSync(etc, { recursive: true, force: true }));
    writeFileSync(join(etc, "resolv.conf"), `nameserver ${PEER_IP}\n`);

    await serve(POD, "pod", ["tcp:15001", "tcp:15006", "tcp:15020", "tcp:15053", "udp:15053"]);
    await serve(PEER, "peer", ["tcp:8080", "tcp:9000", "tcp:53", "udp:53"]);

    const applied = agentIptables(POD, POD_FLAGS);
    assert.equal(applied.code, 0, applied.stderr);
  });

  test("(a) an app's connection (uid 1000) to the peer lands on 15001 with its original destination (SO_ORIGINAL_DST)", () => {
    assert.deepEqual(reach(POD, APP_UID, "tcp", PEER_IP, 8080), {
      at: "pod:15001",
      original: `${PEER_IP}:8080`,
    });
  });

  test("(b) the proxy's own connection (uid 1337, e.g. its xDS to 15012) goes out to the peer unredirected", () => {
    assert.deepEqual(reach(POD, PROXY_UID, "tcp", PEER_IP, 8080), { at: "peer:8080", original: null });
  });

  test("(c) an inbound connection from the peer to an app port lands on 15006 with the port it was sent to", () => {
    assert.deepEqual(reach(PEER, undefined, "tcp", POD_IP, 8080), {
      at: "pod:15006",
      original: `${POD_IP}:8080`,
    });
  });

  test("(d) excluded ports and CIDRs pass through: inbound 15020 (-d), outbound port 9000 (-o), outbound 10.200.1.0/24 (-x)", () => {
    assert.deepEqual(reach(PEER, undefined, "tcp", POD_IP, 15020), { at: "pod:15020", original: null });
    assert.deepEqual(reach(POD, APP_UID, "tcp", PEER_IP, 9000), { at: "peer:9000", original: null });
    assert.deepEqual(reach(POD, APP_UID, "tcp", PEER_EXCLUDED_IP, 8080), { at: "peer:8080", original: null });
  });

  test("(e) DNS to the resolv.conf nameserver (UDP and TCP 53) lands on 15053; the proxy's own queries reach the server", () => {
    assert.equal(reach(POD, APP_UID, "udp", PEER_IP, 53).at, "pod:15053");
    assert.equal(reach(POD, APP_UID, "tcp", PEER_IP, 53).at, "pod:15053");
    assert.equal(reach(POD, PROXY_UID, "udp", PEER_IP, 53).at, "peer:53");
  });

  test("TPROXY: an inbound connection lands on the transparent 15006 listener with its original destination and the client's own address", async () => {
    const netns = `sxtp-${id}`;
    createNetns(netns);
    const [podNic, peerNic] = [`vt${id}`.slice(0, 15), `vu${id}`.slice(0, 15)];
    sh("ip", ["link", "add", podNic, "netns", netns, "type", "veth", "peer", "name", peerNic, "netns", PEER]);
    inNetns(netns, "ip", ["addr", "add", "10.201.0.1/24", "dev", podNic]);
    inNetns(netns, "ip", ["link", "set", podNic, "up"]);
    inNetns(PEER, "ip", ["addr", "add", "10.201.0.2/24", "dev", peerNic]);
    inNetns(PEER, "ip", ["link", "set", peerNic, "up"]);
    await serve(netns, "tproxy-pod", ["tproxy:15006", "tcp:15001"]);

    const flags = [
      "-p",
      "15001",
      "-z",
      "15006",
      "-u",
      PROXY_UID,
      "-m",
      "TPROXY",
      "-i",
      "*",
      "-b",
      "*",
      "-d",
      "15020",
    ];
    const applied = agentIptables(netns, flags);
    assert.equal(applied.code, 0, applied.stderr);
    assert.deepEqual(reach(PEER, undefined, "tcp", "10.201.0.1", 8080), {
      at: "tproxy-pod:15006",
      original: "10.201.0.1:8080",
      client: "10.201.0.2",
    });
    // The policy route that delivers marked packets locally, added once however often the command runs.
    const again = agentIptables(netns, flags);
    assert.match(again.stderr, /IPv4 rules already in place, nothing changed/);
    assert.equal(inNetns(netns, "ip", ["-4", "rule", "show"]).match(/fwmark 0x539 lookup 133/g)?.length, 1);
    assert.match(inNetns(netns, "ip", ["-4", "route", "show", "table", "133"]), /local default dev lo/);
  });

  test("a second run with the same flags changes nothing; changed flags replace the rules; --cleanup-only removes them", () => {
    const netns = `sxidem-${id}`;
    createNetns(netns);
    // DNS capture of every server: the raw table and its conntrack zones are checked too.
    const flags = [...POD_FLAGS, "--capture-all-dns"];

    const first = agentIptables(netns, flags);
    assert.equal(first.code, 0, first.stderr);
    const afterFirst = saved(netns);
    assert.match(afterFirst, /-A OUTPUT -j ISTIO_OUTPUT/);
    assert.match(afterFirst, /-A ISTIO_OUTPUT .*--dport 9000 -j RETURN/);
    assert.match(afterFirst, /-A ISTIO_OUTPUT_DNS .*-j CT --zone 2/);

    const second = agentIptables(netns, flags);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stderr, /IPv4 rules already in place, nothing changed/);
    assert.equal(saved(netns), afterFirst);

    const changed = agentIptables(
      netns,
      flags.map((flag) => (flag === "9000" ? "9001" : flag)),
    );
    assert.equal(changed.code, 0, changed.stderr);
    assert.match(changed.stderr, /old ones removed, new ones applied/);
    const afterChange = saved(netns);
    assert.match(afterChange, /--dport 9001 -j RETURN/);
    assert.doesNotMatch(afterChange, /--dport 9000/);
    assert.equal(afterChange.match(/^-A OUTPUT -j ISTIO_OUTPUT$/gm)?.length, 1);

    const cleanup = agentIptables(netns, ["--cleanup-only"]);
    assert.equal(cleanup.code, 0, cleanup.stderr);
    const afterCleanup = saved(netns);
    assert.doesNotMatch(afterCleanup, /ISTIO_/);
    assert.doesNotMatch(afterCleanup, /^-A /m);
  });
});
