// The shapes the rule conversion shares between its files (index.ts
// re-exports the public ones).
import type { ConfigResource, Service } from "@sextant/proto";
import type { ReferenceGrants } from "../references.js";
import type { GatewayApiCondition } from "../types.js";

/** What a rule conversion reads besides the route itself: one per snapshot. */
export interface RuleContext {
  /** The cluster's DNS suffix, e.g. "cluster.local": a Service backend `reviews` in `default` is `reviews.default.svc.<suffix>`. */
  readonly domainSuffix: string;
  /** The registry's services by hostname: backendRefs resolve against them. */
  readonly services: ReadonlyMap<string, Service>;
  readonly grants: ReferenceGrants;
  /**
   * The stored ServiceEntries (kind ServiceEntry, networking.istio.io), for
   * parentRefs of kind ServiceEntry; absent: none.
   */
  readonly serviceEntries?: readonly ConfigResource[];
}

/**
 * For whom the rules are converted. Istio converts a route once for its
 * Gateway parents and once for its mesh parents: only the Gateway
 * conversion enforces ReferenceGrants on backendRefs (a mesh route may send
 * to another namespace's Service without one).
 */
export type RuleTarget = "gateway" | "mesh";

/** Istio's ConfigError: why a route's references (or filters) are not all usable. */
export interface RuleError {
  /** BackendNotFound, RefNotPermitted, InvalidKind, InvalidDestination, InvalidFilter, UnsupportedValue… */
  readonly reason: string;
  readonly message: string;
}

/** A route's rules converted. */
export interface RuleConversion<T> {
  /**
   * The routes, one per rule match (a rule with several matches is split so
   * each route has at most one, as Istio does; sorting across routes is the
   * binder's job, see sortHttpRoutes). Empty when the error was fatal (Istio
   * drops every rule of the route then).
   */
  readonly routes: T[];
  /** Set when a rule had an unusable reference or filter; the routes may still be usable (a 500 for that backend). */
  readonly error?: RuleError;
  /** True when the error dropped every route. */
  readonly fatal: boolean;
  /** The route's ResolvedRefs condition for each of its parents (True/ResolvedRefs, or False with the error's reason). */
  readonly resolvedRefs: GatewayApiCondition;
}

/** One rule converted: a route, or (fatal) none; and the error that made a part of it unusable. */
export interface RuleResult<T> {
  readonly route?: T;
  readonly error?: RuleError;
}
