import { isDeepStrictEqual } from "node:util";
import { type AccessRequest, type AuthChain, AuthUnavailableError, type Caller } from "@sextant/auth";
import type { MemberRecord } from "@sextant/bus";
import { configKey } from "@sextant/model";
import type { Logger, Registry } from "@sextant/observability";
import type { ConfigResource, ConfigStatus } from "@sextant/proto";
import { KINDS } from "@sextant/validation";
import express, { type ErrorRequestHandler, type Request, type Response } from "express";
import type { AnalysisReportEntry } from "../analysis/report.js";
import type { Applier, ApplyOutcome, Denial } from "../apply/applier.js";
import type { DocumentError, PreparedResource } from "../apply/prepare.js";
import { isGatewayApiKind } from "../gateway-status/status-object.js";
import type { SourceErrors } from "../sources/file-source.js";
import type { ConfigStore } from "../store/config-store.js";
import {
  type ApiAudit,
  authenticate,
  callerOf,
  listFilter,
  sendForbidden,
  sourceAddress,
} from "./api-auth.js";
import { inFlightLimit } from "./in-flight-limit.js";
import { membersRoute } from "./members-route.js";
import { resolveKindName, toObject } from "./resources.js";

/** What the HTTP API needs. */
export interface HttpApiOptions {
  applier: Applier;
  store: ConfigStore;
  logger: Logger;
  /** Largest request body accepted; larger ones get 413. */
  maxBodyBytes: number;
  /** The analysis report for GET /v1/analyze: the resources' messages and the sources' errors. */
  analysis: () => Promise<{ messages: AnalysisReportEntry[]; sources: SourceErrors[] }>;
  /** The running control-plane processes for GET /v1/members (sextant-members). */
  members: () => Promise<MemberRecord[]>;
  /** Authenticates every /v1 request. */
  auth: AuthChain;
  /** Counts refusals and changes; logs each change. */
  audit: ApiAudit;
  /** Requests served at once; more are answered 429 with Retry-After (MAX_REQUESTS_IN_FLIGHT). */
  maxInFlight: number;
  /** Where the in-flight gauge and the overload refusals are counted. */
  metrics: Registry;
}

/**
 * The config API on ingest's HTTP port:
 *
 * | request | answer |
 * |---|---|
 * | POST /v1/apply | 200 with created/configured/unchanged per resource; 400 with every error, nothing stored |
 * | POST /v1/validate | the same checks; nothing stored |
 * | GET /v1/config?kind=&namespace= | the stored resources |
 * | GET /v1/config/{kind}/{namespace}/{name}[/status] | one resource (a Gateway API one with its status), or 404 |
 * | DELETE /v1/config/{kind}/{namespace}/{name} | deletes it, or 404 |
 * | GET /v1/analyze | validation, analysis and NACK messages |
 * | GET /v1/trace/{kind}/{namespace}/{name} | the last change's trace: stored, built, each proxy's answer; or 404 |
 * | GET /v1/members | every running service process: service, version, instance, start time |
 *
 * More than `maxInFlight` requests at once: 429 with `Retry-After`, before
 * anything else is done.
 *
 * Every request needs `Authorization: Bearer <token>` (401 without a known
 * one, 429 after too many failures from one address) and the verb on the
 * kind and namespace it touches (403 naming what was refused); listings
 * leave out what the caller may not `list`. /v1/members needs the token only.
 */
export function createHttpApi(options: HttpApiOptions): express.Express {
  const app = express();
  app.disable("x-powered-by");
  // Raw bytes, whatever the content type: YAML, JSON and garbage alike reach
  // the parser, which says what is wrong with them.
  const body = express.raw({ type: () => true, limit: options.maxBodyBytes });
  const { audit } = options;
  // First of all: a request refused for overload costs no review and no body.
  app.use("/v1", inFlightLimit(options.maxInFlight, options.metrics));
  // Before the body is read: an unauthenticated request costs no parsing.
  app.use("/v1", authenticate(options.auth, audit));

  /**
   * The documents of an apply the caller may not write: `create` when new,
   * `update` when stored and changed, as kubectl apply. Re-applying what is
   * stored unchanged needs only `create`, the right to have put it there: a
   * client that may only create and delete (discovery's auto-registration)
   * can repeat an apply after a retry or a restart.
   */
  const writeDenials = async (caller: Caller, resources: PreparedResource[]) => {
    const denials: Denial[] = [];
    for (const { document, resource } of resources) {
      const { kind, namespace, name } = resource;
      const stored = await options.store.get({ kind, namespace, name });
      const verb = !stored || sameContent(stored, resource) ? "create" : "update";
      const access: AccessRequest = { verb, kind, namespace, name };
      const decision = await caller.authorize(access);
      if (!decision.allowed) denials.push({ request: access, reason: decision.reason, document });
    }
    return denials;
  };

  app.post("/v1/apply", body, async (request, response) => {
    const input = requestBody(request);
    if (!input) return void emptyBody(response);
    const caller = callerOf(response);
    const outcome = await options.applier.applyAs(input, "http", {
      subject: caller.subject,
      denied: (resources) => writeDenials(caller, resources),
    });
    if (!outcome.ok && outcome.reason === "forbidden")
      return void sendForbidden(response, audit, caller, outcome.denials, "nothing was stored");
    if (outcome.ok || outcome.reason === "unavailable") {
      for (const { ref, result, generation } of outcome.applied) {
        if (result === "unchanged") continue;
        const verb = result === "created" ? "create" : "update";
        audit.changed(caller, { verb, ...ref, generation }, sourceAddress(request));
      }
    }
    sendApplyOutcome(response, outcome);
  });

  app.post("/v1/validate", body, async (request, response) => {
    const input = requestBody(request);
    if (!input) return void emptyBody(response);
    const { resources, errors } = options.applier.validate(input);
    if (errors.length > 0) return void sendInvalid(response, errors, "nothing would be stored");
    // A dry run is authorized as the apply itself would be, as Kubernetes authorizes dryRun.
    const caller = callerOf(response);
    const denied = await writeDenials(caller, resources);
    if (denied.length > 0) return void sendForbidden(response, audit, caller, denied, "");
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
    const mayList = listFilter(callerOf(response));
    const allowed = await Promise.all(resources.map((r) => mayList(r.kind, r.namespace)));
    const visible = resources.filter((_, i) => allowed[i]);
    // Only the Gateway API's kinds show a status: the others' statuses are not read.
    const statuses = visible.some((resource) => isGatewayApiKind(resource.kind))
      ? new Map((await options.store.statuses()).map((status) => [configKey(status), status]))
      : new Map<string, ConfigStatus>();
    response.json({
      items: visible.map((resource) => toObject(resource, statuses.get(configKey(resource)))),
    });
  });

  const getResource = async (request: Request<ResourceParams>, response: Response) => {
    const kind = resolveKindName(request.params.kind);
    if (!kind) return void unknownKind(response, request.params.kind);
    const ref = { kind, namespace: request.params.namespace, name: request.params.name };
    if (!(await authorized(response, { verb: "get", ...ref }))) return;
    const resource = await options.store.get(ref);
    if (!resource) return void notFound(response, ref);
    const status = isGatewayApiKind(kind) ? await options.store.getStatus(ref) : undefined;
    response.json(toObject(resource, status));
  };
  app.get("/v1/config/:kind/:namespace/:name", getResource);
  // As the Kubernetes status subresource: the same object, with its status.
  app.get("/v1/config/:kind/:namespace/:name/status", getResource);

  app.delete("/v1/config/:kind/:namespace/:name", async (request, response) => {
    const kind = resolveKindName(request.params.kind);
    if (!kind) return void unknownKind(response, request.params.kind);
    const ref = { kind, namespace: request.params.namespace, name: request.params.name };
    if (!(await authorized(response, { verb: "delete", ...ref }))) return;
    const generation = (await options.store.get(ref))?.generation ?? 0;
    if (!(await options.store.delete(ref))) return void notFound(response, ref);
    audit.changed(callerOf(response), { verb: "delete", ...ref, generation }, sourceAddress(request));
    response.json({ deleted: ref });
  });

  // Authorized as reading the resource: the trace shows its generation and who changed it.
  app.get("/v1/trace/:kind/:namespace/:name", async (request, response) => {
    const kind = resolveKindName(request.params.kind);
    if (!kind) return void unknownKind(response, request.params.kind);
    const ref = { kind, namespace: request.params.namespace, name: request.params.name };
    if (!(await authorized(response, { verb: "get", ...ref }))) return;
    const report = await options.store.traces.report(ref);
    if (!report)
      return void response.status(404).json({
        error: `no change of ${kind} ${ref.namespace}/${ref.name} was recorded in the last hour (traces expire after an hour)`,
      });
    response.json(report);
  });

  app.get("/v1/analyze", async (_request, response) => {
    const { messages, sources } = await options.analysis();
    const mayList = listFilter(callerOf(response));
    // An error that names no kind (a file that does not parse) could be about
    // anything in its namespace: shown to callers who may list every kind there.
    const mayListError = async (error: DocumentError) => {
      const namespace = error.namespace ?? "default";
      const kinds = error.kind && KINDS.has(error.kind) ? [error.kind] : [...KINDS.keys()];
      return (await Promise.all(kinds.map((kind) => mayList(kind, namespace)))).every(Boolean);
    };
    const visibleMessages = await filterAsync(messages, (m) => mayList(m.kind, m.namespace));
    const visibleSources = (
      await Promise.all(
        sources.map(async (source) => ({
          ...source,
          errors: await filterAsync(source.errors, mayListError),
        })),
      )
    ).filter((source) => source.errors.length > 0);
    response.json({ messages: visibleMessages, sources: visibleSources });
  });

  app.get("/v1/members", membersRoute(options.members));

  app.use((request, response) => {
    response.status(404).json({ error: `no route ${request.method} ${request.path}` });
  });
  app.use(errorHandler(options));
  return app;

  /** Whether the caller may make the request; if not, answers 403. */
  async function authorized(response: Response, access: AccessRequest): Promise<boolean> {
    const caller = callerOf(response);
    const decision = await caller.authorize(access);
    if (!decision.allowed)
      sendForbidden(response, audit, caller, [{ request: access, reason: decision.reason }], "");
    return decision.allowed;
  }
}

/** The path parameters naming one resource. */
interface ResourceParams {
  kind: string;
  namespace: string;
  name: string;
}

function sameContent(a: ConfigResource, b: ConfigResource): boolean {
  const content = ({ apiVersion, labels, annotations, spec }: ConfigResource) => ({
    apiVersion,
    labels,
    annotations,
    spec: spec ?? {},
  });
  return isDeepStrictEqual(content(a), content(b));
}

async function filterAsync<T>(items: readonly T[], keep: (item: T) => Promise<boolean>): Promise<T[]> {
  const kept = await Promise.all(items.map(keep));
  return items.filter((_, i) => kept[i]);
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
    } else if (error instanceof AuthUnavailableError) {
      // A SubjectAccessReview that could not be made: the caller may retry.
      options.logger.warn({ err: error, path: request.path }, "authorization unavailable");
      response.status(503).json({ error: error.message });
    } else {
      options.logger.error({ err: error, path: request.path }, "request failed");
      const unavailable = /timeout|closed|connection|unavailable/i.test(String(error?.message));
      response.status(unavailable ? 503 : 500).json({
        error: unavailable ? `the config store is unavailable: ${error.message}` : "internal error",
      });
    }
  };
}
