// Writes deploy/crds/ from Sextant's protobuf descriptors (see src/crds.ts).
// Run from deploy/: node --conditions=@sextant/source --import tsx scripts/generate-crds.ts
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { renderCrdFiles } from "../src/crds.js";

const directory = new URL("../crds/", import.meta.url).pathname;
mkdirSync(directory, { recursive: true });
const files = renderCrdFiles();
// A kind no longer supported must not leave its CRD behind.
for (const name of readdirSync(directory, { recursive: true, withFileTypes: true })) {
  if (!name.isFile()) continue;
  const path = join(name.parentPath, name.name).slice(directory.length);
  if (!files.has(path)) rmSync(join(directory, path));
}
for (const [name, content] of files) {
  mkdirSync(dirname(join(directory, name)), { recursive: true });
  writeFileSync(join(directory, name), content);
}
process.stdout.write(`wrote ${files.size} files to ${directory}\n`);
