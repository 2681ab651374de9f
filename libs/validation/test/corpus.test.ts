import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadInvalidCorpus, loadValidCorpus } from "../src/corpus.js";
import { validateResource } from "../src/index.js";

const invalid = loadInvalidCorpus();
const valid = loadValidCorpus();

describe("invalid corpus", () => {
  it("has at least 60 cases, each naming the error paths it expects", () => {
    assert.ok(invalid.length >= 60, `only ${invalid.length} invalid cases`);
    for (const c of invalid) assert.ok(c.errors.length > 0, `${c.name}: no expected errors`);
  });

  for (const c of invalid) {
    it(`rejects: ${c.name}`, () => {
      const result = validateResource(c.resource);
      const got = result.errors.map((e) => e.path).sort();
      assert.deepEqual(got, [...c.errors].sort(), JSON.stringify(result.errors, null, 2));
      for (const e of result.errors)
        assert.ok(e.message.length > 10, `terse message at ${e.path}: ${e.message}`);
    });
  }
});

describe("valid corpus", () => {
  it("has at least 20 cases", () => {
    assert.ok(valid.length >= 20, `only ${valid.length} valid cases`);
  });

  for (const c of valid) {
    it(`accepts: ${c.name}`, () => {
      const result = validateResource(c.resource);
      assert.deepEqual(result.errors, []);
    });
  }
});
