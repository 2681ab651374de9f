import type { Logger } from "@sextant/observability";
import express, { type ErrorRequestHandler, type Request, type Response } from "express";
import type { Applier, ApplyOutcome } from "../apply/applier.js";
import type { DocumentError } from "../apply/prepare.js";
import type { ConfigStore } from "../store/config-store.js";
import { resolveKindName, toObject } from "./resources.js";

/** What the HTTP API needs. */
export interface HttpApiOptions {
  applier: Applier;
  store: ConfigStore;
  logger: Logger;
  /** Largest request body accepted; larger ones get 413. */
  maxBodyBytes: number;
  /** The analysis report for GET /v1/analyze. */
  analysis: () => Promise<unknown>;
}

/**
 * The config API on ingest's HTTP port:
 *
 * | request | answer |
 * |---|---|
 * | POST /v1/apply | 200 with created/configured/unchanged per resource; 400 with every error, nothing stored |
 * | POST /v1/validate | the same checks; nothing stored |
 * | GET /v1/config?kind=&namespace= | the stored resources |
 * | GET /v1/config/{kind}/{namespace}/{name} | one resource, or 404 |
 * | DELETE /v1/config/{kind}/{namespace}/{name} | deletes it, or 404 |
 * | GET /v1/analyze | validation, analysis and NACK messages |
 */
export function createHttpApi(options: HttpApiOptions): express.Express {
  const app = express();
  app.disable("x-powered-by");
  // Raw bytes, whatever the content type: YAML, JSON and garbage alike reach
  // the parser, which says what is wrong with them.
  const body = express.raw({ type: () => true, limit: options.maxBodyBytes });

  app.post("/v1/apply", body, async (request, response) => {
    const input = requestBody(request);
    if (!input) return void emptyBody(response);
    const outcome = await options.applier.apply(input, "http");
    sendApplyOutcome(response, outcome);
  });

  app.post("/v1/validate", body, (request, response) => {
    const input = requestBody(request);
    if (!input) return void emptyBody(response);
    const { resources, errors } = options.applier.validate(input);
    if (errors.length > 0) return void sendInvalid(response, errors, "nothing would be stored");
    response.json({
      valid: true,
      resources: resources.map(({ document, resource, warnings }) => ({
        document,
        kind: resource.kind,
        namespace: resource.namespace,
        name: resource.name,
        warnings,
      })),
    });
  });

  app.get("/v1/config", async (request, response) => {
    const kindParam = typeof request.query.kind === "string" ? request.query.kind : undefined;
    const namespace = typeof request.query.namespace === "string" ? request.query.namespace : undefined;
    const kind = kindParam === undefined ? undefined : resolveKindName(kindParam);
    if (kindParam !== undefined && !kind) return void unknownKind(response, kindParam);
    const resources = await options.store.list({ kind, namespace });
    response.json({ items: resources.map(toObject) });
  });

  app.get("/v1/config/:kind/:namespace/:name", async (request, response) => {
    const kind = resolveKindName(request.params.kind);
    if (!kind) return void unknownKind(response, request.params.kind);
    const ref = { kind, namespace: request.params.namespace, name: request.params.name };
    const resource = await options.store.get(ref);
    if (!resource) return void notFound(response, ref);
    response.json(toObject(resource));
  });

  app.delete("/v1/config/:kind/:namespace/:name", async (request, response) => {
    const kind = resolveKindName(request.params.kind);
    if (!kind) return void unknownKind(response, request.params.kind);
    const ref = { kind, namespace: request.params.namespace, name: request.params.name };
    if (!(await options.store.delete(ref))) return void notFound(response, ref);
    options.logger.info(ref, "deleted");
    response.json({ deleted: ref });
  });

  app.get("/v1/analyze", async (_request, response) => {
    response.json(await options.analysis());
  });

  app.use((request, response) => {
    response.status(404).json({ error: `no route ${request.method} ${request.path}` });
  });
  app.use(errorHandler(options));
  return app;
}

function requestBody(request: Request): Buffer | undefined {
  return Buffer.isBuffer(request.body) && request.body.length > 0 ? request.body : undefined;
}

function emptyBody(response: Response): void {
  response.status(400).json({ error: "the request body is empty: send one or more YAML or JSON documents" });
}

function unknownKind(response: Response, kind: string): void {
  response.status(400).json({ error: `unknown kind "${kind}"` });
}

function notFound(response: Response, ref: { kind: string; namespace: string; name: string }): void {
  response.status(404).json({ error: `${ref.kind} ${ref.namespace}/${ref.name} not found` });
}

function sendInvalid(response: Response, errors: DocumentError[], consequence: string): void {
  const documents = new Set(errors.map((error) => error.document)).size;
  response.status(400).json({
    error: `${documents === 1 ? "1 document is" : `${documents} documents are`} invalid; ${consequence}`,
    errors,
  });
}

function sendApplyOutcome(response: Response, outcome: ApplyOutcome): void {
  if (outcome.ok) {
    response.json({ resources: outcome.applied.map(({ ref, ...rest }) => ({ ...ref, ...rest })) });
  } else if (outcome.reason === "invalid") {
    sendInvalid(response, outcome.errors, "nothing was stored");
  } else {
    response.status(503).json({
      error: outcome.message,
      applied: outcome.applied.map(({ ref, ...rest }) => ({ ...ref, ...rest })),
      notApplied: outcome.notApplied,
    });
  }
}

function errorHandler(options: HttpApiOptions): ErrorRequestHandler {
  return (error, request, response, _next) => {
    const status = typeof error?.status === "number" ? error.status : 500;
    if (error?.type === "entity.too.large") {
      response
        .status(413)
        .json({ error: `the request body is larger than the limit of ${options.maxBodyBytes} bytes` });
    } else if (status >= 400 && status < 500) {
      response.status(status).json({ error: error.message });
    } else {
      options.logger.error({ err: error, path: request.path }, "request failed");
      const unavailable = /timeout|closed|connection|unavailable/i.test(String(error?.message));
      response.status(unavailable ? 503 : 500).json({
        error: unavailable ? `the config store is unavailable: ${error.message}` : "internal error",
      });
    }
  };
}
