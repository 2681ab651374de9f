// The ingest service's composition root: its settings and its runners, in start order.
import { Buckets, busRunner } from "@sextant/bus";
import { baseSettings, DEFAULT_PORTS, portSetting, runService } from "@sextant/runtime";

const settings = baseSettings.extend({
  /** /metrics and /ready. */
  HTTP_PORT: portSetting(DEFAULT_PORTS.ingest.http),
});

await runService({
  service: "ingest",
  settings,
  runners: ({ settings, logger, readiness }) => [
    // Opens the config buckets it is the only writer of; config parsing, validation and the HTTP API come with the ingest issue.
    busRunner({
      url: settings.NATS_URL,
      name: `ingest-${settings.REPLICA_ID}`,
      logger,
      readiness,
      buckets: [Buckets.config, Buckets.configStatus],
    }),
  ],
});
