import { CA_CERT_SUFFIX, credentialResourceName, parseSecretResourceName } from "@sextant/model";

// Stands for "the namespace of whichever proxy asks" while parsing a reference.
const PROXY_NAMESPACE = "*";

/**
 * The Secrets that config names by `credentialName`. A plain name
 * (`kubernetes://<name>`) is read by istiod from the namespace of the proxy
 * that asks, which config does not say (a Gateway in `default` commonly
 * selects a gateway running in `istio-system`), so it covers the Secret of
 * that name in every namespace; `<namespace>/<name>` covers one. Each covers
 * its `<name>-cacert` companion too, where istiod looks for a CA bundle first.
 * Push, not this set, decides which proxy may have which Secret.
 */
export class CredentialReferences {
  readonly #anyNamespace = new Set<string>();
  readonly #qualified = new Set<string>();

  constructor(credentialNames: Iterable<string>) {
    for (const credentialName of credentialNames) {
      const resourceName = credentialResourceName(credentialName);
      const ref = resourceName && parseSecretResourceName(resourceName, PROXY_NAMESPACE);
      if (!ref) continue;
      if (ref.namespace === PROXY_NAMESPACE) this.#anyNamespace.add(ref.name);
      else this.#qualified.add(`${ref.namespace}/${ref.name}`);
    }
  }

  /** The number of distinct references (for logs). */
  get size(): number {
    return this.#anyNamespace.size + this.#qualified.size;
  }

  /** True if the Secret namespace/name is named, directly or as a credential's `-cacert` companion. */
  covers(namespace: string, name: string): boolean {
    const named = (n: string) => this.#anyNamespace.has(n) || this.#qualified.has(`${namespace}/${n}`);
    return named(name) || (name.endsWith(CA_CERT_SUFFIX) && named(name.slice(0, -CA_CERT_SUFFIX.length)));
  }
}
