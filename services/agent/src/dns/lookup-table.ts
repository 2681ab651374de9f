import { isIPv4, isIPv6 } from "node:net";
import type { NameTable } from "@sextant/proto/gen/istio/networking/nds/v1/nds";
import type { StringAnswer } from "dns-packet";

/** Istio's TTL for every answer from the table: low, so that a client that caches sees a new address soon. */
export const TABLE_TTL_SECONDS = 30;

/** The registry name push gives Kubernetes services (Istio's provider.Kubernetes). */
const KUBERNETES_REGISTRY = "Kubernetes";

/** What the proxy knows of itself, to expand short names as Istio does. */
export interface LookupContext {
  /** The proxy's namespace: a service's bare name resolves only in it. */
  namespace: string;
  /** DOMAIN_SUFFIX (cluster.local): Kubernetes hosts are `<name>.<ns>.svc.<suffix>`. */
  domainSuffix: string;
  /** The search list of the pod's resolv.conf; only the first entry is used. */
  search: readonly string[];
}

/** The answer for a name the table knows (possibly with no record of the asked family). */
export interface TableAnswer {
  answers: StringAnswer[];
}

/** DNS names compare without case and without the final dot; dns-packet decodes them without it. */
export function canonicalName(name: string): string {
  return name.toLowerCase().replace(/\.$/, "");
}

/**
 * The names a host answers to. A Kubernetes host of the proxy's own domain
 * also answers to `<name>.<ns>`, `<name>.<ns>.svc` and, in the proxy's own
 * namespace, to `<name>`: the forms a client's search list (or a bare
 * `nslookup`) produces. Other hosts (ServiceEntry) answer only to themselves.
 */
function namesOf(host: string, info: NameTable["table"][string], context: LookupContext): Set<string> {
  const fqdn = canonicalName(host);
  const names = new Set([fqdn]);
  // Another cluster's domain: its short names would clash with this cluster's.
  if (info.registry !== KUBERNETES_REGISTRY || !fqdn.endsWith(`.svc.${canonicalName(context.domainSuffix)}`))
    return names;
  const short = canonicalName(info.shortname);
  const namespace = canonicalName(info.namespace);
  names.add(`${short}.${namespace}`);
  names.add(`${short}.${namespace}.svc`);
  if (namespace === canonicalName(context.namespace)) names.add(short);
  for (const alt of info.altHosts) names.add(canonicalName(alt));
  return names;
}

/**
 * The agent's view of a NameTable, precomputed for queries (as Istio's agent
 * does): the address records of every name, and a CNAME for each name with
 * the first search domain appended. A client resolving `api.example.com`
 * with `ndots:5` first asks `api.example.com.<ns>.svc.cluster.local`; the
 * CNAME answers that at once instead of forwarding it upstream to an
 * NXDOMAIN and waiting for the next search domain.
 */
export class LookupTable {
  /** Every name the table answers for: a query for one of them is never forwarded. */
  readonly #names = new Set<string>();
  readonly #v4 = new Map<string, string[]>();
  readonly #v6 = new Map<string, string[]>();
  /** Search-expanded name → the name it stands for. */
  readonly #cname = new Map<string, string>();
  /** The table as push sent it, with each host's other names: what `/debug/ndsz` shows. */
  readonly debugView: NameTable;

  constructor(table: NameTable, context: LookupContext) {
    const debugTable: NameTable["table"] = {};
    const firstSearch = context.search[0] ? canonicalName(context.search[0]) : undefined;
    for (const [host, info] of Object.entries(table.table)) {
      const v4 = info.ips.filter((ip) => isIPv4(ip));
      const v6 = info.ips.filter((ip) => isIPv6(ip));
      // A host whose addresses are all malformed answers nothing: leave it to upstream.
      if (v4.length === 0 && v6.length === 0) continue;
      const names = namesOf(host, info, context);
      debugTable[host] = {
        ...info,
        altHosts: [...names].filter((name) => name !== canonicalName(host)).sort(),
      };
      for (const name of names) {
        this.#names.add(name);
        if (v4.length > 0) this.#v4.set(name, v4);
        if (v6.length > 0) this.#v6.set(name, v6);
        if (firstSearch === undefined) continue;
        const expanded = `${name}.${firstSearch}`;
        // reviews + default.svc.cluster.local is reviews' own FQDN, not an alias of it.
        if (names.has(expanded)) continue;
        this.#cname.set(expanded, name);
        this.#names.add(expanded);
      }
    }
    this.debugView = { table: debugTable, nameInfo: undefined };
  }

  /** The number of names answered (hosts, their short forms and their search-expanded aliases). */
  get size(): number {
    return this.#names.size;
  }

  /**
   * The answer for a question, or undefined when the table does not know the
   * name (or the type is not A/AAAA): the caller forwards it upstream. A
   * known name without an address of the asked family gets no records and
   * NOERROR, never NXDOMAIN: a client asking A and AAAA in parallel would
   * take an NXDOMAIN for the whole name (istio/istio#31250).
   */
  lookup(type: string, questionName: string): TableAnswer | undefined {
    if (type !== "A" && type !== "AAAA") return undefined;
    const question = canonicalName(questionName);
    let name = question;
    let wildcard = false;
    if (!this.#names.has(name)) {
      const match = this.#wildcardFor(name);
      if (match === undefined) return undefined;
      name = match;
      wildcard = true;
    }
    const chain: StringAnswer[] = [];
    const target = this.#cname.get(name);
    if (target !== undefined) {
      chain.push({ type: "CNAME", name: question, ttl: TABLE_TTL_SECONDS, class: "IN", data: target });
      name = target;
    }
    const ips = (type === "A" ? this.#v4 : this.#v6).get(name) ?? [];
    if (ips.length === 0) return { answers: [] };
    // A wildcard's records carry the name asked, unless a CNAME already names the target.
    const owner = wildcard && target === undefined ? question : name;
    const records = shuffled(ips).map(
      (ip): StringAnswer => ({ type, name: owner, ttl: TABLE_TTL_SECONDS, class: "IN", data: ip }),
    );
    return { answers: [...chain, ...records] };
  }

  /** The closest `*.<parent>` entry the table has for a name. */
  #wildcardFor(name: string): string | undefined {
    const labels = name.split(".");
    for (let i = 1; i < labels.length; i++) {
      const candidate = `*.${labels.slice(i).join(".")}`;
      if (this.#names.has(candidate)) return candidate;
    }
    return undefined;
  }
}

/**
 * The addresses in random order, as Istio and kube-dns answer, so that the
 * clients that take the first address spread over a headless service's pods.
 */
function shuffled(ips: readonly string[]): string[] {
  const out = [...ips];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
