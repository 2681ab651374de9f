import { badRequest } from "./errors.js";
import type { KubeObject } from "./types.js";

/** A parsed label or field selector: true when an object matches. */
export type Selector = (obj: KubeObject) => boolean;

/** Matches everything; used when no selector was given. */
export const everything: Selector = () => true;

// Splits on commas that are not inside the parentheses of an `in (...)` set.
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const ch of text) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(current);
      current = "";
    } else {
      current += ch;
    }
  }
  parts.push(current);
  return parts;
}

const KEY = "[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?";
const VALUE = "([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)?";
const keyOnly = new RegExp(`^(${KEY})$`);
const notKey = new RegExp(`^!\\s*(${KEY})$`);
const equality = new RegExp(`^(${KEY})\\s*(==|=|!=)\\s*(${VALUE})$`);
const setBased = new RegExp(`^(${KEY})\\s+(in|notin)\\s*\\(([^)]*)\\)$`);
const numeric = new RegExp(`^(${KEY})\\s*(>|<)\\s*(-?\\d+)$`);
const valueOnly = new RegExp(`^${VALUE}$`);

type LabelRequirement = (labels: Record<string, string>) => boolean;

function parseLabelRequirement(raw: string): LabelRequirement {
  const text = raw.trim();
  let m = notKey.exec(text);
  if (m) {
    const key = m[1]!;
    return (labels) => !(key in labels);
  }
  m = setBased.exec(text);
  if (m) {
    const key = m[1]!;
    const op = m[3]!;
    const values = new Set(
      m[4]!
        .split(",")
        .map((v) => v.trim())
        .filter((v) => v !== ""),
    );
    for (const v of values) {
      if (!valueOnly.test(v)) throw badRequest(`unable to parse requirement: invalid label value: "${v}"`);
    }
    if (values.size === 0) throw badRequest(`unable to parse requirement: found ')', expected: identifier`);
    // As in Kubernetes, `notin` also matches objects without the key.
    return op === "in"
      ? (labels) => key in labels && values.has(labels[key]!)
      : (labels) => !(key in labels) || !values.has(labels[key]!);
  }
  m = numeric.exec(text);
  if (m) {
    const key = m[1]!;
    const op = m[3]!;
    const bound = Number(m[4]);
    return (labels) => {
      const v = labels[key];
      if (v === undefined || !/^-?\d+$/.test(v)) return false;
      return op === ">" ? Number(v) > bound : Number(v) < bound;
    };
  }
  m = equality.exec(text);
  if (m) {
    const key = m[1]!;
    const op = m[3]!;
    const value = m[4] ?? "";
    // `!=` matches objects without the key, as in Kubernetes.
    return op === "!=" ? (labels) => labels[key] !== value : (labels) => labels[key] === value;
  }
  m = keyOnly.exec(text);
  if (m) {
    const key = m[1]!;
    return (labels) => key in labels;
  }
  throw badRequest(`unable to parse requirement: ${JSON.stringify(text)}`);
}

/** Parses a `labelSelector` query parameter (equality- and set-based syntax). */
export function parseLabelSelector(text: string | null | undefined): Selector {
  if (text === null || text === undefined || text.trim() === "") return everything;
  const requirements = splitTopLevel(text).map(parseLabelRequirement);
  return (obj) => {
    const labels = obj.metadata?.labels ?? {};
    return requirements.every((r) => r(labels));
  };
}

// Field selector values may escape `\`, `,` and `=` with a backslash.
function splitEscaped(text: string, separator: string): string[] {
  const parts: string[] = [];
  let current = "";
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === "\\" && i + 1 < text.length) {
      current += ch + text[i + 1];
      i++;
    } else if (ch === separator) {
      parts.push(current);
      current = "";
    } else {
      current += ch;
    }
  }
  parts.push(current);
  return parts;
}

function unescapeFieldValue(value: string): string {
  return value.replace(/\\(.)/g, "$1");
}

/** Reads a dotted field path (e.g. `spec.nodeName`) as the string a field selector compares with. */
export function fieldValue(obj: KubeObject, path: string): string {
  let current: unknown = obj;
  for (const part of path.split(".")) {
    if (current === null || typeof current !== "object") return "";
    current = (current as Record<string, unknown>)[part];
  }
  if (current === undefined || current === null) return "";
  return typeof current === "string" ? current : String(current);
}

/**
 * Parses a `fieldSelector` query parameter. Only the field labels the
 * resource type supports are accepted; others fail with 400 as in Kubernetes.
 */
export function parseFieldSelector(
  text: string | null | undefined,
  supported: ReadonlySet<string>,
): Selector {
  if (text === null || text === undefined || text.trim() === "") return everything;
  const requirements: Array<(obj: KubeObject) => boolean> = [];
  for (const raw of splitEscaped(text, ",")) {
    const term = raw.trim();
    const m = /^([^=!]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw badRequest(`invalid selector: '${text}'; can't understand '${term}'`);
    const field = m[1]!;
    const op = m[2]!;
    const value = unescapeFieldValue(m[3]!);
    if (!supported.has(field)) throw badRequest(`field label not supported: ${field}`);
    requirements.push(
      op === "!=" ? (obj) => fieldValue(obj, field) !== value : (obj) => fieldValue(obj, field) === value,
    );
  }
  return (obj) => requirements.every((r) => r(obj));
}
