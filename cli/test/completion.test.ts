import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { buildProgram } from "../src/main.js";
import { runCli } from "./capture.js";

const complete = async (...words: string[]) =>
  (await runCli(["__complete", "--", ...words])).stdout.split("\n");

describe("sextantctl completion", () => {
  const commands = buildProgram()
    .commands.map((command) => command.name())
    .filter((name) => name !== "__complete");

  it("prints a script for bash, zsh and fish; another shell is a usage error", async () => {
    assert.match(
      (await runCli(["completion", "bash"])).stdout,
      /^complete -o default -F _sextantctl sextantctl$/m,
    );
    assert.match((await runCli(["completion", "zsh"])).stdout, /^ {2}compdef _sextantctl sextantctl$/m);
    const fish = (await runCli(["completion", "fish"])).stdout;
    for (const name of commands)
      assert.match(fish, new RegExp(`-n __fish_use_subcommand -f -a ${name} -d '`));
    const tcsh = await runCli(["completion", "tcsh"]);
    assert.equal(tcsh.exitCode, 2);
    assert.match(tcsh.stderr, /no completion for shell "tcsh": use bash, zsh, fish/);
  });

  it("completes commands from the program's tree, and their flags, kinds and -o values", async () => {
    assert.deepEqual(await complete(""), commands);
    assert.ok(commands.includes("analyze") && commands.includes("kube-inject"));
    assert.deepEqual(await complete("ap"), ["apply"]);
    assert.deepEqual(await complete("get", "virt"), ["virtualservices"]);
    assert.deepEqual(await complete("delete", "d"), ["destinationrules", "dr"]);
    assert.deepEqual(await complete("get", "vs", "-o", ""), ["table", "yaml", "json"]);
    assert.deepEqual(await complete("analyze", "--fa"), ["--failure-threshold"]);
    assert.deepEqual(await complete("--ingest", "http://x", "analyze", "--failure-threshold", "W"), [
      "Warning",
    ]);
    assert.deepEqual(await complete("completion", ""), ["bash", "zsh", "fish"]);
  });

  describe("proxy ids from push's /debug/proxy_status", () => {
    const server = createServer((request, response) => {
      const authorized = request.headers.authorization === "Bearer secret";
      response.statusCode = request.url === "/debug/proxy_status" && authorized ? 200 : 401;
      response.end(
        JSON.stringify([
          { proxyId: "sidecar~10.0.0.2~reviews-v1.default~default.svc.cluster.local" },
          { proxyId: "sidecar~10.0.0.1~details-v1.default~default.svc.cluster.local" },
        ]),
      );
    });
    let push = "";
    before(async () => {
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      push = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(() => server.close());

    it("an argument named proxy completes with the connected proxies, with the token", async () => {
      const program = buildProgram();
      program
        .command("probe")
        .argument("[proxy]")
        .action(() => {});
      const run = await runCli(
        ["--push", push, "--token", "secret", "__complete", "--", "probe", "sidecar~10.0.0.1"],
        program,
      );
      assert.equal(run.stdout, "sidecar~10.0.0.1~details-v1.default~default.svc.cluster.local");
      const refused = await runCli(
        ["--push", push, "--token", "wrong", "__complete", "--", "probe", ""],
        program,
      );
      assert.equal(refused.stdout, "");
    });
  });

  it("the bash script completes in a real bash", () => {
    const main = join(import.meta.dirname, "..", "src", "main.ts");
    const script = [
      `sextantctl() { "${process.execPath}" --conditions=@sextant/source --import tsx "${main}" "$@"; }`,
      "source <(sextantctl completion bash)",
      "COMP_WORDS=(sextantctl get dest); COMP_CWORD=2",
      "_sextantctl",
      `printf '%s\\n' "\${COMPREPLY[@]}"`,
    ].join("\n");
    assert.equal(execFileSync("bash", ["-c", script], { encoding: "utf8" }), "destinationrules\n");
  });
});
