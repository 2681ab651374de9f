import { isAlias, isCollection, isPair, isScalar, LineCounter, parseAllDocuments } from "yaml";
import { joinFlowColons, resolveAsKubernetes } from "./kube-yaml.js";

/** Bounds that keep parsing cheap on hostile input. */
export interface ParseLimits {
  /** Largest number of non-empty documents accepted in one input. */
  maxDocuments: number;
  /** Deepest nesting of maps and lists accepted (the document root is depth 1). */
  maxDepth?: number;
  /** Largest number of alias expansions per document (guards "billion laughs"). */
  maxAliasCount?: number;
  /** Largest input accepted, in bytes. */
  maxBytes?: number;
}

/** One parsed document and its position (0-based, counting every `---` section). */
export interface ParsedDocument {
  index: number;
  /** The plain JSON-compatible value of the document. */
  value: unknown;
}

/** A parse problem; `index` is the document it belongs to, -1 for the whole input. */
export interface ParseError {
  index: number;
  message: string;
}

/** Everything `parseDocuments` found. */
export interface ParseResult {
  documents: ParsedDocument[];
  errors: ParseError[];
}

/** Defaults used when a limit is not given. */
export const DEFAULT_PARSE_LIMITS = {
  maxDepth: 64,
  maxAliasCount: 100,
  maxBytes: 4 * 1024 * 1024,
} as const;

/**
 * Parses YAML or JSON text (JSON is YAML) holding one or more documents.
 * Empty documents (a bare `---`) are skipped but still counted in `index`, so
 * an error's index matches what an editor shows. Binary input, too many
 * documents, too deep nesting and alias bombs are reported as errors rather
 * than consuming memory or stack.
 */
export function parseDocuments(input: string | Uint8Array, limits: ParseLimits): ParseResult {
  const maxDepth = limits.maxDepth ?? DEFAULT_PARSE_LIMITS.maxDepth;
  const maxAliasCount = limits.maxAliasCount ?? DEFAULT_PARSE_LIMITS.maxAliasCount;
  const maxBytes = limits.maxBytes ?? DEFAULT_PARSE_LIMITS.maxBytes;

  const text = toText(input, maxBytes);
  if (typeof text !== "string") return { documents: [], errors: [{ index: -1, message: text.error }] };

  const result: ParseResult = { documents: [], errors: [] };
  // The yaml parser recurses once per nesting level; refuse inputs whose
  // nesting could exhaust the stack before handing them to it.
  if (structuralDepthBound(text) > Math.max(maxDepth, PARSER_SAFE_DEPTH)) {
    return { documents: [], errors: [{ index: 0, message: depthMessage(maxDepth) }] };
  }
  const lineCounter = new LineCounter();
  // Read as kubectl and the API server do (see kube-yaml.ts): flow scalars
  // keep their inner colons, merge keys apply, and plain scalars resolve as
  // go-yaml v2 resolves them (after composing, below).
  const docs = parseAllDocuments(joinFlowColons(text), {
    lineCounter,
    uniqueKeys: true,
    prettyErrors: false,
    merge: true,
  });
  // parseAllDocuments returns an EmptyStream (an array-like with no items) for
  // blank input; both shapes are iterable.
  let nonEmpty = 0;
  let index = -1;
  for (const doc of docs) {
    index++;
    if (doc.errors.length > 0) {
      const first = doc.errors[0]!;
      // The yaml parser recurses per nesting level and reports a stack
      // overflow as a parse error; name the real cause.
      if (/call stack/i.test(first.message)) {
        result.errors.push({ index, message: depthMessage(maxDepth) });
        continue;
      }
      const pos = lineCounter.linePos(first.pos[0]);
      result.errors.push({
        index,
        message: `invalid YAML at line ${pos.line}, column ${pos.col}: ${firstLine(first.message)}`,
      });
      continue;
    }
    if (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)) continue;
    nonEmpty++;
    if (nonEmpty > limits.maxDocuments) {
      result.errors.push({
        index,
        message: `too many documents: at most ${limits.maxDocuments} are accepted`,
      });
      break;
    }
    const depth = nodeDepth(doc.contents, maxDepth);
    if (depth > maxDepth) {
      result.errors.push({ index, message: depthMessage(maxDepth) });
      continue;
    }
    const problems = resolveAsKubernetes(doc);
    if (problems.length > 0) {
      result.errors.push({ index, message: `cannot read document as Kubernetes does: ${problems[0]}` });
      continue;
    }
    try {
      const value = doc.toJS({ maxAliasCount });
      result.documents.push({ index, value });
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      const message = /alias/i.test(reason)
        ? `too many alias expansions (more than ${maxAliasCount}); YAML aliases are limited to prevent resource exhaustion`
        : `cannot read document: ${firstLine(reason)}`;
      result.errors.push({ index, message });
    }
  }
  return result;
}

/** Decodes bytes as UTF-8 text, refusing what is plainly not text. */
function toText(input: string | Uint8Array, maxBytes: number): string | { error: string } {
  const size = typeof input === "string" ? Buffer.byteLength(input, "utf8") : input.byteLength;
  if (size > maxBytes) return { error: `input too large: ${size} bytes, at most ${maxBytes} are accepted` };
  let text: string;
  if (typeof input === "string") {
    text = input;
  } else {
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(input);
    } catch {
      return { error: "input is not valid UTF-8 text (binary data?)" };
    }
  }
  // NUL and other C0 controls (except tab, LF, CR) never occur in YAML or
  // JSON config; their presence means binary data.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: detecting binary input is the point
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text)) {
    return { error: "input contains control characters: it is not YAML or JSON text (binary data?)" };
  }
  return text;
}

/**
 * The nesting depth of a YAML node tree, stopping early once `limit` is
 * passed. Aliases count as leaves: their expansion is bounded separately by
 * maxAliasCount.
 */
function nodeDepth(root: unknown, limit: number): number {
  let deepest = 0;
  const stack: Array<{ node: unknown; depth: number }> = [{ node: root, depth: 1 }];
  while (stack.length > 0) {
    const { node, depth } = stack.pop()!;
    if (isAlias(node) || !isCollection(node)) continue;
    if (depth > deepest) deepest = depth;
    if (deepest > limit) return deepest;
    for (const item of node.items) {
      if (isPair(item)) {
        if (isCollection(item.key)) stack.push({ node: item.key, depth: depth + 1 });
        stack.push({ node: item.value, depth: depth + 1 });
      } else {
        stack.push({ node: item, depth: depth + 1 });
      }
    }
  }
  return deepest;
}

/** Nesting the yaml parser handles without risk to the stack. */
const PARSER_SAFE_DEPTH = 256;

/**
 * A cheap upper bound of the nesting depth of YAML text, computed without
 * parsing: per line, the open flow brackets carried over plus the
 * indentation plus the compact "- " markers. Quoted strings and comments are
 * skipped so brackets inside them do not count.
 */
export function structuralDepthBound(text: string): number {
  let flow = 0;
  let deepest = 0;
  let quote: '"' | "'" | undefined;
  let lineStart = true;
  let lineDepth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === "\\" && quote === '"') i++;
      else if (c === quote) quote = undefined;
      continue;
    }
    if (c === "\n") {
      lineStart = true;
      lineDepth = 0;
      continue;
    }
    if (lineStart && (c === " " || c === "-")) {
      lineDepth++;
    } else {
      lineStart = false;
      if (c === "#" && (i === 0 || /\s/.test(text[i - 1] ?? ""))) {
        const end = text.indexOf("\n", i);
        i = end < 0 ? text.length : end - 1;
        continue;
      }
      const prev = text[i - 1] ?? " ";
      if ((c === '"' || c === "'") && /[\s[{,:]/.test(prev)) quote = c;
      else if (c === "[" || c === "{") flow++;
      else if ((c === "]" || c === "}") && flow > 0) flow--;
    }
    if (flow + lineDepth > deepest) deepest = flow + lineDepth;
  }
  return deepest;
}

function depthMessage(maxDepth: number): string {
  return `document nested too deeply: at most ${maxDepth} levels of maps and lists are accepted`;
}

function firstLine(message: string): string {
  return message.split("\n")[0] ?? message;
}
