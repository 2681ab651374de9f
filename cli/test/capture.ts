import type { Command } from "commander";
import { buildProgram } from "../src/main.js";

/** What one in-process run of sextantctl printed, and its exit code. */
export interface CliRun {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** Runs sextantctl (or a program built from it) in-process, capturing console.log (stdout), console.error (stderr) and the exit code. */
export async function runCli(args: string[], program: Command = buildProgram()): Promise<CliRun> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const { log, error } = console;
  console.log = (...parts: unknown[]) => stdout.push(parts.join(" "));
  console.error = (...parts: unknown[]) => stderr.push(parts.join(" "));
  process.exitCode = 0;
  try {
    await program.parseAsync(["node", "sextantctl", ...args]);
  } finally {
    console.log = log;
    console.error = error;
  }
  const exitCode = Number(process.exitCode ?? 0);
  process.exitCode = 0;
  return { stdout: stdout.join("\n"), stderr: stderr.join("\n"), exitCode };
}
