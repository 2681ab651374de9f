import { isIPv6 } from "node:net";
import { envoyLogArgs, type ProxyArgs } from "./proxy-command.js";

/** What Envoy's command line is built from. */
export interface EnvoyArgsInputs {
  bootstrapPath: string;
  instanceIp: string;
  proxy: Pick<ProxyArgs, "proxyLogLevel" | "proxyComponentLogLevel">;
  /** Envoy's --drain-time-s (ProxyConfig drainDuration). */
  drainDurationSeconds: number;
  /** Worker threads (see workerThreads); undefined or 0 leaves them to Envoy. */
  concurrency: number | undefined;
}

/**
 * Envoy's arguments as istio-agent passes them (pkg/envoy/proxy.go): the
 * bootstrap, the drain time and immediate drain strategy, the local address
 * family of the workload's IP, a 1 s access-log flush, no hot restart,
 * tolerance for unknown static fields, the log levels, and the worker count
 * when there is one.
 */
export function envoyArgs(inputs: EnvoyArgsInputs): string[] {
  const { concurrency } = inputs;
  return [
    "-c",
    inputs.bootstrapPath,
    "--drain-time-s",
    String(Math.trunc(inputs.drainDurationSeconds)),
    "--drain-strategy",
    "immediate",
    "--local-address-ip-version",
    isIPv6(inputs.instanceIp) ? "v6" : "v4",
    "--file-flush-interval-msec",
    "1000",
    "--disable-hot-restart",
    "--allow-unknown-static-fields",
    ...envoyLogArgs(inputs.proxy),
    ...(concurrency ? ["--concurrency", String(concurrency)] : []),
  ];
}
