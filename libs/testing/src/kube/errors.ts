import type { KubeStatus, StatusCause } from "./types.js";

/** The names of a resource type that error messages quote. */
export interface ResourceNames {
  group: string;
  plural: string;
  kind: string;
}

/**
 * An error that the fake API server turns into a `Status` response (or an
 * ERROR watch event), carrying the exact body the client will see.
 */
export class KubeApiError extends Error {
  /** The `Status` body sent to the client. */
  readonly status: KubeStatus;

  constructor(status: KubeStatus) {
    super(status.message);
    this.name = "KubeApiError";
    this.status = status;
  }

  /** The HTTP status code. */
  get code(): number {
    return this.status.code;
  }
}

/** Builds a failure `Status` body. */
export function failureStatus(
  code: number,
  reason: string,
  message: string,
  details?: KubeStatus["details"],
): KubeStatus {
  const status: KubeStatus = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  };
  if (details !== undefined) status.details = details;
  return status;
}

function fail(code: number, reason: string, message: string, details?: KubeStatus["details"]): KubeApiError {
  return new KubeApiError(failureStatus(code, reason, message, details));
}

/** "services" for core, "virtualservices.networking.istio.io" otherwise, as the API server quotes it. */
export function qualifiedResource(r: ResourceNames): string {
  return r.group === "" ? r.plural : `${r.plural}.${r.group}`;
}

function qualifiedKind(r: ResourceNames): string {
  return r.group === "" ? r.kind : `${r.kind}.${r.group}`;
}

// The API server puts the group and the plural resource (not the kind) in
// details for NotFound, AlreadyExists and Conflict; clients key on that.
function resourceDetails(r: ResourceNames, name: string): KubeStatus["details"] {
  const details: NonNullable<KubeStatus["details"]> = { name, kind: r.plural };
  if (r.group !== "") details.group = r.group;
  return details;
}

/** 404 NotFound for a named object. */
export function notFound(r: ResourceNames, name: string): KubeApiError {
  return fail(404, "NotFound", `${qualifiedResource(r)} "${name}" not found`, resourceDetails(r, name));
}

/** 404 NotFound for a path that names no resource. */
export function pathNotFound(): KubeApiError {
  return fail(404, "NotFound", "the server could not find the requested resource", {});
}

/** 409 AlreadyExists on create. */
export function alreadyExists(r: ResourceNames, name: string): KubeApiError {
  return fail(
    409,
    "AlreadyExists",
    `${qualifiedResource(r)} "${name}" already exists`,
    resourceDetails(r, name),
  );
}

/** 409 Conflict, by default the optimistic-concurrency message clients retry on. */
export function conflict(r: ResourceNames, name: string, why?: string): KubeApiError {
  const reason =
    why ?? "the object has been modified; please apply your changes to the latest version and try again";
  return fail(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualifiedResource(r)} "${name}": ${reason}`,
    resourceDetails(r, name),
  );
}

/** One field error of a 422 Invalid response. */
export interface FieldError {
  field: string;
  /** e.g. "FieldValueRequired", "FieldValueInvalid", "FieldValueForbidden". */
  type: string;
  /** e.g. `Required value: name is required`. */
  detail: string;
}

/** 422 Invalid, with one cause per field error, in the API server's message format. */
export function invalid(r: ResourceNames, name: string, errors: FieldError[]): KubeApiError {
  const causes: StatusCause[] = errors.map((e) => ({ reason: e.type, message: e.detail, field: e.field }));
  const summary = errors.map((e) => `${e.field}: ${e.detail}`);
  const joined = summary.length === 1 ? summary[0] : `[${summary.join(", ")}]`;
  const details: NonNullable<KubeStatus["details"]> = { name, kind: r.kind, causes };
  if (r.group !== "") details.group = r.group;
  return fail(422, "Invalid", `${qualifiedKind(r)} "${name}" is invalid: ${joined}`, details);
}

/** 422 Invalid without a kind, as the API server answers for a JSON patch that does not apply. */
export function unprocessable(serverMessage: string): KubeApiError {
  return fail(422, "Invalid", "the server rejected our request due to an error in our request", {
    causes: [{ reason: "UnexpectedServerResponse", message: serverMessage }],
  });
}

/** 400 BadRequest. */
export function badRequest(message: string): KubeApiError {
  return fail(400, "BadRequest", message);
}

/** 403 Forbidden. */
export function forbidden(message: string): KubeApiError {
  return fail(403, "Forbidden", message);
}

/** 405 MethodNotAllowed. */
export function methodNotAllowed(): KubeApiError {
  return fail(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {});
}

/** 415 UnsupportedMediaType. */
export function unsupportedMediaType(message: string): KubeApiError {
  return fail(415, "UnsupportedMediaType", message);
}

/** 410 Gone with reason Expired: the history behind a resourceVersion or continue token is gone. */
export function expired(message: string): KubeApiError {
  return fail(410, "Expired", message);
}

/** 504 Timeout for a resourceVersion newer than the server has seen. */
export function tooLargeResourceVersion(requested: number, current: number): KubeApiError {
  return fail(504, "Timeout", `Timeout: Too large resource version: ${requested}, current: ${current}`, {
    causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
    retryAfterSeconds: 1,
  });
}

/** 500 InternalError. */
export function internalError(message: string): KubeApiError {
  return fail(500, "InternalError", `Internal error occurred: ${message}`, {
    causes: [{ message }],
  });
}
