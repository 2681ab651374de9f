// The Kubernetes Gateway API's CEL rules (the x-kubernetes-validations of its
// v1.5.1 CRDs, the release Istio 1.30.3 builds against), one check each,
// with the upstream rule's meaning and message and the path of the field it
// is attached to. They run after the structural check (../gateway-api/shape.ts)
// passed, so every field has the JSON type its schema gives it. Defaults the
// API server would fill in before CEL runs (a backendRef's kind "Service", a
// parentRef's group, a listener's TLS mode "Terminate", an HTTPRoute rule's
// one "/" prefix match) are applied where a rule reads them.

import { at, type Issues, key } from "../issues.js";
import { isIpAddress } from "./common.js";
import type { RuleContext } from "./context.js";

// The fields the rules read. Everything is optional: the schema's `required`
// is enforced before, and a rule states its own defaults.
interface ParentRef {
  group?: string;
  kind?: string;
  namespace?: string;
  name?: string;
  sectionName?: string;
  port?: number;
}
interface BackendRef {
  group?: string;
  kind?: string;
  name?: string;
  port?: number;
  filters?: Filter[];
}
interface PathModifier {
  type?: string;
  replaceFullPath?: string;
  replacePrefixMatch?: string;
}
interface Filter {
  type?: string;
  requestHeaderModifier?: object;
  responseHeaderModifier?: object;
  requestMirror?: {
    backendRef?: BackendRef;
    percent?: number;
    fraction?: { numerator?: number; denominator?: number };
  };
  requestRedirect?: { path?: PathModifier };
  urlRewrite?: { path?: PathModifier };
  cors?: { allowOrigins?: string[]; allowMethods?: string[]; allowHeaders?: string[] };
  extensionRef?: object;
}
interface HttpMatch {
  path?: { type?: string; value?: string };
}
interface HttpRule {
  matches?: HttpMatch[];
  filters?: Filter[];
  backendRefs?: BackendRef[];
  timeouts?: { request?: string; backendRequest?: string };
}
interface GrpcRule {
  matches?: Array<{ method?: { type?: string; service?: string; method?: string } }>;
  filters?: Filter[];
  backendRefs?: BackendRef[];
}
interface Listener {
  name?: string;
  hostname?: string;
  port?: number;
  protocol?: string;
  tls?: { mode?: string; certificateRefs?: unknown[]; options?: Record<string, string> };
}

/** A Gateway API spec as stored: the JSON as written, checked against its kind's shape. */
export type GatewayApiSpec = Record<string, unknown>;

export interface KubernetesGatewaySpec {
  addresses?: Array<{ type?: string; value?: string }>;
  infrastructure?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  listeners?: Listener[];
  tls?: { frontend?: { perPort?: Array<{ port?: number }> } };
}
export interface HttpRouteSpec {
  parentRefs?: ParentRef[];
  rules?: HttpRule[];
}
export interface GrpcRouteSpec {
  parentRefs?: ParentRef[];
  rules?: GrpcRule[];
}
export interface TlsRouteSpec {
  parentRefs?: ParentRef[];
  hostnames?: string[];
  rules?: Array<{ backendRefs?: BackendRef[] }>;
}
export interface TcpRouteSpec {
  parentRefs?: ParentRef[];
  rules?: Array<{ name?: string; backendRefs?: BackendRef[] }>;
}
export interface BackendTlsPolicySpec {
  targetRefs?: Array<{ group?: string; kind?: string; name?: string; sectionName?: string }>;
  validation?: {
    caCertificateRefs?: unknown[];
    wellKnownCACertificates?: string;
    subjectAltNames?: Array<{ type?: string; hostname?: string; uri?: string }>;
  };
}

/** GatewayClass. Its one CEL rule (controllerName is immutable) compares with the stored object; see the README. */
export function validateGatewayClass(_spec: GatewayApiSpec, _ctx: RuleContext): void {}

/** Gateway (gateway.networking.k8s.io). */
export function validateKubernetesGateway(spec: KubernetesGatewaySpec, { issues, path }: RuleContext): void {
  const addresses = spec.addresses ?? [];
  for (const type of ["IPAddress", "Hostname"]) {
    // IPAddress is the default type, as the API server fills it in.
    const values = addresses
      .filter((a) => (a.type ?? "IPAddress") === type && a.value !== undefined)
      .map((a) => a.value as string);
    if (new Set(values).size !== values.length)
      issues.error(`${path}.addresses`, `${type} values must be unique`);
  }
  addresses.forEach((address, i) => {
    if (address.type === "Hostname" && address.value !== undefined && !WILDCARD_HOST.test(address.value)) {
      issues.error(
        `${at(`${path}.addresses`, i)}.value`,
        `Hostname value must be empty or contain only valid characters (matching ${WILDCARD_HOST.source})`,
      );
    }
  });
  const infrastructure = spec.infrastructure ?? {};
  for (const field of ["labels", "annotations"] as const) {
    const what = field === "labels" ? "Label" : "Annotation";
    for (const name of Object.keys(infrastructure[field] ?? {})) {
      const entry = key(`${path}.infrastructure.${field}`, name);
      if (!QUALIFIED_KEY.test(name)) {
        issues.error(
          entry,
          `${what} keys must be in the form of an optional DNS subdomain prefix followed by a required name segment of up to 63 characters.`,
        );
      }
      if ((name.split("/")[0] ?? "").length >= 253) {
        issues.error(
          entry,
          `If specified, the ${what.toLowerCase()} key's prefix must be a DNS subdomain not longer than 253 characters in total.`,
        );
      }
    }
  }
  checkListeners(issues, `${path}.listeners`, spec.listeners ?? []);
  const perPort = spec.tls?.frontend?.perPort ?? [];
  if (!unique(perPort.map((p) => String(p.port)))) {
    issues.error(
      `${path}.tls.frontend.perPort`,
      "Port for TLS configuration must be unique within the Gateway",
    );
  }
}

function checkListeners(issues: Issues, path: string, listeners: Listener[]): void {
  const each = (test: (l: Listener) => boolean, message: string) => {
    if (!listeners.every(test)) issues.error(path, message);
  };
  each(
    (l) => !["HTTP", "TCP", "UDP"].includes(l.protocol ?? "") || l.tls === undefined,
    "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']",
  );
  each(
    (l) => !(l.protocol === "HTTPS" && l.tls) || (l.tls.mode ?? "") === "" || l.tls.mode === "Terminate",
    "tls mode must be Terminate for protocol HTTPS",
  );
  // A present tls gets mode Terminate by default before the rule runs, so only a missing tls (or an empty mode) fails.
  each(
    (l) => l.protocol !== "TLS" || (l.tls !== undefined && l.tls.mode !== ""),
    "tls mode must be set for protocol TLS",
  );
  each(
    (l) => !["TCP", "UDP"].includes(l.protocol ?? "") || (l.hostname ?? "") === "",
    "hostname must not be specified for protocols ['TCP', 'UDP']",
  );
  if (!unique(listeners.map((l) => l.name ?? "")))
    issues.error(path, "Listener name must be unique within the Gateway");
  if (!unique(listeners.map((l) => JSON.stringify([l.port, l.protocol, l.hostname ?? null])))) {
    issues.error(path, "Combination of port, protocol and hostname must be unique for each listener");
  }
  listeners.forEach((listener, i) => {
    const tls = listener.tls;
    if (!tls) return;
    const terminate = (tls.mode ?? "Terminate") === "Terminate";
    if (
      terminate &&
      (tls.certificateRefs ?? []).length === 0 &&
      Object.keys(tls.options ?? {}).length === 0
    ) {
      issues.error(
        `${at(path, i)}.tls`,
        "certificateRefs or options must be specified when mode is Terminate",
      );
    }
  });
}

/** HTTPRoute. */
export function validateHttpRoute(spec: HttpRouteSpec, { issues, path }: RuleContext): void {
  checkParentRefs(issues, `${path}.parentRefs`, spec.parentRefs ?? [], "sectionName");
  const rules = spec.rules ?? [];
  // An HTTPRoute rule without matches gets one "/" prefix match by default.
  const matchesOf = (rule: HttpRule): HttpMatch[] =>
    rule.matches ?? [{ path: { type: "PathPrefix", value: "/" } }];
  checkTotalMatches(
    issues,
    `${path}.rules`,
    rules.map((rule) => matchesOf(rule).length),
  );
  rules.forEach((rule, i) => {
    const rulePath = at(`${path}.rules`, i);
    const filters = rule.filters ?? [];
    const backendRefs = rule.backendRefs ?? [];
    if (backendRefs.length > 0 && filters.some((f) => f.requestRedirect !== undefined)) {
      issues.error(rulePath, "RequestRedirect filter must not be used together with backendRefs");
    }
    const matches = matchesOf(rule);
    // A match without a path gets the "/" prefix match by default.
    const onePrefixMatch = matches.length === 1 && (matches[0]?.path?.type ?? "PathPrefix") === "PathPrefix";
    const prefixReplacing = (field: "requestRedirect" | "urlRewrite") => (f: Filter) => {
      const modifier = f[field]?.path;
      return modifier?.type === "ReplacePrefixMatch" && modifier.replacePrefixMatch !== undefined;
    };
    const filterNames = { requestRedirect: "RequestRedirect", urlRewrite: "URLRewrite" } as const;
    for (const field of ["requestRedirect", "urlRewrite"] as const) {
      // CEL's exists_one: the rule applies when exactly one filter (or backendRef) does this.
      if (exactlyOne(filters, prefixReplacing(field)) && !onePrefixMatch) {
        issues.error(
          rulePath,
          `When using ${filterNames[field]} filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified`,
        );
      }
      if (
        exactlyOne(backendRefs, (b) => exactlyOne(b.filters ?? [], prefixReplacing(field))) &&
        !onePrefixMatch
      ) {
        issues.error(
          rulePath,
          `Within backendRefs, ${field === "requestRedirect" ? "when" : "When"} using ${filterNames[field]} filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified`,
        );
      }
    }
    checkHttpFilters(issues, `${rulePath}.filters`, filters);
    backendRefs.forEach((ref, j) => {
      const refPath = at(`${rulePath}.backendRefs`, j);
      checkServicePort(issues, refPath, ref);
      checkHttpFilters(issues, `${refPath}.filters`, ref.filters ?? []);
    });
    (rule.matches ?? []).forEach((match, j) => {
      if (match.path) checkPathMatch(issues, `${at(`${rulePath}.matches`, j)}.path`, match.path);
    });
    const timeouts = rule.timeouts;
    if (timeouts?.request !== undefined && timeouts.backendRequest !== undefined) {
      const request = gatewayDurationMs(timeouts.request);
      if (request !== 0 && gatewayDurationMs(timeouts.backendRequest) > request) {
        issues.error(`${rulePath}.timeouts`, "backendRequest timeout cannot be longer than request timeout");
      }
    }
  });
}

/** GRPCRoute. */
export function validateGrpcRoute(spec: GrpcRouteSpec, { issues, path }: RuleContext): void {
  checkParentRefs(issues, `${path}.parentRefs`, spec.parentRefs ?? [], "sectionName");
  const rules = spec.rules ?? [];
  checkTotalMatches(
    issues,
    `${path}.rules`,
    rules.map((rule) => (rule.matches ?? []).length),
  );
  rules.forEach((rule, i) => {
    const rulePath = at(`${path}.rules`, i);
    checkFilters(issues, `${rulePath}.filters`, rule.filters ?? [], GRPC_FILTERS);
    (rule.backendRefs ?? []).forEach((ref, j) => {
      const refPath = at(`${rulePath}.backendRefs`, j);
      checkServicePort(issues, refPath, ref);
      checkFilters(issues, `${refPath}.filters`, ref.filters ?? [], GRPC_FILTERS);
    });
    (rule.matches ?? []).forEach((match, j) => {
      const method = match.method;
      if (!method) return;
      const methodPath = `${at(`${rulePath}.matches`, j)}.method`;
      // type defaults to Exact, so the first rule holds for every method match.
      if (method.service === undefined && method.method === undefined) {
        issues.error(methodPath, "One or both of 'service' or 'method' must be specified");
      }
      const exact = method.type === undefined || method.type === "Exact";
      if (exact && method.service !== undefined && !GRPC_SERVICE.test(method.service)) {
        issues.error(
          methodPath,
          "service must only contain valid characters (matching ^(?i)\\.?[a-z_][a-z_0-9]*(\\.[a-z_][a-z_0-9]*)*$)",
        );
      }
      if (exact && method.method !== undefined && !GRPC_METHOD.test(method.method)) {
        issues.error(
          methodPath,
          `method must only contain valid characters (matching ${GRPC_METHOD.source})`,
        );
      }
    });
  });
}

/** TLSRoute. */
export function validateTlsRoute(spec: TlsRouteSpec, { issues, path }: RuleContext): void {
  const hostnames = spec.hostnames ?? [];
  if (hostnames.some(isIpAddress)) issues.error(`${path}.hostnames`, "Hostnames cannot contain an IP");
  if (hostnames.some((h) => !h.includes("*") && !RFC1123_HOST.test(h))) {
    issues.error(`${path}.hostnames`, "Hostnames must be valid based on RFC-1123");
  }
  if (hostnames.some((h) => h.includes("*") && !(h.startsWith("*.") && RFC1123_HOST.test(h.slice(2))))) {
    issues.error(
      `${path}.hostnames`,
      "Wildcards on hostnames must be the first label, and the rest of hostname must be valid based on RFC-1123",
    );
  }
  checkParentRefs(issues, `${path}.parentRefs`, spec.parentRefs ?? [], "sectionName");
  checkRouteBackends(issues, `${path}.rules`, spec.rules ?? []);
}

/** TCPRoute. */
export function validateTcpRoute(spec: TcpRouteSpec, { issues, path }: RuleContext): void {
  checkParentRefs(issues, `${path}.parentRefs`, spec.parentRefs ?? [], "sectionName or port");
  const names = (spec.rules ?? []).flatMap((rule) => (rule.name === undefined ? [] : [rule.name]));
  if (!unique(names)) issues.error(`${path}.rules`, "Rule name must be unique within the route");
  checkRouteBackends(issues, `${path}.rules`, spec.rules ?? []);
}

/** ReferenceGrant: its CRD has no CEL rules; the schema says it all. */
export function validateReferenceGrant(_spec: GatewayApiSpec, _ctx: RuleContext): void {}

/** BackendTLSPolicy. */
export function validateBackendTlsPolicy(spec: BackendTlsPolicySpec, { issues, path }: RuleContext): void {
  checkSectionNames(
    issues,
    `${path}.targetRefs`,
    (spec.targetRefs ?? []).map((ref) => ({
      target: JSON.stringify([ref.group, ref.kind, ref.name]),
      section: ref.sectionName ?? "",
      unset: String((ref.sectionName ?? "") === ""),
    })),
    "targetRefs",
    "target",
    "sectionName",
  );
  const validation = spec.validation;
  if (!validation) return;
  const validationPath = `${path}.validation`;
  const hasRefs = (validation.caCertificateRefs ?? []).length > 0;
  const hasWellKnown = (validation.wellKnownCACertificates ?? "") !== "";
  if (hasRefs && hasWellKnown)
    issues.error(validationPath, "must not contain both CACertificateRefs and WellKnownCACertificates");
  if (!hasRefs && !hasWellKnown)
    issues.error(validationPath, "must specify either CACertificateRefs or WellKnownCACertificates");
  (validation.subjectAltNames ?? []).forEach((san, i) => {
    const sanPath = at(`${validationPath}.subjectAltNames`, i);
    for (const [type, field, label] of [
      ["Hostname", "hostname", "Hostname"],
      ["URI", "uri", "URI"],
    ] as const) {
      const set = (san[field] ?? "") !== "";
      if (san.type === type && !set)
        issues.error(sanPath, `SubjectAltName element must contain ${label}, if Type is set to ${type}`);
      if (san.type !== type && set)
        issues.error(
          sanPath,
          `SubjectAltName element must not contain ${label}, if Type is not set to ${type}`,
        );
    }
  });
}

// ---------------------------------------------------------------- shared rules

const DNS_LABELS = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const WILDCARD_HOST = new RegExp(`^(\\*\\.)?${DNS_LABELS}$`);
const RFC1123_HOST = new RegExp(`^(${DNS_LABELS})$`);
const QUALIFIED_KEY = new RegExp(`^(${DNS_LABELS}/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`);
// CEL's (?i) flag, as a JavaScript flag.
const GRPC_SERVICE = /^\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$/i;
const GRPC_METHOD = /^[A-Za-z_][A-Za-z_0-9]*$/;
const HTTP_PATH = /^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$/;

const HTTP_FILTERS: ReadonlyArray<readonly [type: string, field: keyof Filter, repeatable: boolean]> = [
  ["RequestHeaderModifier", "requestHeaderModifier", false],
  ["ResponseHeaderModifier", "responseHeaderModifier", false],
  ["RequestMirror", "requestMirror", true],
  ["RequestRedirect", "requestRedirect", false],
  ["URLRewrite", "urlRewrite", false],
  ["ExtensionRef", "extensionRef", true],
  ["CORS", "cors", false],
];
const GRPC_FILTERS = HTTP_FILTERS.filter(([type]) =>
  ["RequestHeaderModifier", "ResponseHeaderModifier", "RequestMirror", "ExtensionRef"].includes(type),
);

function unique(values: readonly string[]): boolean {
  return new Set(values).size === values.length;
}

function exactlyOne<T>(items: readonly T[], test: (item: T) => boolean): boolean {
  return items.filter(test).length === 1;
}

/**
 * The two rules on references to the same parent (or policy target): either
 * all of them name a section or none does, and no two name the same one.
 * TCPRoute's version holds the port to the same two rules as the section.
 */
function checkParentRefs(
  issues: Issues,
  path: string,
  refs: readonly ParentRef[],
  what: "sectionName" | "sectionName or port",
): void {
  const withPort = what === "sectionName or port";
  checkSectionNames(
    issues,
    path,
    refs.map((ref) => {
      const section = ref.sectionName ?? "";
      const port = withPort ? (ref.port ?? 0) : 0;
      return {
        // Group and kind as the API server defaults them; no namespace means the route's own.
        target: JSON.stringify([
          ref.group ?? "gateway.networking.k8s.io",
          ref.kind ?? "Gateway",
          ref.name,
          ref.namespace ?? "",
        ]),
        section: JSON.stringify([section, port]),
        unset: JSON.stringify([section === "", port === 0]),
      };
    }),
    "parentRefs",
    "parent",
    what,
  );
}

/** `section` identifies the section named (or none); `unset` says which of its parts are missing. */
interface SectionRef {
  target: string;
  section: string;
  unset: string;
}

function checkSectionNames(
  issues: Issues,
  path: string,
  refs: readonly SectionRef[],
  list: string,
  noun: string,
  what: string,
): void {
  const sameTarget = (a: SectionRef) => refs.filter((b) => a.target === b.target);
  if (refs.some((a) => sameTarget(a).some((b) => a.unset !== b.unset))) {
    issues.error(
      path,
      `${what} must be specified when ${list} includes 2 or more references to the same ${noun}`,
    );
  }
  if (refs.some((a) => sameTarget(a).filter((b) => a.section === b.section).length !== 1)) {
    issues.error(
      path,
      `${what} must be unique when ${list} includes 2 or more references to the same ${noun}`,
    );
  }
}

function checkTotalMatches(issues: Issues, path: string, perRule: readonly number[]): void {
  if (perRule.reduce((sum, n) => sum + n, 0) > 128) {
    issues.error(
      path,
      "While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128",
    );
  }
}

function checkServicePort(issues: Issues, path: string, ref: BackendRef): void {
  if ((ref.group ?? "") === "" && (ref.kind ?? "Service") === "Service" && ref.port === undefined) {
    issues.error(path, "Must have port for Service reference");
  }
}

function checkRouteBackends(
  issues: Issues,
  path: string,
  rules: ReadonlyArray<{ backendRefs?: BackendRef[] }>,
): void {
  rules.forEach((rule, i) => {
    (rule.backendRefs ?? []).forEach((ref, j) => {
      checkServicePort(issues, at(`${at(path, i)}.backendRefs`, j), ref);
    });
  });
}

function checkHttpFilters(issues: Issues, path: string, filters: readonly Filter[]): void {
  if (filters.some((f) => f.type === "RequestRedirect") && filters.some((f) => f.type === "URLRewrite")) {
    issues.error(
      path,
      "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both",
    );
  }
  checkFilters(issues, path, filters, HTTP_FILTERS);
}

/** Each filter type at most once where it may not repeat, and a filter's one field is the one its type names. */
function checkFilters(
  issues: Issues,
  path: string,
  filters: readonly Filter[],
  known: typeof HTTP_FILTERS,
): void {
  for (const [type, , repeatable] of known) {
    if (!repeatable && filters.filter((f) => f.type === type).length > 1)
      issues.error(path, `${type} filter cannot be repeated`);
  }
  filters.forEach((filter, i) => {
    const filterPath = at(path, i);
    for (const [type, field] of known) {
      const set = filter[field] !== undefined;
      if (set && filter.type !== type)
        issues.error(filterPath, `filter.${field} must be nil if the filter.type is not ${type}`);
      if (!set && filter.type === type)
        issues.error(filterPath, `filter.${field} must be specified for ${type} filter.type`);
    }
    const mirror = filter.requestMirror;
    if (mirror) {
      const mirrorPath = `${filterPath}.requestMirror`;
      if (mirror.percent !== undefined && mirror.fraction !== undefined) {
        issues.error(
          mirrorPath,
          "Only one of percent or fraction may be specified in HTTPRequestMirrorFilter",
        );
      }
      if (mirror.backendRef) checkServicePort(issues, `${mirrorPath}.backendRef`, mirror.backendRef);
      const fraction = mirror.fraction;
      if (fraction && (fraction.numerator ?? 0) > (fraction.denominator ?? 100)) {
        issues.error(`${mirrorPath}.fraction`, "numerator must be less than or equal to denominator");
      }
    }
    for (const field of ["requestRedirect", "urlRewrite"] as const) {
      const modifier = filter[field]?.path;
      if (modifier) checkPathModifier(issues, `${filterPath}.${field}.path`, modifier);
    }
    const cors = filter.cors;
    if (cors) {
      const wildcardAlone = (values: string[] | undefined) => !(values?.includes("*") && values.length > 1);
      if (!wildcardAlone(cors.allowOrigins))
        issues.error(
          `${filterPath}.cors.allowOrigins`,
          "AllowOrigins cannot contain '*' alongside other origins",
        );
      // Upstream's message says "methods" for headers too.
      if (!wildcardAlone(cors.allowMethods))
        issues.error(
          `${filterPath}.cors.allowMethods`,
          "AllowMethods cannot contain '*' alongside other methods",
        );
      if (!wildcardAlone(cors.allowHeaders))
        issues.error(
          `${filterPath}.cors.allowHeaders`,
          "AllowHeaders cannot contain '*' alongside other methods",
        );
    }
  });
}

function checkPathModifier(issues: Issues, path: string, modifier: PathModifier): void {
  for (const [type, field] of [
    ["ReplaceFullPath", "replaceFullPath"],
    ["ReplacePrefixMatch", "replacePrefixMatch"],
  ] as const) {
    if (modifier.type === type && modifier[field] === undefined)
      issues.error(path, `${field} must be specified when type is set to '${type}'`);
    if (modifier[field] !== undefined && modifier.type !== type)
      issues.error(path, `type must be '${type}' when ${field} is set`);
  }
}

function checkPathMatch(issues: Issues, path: string, match: { type?: string; value?: string }): void {
  const type = match.type ?? "PathPrefix";
  const value = match.value ?? "/";
  if (type !== "Exact" && type !== "PathPrefix") {
    if (type !== "RegularExpression")
      issues.error(path, "type must be one of ['Exact', 'PathPrefix', 'RegularExpression']");
    return;
  }
  const when = "when type one of ['Exact', 'PathPrefix']";
  if (!value.startsWith("/")) issues.error(path, `value must be an absolute path and start with '/' ${when}`);
  for (const part of ["//", "/./", "/../", "%2f", "%2F", "#"]) {
    if (value.includes(part)) issues.error(path, `must not contain '${part}' ${when}`);
  }
  for (const end of ["/..", "/."]) {
    if (value.endsWith(end)) issues.error(path, `must not end with '${end}' ${when}`);
  }
  if (!HTTP_PATH.test(value)) {
    issues.error(
      path,
      `must only contain valid characters (matching ${HTTP_PATH.source}) for types ['Exact', 'PathPrefix']`,
    );
  }
}

/** A Gateway API Duration (schema-checked: 1 to 4 number-unit pairs) in milliseconds. */
function gatewayDurationMs(value: string): number {
  const units: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };
  let total = 0;
  for (const [, amount, unit] of value.matchAll(/([0-9]+)(ms|h|m|s)/g))
    total += Number(amount) * (units[unit as string] ?? 0);
  return total;
}
