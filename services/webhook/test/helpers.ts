// biome-ignore-all lint/suspicious/noExplicitAny: admission responses and pods are untyped JSON here.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { schemaProblems } from "./kube-schema.js";

/** The CREATE AdmissionReview the API server sends /inject for a bare pod (no owner) in namespace. */
export function podAdmissionReview(
  uid: string,
  namespace: string,
  pod: { metadata: Record<string, unknown>; spec: Record<string, unknown> },
) {
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid,
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
      namespace,
      operation: "CREATE",
      object: { apiVersion: "v1", kind: "Pod", ...pod },
    },
  };
}

/** A self-signed serving certificate for localhost, made with the openssl CLI in a temp dir. */
export function selfSignedCert(dir = mkdtempSync(join(tmpdir(), "webhook-tls-")), cn = "localhost") {
  const certFile = join(dir, "tls.crt");
  const keyFile = join(dir, "tls.key");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      keyFile,
      "-out",
      certFile,
      "-days",
      "1",
      "-subj",
      `/CN=${cn}`,
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1",
    ],
    { stdio: "ignore" },
  );
  return { dir, certFile, keyFile, cert: readFileSync(certFile, "utf8") };
}

/** The answer to an HTTPS POST. */
export interface PostResult {
  status: number;
  text: string;
  json: () => any;
  peerFingerprint: string;
}

/** POSTs a body to the webhook over HTTPS, trusting only the given certificate. */
export function post(port: number, path: string, body: string | Buffer, ca: string): Promise<PostResult> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        ca,
        servername: "localhost",
        agent: false,
        headers: { "content-type": "application/json" },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const fingerprint =
            (res.socket as import("node:tls").TLSSocket).getPeerCertificate?.()?.fingerprint256 ?? "";
          resolve({
            status: res.statusCode ?? 0,
            text,
            json: () => JSON.parse(text),
            peerFingerprint: fingerprint,
          });
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Asserts structural rules of a pod spec that the API server's validation enforces. */
export function assertValidPodSpec(pod: any): void {
  // The Kubernetes API schema (client-node's generated models): no unknown field, every value of its type.
  assert.deepEqual(schemaProblems(pod, "V1Pod"), [], "the patched pod does not fit the Kubernetes schema");
  const spec = pod.spec;
  const all = [...(spec.initContainers ?? []), ...spec.containers];
  const names = all.map((c: any) => c.name);
  assert.equal(new Set(names).size, names.length, `duplicate container names: ${names}`);
  const volumes = (spec.volumes ?? []).map((v: any) => v.name);
  assert.equal(new Set(volumes).size, volumes.length, `duplicate volume names: ${volumes}`);
  for (const c of all) {
    assert.match(c.name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    assert.ok(typeof c.image === "string" && c.image.length > 0, `${c.name} has no image`);
    for (const m of c.volumeMounts ?? [])
      assert.ok(volumes.includes(m.name), `${c.name} mounts unknown volume ${m.name}`);
    for (const p of c.ports ?? []) assert.ok(p.containerPort > 0 && p.containerPort < 65536);
    for (const e of c.env ?? [])
      assert.ok(typeof e.name === "string" && (e.value === undefined || typeof e.value === "string"));
    if (c.restartPolicy !== undefined) assert.equal(c.restartPolicy, "Always");
  }
  // restartPolicy is only allowed on init containers.
  for (const c of spec.containers) assert.equal(c.restartPolicy, undefined);
  for (const v of spec.volumes ?? []) {
    const sources = Object.keys(v).filter((k) => k !== "name");
    assert.equal(sources.length, 1, `volume ${v.name} must have exactly one source`);
  }
}
