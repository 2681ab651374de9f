// `npm run demo` leaves nothing behind: after --once, and after Ctrl-C in
// the middle of a run, no process it started is left and its ports are free.
// It runs the built demo (scripts/demo.mjs over dist/), as a user does after
// the bootstrap step, on the demo's fixed local ports.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { eventually } from "@sextant/testing";
import { assertNothingLeft, exitOf, holdFixedPorts, leftovers, startScript } from "../src/leftovers.js";

const startDemo = (args: string[], env: Record<string, string>) => startScript("demo.mjs", args, env);

describe("npm run demo leaves nothing behind", { concurrency: false }, () => {
  let release = () => {};
  before(async () => {
    release = await holdFixedPorts();
  });
  after(() => release());

  it("--once: exits 0, then no process it started is left and its ports are free", async () => {
    assert.deepEqual(leftovers(), [], "a demo is already running here");
    const demo = startDemo(["--once"], { CI: "true" });
    const code = await exitOf(demo.child);
    assert.equal(code, 0, demo.output());
    await assertNothingLeft(demo.output);
  });

  it("Ctrl-C during a run stops every process it started", async () => {
    // Without --once and without a terminal the demo runs every step, then keeps the mesh up until Ctrl-C.
    const demo = startDemo([], { CI: "false" });
    await eventually(() => demo.output().includes("Press Ctrl-C") || demo.child.exitCode !== null, {
      timeoutMs: 120_000,
      message: "the demo never reached its running state",
    });
    assert.equal(demo.child.exitCode, null, demo.output());
    assert.ok(
      leftovers().length > 0,
      "the running demo shows no processes: the leftover check would see nothing",
    );
    demo.child.kill("SIGINT");
    assert.equal(await exitOf(demo.child), 0, demo.output());
    await assertNothingLeft(demo.output);
  });
});
