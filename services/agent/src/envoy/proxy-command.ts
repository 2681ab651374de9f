/** `agent proxy <type>`: which proxy Envoy is (its node id's first part). */
export type ProxyType = "sidecar" | "router";

/** The flags of Istio's `pilot-agent proxy` that the agent uses. */
export interface ProxyArgs {
  type: ProxyType;
  /** --domain: the pod's DNS domain, `<namespace>.svc.<suffix>`. */
  domain: string | undefined;
  /** --proxyLogLevel: Envoy's level, optionally with component levels (`warning,misc:error`). */
  proxyLogLevel: string;
  /** --proxyComponentLogLevel: Envoy's component levels, when --proxyLogLevel names none. */
  proxyComponentLogLevel: string;
  /** --concurrency: Envoy's worker threads; 0 leaves it to PROXY_CONFIG. */
  concurrency: number;
  /** --log_output_level: the agent's own levels by scope (`default:info`). */
  logOutputLevel: string | undefined;
  /** Flags Istio's agent knows and the agent does not, said once at start. */
  ignored: string[];
}

/** A bad `agent proxy` command line (cli.ts reports it as a usage error). */
export class ProxyUsageError extends Error {}

/** Istio's flags that take a value, with what the agent does with each. */
const VALUE_FLAGS = new Set([
  "domain",
  "proxyLogLevel",
  "proxyComponentLogLevel",
  "concurrency",
  "log_output_level",
  // Accepted and without effect here, as each says in the README.
  "serviceCluster",
  "meshConfig",
  "tokenManagerPlugin",
  "log_stacktrace_level",
  "log_caller",
  "log_target",
  "log_rotate",
  "log_rotate_max_age",
  "log_rotate_max_size",
  "log_rotate_max_backups",
  "vklog",
  // Refused unless empty or zero: the agent has no such feature.
  "stsPort",
  "templateFile",
  "outlierLogPath",
]);

/** Istio's boolean flags. */
const BOOLEAN_FLAGS = new Set(["profiling", "log_as_json"]);

/** Istio's default for --proxyLogLevel. */
const DEFAULT_PROXY_LOG_LEVEL = "warning,misc:error";

/**
 * Reads `proxy [sidecar|router] [flags]` (argv after `proxy`) the way
 * pilot-agent's cobra/pflag does: `--flag value` or `--flag=value`, and,
 * as Istio, unknown flags are tolerated (an unknown `--flag value` takes
 * the next word when it is not itself a flag).
 */
export function parseProxyCommand(argv: string[]): ProxyArgs {
  const values = new Map<string, string>();
  const positionals: string[] = [];
  const ignored: string[] = [];
  for (let index = 0; index < argv.length; index++) {
    const word = argv[index]!;
    const flag = /^--?([^=]+)(?:=(.*))?$/s.exec(word);
    if (!flag || word === "-" || word === "--") {
      if (word !== "--") positionals.push(word);
      continue;
    }
    const name = flag[1]!;
    let value = flag[2];
    if (BOOLEAN_FLAGS.has(name)) {
      if (value !== undefined && value !== "true" && value !== "false")
        throw new ProxyUsageError(`--${name} takes true or false (got "${value}")`);
      ignored.push(`--${name}`);
      continue;
    }
    const next = argv[index + 1];
    if (value === undefined && next !== undefined && !next.startsWith("-")) {
      value = next;
      index++;
    }
    if (!VALUE_FLAGS.has(name)) {
      ignored.push(`--${name}`);
      continue;
    }
    if (value === undefined) throw new ProxyUsageError(`--${name} needs a value`);
    values.set(name, value);
  }
  if (positionals.length > 1) throw new ProxyUsageError(`unexpected argument "${positionals[1]}"`);
  const [type = "sidecar"] = positionals;
  if (type !== "sidecar" && type !== "router")
    throw new ProxyUsageError(`unknown proxy type "${type}": expected sidecar or router`);
  const concurrencyText = values.get("concurrency") ?? "0";
  const concurrency = Number(concurrencyText);
  if (!/^\d+$/.test(concurrencyText))
    throw new ProxyUsageError(`--concurrency takes a number of threads (got "${concurrencyText}")`);
  if ((values.get("stsPort") ?? "0") !== "0")
    throw new ProxyUsageError("--stsPort: the agent has no Security Token Service");
  for (const name of ["templateFile", "outlierLogPath"])
    if (values.get(name)) throw new ProxyUsageError(`--${name} is not supported by the agent`);
  for (const name of ["serviceCluster", "meshConfig", "tokenManagerPlugin"])
    if (values.has(name)) ignored.push(`--${name}`);
  return {
    type,
    domain: values.get("domain") || undefined,
    proxyLogLevel: values.get("proxyLogLevel") ?? DEFAULT_PROXY_LOG_LEVEL,
    proxyComponentLogLevel: values.get("proxyComponentLogLevel") ?? "",
    concurrency,
    logOutputLevel: values.get("log_output_level"),
    ignored,
  };
}

/**
 * Istio's split of --proxyLogLevel: its bare word is Envoy's `-l`, its
 * `component:level` parts are `--component-log-level`; only when it has none
 * does --proxyComponentLogLevel give them.
 */
export function envoyLogArgs(args: Pick<ProxyArgs, "proxyLogLevel" | "proxyComponentLogLevel">): string[] {
  let level: string | undefined;
  const components: string[] = [];
  for (const part of args.proxyLogLevel.split(",")) {
    const pieces = part.split(":");
    if (pieces.length === 1 && part !== "") level = part;
    else if (pieces.length === 2) components.push(part);
  }
  const result = level ? ["-l", level] : [];
  if (components.length > 0) result.push("--component-log-level", components.join(","));
  else if (args.proxyComponentLogLevel) result.push("--component-log-level", args.proxyComponentLogLevel);
  return result;
}

/** Istio's scope levels mapped to the agent's logger levels. */
const AGENT_LOG_LEVELS: Record<string, string> = {
  debug: "debug",
  info: "info",
  warn: "warn",
  warning: "warn",
  error: "error",
  fatal: "fatal",
  none: "silent",
};

/**
 * The agent's own log level from --log_output_level: its `default` scope
 * (Istio's scopes are `scope:level,...`; the agent has one logger).
 */
export function agentLogLevel(logOutputLevel: string | undefined): string | undefined {
  if (!logOutputLevel) return undefined;
  for (const part of logOutputLevel.split(",")) {
    const [scope, level] = part.includes(":") ? part.split(":") : ["default", part];
    if (scope === "default" && level && AGENT_LOG_LEVELS[level]) return AGENT_LOG_LEVELS[level];
  }
  return undefined;
}
