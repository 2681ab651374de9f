// Every service's settings, as they are read from the environment at start
// (an env file: one NAME=VALUE a line), and the agent's bootstrap files
// (Envoy's and gRPC's) built from the agent's settings when they parse. A bad
// value must be refused with a SettingsError that names it.
import {
  agentSettings,
  bootstrapText,
  envoyBootstrapFromSettings,
  grpcBootstrapFromSettings,
} from "@sextant/agent/fuzzing";
import { caSettings } from "@sextant/ca/fuzzing";
import { discoverySettings } from "@sextant/discovery/fuzzing";
import { ingestSettings } from "@sextant/ingest/fuzzing";
import { pushSettings } from "@sextant/push/fuzzing";
import { parseSettings, SettingsError } from "@sextant/runtime";
import { webhookSettings } from "@sextant/webhook/fuzzing";
import type { FuzzTarget } from "../target.js";

/** NAME=VALUE lines; a later line wins, as in an env file. */
export function envOf(input: Uint8Array): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of Buffer.from(input).toString("utf8").split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return env;
}

const SERVICE_SCHEMAS = [caSettings, discoverySettings, ingestSettings, pushSettings, webhookSettings];

function refused(parse: () => void): void {
  try {
    parse();
  } catch (error) {
    if (!(error instanceof SettingsError)) throw error;
  }
}

export const target: FuzzTarget = {
  tokens: [
    "\n",
    "=",
    "=0",
    "=-1",
    "=65536",
    "=true",
    "=off",
    "=1e309",
    "=0x10",
    "=90d",
    "=1h30m",
    "=24h0m0s",
    "=-5s",
    "=9999999999999999999999h",
    "=NaN",
    "=Infinity",
    "= ",
    "LOG_LEVEL=",
    "PROXY_CONFIG={",
    "ISTIO_META_",
    "spiffe://",
    ",",
    ":",
  ],
  run(input) {
    const env = envOf(input);
    for (const schema of SERVICE_SCHEMAS) refused(() => parseSettings(schema, env));
    refused(() => {
      const settings = parseSettings(agentSettings, env);
      bootstrapText(envoyBootstrapFromSettings(settings));
      bootstrapText(grpcBootstrapFromSettings(settings));
    });
  },
  refusal: () => false,
};
