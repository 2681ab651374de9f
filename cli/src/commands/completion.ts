// Shell completion. The scripts are thin: each asks the hidden
// `sextantctl __complete -- WORDS…` for the candidates of the last word, which
// walks the program's own command tree (commands, their flags and arguments),
// so every command registered in main.ts completes with no list to keep.
// Kinds come from @sextant/validation's KINDS; proxy ids from push's
// /debug/proxy_status (every replica's) and namespaces from ingest, when they answer.
import type { Argument, Command, Option } from "commander";
import { type ConnectionFlags, resolveConnection } from "../connection.js";
import { LEVELS } from "../findings.js";
import { exitOnUsageError } from "../ingest-client.js";
import { kindNames } from "../kinds.js";

const SHELLS = ["bash", "zsh", "fish"] as const;

/** `sextantctl completion bash|zsh|fish` and the hidden `__complete` it calls. */
export function registerCompletion(program: Command): void {
  program
    .command("completion")
    .description("print a shell completion script (bash, zsh or fish)")
    .argument("<shell>", SHELLS.join(", "))
    .addHelpText(
      "after",
      [
        "",
        "Load it in the current shell:",
        "  bash: source <(sextantctl completion bash)",
        "  zsh:  source <(sextantctl completion zsh)     (after compinit)",
        "  fish: sextantctl completion fish | source",
      ].join("\n"),
    )
    .exitOverride(exitOnUsageError)
    .action((shell: string) => {
      const script = SCRIPTS[shell as (typeof SHELLS)[number]];
      if (!script) {
        console.error(`error: no completion for shell "${shell}": use ${SHELLS.join(", ")}`);
        process.exitCode = 2;
        return;
      }
      console.log(script(program));
    });
  program
    .command("__complete", { hidden: true })
    .description("print the completions of the last word (used by the completion scripts)")
    .argument("[words...]", "the command line after sextantctl, the word being completed last")
    .action(async (words: string[]) => {
      for (const candidate of await complete(program, words)) console.log(candidate);
    });
}

const bash = () => `# bash completion for sextantctl: source <(sextantctl completion bash)
_sextantctl() {
  local IFS=$'\\n'
  COMPREPLY=( $(sextantctl __complete -- "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) )
}
complete -o default -F _sextantctl sextantctl`;

const zsh = () => `#compdef sextantctl
# zsh completion for sextantctl: source <(sextantctl completion zsh)
_sextantctl() {
  local -a candidates
  candidates=("\${(@f)$(sextantctl __complete -- "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  if [[ -n "\${candidates[1]}" ]]; then
    compadd -a candidates
  else
    _files
  fi
}
if [[ "\${funcstack[1]}" = "_sextantctl" ]]; then
  _sextantctl "$@"
else
  compdef _sextantctl sextantctl
fi`;

/** fish: the commands with their descriptions up front, everything else from __complete. */
const fish = (program: Command) =>
  [
    "# fish completion for sextantctl: sextantctl completion fish | source",
    "function __sextantctl_complete",
    "    set -l words (commandline -opc) (commandline -ct)",
    "    sextantctl __complete -- $words[2..-1] 2>/dev/null",
    "end",
    ...visibleCommands(program).map(
      (command) =>
        `complete -c sextantctl -n __fish_use_subcommand -f -a ${command.name()} -d ${fishQuote(command.description())}`,
    ),
    "complete -c sextantctl -n 'not __fish_use_subcommand' -a '(__sextantctl_complete)'",
  ].join("\n");

const SCRIPTS: Record<(typeof SHELLS)[number], (program: Command) => string> = { bash, zsh, fish };

function fishQuote(text: string): string {
  return `'${text.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
}

function visibleCommands(program: Command): Command[] {
  return program.commands.filter((command) => !(command as unknown as { _hidden: boolean })._hidden);
}

function flagsOf(command: Command): string[] {
  return command.options.flatMap((option) => [option.long, option.short].filter(Boolean) as string[]);
}

function findOption(command: Command, flag: string): Option | undefined {
  const name = flag.split("=")[0];
  return command.options.find((option) => option.long === name || option.short === name);
}

/** The candidates for the last of words, the command line after `sextantctl`. */
async function complete(program: Command, words: readonly string[]): Promise<string[]> {
  const current = words.at(-1) ?? "";
  let command = program;
  let positional = 0;
  let pending: Option | undefined;
  for (const word of words.slice(0, -1)) {
    if (pending) {
      pending = undefined;
    } else if (word.startsWith("-")) {
      const option = findOption(command, word) ?? findOption(program, word);
      if (option && (option.required || option.optional) && !word.includes("=")) pending = option;
    } else if (command === program && program.commands.some((c) => c.name() === word)) {
      command = program.commands.find((c) => c.name() === word)!;
    } else {
      positional++;
    }
  }
  const candidates = pending
    ? await optionValues(program, pending)
    : current.startsWith("-")
      ? [...flagsOf(command), ...(command === program ? [] : flagsOf(program))]
      : command === program
        ? visibleCommands(program).map((c) => c.name())
        : await argumentValues(program, command.registeredArguments, positional);
  return candidates.filter((candidate) => candidate.startsWith(current));
}

async function optionValues(program: Command, option: Option): Promise<string[]> {
  if (option.argChoices) return option.argChoices;
  if (option.long === "--output") return ["table", "yaml", "json"];
  if (option.long?.endsWith("-threshold")) return [...LEVELS];
  if (option.long === "--namespace") return namespaces(program);
  return []; // files and URLs: the shell's own completion
}

async function argumentValues(program: Command, args: readonly Argument[], index: number): Promise<string[]> {
  const arg = args[index] ?? (args.at(-1)?.variadic ? args.at(-1) : undefined);
  if (!arg) return [];
  if (arg.argChoices) return arg.argChoices;
  const name = arg.name();
  if (name === "shell") return [...SHELLS];
  if (/kind/i.test(name)) return kindNames();
  if (/proxy/i.test(name)) return proxyIds(program);
  return [];
}

/** Sends an authenticated GET; undefined when the service does not answer 200 within a second. */
async function getJson(url: string, token: string | undefined): Promise<unknown> {
  try {
    const response = await fetch(url, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(1000),
    });
    return response.ok ? await response.json() : undefined;
  } catch {
    return undefined;
  }
}

/** The proxies connected to every push replica (push's /debug/proxy_status), if push answers. */
async function proxyIds(program: Command): Promise<string[]> {
  const { push, token } = resolveConnection(program.opts<ConnectionFlags>());
  const records = await getJson(`${push}/debug/proxy_status`, token);
  if (!Array.isArray(records)) return [];
  return [...new Set(records.map((entry: { proxyId?: string }) => entry.proxyId ?? ""))]
    .filter(Boolean)
    .sort();
}

/** The namespaces of ingest's stored config, if ingest answers. */
async function namespaces(program: Command): Promise<string[]> {
  const { ingest, token } = resolveConnection(program.opts<ConnectionFlags>());
  const config = (await getJson(`${ingest}/v1/config`, token)) as
    | { items?: Array<{ metadata?: { namespace?: string } }> }
    | undefined;
  const found = (config?.items ?? []).map((item) => item.metadata?.namespace ?? "");
  return [...new Set(["default", ...found])].filter(Boolean).sort();
}
