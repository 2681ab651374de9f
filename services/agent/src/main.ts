// The agent service's composition root: its settings and its runners, in start order.
import { busRunner } from "@sextant/bus";
import { baseSettings, DEFAULT_PORTS, portSetting, runService } from "@sextant/runtime";

const settings = baseSettings.extend({
  /** /metrics and /ready. */
  HTTP_PORT: portSetting(DEFAULT_PORTS.agent.http),
});

await runService({
  service: "agent",
  settings,
  runners: ({ settings, logger, readiness }) => [
    // Connects to NATS; identity, SDS and the xDS proxy come with the agent issue.
    busRunner({
      url: settings.NATS_URL,
      name: `agent-${settings.REPLICA_ID}`,
      logger,
      readiness,
    }),
  ],
});
