import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/** True when goldens should be (re)written instead of compared: UPDATE_GOLDEN=1. */
export const updatingGoldens = (): boolean => process.env.UPDATE_GOLDEN === "1";

/**
 * Compares actual text with the golden file at path. With UPDATE_GOLDEN=1 the
 * file is written instead. A missing golden fails with a hint, never passes.
 */
export function expectGolden(path: string, actual: string): void {
  if (updatingGoldens()) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, actual);
    return;
  }
  if (!existsSync(path)) assert.fail(`golden file ${path} is missing; run with UPDATE_GOLDEN=1 to create it`);
  assert.equal(
    actual,
    readFileSync(path, "utf8"),
    `output differs from ${path} (UPDATE_GOLDEN=1 rewrites it)`,
  );
}

/** One golden case: testdata/<name>.in.yaml and its outputs <name>.<type>.out.yaml. */
export interface GoldenCase {
  readonly name: string;
  readonly input: string;
  readonly inputPath: string;
}

/** The cases of a testdata directory, sorted by name. */
export function goldenCases(dir: string): GoldenCase[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith(".in.yaml"))
    .sort()
    .map((file) => ({
      name: basename(file, ".in.yaml"),
      inputPath: join(dir, file),
      input: readFileSync(join(dir, file), "utf8"),
    }));
}

/**
 * Checks every case of dir: render(case) returns its outputs by type, each
 * compared with <name>.<type>.out.yaml. With UPDATE_GOLDEN=1 outputs are
 * rewritten and orphans (outputs no case produces any more) deleted; without
 * it an orphan fails the run, so stale goldens cannot linger unnoticed.
 */
export function checkGoldenDir(
  dir: string,
  render: (testCase: GoldenCase) => Record<string, string>,
): string[] {
  const produced = new Set<string>();
  for (const testCase of goldenCases(dir)) {
    for (const [type, text] of Object.entries(render(testCase))) {
      const file = `${testCase.name}.${type}.out.yaml`;
      produced.add(file);
      expectGolden(join(dir, file), text);
    }
  }
  const orphans = readdirSync(dir).filter((file) => file.endsWith(".out.yaml") && !produced.has(file));
  if (updatingGoldens()) {
    for (const orphan of orphans) rmSync(join(dir, orphan));
  } else if (orphans.length > 0) {
    assert.fail(`orphan golden files in ${dir}: ${orphans.join(", ")} (UPDATE_GOLDEN=1 deletes them)`);
  }
  return [...produced].sort();
}
