// The push service's composition root: its settings and its runners, in start order.
import { Buckets, busRunner } from "@sextant/bus";
import { baseSettings, DEFAULT_PORTS, portSetting, runService } from "@sextant/runtime";

const settings = baseSettings.extend({
  /** /metrics and /ready. */
  HTTP_PORT: portSetting(DEFAULT_PORTS.push.http),
});

await runService({
  service: "push",
  settings,
  runners: ({ settings, logger, readiness }) => [
    // Opens the proxy-status bucket it writes; the xDS server on 15010/15012 comes with the push issue.
    busRunner({
      url: settings.NATS_URL,
      name: `push-${settings.REPLICA_ID}`,
      logger,
      readiness,
      buckets: [Buckets.proxyStatus],
    }),
  ],
});
