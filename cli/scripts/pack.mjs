#!/usr/bin/env node
// Packs sextantctl for `npm i -g` on a machine with only Node: the workspace
// packages it uses (@sextant/validation, ingest's analysis, the webhook's
// injector, ...) are not published, so esbuild bundles them and every public
// dependency into one file, and the tarball's package.json has no
// dependencies, so the install needs no registry. The two files the bundle
// reads at run time go where their `new URL(..., import.meta.url)` points
// from the bundle: the proto descriptor set (validation's schema) at
// ../descriptors/ and the injection template beside it.
//
// Usage: node scripts/pack.mjs [DESTINATION_DIR]  (default dist/); prints the tarball's path.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const cli = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const destination = resolve(process.argv[2] ?? join(cli, "dist"));
const stage = join(cli, "dist", "standalone");
const manifest = JSON.parse(readFileSync(join(cli, "package.json"), "utf8"));
// The workspace packages, linked into node_modules by pnpm.
const workspacePackage = (name) => join(cli, "node_modules", "@sextant", name);

rmSync(stage, { recursive: true, force: true });
mkdirSync(join(stage, "dist"), { recursive: true });
mkdirSync(join(stage, "descriptors"), { recursive: true });

await build({
  entryPoints: [join(cli, "src", "main.ts")],
  outfile: join(stage, "dist", "sextantctl.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20.19",
  // Workspace packages from their TypeScript sources, as the tests run them: no build needed first.
  conditions: ["@sextant/source"],
  // CommonJS dependencies (commander, cli-table3) call require() for Node's
  // built-ins, which an ES module bundle has no binding for.
  banner: {
    js: 'import { createRequire as __sextantRequire } from "node:module"; const require = __sextantRequire(import.meta.url);',
  },
  legalComments: "linked",
  logLevel: "warning",
});

// The assets, found where the workspace packages keep them.
const proto = workspacePackage("proto");
copyFileSync(join(proto, "descriptors", "sextant.binpb"), join(stage, "descriptors", "sextant.binpb"));
const webhook = workspacePackage("webhook");
copyFileSync(
  join(webhook, "src", "inject", "sidecar-template.yaml"),
  join(stage, "dist", "sidecar-template.yaml"),
);
copyFileSync(join(cli, "README.md"), join(stage, "README.md"));

writeFileSync(
  join(stage, "package.json"),
  `${JSON.stringify(
    {
      name: manifest.name,
      version: manifest.version,
      description: manifest.description,
      type: "module",
      bin: { sextantctl: "./dist/sextantctl.mjs" },
      engines: { node: ">=20.19" },
      files: ["dist", "descriptors"],
    },
    null,
    2,
  )}\n`,
);

mkdirSync(destination, { recursive: true });
const [packed] = JSON.parse(
  execFileSync("npm", ["pack", "--json", "--pack-destination", destination], {
    cwd: stage,
    encoding: "utf8",
  }),
);
console.log(join(destination, packed.filename));
