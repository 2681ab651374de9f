/**
 * @sextant/validation: parses Istio configuration (YAML or JSON) and
 * validates it with Istio's semantics, for ingest and the admission webhook.
 */
export { type DurationValue, parseDuration } from "./decode.js";
export { type OpenApiSchema, openApiSchema } from "./gateway-api/shape.js";
export { at, type FieldError, Issues, key, type ValidationResult } from "./issues.js";
export {
  apiKindOf,
  type ConfigKind,
  type ConfigSpecs,
  EXTENSIONS_GROUP,
  findKind,
  findKindOf,
  GATEWAY_API_GROUP,
  type JsonCodec,
  KINDS,
  type KindInfo,
  NETWORKING_GROUP,
  SECURITY_GROUP,
  TELEMETRY_GROUP,
} from "./kinds.js";
export {
  DEFAULT_PARSE_LIMITS,
  type ParsedDocument,
  type ParseError,
  type ParseLimits,
  type ParseResult,
  parseDocuments,
} from "./parse.js";
export { regexProblem } from "./rules/common.js";
export type { RuleContext, SpecValidator } from "./rules/context.js";
export { ENVOY_FILTER_VALUE_TYPES } from "./rules/envoy-filter.js";
export { headerNameProblem, headerValueProblem, MAX_HEADER_BYTES } from "./rules/headers.js";
export { hostsOverlap } from "./rules/virtual_service.js";
export { type DecodedConfig, decodeStoredOfKind, decodeStoredSpec } from "./stored.js";
export { type DecodeResult, decodeSpec, type ResourceInput, validateResource } from "./validate.js";
