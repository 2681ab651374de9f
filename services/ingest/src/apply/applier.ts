import type { AccessRequest } from "@sextant/auth";
import { Counter, Histogram, type Registry } from "@sextant/observability";
import type { ParseLimits } from "@sextant/validation";
import type { ConfigStore, StoredResource } from "../store/config-store.js";
import { type DocumentError, type PreparedResource, prepareDocuments } from "./prepare.js";

/** One resource in an apply's answer. */
export interface AppliedResource extends StoredResource {
  readonly document: number;
  readonly warnings: ReadonlyArray<{ path: string; message: string }>;
}

/** The outcome of an apply: everything stored, or nothing and every error. */
export type ApplyOutcome =
  | { readonly ok: true; readonly applied: AppliedResource[] }
  | { readonly ok: false; readonly reason: "invalid"; readonly errors: DocumentError[] }
  | {
      readonly ok: false;
      readonly reason: "unavailable";
      readonly message: string;
      /** What was stored before the store failed; the rest was not. */
      readonly applied: AppliedResource[];
      readonly notApplied: Array<{ kind: string; namespace: string; name: string }>;
    };

/** The outcome of an apply through the config API: also refused, nothing stored, if the caller may not write a document. */
export type CallerApplyOutcome =
  | ApplyOutcome
  | { readonly ok: false; readonly reason: "forbidden"; readonly denials: Denial[] };

/** A document the caller may not write: what it would have taken, and why not. */
export interface Denial {
  readonly document: number;
  readonly request: AccessRequest;
  readonly reason?: string;
}

/** Who applies, for an apply through the config API. */
export interface ApplyCaller {
  /** The documents the caller may not write; nothing is stored unless this is empty. */
  denied(resources: PreparedResource[]): Promise<Denial[]>;
  /** The subject recorded as the resources' last changer. */
  readonly subject: string;
}

/** Ingest's apply metrics. */
export class ApplyMetrics {
  readonly applies: Counter<"kind" | "result" | "source">;
  readonly rejections: Counter<"kind" | "source">;
  readonly latency: Histogram<"source">;

  constructor(registry: Registry) {
    this.applies = new Counter({
      name: "sextant_ingest_applies_total",
      help: "Resources applied, by kind, result (created, configured, unchanged, deleted) and source.",
      labelNames: ["kind", "result", "source"],
      registers: [registry],
    });
    this.rejections = new Counter({
      name: "sextant_ingest_rejections_total",
      help: "Documents rejected by validation, by kind and source.",
      labelNames: ["kind", "source"],
      registers: [registry],
    });
    this.latency = new Histogram({
      name: "sextant_ingest_apply_duration_seconds",
      help: "Time to validate and store one apply request or file, by source.",
      labelNames: ["source"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    });
  }
}

/**
 * Applier is the one pipeline every source feeds (files, HTTP, Kubernetes):
 * parse, validate every document, then store them, so the same resource ends
 * up as the same value whichever way it came in.
 */
export class Applier {
  constructor(
    private readonly store: ConfigStore,
    private readonly metrics: ApplyMetrics,
    private readonly limits: ParseLimits,
  ) {}

  /** Validates without storing. */
  validate(input: string | Uint8Array): { resources: PreparedResource[]; errors: DocumentError[] } {
    return prepareDocuments(input, this.limits);
  }

  /** Validates every document, then stores all of them, or none if any is invalid. */
  apply(input: string | Uint8Array, source: string): Promise<ApplyOutcome> {
    return this.applyAs(input, source) as Promise<ApplyOutcome>;
  }

  /**
   * Validates every document, then stores all of them, or none if any is
   * invalid or (with a caller) forbidden to the caller.
   */
  async applyAs(
    input: string | Uint8Array,
    source: string,
    caller?: ApplyCaller,
  ): Promise<CallerApplyOutcome> {
    const stopTimer = this.metrics.latency.startTimer({ source: sourceLabel(source) });
    try {
      const prepared = prepareDocuments(input, this.limits);
      if (prepared.errors.length > 0) {
        for (const error of prepared.errors) {
          this.metrics.rejections.inc({ kind: error.kind ?? "unknown", source: sourceLabel(source) });
        }
        return { ok: false, reason: "invalid", errors: prepared.errors };
      }
      if (caller) {
        const denials = await caller.denied(prepared.resources);
        if (denials.length > 0) return { ok: false, reason: "forbidden", denials };
      }
      return await this.storeValidated(prepared.resources, source, caller?.subject);
    } finally {
      stopTimer();
    }
  }

  /** Stores resources that already passed validation. */
  async storeValidated(
    resources: PreparedResource[],
    source: string,
    changedBy?: string,
  ): Promise<ApplyOutcome> {
    const applied: AppliedResource[] = [];
    for (const [position, { document, resource, warnings }] of resources.entries()) {
      try {
        const stored = await this.store.apply(resource, source, changedBy);
        this.metrics.applies.inc({ kind: resource.kind, result: stored.result, source: sourceLabel(source) });
        applied.push({ ...stored, document, warnings });
      } catch (error) {
        return {
          ok: false,
          reason: "unavailable",
          message: `the config store is unavailable: ${(error as Error).message}`,
          applied,
          notApplied: resources
            .slice(position)
            .map(({ resource: r }) => ({ kind: r.kind, namespace: r.namespace, name: r.name })),
        };
      }
    }
    return { ok: true, applied };
  }
}

/** Metrics label of a source: "file:/x/y.yaml" counts as "file". */
function sourceLabel(source: string): string {
  return source.split(":")[0] ?? source;
}
