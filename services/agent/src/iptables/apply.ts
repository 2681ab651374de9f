// Applies the capture rules to the network namespace this process runs in,
// with iptables-restore --noflush (one transaction per family), only when
// what is installed differs from what the flags ask for; removes them again
// for --cleanup-only. Every system call is a spawned iptables/ip command.
import { spawn } from "node:child_process";
import { chainsOf, ISTIO_CHAIN_PREFIX, type Rule, restoreText, ruleText, type Table } from "./rules.js";

export type Family = "v4" | "v6";

/** The binaries of one family. */
const BINARIES: Record<Family, { iptables: string; save: string; restore: string }> = {
  v4: { iptables: "iptables", save: "iptables-save", restore: "iptables-restore" },
  v6: { iptables: "ip6tables", save: "ip6tables-save", restore: "ip6tables-restore" },
};

export interface CommandResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command, with optional stdin. */
export type RunCommand = (command: string, args: readonly string[], input?: string) => Promise<CommandResult>;

/** A tool this command needs is not installed; the message says which and how to get it. */
export class MissingToolError extends Error {}

/** Spawns the command; a missing binary becomes a MissingToolError naming it. */
export const spawnCommand: RunCommand = (command, args, input) =>
  new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    child.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT")
        reject(
          new MissingToolError(
            `${command} was not found on PATH: install ${command === "ip" ? "iproute2" : "iptables"} (Debian: apt-get install ${command === "ip" ? "iproute2" : "iptables"})`,
          ),
        );
      else reject(error);
    });
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.on("error", () => {
      // The command exited before reading its input; its exit code says why.
    });
    child.stdin.end(input ?? "");
  });

/** What iptables-save shows of Istio's work in one table. */
interface TableState {
  /** Istio's chains and their rules, as iptables-save prints them. */
  readonly chains: Map<string, string[]>;
  /** Rules of built-in chains that jump to one of Istio's chains ("-A OUTPUT -j ISTIO_OUTPUT"). */
  readonly jumps: string[];
}

const isIstioChain = (chain: string) => chain.startsWith(ISTIO_CHAIN_PREFIX);

/** Reads iptables-save output: per table, the ISTIO_ chains with their rules and the jumps into them. */
export function parseSave(text: string): Map<Table, TableState> {
  const tables = new Map<Table, TableState>();
  let current: TableState | undefined;
  for (const line of text.split("\n")) {
    if (line.startsWith("*")) {
      current = { chains: new Map(), jumps: [] };
      tables.set(line.slice(1).trim() as Table, current);
      continue;
    }
    // Comments, COMMIT and policy lines of built-in chains say nothing about Istio's rules.
    if (!current) continue;
    const words = line.split(" ");
    if (line.startsWith(":") && isIstioChain(words[0]!.slice(1))) current.chains.set(words[0]!.slice(1), []);
    if (words[0] !== "-A") continue;
    const chain = words[1] ?? "";
    const jump = words.indexOf("-j");
    if (isIstioChain(chain)) current.chains.get(chain)?.push(line);
    else if (jump > 0 && isIstioChain(words[jump + 1] ?? "")) current.jumps.push(line);
  }
  return tables;
}

/** True when iptables-save shows any of Istio's chains or jumps. */
export function hasIstioState(state: Map<Table, TableState>): boolean {
  return [...state.values()].some((table) => table.chains.size > 0 || table.jumps.length > 0);
}

/** The iptables-restore input that removes every Istio jump and chain iptables-save shows. */
export function cleanupText(state: Map<Table, TableState>): string {
  let text = "";
  for (const [table, { chains, jumps }] of [...state].sort(([a], [b]) => a.localeCompare(b))) {
    if (chains.size === 0 && jumps.length === 0) continue;
    text += `* ${table}\n`;
    // Jumps first, then every chain is emptied before any is deleted: a chain
    // still referenced (by a jump or another chain's rule) cannot be deleted.
    for (const jump of jumps) text += `-D${jump.slice(2)}\n`;
    for (const chain of chains.keys()) text += `-F ${chain}\n`;
    for (const chain of chains.keys()) text += `-X ${chain}\n`;
    text += "COMMIT\n";
  }
  return text;
}

export class IptablesError extends Error {}

/** Istio's iptables, one address family at a time. */
export class IptablesFamily {
  private readonly bin;
  constructor(
    readonly family: Family,
    private readonly run: RunCommand = spawnCommand,
  ) {
    this.bin = BINARIES[family];
  }

  async save(): Promise<string> {
    const result = await this.run(this.bin.save, []);
    if (result.code !== 0) throw new IptablesError(`${this.bin.save} failed: ${result.stderr.trim()}`);
    return result.stdout;
  }

  private async restore(input: string): Promise<void> {
    const result = await this.run(this.bin.restore, ["--noflush"], input);
    if (result.code !== 0)
      throw new IptablesError(
        `${this.bin.restore} --noflush failed: ${result.stderr.trim()}\ninput:\n${input}`,
      );
  }

  /**
   * True when exactly these rules are installed (Istio's check): the same
   * ISTIO_ chains in every table, each with as many rules as planned, and
   * every planned rule found by `iptables -C` (iptables-save rewrites rule
   * text, so texts are not compared).
   */
  async matches(rules: readonly Rule[], state: Map<Table, TableState>): Promise<boolean> {
    const planned = chainsOf(rules);
    for (const table of new Set([...planned.keys(), ...state.keys()])) {
      const want = planned.get(table) ?? [];
      const have = state.get(table)?.chains ?? new Map<string, string[]>();
      if (want.length !== have.size) return false;
      const jumps = rules.filter(
        (rule) => rule.table === table && !isIstioChain(rule.chain) && isIstioChain(rule.args.at(-1) ?? ""),
      );
      if ((state.get(table)?.jumps.length ?? 0) !== jumps.length) return false;
      for (const chain of want) {
        const count = rules.filter((rule) => rule.table === table && rule.chain === chain).length;
        if (have.get(chain)?.length !== count) return false;
      }
    }
    for (const rule of rules) {
      const result = await this.run(this.bin.iptables, ["-t", rule.table, ...ruleText(rule, "-C")]);
      if (result.code !== 0) return false;
    }
    return true;
  }

  /**
   * Installs the rules unless they already are: "unchanged", "applied", or
   * "replaced" when other Istio rules were there (removed first, as Istio's
   * reconcile does, so a changed flag takes effect instead of failing on an
   * existing chain).
   */
  async apply(rules: readonly Rule[]): Promise<"unchanged" | "applied" | "replaced"> {
    if (rules.length === 0) return "unchanged";
    const state = parseSave(await this.save());
    const residue = hasIstioState(state);
    if (residue && (await this.matches(rules, state))) return "unchanged";
    if (residue) await this.removeBuiltInRules(rules);
    const text = (residue ? cleanupText(parseSave(await this.save())) : "") + restoreText(rules);
    await this.restore(text);
    return residue ? "replaced" : "applied";
  }

  /**
   * Removes Istio's chains and every rule jumping into them, and the rules
   * the flags put into built-in chains without a jump (TPROXY marks, excluded
   * interfaces). Returns false when there was nothing to remove.
   */
  async cleanup(rules: readonly Rule[]): Promise<boolean> {
    const removedBuiltIn = await this.removeBuiltInRules(rules);
    const state = parseSave(await this.save());
    if (!hasIstioState(state)) return removedBuiltIn;
    await this.restore(cleanupText(state));
    return true;
  }

  /** Deletes each planned rule of a built-in chain that is installed (`-D` while `-C` finds it). */
  private async removeBuiltInRules(rules: readonly Rule[]): Promise<boolean> {
    let removed = false;
    for (const rule of rules) {
      if (isIstioChain(rule.chain) || isIstioChain(rule.args.at(-1) ?? "")) continue;
      const check = ["-t", rule.table, ...ruleText(rule, "-C")];
      while ((await this.run(this.bin.iptables, check)).code === 0) {
        const result = await this.run(this.bin.iptables, ["-t", rule.table, ...ruleText(rule, "-D")]);
        if (result.code !== 0) break;
        removed = true;
      }
    }
    return removed;
  }
}

/**
 * TPROXY's policy routing (Istio's configureTProxyRoutes): packets carrying
 * the mark are looked up in their own table, whose only route delivers
 * everything locally, so Envoy's transparent socket receives them. Also
 * 127.0.0.6's IPv6 twin ::6 on lo (Istio adds it whenever IPv6 is on).
 * Each step checks first, so a second run changes nothing.
 */
export async function configureRoutes(
  options: { tproxy: { mark: string; table: string } | undefined; ipv6: boolean },
  run: RunCommand = spawnCommand,
): Promise<void> {
  const ip = async (...args: string[]) => {
    const result = await run("ip", args);
    if (result.code !== 0) throw new IptablesError(`ip ${args.join(" ")} failed: ${result.stderr.trim()}`);
    return result.stdout;
  };
  if (options.ipv6) await ip("-6", "addr", "replace", "::6/128", "dev", "lo");
  if (!options.tproxy) return;
  const { mark, table } = options.tproxy;
  const families = options.ipv6 ? (["-4", "-6"] as const) : (["-4"] as const);
  for (const family of families) {
    const markHex = `0x${Number(mark).toString(16)}`;
    const existing = await ip(family, "rule", "show");
    if (!new RegExp(`fwmark ${markHex} lookup ${table}\\b`).test(existing))
      await ip(family, "rule", "add", "fwmark", mark, "lookup", table);
    await ip(
      family,
      "route",
      "replace",
      "local",
      family === "-4" ? "0.0.0.0/0" : "::/0",
      "dev",
      "lo",
      "table",
      table,
    );
  }
}
