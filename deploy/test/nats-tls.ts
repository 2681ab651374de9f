// Certificates for a NATS cluster under test, made with openssl the way
// deploy/README.md tells an operator to: one CA, and one certificate the
// nodes serve to clients and present to each other on routes.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onCleanup } from "@sextant/testing";

/** A directory laid out as the Secret sextant-nats-tls is mounted: tls.crt, tls.key, ca.crt. */
export interface NatsTlsDir {
  readonly dir: string;
  readonly caFile: string;
}

const openssl = (args: string[], cwd: string) => execFileSync("openssl", args, { cwd, stdio: "pipe" });

/**
 * Makes a CA and a node certificate for `hosts` (IP addresses and DNS
 * names), usable both to serve and, on routes, as a client. Removed by the
 * file's cleanup.
 */
export function makeNatsTls(hosts: readonly string[] = ["127.0.0.1", "localhost"]): NatsTlsDir {
  const dir = mkdtempSync(join(tmpdir(), "sextant-nats-tls-"));
  onCleanup(`nats tls ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  const names = hosts.map((host) => (/^[\d.]+$/.test(host) ? `IP:${host}` : `DNS:${host}`)).join(",");
  openssl(
    [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"],
      ...["-subj", "/CN=sextant-nats test CA", "-addext", "basicConstraints=critical,CA:true"],
      ...["-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout", "ca.key", "-out", "ca.crt"],
    ],
    dir,
  );
  openssl(
    [
      ...["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
      ...["-subj", "/CN=sextant-nats", "-keyout", "tls.key", "-out", "tls.csr"],
    ],
    dir,
  );
  // Routes are TLS clients of each other: clientAuth beside serverAuth.
  writeFileSync(
    join(dir, "ext.cnf"),
    `subjectAltName=${names}\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\n`,
  );
  openssl(
    [
      ...["x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial"],
      ...["-days", "1", "-extfile", "ext.cnf", "-out", "tls.crt"],
    ],
    dir,
  );
  return { dir, caFile: join(dir, "ca.crt") };
}
