// The contract between an injected pod and its agent: which environment
// variables the agent reads, which an injected pod must set, and which files
// and sockets it needs mounted. The webhook's template is checked against
// this (test-e2e/test/injection-contract.test.ts), so neither side can drift.
import { posix } from "node:path";
import { parseSettings } from "@sextant/runtime";
import { nodeFromSettings } from "../bootstrap/from-settings.js";
import type { ProxyNode } from "../node/proxy-node.js";
import { AGENT_SETTING_NAMES, type AgentSettings, agentSettings, settingDefault } from "../settings.js";

/** Istio's open-ended metadata variables: every name with these prefixes is read. */
export const AGENT_ENV_PREFIXES = ["ISTIO_META_", "ISTIO_METAJSON_"] as const;

/** Whether the agent reads the variable `name`: one of its settings, or an ISTIO_META_* / ISTIO_METAJSON_* name. */
export function agentReadsEnv(name: string): boolean {
  return (
    AGENT_SETTING_NAMES.includes(name) ||
    AGENT_ENV_PREFIXES.some((prefix) => name.startsWith(prefix) && name.length > prefix.length)
  );
}

/**
 * The settings an injected pod must set, and why: their defaults suit only a
 * local run (localhost addresses, namespace "default", a detected IP).
 */
export const POD_REQUIRED_ENV: Readonly<Record<string, string>> = {
  POD_NAME: "the node id and NAME",
  POD_NAMESPACE: "the node id, NAMESPACE and the identity",
  SERVICE_ACCOUNT: "the workload identity",
  INSTANCE_IP: "the node id and INSTANCE_IPS",
  CA_ADDR: "where certificates come from",
  TRUST_DOMAIN: "the SPIFFE identity's trust domain",
  DOMAIN_SUFFIX: "the node id's DNS domain",
  PROXY_CONFIG: "the discovery address, drain durations and ports (Istio's ProxyConfig)",
};

/**
 * The files and sockets the agent reads or serves in a pod, by setting, at
 * their default paths made absolute: in the proxy image the agent runs from
 * "/", as istio-agent does, so "./etc/istio/pod/labels" is /etc/istio/pod/labels.
 */
export const POD_PATH_SETTINGS = [
  "POD_LABELS_FILE",
  "POD_ANNOTATIONS_FILE",
  "TOKEN_FILE",
  "CA_ROOT_CERT",
  "SDS_SOCKET",
  "XDS_SOCKET",
  "OUTPUT_CERTS",
] as const;

/** {@link POD_PATH_SETTINGS}'s absolute default paths in a pod. */
export function podPaths(): Record<(typeof POD_PATH_SETTINGS)[number], string> {
  return Object.fromEntries(
    POD_PATH_SETTINGS.map((name) => [name, posix.resolve("/", String(settingDefault(name)))]),
  ) as Record<(typeof POD_PATH_SETTINGS)[number], string>;
}

/** The agent's settings from an environment, as the agent reads them at start (throws SettingsError). */
export function agentSettingsFromEnv(env: Record<string, string | undefined>): AgentSettings {
  return parseSettings(agentSettings, env);
}

/** The node an Envoy sidecar's bootstrap announces, for the agent's settings. */
export function envoyNodeFromSettings(settings: AgentSettings): ProxyNode {
  return nodeFromSettings(settings, "envoy");
}
