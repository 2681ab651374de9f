// The rules istio-iptables installs, built from its flags without touching the
// system: one ordered list per address family, rendered as iptables-restore
// input. The order and text follow Istio's (tools/istio-iptables/pkg/capture),
// so `iptables-save` of a Sextant pod reads like one of an Istio pod.
import { isIPv4, isIPv6 } from "node:net";
import { type CaptureConfig, IptablesUsageError, splitList } from "./flags.js";

/** Istio's chain names. */
export const CHAIN = {
  inbound: "ISTIO_INBOUND",
  inRedirect: "ISTIO_IN_REDIRECT",
  output: "ISTIO_OUTPUT",
  redirect: "ISTIO_REDIRECT",
  outputDns: "ISTIO_OUTPUT_DNS",
  divert: "ISTIO_DIVERT",
  tproxy: "ISTIO_TPROXY",
  drop: "ISTIO_DROP",
} as const;

/** Every chain Istio creates starts with this; cleanup and state checks rely on it. */
export const ISTIO_CHAIN_PREFIX = "ISTIO_";

/** The agent's DNS proxy port (Istio's IstioAgentDNSListenerPort). */
export const DNS_PROXY_PORT = "15053";

/** Set on the proxy's own loopback connections to the app in TPROXY mode, so they are not captured again. */
const OUTBOUND_MARK = "1338";

/** Source of Envoy's inbound connections to the app (127.0.0.6, ::6): never captured again. */
const INBOUND_PASSTHROUGH = { v4: "127.0.0.6/32", v6: "::6/128" };
const LOOPBACK = { v4: "127.0.0.1/32", v6: "::1/128" };

/** Chains and targets iptables itself defines: never created, never removed. */
const BUILT_IN = new Set([
  "INPUT",
  "OUTPUT",
  "FORWARD",
  "PREROUTING",
  "POSTROUTING",
  "ACCEPT",
  "RETURN",
  "DROP",
]);

export type Table = "filter" | "mangle" | "nat" | "raw";

/** One rule: appended to its chain, or inserted at a 1-based position. */
export interface Rule {
  readonly table: Table;
  readonly chain: string;
  readonly args: readonly string[];
  readonly position?: number;
}

/** What the system adds to the flags: which families get rules and where DNS goes. */
export interface CaptureEnvironment {
  /** IPv6 rules too (the pod has an IPv6 address; Istio's EnableIPv6). */
  readonly ipv6: boolean;
  /** The nameservers of /etc/resolv.conf: DNS capture covers only these unless --capture-all-dns. */
  readonly dnsServers: readonly string[];
}

/** The rules of both families, in the order iptables must see them. */
export interface CaptureRules {
  readonly v4: readonly Rule[];
  readonly v6: readonly Rule[];
}

interface NetworkRanges {
  wildcard: boolean;
  cidrs: string[];
  hasLoopback: boolean;
}

/** Splits a CIDR list by family; "*" is every address of both. */
function rangesByFamily(list: string, flag: string): { v4: NetworkRanges; v6: NetworkRanges } {
  if (list.trim() === "*")
    return {
      v4: { wildcard: true, cidrs: [], hasLoopback: false },
      v6: { wildcard: true, cidrs: [], hasLoopback: false },
    };
  const v4: NetworkRanges = { wildcard: false, cidrs: [], hasLoopback: false };
  const v6: NetworkRanges = { wildcard: false, cidrs: [], hasLoopback: false };
  for (const cidr of splitList(list)) {
    const [address = "", bits, ...extra] = cidr.split("/");
    const family = isIPv4(address) ? 4 : isIPv6(address) ? 6 : 0;
    const maxBits = family === 4 ? 32 : 128;
    if (
      family === 0 ||
      bits === undefined ||
      extra.length > 0 ||
      !/^\d+$/.test(bits) ||
      Number(bits) > maxBits
    )
      throw new IptablesUsageError(`--${flag}: "${cidr}" is not a CIDR`);
    const ranges = family === 4 ? v4 : v6;
    ranges.cidrs.push(cidr);
    if (family === 4 ? address.startsWith("127.") : address === "::1") ranges.hasLoopback = true;
  }
  return { v4, v6 };
}

/** Collects rules per family; `both` takes a value per family where the rule names an address. */
class RuleList {
  readonly v4: Rule[] = [];
  readonly v6: Rule[] = [];
  constructor(private readonly ipv6: boolean) {}

  v4Only(table: Table, chain: string, args: readonly string[], position?: number): void {
    this.v4.push({ table, chain, args, position });
  }
  v6Only(table: Table, chain: string, args: readonly string[], position?: number): void {
    if (this.ipv6) this.v6.push({ table, chain, args, position });
  }
  /** The same rule for both families; a function argument gets the family's addresses. */
  both(
    table: Table,
    chain: string,
    args: readonly string[] | ((addr: { loopback: string; passthrough: string }) => readonly string[]),
    position?: number,
  ): void {
    const forFamily = (family: "v4" | "v6") =>
      typeof args === "function"
        ? args({ loopback: LOOPBACK[family], passthrough: INBOUND_PASSTHROUGH[family] })
        : args;
    this.v4Only(table, chain, forFamily("v4"), position);
    this.v6Only(table, chain, forFamily("v6"), position);
  }
}

/** The rules for a config (istio-iptables' order; see the comments for what each group is for). */
export function buildCaptureRules(config: CaptureConfig, environment: CaptureEnvironment): CaptureRules {
  const rules = new RuleList(environment.ipv6);
  const tproxy = config.interceptionMode === "TPROXY";
  const exclude = rangesByFamily(config.outboundIpRangesExclude, "istio-service-exclude-cidr");
  const include = rangesByFamily(config.outboundIpRangesInclude, "istio-service-cidr");
  const dnsV4 = environment.dnsServers.filter((server) => isIPv4(server));
  const dnsV6 = environment.dnsServers.filter((server) => isIPv6(server));
  // With nothing to capture DNS for, Istio turns DNS capture off rather than capturing nothing.
  const redirectDns = config.redirectDns && (config.captureAllDns || environment.dnsServers.length > 0);
  const uids = splitList(config.proxyUid);
  const gids = splitList(config.proxyGid);

  // Excluded interfaces: nothing entering or leaving them is touched.
  for (const nic of splitList(config.excludeInterfaces)) {
    rules.both("nat", "PREROUTING", ["-i", nic, "-j", "RETURN"]);
    rules.both("nat", "OUTPUT", ["-o", nic, "-j", "RETURN"]);
  }
  if (tproxy)
    for (const nic of splitList(config.excludeInterfaces)) {
      rules.both("mangle", "PREROUTING", ["-i", nic, "-j", "RETURN"]);
      rules.both("mangle", "OUTPUT", ["-o", nic, "-j", "RETURN"]);
    }
  for (const nic of splitList(config.kubeVirtInterfaces))
    rules.both("nat", "PREROUTING", ["-i", nic, "-j", "RETURN"], 1);

  if (config.dropInvalid) {
    rules.both("mangle", "PREROUTING", ["-m", "conntrack", "--ctstate", "INVALID", "-j", CHAIN.drop]);
    rules.both("mangle", CHAIN.drop, ["-j", "DROP"]);
  }

  // The tunnel port is Envoy's own (HBONE): never captured.
  rules.both("nat", CHAIN.inbound, ["-p", "tcp", "--dport", config.inboundTunnelPort, "-j", "RETURN"]);
  rules.both("nat", CHAIN.redirect, ["-p", "tcp", "-j", "REDIRECT", "--to-ports", config.proxyPort]);
  rules.both("nat", CHAIN.inRedirect, [
    "-p",
    "tcp",
    "-j",
    "REDIRECT",
    "--to-ports",
    config.inboundCapturePort,
  ]);

  addInboundRules(rules, config);

  rules.both("nat", "OUTPUT", ["-j", CHAIN.output]);
  for (const port of splitList(config.outboundPortsExclude)) {
    rules.both("nat", CHAIN.output, ["-p", "tcp", "--dport", port, "-j", "RETURN"]);
    rules.both("nat", CHAIN.output, ["-p", "udp", "--dport", port, "-j", "RETURN"]);
  }
  // Envoy's inbound connections to the app leave from 127.0.0.6: let them through.
  rules.both("nat", CHAIN.output, ({ passthrough }) => ["-o", "lo", "-s", passthrough, "-j", "RETURN"]);

  // The proxy's own traffic (UID/GID) is never captured, which is also what
  // keeps its xDS (15012) and DNS upstream connections out of Envoy. One
  // exception: the proxy calling the pod's own non-loopback address over lo
  // (an app calling itself through its service) goes to the inbound side.
  const loopbackIncluded = include.v4.hasLoopback || include.v6.hasLoopback;
  for (const [owner, ids] of [
    ["--uid-owner", uids],
    ["--gid-owner", gids],
  ] as const)
    for (const id of ids) {
      const portMatch =
        redirectDns && owner === "--uid-owner"
          ? ["-m", "multiport", "!", "--dports", `53,${config.inboundTunnelPort}`]
          : ["!", "--dport", config.inboundTunnelPort];
      rules.both("nat", CHAIN.output, ({ loopback }) => [
        "-o",
        "lo",
        "!",
        "-d",
        loopback,
        "-p",
        "tcp",
        ...portMatch,
        "-m",
        "owner",
        owner,
        id,
        "-j",
        CHAIN.inRedirect,
      ]);
      // Other processes talking over lo stay local, except DNS when it is captured.
      if (!loopbackIncluded)
        rules.both(
          "nat",
          CHAIN.output,
          redirectDns
            ? ["-o", "lo", "-p", "tcp", "!", "--dport", "53", "-m", "owner", "!", owner, id, "-j", "RETURN"]
            : ["-o", "lo", "-m", "owner", "!", owner, id, "-j", "RETURN"],
        );
      rules.both("nat", CHAIN.output, ["-m", "owner", owner, id, "-j", "RETURN"]);
    }

  if (redirectDns)
    addDnsRules(rules, uids, gids, config.captureAllDns ? undefined : { v4: dnsV4, v6: dnsV6 });

  rules.both("nat", CHAIN.output, ({ loopback }) => ["-d", loopback, "-j", "RETURN"]);
  for (const cidr of exclude.v4.cidrs) rules.v4Only("nat", CHAIN.output, ["-d", cidr, "-j", "RETURN"]);
  for (const cidr of exclude.v6.cidrs) rules.v6Only("nat", CHAIN.output, ["-d", cidr, "-j", "RETURN"]);

  for (const port of splitList(config.outboundPortsInclude))
    rules.both("nat", CHAIN.output, ["-p", "tcp", "--dport", port, "-j", CHAIN.redirect]);

  addOutboundIncludeRules(include.v4, config, rules.v4Only.bind(rules));
  addOutboundIncludeRules(include.v6, config, rules.v6Only.bind(rules));

  if (tproxy) addTproxyMarkRules(rules, config, uids, gids);
  return { v4: rules.v4, v6: rules.v6 };
}

/** Inbound capture: nat REDIRECT to -z, or mangle TPROXY (keeps the client's address). */
function addInboundRules(rules: RuleList, config: CaptureConfig): void {
  if (config.inboundPortsInclude === "") return;
  const tproxy = config.interceptionMode === "TPROXY";
  const table: Table = tproxy ? "mangle" : "nat";
  if (tproxy) {
    // Packets of connections already handed to Envoy are marked, so policy routing delivers them locally.
    rules.both("mangle", CHAIN.divert, ["-j", "MARK", "--set-mark", config.tproxyMark]);
    rules.both("mangle", CHAIN.divert, ["-j", "ACCEPT"]);
    rules.both("mangle", CHAIN.tproxy, ({ loopback }) => [
      "!",
      "-d",
      loopback,
      "-p",
      "tcp",
      "-j",
      "TPROXY",
      "--tproxy-mark",
      `${config.tproxyMark}/0xffffffff`,
      "--on-port",
      config.inboundCapturePort,
    ]);
  }
  rules.both(table, "PREROUTING", ["-p", "tcp", "-j", CHAIN.inbound]);
  if (config.inboundPortsInclude.trim() === "*") {
    for (const port of splitList(config.inboundPortsExclude))
      rules.both(table, CHAIN.inbound, ["-p", "tcp", "--dport", port, "-j", "RETURN"]);
    if (tproxy) {
      rules.both("mangle", CHAIN.inbound, [
        "-p",
        "tcp",
        "-m",
        "conntrack",
        "--ctstate",
        "RELATED,ESTABLISHED",
        "-j",
        CHAIN.divert,
      ]);
      rules.both("mangle", CHAIN.inbound, ["-p", "tcp", "-j", CHAIN.tproxy]);
    } else {
      rules.both("nat", CHAIN.inbound, ["-p", "tcp", "-j", CHAIN.inRedirect]);
    }
    return;
  }
  for (const port of splitList(config.inboundPortsInclude)) {
    if (tproxy) {
      rules.both("mangle", CHAIN.inbound, [
        "-p",
        "tcp",
        "--dport",
        port,
        "-m",
        "conntrack",
        "--ctstate",
        "RELATED,ESTABLISHED",
        "-j",
        CHAIN.divert,
      ]);
      rules.both("mangle", CHAIN.inbound, ["-p", "tcp", "--dport", port, "-j", CHAIN.tproxy]);
    } else {
      rules.both("nat", CHAIN.inbound, ["-p", "tcp", "--dport", port, "-j", CHAIN.inRedirect]);
    }
  }
}

/**
 * DNS to the agent's proxy on 15053: TCP and UDP 53 to the resolv.conf
 * servers (or to any server with --capture-all-dns). The proxy's own queries
 * already returned in ISTIO_OUTPUT (owner match). The raw-table conntrack
 * zones keep the app's query and the proxy's forwarded query to the same
 * server apart, so their UDP flows do not collide in conntrack.
 */
function addDnsRules(
  rules: RuleList,
  uids: readonly string[],
  gids: readonly string[],
  servers: { v4: readonly string[]; v6: readonly string[] } | undefined,
): void {
  rules.both("raw", "OUTPUT", ["-j", CHAIN.outputDns]);
  if (!servers || servers.v4.length > 0) rules.v4Only("nat", CHAIN.output, ["-j", CHAIN.outputDns]);
  if (!servers || servers.v6.length > 0) rules.v6Only("nat", CHAIN.output, ["-j", CHAIN.outputDns]);
  const toProxy = (protocol: string, portOption: string) => (destination: string[]) => [
    "-p",
    protocol,
    "--dport",
    "53",
    ...destination,
    "-j",
    "REDIRECT",
    portOption,
    DNS_PROXY_PORT,
  ];
  // Istio spells the TCP target --to-ports and the UDP one --to-port; iptables takes both.
  for (const [protocol, portOption] of [
    ["tcp", "--to-ports"],
    ["udp", "--to-port"],
  ] as const) {
    const rule = toProxy(protocol, portOption);
    if (!servers) rules.both("nat", CHAIN.outputDns, rule([]));
    else {
      for (const server of servers.v4) rules.v4Only("nat", CHAIN.outputDns, rule(["-d", `${server}/32`]));
      for (const server of servers.v6) rules.v6Only("nat", CHAIN.outputDns, rule(["-d", `${server}/128`]));
    }
  }

  for (const [owner, ids] of [
    ["--uid-owner", uids],
    ["--gid-owner", gids],
  ] as const)
    for (const id of ids) {
      rules.both("raw", CHAIN.outputDns, [
        "-p",
        "udp",
        "--dport",
        "53",
        "-m",
        "owner",
        owner,
        id,
        "-j",
        "CT",
        "--zone",
        "1",
      ]);
      rules.both("raw", CHAIN.outputDns, [
        "-p",
        "udp",
        "--sport",
        DNS_PROXY_PORT,
        "-m",
        "owner",
        owner,
        id,
        "-j",
        "CT",
        "--zone",
        "2",
      ]);
    }
  if (!servers) {
    rules.both("raw", "PREROUTING", ["-j", CHAIN.inbound]);
    rules.both("raw", CHAIN.outputDns, ["-p", "udp", "--dport", "53", "-j", "CT", "--zone", "2"]);
    rules.both("raw", CHAIN.inbound, ["-p", "udp", "--sport", "53", "-j", "CT", "--zone", "1"]);
    return;
  }
  for (const [family, suffix, add] of [
    [servers.v4, "/32", rules.v4Only.bind(rules)],
    [servers.v6, "/128", rules.v6Only.bind(rules)],
  ] as const) {
    if (family.length > 0) add("raw", "PREROUTING", ["-j", CHAIN.inbound]);
    for (const server of family) {
      add("raw", CHAIN.outputDns, [
        "-p",
        "udp",
        "--dport",
        "53",
        "-d",
        server + suffix,
        "-j",
        "CT",
        "--zone",
        "2",
      ]);
      add("raw", CHAIN.inbound, [
        "-p",
        "udp",
        "--sport",
        "53",
        "-s",
        server + suffix,
        "-j",
        "CT",
        "--zone",
        "1",
      ]);
    }
  }
}

/** Outbound capture by destination: "*" sends all remaining TCP to Envoy, a list only those CIDRs. */
function addOutboundIncludeRules(
  include: NetworkRanges,
  config: CaptureConfig,
  add: (table: Table, chain: string, args: readonly string[], position?: number) => void,
): void {
  const virtualNics = splitList(config.kubeVirtInterfaces);
  if (include.wildcard) {
    add("nat", CHAIN.output, ["-j", CHAIN.redirect]);
    for (const nic of virtualNics) add("nat", "PREROUTING", ["-i", nic, "-j", CHAIN.redirect], 1);
    return;
  }
  for (const cidr of include.cidrs) {
    for (const nic of virtualNics) add("nat", "PREROUTING", ["-i", nic, "-d", cidr, "-j", CHAIN.redirect], 1);
    add("nat", CHAIN.output, ["-d", cidr, "-j", CHAIN.redirect]);
  }
}

/** TPROXY's marks: keep Envoy's own loopback traffic and replies out of ISTIO_INBOUND. */
function addTproxyMarkRules(
  rules: RuleList,
  config: CaptureConfig,
  uids: readonly string[],
  gids: readonly string[],
): void {
  const mark = config.tproxyMark;
  rules.both("mangle", "PREROUTING", [
    "-p",
    "tcp",
    "-m",
    "mark",
    "--mark",
    mark,
    "-j",
    "CONNMARK",
    "--save-mark",
  ]);
  rules.both("mangle", "OUTPUT", ["-p", "tcp", "-o", "lo", "-m", "mark", "--mark", mark, "-j", "RETURN"]);
  for (const [owner, ids] of [
    ["--uid-owner", uids],
    ["--gid-owner", gids],
  ] as const)
    for (const id of ids)
      rules.both("mangle", "OUTPUT", ({ loopback }) => [
        "!",
        "-d",
        loopback,
        "-p",
        "tcp",
        "-o",
        "lo",
        "-m",
        "owner",
        owner,
        id,
        "-j",
        "MARK",
        "--set-mark",
        OUTBOUND_MARK,
      ]);
  rules.both("mangle", "OUTPUT", [
    "-p",
    "tcp",
    "-m",
    "connmark",
    "--mark",
    mark,
    "-j",
    "CONNMARK",
    "--restore-mark",
  ]);
  rules.both("mangle", CHAIN.inbound, ["-p", "tcp", "-m", "mark", "--mark", mark, "-j", "RETURN"], 1);
  rules.both(
    "mangle",
    CHAIN.inbound,
    ({ passthrough }) => ["-p", "tcp", "-s", passthrough, "-i", "lo", "-j", "RETURN"],
    2,
  );
  rules.both(
    "mangle",
    CHAIN.inbound,
    ["-p", "tcp", "-i", "lo", "-m", "mark", "!", "--mark", OUTBOUND_MARK, "-j", "RETURN"],
    3,
  );
}

const isIstioChain = (chain: string) => !BUILT_IN.has(chain);

/** "-A CHAIN args" or "-I CHAIN n args", as iptables and iptables-restore take it. */
export function ruleText(
  rule: Rule,
  operation: "-A" | "-I" | "-C" | "-D" = rule.position ? "-I" : "-A",
): string[] {
  const position = operation === "-I" && rule.position ? [String(rule.position)] : [];
  return [operation, rule.chain, ...position, ...rule.args];
}

/** The chains a rule list creates, per table, in first-use order (chains with rules first, then jump targets). */
export function chainsOf(rules: readonly Rule[]): Map<Table, string[]> {
  const chains = new Map<Table, string[]>();
  const add = (table: Table, chain: string) => {
    const list = chains.get(table) ?? [];
    if (!list.includes(chain)) list.push(chain);
    chains.set(table, list);
  };
  for (const rule of rules) if (isIstioChain(rule.chain)) add(rule.table, rule.chain);
  for (const rule of rules) {
    const target = rule.args.at(-1);
    if (rule.args.at(-2) === "-j" && target && isIstioChain(target)) add(rule.table, target);
  }
  return chains;
}

/**
 * The iptables-restore input (for `--noflush`) for one family's rules: each
 * table that has rules, in name order, creating its chains then adding its rules.
 */
export function restoreText(rules: readonly Rule[]): string {
  const chains = chainsOf(rules);
  const tables = [...new Set(rules.map((rule) => rule.table))].sort();
  let text = "";
  for (const table of tables) {
    text += `* ${table}\n`;
    for (const chain of chains.get(table) ?? []) text += `-N ${chain}\n`;
    for (const rule of rules) if (rule.table === table) text += `${ruleText(rule).join(" ")}\n`;
    text += "COMMIT\n";
  }
  return text;
}
