import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { checkGoldenDir, expectGolden } from "../src/golden.js";

const withUpdate = (value: string | undefined, fn: () => void) => {
  const saved = process.env.UPDATE_GOLDEN;
  if (value === undefined) delete process.env.UPDATE_GOLDEN;
  else process.env.UPDATE_GOLDEN = value;
  try {
    fn();
  } finally {
    if (saved === undefined) delete process.env.UPDATE_GOLDEN;
    else process.env.UPDATE_GOLDEN = saved;
  }
};

describe("golden files", () => {
  const dir = mkdtempSync(join(tmpdir(), "golden-"));

  it("fails on a missing golden, writes it with UPDATE_GOLDEN=1, then compares", () => {
    const path = join(dir, "single.out.yaml");
    withUpdate(undefined, () =>
      assert.throws(() => expectGolden(path, "a: 1\n"), /missing; run with UPDATE_GOLDEN=1/),
    );
    withUpdate("1", () => expectGolden(path, "a: 1\n"));
    assert.equal(readFileSync(path, "utf8"), "a: 1\n");
    withUpdate(undefined, () => expectGolden(path, "a: 1\n"));
    withUpdate(undefined, () => assert.throws(() => expectGolden(path, "a: 2\n"), /differs/));
  });

  it("checks a testdata directory and deletes orphans only when updating", () => {
    const cases = mkdtempSync(join(tmpdir(), "golden-cases-"));
    writeFileSync(join(cases, "alpha.in.yaml"), "x: 1\n");
    writeFileSync(join(cases, "stale.routes.out.yaml"), "old\n");
    const render = (input: string) => ({ listeners: input.toUpperCase() });
    withUpdate("1", () => checkGoldenDir(cases, (c) => render(c.input)));
    assert.equal(readFileSync(join(cases, "alpha.listeners.out.yaml"), "utf8"), "X: 1\n");
    assert.equal(existsSync(join(cases, "stale.routes.out.yaml")), false);

    writeFileSync(join(cases, "orphan.clusters.out.yaml"), "old\n");
    withUpdate(undefined, () =>
      assert.throws(() => checkGoldenDir(cases, (c) => render(c.input)), /orphan golden files/),
    );
  });
});
