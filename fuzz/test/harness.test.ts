// The harness catches what the targets' property forbids: an exception that
// is not a defined refusal, one thrown outside the call, an input that never
// returns; and passes inputs that are accepted or refused.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fuzz } from "../src/run.js";

const module = new URL("./fixtures/faulty-target.ts", import.meta.url);
const seeds = (...texts: string[]) => texts.map((text) => new TextEncoder().encode(text));
// Any name: the fixture module replaces the target (failures go to crashes/fixture/).
// No warm-up: every seed runs under the 1 s limit.
const run = (...texts: string[]) =>
  fuzz("settings", {
    runs: 0,
    seed: 1,
    timeoutMs: 1000,
    fixture: { module, seeds: seeds(...texts), warmup: 0 },
  });

test("accepted and refused inputs pass", async () => {
  const result = await run("ok", "refuse this");
  assert.equal(result.failure, undefined);
  assert.equal(result.refused, 1);
});

test("an exception that is not a refusal fails the run, with its input written out", async () => {
  const { failure } = await run("ok", "crash now");
  assert.equal(failure?.kind, "crash");
  assert.match(failure.message, /not a refusal/);
  assert.equal(Buffer.from(failure.input).toString(), "crash now");
  assert.ok(existsSync(failure.file));
  assert.equal(readFileSync(failure.file, "utf8"), "crash now");
});

test("a process warning while an input runs fails the run", async () => {
  const { failure } = await run("ok", "warn me");
  assert.equal(failure?.kind, "crash");
  assert.match(failure.message, /a process warning: something questionable/);
  assert.equal(Buffer.from(failure.input).toString(), "warn me");
});

test("an exception outside the call fails the run", async () => {
  const { failure } = await run("late");
  assert.equal(failure?.kind, "crash");
  assert.match(failure.message, /thrown later/);
});

test("an input that does not return within the limit is a hang", async () => {
  const { failure } = await run("ok", "hang forever");
  assert.equal(failure?.kind, "hang");
  assert.equal(Buffer.from(failure.input).toString(), "hang forever");
});

test("an input slow in a cold worker but not in a warm one is not a hang", async () => {
  const marker = join(mkdtempSync(join(tmpdir(), "fuzz-harness-")), "ran");
  const result = await run("ok", `slow-once:${marker}`);
  assert.equal(result.failure, undefined);
  assert.equal(result.slow, 1);
});
