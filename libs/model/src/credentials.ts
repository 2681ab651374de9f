// credentialName → SDS resource names → Kubernetes Secrets, as istiod reads
// them (pilot/pkg/model/credentials): shared by discovery, which publishes the
// Secrets config names, and push, which serves them over SDS.
import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { encodeKey } from "@sextant/bus";

/** The SDS resource prefix of a Secret read from Kubernetes, in the proxy's namespace unless named. */
export const KUBERNETES_SECRET_PREFIX = "kubernetes://";
/** The suffix of the resource (and, optionally, Secret) holding only a credential's CA bundle. */
export const CA_CERT_SUFFIX = "-cacert";

/** A Secret named by a credential reference. */
export interface SecretRef {
  readonly namespace: string;
  readonly name: string;
}

/** The `sextant-credentials` key of a Secret: namespace.name. */
export function credentialKey(ref: SecretRef): string {
  return encodeKey(ref.namespace, ref.name);
}

/**
 * The SDS resource name of a `credentialName` (istiod's ToResourceName):
 * `kubernetes://<credentialName>` unless it already names its type.
 * `builtin://` (the workload's own certificate) and `kubernetes-gateway://`
 * (Gateway API) are not Kubernetes Secrets Sextant serves: undefined.
 */
export function credentialResourceName(credentialName: string): string | undefined {
  if (!credentialName) return undefined;
  if (credentialName.startsWith(KUBERNETES_SECRET_PREFIX)) return credentialName;
  if (credentialName.includes("://")) return undefined;
  return `${KUBERNETES_SECRET_PREFIX}${credentialName}`;
}

/**
 * The Secret a `kubernetes://` resource name asks for (istiod's
 * ParseResourceName): `kubernetes://<name>` is in the proxy's namespace,
 * `kubernetes://<namespace>/<name>` names its own. The name keeps a
 * `-cacert` suffix. Undefined for other types or an empty name.
 */
export function parseSecretResourceName(resourceName: string, proxyNamespace: string): SecretRef | undefined {
  if (!resourceName.startsWith(KUBERNETES_SECRET_PREFIX)) return undefined;
  const [first = "", second] = resourceName.slice(KUBERNETES_SECRET_PREFIX.length).split("/");
  const ref =
    second === undefined ? { namespace: proxyNamespace, name: first } : { namespace: first, name: second };
  return ref.namespace && ref.name ? ref : undefined;
}

/** The Secrets a Gateway's servers name: credentialName, credentialNames, caCertCredentialName (structurally: the Gateway spec). */
export function gatewayCredentialNames(spec: {
  readonly servers: ReadonlyArray<{
    readonly tls?:
      | {
          readonly credentialName: string;
          readonly credentialNames?: readonly string[];
          readonly caCertCredentialName?: string;
        }
      | undefined;
  }>;
}): string[] {
  return spec.servers
    .flatMap(({ tls }) => [tls?.credentialName, ...(tls?.credentialNames ?? []), tls?.caCertCredentialName])
    .filter((name): name is string => Boolean(name));
}

interface TlsPolicy {
  readonly tls?: { readonly credentialName: string } | undefined;
  readonly portLevelSettings: ReadonlyArray<{
    readonly tls?: { readonly credentialName: string } | undefined;
  }>;
}

/** The credentialNames of a DestinationRule's client TLS settings: its traffic policy, port levels and subsets. */
export function destinationRuleCredentialNames(spec: {
  readonly trafficPolicy?: TlsPolicy | undefined;
  readonly subsets: ReadonlyArray<{ readonly trafficPolicy?: TlsPolicy | undefined }>;
}): string[] {
  const policies = [spec.trafficPolicy, ...spec.subsets.map((subset) => subset.trafficPolicy)];
  return policies
    .flatMap((policy) => (policy ? [policy.tls, ...policy.portLevelSettings.map((port) => port.tls)] : []))
    .map((tls) => tls?.credentialName ?? "")
    .filter(Boolean);
}

/**
 * Why a certificate chain and private key cannot serve TLS, or undefined if
 * they can: the chain's first certificate and the key must parse and the key
 * must be the certificate's (what istiod checks with Go's tls.X509KeyPair
 * before a Gateway API listener may use a Secret).
 */
export function tlsKeyPairProblem(chain: Uint8Array, key: Uint8Array): string | undefined {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(Buffer.from(chain));
  } catch {
    return "the certificate is not a PEM certificate";
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(Buffer.from(key));
  } catch {
    return "the private key is not a PEM private key";
  }
  return certificate.checkPrivateKey(privateKey)
    ? undefined
    : "the private key does not match the certificate";
}
