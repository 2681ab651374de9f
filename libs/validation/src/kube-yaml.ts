/**
 * YAML as Kubernetes reads it. kubectl and the API server turn YAML into JSON
 * with sigs.k8s.io/yaml, which parses with go-yaml v2 (go.yaml.in/yaml/v2):
 * a YAML 1.1 reader with its own plain-scalar resolution, different from the
 * YAML 1.2 core schema the `yaml` package applies. This module makes the
 * `yaml` package's documents read the same way:
 *
 * - plain scalars resolve as go-yaml v2 does (`resolvePlainScalar`);
 * - in a flow collection, a `:` not followed by a space belongs to the plain
 *   scalar, so `[1.2.3.4, 2001:db8::]` holds two strings
 *   (`joinFlowColons`), where YAML 1.2 reads the second as a map key;
 * - non-string keys become strings and a null key is refused, as
 *   sigs.k8s.io/yaml's conversion to JSON does; `.inf` and `.nan` cannot be
 *   written as JSON, so kubectl refuses them and so does this reader.
 */
import { type CST, type Document, isAlias, isCollection, isScalar, Parser, visit } from "yaml";

/** go-yaml v2's spellings of true, false and null (nothing else, so `yEs` is a string). */
const TRUE = new Set(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"]);
const FALSE = new Set(["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"]);
const NULL = new Set(["", "~", "null", "Null", "NULL"]);
const SPECIAL_FLOATS = new Map<string, number>([
  ...[".nan", ".NaN", ".NAN"].map((s): [string, number] => [s, Number.NaN]),
  ...[".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"].map((s): [string, number] => [
    s,
    Number.POSITIVE_INFINITY,
  ]),
  ...[".inf", ".Inf", ".INF"].map((s): [string, number] => [`-${s}`, Number.NEGATIVE_INFINITY]),
]);

/** Go's strconv.ParseInt(s, 0, 64) syntax: a sign, then hex, octal (0o or a leading 0), binary or decimal. */
const GO_INT = /^([+-]?)(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|0([0-7]*)|([1-9][0-9]*))$/;
/** go-yaml v2's float syntax (decimal only). */
const YAML_FLOAT = /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$/;
const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;

function goInteger(text: string): number | undefined {
  const m = GO_INT.exec(text);
  if (!m) return undefined;
  const [, sign, hex, octal, binary, leadingZero, decimal] = m;
  const magnitude =
    hex !== undefined
      ? BigInt(`0x${hex}`)
      : octal !== undefined
        ? BigInt(`0o${octal}`)
        : binary !== undefined
          ? BigInt(`0b${binary}`)
          : leadingZero !== undefined
            ? BigInt(leadingZero === "" ? "0" : `0o${leadingZero}`)
            : BigInt(decimal ?? "0");
  const value = sign === "-" ? -magnitude : magnitude;
  // ParseInt takes int64, ParseUint (no sign) the rest of uint64.
  if (value < INT64_MIN || value > UINT64_MAX || (sign !== "" && value > 2n ** 63n - 1n)) return undefined;
  return Number(value);
}

/**
 * The value go-yaml v2 gives a plain (unquoted, untagged) scalar: its
 * booleans (`yes`, `on`, `Y`...), nulls, ints in Go's syntax with `_`
 * ignored (`0755` and `0o755` are octal, `0x1F`, `0b101`, `1_000`), floats
 * (`1e3`, `.5`, `.inf`, `.nan`); anything else, timestamps included, stays a
 * string.
 */
export function resolvePlainScalar(text: string): unknown {
  if (NULL.has(text)) return null;
  if (TRUE.has(text)) return true;
  if (FALSE.has(text)) return false;
  const special = SPECIAL_FLOATS.get(text);
  if (special !== undefined) return special;
  const first = text[0] ?? "";
  if (first === ".") return /^\.[0-9]+(?:[eE][-+]?[0-9]+)?$/.test(text) ? Number(text) : text;
  if (!/[-+0-9]/.test(first)) return text;
  const plain = text.replaceAll("_", "");
  const integer = goInteger(plain);
  if (integer !== undefined) return integer;
  if (YAML_FLOAT.test(plain)) return Number(plain);
  return text;
}

/**
 * Rewrites the text so that the `yaml` package reads flow collections as
 * go-yaml v2 does. In a flow collection YAML 1.2 ends a plain scalar at a
 * `:` followed by `,`, `]` or `}` and makes it a key (`[2001:db8::]` is
 * `[{"2001:db8:": null}]`); go-yaml v2 ends plain scalars only at `: ` and
 * flow indicators, so the `:` is part of the string. Such scalars are
 * rewritten as the double-quoted strings go-yaml reads (any scalar holding a
 * `:` resolves to a string there). Positions after a rewrite on the same
 * line shift by the added quotes.
 */
export function joinFlowColons(text: string): string {
  const edits: Array<{ start: number; end: number; replacement: string }> = [];
  const walk = (token: CST.Token | null | undefined): void => {
    if (!token) return;
    switch (token.type) {
      case "document":
        walk(token.value);
        return;
      case "block-map":
      case "block-seq":
        for (const item of token.items) {
          if ("key" in item) walk(item.key);
          walk(item.value);
        }
        return;
      case "flow-collection":
        for (const item of token.items) {
          const joined = joinedScalar(text, item);
          if (joined) {
            edits.push(joined);
            continue;
          }
          walk(item.key);
          // A flow map's value `2001:db8::` comes as a one-item block map
          // whose key is the scalar before the last colon.
          const inner =
            item.value?.type === "block-map" && item.value.items.length === 1
              ? item.value.items[0]
              : undefined;
          const innerJoined = inner && joinedScalar(text, inner);
          if (innerJoined) edits.push(innerJoined);
          else walk(item.value);
        }
        return;
    }
  };
  for (const token of new Parser().parse(text)) walk(token);
  let out = text;
  for (const edit of edits.sort((a, b) => b.start - a.start)) {
    out = out.slice(0, edit.start) + edit.replacement + out.slice(edit.end);
  }
  return out;
}

/** The rewrite for a flow item `scalar:` whose `:` go-yaml keeps in the scalar, if it is one. */
function joinedScalar(
  text: string,
  item: CST.CollectionItem,
): { start: number; end: number; replacement: string } | undefined {
  const { key, sep, value } = item;
  // Before a comma the CST gives the key an empty scalar as its value.
  const noValue = !value || (value.type === "scalar" && value.source === "");
  if (key?.type !== "scalar" || !noValue || sep?.length !== 1) return undefined;
  if (item.start.some((t) => t.type === "explicit-key-ind")) return undefined;
  const indicator = sep[0];
  if (indicator?.type !== "map-value-ind" || indicator.offset !== key.offset + key.source.length)
    return undefined;
  const next = text[indicator.offset + 1] ?? "";
  if (next === "" || /\s/.test(next)) return undefined;
  return { start: key.offset, end: indicator.offset + 1, replacement: JSON.stringify(`${key.source}:`) };
}

/**
 * Re-resolves a composed document's plain scalars as go-yaml v2 does and
 * returns what sigs.k8s.io/yaml would refuse (values JSON cannot hold, null
 * or collection keys). Tagged and quoted scalars keep their value.
 */
export function resolveAsKubernetes(doc: Document.Parsed): string[] {
  const problems: string[] = [];
  visit(doc, {
    Scalar(_, node) {
      // go-yaml v2 reads a !!binary scalar as the string of its decoded
      // bytes (encoding/json then writes invalid UTF-8 as U+FFFD); the yaml
      // library reads a Uint8Array, which is no JSON value (nor a key).
      if (node.value instanceof Uint8Array) {
        node.value = new TextDecoder().decode(node.value);
        return;
      }
      if (node.type !== "PLAIN" || node.tag || typeof node.source !== "string") return;
      const value = resolvePlainScalar(node.source);
      if (typeof value === "number" && !Number.isFinite(value)) {
        problems.push(`"${node.source}" is not a number JSON can hold; quote it if it is meant as a string`);
      }
      node.value = value;
    },
    Pair(_, pair) {
      // Visited before its key, so the key still has the core schema's
      // value; both readers agree on which spellings are null.
      // An alias key (`*a: x`) stands for its anchored node, which may be a
      // collection or null: go-yaml refuses it ("invalid map key").
      const k = isAlias(pair.key) ? pair.key.resolve(doc) : pair.key;
      if (k === null || k === undefined || (isScalar(k) && k.value === null)) {
        problems.push("a map key must not be null (Kubernetes cannot convert it to JSON)");
      } else if (isCollection(k)) {
        problems.push("a map key must be a scalar (Kubernetes cannot convert it to JSON)");
      }
    },
  });
  return problems;
}
