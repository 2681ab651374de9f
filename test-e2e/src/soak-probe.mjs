// The soak's memory probe, preloaded into each soaked service by the harness
// (NODE_OPTIONS=--import; plain JavaScript, it loads before tsx). A service's
// own /metrics reports the V8 heap in use, garbage included, which swings by
// tens of MB between collections and would hide a leak of a few hundred KB
// per minute; the probe answers GET / on SOAK_PROBE_PORT with the heap after
// a full collection (HeapProfiler.collectGarbage through the in-process
// inspector, no --inspect port) and the RSS, as JSON. Nothing in the services
// knows of it.
import { createServer } from "node:http";
import { Session } from "node:inspector";
import { setFlagsFromString } from "node:v8";

// V8 drops the bytecode of functions left unused for a few full collections,
// and the probe forces one per sample: without this the heap sinks by
// hundreds of KB a minute for the first minutes as startup code is flushed,
// enough to hide a leak of that size in the 2-minute test.
setFlagsFromString("--no-flush-bytecode");

const session = new Session();
session.connect();
const collectGarbage = () =>
  new Promise((resolve, reject) =>
    session.post("HeapProfiler.collectGarbage", (error) => (error ? reject(error) : resolve())),
  );

const server = createServer(async (_request, response) => {
  try {
    await collectGarbage();
    const { heapUsed, rss } = process.memoryUsage();
    response.end(JSON.stringify({ heapUsed, rss }));
  } catch (error) {
    response.statusCode = 500;
    response.end(String(error));
  }
});
server.listen(Number(process.env.SOAK_PROBE_PORT), "127.0.0.1");
// The probe never keeps a stopping service alive.
server.unref();
