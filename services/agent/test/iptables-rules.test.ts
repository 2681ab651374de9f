import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import type { networkInterfaces } from "node:os";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { expectGolden, trackChildProcess, updatingGoldens } from "@sextant/testing";
import { cleanupText, hasIstioState, parseSave } from "../src/iptables/apply.js";
import { hasIpv6, nameservers, runIptablesCommand } from "../src/iptables/command.js";
import { IptablesUsageError, parseIptablesArgs } from "../src/iptables/flags.js";
import { buildCaptureRules, type CaptureEnvironment, restoreText } from "../src/iptables/rules.js";

const goldenDir = join(import.meta.dirname, "testdata", "iptables");

/** The init container's arguments, as the webhook's template writes them (Istio's defaults). */
const INJECTED = [
  "-p",
  "15001",
  "-z",
  "15006",
  "-u",
  "1337",
  "-m",
  "REDIRECT",
  "-i",
  "*",
  "-x",
  "",
  "-b",
  "*",
];
const INJECTED_FULL = [...INJECTED, "-d", "15090,15021,15020", "-o", "", "--log_output_level=default:info"];

const V4: CaptureEnvironment = { ipv6: false, dnsServers: [] };

/** Golden cases: the flags, what the system adds, the expected iptables-restore input. */
const CASES: { name: string; args: string[]; environment: CaptureEnvironment }[] = [
  { name: "redirect", args: INJECTED_FULL, environment: V4 },
  { name: "tproxy", args: [...INJECTED, "-m", "TPROXY", "-d", "15090,15021,15020"], environment: V4 },
  {
    name: "tproxy-ports-v6",
    args: ["-m", "TPROXY", "-b", "8080,9090", "-i", "*", "-c", "eth1"],
    environment: { ipv6: true, dnsServers: [] },
  },
  {
    name: "exclusions",
    args: [
      ...INJECTED,
      "-d",
      "15090,15021,15020",
      "-x",
      "10.96.0.0/12,192.168.0.0/16,fd00::/8",
      "-o",
      "3306,6379",
      "-q",
      "8443",
      "-c",
      "eth1",
      "-k",
      "net1",
    ],
    environment: V4,
  },
  {
    name: "include-cidrs",
    args: ["-i", "10.0.0.0/8,fd00::/8", "-b", "8080"],
    environment: { ipv6: true, dnsServers: [] },
  },
  {
    name: "dns-resolv-conf",
    args: [...INJECTED_FULL, "--redirect-dns"],
    environment: { ipv6: false, dnsServers: ["10.96.0.10"] },
  },
  {
    name: "dns-capture-all",
    args: [...INJECTED_FULL, "--redirect-dns", "--capture-all-dns"],
    environment: V4,
  },
  {
    name: "dual-stack-dns",
    args: [...INJECTED_FULL, "--redirect-dns", "-u", "1337,1000", "-g", "1337"],
    environment: { ipv6: true, dnsServers: ["10.96.0.10", "fd00:10:96::a"] },
  },
  { name: "drop-invalid", args: [...INJECTED_FULL, "--drop-invalid"], environment: V4 },
  { name: "no-capture", args: ["-i", "", "-b", ""], environment: V4 },
];

function render(args: string[], environment: CaptureEnvironment): string {
  const command = parseIptablesArgs(args);
  assert.equal(command.help, false);
  if (command.help) throw new Error("unreachable");
  const rules = buildCaptureRules(command.config, environment);
  const header = `# agent iptables ${args.map((arg) => (arg === "" || arg === "*" ? `'${arg}'` : arg)).join(" ")}\n`;
  const system = `# ipv6: ${environment.ipv6}, resolv.conf nameservers: ${environment.dnsServers.join(",") || "none"}\n`;
  return `${header}${system}# IPv4\n${restoreText(rules.v4)}# IPv6\n${restoreText(rules.v6)}`;
}

describe("istio-iptables rules", () => {
  for (const { name, args, environment } of CASES)
    test(`${name}: the iptables-restore input matches testdata/iptables/${name}.golden`, () => {
      expectGolden(join(goldenDir, `${name}.golden`), render(args, environment));
    });

  test("every golden file belongs to a case", () => {
    if (updatingGoldens()) return;
    const names = new Set(CASES.map((testCase) => `${testCase.name}.golden`));
    assert.deepEqual(
      readdirSync(goldenDir).filter((file) => !names.has(file)),
      [],
    );
  });

  test("the injected init container's rules: inbound all but 15090/15021/15020, outbound all TCP, the proxy's own traffic (uid/gid 1337: its xDS on 15012 too) never", () => {
    const command = parseIptablesArgs(INJECTED_FULL);
    if (command.help) throw new Error("unexpected help");
    const text = restoreText(buildCaptureRules(command.config, V4).v4);
    for (const line of [
      "-A ISTIO_INBOUND -p tcp --dport 15090 -j RETURN",
      "-A ISTIO_INBOUND -p tcp --dport 15021 -j RETURN",
      "-A ISTIO_INBOUND -p tcp --dport 15020 -j RETURN",
      "-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT",
      "-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN",
      "-A ISTIO_OUTPUT -m owner --gid-owner 1337 -j RETURN",
      "-A ISTIO_OUTPUT -j ISTIO_REDIRECT",
      "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001",
      "-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006",
    ])
      assert.ok(text.includes(`${line}\n`), line);
    // The proxy's UID rule comes before the catch-all redirect.
    assert.ok(text.indexOf("--uid-owner 1337 -j RETURN") < text.indexOf("-j ISTIO_REDIRECT\n"));
  });

  test("an invalid CIDR is refused, naming the flag", () => {
    const command = parseIptablesArgs(["-x", "10.0.0.0/33"]);
    if (command.help) throw new Error("unexpected help");
    assert.throws(
      () => buildCaptureRules(command.config, V4),
      /--istio-service-exclude-cidr: "10.0.0.0\/33"/,
    );
  });
});

describe("istio-iptables flags", () => {
  const config = (args: string[], env: NodeJS.ProcessEnv = {}) => {
    const command = parseIptablesArgs(args, env);
    if (command.help) throw new Error("unexpected help");
    return command.config;
  };

  test("short, long, attached and = forms all set the same field", () => {
    for (const args of [["-p", "1"], ["-p1"], ["-p=1"], ["--envoy-port", "1"], ["--envoy-port=1"]])
      assert.equal(config(args).proxyPort, "1", args.join(" "));
  });

  test("Istio's defaults: ports 15001/15006/15008, uid 1337 and gid = uid, REDIRECT, TPROXY mark 1337 table 133", () => {
    const defaults = config([]);
    assert.deepEqual(
      [
        defaults.proxyPort,
        defaults.inboundCapturePort,
        defaults.inboundTunnelPort,
        defaults.proxyUid,
        defaults.proxyGid,
        defaults.interceptionMode,
        defaults.tproxyMark,
        defaults.tproxyRouteTable,
      ],
      ["15001", "15006", "15008", "1337", "1337", "REDIRECT", "1337", "133"],
    );
    assert.equal(config(["-u", "7"]).proxyGid, "7");
  });

  test("long names of every letter the injector and Istio's docs use", () => {
    const parsed = config([
      "--inbound-capture-port=1",
      "--proxy-uid=2",
      "--proxy-gid=3",
      "--istio-inbound-interception-mode=tproxy",
      "--istio-service-cidr=10.0.0.0/8",
      "--istio-service-exclude-cidr=10.1.0.0/16",
      "--istio-inbound-ports=80",
      "--istio-local-exclude-ports=81",
      "--istio-exclude-interfaces=eth9",
      "--istio-inbound-tproxy-mark=5",
      "--istio-inbound-tproxy-route-table=6",
      "--istio-outbound-ports=82",
      "--istio-local-outbound-ports-exclude=83",
      "--redirect-dns",
      "--cleanup",
    ]);
    assert.deepEqual(
      [
        parsed.inboundCapturePort,
        parsed.proxyUid,
        parsed.proxyGid,
        parsed.interceptionMode,
        parsed.outboundIpRangesInclude,
        parsed.outboundIpRangesExclude,
        parsed.inboundPortsInclude,
        parsed.inboundPortsExclude,
        parsed.excludeInterfaces,
        parsed.tproxyMark,
        parsed.tproxyRouteTable,
        parsed.outboundPortsInclude,
        parsed.outboundPortsExclude,
        parsed.redirectDns,
        parsed.cleanup,
      ],
      [
        "1",
        "2",
        "3",
        "TPROXY",
        "10.0.0.0/8",
        "10.1.0.0/16",
        "80",
        "81",
        "eth9",
        "5",
        "6",
        "82",
        "83",
        true,
        true,
      ],
    );
  });

  test("environment variables are defaults the flags override (ISTIO_META_DNS_CAPTURE turns on DNS capture)", () => {
    assert.equal(config([], { ISTIO_META_DNS_CAPTURE: "true" }).redirectDns, true);
    assert.equal(config(["--redirect-dns=false"], { ISTIO_META_DNS_CAPTURE: "true" }).redirectDns, false);
    assert.equal(config([], { ISTIO_INBOUND_PORTS: "*" }).inboundPortsInclude, "*");
    assert.equal(config(["-b", "80"], { ISTIO_INBOUND_PORTS: "*" }).inboundPortsInclude, "80");
  });

  test("values istio-iptables refuses are refused with the flag's name", () => {
    for (const [args, message] of [
      [["-m", "NONE"], /--istio-inbound-interception-mode: "NONE"/],
      [["-p", "http"], /--envoy-port: "http" is not a port/],
      [["-d", "15090,x"], /--istio-local-exclude-ports: "x"/],
      [["-u", "istio-proxy"], /--proxy-uid: "istio-proxy" is not a numeric id/],
      [["-x", "*"], /--istio-service-exclude-cidr/],
      [["--no-such-flag"], /unknown flag --no-such-flag/],
      [["-p"], /--envoy-port needs a value/],
      [["run"], /unexpected argument "run"/],
      [["--redirect-dns=maybe"], /"maybe" is not true or false/],
    ] as const)
      assert.throws(
        () => parseIptablesArgs(args),
        (error) => error instanceof IptablesUsageError && message.test(error.message),
      );
  });
});

describe("istio-iptables system facts", () => {
  const address = (family: "IPv4" | "IPv6", value: string, internal = false) =>
    ({ address: value, family, internal, netmask: "", mac: "", cidr: null }) as never;

  test("IPv6 rules when the pod's first routable address is IPv6, or with --dual-stack any IPv6 address (link-local and loopback ignored)", () => {
    const v4First = {
      lo: [address("IPv6", "::1", true)],
      eth0: [address("IPv4", "10.1.2.3"), address("IPv6", "fd00::3"), address("IPv6", "fe80::1")],
    } as ReturnType<typeof networkInterfaces>;
    const v6Only = { eth0: [address("IPv6", "fe80::1"), address("IPv6", "fd00::3")] } as ReturnType<
      typeof networkInterfaces
    >;
    const linkLocalOnly = { eth0: [address("IPv4", "10.1.2.3"), address("IPv6", "fe80::1")] } as ReturnType<
      typeof networkInterfaces
    >;
    assert.equal(hasIpv6(v4First, false), false);
    assert.equal(hasIpv6(v4First, true), true);
    assert.equal(hasIpv6(v6Only, false), true);
    assert.equal(hasIpv6(linkLocalOnly, true), false);
  });

  test("nameservers come from resolv.conf (zone suffix dropped); an unreadable file has none", () => {
    const dir = mkdtempSync(join(tmpdir(), "resolv-"));
    const path = join(dir, "resolv.conf");
    writeFileSync(
      path,
      "search shop.svc.cluster.local\nnameserver 10.96.0.10\n# nameserver 1.1.1.1\nnameserver fe80::1%eth0\noptions ndots:5\n",
    );
    assert.deepEqual(nameservers(path), ["10.96.0.10", "fe80::1"]);
    assert.deepEqual(nameservers(join(dir, "missing")), []);
    rmSync(dir, { recursive: true });
  });

  test("iptables-save is read for Istio's chains and the jumps into them; cleanup removes jumps, then flushes, then deletes", () => {
    const save = [
      "# Generated by iptables-save",
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":ISTIO_INBOUND - [0:0]",
      ":ISTIO_OUTPUT - [0:0]",
      ":KUBE-SERVICES - [0:0]",
      "-A PREROUTING -p tcp -j ISTIO_INBOUND",
      "-A OUTPUT -j KUBE-SERVICES",
      "-A OUTPUT -j ISTIO_OUTPUT",
      "-A ISTIO_INBOUND -p tcp -m tcp --dport 15008 -j RETURN",
      "COMMIT",
      "*filter",
      ":INPUT ACCEPT [0:0]",
      "COMMIT",
      "",
    ].join("\n");
    const state = parseSave(save);
    assert.equal(hasIstioState(state), true);
    assert.deepEqual([...state.get("nat")!.chains.keys()], ["ISTIO_INBOUND", "ISTIO_OUTPUT"]);
    assert.equal(
      cleanupText(state),
      [
        "* nat",
        "-D PREROUTING -p tcp -j ISTIO_INBOUND",
        "-D OUTPUT -j ISTIO_OUTPUT",
        "-F ISTIO_INBOUND",
        "-F ISTIO_OUTPUT",
        "-X ISTIO_INBOUND",
        "-X ISTIO_OUTPUT",
        "COMMIT",
        "",
      ].join("\n"),
    );
    assert.equal(
      hasIstioState(parseSave("*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j KUBE-SERVICES\nCOMMIT\n")),
      false,
    );
  });
});

/** Runs `agent <args>` from the sources; resolves with its exit code and output. */
function agentProcess(args: string[], env: Record<string, string>) {
  const child = spawn(
    process.execPath,
    ["--conditions=@sextant/source", "--import", "tsx", "src/main.ts", ...args],
    {
      cwd: join(import.meta.dirname, ".."),
      env: { PATH: process.env.PATH ?? "", OTEL_SDK_DISABLED: "true", ...env },
    },
  );
  trackChildProcess(child);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
  });
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("exit", (code) => resolve({ code, stdout, stderr })),
  );
}

describe("agent iptables command", () => {
  test("--dry-run prints the iptables-restore input and runs nothing", async () => {
    let out = "";
    const ran: string[] = [];
    const code = await runIptablesCommand([...INJECTED_FULL, "--dry-run"], {
      env: {},
      stdout: (text) => {
        out += text;
      },
      stderr: () => {},
      interfaces: () => ({}),
      run: async (command) => {
        ran.push(command);
        return { code: 0, stdout: "", stderr: "" };
      },
    });
    assert.equal(code, 0);
    assert.deepEqual(ran, []);
    assert.match(out, /^# IPv4: iptables-restore --noflush\n\* nat\n-N ISTIO_INBOUND\n/);
    assert.match(out, /-A ISTIO_OUTPUT -j ISTIO_REDIRECT\nCOMMIT\n$/);
  });

  test("a usage error exits 2 with the message and the usage", async () => {
    let err = "";
    const code = await runIptablesCommand(["-m", "BOTH"], {
      env: {},
      stdout: () => {},
      stderr: (text) => {
        err += text;
      },
    });
    assert.equal(code, 2);
    assert.match(
      err,
      /agent iptables: --istio-inbound-interception-mode: "BOTH" is not REDIRECT or TPROXY\n\nusage: agent iptables/,
    );
  });

  test("`agent iptables --dry-run` (the alias of istio-iptables) prints the rules from the agent's command line", async () => {
    const { code, stdout, stderr } = await agentProcess(["iptables", "-b", "*", "-i", "*", "--dry-run"], {});
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^# IPv4: iptables-restore --noflush\n\* nat\n/);
    assert.match(stdout, /-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT\n/);
  });

  test("`agent istio-iptables` without iptables on PATH exits 1 naming the missing tool and its package", async () => {
    const { code, stderr } = await agentProcess(["istio-iptables", "-b", "*", "-i", "*"], {
      PATH: "/nonexistent",
    });
    assert.equal(code, 1, stderr);
    assert.match(
      stderr,
      /agent iptables: iptables-save was not found on PATH: install iptables \(Debian: apt-get install iptables\)/,
    );
  });
});
