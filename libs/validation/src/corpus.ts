import { readFileSync } from "node:fs";
import { parse } from "yaml";
import type { ResourceInput } from "./validate.js";

/** One entry of the shared test corpus. */
export interface CorpusCase {
  /** What the case exercises. */
  name: string;
  /** The resource as a user would write it. */
  resource: ResourceInput;
  /** For invalid cases: every error path the validator must report. Empty for valid cases. */
  errors: string[];
}

function load(file: string): CorpusCase[] {
  const text = readFileSync(new URL(`../testdata/${file}`, import.meta.url), "utf8");
  const doc = parse(text) as { cases?: Array<Partial<CorpusCase>> };
  return (doc.cases ?? []).map((c) => ({
    name: String(c.name),
    resource: c.resource ?? {},
    errors: c.errors ?? [],
  }));
}

/** Invalid resources, each with the error paths it must produce (testdata/invalid.yaml). */
export function loadInvalidCorpus(): CorpusCase[] {
  return load("invalid.yaml");
}

/** Valid resources, including edge cases Istio accepts (testdata/valid.yaml). */
export function loadValidCorpus(): CorpusCase[] {
  return load("valid.yaml");
}
