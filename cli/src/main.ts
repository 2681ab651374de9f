#!/usr/bin/env node
// sextantctl's composition root: the program, its global flags, and one
// module per command under src/commands/ (each exports a register function).
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { Command } from "commander";
import { registerAnalyze } from "./commands/analyze.js";
import { registerApply } from "./commands/apply.js";
import { registerCompletion } from "./commands/completion.js";
import { registerDelete } from "./commands/delete.js";
import { registerGet } from "./commands/get.js";
import { registerKubeInject } from "./commands/kube-inject.js";
import { registerProxyConfig } from "./commands/proxy-config.js";
import { registerProxyStatus } from "./commands/proxy-status.js";
import { registerTrace } from "./commands/trace.js";
import { registerVersion } from "./commands/version.js";

/** Builds the program; tests run it in-process with their own output. */
export function buildProgram(): Command {
  const program = new Command("sextantctl")
    .description(
      "The command line for a Sextant mesh: istioctl's everyday commands.\n" +
        "Each connection setting comes from its flag, else its SEXTANT_* variable, else the config file\n" +
        "($SEXTANT_CONFIG, else $XDG_CONFIG_HOME/sextant/config.yaml or ~/.config/sextant/config.yaml).",
    )
    .option("--ingest <url>", "ingest's API (env SEXTANT_INGEST; default http://127.0.0.1:8080)")
    .option("--push <url>", "push's HTTP port (env SEXTANT_PUSH; default http://127.0.0.1:15014)")
    .option("--token <token>", "bearer token (env SEXTANT_TOKEN)")
    .option("--token-file <file>", "file holding the bearer token (env SEXTANT_TOKEN_FILE)")
    .showHelpAfterError();
  registerApply(program);
  registerGet(program);
  registerDelete(program);
  registerAnalyze(program);
  registerKubeInject(program);
  registerCompletion(program);
  registerVersion(program);
  registerProxyStatus(program);
  registerProxyConfig(program);
  registerTrace(program);
  return program;
}

// npm installs the bin as a symlink: the module's URL is the real path, argv[1] the link.
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  await buildProgram().parseAsync(process.argv);
}
