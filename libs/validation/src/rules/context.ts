import type { Issues } from "../issues.js";

/** What a kind's rules get besides the decoded spec. */
export interface RuleContext {
  /** Where errors go. */
  issues: Issues;
  /** Path of the spec, normally `spec`. */
  path: string;
  /** metadata.name of the resource. */
  name: string;
  /** metadata.namespace, when given. */
  namespace: string | undefined;
  /**
   * The spec as written, before decoding, for the few rules that depend on
   * what decoding erases (an empty map given explicitly, as Istio's Go
   * decoder keeps it).
   */
  spec?: unknown;
}

/** A kind's semantic checks over its decoded spec. */
export type SpecValidator<T> = (spec: T, ctx: RuleContext) => void;
