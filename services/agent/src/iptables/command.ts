// `agent iptables` / `agent istio-iptables`: what the injected istio-init
// container runs. Builds the rules from the flags, then prints them
// (--dry-run), removes them (--cleanup-only) or applies them.
import { readFileSync } from "node:fs";
import { networkInterfaces } from "node:os";
import {
  configureRoutes,
  type Family,
  IptablesError,
  IptablesFamily,
  MissingToolError,
  type RunCommand,
} from "./apply.js";
import { IPTABLES_USAGE, IptablesUsageError, parseIptablesArgs } from "./flags.js";
import { buildCaptureRules, type CaptureEnvironment, restoreText } from "./rules.js";

export interface IptablesCommandContext {
  readonly env: NodeJS.ProcessEnv;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /** Where DNS capture finds the pod's nameservers (Istio reads /etc/resolv.conf). */
  readonly resolvConf?: string;
  /** The pod's addresses; the host's interfaces by default. */
  readonly interfaces?: () => ReturnType<typeof networkInterfaces>;
  readonly run?: RunCommand;
}

/** Runs the command; resolves with the exit status (0 done, 1 failed, 2 usage error). */
export async function runIptablesCommand(
  argv: readonly string[],
  context: IptablesCommandContext,
): Promise<number> {
  const { stdout, stderr } = context;
  try {
    const command = parseIptablesArgs(argv, context.env);
    if (command.help) {
      stdout(IPTABLES_USAGE);
      return 0;
    }
    const { config } = command;
    const environment: CaptureEnvironment = {
      ipv6: hasIpv6(context.interfaces?.() ?? networkInterfaces(), config.dualStack),
      dnsServers:
        config.redirectDns && !config.captureAllDns
          ? nameservers(context.resolvConf ?? "/etc/resolv.conf")
          : [],
    };
    const rules = buildCaptureRules(config, environment);
    if (config.redirectDns && !config.captureAllDns && environment.dnsServers.length === 0)
      stderr(
        "agent iptables: --redirect-dns without --capture-all-dns and no nameserver in resolv.conf: DNS is not captured\n",
      );
    const families: Family[] = environment.ipv6 ? ["v4", "v6"] : ["v4"];
    const label = { v4: "IPv4", v6: "IPv6" } as const;

    if (config.dryRun) {
      if (config.cleanup) {
        stdout("# dry run: --cleanup-only would remove every ISTIO_* chain and the rules jumping to them\n");
        return 0;
      }
      for (const family of families)
        stdout(
          `# ${label[family]}: ${family === "v4" ? "iptables" : "ip6tables"}-restore --noflush\n${restoreText(rules[family])}`,
        );
      return 0;
    }

    for (const family of families) {
      const tables = new IptablesFamily(family, context.run);
      if (config.cleanup) {
        const removed = await tables.cleanup(rules[family]);
        stderr(
          `agent iptables: ${label[family]} ${removed ? "rules removed" : "no Istio rules to remove"}\n`,
        );
        continue;
      }
      const outcome = await tables.apply(rules[family]);
      stderr(
        `agent iptables: ${label[family]} ${
          outcome === "unchanged"
            ? "rules already in place, nothing changed"
            : outcome === "replaced"
              ? "rules differed from the flags: old ones removed, new ones applied"
              : "rules applied"
        }\n`,
      );
    }
    if (!config.cleanup)
      await configureRoutes(
        {
          ipv6: environment.ipv6,
          tproxy:
            config.interceptionMode === "TPROXY" && config.inboundPortsInclude !== ""
              ? { mark: config.tproxyMark, table: config.tproxyRouteTable }
              : undefined,
        },
        context.run,
      );
    return 0;
  } catch (error) {
    if (error instanceof IptablesUsageError) {
      stderr(`agent iptables: ${error.message}\n\n${IPTABLES_USAGE}`);
      return 2;
    }
    if (error instanceof MissingToolError || error instanceof IptablesError) {
      stderr(`agent iptables: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

/**
 * Whether IPv6 rules are needed (Istio's EnableIPv6): the pod's first
 * address that is neither loopback nor link-local is IPv6, or, with
 * --dual-stack, it has any such IPv6 address.
 */
export function hasIpv6(interfaces: ReturnType<typeof networkInterfaces>, dualStack: boolean): boolean {
  const addresses = Object.values(interfaces)
    .flatMap((list) => list ?? [])
    .filter((address) => !address.internal && !isLinkLocal(address.address));
  return dualStack ? addresses.some((address) => address.family === "IPv6") : addresses[0]?.family === "IPv6";
}

const isLinkLocal = (address: string) => address.startsWith("169.254.") || /^fe[89ab]/i.test(address);

/** The nameserver addresses of a resolv.conf; none when it cannot be read. */
export function nameservers(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter((words) => words[0] === "nameserver" && words[1])
    .map((words) => words[1]!.split("%")[0]!);
}
