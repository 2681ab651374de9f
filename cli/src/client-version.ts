import { readFileSync } from "node:fs";

/**
 * The client's version, printed by `version`: the package's, read from its
 * package.json, one directory up from this module in src/ and dist/ alike,
 * and from the standalone bundle (dist/sextantctl.mjs beside the packed
 * package.json).
 */
export const CLIENT_VERSION: string = JSON.parse(
  readFileSync(new URL("../package.json", import.meta.url), "utf8"),
).version;
