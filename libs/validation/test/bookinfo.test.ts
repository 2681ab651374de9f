import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { parseDocuments, validateResource } from "../src/index.js";

const samplesDir = new URL("../../../../shared/samples/bookinfo/networking/", import.meta.url);
const files = readdirSync(samplesDir).filter((f) => f.endsWith(".yaml"));

describe("Bookinfo samples", () => {
  it("finds the sample files", () => {
    assert.ok(files.length >= 10, `only ${files.length} samples found in ${samplesDir.pathname}`);
  });

  for (const file of files) {
    it(`${file} parses and validates without errors`, () => {
      const parsed = parseDocuments(readFileSync(new URL(file, samplesDir), "utf8"), { maxDocuments: 100 });
      assert.deepEqual(parsed.errors, []);
      assert.ok(parsed.documents.length > 0, "no documents");
      for (const doc of parsed.documents) {
        const result = validateResource(doc.value as Record<string, unknown>);
        assert.deepEqual(result.errors, [], `document ${doc.index}`);
      }
    });
  }
});
