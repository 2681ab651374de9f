// The analyses of Gateways (istioctl analyze's gateway analyzers): a selector
// that picks no workload, a credentialName with no Secret, and servers of
// several Gateways that claim the same hosts on the same port of the same
// workload.
import {
  CA_CERT_SUFFIX,
  credentialKey,
  credentialResourceName,
  hostMatches,
  parseSecretResourceName,
  type SecretRef,
} from "@sextant/model";
import type { ConfigResource } from "@sextant/proto";
import {
  type Gateway,
  type ServerTLSSettings,
  ServerTLSSettings_TLSmode,
} from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";

/** A workload of the registry, as a Gateway selector sees it. */
export interface AnalysisWorkload {
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>>;
  /** A connected proxyless gRPC client runs there (Envoy-only config such as Telemetry does not apply). */
  readonly proxyless?: boolean;
}

/** What `sextant-credential-index` says of a Secret: which parts it holds. */
export interface SecretPresence {
  readonly hasCertificate: boolean;
  readonly hasCaCertificate: boolean;
}

/** The Secrets credentialNames name that exist, by their credentialKey (namespace.name); absent: no such Secret. */
export type CredentialIndex = ReadonlyMap<string, SecretPresence>;

/** What a gateway analysis reports: where, and what it says. */
export interface GatewayFinding {
  readonly resource: ConfigResource;
  readonly kind: "selectorNotFound" | "credentialNotFound" | "credentialIncomplete" | "conflictingServers";
  readonly field: string;
  readonly message: string;
}

/** A selector as Kubernetes prints one (keys sorted, `k=v` joined by commas), as Istio's messages show it. */
export const selectorText = (selector: Readonly<Record<string, string>>): string =>
  Object.keys(selector)
    .sort()
    .map((key) => `${key}=${selector[key]}`)
    .join(",");

const selects = (selector: Readonly<Record<string, string>>, labels: Readonly<Record<string, string>>) =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);

/**
 * A Gateway's selector picks workloads in every namespace, as Istio's
 * gateway analyzer matches pods and as push merges Gateways when gateways are
 * not scoped to their namespace (Istio's default). An empty selector picks
 * every workload.
 */
function selectedWorkloads(gateway: Gateway, workloads: readonly AnalysisWorkload[]): Set<number> {
  const selected = new Set<number>();
  workloads.forEach((workload, index) => {
    if (selects(gateway.selector, workload.labels)) selected.add(index);
  });
  return selected;
}

/**
 * A server host `[namespace/]dnsName`: the namespace part says which
 * namespaces' VirtualServices may bind to it ("*" any, "." the Gateway's own).
 */
function serverHost(host: string, gatewayNamespace: string): { namespace: string; name: string } {
  const slash = host.indexOf("/");
  if (slash < 0) return { namespace: "*", name: host };
  const namespace = host.slice(0, slash);
  return { namespace: namespace === "." ? gatewayNamespace : namespace, name: host.slice(slash + 1) };
}

/** Two server hosts overlap when their DNS names overlap and so do the namespaces they admit. */
function hostsOverlap(
  a: { namespace: string; name: string },
  b: { namespace: string; name: string },
): boolean {
  const namespaces = a.namespace === "*" || b.namespace === "*" || a.namespace === b.namespace;
  return namespaces && (hostMatches(a.name, b.name) || hostMatches(b.name, a.name));
}

interface Entry {
  readonly resource: ConfigResource;
  readonly spec: Gateway;
  readonly selector: string;
  readonly workloads: ReadonlySet<number>;
}

/**
 * Runs the gateway analyses over the Gateways and the registry's workloads:
 *
 * - IST0101 (Istio's gateway analyzer): a selector that picks no workload
 *   gets no proxy, so its servers listen nowhere.
 * - IST0101 (Istio's gateway secret analyzer), and SXT0003 for a Secret that
 *   exists but cannot serve: see {@link credentialFindings}.
 * - IST0145 (Istio's conflicting-gateway analyzer): another Gateway on the
 *   same workload (the same selector, as Istio compares, or one that picks a
 *   workload this one picks too) has a server on the same port number whose
 *   hosts overlap; which one the proxy serves is undefined. Reported on each
 *   side, per server.
 */
export function analyzeGateways(
  gateways: ReadonlyArray<{ resource: ConfigResource; spec: Gateway }>,
  workloads: readonly AnalysisWorkload[],
  credentials: CredentialIndex,
): GatewayFinding[] {
  const findings: GatewayFinding[] = [];
  const entries: Entry[] = gateways.map(({ resource, spec }) => ({
    resource,
    spec,
    selector: selectorText(spec.selector),
    workloads: selectedWorkloads(spec, workloads),
  }));

  for (const entry of entries) {
    if (entry.workloads.size > 0) continue;
    findings.push({
      resource: entry.resource,
      kind: "selectorNotFound",
      field: "spec.selector",
      message: `Referenced selector not found: "${entry.selector}"`,
    });
  }

  for (const entry of entries) {
    const namespaces = new Set([...entry.workloads].map((index) => workloads[index]?.namespace ?? ""));
    findings.push(...credentialFindings(entry.resource, entry.spec, namespaces, credentials));
  }

  const sameWorkload = (a: Entry, b: Entry) =>
    a.selector === b.selector || [...a.workloads].some((index) => b.workloads.has(index));
  for (const entry of entries) {
    entry.spec.servers.forEach((server, index) => {
      const port = server.port?.number;
      if (port === undefined) return;
      const hosts = server.hosts.map((host) => serverHost(host, entry.resource.namespace));
      const conflicting = new Set<string>();
      for (const other of entries) {
        if (other === entry || !sameWorkload(entry, other)) continue;
        const overlaps = other.spec.servers.some(
          (candidate) =>
            candidate.port?.number === port &&
            candidate.hosts.some((host) =>
              hosts.some((mine) => hostsOverlap(mine, serverHost(host, other.resource.namespace))),
            ),
        );
        if (overlaps) conflicting.add(`${other.resource.namespace}/${other.resource.name}`);
      }
      if (conflicting.size === 0) return;
      findings.push({
        resource: entry.resource,
        kind: "conflictingServers",
        field: `spec.servers[${index}]`,
        message:
          `Conflict with gateways ${[...conflicting].sort().join(",")} ` +
          `(workload selector ${entry.selector}, port ${port}, hosts ${server.hosts.join(",")}).`,
      });
    });
  }
  return findings;
}

// The modes whose proxy asks SDS for the credentialName's certificate (and,
// mutual ones, its CA); PASSTHROUGH and AUTO_PASSTHROUGH terminate no TLS and
// ISTIO_MUTUAL uses the workload's own certificate.
const TERMINATING_MODES = new Set([
  ServerTLSSettings_TLSmode.SIMPLE,
  ServerTLSSettings_TLSmode.MUTUAL,
  ServerTLSSettings_TLSmode.OPTIONAL_MUTUAL,
]);
const MUTUAL_MODES = new Set([ServerTLSSettings_TLSmode.MUTUAL, ServerTLSSettings_TLSmode.OPTIONAL_MUTUAL]);

/**
 * The credentialNames of a Gateway's TLS servers checked against the Secrets
 * that exist. Istio resolves a plain name in the namespace of the gateway
 * WORKLOAD (the router proxy asks for `kubernetes://<name>` in its own
 * namespace), not the Gateway resource's; `<namespace>/<name>` names its
 * own. Istio's analyzer takes the namespace of the first selected pod; where
 * the selector picks workloads in several namespaces, each must have it. A
 * Gateway that selects no workload was reported already and is skipped, as
 * Istio does.
 *
 * - IST0101, worded as Istio: no such Secret.
 * - SXT0003: the Secret exists but holds no certificate and key pair, or a
 *   mutual server finds no CA, neither in a `<name>-cacert` Secret nor in the
 *   Secret itself; the proxy would get no certificate and the listener would
 *   not come up. Istio has no analyzer for it (its gateway logs it).
 */
function credentialFindings(
  resource: ConfigResource,
  gateway: Gateway,
  workloadNamespaces: ReadonlySet<string>,
  credentials: CredentialIndex,
): GatewayFinding[] {
  const findings: GatewayFinding[] = [];
  gateway.servers.forEach((server, index) => {
    const tls: ServerTLSSettings | undefined = server.tls;
    if (!tls || !TERMINATING_MODES.has(tls.mode)) return;
    // credentialNames (an RSA and an ECDSA certificate) win over credentialName; clients are verified
    // against caCertCredentialName when set, else the first name's CA, as istiod builds the context.
    const named =
      tls.credentialNames.length > 0
        ? tls.credentialNames.map((name, i) => ({ name, field: `credentialNames[${i}]`, ca: i === 0 }))
        : [{ name: tls.credentialName, field: "credentialName", ca: true }];
    for (const { name, field, ca } of named) {
      const mutual = MUTUAL_MODES.has(tls.mode) && ca && !tls.caCertCredentialName;
      findings.push(...credentialFinding(resource, name, `spec.servers[${index}].tls.${field}`, mutual));
    }
  });
  return findings;

  function credentialFinding(
    resource: ConfigResource,
    credentialName: string,
    field: string,
    mutual: boolean,
  ): GatewayFinding[] {
    const resourceName = credentialResourceName(credentialName);
    if (!resourceName) return [];
    const findings: GatewayFinding[] = [];
    const secrets = [...workloadNamespaces]
      .sort()
      .map((namespace) => parseSecretResourceName(resourceName, namespace))
      .filter((ref): ref is SecretRef => ref !== undefined);
    const missing = secrets.filter((ref) => !credentials.has(credentialKey(ref)));
    if (missing.length > 0) {
      findings.push({
        resource,
        kind: "credentialNotFound",
        field,
        message: `Referenced credentialName not found: "${credentialName}"`,
      });
      return findings;
    }
    for (const ref of new Map(secrets.map((secret) => [credentialKey(secret), secret])).values()) {
      const problem = incompleteCredential(ref, mutual, credentials);
      if (problem) findings.push({ resource, kind: "credentialIncomplete", field, message: problem });
    }
    return findings;
  }
}

/** Why a Secret that exists cannot serve a server, or undefined if it can. */
function incompleteCredential(
  ref: SecretRef,
  mutual: boolean,
  credentials: CredentialIndex,
): string | undefined {
  const secret = credentials.get(credentialKey(ref));
  const companion = { namespace: ref.namespace, name: `${ref.name}${CA_CERT_SUFFIX}` };
  if (!secret?.hasCertificate) {
    return `Secret "${ref.namespace}/${ref.name}" holds no certificate and private key (tls.crt and tls.key, or cert and key)`;
  }
  if (mutual && !secret.hasCaCertificate && !credentials.get(credentialKey(companion))?.hasCaCertificate) {
    return (
      `Secret "${ref.namespace}/${ref.name}" has no CA certificate to verify clients (ca.crt or cacert), ` +
      `and no Secret "${companion.namespace}/${companion.name}" holds one`
    );
  }
  return undefined;
}
