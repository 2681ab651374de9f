import {
  CA_CERT_SUFFIX,
  credentialResourceName,
  destinationRuleCredentialNames,
  gatewayCredentialNames,
  parseSecretResourceName,
  type SecretRef,
} from "@sextant/model";
import { Counter } from "@sextant/observability";
import { type ConfigRef, packAny } from "@sextant/proto";
import { Secret, TypeUrl } from "@sextant/proto/envoy";
import { DataSource } from "@sextant/proto/gen/envoy/config/core/v3/base";
import type { DestinationRule } from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import { gatewayAppliesTo, madeFromGatewayApi } from "../../model/gateway.js";
import type { MeshProxy } from "../../model/proxy.js";
import { type PushContext, visible } from "../../model/push-context.js";
import { selectorMatches } from "../../model/security.js";
import type { GeneratedResource, PushChange, TypedConfig, WatchedNames } from "../../model/types.js";
import type { GenerationContext } from "../generator.js";

/**
 * SDS requests refused or unanswerable: a name that is no Kubernetes Secret,
 * a Secret the proxy may not have, or one not published (missing, or without
 * the expected keys). istiod's metric of the same name counts the same.
 * main.ts registers it with the service's registry.
 */
export const sdsCertificateErrors = new Counter({
  name: "pilot_sds_certificate_errors_total",
  help: "SDS resources refused or not served: an unknown name, another namespace's or an unreferenced Secret, or a Secret without TLS material.",
  registers: [],
});

/**
 * Secret's codec for /debug/config_dump, with the private key replaced by
 * `[redacted]` as Envoy's own config dump shows sensitive fields: the dump
 * is for reading config, and must not be a way around who may read keys.
 */
export const REDACTED_SECRET_CODEC = {
  decode: (bytes: Uint8Array) => Secret.decode(bytes),
  toJSON: (secret: Secret): unknown =>
    Secret.toJSON(
      secret.tlsCertificate?.privateKey
        ? {
            ...secret,
            tlsCertificate: {
              ...secret.tlsCertificate,
              privateKey: DataSource.fromPartial({ inlineString: "[redacted]" }),
            },
          }
        : secret,
    ),
};

const withoutCaSuffix = (name: string) =>
  name.endsWith(CA_CERT_SUFFIX) ? name.slice(0, -CA_CERT_SUFFIX.length) : name;

/**
 * True if a change can affect the watched secrets: any full push, or a
 * changed Secret of a watched name; `<name>` and `<name>-cacert` go together
 * (istiod's relatedConfigs), as either may hold the CA bundle. Namespaces
 * are left to generation: a name matches whatever namespace changed.
 */
export function secretsNeedPush(change: PushChange, watched: WatchedNames): boolean {
  if (change.full) return true;
  if (!change.secrets || change.secrets.size === 0 || watched === "*") return false;
  const changed = new Set(
    [...change.secrets].map((secret) => withoutCaSuffix(secret.slice(secret.indexOf("/") + 1))),
  );
  for (const resourceName of watched) {
    const ref = parseSecretResourceName(resourceName, "-");
    if (ref && changed.has(withoutCaSuffix(ref.name))) return true;
  }
  return false;
}

/**
 * The SDS secrets a proxy asked for, by name (never a wildcard), as istiod's
 * SecretGen serves `kubernetes://` resources: `kubernetes://<name>` (or
 * `<namespace>/<name>`) is the Secret's certificate chain and key,
 * `kubernetes://<name>-cacert` its CA bundle (from the Secret `<name>-cacert`
 * if it exists, else from `<name>`'s own). A proxy gets only Secrets of its
 * own namespace, and, but for CA bundles (public, as istiod allows them),
 * only Secrets that config applying to it names: a Gateway selecting the
 * router, or a DestinationRule that can set its client TLS (one of its
 * namespace selecting it, or one without workloadSelector exported to its
 * namespace). istiod would also accept a proxy whose service account may
 * list Secrets (a SubjectAccessReview); push has no Kubernetes access, so
 * that path is not built. Anything else is left out, logged and counted,
 * never an error: one bad reference does not break the others.
 */
export function generateSecrets(context: GenerationContext, watched: WatchedNames): GeneratedResource[] {
  if (watched === "*") return [];
  const { push, proxy } = context;
  const resources: GeneratedResource[] = [];
  const refused: string[] = [];
  for (const resourceName of [...watched].sort()) {
    const ref = parseSecretResourceName(resourceName, proxy.namespace);
    const sources = ref ? authorizingConfig(push, proxy, ref) : undefined;
    if (!ref || !sources) {
      refused.push(resourceName);
      continue;
    }
    const resource = buildSecret(push, resourceName, ref, sources);
    if (resource) resources.push(resource);
    else {
      sdsCertificateErrors.inc();
      context.logger?.warn(
        { proxy: proxy.id, resource: resourceName },
        "no TLS material for an SDS resource: the Secret is missing or lacks the expected keys",
      );
    }
  }
  if (refused.length > 0) {
    sdsCertificateErrors.inc(refused.length);
    context.logger?.warn(
      { proxy: proxy.id, namespace: proxy.namespace, resources: refused },
      "proxy asked for Secrets it may not have: another namespace's, or none that config applying to it names",
    );
  }
  return resources;
}

/**
 * The config that entitles the proxy to the Secret ref: its refs, or
 * undefined if none does. A CA bundle of its namespace needs none ([] :
 * allowed). Another namespace's Secret only a Gateway made from a Gateway
 * API Gateway can name (the conversion wrote it only if a ReferenceGrant
 * allows it, as istiod's kubernetes-gateway credentials).
 */
function authorizingConfig(push: PushContext, proxy: MeshProxy, ref: SecretRef): ConfigRef[] | undefined {
  const crossNamespace = ref.namespace !== proxy.namespace;
  if (ref.name.endsWith(CA_CERT_SUFFIX)) return crossNamespace ? undefined : [];
  const names = (credentialNames: string[]) =>
    credentialNames.some((credentialName) => {
      const resourceName = credentialResourceName(credentialName);
      const named = resourceName && parseSecretResourceName(resourceName, proxy.namespace);
      return named && named.namespace === ref.namespace && named.name === ref.name;
    });
  const sources: ConfigRef[] = [];
  if (proxy.kind === "router") {
    for (const gateway of push.gateways)
      if (
        (!crossNamespace || madeFromGatewayApi(gateway)) &&
        gatewayAppliesTo(push, gateway, proxy) &&
        names(gatewayCredentialNames(gateway.spec))
      )
        sources.push(gateway.ref);
  }
  if (crossNamespace) return sources.length > 0 ? sources : undefined;
  for (const rule of push.destinationRules) {
    if (ruleAppliesTo(rule, proxy) && names(destinationRuleCredentialNames(rule.spec)))
      sources.push(rule.ref);
  }
  return sources.length > 0 ? sources : undefined;
}

/**
 * True if a DestinationRule can set the proxy's client TLS: one with a
 * workloadSelector only in its own namespace and for the workloads it
 * selects; one without, wherever it is exported to (an egress gateway's
 * TLS origination is often a rule of the application's namespace).
 */
function ruleAppliesTo(rule: TypedConfig<DestinationRule>, proxy: MeshProxy): boolean {
  const selector = rule.spec.workloadSelector;
  if (selector)
    return rule.ref.namespace === proxy.namespace && selectorMatches(selector.matchLabels, proxy.labels);
  return visible(rule.spec.exportTo, rule.ref.namespace, proxy.namespace);
}

/** The Envoy Secret for resourceName from the published credentials; null if they hold no such material. */
function buildSecret(
  push: PushContext,
  resourceName: string,
  ref: SecretRef,
  sources: ConfigRef[],
): GeneratedResource | null {
  let secret: Secret;
  if (ref.name.endsWith(CA_CERT_SUFFIX)) {
    // istiod reads the `-cacert` Secret if it exists (even without a bundle), else the credential's own.
    const own = push.credential(ref) ?? push.credential({ ...ref, name: withoutCaSuffix(ref.name) });
    if (!own || own.caCertificate.length === 0) return null;
    secret = Secret.fromPartial({
      name: resourceName,
      validationContext: { trustedCa: { inlineBytes: own.caCertificate } },
    });
  } else {
    const own = push.credential(ref);
    if (!own || own.certificateChain.length === 0 || own.privateKey.length === 0) return null;
    secret = Secret.fromPartial({
      name: resourceName,
      tlsCertificate: {
        certificateChain: { inlineBytes: own.certificateChain },
        privateKey: { inlineBytes: own.privateKey },
      },
    });
  }
  return { name: resourceName, resource: packAny(TypeUrl.Secret, Secret, secret), sources };
}
