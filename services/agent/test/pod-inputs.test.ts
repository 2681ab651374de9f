import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { parseSettings, SettingsError } from "@sextant/runtime";
import { envoyBootstrapFromSettings, grpcBootstrapFromSettings } from "../src/bootstrap/from-settings.js";
import { parseDownwardApi, unquoteGo } from "../src/pod/downward-api.js";
import { parseProxyConfig } from "../src/pod/proxy-config.js";
import { agentSettings } from "../src/settings.js";

const dir = mkdtempSync(join(tmpdir(), "agent-pod-inputs-"));
/** A downward-API file as the kubelet writes it; returns its path. */
function podFile(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}
const NO_FILES = { POD_LABELS_FILE: join(dir, "absent-labels"), POD_ANNOTATIONS_FILE: join(dir, "absent") };
const parse = (env: Record<string, string>) =>
  parseSettings(agentSettings, { INSTANCE_IP: "10.0.0.5", ...NO_FILES, ...env });

describe("downward-API files", () => {
  test('one key="value" line per entry; a line without = is skipped', () => {
    assert.deepEqual(parseDownwardApi('app="reviews"\nversion="v1"\n'), { app: "reviews", version: "v1" });
    assert.deepEqual(parseDownwardApi(""), {});
  });

  test("values are unquoted with Go's rules, so %q-written text comes back exactly", () => {
    // What Go's %q writes for a JSON annotation, a multi-line one and non-ASCII text.
    assert.equal(unquoteGo(String.raw`"{\"a\":1}"`), '{"a":1}');
    assert.equal(unquoteGo(String.raw`"line1\nline2\ttab\\"`), "line1\nline2\ttab\\");
    assert.equal(unquoteGo('"héllo ✓"'), "héllo ✓");
    assert.equal(unquoteGo(String.raw`"\u00e9\U0001F600"`), "é😀");
    // \x and octal escapes are bytes: together they may form one UTF-8 character.
    assert.equal(unquoteGo(String.raw`"\xc3\xa9"`), "é");
    assert.equal(unquoteGo(String.raw`"\303\251\a\b\f\r\v"`), "é\x07\b\f\r\v");
    // The value may itself hold "=".
    assert.deepEqual(parseDownwardApi('note="a=b"\n'), { note: "a=b" });
  });

  test("a value Go would not unquote is an error naming the line and key", () => {
    assert.throws(
      () => parseDownwardApi('app="web"\nbad=web\n'),
      /line 2 \(bad\): value must be a double-quoted/,
    );
    assert.throws(() => unquoteGo(String.raw`"\q"`), /unknown escape \\q/);
    assert.throws(() => unquoteGo(String.raw`"\x4"`), /\\x escape needs 2 hex digits/);
    assert.throws(() => unquoteGo(String.raw`"\400"`), /above \\377/);
    assert.throws(() => unquoteGo(String.raw`"\ud800"`), /not a Unicode character/);
    assert.throws(() => unquoteGo('"a"b"'), /unescaped/);
  });
});

describe("PROXY_CONFIG", () => {
  test("unset gives Istio's defaults", () => {
    const result = parseProxyConfig(undefined);
    assert.ok(result.ok);
    assert.deepEqual(
      { ...result.config, raw: undefined },
      {
        discoveryAddress: undefined,
        terminationDrainDurationMs: 5000,
        drainDurationMs: 45_000,
        proxyAdminPort: 15000,
        statusPort: 15020,
        concurrency: undefined,
        proxyMetadata: {},
        holdApplicationUntilProxyStarts: false,
        raw: undefined,
      },
    );
  });

  test("reads the fields the agent uses, in proto JSON, and keeps the rest", () => {
    const result = parseProxyConfig(
      JSON.stringify({
        discoveryAddress: "sextant-push.istio-system.svc:15012",
        terminationDrainDuration: "12.5s",
        drainDuration: "30s",
        proxyAdminPort: 16000,
        statusPort: "16020",
        concurrency: 4,
        proxyMetadata: { ISTIO_META_DNS_CAPTURE: "true" },
        holdApplicationUntilProxyStarts: true,
        tracing: { zipkin: { address: "zipkin:9411" } },
      }),
    );
    assert.ok(result.ok);
    assert.equal(result.config.discoveryAddress, "sextant-push.istio-system.svc:15012");
    assert.equal(result.config.terminationDrainDurationMs, 12_500);
    assert.equal(result.config.drainDurationMs, 30_000);
    assert.equal(result.config.proxyAdminPort, 16000);
    assert.equal(result.config.statusPort, 16020);
    assert.equal(result.config.concurrency, 4);
    assert.equal(result.config.holdApplicationUntilProxyStarts, true);
    assert.deepEqual(result.config.raw.tracing, { zipkin: { address: "zipkin:9411" } });
  });

  test("a bad field is named", () => {
    const result = parseProxyConfig('{"terminationDrainDuration":"5 seconds","proxyAdminPort":70000}');
    assert.equal(result.ok, false);
    assert.ok(!result.ok);
    assert.deepEqual(result.problems, [
      'terminationDrainDuration: must be a duration such as "5s" or "0.5s" (got "5 seconds")',
      "proxyAdminPort: Number must be less than or equal to 65535",
    ]);
    assert.deepEqual(parseProxyConfig("[1]"), {
      ok: false,
      problems: ["must be ProxyConfig as a JSON object"],
    });
  });
});

describe("agent settings from an injected pod", () => {
  test("labels come from the downward-API file, over ISTIO_METAJSON_LABELS, without pod-template-hash", () => {
    const settings = parse({
      ISTIO_METAJSON_LABELS: '{"app":"old","static":"kept"}',
      POD_LABELS_FILE: podFile("labels", 'app="reviews"\npod-template-hash="7f9c"\nversion="v1"\n'),
    });
    assert.deepEqual(settings.LABELS, { app: "reviews", static: "kept", version: "v1" });
    const node = envoyBootstrapFromSettings(settings).node as { metadata: Record<string, unknown> };
    assert.deepEqual(node.metadata.LABELS, { app: "reviews", static: "kept", version: "v1" });
  });

  test("without the files, ISTIO_METAJSON_LABELS alone gives the labels and there are no annotations", () => {
    const settings = parse({ ISTIO_METAJSON_LABELS: '{"app":"web"}' });
    assert.deepEqual(settings.LABELS, { app: "web" });
    assert.deepEqual(settings.ANNOTATIONS, {});
    const node = envoyBootstrapFromSettings(settings).node as { metadata: Record<string, unknown> };
    assert.equal(node.metadata.ANNOTATIONS, undefined);
  });

  test("annotations come from their file into the node's ANNOTATIONS", () => {
    const settings = parse({
      POD_ANNOTATIONS_FILE: podFile(
        "annotations",
        `sidecar.istio.io/status=${JSON.stringify('{"revision":"default"}')}\n`,
      ),
    });
    assert.deepEqual(settings.ANNOTATIONS, { "sidecar.istio.io/status": '{"revision":"default"}' });
    const node = grpcBootstrapFromSettings(settings).node as { metadata: Record<string, unknown> };
    assert.deepEqual(node.metadata.ANNOTATIONS, settings.ANNOTATIONS);
  });

  test("a malformed labels file or PROXY_CONFIG fails the start, naming the variable", () => {
    assert.throws(
      () =>
        parse({
          POD_LABELS_FILE: podFile("bad-labels", "app=reviews\n"),
          PROXY_CONFIG: '{"statusPort":"x"}',
        }),
      (error: unknown) => {
        assert.ok(error instanceof SettingsError);
        assert.match(
          error.message,
          /POD_LABELS_FILE: .*bad-labels: line 1 \(app\): value must be a double-quoted string/,
        );
        assert.match(error.message, /PROXY_CONFIG: statusPort: /);
        return true;
      },
    );
  });

  test("PROXY_CONFIG gives the xDS address, status and admin ports unless set explicitly", () => {
    const proxyConfig = JSON.stringify({
      discoveryAddress: "push.example:15012",
      statusPort: 16020,
      proxyAdminPort: 16000,
    });
    const settings = parse({ PROXY_CONFIG: proxyConfig });
    assert.equal(settings.XDS_ADDR, "push.example:15012");
    assert.equal(settings.HTTP_PORT, 16020);
    const bootstrap = envoyBootstrapFromSettings(settings) as {
      admin: { address: { socket_address: { port_value: number } } };
    };
    assert.equal(bootstrap.admin.address.socket_address.port_value, 16000);
    const explicit = parse({ PROXY_CONFIG: proxyConfig, XDS_ADDR: "127.0.0.1:1", HTTP_PORT: "1234" });
    assert.equal(explicit.XDS_ADDR, "127.0.0.1:1");
    assert.equal(explicit.HTTP_PORT, 1234);
    assert.equal(parse({}).XDS_ADDR, "localhost:15012");
  });

  test("proxyMetadata's ISTIO_META_* entries are metadata under the environment's", () => {
    const settings = parse({
      PROXY_CONFIG: JSON.stringify({
        proxyMetadata: { ISTIO_META_DNS_CAPTURE: "true", ISTIO_META_NETWORK: "from-config", OTHER: "x" },
      }),
      ISTIO_META_NETWORK: "from-env",
    });
    assert.deepEqual(settings.NODE_METADATA, { DNS_CAPTURE: "true", NETWORK: "from-env" });
    const node = envoyBootstrapFromSettings(settings).node as { metadata: Record<string, unknown> };
    assert.deepEqual(node.metadata.PROXY_CONFIG, {
      terminationDrainDuration: "5s",
      drainDuration: "45s",
      proxyAdminPort: 15000,
      statusPort: 15020,
      proxyMetadata: { ISTIO_META_DNS_CAPTURE: "true", ISTIO_META_NETWORK: "from-config", OTHER: "x" },
    });
  });

  test("concurrency is PROXY_CONFIG's (0 included: every core), else the CPU limit's whole cores", () => {
    assert.equal(parse({ ISTIO_CPU_LIMIT: "3" }).PROXY_CONFIG.concurrency, 3);
    assert.equal(
      parse({ ISTIO_CPU_LIMIT: "3", PROXY_CONFIG: '{"concurrency":2}' }).PROXY_CONFIG.concurrency,
      2,
    );
    assert.equal(
      parse({ ISTIO_CPU_LIMIT: "3", PROXY_CONFIG: '{"concurrency":0}' }).PROXY_CONFIG.concurrency,
      0,
    );
    assert.equal(parse({}).PROXY_CONFIG.concurrency, undefined);
  });
});
