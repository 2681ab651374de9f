import {
  type Gateway,
  type ServerTLSSettings,
  ServerTLSSettings_TLSmode,
} from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import { at, type Issues } from "../issues.js";
import { checkLabels, checkPort, hostProblem, isDns1123Label, isKnownProtocol } from "./common.js";
import type { RuleContext } from "./context.js";
import { checkServerCertificateLists } from "./new-fields.js";

const TLS_PROTOCOLS = new Set(["HTTPS", "TLS"]);

/** Istio's Gateway rules. */
export function validateGateway(gw: Gateway, ctx: RuleContext): void {
  const { issues, path } = ctx;
  if (gw.servers.length === 0) issues.error(`${path}.servers`, "a gateway needs at least one server");
  checkLabels(issues, `${path}.selector`, gw.selector);
  const names = new Set<string>();
  gw.servers.forEach((server, i) => {
    const p = at(`${path}.servers`, i);
    if (server.name) {
      if (names.has(server.name)) issues.error(`${p}.name`, `duplicate server name "${server.name}"`);
      names.add(server.name);
    }
    if (server.hosts.length === 0) issues.error(`${p}.hosts`, "a server needs at least one host");
    server.hosts.forEach((host, j) => {
      const problem = namespacedHostProblem(host, false);
      if (problem) issues.error(at(`${p}.hosts`, j), problem);
    });
    const port = server.port;
    if (!port) {
      issues.error(`${p}.port`, "port is required");
    } else {
      if (port.number !== 0 || !server.bind.startsWith("unix://"))
        checkPort(issues, `${p}.port.number`, port.number);
      if (!isKnownProtocol(port.protocol)) {
        issues.error(
          `${p}.port.protocol`,
          `unsupported protocol "${port.protocol}" (use HTTP, HTTPS, HTTP2, GRPC, TCP, TLS, ...)`,
        );
      }
      if (!port.name) issues.error(`${p}.port.name`, "port name is required");
      const protocol = port.protocol.toUpperCase();
      if (TLS_PROTOCOLS.has(protocol) && !server.tls) {
        issues.error(`${p}.tls`, `a ${protocol} server needs tls settings`);
      }
      if (server.tls && !TLS_PROTOCOLS.has(protocol) && !server.tls.httpsRedirect) {
        issues.error(
          `${p}.tls`,
          `tls settings are not allowed on a plain ${protocol} port (except httpsRedirect)`,
        );
      }
    }
    if (server.tls) checkServerTls(issues, `${p}.tls`, server.tls);
  });
}

/**
 * Why a `[namespace/]host` entry (Gateway servers, Sidecar egress) is
 * invalid. The namespace may be `*`, `.` (and `~` where `allowNone`), or a
 * namespace name; the host may be `*` or a (wildcard) DNS name.
 */
export function namespacedHostProblem(
  entry: string,
  requireNamespace: boolean,
  allowNone = false,
): string | undefined {
  const parts = entry.split("/");
  if (parts.length > 2) return `"${entry}" must be "host" or "namespace/host"`;
  if (parts.length === 1 && requireNamespace) return `"${entry}" must be of the form "namespace/host"`;
  const [ns, host] = parts.length === 2 ? [parts[0] ?? "", parts[1] ?? ""] : [undefined, parts[0] ?? ""];
  if (ns !== undefined && ns !== "*" && ns !== "." && !(allowNone && ns === "~") && !isDns1123Label(ns)) {
    return `"${entry}" has an invalid namespace "${ns}"`;
  }
  if (host === "*") return undefined;
  return hostProblem(host);
}

/** Istio's rules for server-side TLS (Gateway servers, Sidecar ingress). */
export function checkServerTls(issues: Issues, p: string, tls: ServerTLSSettings): void {
  const M = ServerTLSSettings_TLSmode;
  const hasFiles = tls.serverCertificate !== "" || tls.privateKey !== "" || tls.caCertificates !== "";
  if (checkServerCertificateLists(issues, p, tls)) {
    // credentialNames or tlsCertificates: checked there.
  } else if (tls.mode === M.ISTIO_MUTUAL) {
    if (hasFiles || tls.credentialName !== "") {
      issues.error(
        p,
        "ISTIO_MUTUAL uses Istio's certificates: do not set credentialName or certificate files",
      );
    }
  } else if (tls.mode === M.SIMPLE || tls.mode === M.MUTUAL || tls.mode === M.OPTIONAL_MUTUAL) {
    if (tls.credentialName !== "") {
      if (hasFiles)
        issues.error(`${p}.credentialName`, "credentialName cannot be combined with certificate files");
    } else {
      const mode = M[tls.mode];
      if (!tls.serverCertificate) {
        issues.error(`${p}.serverCertificate`, `${mode} needs credentialName or serverCertificate`);
      }
      if (!tls.privateKey) issues.error(`${p}.privateKey`, `${mode} needs credentialName or privateKey`);
      if (tls.mode !== M.SIMPLE && !tls.caCertificates) {
        issues.error(
          `${p}.caCertificates`,
          `${mode} needs credentialName or caCertificates to verify clients`,
        );
      }
    }
  }
  if (tls.maxProtocolVersion !== 0 && tls.minProtocolVersion > tls.maxProtocolVersion) {
    issues.error(`${p}.minProtocolVersion`, "minProtocolVersion must not be above maxProtocolVersion");
  }
}
