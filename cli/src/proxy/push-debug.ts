// What proxy-status and proxy-config share: push's debug API (the records of
// every proxy, the replica holding one) and proxy names.
import type { Connection } from "../connection.js";
import { CommandError } from "../ingest-client.js";

/** Per xDS type, the sync state push records for a proxy (sextant-proxy-status, JSON form). */
export interface TypeSyncJson {
  versionSent?: string;
  nonceSent?: string;
  versionAcked?: string;
  lastNack?: { version?: string; nonce?: string; message?: string; at?: string };
  resourceNames?: string[];
}

/** One proxy's record, as push's /debug/proxy_status lists it. */
export interface ProxyStatusJson {
  proxyId: string;
  replica: string;
  connectedAt?: string;
  types?: Record<string, TypeSyncJson>;
  updatedAt?: string;
  staleAfter?: string;
  replicaDebugAddress?: string;
  clusterId?: string;
  istioVersion?: string;
}

/** GETs a push debug path as JSON, with the connection's token; every failure says what to do. */
export async function getPushJson<T>(connection: Connection, base: string, path: string): Promise<T> {
  const url = `${base}${path}`;
  const headers: Record<string, string> = connection.token
    ? { authorization: `Bearer ${connection.token}` }
    : {};
  let response: Response;
  try {
    response = await fetch(url, { headers });
  } catch (error) {
    throw new CommandError(
      `cannot reach push at ${base} (${(error as Error).cause ?? (error as Error).message}): is push running? Set --push or SEXTANT_PUSH to its HTTP port`,
    );
  }
  if (response.status === 401 || response.status === 403)
    throw new CommandError(
      `push refused ${path.split("?")[0]} (${response.status}): give a token with the debug verb (--token, --token-file, SEXTANT_TOKEN)`,
    );
  if (!response.ok) {
    const body = await response.text();
    let error = body;
    try {
      error = (JSON.parse(body) as { error?: string }).error ?? body;
    } catch {}
    throw new CommandError(
      `push at ${base} answered ${path.split("?")[0]} with ${response.status}: ${error}`,
    );
  }
  return (await response.json()) as T;
}

/** Every connected proxy over all push replicas. */
export function listProxyStatuses(connection: Connection): Promise<ProxyStatusJson[]> {
  return getPushJson<ProxyStatusJson[]>(connection, connection.push, "/debug/proxy_status");
}

/** `pod.namespace` of a sidecar~ip~pod.namespace~domain node id, else the id itself. */
export function proxyName(proxyId: string): string {
  const parts = proxyId.split("~");
  return parts.length === 4 && parts[2] ? parts[2] : proxyId;
}

/**
 * The record of a proxy named by its node id or `pod.namespace`; fails with
 * the names known when there is none (or, for a short name, several).
 */
export function findProxy(statuses: readonly ProxyStatusJson[], wanted: string): ProxyStatusJson {
  const exact = statuses.find((status) => status.proxyId === wanted);
  if (exact) return exact;
  const byName = statuses.filter((status) => proxyName(status.proxyId) === wanted);
  if (byName.length === 1) return byName[0]!;
  if (byName.length > 1)
    throw new CommandError(
      `${wanted} names ${byName.length} proxies (${byName.map((s) => s.proxyId).join(", ")}): give the full node id`,
    );
  const known = statuses.map((status) => proxyName(status.proxyId)).join(", ") || "none";
  throw new CommandError(
    `no connected proxy ${wanted} (known: ${known}): give a node id or <pod>.<namespace> from sextantctl proxy-status`,
  );
}

/** The debug address of the replica holding a proxy's stream (the given push if the record has none). */
export function replicaAddress(connection: Connection, status: ProxyStatusJson): string {
  return (status.replicaDebugAddress || connection.push).replace(/\/$/, "");
}
