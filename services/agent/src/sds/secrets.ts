import type { IdentitySnapshot } from "@sextant/identity";
import { Secret } from "@sextant/proto/envoy";
import { pemBundle, withNewline } from "../util/pem.js";

/** Istio's SDS resource names: the workload's certificate and key, and the roots it trusts. */
export const SecretName = {
  workload: "default",
  roots: "ROOTCA",
} as const;

/** Prefixes of Istio's file-mounted secrets (`file-cert:<cert>~<key>`, `file-root:<path>`), which need files the agent does not read. */
const FILE_SECRET_PREFIXES = ["file-cert:", "file-root:"];

/** Thrown for a resource name the agent cannot serve; the message says why. */
export class UnservableSecretError extends Error {}

/**
 * The secret a resource name stands for, as istio-agent's secret cache
 * answers (security/pkg/nodeagent/cache getCachedSecret): `ROOTCA` is the
 * validation context with every root of the trust bundle; any other name is
 * the workload's certificate and key under that name, since a sidecar has
 * exactly one identity. Istio's file-mounted names are refused.
 */
export function secretFor(name: string, snapshot: IdentitySnapshot): Secret {
  if (FILE_SECRET_PREFIXES.some((prefix) => name.startsWith(prefix))) {
    throw new UnservableSecretError(
      `secret "${name}": file-mounted certificates (file-cert:, file-root:) are not supported by the Sextant agent; use "default" and "ROOTCA"`,
    );
  }
  if (name === SecretName.roots) {
    return Secret.fromPartial({
      name,
      validationContext: {
        trustedCa: { inlineBytes: Buffer.from(pemBundle(snapshot.rootsPem)) },
      },
    });
  }
  return Secret.fromPartial({
    name,
    tlsCertificate: {
      certificateChain: { inlineBytes: Buffer.from(withNewline(snapshot.certificate.certChainPem)) },
      privateKey: { inlineBytes: Buffer.from(withNewline(snapshot.certificate.privateKeyPem)) },
    },
  });
}
