import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { repositoryRoot } from "@sextant/testing";
import { parse, parseAllDocuments } from "yaml";

/** The services that ship an image, each built by the repository's Dockerfile with SERVICE=<name>. */
export const IMAGE_SERVICES = ["ingest", "discovery", "push", "ca", "webhook", "agent"] as const;

/** One of {@link IMAGE_SERVICES}. */
export type ImageService = (typeof IMAGE_SERVICES)[number];

/** The control plane's start order: each waits for the previous one's /ready (the issue's and the demo's order). */
export const START_ORDER = ["nats", "ingest", "discovery", "ca", "push", "webhook"] as const;

/** One Dockerfile instruction, continuation lines joined. */
export interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

/** A build stage: its base image (ARG defaults resolved), its name, its instructions. */
export interface Stage {
  readonly from: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

/**
 * Parses a Dockerfile far enough for static checks: comments dropped,
 * backslash continuations joined, instructions grouped by stage, and
 * `${ARG}` replaced by the --build-arg given here, else the global ARG's
 * default (what `docker build` uses): in FROM, and in instructions for the
 * build arguments given.
 */
export function parseDockerfile(text: string, buildArgs: Record<string, string> = {}): Stage[] {
  const logical: string[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("#")) continue;
    if (line.endsWith("\\")) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    const whole = (pending + line).trim();
    pending = "";
    if (whole) logical.push(whole);
  }
  const args = new Map<string, string>();
  const given = (rest: string) =>
    rest.replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, a, b) => buildArgs[a ?? b] ?? whole);
  const stages: Stage[] = [];
  for (const line of logical) {
    const space = line.search(/\s/);
    const keyword = (space < 0 ? line : line.slice(0, space)).toUpperCase();
    const rest = space < 0 ? "" : line.slice(space + 1).trim();
    if (keyword === "ARG" && stages.length === 0) {
      const [name, value = ""] = rest.split("=", 2);
      if (name) args.set(name, buildArgs[name] ?? value);
      continue;
    }
    if (keyword === "FROM") {
      const [image = "", as, name] = rest.split(/\s+/);
      const from = image.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => args.get(a ?? b) ?? "");
      stages.push({ from, name: as?.toUpperCase() === "AS" ? name : undefined, instructions: [] });
      continue;
    }
    stages.at(-1)?.instructions.push({ keyword, args: given(rest) });
  }
  return stages;
}

/** The repository's Dockerfile, read and parsed for `--build-arg SERVICE=<service>`. */
export function readDockerfile(service: string): { path: string; text: string; stages: Stage[] } {
  const path = join(repositoryRoot(), "Dockerfile");
  const text = readFileSync(path, "utf8");
  return { path, text, stages: parseDockerfile(text, { SERVICE: service }) };
}

/**
 * The image a build ends on (the last stage, or `target`): its base image
 * and its instructions, inherited ones first, following FROM through the
 * stages it names.
 */
export function imageOf(stages: Stage[], target?: string): { base: string; instructions: Instruction[] } {
  let stage = target === undefined ? stages.at(-1) : stages.find((s) => s.name === target);
  const chain: Stage[] = [];
  while (stage) {
    if (chain.includes(stage)) throw new Error(`stage ${stage.name} is its own base`);
    chain.unshift(stage);
    const base = stage.from;
    stage = stages.find((s) => s.name === base);
  }
  return { base: chain[0]?.from ?? "", instructions: chain.flatMap((s) => s.instructions) };
}

/** A workspace package: its name, directory and manifest. */
export interface WorkspacePackage {
  readonly name: string;
  readonly dir: string;
  readonly manifest: {
    name: string;
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
    optionalDependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
  };
}

/** Every package of the workspace, from pnpm-workspace.yaml's globs (`dir/*` or a plain directory). */
export function workspacePackages(root = repositoryRoot()): Map<string, WorkspacePackage> {
  const workspace = parse(readFileSync(join(root, "pnpm-workspace.yaml"), "utf8")) as { packages: string[] };
  const dirs = workspace.packages.flatMap((pattern) =>
    pattern.endsWith("/*")
      ? readdirSync(join(root, pattern.slice(0, -2)), { withFileTypes: true })
          .filter((entry) => entry.isDirectory())
          .map((entry) => join(pattern.slice(0, -2), entry.name))
      : [pattern],
  );
  const packages = new Map<string, WorkspacePackage>();
  for (const dir of dirs) {
    const file = join(root, dir, "package.json");
    if (!existsSync(file)) continue;
    const manifest = JSON.parse(readFileSync(file, "utf8")) as WorkspacePackage["manifest"];
    packages.set(manifest.name, { name: manifest.name, dir, manifest });
  }
  return packages;
}

/**
 * The package and every workspace package it reaches through `workspace:`
 * dependencies of any kind, transitively: what `turbo prune` must keep,
 * because devDependencies are needed to build (codegen, tsc) before
 * `pnpm deploy --prod` drops them.
 */
export function workspaceClosure(name: string, packages = workspacePackages()): string[] {
  const seen = new Set<string>();
  const visit = (current: string) => {
    if (seen.has(current)) return;
    const pkg = packages.get(current);
    if (!pkg) throw new Error(`${current} is not a workspace package`);
    seen.add(current);
    const { dependencies, devDependencies, optionalDependencies, peerDependencies } = pkg.manifest;
    for (const deps of [dependencies, devDependencies, optionalDependencies, peerDependencies])
      for (const [dep, range] of Object.entries(deps ?? {})) if (range.startsWith("workspace:")) visit(dep);
  };
  visit(name);
  return [...seen].sort();
}

/** A compose service, as far as the tests read it. */
export interface ComposeService {
  image?: string;
  build?: string | { context?: string; dockerfile?: string; target?: string; args?: Record<string, string> };
  command?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  ports?: Array<string | { target: number; published?: string | number; host_ip?: string }>;
  volumes?: Array<string | { type: string; source?: string; target?: string; read_only?: boolean }>;
  depends_on?: string[] | Record<string, { condition: string }>;
  healthcheck?: { test?: string | string[]; disable?: boolean };
  network_mode?: string;
  user?: string;
}

/** compose.yaml as parsed: the document (YAML merge keys applied, as Compose applies them). */
export interface ComposeFile {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
  [key: string]: unknown;
}

/** The repository's compose.yaml, parsed with merge keys (`<<: *anchor`) resolved. */
export function readComposeFile(): { path: string; document: ComposeFile } {
  const path = join(repositoryRoot(), "compose.yaml");
  return { path, document: parse(readFileSync(path, "utf8"), { merge: true }) as ComposeFile };
}

/** A service's environment as a map (Compose allows a list of `K=V` too). */
export function environmentOf(service: ComposeService): Record<string, string> {
  const env = service.environment ?? {};
  if (Array.isArray(env))
    return Object.fromEntries(
      env.map((entry) => [entry.split("=", 1)[0] ?? entry, entry.slice(entry.indexOf("=") + 1)]),
    );
  return Object.fromEntries(Object.entries(env).map(([key, value]) => [key, String(value ?? "")]));
}

/** A service's depends_on as name → condition (a plain list means service_started). */
export function dependenciesOf(service: ComposeService): Record<string, string> {
  const deps = service.depends_on ?? {};
  if (Array.isArray(deps)) return Object.fromEntries(deps.map((name) => [name, "service_started"]));
  return Object.fromEntries(Object.entries(deps).map(([name, value]) => [name, value.condition]));
}

/** A short-syntax volume entry, split into source, target and mode. */
export function volumeMounts(
  service: ComposeService,
): Array<{ source: string; target: string; readOnly: boolean }> {
  return (service.volumes ?? []).map((volume) => {
    if (typeof volume !== "string")
      return {
        source: volume.source ?? "",
        target: volume.target ?? "",
        readOnly: volume.read_only === true,
      };
    const [source = "", target = "", mode = ""] = volume.split(":");
    return { source, target, readOnly: mode.split(",").includes("ro") };
  });
}

/** Published ports as {host ip, published, target}; compose.yaml uses the short "ip:published:target" form. */
export function publishedPorts(
  service: ComposeService,
): Array<{ hostIp: string | undefined; published: number; target: number }> {
  return (service.ports ?? []).map((port) => {
    if (typeof port !== "string")
      return { hostIp: port.host_ip, published: Number(port.published ?? port.target), target: port.target };
    const parts = port.split(":");
    const target = Number(parts.at(-1));
    const published = parts.length >= 2 ? Number(parts.at(-2)) : target;
    return { hostIp: parts.length === 3 ? parts[0] : undefined, published, target };
  });
}

/** Every Istio resource under compose/mesh (ingest's CONFIG_DIR in compose.yaml). */
export function meshConfig(): Array<{
  file: string;
  text: string;
  resources: Array<{
    kind: string;
    metadata: { name: string; namespace?: string };
    spec: Record<string, unknown>;
  }>;
}> {
  const dir = join(repositoryRoot(), "compose", "mesh");
  return readdirSync(dir)
    .filter((file) => /\.ya?ml$/.test(file))
    .sort()
    .map((file) => {
      const text = readFileSync(join(dir, file), "utf8");
      return {
        file,
        text,
        resources: parseAllDocuments(text)
          .map((document) => document.toJS())
          .filter((resource) => resource !== null),
      };
    });
}
