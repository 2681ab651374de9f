/**
 * A pod's own `istio-proxy` (or `istio-init`) container is an override of the
 * injected one, as in Istio: gateway Deployments declare `istio-proxy` with
 * `image: auto`, and users adjust the sidecar this way. The user's container
 * is merged over the template's with Kubernetes' strategic merge rules for a
 * Container.
 */

/** The image value that means "the injector's image" (Istio's AutoImage). */
export const AUTO_IMAGE = "auto";

type Json = Record<string, unknown>;

/**
 * Container lists that strategic merge merges by a key (Kubernetes' patchMergeKey
 * on core/v1 Container); every other list (args, command, capabilities) is replaced.
 */
const MERGE_KEYS: Readonly<Record<string, string>> = {
  ports: "containerPort",
  env: "name",
  envFrom: "prefix",
  volumeMounts: "mountPath",
  volumeDevices: "devicePath",
  resizePolicy: "resourceName",
};

/** The template container with the user's container merged over it; `image: auto` keeps the template's image. */
export function mergeContainer(template: Json, user: Json): Json {
  const overlay = { ...user };
  if (overlay.image === AUTO_IMAGE) delete overlay.image;
  return mergeObject(template, overlay, true);
}

function mergeObject(base: Json, patch: Json, container: boolean): Json {
  const out: Json = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    const current = out[key];
    const mergeKey = container ? MERGE_KEYS[key] : undefined;
    if (value === null) delete out[key];
    else if (mergeKey && Array.isArray(current) && Array.isArray(value))
      out[key] = mergeList(current, value, mergeKey);
    else if (isObject(current) && isObject(value)) out[key] = mergeObject(current, value, false);
    else out[key] = value;
  }
  return out;
}

function mergeList(base: unknown[], patch: unknown[], key: string): unknown[] {
  const out = [...base];
  for (const item of patch) {
    const index = isObject(item) ? out.findIndex((b) => isObject(b) && b[key] === item[key]) : -1;
    if (index >= 0) out[index] = mergeObject(out[index] as Json, item as Json, false);
    else out.push(item);
  }
  return out;
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
