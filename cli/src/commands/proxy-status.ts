import type { Command } from "commander";
import { createTwoFilesPatch } from "diff";
import { stringify } from "yaml";
import { type Connection, type ConnectionFlags, resolveConnection } from "../connection.js";
import { action, exitOnUsageError } from "../ingest-client.js";
import { outputOption } from "../printing.js";
import { plainTable } from "../proxy/plain-table.js";
import {
  findProxy,
  getPushJson,
  listProxyStatuses,
  type ProxyStatusJson,
  proxyName,
  replicaAddress,
  type TypeSyncJson,
} from "../proxy/push-debug.js";
import { OPTIONAL_COLUMNS, typeTitle, XDS_COLUMNS } from "../proxy/xds-types.js";

/** A type's sync state, as istioctl names them (NACKED is Sextant's: the proxy rejected the last response). */
export type SyncState = "SYNCED" | "NOT SENT" | "STALE" | "NACKED";

/**
 * The sync state of one type of a proxy: NOT SENT before any response,
 * NACKED if the proxy rejected the latest one, SYNCED once it ACKed it,
 * STALE while it has not answered it; every type is STALE when the replica
 * stopped rewriting the record (it is gone or cut off from NATS).
 */
export function syncState(type: TypeSyncJson | undefined, recordStale: boolean): SyncState {
  if (recordStale) return "STALE";
  if (!type?.versionSent) return "NOT SENT";
  if (type.lastNack && type.lastNack.nonce === type.nonceSent) return "NACKED";
  return type.versionAcked === type.versionSent ? "SYNCED" : "STALE";
}

/** True once the record outlived its staleAfter without a heartbeat from its replica. */
export function isStale(status: ProxyStatusJson, now: number): boolean {
  return status.staleAfter !== undefined && Date.parse(status.staleAfter) < now;
}

/** istioctl proxy-status' table: one row per proxy, NDS and SDS only when a proxy subscribes to them. */
export function statusTable(statuses: readonly ProxyStatusJson[], now: number): string {
  const columns = XDS_COLUMNS.filter(
    (type) => !OPTIONAL_COLUMNS.has(type.column) || statuses.some((status) => status.types?.[type.typeUrl]),
  );
  const rows = [...statuses]
    .sort((a, b) => proxyName(a.proxyId).localeCompare(proxyName(b.proxyId)))
    .map((status) => {
      const stale = isStale(status, now);
      return [
        proxyName(status.proxyId),
        status.clusterId ?? "",
        ...columns.map((type) => syncState(status.types?.[type.typeUrl], stale)),
        status.replica,
        status.istioVersion ?? "",
      ];
    });
  return plainTable(["NAME", "CLUSTER", ...columns.map((type) => type.column), "REPLICA", "VERSION"], rows);
}

/** One type of push's /debug/proxy_diff: what it would send now, what the proxy held at its last ACK. */
interface TypeDiffJson {
  typeUrl: string;
  versionSent: string;
  versionAcked: string;
  acked: Record<string, unknown>;
  current: Record<string, unknown>;
}

const sortedJson = (resources: Record<string, unknown>): string =>
  `${JSON.stringify(
    Object.keys(resources)
      .sort()
      .map((name) => resources[name]),
    null,
    2,
  )}\n`;

/**
 * istioctl proxy-status <proxy>: per type, "<Type> Match" or a unified diff
 * of JSON from what push would send now (---) to what the proxy ACKed last
 * (+++), after a line saying so when its latest response is not ACKed
 * (NACKED or STALE). Returns whether all match.
 */
export function proxyDiff(
  status: ProxyStatusJson,
  types: readonly TypeDiffJson[],
): { text: string; same: boolean } {
  const out: string[] = [];
  let same = true;
  const order = (typeUrl: string) => {
    const index = XDS_COLUMNS.findIndex((type) => type.typeUrl === typeUrl);
    return index < 0 ? XDS_COLUMNS.length : index;
  };
  for (const type of [...types].sort((a, b) => order(a.typeUrl) - order(b.typeUrl))) {
    const title = typeTitle(type.typeUrl);
    const state = syncState(status.types?.[type.typeUrl], false);
    const current = sortedJson(type.current);
    const acked = sortedJson(type.acked);
    if (state !== "SYNCED") {
      same = false;
      const nack = status.types?.[type.typeUrl]?.lastNack?.message;
      out.push(
        `${title} ${state}: version ${type.versionSent || "(none)"} sent, ${type.versionAcked || "none"} ACKed${
          state === "NACKED" && nack ? ` (NACK: ${nack})` : ""
        }`,
      );
    }
    if (current === acked) {
      if (state === "SYNCED") out.push(`${title} Match`);
      continue;
    }
    same = false;
    out.push(
      createTwoFilesPatch(`Push ${title}`, `Proxy ${title}`, current, acked, undefined, undefined, {
        context: 3,
      })
        .split("\n")
        .filter((line) => !line.startsWith("====="))
        .join("\n")
        .trimEnd(),
    );
  }
  return { text: out.join("\n"), same };
}

async function showDiff(connection: Connection, wanted: string): Promise<void> {
  const status = findProxy(await listProxyStatuses(connection), wanted);
  if (isStale(status, Date.now())) {
    console.log(
      `${proxyName(status.proxyId)}: STALE, replica ${status.replica} has not written its status since ${status.updatedAt}; it cannot be asked for a diff`,
    );
    process.exitCode = 1;
    return;
  }
  const diff = await getPushJson<{ types: TypeDiffJson[] }>(
    connection,
    replicaAddress(connection, status),
    `/debug/proxy_diff?proxyID=${encodeURIComponent(status.proxyId)}`,
  );
  const { text, same } = proxyDiff(status, diff.types);
  console.log(text);
  if (!same) process.exitCode = 1;
}

/**
 * `sextantctl proxy-status [PROXY]`: every connected proxy over all push
 * replicas and each type's sync state; with a proxy, the diff between what
 * push would send it now and what it holds.
 */
export function registerProxyStatus(program: Command): void {
  program
    .command("proxy-status")
    .alias("ps")
    .argument("[proxy]", "a node id or <pod>.<namespace>: show the diff of its config instead")
    .description(
      "the sync state of every connected proxy (SYNCED, NOT SENT, STALE, NACKED per xDS type), over all push replicas",
    )
    .addOption(outputOption())
    .addHelpText(
      "after",
      "\nExit codes: 0 done, 1 a type differs, is NACKED or STALE, or push unreachable/refused/no such proxy, 2 usage.",
    )
    .exitOverride(exitOnUsageError)
    .action(
      action(async (proxy: string | undefined, options: { output: "table" | "json" | "yaml" }) => {
        const connection = resolveConnection(program.opts<ConnectionFlags>());
        if (proxy) return showDiff(connection, proxy);
        const statuses = await listProxyStatuses(connection);
        if (options.output === "json") return console.log(JSON.stringify(statuses, null, 2));
        if (options.output === "yaml") return console.log(stringify(statuses).trimEnd());
        console.log(statusTable(statuses, Date.now()));
      }),
    );
}
