/** A started (or disabled) OpenTelemetry SDK. */
export interface Telemetry {
  readonly enabled: boolean;
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry Node SDK, configured by the standard OTEL_*
 * variables. With OTEL_SDK_DISABLED=true it does nothing and loads nothing:
 * an unconfigured SDK takes seconds to shut down, which tests cannot afford.
 */
export async function startTelemetry(serviceName: string, env = process.env): Promise<Telemetry> {
  if (env.OTEL_SDK_DISABLED === "true") return { enabled: false, shutdown: async () => {} };
  const { NodeSDK } = await import("@opentelemetry/sdk-node");
  const sdk = new NodeSDK({ serviceName });
  sdk.start();
  return { enabled: true, shutdown: () => sdk.shutdown() };
}
