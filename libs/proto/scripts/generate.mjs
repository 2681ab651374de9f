// Generates src/gen/ with ts-proto: Sextant's own protos (../../proto) plus
// the closure of the Envoy xDS v3 protos that Sextant uses. The Envoy protos
// are taken at generate time from the pinned @grpc/grpc-js-xds package (its
// deps/ folder), never committed. Only the import closure of ENVOY_ROOTS is
// generated, which keeps the output to roughly a hundred files.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const ownProtos = resolve(packageDir, "../../proto");
const stagingDir = join(packageDir, ".protos");
const outDir = join(packageDir, "src/gen");
// Generate beside the real folder and swap at the end, so that a failed run
// leaves the previous output whole and readers never see a half-written one.
const pendingOutDir = join(packageDir, `src/.gen-${process.pid}`);
const descriptorSet = join(packageDir, "descriptors/sextant.binpb");

/** The Envoy files Sextant builds or serves; their imports are pulled in. */
export const ENVOY_ROOTS = [
  "envoy/service/discovery/v3/ads.proto",
  "envoy/config/cluster/v3/cluster.proto",
  "envoy/config/listener/v3/listener.proto",
  "envoy/config/route/v3/route.proto",
  "envoy/config/endpoint/v3/endpoint.proto",
  "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
  "envoy/extensions/filters/http/router/v3/router.proto",
  "envoy/extensions/filters/http/fault/v3/fault.proto",
  "envoy/extensions/filters/http/rbac/v3/rbac.proto",
  "envoy/extensions/filters/http/ext_authz/v3/ext_authz.proto",
  "envoy/extensions/filters/network/ext_authz/v3/ext_authz.proto",
  "envoy/extensions/transport_sockets/tls/v3/tls.proto",
  "envoy/extensions/filters/network/rbac/v3/rbac.proto",
  "envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto",
  "envoy/service/secret/v3/sds.proto",
  "envoy/config/bootstrap/v3/bootstrap.proto",
  "envoy/extensions/filters/listener/original_dst/v3/original_dst.proto",
  "envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector.proto",
  "envoy/extensions/filters/listener/http_inspector/v3/http_inspector.proto",
  "envoy/extensions/filters/http/cors/v3/cors.proto",
  "envoy/extensions/retry/host/previous_hosts/v3/previous_hosts.proto",
  "envoy/extensions/upstreams/http/v3/http_protocol_options.proto",
  "envoy/extensions/transport_sockets/raw_buffer/v3/raw_buffer.proto",
  "envoy/extensions/filters/http/grpc_web/v3/grpc_web.proto",
  "envoy/extensions/filters/http/wasm/v3/wasm.proto",
  "envoy/extensions/filters/network/wasm/v3/wasm.proto",
  "envoy/extensions/access_loggers/file/v3/file.proto",
  "envoy/extensions/access_loggers/filters/cel/v3/cel.proto",
  "envoy/config/trace/v3/zipkin.proto",
  "envoy/config/trace/v3/opentelemetry.proto",
  "envoy/extensions/request_id/uuid/v3/uuid.proto",
];

const xdsDeps = join(dirname(require.resolve("@grpc/grpc-js-xds/package.json")), "deps");
const includePaths = ["envoy-api", "xds", "googleapis", "protoc-gen-validate"].map((d) => join(xdsDeps, d));

/** Finds a proto on the include path; google/protobuf/* are buf's built-ins. */
function locate(file) {
  for (const dir of includePaths) {
    const path = join(dir, file);
    if (existsSync(path)) return path;
  }
  throw new Error(`proto ${file} not found under ${xdsDeps}`);
}

function importClosure(roots) {
  const seen = new Map();
  const queue = [...roots];
  while (queue.length > 0) {
    const file = queue.pop();
    if (seen.has(file) || file.startsWith("google/protobuf/")) continue;
    const path = locate(file);
    seen.set(file, path);
    for (const match of readFileSync(path, "utf8").matchAll(/^import\s+(?:public\s+|weak\s+)?"([^"]+)";/gm)) {
      queue.push(match[1]);
    }
  }
  return seen;
}

// The validate.proto shipped in grpc-js-xds predates StringRules.ignore_empty
// (field 26), which newer Envoy protos set; without it the options fail to parse.
function patchValidateProto(text) {
  if (text.includes("ignore_empty")) return text;
  const patched = text.replace(
    /message StringRules \{(\r?\n)/,
    "message StringRules {$1  optional bool ignore_empty = 26;$1",
  );
  if (patched === text) throw new Error("validate.proto: StringRules not found, cannot patch ignore_empty");
  return patched;
}

rmSync(stagingDir, { recursive: true, force: true });
mkdirSync(stagingDir, { recursive: true });
mkdirSync(pendingOutDir, { recursive: true });

const closure = importClosure(ENVOY_ROOTS);
for (const [file, path] of closure) {
  const target = join(stagingDir, file);
  mkdirSync(dirname(target), { recursive: true });
  const text = readFileSync(path, "utf8");
  writeFileSync(target, file === "validate/validate.proto" ? patchValidateProto(text) : text);
}
for (const dir of ["sextant", "istio"])
  cpSync(join(ownProtos, dir), join(stagingDir, dir), { recursive: true });

writeFileSync(join(stagingDir, "buf.yaml"), "version: v2\n");
const plugin = join(dirname(require.resolve("ts-proto/package.json")), "protoc-gen-ts_proto");
const options = [
  "esModuleInterop=true",
  "importSuffix=.js",
  "env=node",
  "outputServices=grpc-js",
  "exportCommonSymbols=false",
  "useExactTypes=false",
];
const template = {
  version: "v2",
  plugins: [{ local: plugin, out: pendingOutDir, opt: options }],
};
const buf = join(dirname(require.resolve("@bufbuild/buf/package.json")), "bin/buf");
try {
  execFileSync(buf, ["generate", stagingDir, "--template", JSON.stringify(template)], { stdio: "inherit" });
} catch (error) {
  rmSync(pendingOutDir, { recursive: true, force: true });
  throw error;
}
rmSync(outDir, { recursive: true, force: true });
renameSync(pendingOutDir, outDir);
// The same files (with their imports) as a FileDescriptorSet, for code that
// needs reflection, such as rejecting unknown fields with their path.
mkdirSync(dirname(descriptorSet), { recursive: true });
execFileSync(buf, ["build", stagingDir, "--as-file-descriptor-set", "-o", descriptorSet], {
  stdio: "inherit",
});
console.log(`generated ${closure.size} Envoy protos and Sextant's own into src/gen`);
