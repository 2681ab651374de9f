/**
 * Istio's metrics merging: Prometheus scrapes the agent's /stats/prometheus
 * on the status port, which serves Envoy's, the agent's and the app's metrics
 * together. The app's own prometheus.io/* annotations move to the proxy env
 * ISTIO_PROMETHEUS_ANNOTATIONS so that the agent knows where to find them.
 */

import { parseGoBool } from "./annotations.js";

/** The proxy env that carries the app's original scrape settings (Istio's name). */
export const PROMETHEUS_ENV = "ISTIO_PROMETHEUS_ANNOTATIONS";
/** Where the agent serves the merged metrics. */
export const MERGED_METRICS_PATH = "/stats/prometheus";

// Prometheus matches annotations by their sanitized label name, so prometheus.io/port and
// prometheus_io_port are the same annotation; Istio compares them the same way.
const SCRAPE = "prometheus_io_scrape";
const PATH = "prometheus_io_path";
const PORT = "prometheus_io_port";

function sanitize(name: string): string {
  return name.replace(/[^a-zA-Z0-9_]/g, "_");
}

/** The outcome of {@link mergePrometheus}. */
export type PrometheusMerge =
  | { merged: false }
  | { merged: true; annotations: Record<string, string>; env: string | undefined }
  | { problem: string };

/**
 * Decides the pod's scrape annotations. Not merged when the pod opts out
 * (prometheus.io/scrape false, or merging disabled) or when it already points
 * at the status port (a re-injected pod). Otherwise every prometheus.io/*
 * variant is replaced by scrape/path/port of the agent, and the originals go
 * to the env as Istio's JSON {"scrape","path","port"} ("" for one not set; no
 * env when none is). A port that is not 1-65535, or that is the status port or
 * one of the proxy's, is refused: the agent could not scrape it.
 */
export function mergePrometheus(
  annotations: Record<string, string>,
  statusPort: number,
  enabled: boolean,
): PrometheusMerge {
  const find = (label: string) => Object.entries(annotations).find(([k]) => sanitize(k) === label)?.[1];
  const scrape = find(SCRAPE);
  if (!enabled || (scrape !== undefined && parseGoBool(scrape) === false)) return { merged: false };
  const target = String(statusPort);
  const port = find(PORT);
  if (port === target) return { merged: false };
  if (port !== undefined) {
    const n = /^\d+$/.test(port) ? Number(port) : Number.NaN;
    if (!(n >= 1 && n <= 65535))
      return { problem: `prometheus.io/port=${JSON.stringify(port)} must be a port from 1 to 65535` };
    if (RESERVED_PORTS.includes(n) || n === statusPort)
      return {
        problem: `prometheus.io/port=${port} is the proxy's own port; the app's metrics must be on another port`,
      };
  }
  const path = find(PATH);
  // Istio's JSON has the three keys always, "" for one not set.
  const original = { scrape: scrape ?? "", path: path ?? "", port: port ?? "" };
  const anySet = scrape !== undefined || path !== undefined || port !== undefined;
  const out = Object.fromEntries(
    Object.entries(annotations).filter(([k]) => ![SCRAPE, PATH, PORT].includes(sanitize(k))),
  );
  out["prometheus.io/port"] = target;
  out["prometheus.io/path"] = MERGED_METRICS_PATH;
  out["prometheus.io/scrape"] = "true";
  return { merged: true, annotations: out, env: anySet ? JSON.stringify(original) : undefined };
}

/** The proxy's ports that an app's metrics cannot be on (Envoy admin and stats, health, the agent, DNS). */
const RESERVED_PORTS = [15000, 15001, 15004, 15006, 15008, 15020, 15021, 15053, 15090];
