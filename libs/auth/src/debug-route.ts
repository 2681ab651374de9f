import { JsonAnswer, type JsonRoute } from "@sextant/observability";
import { describeAccess } from "./access.js";
import { AuthUnavailableError } from "./authenticator.js";
import type { AuthChain } from "./chain.js";

/**
 * A JSON route (a debug endpoint such as /debug/config_dump) that answers
 * only callers who authenticate and may `debug`: 401, 429 or 503 as the
 * chain says, 403 naming the subject otherwise.
 */
export function debugRoute(chain: AuthChain, route: JsonRoute): JsonRoute {
  return async (query, request) => {
    try {
      const outcome = await chain.authenticate(
        request.headers.authorization,
        request.socket.remoteAddress ?? "unknown",
      );
      if (!outcome.ok) return new JsonAnswer(outcome.status, { error: outcome.message }, outcome.headers);
      const access = { verb: "debug" } as const;
      const decision = await outcome.caller.authorize(access);
      if (!decision.allowed) {
        const reason = decision.reason ? ` (${decision.reason})` : "";
        return new JsonAnswer(403, {
          error: `forbidden: ${outcome.caller.subject} may not ${describeAccess(access)}${reason}`,
        });
      }
    } catch (error) {
      if (error instanceof AuthUnavailableError) return new JsonAnswer(503, { error: error.message });
      throw error;
    }
    return route(query, request);
  };
}
