// The webhook service's composition root: its settings and its runners, in start order.
import { busRunner } from "@sextant/bus";
import { baseSettings, DEFAULT_PORTS, portSetting, runService } from "@sextant/runtime";

const settings = baseSettings.extend({
  /** /metrics and /ready. */
  HTTP_PORT: portSetting(DEFAULT_PORTS.webhook.http),
});

await runService({
  service: "webhook",
  settings,
  runners: ({ settings, logger, readiness }) => [
    // Connects to NATS; /inject and /validate on 15017 come with the webhook issue.
    busRunner({
      url: settings.NATS_URL,
      name: `webhook-${settings.REPLICA_ID}`,
      logger,
      readiness,
    }),
  ],
});
