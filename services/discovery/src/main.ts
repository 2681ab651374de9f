// The discovery service's composition root: its settings and its runners, in start order.
import { Buckets, busRunner } from "@sextant/bus";
import { baseSettings, DEFAULT_PORTS, portSetting, runService } from "@sextant/runtime";

const settings = baseSettings.extend({
  /** /metrics and /ready. */
  HTTP_PORT: portSetting(DEFAULT_PORTS.discovery.http),
});

await runService({
  service: "discovery",
  settings,
  runners: ({ settings, logger, readiness }) => [
    // Opens the registry buckets it writes; the Kubernetes and ServiceEntry sources come with the discovery issue.
    busRunner({
      url: settings.NATS_URL,
      name: `discovery-${settings.REPLICA_ID}`,
      logger,
      readiness,
      buckets: [Buckets.services, Buckets.endpoints],
    }),
  ],
});
