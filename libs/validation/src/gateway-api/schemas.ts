// The specs of the Kubernetes Gateway API kinds, in the version Istio 1.30.3
// builds against (sigs.k8s.io/gateway-api v1.5.1): field names, enums,
// lengths, patterns and item limits as its CRDs state them (standard channel;
// TCPRoute from the experimental one). Only what the standard channel serves
// is here: an experimental field is an unknown field, as on a cluster with
// the standard CRDs installed.

import { HTTP_METHODS } from "../rules/common.js";
import { arr, bool, int, map, type ObjectShape, obj, type Shape, str } from "./shape.js";

// The Gateway API's string types, each with its limits.
const DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const group = (defaultValue?: string) =>
  str({
    maxLength: 253,
    pattern: `^$|${DNS_SUBDOMAIN}`,
    ...(defaultValue !== undefined ? { default: defaultValue } : {}),
  });
const kind = (defaultValue?: string) =>
  str({
    minLength: 1,
    maxLength: 63,
    pattern: "^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$",
    ...(defaultValue !== undefined ? { default: defaultValue } : {}),
  });
const objectName = () => str({ minLength: 1, maxLength: 253 });
const namespace = () => str({ minLength: 1, maxLength: 63, pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" });
const sectionName = () => str({ minLength: 1, maxLength: 253, pattern: DNS_SUBDOMAIN });
const portNumber = () => int({ minimum: 1, maximum: 65535 });
/** A hostname that may start with a `*.` wildcard label. */
const WILDCARD_HOSTNAME = `^(\\*\\.)?${DNS_SUBDOMAIN.slice(1)}`;
const hostname = () => str({ minLength: 1, maxLength: 253, pattern: WILDCARD_HOSTNAME });
const preciseHostname = () => str({ minLength: 1, maxLength: 253, pattern: DNS_SUBDOMAIN });
const headerName = () =>
  str({ minLength: 1, maxLength: 256, pattern: "^[A-Za-z0-9!#$%&'*+\\-.^_\\x60|~]+$" });
/** Gateway API's Duration: up to four number-unit pairs, e.g. 1h30m. */
const duration = () => str({ pattern: "^([0-9]{1,5}(h|m|s|ms)){1,4}$" });
const weight = () => int({ minimum: 0, maximum: 1_000_000, default: 1 });

const localObjectReference = () =>
  obj({ group: group(), kind: kind(), name: objectName() }, ["group", "kind", "name"]);
const parentReference = () =>
  obj(
    {
      group: group("gateway.networking.k8s.io"),
      kind: kind("Gateway"),
      namespace: namespace(),
      name: objectName(),
      sectionName: sectionName(),
      port: portNumber(),
    },
    ["name"],
  );
const backendObjectReference = () =>
  obj(
    {
      group: group(""),
      kind: kind("Service"),
      name: objectName(),
      namespace: namespace(),
      port: portNumber(),
    },
    ["name"],
  );
const secretObjectReference = () =>
  obj({ group: group(""), kind: kind("Secret"), name: objectName(), namespace: namespace() }, ["name"]);
const labelSelector = () =>
  obj({
    matchLabels: map(str()),
    matchExpressions: arr(obj({ key: str(), operator: str(), values: arr(str()) }, ["key", "operator"])),
  });

const headerList = () =>
  arr(obj({ name: headerName(), value: str({ minLength: 1, maxLength: 4096 }) }, ["name", "value"]), {
    maxItems: 16,
  });
const headerModifier = () =>
  obj({ set: headerList(), add: headerList(), remove: arr(str(), { maxItems: 16 }) });
const requestMirror = () =>
  obj(
    {
      backendRef: backendObjectReference(),
      percent: int({ minimum: 0, maximum: 100 }),
      fraction: obj({ numerator: int({ minimum: 0 }), denominator: int({ minimum: 1, default: 100 }) }, [
        "numerator",
      ]),
    },
    ["backendRef"],
  );
const pathModifier = () =>
  obj(
    {
      type: str({ enum: ["ReplaceFullPath", "ReplacePrefixMatch"] }),
      replaceFullPath: str({ maxLength: 1024 }),
      replacePrefixMatch: str({ maxLength: 1024 }),
    },
    ["type"],
  );
/** Gateway API's HTTPMethod enum: the same nine methods Istio accepts. */
const GATEWAY_HTTP_METHODS = [...HTTP_METHODS];

/** The filter types each route kind's standard channel serves. */
const HTTP_FILTER_TYPES = [
  "RequestHeaderModifier",
  "ResponseHeaderModifier",
  "RequestMirror",
  "RequestRedirect",
  "URLRewrite",
  "ExtensionRef",
  "CORS",
] as const;
const GRPC_FILTER_TYPES = [
  "ResponseHeaderModifier",
  "RequestHeaderModifier",
  "RequestMirror",
  "ExtensionRef",
] as const;

const httpRouteFilter = () =>
  obj(
    {
      type: str({ enum: HTTP_FILTER_TYPES }),
      requestHeaderModifier: headerModifier(),
      responseHeaderModifier: headerModifier(),
      requestMirror: requestMirror(),
      requestRedirect: obj({
        scheme: str({ enum: ["http", "https"] }),
        hostname: preciseHostname(),
        path: pathModifier(),
        port: portNumber(),
        statusCode: int({ enum: [301, 302, 303, 307, 308], default: 302 }),
      }),
      urlRewrite: obj({ hostname: preciseHostname(), path: pathModifier() }),
      cors: obj({
        allowOrigins: arr(
          str({
            minLength: 1,
            maxLength: 253,
            pattern:
              "(^\\*$)|(^(http(s)?):\\/\\/(((\\*\\.)?([a-zA-Z0-9\\-]+\\.)*[a-zA-Z0-9-]+|\\*)(:([0-9]{1,5}))?)$)",
          }),
          { maxItems: 64 },
        ),
        allowCredentials: bool(),
        allowMethods: arr(str({ enum: [...GATEWAY_HTTP_METHODS, "*"] }), { maxItems: 9 }),
        allowHeaders: arr(headerName(), { maxItems: 64 }),
        exposeHeaders: arr(headerName(), { maxItems: 64 }),
        maxAge: int({ minimum: 1, default: 5 }),
      }),
      extensionRef: localObjectReference(),
    },
    ["type"],
  );
const grpcRouteFilter = () =>
  obj(
    {
      type: str({ enum: GRPC_FILTER_TYPES }),
      requestHeaderModifier: headerModifier(),
      responseHeaderModifier: headerModifier(),
      requestMirror: requestMirror(),
      extensionRef: localObjectReference(),
    },
    ["type"],
  );

const headerMatch = (valueLength: number) =>
  obj(
    {
      type: str({ enum: ["Exact", "RegularExpression"], default: "Exact" }),
      name: headerName(),
      value: str({ minLength: 1, maxLength: valueLength }),
    },
    ["name", "value"],
  );
const routeName = () => sectionName();
const commonRoute = { parentRefs: arr(parentReference(), { maxItems: 32 }) };

/** GatewayClass (gateway.networking.k8s.io/v1). */
export const GATEWAY_CLASS_SPEC: ObjectShape = obj(
  {
    controllerName: str({
      minLength: 1,
      maxLength: 253,
      pattern: `${DNS_SUBDOMAIN.slice(0, -1)}\\/[A-Za-z0-9\\/\\-._~%!$&'()*+,;=:]+$`,
    }),
    parametersRef: obj({ group: group(), kind: kind(), name: objectName(), namespace: namespace() }, [
      "group",
      "kind",
      "name",
    ]),
    description: str({ maxLength: 64 }),
  },
  ["controllerName"],
);

const frontendTlsValidation = () =>
  obj(
    {
      caCertificateRefs: arr(
        obj({ group: group(), kind: kind(), name: objectName(), namespace: namespace() }, [
          "group",
          "kind",
          "name",
        ]),
        { minItems: 1, maxItems: 8 },
      ),
      mode: str({ enum: ["AllowValidOnly", "AllowInsecureFallback"], default: "AllowValidOnly" }),
    },
    ["caCertificateRefs"],
  );

/** Gateway (gateway.networking.k8s.io/v1). */
export const GATEWAY_SPEC: ObjectShape = obj(
  {
    gatewayClassName: objectName(),
    listeners: arr(
      obj(
        {
          name: sectionName(),
          hostname: hostname(),
          port: portNumber(),
          protocol: str({
            minLength: 1,
            maxLength: 255,
            pattern: `^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$|${DNS_SUBDOMAIN.slice(1, -1)}\\/[A-Za-z0-9]+$`,
          }),
          tls: obj({
            mode: str({ enum: ["Terminate", "Passthrough"], default: "Terminate" }),
            certificateRefs: arr(secretObjectReference(), { maxItems: 64 }),
            options: map(str({ minLength: 0, maxLength: 4096 }), { maxProperties: 16 }),
          }),
          allowedRoutes: obj({
            namespaces: obj({
              from: str({ enum: ["All", "Selector", "Same"], default: "Same" }),
              selector: labelSelector(),
            }),
            kinds: arr(obj({ group: group("gateway.networking.k8s.io"), kind: kind() }, ["kind"]), {
              maxItems: 8,
            }),
          }),
        },
        ["name", "port", "protocol"],
      ),
      { minItems: 1, maxItems: 64 },
    ),
    addresses: arr(
      obj({
        type: str({
          minLength: 1,
          maxLength: 253,
          pattern: `^Hostname|IPAddress|NamedAddress|${DNS_SUBDOMAIN.slice(1, -1)}\\/[A-Za-z0-9\\/\\-._~%!$&'()*+,;=:]+$`,
          default: "IPAddress",
        }),
        value: str({ maxLength: 253 }),
      }),
      { maxItems: 16 },
    ),
    infrastructure: obj({
      labels: map(
        str({ minLength: 0, maxLength: 63, pattern: "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$" }),
        {
          maxProperties: 8,
        },
      ),
      annotations: map(str({ minLength: 0, maxLength: 4096 }), { maxProperties: 8 }),
      parametersRef: localObjectReference(),
    }),
    allowedListeners: obj({
      namespaces: obj({
        from: str({ enum: ["All", "Selector", "Same", "None"], default: "None" }),
        selector: labelSelector(),
      }),
    }),
    tls: obj({
      backend: obj({ clientCertificateRef: secretObjectReference() }),
      frontend: obj(
        {
          default: obj({ validation: frontendTlsValidation() }),
          perPort: arr(
            obj({ port: portNumber(), tls: obj({ validation: frontendTlsValidation() }) }, ["port", "tls"]),
            {
              maxItems: 64,
            },
          ),
        },
        ["default"],
      ),
    }),
  },
  ["gatewayClassName", "listeners"],
);

/** A route rule's backendRefs: weighted backends, each with the route kind's filters. */
function routeBackendRefs(filter: Shape) {
  return arr(
    obj(
      { ...backendObjectReference().properties, weight: weight(), filters: arr(filter, { maxItems: 16 }) },
      ["name"],
    ),
    { maxItems: 16 },
  );
}

/** HTTPRoute (gateway.networking.k8s.io/v1). */
export const HTTP_ROUTE_SPEC: ObjectShape = obj({
  ...commonRoute,
  hostnames: arr(hostname(), { maxItems: 16 }),
  rules: arr(
    obj({
      name: routeName(),
      matches: arr(
        obj({
          path: obj({
            type: str({ enum: ["Exact", "PathPrefix", "RegularExpression"], default: "PathPrefix" }),
            value: str({ maxLength: 1024, default: "/" }),
          }),
          headers: arr(headerMatch(4096), { maxItems: 16 }),
          queryParams: arr(headerMatch(1024), { maxItems: 16 }),
          method: str({ enum: GATEWAY_HTTP_METHODS }),
        }),
        { maxItems: 64 },
      ),
      filters: arr(httpRouteFilter(), { maxItems: 16 }),
      backendRefs: routeBackendRefs(httpRouteFilter()),
      timeouts: obj({ request: duration(), backendRequest: duration() }),
    }),
    { minItems: 1, maxItems: 16 },
  ),
});

/** GRPCRoute (gateway.networking.k8s.io/v1). */
export const GRPC_ROUTE_SPEC: ObjectShape = obj({
  ...commonRoute,
  hostnames: arr(hostname(), { maxItems: 16 }),
  rules: arr(
    obj({
      name: routeName(),
      matches: arr(
        obj({
          method: obj({
            type: str({ enum: ["Exact", "RegularExpression"], default: "Exact" }),
            service: str({ maxLength: 1024 }),
            method: str({ maxLength: 1024 }),
          }),
          headers: arr(headerMatch(4096), { maxItems: 16 }),
        }),
        { maxItems: 64 },
      ),
      filters: arr(grpcRouteFilter(), { maxItems: 16 }),
      backendRefs: routeBackendRefs(grpcRouteFilter()),
    }),
    { maxItems: 16 },
  ),
});

const weightedBackends = () =>
  arr(obj({ ...backendObjectReference().properties, weight: weight() }, ["name"]), {
    minItems: 1,
    maxItems: 16,
  });

/** TLSRoute (gateway.networking.k8s.io/v1; v1alpha2 has the same fields Istio reads). */
export const TLS_ROUTE_SPEC: ObjectShape = obj(
  {
    ...commonRoute,
    hostnames: arr(hostname(), { minItems: 1, maxItems: 16 }),
    rules: arr(obj({ name: routeName(), backendRefs: weightedBackends() }, ["backendRefs"]), {
      minItems: 1,
      maxItems: 1,
    }),
  },
  ["hostnames", "rules"],
);

/** TCPRoute (gateway.networking.k8s.io/v1alpha2, experimental channel). */
export const TCP_ROUTE_SPEC: ObjectShape = obj(
  {
    ...commonRoute,
    useDefaultGateways: str({ enum: ["All", "None"] }),
    rules: arr(obj({ name: routeName(), backendRefs: weightedBackends() }, ["backendRefs"]), {
      minItems: 1,
      maxItems: 16,
    }),
  },
  ["rules"],
);

/** ReferenceGrant (gateway.networking.k8s.io/v1beta1). */
export const REFERENCE_GRANT_SPEC: ObjectShape = obj(
  {
    from: arr(obj({ group: group(), kind: kind(), namespace: namespace() }, ["group", "kind", "namespace"]), {
      minItems: 1,
      maxItems: 16,
    }),
    to: arr(obj({ group: group(), kind: kind(), name: objectName() }, ["group", "kind"]), {
      minItems: 1,
      maxItems: 16,
    }),
  },
  ["from", "to"],
);

/** BackendTLSPolicy (gateway.networking.k8s.io/v1). */
export const BACKEND_TLS_POLICY_SPEC: ObjectShape = obj(
  {
    targetRefs: arr(
      obj({ ...localObjectReference().properties, sectionName: sectionName() }, ["group", "kind", "name"]),
      {
        minItems: 1,
        maxItems: 16,
      },
    ),
    validation: obj(
      {
        caCertificateRefs: arr(localObjectReference(), { maxItems: 8 }),
        wellKnownCACertificates: str({
          minLength: 1,
          maxLength: 253,
          pattern: `^(System|(${DNS_SUBDOMAIN.slice(1, -1)}/([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]))$`,
        }),
        hostname: preciseHostname(),
        subjectAltNames: arr(
          obj(
            {
              type: str({ enum: ["Hostname", "URI"] }),
              hostname: hostname(),
              uri: str({
                minLength: 1,
                maxLength: 253,
                pattern: "^(([^:/?#]+):)(//([^/?#]*))([^?#]*)(\\?([^#]*))?(#(.*))?",
              }),
            },
            ["type"],
          ),
          { maxItems: 5 },
        ),
      },
      ["hostname"],
    ),
    options: map(str({ minLength: 0, maxLength: 4096 }), { maxProperties: 16 }),
  },
  ["targetRefs", "validation"],
);
