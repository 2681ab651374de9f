import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

/** A value a template placeholder can take; undefined drops the key or list item it stands for. */
export type TemplateValue =
  | string
  | number
  | boolean
  | null
  | undefined
  | TemplateValue[]
  | { [k: string]: TemplateValue };

/** The injection template: the parts the injector assembles into a pod, as plain (unrendered) data. */
export interface InjectionTemplate {
  /** Recorded in sidecar.istio.io/status so that pods injected by an older template can be found. */
  version: string;
  proxyContainer: Record<string, unknown>;
  nativeSidecar: Record<string, unknown>;
  /** Replaces the proxy's securityContext in TPROXY mode. */
  tproxySecurityContext: Record<string, unknown>;
  initContainer: Record<string, unknown>;
  volumes: Record<string, unknown>[];
  labels: Record<string, unknown>;
  annotations: Record<string, unknown>;
  /** The router form for inject.istio.io/templates: gateway. */
  gateway: {
    proxyContainer: Record<string, unknown>;
    podSecurityContext: Record<string, unknown>;
    labels: Record<string, unknown>;
  };
}

const WHOLE = /^\$\{([A-Za-z0-9_]+)\}$/;
const INLINE = /\$\{([A-Za-z0-9_]+)\}/g;

/** The bundled template's path, beside this module (the build copies it into dist/). */
export function defaultTemplatePath(): string {
  return fileURLToPath(new URL("./sidecar-template.yaml", import.meta.url));
}

/** Parses an injection template, checking that the parts the injector needs are there. */
export function parseTemplate(text: string): InjectionTemplate {
  const doc = parse(text) as Partial<InjectionTemplate> | null;
  const isObject = (v: unknown): v is Record<string, unknown> =>
    typeof v === "object" && v !== null && !Array.isArray(v);
  if (!isObject(doc)) throw new Error("injection template: not a YAML mapping");
  const parts = [
    "proxyContainer",
    "nativeSidecar",
    "tproxySecurityContext",
    "initContainer",
    "labels",
    "annotations",
    "gateway",
  ] as const;
  for (const part of parts)
    if (!isObject(doc[part])) throw new Error(`injection template: ${part} must be a mapping`);
  for (const part of ["proxyContainer", "podSecurityContext", "labels"] as const)
    if (!isObject(doc.gateway?.[part]))
      throw new Error(`injection template: gateway.${part} must be a mapping`);
  if (!Array.isArray(doc.volumes)) throw new Error("injection template: volumes must be a list");
  if (typeof doc.version !== "string" || doc.version === "")
    throw new Error("injection template: version must be a string");
  return doc as InjectionTemplate;
}

/** Reads and parses a template file (the bundled one by default). */
export function loadTemplate(path = defaultTemplatePath()): InjectionTemplate {
  return parseTemplate(readFileSync(path, "utf8"));
}

/**
 * Renders one part of a template: substitutes placeholders from values into
 * a fresh copy, so the template itself is never modified. An unknown
 * placeholder is an error, so a typo in the template cannot reach a pod.
 */
export function render<T>(node: T, values: Record<string, TemplateValue>): T {
  return renderNode(node, values) as T;
}

function renderNode(node: unknown, values: Record<string, TemplateValue>): unknown {
  if (typeof node === "string") {
    const whole = WHOLE.exec(node);
    if (whole) return lookup(values, whole[1]!);
    return node.replace(INLINE, (_, name: string) => String(lookup(values, name) ?? ""));
  }
  if (Array.isArray(node))
    return node.map((item) => renderNode(item, values)).filter((item) => item !== undefined);
  if (typeof node === "object" && node !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) {
      const rendered = renderNode(v, values);
      if (rendered !== undefined) out[k] = rendered;
    }
    return out;
  }
  return node;
}

function lookup(values: Record<string, TemplateValue>, name: string): TemplateValue {
  if (!Object.hasOwn(values, name)) throw new Error(`injection template: unknown placeholder \${${name}}`);
  // A copy, so that a value used twice (e.g. resources) is not shared between containers.
  const value = values[name];
  return value === undefined ? undefined : structuredClone(value);
}
