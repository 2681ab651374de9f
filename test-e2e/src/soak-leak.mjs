// Test-only leak injection for the soak test (plain JavaScript: it is
// preloaded with NODE_OPTIONS=--import, before tsx). No service reads it or
// knows of it; the soak harness passes it to one push replica to prove its
// detector catches a leak of 1 KB per change: every NATS message of the
// endpoints or config bucket the process receives (at most one per endpoint
// or config change: discovery may fold two into one write) keeps 1 KB alive
// for good. Other buckets' messages (ingest's trace record of each config
// change, proxy status) are not counted, so the leak never exceeds 1 KB per
// change.
import { Socket } from "node:net";

const KV_MESSAGE = /(?:^|\n)H?MSG \$KV\.sextant-(?:endpoints|config)\./g;
const retained = [];
const emit = Socket.prototype.emit;
Socket.prototype.emit = function (event, chunk, ...rest) {
  if (event === "data" && Buffer.isBuffer(chunk)) {
    const messages = chunk.toString("latin1").match(KV_MESSAGE)?.length ?? 0;
    // 128 doubles: 1 KB of V8 heap (a Buffer's bytes would live outside it).
    for (let i = 0; i < messages; i++) retained.push(new Array(128).fill(retained.length + 0.5));
  }
  return emit.call(this, event, chunk, ...rest);
};
process.on("exit", () => {
  process.stderr.write(`soak-leak: retained ${retained.length} KB\n`);
});
