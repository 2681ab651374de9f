import { randomUUID } from "node:crypto";
import {
  alreadyExists,
  conflict,
  expired,
  type FieldError,
  forbidden,
  internalError,
  invalid,
  notFound,
} from "./errors.js";
import { jsonEqual } from "./patch.js";
import { apiVersionOf, type NameRule, type ResourceType, splitApiVersion } from "./resources.js";
import type { KubeObject, ObjectMeta } from "./types.js";

/** A change committed to the store, kept as history so watches can resume from a resourceVersion. */
export interface StoredEvent {
  rv: number;
  type: ResourceType;
  eventType: "ADDED" | "MODIFIED" | "DELETED";
  /** The object after the change; for DELETED, its last state stamped with the deletion's resourceVersion. */
  object: KubeObject;
  /** The object before the change (MODIFIED and DELETED). */
  previous?: KubeObject;
}

/** Options of a create. */
export interface CreateOptions {
  /** A test seed: keep the given status, skip the namespace-exists check, ignore a set resourceVersion. */
  seed?: boolean;
}

/** Options of an update. */
export interface UpdateOptions {
  subresource?: "status";
  /** A test seed: no resourceVersion precondition, status written as given, created if missing. */
  seed?: boolean;
}

/** Options of a delete. */
export interface DeleteOptions {
  preconditions?: { uid?: string; resourceVersion?: string };
  /** Remove at once even if finalizers are pending (test hook only). */
  force?: boolean;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** An RFC 3339 timestamp with second precision, as `metav1.Time` serializes. */
export function timestamp(date = new Date()): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

const subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const label1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const label1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

function nameErrors(rule: NameRule, name: string): FieldError[] {
  const [pattern, max, what] =
    rule === "subdomain"
      ? [subdomain, 253, "a lowercase RFC 1123 subdomain"]
      : rule === "label"
        ? [label1123, 63, "a lowercase RFC 1123 label"]
        : [label1035, 63, "a DNS-1035 label"];
  if (name.length <= max && pattern.test(name)) return [];
  return [
    {
      field: "metadata.name",
      type: "FieldValueInvalid",
      detail: `Invalid value: "${name}": must be ${what} of at most ${max} characters (regex used for validation is '${pattern.source}')`,
    },
  ];
}

const generateAlphabet = "bcdfghjklmnpqrstvwxz2456789";

function generatedSuffix(): string {
  let s = "";
  for (let i = 0; i < 5; i++) s += generateAlphabet[Math.floor(Math.random() * generateAlphabet.length)];
  return s;
}

// What generation tracks: everything but metadata, and but status when the
// status subresource owns it.
function generationRelevant(type: ResourceType, obj: KubeObject): Record<string, unknown> {
  const { apiVersion: _a, kind: _k, metadata: _m, ...rest } = obj;
  if (type.statusSubresource) delete rest.status;
  return rest;
}

function withoutResourceVersion(obj: KubeObject): KubeObject {
  const { resourceVersion: _rv, ...meta } = obj.metadata ?? {};
  return { ...obj, metadata: meta };
}

/**
 * The fake API server's storage: objects per resource type, a single
 * cluster-wide resourceVersion counter (as etcd's revision), and the event
 * history that watches and paginated lists read from until `compact()`.
 */
export class ObjectStore {
  private rv = 0;
  private compactedRv = 0;
  private readonly types = new Map<string, ResourceType>();
  private readonly data = new Map<ResourceType, Map<string, KubeObject>>();
  private history: StoredEvent[] = [];
  private readonly listeners = new Set<(event: StoredEvent) => void>();

  constructor(private readonly enforceNamespaceLifecycle: boolean) {}

  /** Adds a resource type; a second registration of the same group and plural fails. */
  register(type: ResourceType): ResourceType {
    const key = `${type.group}/${type.plural}`;
    if (this.types.has(key))
      throw new Error(`resource ${type.plural} in group "${type.group}" is already registered`);
    this.types.set(key, type);
    this.data.set(type, new Map());
    return type;
  }

  /** The type served under a group and plural, if any. */
  lookup(group: string, plural: string): ResourceType | undefined {
    return this.types.get(`${group}/${plural}`);
  }

  /** The type of an object, from its apiVersion and kind. */
  typeOf(apiVersion: string, kind: string): ResourceType | undefined {
    const { group, version } = splitApiVersion(apiVersion);
    for (const type of this.types.values()) {
      if (type.group === group && type.kind === kind && type.versions.includes(version)) return type;
    }
    return undefined;
  }

  /** All registered types. */
  allTypes(): ResourceType[] {
    return [...this.types.values()];
  }

  /** The last resourceVersion handed out. */
  currentResourceVersion(): number {
    return this.rv;
  }

  /** The resourceVersion history was last compacted at; anything older is 410 Gone. */
  compactedResourceVersion(): number {
    return this.compactedRv;
  }

  /** Forgets all history, as an etcd compaction (plus watch cache turnover) would. */
  compact(): void {
    this.compactedRv = this.rv;
    this.history = [];
  }

  /** Calls `listener` synchronously after every commit; returns the unsubscribe function. */
  subscribe(listener: (event: StoredEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private objectsOf(type: ResourceType): Map<string, KubeObject> {
    const objects = this.data.get(type);
    if (!objects) throw new Error(`resource ${type.plural} is not registered`);
    return objects;
  }

  /** The stored (frozen) object, if present. */
  get(type: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.objectsOf(type).get(objectKey(type, namespace, name));
  }

  /** Current objects, in key order (namespace, then name), as etcd lists them. */
  list(type: ResourceType, namespace?: string): KubeObject[] {
    return sortedObjects(this.objectsOf(type), type, namespace);
  }

  /** The objects as they were at resourceVersion `rv`, rebuilt by undoing later history. */
  listAt(type: ResourceType, rv: number, namespace?: string): KubeObject[] {
    if (rv < this.compactedRv) {
      throw expired(`too old resource version: ${rv} (${this.compactedRv})`);
    }
    const state = new Map(this.objectsOf(type));
    for (let i = this.history.length - 1; i >= 0; i--) {
      const event = this.history[i]!;
      if (event.rv <= rv) break;
      if (event.type !== type) continue;
      const key = keyOf(type, event.object);
      if (event.eventType === "ADDED") state.delete(key);
      else if (event.previous) state.set(key, event.previous);
    }
    return sortedObjects(state, type, namespace);
  }

  /** The events of `type` after `rv`, or 410 Expired when they have been compacted away. */
  eventsSince(type: ResourceType, rv: number): StoredEvent[] {
    if (rv < this.compactedRv) {
      throw expired(`too old resource version: ${rv} (${this.compactedRv})`);
    }
    return this.history.filter((e) => e.rv > rv && e.type === type);
  }

  private commit(
    type: ResourceType,
    eventType: StoredEvent["eventType"],
    next: KubeObject,
    previous: KubeObject | undefined,
  ): KubeObject {
    this.rv++;
    const object: KubeObject = {
      ...next,
      metadata: { ...(next.metadata ?? {}), resourceVersion: String(this.rv) },
    };
    deepFreeze(object);
    const objects = this.objectsOf(type);
    const key = keyOf(type, object);
    if (eventType === "DELETED") objects.delete(key);
    else objects.set(key, object);
    const event: StoredEvent = { rv: this.rv, type, eventType, object };
    if (previous) event.previous = previous;
    this.history.push(event);
    for (const listener of [...this.listeners]) listener(event);
    return object;
  }

  /** Creates an object (POST), assigning uid, creationTimestamp, generation and resourceVersion. */
  create(
    type: ResourceType,
    namespace: string | undefined,
    input: KubeObject,
    opts: CreateOptions = {},
  ): KubeObject {
    const obj = structuredClone(input) as KubeObject;
    const meta: ObjectMeta = { ...(obj.metadata ?? {}) };
    obj.metadata = meta;
    if (meta.resourceVersion && !opts.seed) {
      throw internalError("resourceVersion should not be set on objects to be created");
    }
    delete meta.resourceVersion;
    if (type.namespaced) meta.namespace = namespace;
    else delete meta.namespace;
    const objects = this.objectsOf(type);
    if (!meta.name && meta.generateName) {
      do {
        meta.name = `${meta.generateName}${generatedSuffix()}`;
      } while (objects.has(objectKey(type, namespace, meta.name)));
    }
    const name = meta.name;
    if (!name) {
      throw invalid(type, "", [
        {
          field: "metadata.name",
          type: "FieldValueRequired",
          detail: "Required value: name or generateName is required",
        },
      ]);
    }
    const errors = nameErrors(type.nameRule, name);
    if (errors.length > 0) throw invalid(type, name, errors);
    if (type.namespaced && this.enforceNamespaceLifecycle && !opts.seed) this.checkNamespace(namespace ?? "");
    if (objects.has(objectKey(type, namespace, name))) throw alreadyExists(type, name);
    meta.uid = randomUUID();
    meta.creationTimestamp = timestamp();
    meta.generation = 1;
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    delete meta.selfLink;
    if (!opts.seed) type.prepareForCreate?.(obj);
    obj.apiVersion = apiVersionOf(type.group, type.versions[0]!);
    obj.kind = type.kind;
    return this.commit(type, "ADDED", obj, undefined);
  }

  // The NamespaceLifecycle admission plugin: no new content in a missing or
  // terminating namespace.
  private checkNamespace(namespace: string): void {
    const nsType = this.lookup("", "namespaces");
    if (!nsType) return;
    const ns = this.get(nsType, undefined, namespace);
    if (!ns) throw notFound(nsType, namespace);
    if (ns.metadata?.deletionTimestamp) {
      throw forbidden(
        `unable to create new content in namespace ${namespace} because it is being terminated`,
      );
    }
  }

  /**
   * Replaces an object (PUT), or only its status with `subresource: "status"`.
   * Returns `created: true` when a missing object was created instead.
   */
  update(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    input: KubeObject,
    opts: UpdateOptions = {},
  ): { object: KubeObject; created: boolean } {
    const existing = this.get(type, namespace, name);
    const inputRv = input.metadata?.resourceVersion ?? "";
    if (!existing) {
      if (opts.seed) return { object: this.create(type, namespace, input, { seed: true }), created: true };
      if (!type.allowCreateOnUpdate || opts.subresource) throw notFound(type, name);
      if (inputRv !== "") throw conflict(type, name);
      return { object: this.create(type, namespace, input), created: true };
    }
    if (!opts.seed) {
      if (inputRv === "") {
        if (!type.allowUnconditionalUpdate) {
          throw invalid(type, name, [
            {
              field: "metadata.resourceVersion",
              type: "FieldValueInvalid",
              detail: "Invalid value: 0x0: must be specified for an update",
            },
          ]);
        }
      } else if (inputRv !== existing.metadata?.resourceVersion) {
        throw conflict(type, name);
      }
    }
    let next: KubeObject;
    const old = existing.metadata ?? {};
    if (opts.subresource === "status") {
      // Only .status is taken from the request; metadata and spec stay as stored.
      next = structuredClone(existing) as KubeObject;
      if ("status" in input) next.status = structuredClone(input.status);
      else delete next.status;
    } else {
      next = structuredClone(input) as KubeObject;
      const meta: ObjectMeta = { ...(next.metadata ?? {}) };
      next.metadata = meta;
      meta.name = name;
      if (type.namespaced) meta.namespace = namespace;
      else delete meta.namespace;
      for (const field of [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
      ] as const) {
        if (old[field] !== undefined) (meta as Record<string, unknown>)[field] = old[field];
        else delete meta[field];
      }
      delete meta.selfLink;
      if (type.statusSubresource && !opts.seed) {
        if ("status" in existing) next.status = structuredClone(existing.status);
        else delete next.status;
      }
      if (!opts.seed) type.prepareForUpdate?.(next, existing);
    }
    next.apiVersion = apiVersionOf(type.group, type.versions[0]!);
    next.kind = type.kind;
    const meta = next.metadata ?? {};
    next.metadata = meta;
    const changed = !jsonEqual(generationRelevant(type, next), generationRelevant(type, existing));
    meta.generation = (old.generation ?? 1) + (changed ? 1 : 0);
    // A write that changes nothing is not persisted: no new resourceVersion, no event.
    if (jsonEqual(withoutResourceVersion(next), withoutResourceVersion(existing))) {
      return { object: existing, created: false };
    }
    if (meta.deletionTimestamp && (meta.finalizers ?? []).length === 0) {
      return { object: this.commit(type, "DELETED", next, existing), created: false };
    }
    return { object: this.commit(type, "MODIFIED", next, existing), created: false };
  }

  /**
   * Deletes an object. With pending finalizers it is only marked
   * (deletionTimestamp set, `immediate: false`) until they are removed.
   */
  delete(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    opts: DeleteOptions = {},
  ): { object: KubeObject; immediate: boolean } {
    const existing = this.get(type, namespace, name);
    if (!existing) throw notFound(type, name);
    const meta = existing.metadata ?? {};
    const pre = opts.preconditions;
    if (pre?.uid !== undefined && pre.uid !== meta.uid) {
      throw conflict(
        type,
        name,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${meta.uid}`,
      );
    }
    if (pre?.resourceVersion !== undefined && pre.resourceVersion !== meta.resourceVersion) {
      throw conflict(
        type,
        name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in meta: ${meta.resourceVersion}`,
      );
    }
    if ((meta.finalizers ?? []).length > 0 && !opts.force) {
      if (meta.deletionTimestamp) return { object: existing, immediate: false };
      const marked = structuredClone(existing) as KubeObject;
      marked.metadata = {
        ...meta,
        deletionTimestamp: timestamp(),
        deletionGracePeriodSeconds: 0,
        generation: (meta.generation ?? 1) + 1,
      };
      return { object: this.commit(type, "MODIFIED", marked, existing), immediate: false };
    }
    if (type.group === "" && type.plural === "namespaces") {
      // The namespace controller's end state, compressed: the content goes first.
      for (const other of this.types.values()) {
        if (!other.namespaced) continue;
        for (const obj of this.list(other, name)) {
          this.delete(other, name, obj.metadata?.name ?? "", { force: true });
        }
      }
    }
    return { object: this.commit(type, "DELETED", existing, existing), immediate: true };
  }
}

/** The storage key: "namespace/name" for namespaced types, "name" otherwise. */
export function objectKey(type: ResourceType, namespace: string | undefined, name: string): string {
  return type.namespaced ? `${namespace ?? ""}/${name}` : name;
}

function keyOf(type: ResourceType, obj: KubeObject): string {
  return objectKey(type, obj.metadata?.namespace, obj.metadata?.name ?? "");
}

function sortedObjects(
  objects: Map<string, KubeObject>,
  type: ResourceType,
  namespace?: string,
): KubeObject[] {
  const entries = [...objects.entries()];
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return entries
    .filter(([, obj]) => namespace === undefined || !type.namespaced || obj.metadata?.namespace === namespace)
    .map(([, obj]) => obj);
}
