// Writes deploy/nats/auth.conf, the users and permissions of nats-server's
// configuration, from src/nats-users.ts.
// Run from deploy/: node --conditions=@sextant/source --import tsx scripts/generate-nats-auth.ts
import { writeFileSync } from "node:fs";
import { renderNatsAuthorization } from "../src/nats-users.js";

const file = new URL("../nats/auth.conf", import.meta.url).pathname;
writeFileSync(file, renderNatsAuthorization());
process.stdout.write(`wrote ${file}\n`);
