import { parseArgs } from "node:util";
import { parseSettings, runService, type ServiceDefinition, SettingsError } from "@sextant/runtime";
import {
  bootstrapText,
  envoyBootstrapFromSettings,
  grpcBootstrapFromSettings,
} from "./bootstrap/from-settings.js";
import { writeFileAtomic } from "./files/atomic-write.js";
import { runIptablesCommand } from "./iptables/command.js";
import { agentSettings } from "./settings.js";

/** The command line's help, also printed after a usage error. */
export const USAGE = `usage:
  agent [run]                                 run beside the workload: identity, SDS, xDS proxy, files
  agent bootstrap envoy [--output <file>]     print (or write) the Envoy bootstrap
  agent bootstrap grpc [--output <file>]      print (or write) the gRPC xDS bootstrap for a proxyless app
  agent iptables [flags]                      istio-iptables (alias istio-iptables): capture the pod's traffic

Settings come from the environment (see services/agent/README.md).
`;

/** A parsed command line. */
export type AgentCommand =
  | { command: "run" }
  | { command: "help" }
  | { command: "bootstrap"; target: "envoy" | "grpc"; output: string | undefined };

/** Thrown for a command line that does not parse; the message says what is wrong. */
export class UsageError extends Error {}

/** Reads the command line (without node and the script): `run` when there is no subcommand. */
export function parseCommand(argv: string[]): AgentCommand {
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions(argv);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) return { command: "help" };
  const [command = "run", target, ...extra] = positionals;
  if (command === "run") {
    if (target !== undefined || extra.length > 0)
      throw new UsageError(`run takes no arguments (got "${target}")`);
    if (values.output !== undefined) throw new UsageError("--output belongs to the bootstrap commands");
    return { command: "run" };
  }
  if (command === "bootstrap") {
    if (target !== "envoy" && target !== "grpc")
      throw new UsageError(
        target ? `unknown bootstrap "${target}": expected envoy or grpc` : "bootstrap needs envoy or grpc",
      );
    if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
    return { command: "bootstrap", target, output: values.output };
  }
  throw new UsageError(`unknown command "${command}": expected run or bootstrap`);
}

function parseOptions(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      output: { type: "string", short: "o" },
      help: { type: "boolean", short: "h" },
    },
  });
}

/**
 * The agent's command line: `run` starts the service (the default), the
 * bootstrap commands print a bootstrap built from the same settings and exit.
 * A usage error or a bad setting exits with status 2 and says which.
 */
export async function runCli(
  argv: string[],
  service: ServiceDefinition<typeof agentSettings>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  // istio-iptables has flags of its own (Istio's), so it bypasses the parser below.
  if (argv[0] === "iptables" || argv[0] === "istio-iptables") {
    process.exitCode = await runIptablesCommand(argv.slice(1), {
      env,
      stdout: (text) => process.stdout.write(text),
      stderr: (text) => process.stderr.write(text),
    });
    return;
  }
  let command: AgentCommand;
  try {
    command = parseCommand(argv);
  } catch (error) {
    process.stderr.write(`agent: ${(error as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
  switch (command.command) {
    case "help":
      process.stdout.write(USAGE);
      return;
    case "run":
      await runService(service);
      return;
    case "bootstrap": {
      let text: string;
      try {
        const settings = parseSettings(agentSettings, env);
        text = bootstrapText(
          command.target === "envoy"
            ? envoyBootstrapFromSettings(settings)
            : grpcBootstrapFromSettings(settings),
        );
      } catch (error) {
        if (!(error instanceof SettingsError)) throw error;
        process.stderr.write(`agent: ${error.message}\n`);
        process.exit(2);
      }
      if (command.output === undefined) {
        process.stdout.write(text);
        return;
      }
      try {
        writeFileAtomic(command.output, text);
      } catch (error) {
        process.stderr.write(`agent: cannot write ${command.output}: ${(error as Error).message}\n`);
        process.exit(1);
      }
      return;
    }
  }
}
