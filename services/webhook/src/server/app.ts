import type { Logger } from "@sextant/observability";
import express, { type NextFunction, type Request, type Response } from "express";
import { admitInjection, type NamespaceLabels } from "../admission/inject.js";
import type { WebhookMetrics } from "../admission/metrics.js";
import {
  type AdmissionRequest,
  type AdmissionResponse,
  deny,
  parseReview,
  reviewResponse,
} from "../admission/review.js";
import { admitValidation } from "../admission/validate.js";
import type { InjectionConfig } from "../inject/inject.js";
import type { NodeVersion } from "../inject/native.js";
import type { ProxyConfigResource } from "../inject/proxy-configs.js";

/** What the admission app needs. */
export interface AdmissionAppOptions {
  injection: InjectionConfig;
  metrics: WebhookMetrics;
  logger: Logger;
  /** Larger bodies get 400 before they are parsed. */
  maxBodyBytes: number;
  namespaceLabels?: NamespaceLabels;
  /** The cluster's nodes, for native-sidecar `auto` mode. */
  nodes?: () => readonly NodeVersion[] | undefined;
  /** The stored ProxyConfigs, merged into each injected pod's proxy config. */
  proxyConfigs?: () => readonly ProxyConfigResource[];
}

/**
 * The admission HTTP app: POST /inject and POST /validate, AdmissionReview
 * admission.k8s.io/v1 in and out. A body that is not an AdmissionReview gets
 * 400 with a message (or, when it has a uid, allowed: false); nothing a
 * client sends can take the process down.
 */
export function createAdmissionApp(options: AdmissionAppOptions): express.Express {
  const { metrics, logger } = options;
  const app = express();
  app.disable("x-powered-by");
  // Any content type: the API server sends application/json, but a wrong header should not bypass the checks.
  app.use(express.json({ limit: options.maxBodyBytes, type: () => true, strict: true }));

  const admission =
    (path: string, admit: (request: AdmissionRequest) => AdmissionResponse) =>
    (req: Request, res: Response) => {
      const end = metrics.duration.startTimer({ path });
      try {
        const parsed = parseReview(req.body);
        if (!parsed.ok) {
          logger.warn({ path, reason: parsed.message }, "bad admission request");
          if (parsed.uid !== undefined) {
            res.json(reviewResponse(deny(parsed.uid, parsed.message)));
          } else {
            metrics.httpErrors.inc({ status: "400" });
            res.status(400).type("text/plain").send(parsed.message);
          }
          return;
        }
        const response = admit(parsed.request);
        if (!response.allowed)
          logger.info({ path, uid: response.uid, reason: response.status?.message }, "admission denied");
        res.json(reviewResponse(response));
      } catch (error) {
        // admit() handles what it expects; this is the last guard.
        logger.error({ path, err: error }, "admission request failed");
        metrics.httpErrors.inc({ status: "500" });
        res
          .status(500)
          .type("text/plain")
          .send(`internal error: ${(error as Error).message}`);
      } finally {
        end();
      }
    };

  app.post(
    "/inject",
    admission("/inject", (request) =>
      admitInjection(request, options.injection, {
        metrics,
        namespaceLabels: options.namespaceLabels,
        nodes: options.nodes,
        proxyConfigs: options.proxyConfigs,
      }),
    ),
  );
  app.post(
    "/validate",
    admission("/validate", (request) => admitValidation(request, metrics)),
  );

  // Body-parser errors (bad JSON, too large, bad encoding) all become 400 with a message.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const e = error as { type?: string; message?: string; status?: number };
    const message =
      e.type === "entity.too.large"
        ? `request body larger than ${options.maxBodyBytes} bytes`
        : `malformed request body: ${e.message ?? String(error)}`;
    metrics.httpErrors.inc({ status: "400" });
    logger.warn({ reason: message }, "bad admission request");
    if (!res.headersSent) res.status(400).type("text/plain").send(message);
  });
  return app;
}
