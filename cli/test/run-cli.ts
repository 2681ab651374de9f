import { buildProgram } from "../src/main.js";

/** What one sextantctl run printed, and its exit code. */
export interface CliRun {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** Runs sextantctl in-process, capturing its output and exit code. */
export async function runCli(args: string[]): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const { log, error } = console;
  const previousExit = process.exitCode;
  process.exitCode = undefined;
  console.log = (...parts: unknown[]) => out.push(parts.join(" "));
  console.error = (...parts: unknown[]) => err.push(parts.join(" "));
  try {
    const program = buildProgram().exitOverride();
    // Commander copies exitOverride only to commands added after it: usage errors throw instead of exiting.
    for (const command of program.commands) command.exitOverride();
    await program.parseAsync(["node", "sextantctl", ...args]);
    return { stdout: out.join("\n"), stderr: err.join("\n"), exitCode: Number(process.exitCode ?? 0) };
  } finally {
    console.log = log;
    console.error = error;
    process.exitCode = previousExit;
  }
}
