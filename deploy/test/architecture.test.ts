import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { ARCHITECTURE_FILE, withContractsTable } from "../src/contracts.js";

describe("ARCHITECTURE.md's contracts table is what scripts/generate-architecture.ts renders", () => {
  it("matches the services' contracts", () => {
    const document = readFileSync(ARCHITECTURE_FILE, "utf8");
    assert.equal(
      document,
      withContractsTable(document),
      "run scripts/generate-architecture.ts from deploy/ and commit the result",
    );
  });
});
