// The ca service's composition root: its settings and its runners, in start order.
import { Buckets, busRunner } from "@sextant/bus";
import { baseSettings, DEFAULT_PORTS, portSetting, runService } from "@sextant/runtime";

const settings = baseSettings.extend({
  /** /metrics and /ready. */
  HTTP_PORT: portSetting(DEFAULT_PORTS.ca.http),
});

await runService({
  service: "ca",
  settings,
  runners: ({ settings, logger, readiness }) => [
    // Opens the trust bucket it writes; CreateCertificate on 8060 comes with the CA issue.
    busRunner({
      url: settings.NATS_URL,
      name: `ca-${settings.REPLICA_ID}`,
      logger,
      readiness,
      buckets: [Buckets.trust],
    }),
  ],
});
