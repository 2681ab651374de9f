// Rewrites ARCHITECTURE.md's contracts table (the region between its
// contracts:begin and contracts:end markers) from the services' contracts.
// Run from deploy/: node --conditions=@sextant/source --import tsx scripts/generate-architecture.ts
import { readFileSync, writeFileSync } from "node:fs";
import { ARCHITECTURE_FILE, withContractsTable } from "../src/contracts.js";

writeFileSync(ARCHITECTURE_FILE, withContractsTable(readFileSync(ARCHITECTURE_FILE, "utf8")));
process.stdout.write(`wrote ${ARCHITECTURE_FILE}\n`);
