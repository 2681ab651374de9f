// HTTPRoute and GRPCRoute matches as Istio's HTTPMatchRequest
// (conversion.go's createURIMatch, createGRPCURIMatch and friends).
import {
  HTTPMatchRequest,
  type StringMatch,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import type { RuleError } from "./types.js";

interface ValueMatch {
  type?: string;
  name: string;
  value: string;
}

export interface HttpRouteMatch {
  path?: { type?: string; value?: string };
  headers?: ValueMatch[];
  queryParams?: ValueMatch[];
  method?: string;
}

export interface GrpcRouteMatch {
  method?: { type?: string; service?: string; method?: string };
  headers?: ValueMatch[];
}

type Converted<T> = { value: T } | { error: RuleError };

/** Exact (the default) or RegularExpression matches by name; none: undefined. */
function valueMatches(
  matches: ValueMatch[] | undefined,
  what: string,
): Converted<{ [key: string]: StringMatch }> {
  const result: { [key: string]: StringMatch } = {};
  for (const { type = "Exact", name, value } of matches ?? []) {
    if (type === "Exact") result[name] = { exact: value };
    else if (type === "RegularExpression") result[name] = { regex: value };
    else
      return {
        error: {
          reason: "InvalidConfiguration",
          message: `unknown type: "${type}" is not supported ${what} type`,
        },
      };
  }
  return { value: result };
}

/**
 * A path match. PathPrefix is written as a prefix without its trailing "/"
 * ("When specified, a trailing `/` is ignored"): it is the proxy's
 * gateway semantics that make `/foo` match `/foo` and `/foo/…` only.
 */
function pathMatch(path: HttpRouteMatch["path"]): Converted<StringMatch> {
  const type = path?.type ?? "PathPrefix";
  const value = path?.value ?? "/";
  switch (type) {
    case "PathPrefix":
      return { value: { prefix: value !== "/" && value.endsWith("/") ? value.slice(0, -1) : value } };
    case "Exact":
      return { value: { exact: value } };
    case "RegularExpression":
      return { value: { regex: value } };
    default:
      return {
        error: {
          reason: "InvalidConfiguration",
          message: `unknown type: "${type}" is not supported Path match type`,
        },
      };
  }
}

/** One HTTPRoute match. An absent path is the API server's default, PathPrefix "/". */
export function httpMatch(match: HttpRouteMatch): Converted<HTTPMatchRequest> {
  const uri = pathMatch(match.path);
  if ("error" in uri) return uri;
  const headers = valueMatches(match.headers, "HeaderMatch");
  if ("error" in headers) return headers;
  const queryParams = valueMatches(match.queryParams, "QueryParams");
  if ("error" in queryParams) return queryParams;
  return {
    value: {
      ...HTTPMatchRequest.fromPartial({}),
      uri: uri.value,
      headers: headers.value,
      queryParams: queryParams.value,
      ...(match.method !== undefined ? { method: { exact: match.method } } : {}),
    },
  };
}

/**
 * A gRPC method as a path match on /<service>/<method>: a service alone is
 * a prefix (Exact) or a regex over its methods, a method alone a regex over
 * every service.
 */
function grpcMethodMatch(method: GrpcRouteMatch["method"]): Converted<StringMatch | undefined> {
  if (!method) return { value: undefined };
  const { type = "Exact", service, method: name } = method;
  if (service === undefined && name === undefined) {
    return {
      error: { reason: "InvalidConfiguration", message: "gRPC match must have method or service defined" },
    };
  }
  if (type !== "Exact" && type !== "RegularExpression") {
    return {
      error: {
        reason: "InvalidConfiguration",
        message: `unknown type: "${type}" is not supported Path match type`,
      },
    };
  }
  if (service === undefined) return { value: { regex: `/[^/]+/${name}` } };
  if (type === "Exact") {
    return { value: name === undefined ? { prefix: `/${service}/` } : { exact: `/${service}/${name}` } };
  }
  return { value: { regex: name === undefined ? `/${service}/.+` : `/${service}/${name}` } };
}

/** One GRPCRoute match. */
export function grpcMatch(match: GrpcRouteMatch): Converted<HTTPMatchRequest> {
  const uri = grpcMethodMatch(match.method);
  if ("error" in uri) return uri;
  const headers = valueMatches(match.headers, "HeaderMatch");
  if ("error" in headers) return headers;
  return { value: { ...HTTPMatchRequest.fromPartial({}), uri: uri.value, headers: headers.value } };
}
