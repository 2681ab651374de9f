import { readFile } from "node:fs/promises";
import { isIP } from "node:net";

/** A DNS server to forward to. */
export interface Nameserver {
  host: string;
  port: number;
}

/** What the proxy takes from the pod's resolv.conf. */
export interface ResolvConf {
  /** The `nameserver` lines, in order: where names the table does not know go. */
  nameservers: Nameserver[];
  /** The `search` list (the last `search` or `domain` line wins, as in glibc). */
  search: string[];
}

const DNS_PORT = 53;

/** `<ip>`, `<ipv4>:<port>` or `[<ipv6>]:<port>` as a nameserver; undefined when it is not an address. */
function parseNameserver(value: string): Nameserver | undefined {
  const withPort = /^\[(.+)\]:(\d+)$/.exec(value) ?? /^([\d.]+):(\d+)$/.exec(value);
  const host = withPort ? withPort[1]! : value;
  const port = withPort ? Number(withPort[2]) : DNS_PORT;
  // An IPv6 address may carry a zone (fe80::1%eth0).
  if (isIP(host.replace(/%.*$/, "")) === 0 || port < 1 || port > 65_535) return undefined;
  return { host, port };
}

/**
 * Parses resolv.conf as glibc reads it: `nameserver <ip>` lines in order,
 * and `search`/`domain` lines, of which the last one counts; lines starting
 * with `#` or `;` are comments. A nameserver that is not an IP address is
 * skipped, as glibc does. A port may follow the address as systemd-resolved
 * writes it (`127.0.0.1:5353`, `[::1]:5353`): glibc has no port syntax, and
 * a test resolver cannot take port 53.
 */
export function parseResolvConf(text: string): ResolvConf {
  const nameservers: Nameserver[] = [];
  let search: string[] = [];
  for (const rawLine of text.split("\n")) {
    const line = rawLine.trim();
    if (line.startsWith("#") || line.startsWith(";")) continue;
    const [keyword, ...values] = line.split(/\s+/);
    if (keyword === "nameserver" && values[0]) {
      const nameserver = parseNameserver(values[0]);
      if (nameserver) nameservers.push(nameserver);
    } else if (keyword === "search" || keyword === "domain") {
      search = values;
    }
  }
  return { nameservers, search };
}

/** Reads and parses a resolv.conf file. */
export async function readResolvConf(path: string): Promise<ResolvConf> {
  return parseResolvConf(await readFile(path, "utf8"));
}
