// Status conditions as istiod writes them: each resource's conditions are
// set from a map of condition type -> outcome, written in type order (istiod
// sorts the keys before setting them), a failed outcome inverting the
// condition's usual status and carrying the failure's reason and message.
import type { GatewayApiCondition } from "./types.js";

/** Why something failed: the condition's reason and message. */
export interface Failure {
  readonly reason: string;
  readonly message: string;
}

/** One condition's outcome before it is written. */
export interface ConditionOutcome {
  readonly reason: string;
  readonly message: string;
  /** The status when there is no error (default True; Conflicted's usual status is False). */
  readonly status?: "True" | "False";
  /** If set, the condition reports this instead, with the opposite status. */
  readonly error?: Failure | undefined;
}

/** The conditions of a resource at a generation, in type order. */
export function writeConditions(
  generation: number,
  outcomes: Readonly<Record<string, ConditionOutcome>>,
): GatewayApiCondition[] {
  return Object.keys(outcomes)
    .sort()
    .map((type) => {
      const outcome = outcomes[type] as ConditionOutcome;
      const status = outcome.status ?? "True";
      if (outcome.error)
        return {
          type,
          status: status === "True" ? "False" : "True",
          reason: outcome.error.reason,
          message: outcome.error.message,
          observedGeneration: generation,
        };
      return {
        type,
        status,
        reason: outcome.reason,
        message: outcome.message,
        observedGeneration: generation,
      };
    });
}

/** Istio's HumanReadableJoin: "a", "a and b", "a, b, and c". */
export function humanReadableJoin(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  if (items.length === 2) return `${items[0]} and ${items[1]}`;
  return `${items.slice(0, -1).join(", ")}, and ${items[items.length - 1]}`;
}
