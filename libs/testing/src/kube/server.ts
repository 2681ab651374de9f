import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { onCleanup } from "../cleanup.js";
import { type FakeAccessReview, type FakeAccessRule, reviewAccess } from "./access.js";
import {
  badRequest,
  expired,
  failureStatus,
  invalid,
  KubeApiError,
  methodNotAllowed,
  notFound,
  pathNotFound,
  tooLargeResourceVersion,
  unprocessable,
  unsupportedMediaType,
} from "./errors.js";
import { applyJsonPatch, applyMergePatch, JsonPatchError } from "./patch.js";
import { apiVersionOf, builtinResourceTypes, customResourceType, type ResourceType } from "./resources.js";
import { parseFieldSelector, parseLabelSelector, type Selector } from "./selectors.js";
import { ObjectStore, objectKey, type StoredEvent } from "./store.js";
import {
  type FakeServiceAccountTokenOptions,
  type FakeTokenOptions,
  reviewToken,
  serviceAccountTokenOptions,
} from "./tokens.js";
import type {
  FakeKubeRequest,
  FakeKubeRequestFilter,
  GroupVersionResource,
  KubeObject,
  KubeStatus,
  ObjectReference,
  ResourceDefinition,
  WatchEventType,
} from "./types.js";

/** Options of `startFakeKubeApiServer`. */
export interface FakeKubeApiServerOptions {
  /** How often open watches that asked for bookmarks get a BOOKMARK event. Default 1000 ms (the real server: about a minute). */
  bookmarkIntervalMs?: number;
  /** Custom resources to serve from the start (more can be added with `registerResource`). */
  resources?: ResourceDefinition[];
  /** Namespaces that exist at start. Default: default, kube-system, kube-public, kube-node-lease. */
  namespaces?: string[];
  /** Reject creating namespaced objects in a namespace that does not exist, as the NamespaceLifecycle admission plugin does. Default true. */
  enforceNamespaceLifecycle?: boolean;
  /** The API server's own audiences (`--api-audiences`), used when a TokenReview names none. */
  apiAudiences?: string[];
  /** How long a request for a resourceVersion newer than the server's waits before 504. Default 3000 ms, as the watch cache. */
  tooLargeResourceVersionWaitMs?: number;
  /** Server-side timeout of a watch without `timeoutSeconds`. Default: random between 1800 and 3600 s, as kube-apiserver. */
  defaultWatchTimeoutSeconds?: number;
}

/** The parts of @kubernetes/client-node's `KubeConfig` that `kubeConfig()` uses. */
export interface KubeConfigLike {
  loadFromOptions(options: KubeConfigOptions): void;
}

/** Arguments for `KubeConfig.loadFromOptions` pointing at the fake server. */
export interface KubeConfigOptions {
  clusters: Array<{ name: string; server: string; skipTLSVerify: boolean }>;
  users: Array<{ name: string }>;
  contexts: Array<{ name: string; cluster: string; user: string; namespace: string }>;
  currentContext: string;
}

/** How `dropWatches` ends streams: "reset" destroys the TCP connection, "end" ends the chunked response cleanly. */
export type DropMode = "reset" | "end";

/** A failure to return instead of serving matching requests (see `injectFailure`). */
export interface InjectedFailure {
  code: number;
  reason: string;
  message?: string;
}

interface WatchStream {
  type: ResourceType;
  version: string;
  namespace: string | undefined;
  labels: Selector;
  fields: Selector;
  res: ServerResponse;
  allowBookmarks: boolean;
  timers: NodeJS.Timeout[];
  unsubscribe: () => void;
  closed: boolean;
}

interface ResourceRequest {
  type: ResourceType;
  version: string;
  namespace: string | undefined;
  name: string | undefined;
  subresource: string | undefined;
  /** The path had the legacy `/watch/` prefix. */
  watchPrefix: boolean;
}

const DEFAULT_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease"];
const DEFAULT_API_AUDIENCES = ["https://kubernetes.default.svc.cluster.local"];

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function parseJsonBody(body: Buffer): unknown {
  if (body.length === 0) throw badRequest("the body of the request was empty");
  try {
    return JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw badRequest(`error decoding request body: ${(err as Error).message}`);
  }
}

function parseObjectBody(body: Buffer): KubeObject {
  const parsed = parseJsonBody(body);
  if (!isRecord(parsed)) throw badRequest("error decoding request body: expected a JSON object");
  return parsed as KubeObject;
}

/** Returns the object with `apiVersion` and `kind` of the version it is served under. */
function present(type: ResourceType, version: string, obj: KubeObject): KubeObject {
  const { apiVersion: _a, kind: _k, ...rest } = obj;
  return { apiVersion: apiVersionOf(type.group, version), kind: type.kind, ...rest };
}

function parseResourceVersion(value: string | null): number | undefined {
  if (value === null || value === "") return undefined;
  if (!/^\d+$/.test(value)) throw badRequest(`invalid resource version: ${JSON.stringify(value)}`);
  return Number(value);
}

function encodeContinue(rv: number, start: string): string {
  return Buffer.from(JSON.stringify({ v: "fake.k8s.io/v1", rv, start })).toString("base64url");
}

function decodeContinue(token: string): { rv: number; start: string } {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
    if (isRecord(parsed) && typeof parsed.rv === "number" && typeof parsed.start === "string") {
      return { rv: parsed.rv, start: parsed.start };
    }
  } catch {
    // fall through to the 400 below
  }
  throw badRequest(
    "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
  );
}

function listOptionsInvalid(field: string, detail: string): KubeApiError {
  return invalid({ group: "meta.k8s.io", plural: "listoptions", kind: "ListOptions" }, "", [
    { field, type: "FieldValueForbidden", detail },
  ]);
}

/**
 * An in-process fake of kube-apiserver over plain HTTP on 127.0.0.1, faithful
 * to the wire protocol: list then watch from a resourceVersion, bookmarks,
 * 410 Expired after compaction, the status subresource, optimistic
 * concurrency, merge and JSON patches, TokenReview and SubjectAccessReview. Start it with
 * `startFakeKubeApiServer`.
 */
export class FakeKubeApiServer {
  /** Base URL, e.g. `http://127.0.0.1:40123`. */
  readonly url: string;
  private readonly store: ObjectStore;
  private readonly watches = new Set<WatchStream>();
  private readonly tokens = new Map<string, FakeTokenOptions>();
  private readonly accessRules: FakeAccessRule[] = [];
  private readonly accessReviews: FakeAccessReview[] = [];
  private readonly log: FakeKubeRequest[] = [];
  private readonly failures: Array<{
    filter: FakeKubeRequestFilter;
    failure: InjectedFailure;
    remaining: number;
  }> = [];
  private pausedWatchStarts: Array<() => void> | undefined;
  private readonly bookmarkIntervalMs: number;
  private readonly apiAudiences: string[];
  private readonly tooLargeWaitMs: number;
  private readonly defaultWatchTimeoutSeconds: number | undefined;

  private constructor(
    private readonly server: Server,
    options: FakeKubeApiServerOptions,
  ) {
    const address = server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${address.port}`;
    this.bookmarkIntervalMs = options.bookmarkIntervalMs ?? 1000;
    this.apiAudiences = options.apiAudiences ?? DEFAULT_API_AUDIENCES;
    this.tooLargeWaitMs = options.tooLargeResourceVersionWaitMs ?? 3000;
    this.defaultWatchTimeoutSeconds = options.defaultWatchTimeoutSeconds;
    this.store = new ObjectStore(options.enforceNamespaceLifecycle ?? true);
    for (const type of builtinResourceTypes()) this.store.register(type);
    for (const def of options.resources ?? []) this.registerResource(def);
    const nsType = this.store.lookup("", "namespaces")!;
    for (const ns of options.namespaces ?? DEFAULT_NAMESPACES) {
      this.store.create(nsType, undefined, { metadata: { name: ns } });
    }
    server.on("request", (req: IncomingMessage, res: ServerResponse) => void this.handle(req, res));
  }

  /** Starts a server; prefer `startFakeKubeApiServer`. */
  static async start(options: FakeKubeApiServerOptions = {}): Promise<FakeKubeApiServer> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    const fake = new FakeKubeApiServer(server, options);
    // Closed even when the suite that started it never reaches its own cleanup.
    fake.unregisterCleanup = onCleanup(`fake kube-apiserver ${fake.url}`, () => fake.close());
    return fake;
  }

  private unregisterCleanup = (): void => {};

  // ---------------------------------------------------------------- client config

  /** Arguments for `new KubeConfig().loadFromOptions(...)`, pointing at this server without credentials. */
  kubeConfigOptions(): KubeConfigOptions {
    return {
      // @kubernetes/client-node refuses plain http unless TLS verification is
      // marked as skipped; there is no TLS here to verify.
      clusters: [{ name: "fake-kube-apiserver", server: this.url, skipTLSVerify: true }],
      users: [{ name: "fake-user" }],
      contexts: [{ name: "fake", cluster: "fake-kube-apiserver", user: "fake-user", namespace: "default" }],
      currentContext: "fake",
    };
  }

  /**
   * A loaded `KubeConfig` pointing at this server. Pass the class, e.g.
   * `server.kubeConfig(KubeConfig)`, so this package does not depend on
   * @kubernetes/client-node at run time.
   */
  kubeConfig<T extends KubeConfigLike>(ctor: new () => T): T {
    const config = new ctor();
    config.loadFromOptions(this.kubeConfigOptions());
    return config;
  }

  /** A kubeconfig file's text pointing at this server (for code that reads KUBECONFIG). */
  kubeconfigYaml(): string {
    return [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: fake-kube-apiserver",
      "  cluster:",
      `    server: ${this.url}`,
      "    insecure-skip-tls-verify: true",
      "contexts:",
      "- name: fake",
      "  context:",
      "    cluster: fake-kube-apiserver",
      "    user: fake-user",
      "    namespace: default",
      "current-context: fake",
      "users:",
      "- name: fake-user",
      "  user: {}",
      "",
    ].join("\n");
  }

  // ---------------------------------------------------------------- state hooks

  /** Serves a custom resource under every version in `def.versions`, as an established CRD would. */
  registerResource(def: ResourceDefinition): void {
    this.store.register(customResourceType(def));
  }

  /** The cluster's current resourceVersion. */
  resourceVersion(): string {
    return String(this.store.currentResourceVersion());
  }

  private typeFor(gvr: GroupVersionResource): ResourceType {
    const type = this.store.lookup(gvr.group ?? "", gvr.resource);
    if (!type) throw new Error(`resource ${gvr.resource} in group "${gvr.group ?? ""}" is not served`);
    if (gvr.version !== undefined && !type.versions.includes(gvr.version)) {
      throw new Error(`resource ${gvr.resource} is not served under version ${gvr.version}`);
    }
    return type;
  }

  private typeOfObject(apiVersion: string | undefined, kind: string | undefined): ResourceType {
    const type = apiVersion && kind ? this.store.typeOf(apiVersion, kind) : undefined;
    if (!type) throw new Error(`no served resource for apiVersion ${apiVersion} kind ${kind}`);
    return type;
  }

  /** Copies of the stored objects of a resource (optionally one namespace), under the requested or storage version. */
  objects(gvr: GroupVersionResource, namespace?: string): KubeObject[] {
    const type = this.typeFor(gvr);
    const version = gvr.version ?? type.versions[0]!;
    return this.store.list(type, namespace).map((o) => structuredClone(present(type, version, o)));
  }

  /** A copy of one stored object, or undefined. */
  get(ref: ObjectReference): KubeObject | undefined {
    const type = this.typeOfObject(ref.apiVersion, ref.kind);
    const obj = this.store.get(type, type.namespaced ? ref.namespace : undefined, ref.name);
    const version = ref.apiVersion.split("/").pop()!;
    return obj ? structuredClone(present(type, version, obj)) : undefined;
  }

  /**
   * Creates or replaces an object directly (a test seed): no resourceVersion
   * precondition or namespace check, and `.status` is written as given. It
   * goes through the same store, so it gets a new resourceVersion and
   * watchers see ADDED or MODIFIED. A namespaced object without
   * metadata.namespace goes to "default". Returns a copy of the stored
   * object; an invalid one (e.g. a bad name) throws `KubeApiError`.
   */
  apply(obj: KubeObject): KubeObject {
    const type = this.typeOfObject(obj.apiVersion, obj.kind);
    const name = obj.metadata?.name;
    if (!name) throw new Error("apply needs metadata.name");
    const namespace = type.namespaced ? (obj.metadata?.namespace ?? "default") : undefined;
    const { object } = this.store.update(type, namespace, name, obj, { seed: true });
    const version = obj.apiVersion!.split("/").pop()!;
    return structuredClone(present(type, version, object));
  }

  /** Deletes an object directly, ignoring finalizers; watchers see DELETED. Returns its last state, or undefined if absent. */
  delete(ref: ObjectReference): KubeObject | undefined {
    const type = this.typeOfObject(ref.apiVersion, ref.kind);
    const namespace = type.namespaced ? (ref.namespace ?? "default") : undefined;
    if (!this.store.get(type, namespace, ref.name)) return undefined;
    const { object } = this.store.delete(type, namespace, ref.name, { force: true });
    return structuredClone(present(type, ref.apiVersion.split("/").pop()!, object));
  }

  /**
   * Forgets all watch history, as etcd compaction does: a watch or a
   * continue token from an older resourceVersion then gets 410 Expired.
   * Open watches keep running.
   */
  compact(): void {
    this.store.compact();
  }

  /** Closes every open watch stream; returns how many. Default mode "reset" drops the TCP connection. */
  dropWatches(options: { mode?: DropMode } = {}): number {
    const streams = [...this.watches];
    for (const stream of streams) {
      if (options.mode === "end") this.endWatch(stream);
      else {
        this.closeWatch(stream);
        stream.res.socket?.destroy();
      }
    }
    return streams.length;
  }

  /**
   * Holds new watch requests unanswered until `resumeWatches()`, like a
   * network partition; lists and writes still work. Together with
   * `dropWatches()` and `compact()` this makes a client resume from a
   * resourceVersion that is gone.
   */
  pauseWatches(): void {
    this.pausedWatchStarts ??= [];
  }

  /** Lets watch requests held by `pauseWatches()` proceed. */
  resumeWatches(): void {
    const waiting = this.pausedWatchStarts ?? [];
    this.pausedWatchStarts = undefined;
    for (const start of waiting) start();
  }

  /** Number of open watch streams, optionally of one resource. */
  watchCount(filter: { group?: string; resource?: string } = {}): number {
    let n = 0;
    for (const w of this.watches) {
      if (filter.resource !== undefined && w.type.plural !== filter.resource) continue;
      if (filter.group !== undefined && w.type.group !== filter.group) continue;
      n++;
    }
    return n;
  }

  /**
   * Answers the next `times` requests matching `filter` with the given
   * failure `Status` instead of serving them.
   */
  injectFailure(filter: FakeKubeRequestFilter, failure: InjectedFailure, times = 1): void {
    this.failures.push({ filter, failure, remaining: times });
  }

  // ---------------------------------------------------------------- tokens

  /** Registers a bearer token that TokenReview will accept (or reject as expired / wrong audience). */
  addToken(token: string, options: FakeTokenOptions): void {
    this.tokens.set(token, structuredClone(options));
  }

  /** Registers a projected service-account token for `system:serviceaccount:<namespace>:<name>`. */
  addServiceAccountToken(token: string, options: FakeServiceAccountTokenOptions): void {
    this.tokens.set(token, serviceAccountTokenOptions(options));
  }

  /** Forgets a token; TokenReview then answers "invalid bearer token". */
  removeToken(token: string): void {
    this.tokens.delete(token);
  }

  // ---------------------------------------------------------------- authorization

  /** Grants what a rule covers to SubjectAccessReviews (nothing is granted until a rule is added). */
  allow(rule: FakeAccessRule): void {
    this.accessRules.push(structuredClone(rule));
  }

  /** Copies of the SubjectAccessReviews answered so far, in order, with their answers. */
  subjectAccessReviews(): FakeAccessReview[] {
    return this.accessReviews.map((review) => structuredClone(review));
  }

  // ---------------------------------------------------------------- request log

  /** Copies of all requests received so far, in arrival order. */
  requests(): FakeKubeRequest[] {
    return this.log.map((r) => structuredClone(r));
  }

  /** Requests whose fields equal every field given in `filter`. */
  requestsMatching(filter: FakeKubeRequestFilter): FakeKubeRequest[] {
    return this.requests().filter((r) => matchesFilter(r, filter));
  }

  /** How many requests matched `filter`, e.g. `{ verb: "list", resource: "services" }`. */
  requestCount(filter: FakeKubeRequestFilter = {}): number {
    return this.log.filter((r) => matchesFilter(r, filter)).length;
  }

  /** Empties the request log. */
  clearRequests(): void {
    this.log.length = 0;
  }

  /** Ends every watch and stops the server. */
  async close(): Promise<void> {
    this.unregisterCleanup();
    this.resumeWatches();
    for (const stream of [...this.watches]) this.endWatch(stream);
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  // ---------------------------------------------------------------- HTTP

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const entry: FakeKubeRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
    };
    this.log.push(entry);
    try {
      const body = await readBody(req);
      await this.route(req, res, url, entry, body);
    } catch (err) {
      const status =
        err instanceof KubeApiError
          ? err.status
          : failureStatus(500, "InternalError", `Internal error occurred: ${(err as Error).message}`);
      if (res.headersSent) {
        res.destroy();
        return;
      }
      this.sendJson(res, entry, status.code, status);
    }
  }

  private sendJson(res: ServerResponse, entry: FakeKubeRequest, code: number, body: unknown): void {
    entry.statusCode = code;
    const text = JSON.stringify(body);
    res.writeHead(code, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
    res.end(text);
  }

  private async route(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    entry: FakeKubeRequest,
    body: Buffer,
  ): Promise<void> {
    let segments: string[];
    try {
      segments = url.pathname
        .split("/")
        .filter((s) => s !== "")
        .map((s) => decodeURIComponent(s));
    } catch {
      throw badRequest("malformed path");
    }
    const method = entry.method;
    const [root, second, third] = segments;
    if (segments.length === 0 && method === "GET") {
      return this.sendJson(res, entry, 200, { paths: ["/api", "/api/v1", "/apis", "/healthz", "/version"] });
    }
    if ((root === "healthz" || root === "livez" || root === "readyz") && segments.length === 1) {
      entry.statusCode = 200;
      res.writeHead(200, { "Content-Type": "text/plain; charset=utf-8" });
      res.end("ok");
      return;
    }
    if (root === "version" && segments.length === 1) {
      return this.sendJson(res, entry, 200, {
        major: "1",
        minor: "31",
        gitVersion: "v1.31.0-sextant-fake",
        platform: "linux/amd64",
      });
    }
    let group: string;
    let version: string;
    let rest: string[];
    if (root === "api") {
      if (segments.length === 1) return this.sendJson(res, entry, 200, this.apiVersions());
      if (second !== "v1") throw pathNotFound();
      group = "";
      version = "v1";
      rest = segments.slice(2);
    } else if (root === "apis") {
      if (segments.length === 1) return this.sendJson(res, entry, 200, this.apiGroupList());
      group = second!;
      if (segments.length === 2) {
        const g = this.apiGroupList().groups.find((x) => x.name === group);
        if (!g) throw pathNotFound();
        return this.sendJson(res, entry, 200, { kind: "APIGroup", apiVersion: "v1", ...g });
      }
      version = third!;
      rest = segments.slice(3);
    } else {
      throw pathNotFound();
    }
    if (rest.length === 0) {
      const list = this.apiResourceList(group, version);
      if (!list) throw pathNotFound();
      return this.sendJson(res, entry, 200, list);
    }
    if (
      group === "authentication.k8s.io" &&
      version === "v1" &&
      rest.length === 1 &&
      rest[0] === "tokenreviews"
    ) {
      entry.group = group;
      entry.version = version;
      entry.resource = "tokenreviews";
      if (method !== "POST") throw methodNotAllowed();
      entry.verb = "create";
      this.checkInjectedFailure(entry);
      const review = reviewToken(parseObjectBody(body), this.tokens, this.apiAudiences);
      return this.sendJson(res, entry, 201, review);
    }
    if (
      group === "authorization.k8s.io" &&
      version === "v1" &&
      rest.length === 1 &&
      rest[0] === "subjectaccessreviews"
    ) {
      entry.group = group;
      entry.version = version;
      entry.resource = "subjectaccessreviews";
      if (method !== "POST") throw methodNotAllowed();
      entry.verb = "create";
      this.checkInjectedFailure(entry);
      const { response, asked } = reviewAccess(parseObjectBody(body), this.accessRules);
      this.accessReviews.push(asked);
      return this.sendJson(res, entry, 201, response);
    }
    const target = this.resolve(group, version, rest);
    entry.group = group;
    entry.version = version;
    entry.resource = target.type.plural;
    if (target.subresource !== undefined) entry.subresource = target.subresource;
    if (target.namespace !== undefined) entry.namespace = target.namespace;
    if (target.name !== undefined) entry.name = target.name;
    const query = url.searchParams;
    const wantsWatch = target.watchPrefix || query.get("watch") === "true" || query.get("watch") === "1";
    const verb = this.verbOf(method, target, wantsWatch);
    entry.verb = verb;
    this.checkInjectedFailure(entry);
    if (query.has("dryRun")) throw badRequest("the fake kube-apiserver does not implement dryRun");
    switch (verb) {
      case "get":
        return this.handleGet(res, entry, target);
      case "list":
        return this.handleList(res, entry, target, query);
      case "watch":
        return this.handleWatch(res, entry, target, query);
      case "create":
        return this.handleCreate(res, entry, target, body);
      case "update":
        return this.handleUpdate(res, entry, target, body);
      case "patch":
        return this.handlePatch(req, res, entry, target, body);
      case "delete":
        return this.handleDelete(res, entry, target, body);
      case "deletecollection":
        return this.handleDeleteCollection(res, entry, target, query);
    }
  }

  private checkInjectedFailure(entry: FakeKubeRequest): void {
    const index = this.failures.findIndex((f) => matchesFilter(entry, f.filter));
    if (index < 0) return;
    const f = this.failures[index]!;
    f.remaining--;
    if (f.remaining <= 0) this.failures.splice(index, 1);
    throw new KubeApiError(
      failureStatus(f.failure.code, f.failure.reason, f.failure.message ?? `injected ${f.failure.reason}`),
    );
  }

  private resolve(group: string, version: string, rest: string[]): ResourceRequest {
    let watchPrefix = false;
    let parts = rest;
    if (parts[0] === "watch") {
      watchPrefix = true;
      parts = parts.slice(1);
    }
    let namespace: string | undefined;
    // /namespaces/{ns}/{resource}/... is namespaced content, except the
    // namespace's own subresources /namespaces/{name}/status|finalize.
    if (
      parts[0] === "namespaces" &&
      parts.length >= 3 &&
      !(parts.length === 3 && (parts[2] === "status" || parts[2] === "finalize"))
    ) {
      namespace = parts[1];
      parts = parts.slice(2);
    }
    if (parts.length === 0 || parts.length > 3) throw pathNotFound();
    const [plural, name, subresource] = parts;
    const type = this.store.lookup(group, plural!);
    if (!type?.versions.includes(version)) throw pathNotFound();
    if (namespace !== undefined && !type.namespaced) throw pathNotFound();
    if (namespace === undefined && type.namespaced && name !== undefined) throw pathNotFound();
    if (subresource !== undefined && !(subresource === "status" && type.statusSubresource))
      throw pathNotFound();
    if (watchPrefix && subresource !== undefined) throw pathNotFound();
    return { type, version, namespace, name, subresource, watchPrefix };
  }

  private verbOf(
    method: string,
    target: ResourceRequest,
    wantsWatch: boolean,
  ): NonNullable<FakeKubeRequest["verb"]> {
    const named = target.name !== undefined;
    const clusterWideNamespaced = target.type.namespaced && target.namespace === undefined;
    switch (method) {
      case "GET":
        if (wantsWatch) return "watch";
        return named ? "get" : "list";
      case "POST":
        if (named || clusterWideNamespaced) throw methodNotAllowed();
        return "create";
      case "PUT":
        if (!named) throw methodNotAllowed();
        return "update";
      case "PATCH":
        if (!named) throw methodNotAllowed();
        return "patch";
      case "DELETE":
        if (named) return "delete";
        if (clusterWideNamespaced) throw methodNotAllowed();
        return "deletecollection";
      default:
        throw methodNotAllowed();
    }
  }

  // ---------------------------------------------------------------- verbs

  private handleGet(res: ServerResponse, entry: FakeKubeRequest, t: ResourceRequest): void {
    const obj = this.store.get(t.type, t.namespace, t.name!);
    if (!obj) throw notFound(t.type, t.name!);
    this.sendJson(res, entry, 200, present(t.type, t.version, obj));
  }

  private selectors(t: ResourceRequest, query: URLSearchParams): { labels: Selector; fields: Selector } {
    return {
      labels: parseLabelSelector(query.get("labelSelector")),
      fields: parseFieldSelector(query.get("fieldSelector"), t.type.fieldLabels),
    };
  }

  private async handleList(
    res: ServerResponse,
    entry: FakeKubeRequest,
    t: ResourceRequest,
    query: URLSearchParams,
  ): Promise<void> {
    const { labels, fields } = this.selectors(t, query);
    const rvParam = query.get("resourceVersion") ?? "";
    const rvMatch = query.get("resourceVersionMatch") ?? "";
    const limitParam = query.get("limit");
    const limit = limitParam !== null && /^\d+$/.test(limitParam) ? Number(limitParam) : 0;
    const continueToken = query.get("continue") ?? "";
    if (rvMatch !== "" && rvMatch !== "Exact" && rvMatch !== "NotOlderThan") {
      throw listOptionsInvalid("resourceVersionMatch", `Unsupported value: "${rvMatch}"`);
    }
    if (rvMatch !== "" && rvParam === "") {
      throw listOptionsInvalid(
        "resourceVersionMatch",
        "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
      );
    }
    let snapshotRv: number;
    let items: KubeObject[];
    let startAfter: string | undefined;
    if (continueToken !== "") {
      if (rvParam !== "") throw badRequest("specifying resource version is not allowed when using continue");
      const token = decodeContinue(continueToken);
      try {
        items = this.store.listAt(t.type, token.rv, t.namespace);
      } catch (err) {
        if (err instanceof KubeApiError && err.code === 410) {
          throw expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
          );
        }
        throw err;
      }
      snapshotRv = token.rv;
      startAfter = token.start;
    } else {
      const rv = parseResourceVersion(rvParam);
      // resourceVersion=N with a limit and no match means Exact, for compatibility.
      const exact = rvMatch === "Exact" || (rvMatch === "" && limit > 0 && rv !== undefined && rv !== 0);
      if (rv !== undefined && rv !== 0 && exact) {
        if (rv > this.store.currentResourceVersion()) {
          throw tooLargeResourceVersion(rv, this.store.currentResourceVersion());
        }
        items = this.store.listAt(t.type, rv, t.namespace);
        snapshotRv = rv;
      } else {
        if (rv !== undefined && rv > this.store.currentResourceVersion()) {
          await this.waitForResourceVersion(rv);
          if (rv > this.store.currentResourceVersion()) {
            throw tooLargeResourceVersion(rv, this.store.currentResourceVersion());
          }
        }
        items = this.store.list(t.type, t.namespace);
        snapshotRv = this.store.currentResourceVersion();
      }
    }
    const keyOf = (o: KubeObject) => objectKey(t.type, o.metadata?.namespace, o.metadata?.name ?? "");
    let matched = items.filter(
      (o) => (startAfter === undefined || keyOf(o) > startAfter) && labels(o) && fields(o),
    );
    const metadata: Record<string, unknown> = { resourceVersion: String(snapshotRv) };
    if (limit > 0 && matched.length > limit) {
      const remaining = matched.length - limit;
      matched = matched.slice(0, limit);
      metadata.continue = encodeContinue(snapshotRv, keyOf(matched[matched.length - 1]!));
      if (!query.get("labelSelector") && !query.get("fieldSelector")) metadata.remainingItemCount = remaining;
    }
    // Built-in lists carry no per-item apiVersion/kind (typed encoding);
    // custom resource lists are unstructured and do.
    const out = matched.map((o) => {
      const p = present(t.type, t.version, o);
      if (t.type.custom) return p;
      const { apiVersion: _a, kind: _k, ...item } = p;
      return item;
    });
    this.sendJson(res, entry, 200, {
      kind: t.type.listKind,
      apiVersion: apiVersionOf(t.type.group, t.version),
      metadata,
      items: out,
    });
  }

  private waitForResourceVersion(rv: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, this.tooLargeWaitMs);
      const unsubscribe = this.store.subscribe(() => {
        if (this.store.currentResourceVersion() >= rv) done();
      });
      function done(): void {
        clearTimeout(timer);
        unsubscribe();
        resolve();
      }
    });
  }

  private async handleWatch(
    res: ServerResponse,
    entry: FakeKubeRequest,
    t: ResourceRequest,
    query: URLSearchParams,
  ): Promise<void> {
    const { labels: labelSel, fields: fieldSel } = this.selectors(t, query);
    // A single-object watch under the legacy /watch/.../{name} path.
    const fields: Selector =
      t.name !== undefined ? (o) => o.metadata?.name === t.name && fieldSel(o) : fieldSel;
    const allowBookmarks = query.get("allowWatchBookmarks") === "true";
    const sendInitialEvents = query.get("sendInitialEvents");
    const rvMatch = query.get("resourceVersionMatch") ?? "";
    const timeoutParam = query.get("timeoutSeconds");
    if (sendInitialEvents !== null) {
      if (!allowBookmarks) {
        throw listOptionsInvalid(
          "allowWatchBookmarks",
          "Forbidden: allowWatchBookmarks must be set to true when sendInitialEvents is set",
        );
      }
      if (rvMatch !== "NotOlderThan") {
        throw listOptionsInvalid(
          "resourceVersionMatch",
          "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        );
      }
    } else if (rvMatch !== "") {
      throw listOptionsInvalid(
        "resourceVersionMatch",
        "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
      );
    }
    const rv = parseResourceVersion(query.get("resourceVersion"));
    if (this.pausedWatchStarts) {
      const queue = this.pausedWatchStarts;
      await new Promise<void>((resolve) => queue.push(resolve));
    }
    if (rv !== undefined && rv > this.store.currentResourceVersion()) await this.waitForResourceVersion(rv);
    // The client may have gone while we waited. (req.destroyed is no signal:
    // a fully read request is auto-destroyed.)
    if (res.destroyed || !res.socket || res.socket.destroyed) return;

    entry.statusCode = 200;
    res.writeHead(200, {
      "Content-Type": "application/json",
      "Cache-Control": "no-cache, private",
      "Transfer-Encoding": "chunked",
    });
    res.flushHeaders();
    const stream: WatchStream = {
      type: t.type,
      version: t.version,
      namespace: t.namespace,
      labels: labelSel,
      fields,
      res,
      allowBookmarks,
      timers: [],
      unsubscribe: () => {},
      closed: false,
    };
    const matches = (o: KubeObject | undefined): o is KubeObject =>
      o !== undefined &&
      (stream.namespace === undefined || o.metadata?.namespace === stream.namespace) &&
      stream.labels(o) &&
      stream.fields(o);

    // Everything below runs in one synchronous block, so no commit can fall
    // between the replayed history and the live subscription.
    const current = this.store.currentResourceVersion();
    if (rv !== undefined && rv > current) {
      this.writeEvent(stream, "ERROR", tooLargeResourceVersion(rv, current).status);
      res.end();
      return;
    }
    let initial: KubeObject[] = [];
    let replay: StoredEvent[] = [];
    const fromNow = rv === undefined || rv === 0;
    try {
      if (sendInitialEvents === "true" || (sendInitialEvents === null && fromNow)) {
        initial = this.store.list(t.type, t.namespace).filter(matches);
      } else if (!fromNow) {
        replay = this.store.eventsSince(t.type, rv);
      }
    } catch (err) {
      if (!(err instanceof KubeApiError)) throw err;
      // Once the request is accepted, the API server reports this as an
      // ERROR event in a 200 stream, then closes it.
      this.writeEvent(stream, "ERROR", err.status);
      res.end();
      return;
    }
    this.watches.add(stream);
    stream.unsubscribe = this.store.subscribe((event) => this.deliver(stream, event, matches));
    res.on("close", () => this.closeWatch(stream));
    for (const obj of initial) this.writeEvent(stream, "ADDED", present(t.type, t.version, obj));
    if (sendInitialEvents === "true") {
      this.writeEvent(stream, "BOOKMARK", this.bookmark(stream, { "k8s.io/initial-events-end": "true" }));
    }
    for (const event of replay) this.deliver(stream, event, matches);
    if (allowBookmarks) {
      const timer = setInterval(
        () => this.writeEvent(stream, "BOOKMARK", this.bookmark(stream)),
        this.bookmarkIntervalMs,
      );
      timer.unref();
      stream.timers.push(timer);
    }
    const timeoutSeconds =
      timeoutParam !== null && /^\d+$/.test(timeoutParam) && Number(timeoutParam) > 0
        ? Number(timeoutParam)
        : (this.defaultWatchTimeoutSeconds ?? 1800 * (1 + Math.random()));
    const timeout = setTimeout(() => {
      // The watch cache sends a last bookmark right before a watch times out.
      if (stream.allowBookmarks) this.writeEvent(stream, "BOOKMARK", this.bookmark(stream));
      this.endWatch(stream);
    }, timeoutSeconds * 1000);
    timeout.unref();
    stream.timers.push(timeout);
  }

  private bookmark(stream: WatchStream, annotations?: Record<string, string>): KubeObject {
    const metadata: Record<string, unknown> = { resourceVersion: this.resourceVersion() };
    if (annotations) metadata.annotations = annotations;
    return { kind: stream.type.kind, apiVersion: apiVersionOf(stream.type.group, stream.version), metadata };
  }

  // Translates a store event into what this watcher sees: an object that
  // stops matching its selector is DELETED for it, one that starts matching
  // is ADDED, as the watch cache does.
  private deliver(
    stream: WatchStream,
    event: StoredEvent,
    matches: (o: KubeObject | undefined) => boolean,
  ): void {
    if (event.type !== stream.type) return;
    const present_ = (o: KubeObject) => present(stream.type, stream.version, o);
    if (event.eventType === "ADDED") {
      if (matches(event.object)) this.writeEvent(stream, "ADDED", present_(event.object));
      return;
    }
    if (event.eventType === "DELETED") {
      if (matches(event.previous)) this.writeEvent(stream, "DELETED", present_(event.object));
      return;
    }
    const now = matches(event.object);
    const before = matches(event.previous);
    if (now && before) this.writeEvent(stream, "MODIFIED", present_(event.object));
    else if (now) this.writeEvent(stream, "ADDED", present_(event.object));
    else if (before && event.previous) {
      const last = {
        ...event.previous,
        metadata: { ...event.previous.metadata, resourceVersion: String(event.rv) },
      };
      this.writeEvent(stream, "DELETED", present_(last));
    }
  }

  private writeEvent(stream: WatchStream, type: WatchEventType, object: KubeObject | KubeStatus): void {
    if (stream.closed || stream.res.destroyed) return;
    stream.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  private closeWatch(stream: WatchStream): void {
    if (stream.closed) return;
    stream.closed = true;
    stream.unsubscribe();
    for (const timer of stream.timers) clearTimeout(timer);
    this.watches.delete(stream);
  }

  private endWatch(stream: WatchStream): void {
    this.closeWatch(stream);
    if (!stream.res.destroyed) stream.res.end();
  }

  private checkBodyType(t: ResourceRequest, obj: KubeObject): void {
    const expected = apiVersionOf(t.type.group, t.version);
    if (obj.apiVersion !== undefined && obj.apiVersion !== expected) {
      throw badRequest(
        `the API version in the data (${obj.apiVersion}) does not match the expected API version (${expected})`,
      );
    }
    if (obj.kind !== undefined && obj.kind !== t.type.kind) {
      throw badRequest(
        `the kind in the data (${obj.kind}) does not match the expected kind (${t.type.kind})`,
      );
    }
    const ns = obj.metadata?.namespace;
    if (t.type.namespaced && ns !== undefined && ns !== "" && ns !== t.namespace) {
      throw badRequest(
        "the namespace of the provided object does not match the namespace sent on the request",
      );
    }
  }

  private handleCreate(res: ServerResponse, entry: FakeKubeRequest, t: ResourceRequest, body: Buffer): void {
    const obj = parseObjectBody(body);
    this.checkBodyType(t, obj);
    const created = this.store.create(t.type, t.namespace, obj);
    this.sendJson(res, entry, 201, present(t.type, t.version, created));
  }

  private handleUpdate(res: ServerResponse, entry: FakeKubeRequest, t: ResourceRequest, body: Buffer): void {
    const obj = parseObjectBody(body);
    this.checkBodyType(t, obj);
    const bodyName = obj.metadata?.name ?? "";
    if (bodyName !== t.name) {
      throw badRequest(`the name of the object (${bodyName}) does not match the name on the URL (${t.name})`);
    }
    const opts = t.subresource === "status" ? { subresource: "status" as const } : {};
    const { object, created } = this.store.update(t.type, t.namespace, t.name, obj, opts);
    this.sendJson(res, entry, created ? 201 : 200, present(t.type, t.version, object));
  }

  private handlePatch(
    req: IncomingMessage,
    res: ServerResponse,
    entry: FakeKubeRequest,
    t: ResourceRequest,
    body: Buffer,
  ): void {
    const contentType = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    const accepted =
      "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/apply-patch+cbor";
    let kind: "merge" | "json";
    switch (contentType) {
      case "application/merge-patch+json":
        kind = "merge";
        break;
      case "application/json-patch+json":
        kind = "json";
        break;
      case "application/strategic-merge-patch+json":
        // Custom resources have no patch strategy; the real server refuses.
        if (t.type.custom) {
          throw unsupportedMediaType(
            `the body of the request was in an unknown format - accepted media types include: ${accepted}`,
          );
        }
        // Deviation: treated as a merge patch (lists are replaced, not merged by key).
        kind = "merge";
        break;
      case "application/apply-patch+yaml":
        this.handleApply(req, res, entry, t, body);
        return;
      case "application/apply-patch+cbor":
        throw unsupportedMediaType("the fake kube-apiserver does not implement CBOR");
      default:
        throw unsupportedMediaType(
          `the body of the request was in an unknown format - accepted media types include: ${accepted}`,
        );
    }
    const existing = this.store.get(t.type, t.namespace, t.name!);
    if (!existing) throw notFound(t.type, t.name!);
    const patch = parseJsonBody(body);
    const base = structuredClone(present(t.type, t.version, existing));
    let patched: unknown;
    if (kind === "merge") {
      if (!isRecord(patch)) throw badRequest("error decoding patch: a merge patch must be a JSON object");
      patched = applyMergePatch(base, patch);
    } else {
      try {
        patched = applyJsonPatch(base, patch);
      } catch (err) {
        if (!(err instanceof JsonPatchError)) throw err;
        throw err.malformed ? badRequest(err.message) : unprocessable(err.message);
      }
    }
    if (!isRecord(patched)) throw badRequest("the patch did not produce a JSON object");
    const obj = patched as KubeObject;
    this.checkBodyType(t, obj);
    if ((obj.metadata?.name ?? "") !== t.name) {
      throw badRequest(
        `the name of the object (${obj.metadata?.name ?? ""}) does not match the name on the URL (${t.name})`,
      );
    }
    // A patch is unconditional unless it sets metadata.resourceVersion itself.
    obj.metadata = { ...(obj.metadata ?? {}) };
    if (!obj.metadata.resourceVersion)
      obj.metadata.resourceVersion = existing.metadata?.resourceVersion ?? "";
    const opts = t.subresource === "status" ? { subresource: "status" as const } : {};
    const { object } = this.store.update(t.type, t.namespace, t.name!, obj, opts);
    this.sendJson(res, entry, 200, present(t.type, t.version, object));
  }

  /**
   * Server-side apply, as a double: the body must be JSON (YAML's JSON form,
   * which is what client-node sends) with apiVersion, kind and the URL's name,
   * and `fieldManager` is required. A missing object is created (201). An
   * existing one gets the applied configuration merged over it as a merge
   * patch would (maps merged, lists replaced); there are no managedFields, so
   * a field a manager stops applying is not removed, and no conflicts are
   * detected (as with `force=true`). Only the main resource, not `/status`.
   */
  private handleApply(
    req: IncomingMessage,
    res: ServerResponse,
    entry: FakeKubeRequest,
    t: ResourceRequest,
    body: Buffer,
  ): void {
    const query = new URL(req.url ?? "/", "http://fake").searchParams;
    if (!query.get("fieldManager"))
      throw badRequest("fieldManager: Required value: is required for apply patch");
    if (t.subresource !== undefined)
      throw badRequest("the fake kube-apiserver does not implement server-side apply of a subresource");
    const applied = parseObjectBody(body);
    if (applied.apiVersion === undefined || applied.kind === undefined)
      throw badRequest("apiVersion and kind are required in an apply configuration");
    this.checkBodyType(t, applied);
    if ((applied.metadata?.name ?? "") !== t.name) {
      throw badRequest(
        `the name of the object (${applied.metadata?.name ?? ""}) does not match the name on the URL (${t.name})`,
      );
    }
    const existing = this.store.get(t.type, t.namespace, t.name!);
    if (!existing) {
      const created = this.store.create(t.type, t.namespace, applied);
      this.sendJson(res, entry, 201, present(t.type, t.version, created));
      return;
    }
    const obj = applyMergePatch(structuredClone(present(t.type, t.version, existing)), applied) as KubeObject;
    obj.metadata = { ...(obj.metadata ?? {}) };
    if (!applied.metadata?.resourceVersion)
      obj.metadata.resourceVersion = existing.metadata?.resourceVersion ?? "";
    const { object } = this.store.update(t.type, t.namespace, t.name!, obj, {});
    this.sendJson(res, entry, 200, present(t.type, t.version, object));
  }

  private deleteOptions(body: Buffer): { uid?: string; resourceVersion?: string } | undefined {
    if (body.length === 0) return undefined;
    const options = parseObjectBody(body);
    const pre = options.preconditions;
    if (!isRecord(pre)) return undefined;
    const result: { uid?: string; resourceVersion?: string } = {};
    if (typeof pre.uid === "string") result.uid = pre.uid;
    if (typeof pre.resourceVersion === "string") result.resourceVersion = pre.resourceVersion;
    return result;
  }

  private handleDelete(res: ServerResponse, entry: FakeKubeRequest, t: ResourceRequest, body: Buffer): void {
    const preconditions = this.deleteOptions(body);
    const { object, immediate } = this.store.delete(
      t.type,
      t.namespace,
      t.name!,
      preconditions ? { preconditions } : {},
    );
    // 202 while finalizers hold the object; 200 once it is gone.
    if (!immediate || t.type.returnDeletedObject) {
      this.sendJson(res, entry, immediate ? 200 : 202, present(t.type, t.version, object));
      return;
    }
    const details: Record<string, unknown> = { name: t.name, kind: t.type.plural, uid: object.metadata?.uid };
    if (t.type.group !== "") details.group = t.type.group;
    this.sendJson(res, entry, 200, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Success",
      details,
    });
  }

  private handleDeleteCollection(
    res: ServerResponse,
    entry: FakeKubeRequest,
    t: ResourceRequest,
    query: URLSearchParams,
  ): void {
    const { labels, fields } = this.selectors(t, query);
    const victims = this.store.list(t.type, t.namespace).filter((o) => labels(o) && fields(o));
    const items = victims.map((o) => {
      const { object } = this.store.delete(
        t.type,
        t.namespace ?? o.metadata?.namespace,
        o.metadata?.name ?? "",
      );
      return present(t.type, t.version, object);
    });
    this.sendJson(res, entry, 200, {
      kind: t.type.listKind,
      apiVersion: apiVersionOf(t.type.group, t.version),
      metadata: { resourceVersion: this.resourceVersion() },
      items,
    });
  }

  // ---------------------------------------------------------------- discovery

  private apiVersions(): Record<string, unknown> {
    return {
      kind: "APIVersions",
      versions: ["v1"],
      serverAddressByClientCIDRs: [
        { clientCIDR: "0.0.0.0/0", serverAddress: this.url.replace(/^http:\/\//, "") },
      ],
    };
  }

  private apiGroupList(): {
    kind: string;
    apiVersion: string;
    groups: Array<{
      name: string;
      versions: Array<{ groupVersion: string; version: string }>;
      preferredVersion: { groupVersion: string; version: string };
    }>;
  } {
    const versionsByGroup = new Map<string, string[]>();
    versionsByGroup.set("authentication.k8s.io", ["v1"]);
    versionsByGroup.set("authorization.k8s.io", ["v1"]);
    for (const type of this.store.allTypes()) {
      if (type.group === "") continue;
      const versions = versionsByGroup.get(type.group) ?? [];
      for (const v of type.versions) if (!versions.includes(v)) versions.push(v);
      versionsByGroup.set(type.group, versions);
    }
    const groups = [...versionsByGroup.entries()].map(([name, versions]) => {
      const list = versions.map((version) => ({ groupVersion: `${name}/${version}`, version }));
      return { name, versions: list, preferredVersion: list[0]! };
    });
    return { kind: "APIGroupList", apiVersion: "v1", groups };
  }

  private apiResourceList(group: string, version: string): Record<string, unknown> | undefined {
    const resources: Array<Record<string, unknown>> = [];
    for (const type of this.store.allTypes()) {
      if (type.group !== group || !type.versions.includes(version)) continue;
      const verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
      const resource: Record<string, unknown> = {
        name: type.plural,
        singularName: type.singular,
        namespaced: type.namespaced,
        kind: type.kind,
        verbs,
      };
      if (type.shortNames.length > 0) resource.shortNames = type.shortNames;
      resources.push(resource);
      if (type.statusSubresource) {
        resources.push({
          name: `${type.plural}/status`,
          singularName: "",
          namespaced: type.namespaced,
          kind: type.kind,
          verbs: ["get", "patch", "update"],
        });
      }
    }
    if (group === "authentication.k8s.io" && version === "v1") {
      resources.push({
        name: "tokenreviews",
        singularName: "",
        namespaced: false,
        kind: "TokenReview",
        verbs: ["create"],
      });
    }
    if (group === "authorization.k8s.io" && version === "v1") {
      resources.push({
        name: "subjectaccessreviews",
        singularName: "",
        namespaced: false,
        kind: "SubjectAccessReview",
        verbs: ["create"],
      });
    }
    if (resources.length === 0) return undefined;
    return {
      kind: "APIResourceList",
      apiVersion: "v1",
      groupVersion: apiVersionOf(group, version),
      resources,
    };
  }
}

function matchesFilter(r: FakeKubeRequest, filter: FakeKubeRequestFilter): boolean {
  for (const [key, value] of Object.entries(filter)) {
    if (value !== undefined && r[key as keyof FakeKubeRequest] !== value) return false;
  }
  return true;
}

/** Starts a fake kube-apiserver on 127.0.0.1 with an ephemeral port. Close it with `server.close()`. */
export function startFakeKubeApiServer(options: FakeKubeApiServerOptions = {}): Promise<FakeKubeApiServer> {
  return FakeKubeApiServer.start(options);
}
