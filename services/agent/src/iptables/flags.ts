// The command line of `agent iptables` (alias `agent istio-iptables`): the
// flags, short letters, defaults and environment variables of Istio's
// istio-iptables, so the init container the webhook injects runs unchanged.

/** What the rules are built from: one field per istio-iptables flag, values as given (lists stay comma-separated). */
export interface CaptureConfig {
  /** -p: outbound TCP goes to this Envoy port (the virtual outbound listener). */
  proxyPort: string;
  /** -z: inbound TCP goes to this port (the virtual inbound listener). */
  inboundCapturePort: string;
  /** -e: the HBONE tunnel port, never captured inbound. */
  inboundTunnelPort: string;
  /** -u: the proxy's UIDs (comma-separated), whose traffic is never captured. */
  proxyUid: string;
  /** -g: the proxy's GIDs; the UIDs when not given. */
  proxyGid: string;
  /** -m: REDIRECT (nat) or TPROXY (mangle, keeps the source address). */
  interceptionMode: "REDIRECT" | "TPROXY";
  /** -b: inbound ports to capture, "*" for all, empty for none. */
  inboundPortsInclude: string;
  /** -d: inbound ports left alone when -b is "*". */
  inboundPortsExclude: string;
  /** -i: outbound CIDRs to capture, "*" for all, empty for none. */
  outboundIpRangesInclude: string;
  /** -x: outbound CIDRs never captured. */
  outboundIpRangesExclude: string;
  /** -q: outbound ports always captured. */
  outboundPortsInclude: string;
  /** -o: outbound ports never captured. */
  outboundPortsExclude: string;
  /** -c: interfaces whose traffic is never captured, either way. */
  excludeInterfaces: string;
  /** -k: (VM) interfaces whose inbound traffic is treated as outbound. */
  kubeVirtInterfaces: string;
  /** -t: the TPROXY packet mark. */
  tproxyMark: string;
  /** -r: the routing table TPROXY-marked packets are looked up in. */
  tproxyRouteTable: string;
  /** --redirect-dns: DNS (UDP and TCP 53) to the agent's DNS proxy on 15053. */
  redirectDns: boolean;
  /** --capture-all-dns: DNS to any server, not only the resolv.conf nameservers. */
  captureAllDns: boolean;
  /** --drop-invalid: drop conntrack-INVALID packets instead of letting the kernel reset the connection. */
  dropInvalid: boolean;
  /** --dual-stack: IPv6 rules as well whenever the pod has an IPv6 address. */
  dualStack: boolean;
  /** -n, --dry-run: print the rules, change nothing. */
  dryRun: boolean;
  /** --cleanup-only (also --cleanup): remove Istio's chains and jumps, add nothing. */
  cleanup: boolean;
}

type Key = keyof CaptureConfig;

interface FlagSpec {
  readonly name: string;
  readonly short?: string;
  readonly key: Key | "ignored";
  readonly boolean?: boolean;
  /** Environment variables read as the default, the last one present winning (Istio's BindEnv + AdditionalEnv). */
  readonly env?: readonly string[];
}

/** Istio's long names; an env name is the long name upper-cased with "-" as "_" (Istio's BindEnv). */
const FLAGS: readonly FlagSpec[] = [
  { name: "envoy-port", short: "p", key: "proxyPort" },
  { name: "inbound-capture-port", short: "z", key: "inboundCapturePort", env: ["INBOUND_CAPTURE_PORT"] },
  { name: "inbound-tunnel-port", short: "e", key: "inboundTunnelPort", env: ["INBOUND_TUNNEL_PORT"] },
  { name: "proxy-uid", short: "u", key: "proxyUid", env: ["PROXY_UID"] },
  { name: "proxy-gid", short: "g", key: "proxyGid", env: ["PROXY_GID"] },
  {
    name: "istio-inbound-interception-mode",
    short: "m",
    key: "interceptionMode",
    env: ["ISTIO_INBOUND_INTERCEPTION_MODE"],
  },
  { name: "istio-inbound-ports", short: "b", key: "inboundPortsInclude", env: ["ISTIO_INBOUND_PORTS"] },
  {
    name: "istio-local-exclude-ports",
    short: "d",
    key: "inboundPortsExclude",
    env: ["ISTIO_LOCAL_EXCLUDE_PORTS"],
  },
  {
    name: "istio-exclude-interfaces",
    short: "c",
    key: "excludeInterfaces",
    env: ["ISTIO_EXCLUDE_INTERFACES"],
  },
  { name: "istio-service-cidr", short: "i", key: "outboundIpRangesInclude", env: ["ISTIO_SERVICE_CIDR"] },
  {
    name: "istio-service-exclude-cidr",
    short: "x",
    key: "outboundIpRangesExclude",
    env: ["ISTIO_SERVICE_EXCLUDE_CIDR"],
  },
  { name: "istio-outbound-ports", short: "q", key: "outboundPortsInclude", env: ["ISTIO_OUTBOUND_PORTS"] },
  {
    name: "istio-local-outbound-ports-exclude",
    short: "o",
    key: "outboundPortsExclude",
    env: ["ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE"],
  },
  { name: "kube-virt-interfaces", short: "k", key: "kubeVirtInterfaces", env: ["KUBE_VIRT_INTERFACES"] },
  { name: "istio-inbound-tproxy-mark", short: "t", key: "tproxyMark", env: ["ISTIO_INBOUND_TPROXY_MARK"] },
  {
    name: "istio-inbound-tproxy-route-table",
    short: "r",
    key: "tproxyRouteTable",
    env: ["ISTIO_INBOUND_TPROXY_ROUTE_TABLE"],
  },
  { name: "dry-run", short: "n", key: "dryRun", boolean: true, env: ["DRY_RUN"] },
  {
    name: "redirect-dns",
    key: "redirectDns",
    boolean: true,
    env: ["REDIRECT_DNS", "ISTIO_META_DNS_CAPTURE"],
  },
  { name: "capture-all-dns", key: "captureAllDns", boolean: true, env: ["CAPTURE_ALL_DNS"] },
  { name: "drop-invalid", key: "dropInvalid", boolean: true, env: ["DROP_INVALID", "INVALID_DROP"] },
  { name: "dual-stack", key: "dualStack", boolean: true, env: ["DUAL_STACK", "ISTIO_DUAL_STACK"] },
  { name: "cleanup-only", key: "cleanup", boolean: true, env: ["CLEANUP_ONLY"] },
  { name: "cleanup", key: "cleanup", boolean: true },
  // Logging options every Istio binary takes; the agent logs its own way.
  { name: "log_output_level", key: "ignored" },
  { name: "log_as_json", key: "ignored", boolean: true },
];

/** Istio's defaults (tools/common/config DefaultConfig); -u falls back to 1337 and -g to -u. */
const DEFAULTS: CaptureConfig = {
  proxyPort: "15001",
  inboundCapturePort: "15006",
  inboundTunnelPort: "15008",
  proxyUid: "",
  proxyGid: "",
  interceptionMode: "REDIRECT",
  inboundPortsInclude: "",
  inboundPortsExclude: "",
  outboundIpRangesInclude: "",
  outboundIpRangesExclude: "",
  outboundPortsInclude: "",
  outboundPortsExclude: "",
  excludeInterfaces: "",
  kubeVirtInterfaces: "",
  tproxyMark: "1337",
  tproxyRouteTable: "133",
  redirectDns: false,
  captureAllDns: false,
  dropInvalid: false,
  dualStack: false,
  dryRun: false,
  cleanup: false,
};

export const DEFAULT_PROXY_UID = "1337";

/** Thrown for a command line or value istio-iptables would refuse; the message says which. */
export class IptablesUsageError extends Error {}

export type IptablesCommand = { help: true } | { help: false; config: CaptureConfig };

export const IPTABLES_USAGE = `usage: agent iptables [flags]   (alias: agent istio-iptables)
  -p, --envoy-port <port>                          outbound TCP to this port (15001)
  -z, --inbound-capture-port <port>                inbound TCP to this port (15006)
  -e, --inbound-tunnel-port <port>                 never captured inbound (15008)
  -u, --proxy-uid <uid,...>                        traffic of these UIDs is not captured (1337)
  -g, --proxy-gid <gid,...>                        traffic of these GIDs is not captured (= -u)
  -m, --istio-inbound-interception-mode <mode>     REDIRECT or TPROXY (REDIRECT)
  -b, --istio-inbound-ports <ports|*>              inbound ports captured ("" none)
  -d, --istio-local-exclude-ports <ports>          inbound ports not captured when -b is *
  -i, --istio-service-cidr <cidrs|*>               outbound CIDRs captured ("" none)
  -x, --istio-service-exclude-cidr <cidrs>         outbound CIDRs not captured
  -q, --istio-outbound-ports <ports>               outbound ports always captured
  -o, --istio-local-outbound-ports-exclude <ports> outbound ports not captured
  -c, --istio-exclude-interfaces <nics>            interfaces not captured at all
  -k, --kube-virt-interfaces <nics>                interfaces whose inbound traffic counts as outbound
  -t, --istio-inbound-tproxy-mark <mark>           TPROXY mark (1337)
  -r, --istio-inbound-tproxy-route-table <table>   TPROXY route table (133)
      --redirect-dns                               DNS (53) to the agent's DNS proxy on 15053
      --capture-all-dns                            DNS to every server, not only resolv.conf's
      --drop-invalid                               drop conntrack-INVALID packets
      --dual-stack                                 IPv6 rules too when the pod has IPv6
  -n, --dry-run                                    print the iptables-restore input, apply nothing
      --cleanup-only, --cleanup                    remove the chains and jump rules
      --log_output_level <levels>                  accepted for Istio compatibility
`;

const byName = new Map(FLAGS.map((flag) => [flag.name, flag]));
const byShort = new Map(FLAGS.filter((flag) => flag.short).map((flag) => [flag.short!, flag]));

/**
 * Parses istio-iptables' command line as Istio's flag library does:
 * `-p 15001`, `-p=15001`, `-p15001`, `--envoy-port 15001`, `--envoy-port=15001`,
 * booleans bare or `=true|false`. Environment variables give the defaults.
 */
export function parseIptablesArgs(argv: readonly string[], env: NodeJS.ProcessEnv = {}): IptablesCommand {
  const config: CaptureConfig = { ...DEFAULTS };
  const set = (flag: FlagSpec, raw: string, source: string) => {
    if (flag.key === "ignored") return;
    if (flag.boolean) {
      const value = parseBoolean(raw);
      if (value === undefined) throw new IptablesUsageError(`${source}: "${raw}" is not true or false`);
      (config[flag.key] as boolean) = value;
    } else {
      (config[flag.key] as string) = raw;
    }
  };
  for (const flag of FLAGS)
    for (const name of flag.env ?? []) {
      const value = env[name];
      if (value !== undefined) set(flag, value, name);
    }

  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]!;
    if (arg === "-h" || arg === "--help") return { help: true };
    let flag: FlagSpec | undefined;
    let inline: string | undefined;
    if (arg.startsWith("--")) {
      const [name, ...rest] = arg.slice(2).split("=");
      flag = byName.get(name!);
      if (!flag) throw new IptablesUsageError(`unknown flag --${name}`);
      inline = rest.length > 0 ? rest.join("=") : undefined;
    } else if (arg.startsWith("-") && arg.length > 1) {
      flag = byShort.get(arg[1]!);
      if (!flag) throw new IptablesUsageError(`unknown flag -${arg[1]}`);
      const tail = arg.slice(2);
      inline = tail === "" ? undefined : tail.startsWith("=") ? tail.slice(1) : tail;
    } else {
      throw new IptablesUsageError(`unexpected argument "${arg}" (istio-iptables takes flags only)`);
    }
    if (flag.boolean) {
      set(flag, inline ?? "true", `--${flag.name}`);
      continue;
    }
    if (inline === undefined) {
      if (index + 1 >= argv.length) throw new IptablesUsageError(`--${flag.name} needs a value`);
      inline = argv[++index]!;
    }
    set(flag, inline, `--${flag.name}`);
  }

  if (config.proxyUid === "") config.proxyUid = DEFAULT_PROXY_UID;
  if (config.proxyGid === "") config.proxyGid = config.proxyUid;
  validate(config);
  return { help: false, config };
}

function parseBoolean(raw: string): boolean | undefined {
  const value = raw.toLowerCase();
  if (["true", "1", "t"].includes(value)) return true;
  if (["false", "0", "f", ""].includes(value)) return false;
  return undefined;
}

/** Refuses values that would make iptables-restore fail half-way, naming the flag. */
function validate(config: CaptureConfig): void {
  const mode = config.interceptionMode.toUpperCase();
  if (mode !== "REDIRECT" && mode !== "TPROXY")
    throw new IptablesUsageError(
      `--istio-inbound-interception-mode: "${config.interceptionMode}" is not REDIRECT or TPROXY`,
    );
  config.interceptionMode = mode;
  const ports: [string, string, boolean][] = [
    ["envoy-port", config.proxyPort, false],
    ["inbound-capture-port", config.inboundCapturePort, false],
    ["inbound-tunnel-port", config.inboundTunnelPort, false],
    ["istio-inbound-ports", config.inboundPortsInclude, true],
    ["istio-local-exclude-ports", config.inboundPortsExclude, true],
    ["istio-outbound-ports", config.outboundPortsInclude, true],
    ["istio-local-outbound-ports-exclude", config.outboundPortsExclude, true],
  ];
  for (const [name, value, list] of ports) {
    if (list && value === "*" && name === "istio-inbound-ports") continue;
    const items = list ? splitList(value) : [value];
    for (const item of items)
      if (!/^\d+$/.test(item) || Number(item) < 1 || Number(item) > 65535)
        throw new IptablesUsageError(`--${name}: "${item}" is not a port`);
  }
  for (const [name, value] of [
    ["proxy-uid", config.proxyUid],
    ["proxy-gid", config.proxyGid],
  ] as const)
    for (const item of splitList(value))
      if (!/^\d+$/.test(item)) throw new IptablesUsageError(`--${name}: "${item}" is not a numeric id`);
  for (const [name, value] of [
    ["istio-inbound-tproxy-mark", config.tproxyMark],
    ["istio-inbound-tproxy-route-table", config.tproxyRouteTable],
  ] as const)
    if (!/^\d+$/.test(value)) throw new IptablesUsageError(`--${name}: "${value}" is not a number`);
  if (config.outboundIpRangesExclude.trim() === "*")
    throw new IptablesUsageError(`--istio-service-exclude-cidr: "*" is not allowed`);
}

/** Istio's list syntax: comma-separated, blanks trimmed, empty items dropped. */
export function splitList(value: string): string[] {
  return value
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}
