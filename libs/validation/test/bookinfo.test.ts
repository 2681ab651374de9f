import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { bookinfoNetworkingDir } from "@sextant/testing";
import { parseDocuments, validateResource } from "../src/index.js";

const samplesDir = bookinfoNetworkingDir();
const files = readdirSync(samplesDir).filter((f) => f.endsWith(".yaml"));

describe("Bookinfo samples", () => {
  it("finds the sample files", () => {
    assert.ok(files.length >= 10, `only ${files.length} samples found in ${samplesDir}`);
  });

  for (const file of files) {
    it(`${file} parses and validates without errors`, () => {
      const parsed = parseDocuments(readFileSync(join(samplesDir, file), "utf8"), { maxDocuments: 100 });
      assert.deepEqual(parsed.errors, []);
      assert.ok(parsed.documents.length > 0, "no documents");
      for (const doc of parsed.documents) {
        const result = validateResource(doc.value as Record<string, unknown>);
        assert.deepEqual(result.errors, [], `document ${doc.index}`);
      }
    });
  }
});
