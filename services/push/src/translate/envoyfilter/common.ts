import type { ConfigRef } from "@sextant/proto";
import {
  type ApplyTo,
  type ConfigPatch,
  type JsonObject,
  Operation,
  PatchContext,
  type ProxyPatches,
} from "../../model/envoy-filter.js";
import { copy } from "./merge.js";

/** What one resource's patching did: the EnvoyFilters whose patches changed it. */
export class Applied {
  readonly #refs = new Map<string, ConfigRef>();

  add(patch: ConfigPatch): void {
    const { kind, namespace, name } = patch.ref;
    this.#refs.set(`${kind}/${namespace}/${name}`, patch.ref);
  }

  get refs(): ConfigRef[] {
    return [...this.#refs.values()];
  }

  get any(): boolean {
    return this.#refs.size > 0;
  }
}

/** The patches of one applyTo whose context is `context` or ANY (Istio's commonConditionMatch). */
export function patchesIn(patches: ProxyPatches, applyTo: ApplyTo, context: PatchContext): ConfigPatch[] {
  return (patches.byApplyTo.get(applyTo) ?? []).filter(
    (patch) => patch.match.context === context || patch.match.context === PatchContext.ANY,
  );
}

/**
 * The patches of one applyTo that ADD a whole resource for a proxy whose
 * resources are in `contexts`: those of one of its contexts, and those of
 * ANY once (Istio adds ANY ones in the outbound or gateway pass only).
 */
export function addsFor(
  patches: ProxyPatches,
  applyTo: ApplyTo,
  contexts: readonly PatchContext[],
): ConfigPatch[] {
  return (patches.byApplyTo.get(applyTo) ?? []).filter(
    (patch) =>
      patch.operation === Operation.ADD &&
      (patch.match.context === PatchContext.ANY || contexts.includes(patch.match.context)),
  );
}

/**
 * Istio's list operations on siblings (filters, listener filters, routes):
 * ADD appends; INSERT_FIRST prepends; INSERT_BEFORE/AFTER go next to the
 * first match, or first/last when the patch names no sibling; REPLACE
 * replaces the first match; REMOVE removes every match. Returns the list
 * and whether the patch changed it.
 */
export function patchSiblings(
  list: JsonObject[],
  patch: ConfigPatch,
  namesSibling: boolean,
  matches: (element: JsonObject) => boolean,
): { list: JsonObject[]; applied: boolean } {
  const value = () => copy(patch.value ?? {});
  const first = () => (namesSibling ? list.findIndex(matches) : -1);
  switch (patch.operation) {
    case Operation.ADD:
      return { list: [...list, value()], applied: true };
    case Operation.INSERT_FIRST:
      return { list: [value(), ...list], applied: true };
    case Operation.INSERT_AFTER: {
      if (!namesSibling) return { list: [...list, value()], applied: true };
      const at = first();
      if (at < 0) return { list, applied: false };
      return { list: [...list.slice(0, at + 1), value(), ...list.slice(at + 1)], applied: true };
    }
    case Operation.INSERT_BEFORE: {
      if (!namesSibling) return { list: [value(), ...list], applied: true };
      const at = first();
      if (at < 0) return { list, applied: false };
      return { list: [...list.slice(0, at), value(), ...list.slice(at)], applied: true };
    }
    case Operation.REPLACE: {
      const at = first();
      if (at < 0) return { list, applied: false };
      return { list: list.map((element, i) => (i === at ? value() : element)), applied: true };
    }
    case Operation.REMOVE: {
      if (!namesSibling) return { list, applied: false };
      const kept = list.filter((element) => !matches(element));
      return { list: kept, applied: kept.length !== list.length };
    }
    default:
      return { list, applied: false };
  }
}

/**
 * The patches on one element itself (a listener, filter chain, cluster, virtual host or route), in order, as
 * Istio applies them: REMOVE drops it and nothing after applies; MERGE merges the patch's value with `merge`;
 * REPLACE takes the value instead where `replace` is set (virtual hosts only); other operations are left to
 * the caller. `matches` sees the element as the patches before it left it. Returns the patched element (a
 * new object when a patch applied), or undefined when removed.
 */
export function patchElement(
  element: JsonObject,
  patches: readonly ConfigPatch[],
  matches: (current: JsonObject, patch: ConfigPatch) => boolean,
  merge: (current: JsonObject, value: JsonObject) => JsonObject,
  applied: Applied,
  replace = false,
): JsonObject | undefined {
  let current = element;
  for (const patch of patches) {
    if (!matches(current, patch)) continue;
    if (patch.operation === Operation.REMOVE) {
      applied.add(patch);
      return undefined;
    }
    if (patch.operation === Operation.MERGE && patch.value) current = merge(current, patch.value);
    else if (replace && patch.operation === Operation.REPLACE) current = copy(patch.value ?? {});
    else continue;
    applied.add(patch);
  }
  return current;
}

/** Replaces target's fields with source's, in place: a merge may drop a oneof member the patch replaced. */
export function replaceFields(target: JsonObject, source: JsonObject): void {
  if (source === target) return;
  for (const key of Object.keys(target)) delete target[key];
  Object.assign(target, source);
}

/** A JSON array field as a list of objects (absent: empty). */
export function objects(value: unknown): JsonObject[] {
  return Array.isArray(value) ? (value as JsonObject[]) : [];
}

/** Sets a list field, leaving it out when empty (as proto3 JSON does). */
export function setList(target: JsonObject, field: string, list: JsonObject[]): void {
  if (list.length > 0) target[field] = list;
  else delete target[field];
}
