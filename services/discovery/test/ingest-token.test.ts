import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { ingestAuthorization } from "../src/registration/ingest-token.js";

describe("the bearer token discovery shows ingest (INGEST_TOKEN_FILE)", () => {
  const dir = mkdtempSync(join(tmpdir(), "sextant-ingest-token-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("sends no Authorization header without a token file", async () => {
    assert.deepEqual(await ingestAuthorization(undefined), {});
  });

  it("sends the file's token, trimmed, and the new one once the file is rewritten (a rotated projected token)", async () => {
    const file = join(dir, "token");
    writeFileSync(file, "first-token\n");
    assert.deepEqual(await ingestAuthorization(file), { authorization: "Bearer first-token" });
    writeFileSync(file, "rotated-token");
    assert.deepEqual(await ingestAuthorization(file), { authorization: "Bearer rotated-token" });
  });

  it("fails, rather than calling anonymously, while the file is missing or empty", async () => {
    await assert.rejects(ingestAuthorization(join(dir, "not-yet-written")), /ENOENT/);
    const empty = join(dir, "empty");
    writeFileSync(empty, " \n");
    await assert.rejects(ingestAuthorization(empty), /is empty/);
  });
});
