// The Kubernetes `status` object of a Gateway API resource as ingest stores
// and writes it: what the conversion computed, plus each condition's
// lastTransitionTime, which only the writer can know.
import { isDeepStrictEqual } from "node:util";
import { ISTIO_CONTROLLER, SEXTANT_CONTROLLER } from "@sextant/gateway-api";
import { findKind, GATEWAY_API_GROUP } from "@sextant/validation";

/** A JSON object (a google.protobuf.Struct's content). */
export type StatusObject = { [key: string]: unknown };

/** The controllerNames whose entries in a route's `status.parents` are Sextant's to write. */
const OWN_CONTROLLERS: ReadonlySet<string> = new Set([ISTIO_CONTROLLER, SEXTANT_CONTROLLER]);

/** Whether a stored kind is one of the Gateway API's, whose resources get a Kubernetes status from ingest. */
export function isGatewayApiKind(kind: string): boolean {
  return findKind(kind)?.group === GATEWAY_API_GROUP;
}

/**
 * A status as plain JSON: no undefined fields (a Struct cannot hold them, and
 * the API server drops them), so that what is compared is what is stored.
 */
export function plainStatus(status: unknown): StatusObject {
  return JSON.parse(JSON.stringify(status)) as StatusObject;
}

/**
 * Gives every condition of desired a lastTransitionTime, as Kubernetes'
 * meta.SetStatusCondition does: the previous one's when the same condition
 * (same type, in the same listener or parent) had the same status, else now.
 * Conditions are matched inside the matching listener (by name), route
 * parent (parentRef and controllerName) or policy ancestor (ancestorRef and
 * controllerName), so a listener's Accepted is not confused with the
 * Gateway's.
 */
export function withTransitionTimes(desired: StatusObject, previous: unknown, now: string): StatusObject {
  return stamp(desired, previous, now) as StatusObject;
}

function stamp(value: unknown, previous: unknown, now: string): unknown {
  if (Array.isArray(value)) {
    const before = Array.isArray(previous) ? previous : [];
    return value.map((item) => {
      const key = identity(item);
      const match = key === undefined ? undefined : before.find((old) => identity(old) === key);
      return stamp(item, match, now);
    });
  }
  if (!isObject(value)) return value;
  const old = isObject(previous) ? previous : {};
  if (isCondition(value)) {
    const kept = old.status === value.status && typeof old.lastTransitionTime === "string";
    return { ...value, lastTransitionTime: kept ? old.lastTransitionTime : now };
  }
  return Object.fromEntries(
    Object.entries(value).map(([field, item]) => [field, stamp(item, old[field], now)]),
  );
}

/** What identifies an element of a status list across two versions of it. */
function identity(item: unknown): string | undefined {
  if (!isObject(item)) return undefined;
  if (isCondition(item)) return `condition ${item.type}`;
  if ("parentRef" in item) return `parent ${canonical(item.parentRef)} ${item.controllerName}`;
  if ("ancestorRef" in item) return `ancestor ${canonical(item.ancestorRef)} ${item.controllerName}`;
  if (typeof item.name === "string") return `listener ${item.name}`;
  return undefined;
}

function isCondition(item: StatusObject): boolean {
  return typeof item.type === "string" && typeof item.status === "string" && "reason" in item;
}

/** JSON with sorted keys: a parentRef read back from the store or the API server may order its fields otherwise. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (!isObject(value)) return JSON.stringify(value);
  const fields = Object.keys(value)
    .sort()
    .map((field) => `${JSON.stringify(field)}:${canonical(value[field])}`);
  return `{${fields.join(",")}}`;
}

function isObject(value: unknown): value is StatusObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The status to write to a Kubernetes object: the stored one with every
 * condition's observedGeneration set to the object's metadata.generation
 * (Sextant counts generations itself, from 1 when it first stored the
 * object). Undefined while the stored status is about another generation
 * than the one stored now: the next status event brings the current one.
 */
export function statusForGeneration(
  stored: StatusObject,
  storedGeneration: number,
  kubeGeneration: number,
): StatusObject | undefined {
  let stale = false;
  const visit = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(visit);
    if (!isObject(value)) return value;
    if (isCondition(value)) {
      if (value.observedGeneration !== storedGeneration) stale = true;
      return { ...value, observedGeneration: kubeGeneration };
    }
    return Object.fromEntries(Object.entries(value).map(([field, item]) => [field, visit(item)]));
  };
  const result = visit(stored) as StatusObject;
  return stale ? undefined : result;
}

/**
 * A route's `status.parents` with Sextant's entries replaced by ours:
 * entries of other controllers (a parent of another implementation's
 * class) are kept as they are, since the list is shared by every
 * controller a route attaches to.
 */
export function mergedRouteParents(current: unknown, ours: readonly unknown[]): unknown[] {
  const others = (Array.isArray(current) ? current : []).filter(
    (entry) => !(isObject(entry) && OWN_CONTROLLERS.has(String(entry.controllerName))),
  );
  return [...others, ...ours];
}

/**
 * The fields of a Kubernetes object's status that Sextant writes, and
 * whether the object already has them: each field of desired is compared
 * with the object's, an absent list counting as an empty one.
 */
export function statusFieldsUpToDate(current: unknown, desired: StatusObject): boolean {
  const status = isObject(current) ? current : {};
  return Object.entries(desired).every(([field, value]) => {
    const have = status[field] ?? (Array.isArray(value) ? [] : undefined);
    return isDeepStrictEqual(have, value);
  });
}
