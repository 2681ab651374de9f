import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { configFilePath, resolveConnection } from "../src/connection.js";

describe("how sextantctl finds the mesh", () => {
  let home = "";
  let cwd = "";
  const startDir = process.cwd();
  before(() => {
    home = mkdtempSync(join(tmpdir(), "sextantctl-home-"));
    // A working directory with the demo's token, the last source before the defaults.
    cwd = mkdtempSync(join(tmpdir(), "sextantctl-cwd-"));
    mkdirSync(join(cwd, ".sextant"));
    writeFileSync(join(cwd, ".sextant", "api-admin-token"), "demo-token\n");
    process.chdir(cwd);
  });
  after(() => process.chdir(startDir));

  function writeConfig(dir: string, text: string): string {
    mkdirSync(join(dir, "sextant"), { recursive: true });
    const path = join(dir, "sextant", "config.yaml");
    writeFileSync(path, text);
    return path;
  }

  it("reads the config file from XDG_CONFIG_HOME, else ~/.config, else SEXTANT_CONFIG's path", () => {
    assert.equal(configFilePath({ HOME: "/home/a" }), "/home/a/.config/sextant/config.yaml");
    assert.equal(configFilePath({ HOME: "/home/a", XDG_CONFIG_HOME: "/xdg" }), "/xdg/sextant/config.yaml");
    // The XDG spec: a relative XDG_CONFIG_HOME is invalid and ignored.
    assert.equal(
      configFilePath({ HOME: "/home/a", XDG_CONFIG_HOME: "rel" }),
      "/home/a/.config/sextant/config.yaml",
    );
    assert.equal(configFilePath({ HOME: "/home/a", SEXTANT_CONFIG: "/etc/s.yaml" }), "/etc/s.yaml");
  });

  it("with nothing set, uses the local mesh and the demo's .sextant/ token", () => {
    assert.deepEqual(resolveConnection({}, { HOME: home }), {
      ingest: "http://127.0.0.1:8080",
      push: "http://127.0.0.1:15014",
      token: "demo-token",
    });
  });

  it("the config file beats the demo's token and the defaults; a relative tokenFile is read from its directory", () => {
    const xdg = join(home, "xdg1");
    writeConfig(
      xdg,
      "ingest: https://ingest.example:8443/\npush: https://push.example:15014\ntokenFile: token\n",
    );
    writeFileSync(join(xdg, "sextant", "token"), "file-token\n");
    assert.deepEqual(resolveConnection({}, { HOME: home, XDG_CONFIG_HOME: xdg }), {
      ingest: "https://ingest.example:8443",
      push: "https://push.example:15014",
      token: "file-token",
    });
  });

  it("the environment beats the config file, and flags beat both, setting by setting", () => {
    const path = writeConfig(
      join(home, "xdg2"),
      "ingest: http://config:1\npush: http://config:2\ntoken: config-token\n",
    );
    const env = {
      HOME: home,
      SEXTANT_CONFIG: path,
      SEXTANT_PUSH: "http://env:2",
      SEXTANT_TOKEN: "env-token",
    };
    assert.deepEqual(resolveConnection({}, env), {
      ingest: "http://config:1",
      push: "http://env:2",
      token: "env-token",
    });
    const tokenFile = join(home, "flag-token");
    writeFileSync(tokenFile, "flag-file-token\n");
    assert.deepEqual(resolveConnection({ ingest: "http://flag:1", tokenFile }, env), {
      ingest: "http://flag:1",
      push: "http://env:2",
      token: "flag-file-token",
    });
    // A token file given by the environment beats a token in the config file.
    assert.equal(
      resolveConnection({}, { HOME: home, SEXTANT_CONFIG: path, SEXTANT_TOKEN_FILE: tokenFile }).token,
      "flag-file-token",
    );
  });

  it("refuses a config file it cannot use, saying which and why", () => {
    const typo = writeConfig(join(home, "xdg3"), "ingest: http://a\ntokenfile: t\n");
    assert.throws(() => resolveConnection({}, { HOME: home, SEXTANT_CONFIG: typo }), {
      message: `config file ${typo}: unknown key "tokenfile": use ingest, push, token, tokenFile`,
    });
    const notMapping = writeConfig(join(home, "xdg4"), "- ingest\n");
    assert.throws(
      () => resolveConnection({}, { HOME: home, SEXTANT_CONFIG: notMapping }),
      /must be a mapping/,
    );
    assert.throws(() => resolveConnection({}, { HOME: home, SEXTANT_CONFIG: join(home, "nope.yaml") }), {
      message: `SEXTANT_CONFIG names ${join(home, "nope.yaml")}, which does not exist: create it or unset SEXTANT_CONFIG`,
    });
    const missingToken = writeConfig(join(home, "xdg5"), "tokenFile: /nonexistent/token\n");
    assert.throws(() => resolveConnection({}, { HOME: home, SEXTANT_CONFIG: missingToken }), {
      message: "cannot read the token file /nonexistent/token: ENOENT",
    });
  });
});
