// Analysis messages as istioctl analyze prints them, and its exit rule.

/** One analysis message about one resource. */
export interface Finding {
  /** Error, Warning or Info. */
  readonly level: string;
  /** Istio's code (IST0101) or Sextant's (SXT0002). */
  readonly code: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  /** Where the resource came from, e.g. a file and line; printed after the resource. */
  readonly origin?: string | undefined;
  readonly message: string;
}

/** The levels, least severe first. */
export const LEVELS = ["Info", "Warning", "Error"] as const;

/** A level's rank in {@link LEVELS}; an unknown level ranks as Error, so it is never hidden. */
export function levelRank(level: string): number {
  const rank = LEVELS.findIndex((known) => known.toLowerCase() === level.toLowerCase());
  return rank === -1 ? LEVELS.length - 1 : rank;
}

/** istioctl's line: `Error [IST0101] (VirtualService default/reviews file.yaml:3) Referenced host not found: "x"`. */
export function formatFinding(finding: Finding): string {
  const origin = finding.origin ? ` ${finding.origin}` : "";
  return `${finding.level} [${finding.code}] (${finding.kind} ${finding.namespace}/${finding.name}${origin}) ${finding.message}`;
}
