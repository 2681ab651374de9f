import type { AccessRequest, AuthChain, Caller } from "@sextant/auth";
import { describeAccess } from "@sextant/auth";
import { Counter, type Logger, type Registry } from "@sextant/observability";
import type { NextFunction, Request, Response } from "express";

/** The config API's authentication metrics and audit log. */
export class ApiAudit {
  private readonly changes: Counter<"verb" | "kind">;
  private readonly failures: Counter<"reason">;

  constructor(
    registry: Registry,
    private readonly logger: Logger,
  ) {
    this.changes = new Counter({
      name: "sextant_ingest_api_changes_total",
      help: "Changes accepted through the config API, by verb (create, update, delete) and kind.",
      labelNames: ["verb", "kind"],
      registers: [registry],
    });
    this.failures = new Counter({
      name: "sextant_ingest_api_auth_failures_total",
      help: "Config API requests refused by authentication or authorization, by reason (missing, malformed, too_large, unknown_token, rate_limited, unavailable, forbidden).",
      labelNames: ["reason"],
      registers: [registry],
    });
  }

  /** Counts a refused request. */
  refused(reason: string): void {
    this.failures.inc({ reason });
  }

  /** One audit line and one count for an accepted change. */
  changed(
    caller: Caller,
    change: { verb: string; kind: string; namespace: string; name: string; generation: number },
    address: string,
  ): void {
    this.changes.inc({ verb: change.verb, kind: change.kind });
    this.logger.info(
      {
        audit: {
          subject: caller.subject,
          authenticator: caller.authenticator,
          verb: change.verb,
          resource: `${change.kind}/${change.namespace}/${change.name}`,
          generation: change.generation,
          sourceAddress: address,
        },
      },
      "config changed",
    );
  }
}

/** The caller the authentication middleware found. */
export function callerOf(response: Response): Caller {
  return response.locals.caller as Caller;
}

/** The address a request came from: the socket's peer, never a header the client could write. */
export function sourceAddress(request: Request): string {
  return request.socket.remoteAddress ?? "unknown";
}

/**
 * Express middleware: authenticates every request it sees by its bearer
 * token; a request that fails gets 401, 429 or 503 with the reason.
 */
export function authenticate(chain: AuthChain, audit: ApiAudit) {
  return async (request: Request, response: Response, next: NextFunction): Promise<void> => {
    try {
      const outcome = await chain.authenticate(request.headers.authorization, sourceAddress(request));
      if (outcome.ok) {
        response.locals.caller = outcome.caller;
        return next();
      }
      audit.refused(outcome.reason);
      response.status(outcome.status).set(outcome.headers).json({ error: outcome.message });
    } catch (error) {
      next(error);
    }
  };
}

/** The 403 answer for requests the caller may not make, each named with subject, verb, kind and namespace. */
export function sendForbidden(
  response: Response,
  audit: ApiAudit,
  caller: Caller,
  denied: ReadonlyArray<{ request: AccessRequest; reason?: string; document?: number }>,
  consequence: string,
): void {
  audit.refused("forbidden");
  const messages = denied.map(
    ({ request, reason }) =>
      `${caller.subject} may not ${describeAccess(request)}${reason ? ` (${reason})` : ""}`,
  );
  response.status(403).json({
    error: `forbidden: ${messages.join("; ")}${consequence ? `; ${consequence}` : ""}`,
    denied: denied.map(({ request, reason, document }) => ({
      ...(document === undefined ? {} : { document }),
      subject: caller.subject,
      verb: request.verb,
      kind: request.kind,
      namespace: request.namespace,
      ...(request.name ? { name: request.name } : {}),
      ...(reason ? { reason } : {}),
    })),
  });
}

/**
 * A per-request memo of `list` decisions by kind and namespace, so a listing
 * asks the authorizer (perhaps a SubjectAccessReview) once per pair.
 */
export function listFilter(caller: Caller): (kind: string, namespace: string) => Promise<boolean> {
  const decisions = new Map<string, Promise<boolean>>();
  return (kind, namespace) => {
    const key = `${kind}/${namespace}`;
    let decision = decisions.get(key);
    if (!decision) {
      decision = caller.authorize({ verb: "list", kind, namespace }).then((d) => d.allowed);
      decisions.set(key, decision);
    }
    return decision;
  };
}
