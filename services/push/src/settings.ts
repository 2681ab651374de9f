import { baseSettings, DEFAULT_PORTS, millisecondsSetting, portSetting } from "@sextant/runtime";
import { z } from "zod";

/** Push's settings, from the environment. Names and defaults follow istiod's where it has them. */
export const pushSettings = baseSettings.extend({
  /** /metrics, /ready and /debug/*. */
  HTTP_PORT: portSetting(DEFAULT_PORTS.push.http),
  /** Plaintext ADS. */
  XDS_PORT: portSetting(DEFAULT_PORTS.push.xds),
  /** Quiet time after a change before pushing (istiod: PILOT_DEBOUNCE_AFTER). */
  PUSH_DEBOUNCE_AFTER: millisecondsSetting(100),
  /** Longest a burst of changes can delay a push (istiod: PILOT_DEBOUNCE_MAX). */
  PUSH_DEBOUNCE_MAX: millisecondsSetting(10_000),
  /** Proxies pushed to at once (istiod: PILOT_PUSH_THROTTLE). */
  PUSH_CONCURRENCY: z.coerce.number().int().positive().default(100),
  /** The cluster's DNS suffix. */
  DOMAIN_SUFFIX: z.string().min(1).default("cluster.local"),
  /** How often changed proxy sync states are written to sextant-proxy-status. */
  STATUS_FLUSH_MS: millisecondsSetting(1_000),
});

/** Push's parsed settings. */
export type PushSettings = z.infer<typeof pushSettings>;
