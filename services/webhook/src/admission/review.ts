import { z } from "zod";

/** The AdmissionReview API version this webhook speaks (the only one Kubernetes still sends). */
export const ADMISSION_API_VERSION = "admission.k8s.io/v1";

const groupVersionKind = z.object({ group: z.string(), version: z.string(), kind: z.string() });

/** The request half of an AdmissionReview, with only the fields the webhook reads. */
export const admissionRequestSchema = z.object({
  uid: z.string().min(1),
  kind: groupVersionKind,
  resource: z.object({ group: z.string(), version: z.string(), resource: z.string() }).optional(),
  subResource: z.string().optional(),
  name: z.string().optional(),
  namespace: z.string().optional(),
  operation: z.enum(["CREATE", "UPDATE", "DELETE", "CONNECT"]),
  object: z.unknown().optional(),
  oldObject: z.unknown().optional(),
  dryRun: z.boolean().optional(),
});

/** An AdmissionReview as the API server sends it. */
export const admissionReviewSchema = z.object({
  apiVersion: z.literal(ADMISSION_API_VERSION),
  kind: z.literal("AdmissionReview"),
  request: admissionRequestSchema,
});

/** The request of a well-formed AdmissionReview. */
export type AdmissionRequest = z.infer<typeof admissionRequestSchema>;

/** A Kubernetes `Status` cause: one field's problem, as the API server shows it to kubectl. */
export interface StatusCause {
  reason: string;
  message: string;
  field: string;
}

/** The response half of an AdmissionReview. */
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: {
    status: "Failure";
    message: string;
    reason: string;
    code: number;
    details?: { causes: StatusCause[] };
  };
  warnings?: string[];
  patchType?: "JSONPatch";
  /** The JSONPatch, base64-encoded. */
  patch?: string;
}

/** The AdmissionReview the webhook answers with. */
export interface AdmissionReviewResponse {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: "AdmissionReview";
  response: AdmissionResponse;
}

/** Wraps a response in an AdmissionReview. */
export function reviewResponse(response: AdmissionResponse): AdmissionReviewResponse {
  return { apiVersion: ADMISSION_API_VERSION, kind: "AdmissionReview", response };
}

/** A denial: allowed false with a message, and per-field causes when there are some. */
export function deny(
  uid: string,
  message: string,
  causes: StatusCause[] = [],
  code = 400,
): AdmissionResponse {
  return {
    uid,
    allowed: false,
    status: {
      status: "Failure",
      message,
      reason: code === 400 ? "BadRequest" : "Forbidden",
      code,
      ...(causes.length > 0 ? { details: { causes } } : {}),
    },
  };
}

/**
 * Parses a request body as an AdmissionReview. On failure returns the reason
 * and, when the body had one, the request's uid, so the answer can still be
 * an AdmissionReview the API server can match up.
 */
export function parseReview(
  body: unknown,
): { ok: true; request: AdmissionRequest } | { ok: false; message: string; uid?: string } {
  const result = admissionReviewSchema.safeParse(body);
  if (result.success) return { ok: true, request: result.data.request };
  const message = result.error.issues
    .slice(0, 5)
    .map((i) => `${i.path.join(".") || "body"}: ${i.message}`)
    .join("; ");
  const uid = (body as { request?: { uid?: unknown } } | null)?.request?.uid;
  return {
    ok: false,
    message: `malformed AdmissionReview: ${message}`,
    ...(typeof uid === "string" && uid ? { uid } : {}),
  };
}
