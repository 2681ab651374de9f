import {
  type Gateway,
  type ServerTLSSettings,
  ServerTLSSettings_TLSmode,
  ServerTLSSettings_TLSProtocol,
} from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import { at, type Issues } from "../issues.js";
import {
  checkPort,
  hostProblem,
  isHttpProtocol,
  isIpAddress,
  isIstioDnsLabel,
  isKnownProtocol,
  isTlsProtocol,
  UNIX_PREFIX,
  unixAddressProblem,
} from "./common.js";
import type { RuleContext } from "./context.js";
import { checkServerCertificateLists } from "./new-fields.js";

/** Istio's Gateway rules. */
export function validateGateway(gw: Gateway, ctx: RuleContext): void {
  const { issues, path } = ctx;
  // Istio does not check a Gateway's selector: any labels go.
  if (gw.servers.length === 0) issues.error(`${path}.servers`, "a gateway needs at least one server");
  const names = new Set<string>();
  const portNames = new Set<string>();
  gw.servers.forEach((server, i) => {
    const p = at(`${path}.servers`, i);
    if (server.name) {
      if (names.has(server.name)) issues.error(`${p}.name`, `duplicate server name "${server.name}"`);
      names.add(server.name);
    }
    // Port names identify a server's port across the Gateway (Istio's
    // "port names in servers must be unique").
    if (server.port?.name) {
      if (portNames.has(server.port.name))
        issues.error(
          `${p}.port.name`,
          `duplicate port name "${server.port.name}": port names must be unique`,
        );
      portNames.add(server.port.name);
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
      if (port.number !== 0 || !server.bind.startsWith(UNIX_PREFIX))
        checkPort(issues, `${p}.port.number`, port.number);
      if (port.targetPort > 0) issues.error(`${p}.port.targetPort`, "targetPort has no effect on a Gateway");
      if (!isKnownProtocol(port.protocol)) {
        issues.error(
          `${p}.port.protocol`,
          `unsupported protocol "${port.protocol}" (use HTTP, HTTPS, HTTP2, GRPC, TCP, TLS, ...)`,
        );
      }
      if (!port.name) issues.error(`${p}.port.name`, "port name is required");
      if (isKnownProtocol(port.protocol)) checkServerTlsPlacement(issues, p, port.protocol, server.tls);
    }
    if (server.bind.startsWith(UNIX_PREFIX)) {
      const problem = unixAddressProblem(server.bind);
      if (problem) issues.error(`${p}.bind`, problem);
      if (port && port.number !== 0) issues.error(`${p}.port.number`, "a unix:// bind needs port number 0");
    } else if (server.bind && !isIpAddress(server.bind)) {
      issues.error(`${p}.bind`, `bind "${server.bind}" must be an IP address or a unix:// socket`);
    }
    if (server.tls) checkServerTls(issues, `${p}.tls`, server.tls);
  });
}

/**
 * Where a server may carry `tls`, as Istio: HTTPS and TLS ports need it; an
 * HTTP port may carry only a passthrough block without certificates (the
 * shape of `httpsRedirect: true`); other plain ports none. `httpsRedirect`
 * off an HTTP port is a warning.
 */
function checkServerTlsPlacement(
  issues: Issues,
  p: string,
  protocol: string,
  tls: ServerTLSSettings | undefined,
): void {
  if (tls?.httpsRedirect && !isHttpProtocol(protocol)) {
    issues.warn(`${p}.tls.httpsRedirect`, "httpsRedirect should only be used on HTTP servers");
  }
  if (isTlsProtocol(protocol)) {
    if (!tls) issues.error(`${p}.tls`, `a ${protocol.toUpperCase()} server needs tls settings`);
    return;
  }
  if (!tls) return;
  if (!isHttpProtocol(protocol)) {
    issues.error(`${p}.tls`, `tls settings are not allowed on a plain ${protocol.toUpperCase()} port`);
    return;
  }
  const M = ServerTLSSettings_TLSmode;
  const passthrough = tls.mode === M.PASSTHROUGH || tls.mode === M.AUTO_PASSTHROUGH;
  if (!passthrough || tls.caCertificates || tls.privateKey || tls.serverCertificate) {
    issues.error(`${p}.tls`, "an HTTP server takes no TLS termination settings (only httpsRedirect)");
  }
}

/**
 * Why a `[namespace/]host` entry of a Gateway server or a Sidecar egress
 * listener is invalid, as Istio's ValidateNamespaceSlashWildcardHostname:
 * the namespace is `*`, `.`, (`~` where `allowNone`) or a namespace name;
 * the host is `*` or a dotted (wildcard) DNS name, never a short name nor a
 * partial wildcard like `*foo.com`; a Gateway's host may also be an IP.
 */
export function namespacedHostProblem(
  entry: string,
  requireNamespace: boolean,
  allowNone = false,
): string | undefined {
  const slash = entry.indexOf("/");
  if (slash < 0 && requireNamespace) return `"${entry}" must be of the form "namespace/host"`;
  const [ns, host] = slash < 0 ? [undefined, entry] : [entry.slice(0, slash), entry.slice(slash + 1)];
  if (ns === "" || host === "") return `"${entry}": neither the namespace nor the host may be empty`;
  if (ns !== undefined && ns !== "*" && ns !== "." && !(allowNone && ns === "~") && !isIstioDnsLabel(ns)) {
    return `"${entry}" has an invalid namespace "${ns}"`;
  }
  if (host === "*") return undefined;
  const gatewayIp = !requireNamespace && isIpAddress(host);
  if (!host.includes(".") && !gatewayIp)
    return `"${entry}": short host names are not allowed here, use the FQDN`;
  const problem = hostProblem(host);
  if (problem && !gatewayIp) return problem;
  if (host.includes("*") && !host.startsWith("*."))
    return `"${entry}": partial wildcard "${host}" is not allowed`;
  return undefined;
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
  } else if (tls.mode === M.PASSTHROUGH || tls.mode === M.AUTO_PASSTHROUGH) {
    if (hasFiles || tls.credentialName !== "" || tls.caCrl !== "") {
      issues.warn(p, `${M[tls.mode]} does not terminate TLS: its certificates are ignored`);
    }
  } else if (tls.mode === M.SIMPLE || tls.mode === M.MUTUAL || tls.mode === M.OPTIONAL_MUTUAL) {
    if (tls.credentialName !== "") {
      // Istio counts certificate sources: a credential and a full
      // certificate/key pair conflict; a CA bundle beside a credential is
      // ignored, not refused.
      if (tls.serverCertificate !== "" && tls.privateKey !== "")
        issues.error(
          `${p}.credentialName`,
          "only one of credentialName and serverCertificate/privateKey may be set",
        );
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
  if (tls.caCrl !== "" && tls.mode !== M.ISTIO_MUTUAL) {
    if (tls.credentialName !== "")
      issues.error(`${p}.caCrl`, "caCrl is not supported with credentialName: put the CRL in the credential");
    if (tls.mode === M.SIMPLE) issues.error(`${p}.caCrl`, "caCrl is not supported with SIMPLE TLS");
  }
  if (tls.maxProtocolVersion !== 0 && tls.minProtocolVersion > tls.maxProtocolVersion) {
    issues.error(`${p}.minProtocolVersion`, "minProtocolVersion must not be above maxProtocolVersion");
  }
  if (tls.mode === M.ISTIO_MUTUAL) return;
  const P = ServerTLSSettings_TLSProtocol;
  if (
    (tls.minProtocolVersion === P.TLSV1_0 || tls.minProtocolVersion === P.TLSV1_1) &&
    tls.cipherSuites.length === 0
  ) {
    issues.warn(
      `${p}.cipherSuites`,
      "TLS versions below 1.2 need cipherSuites set: the default ciphers do not include ones they can use",
    );
  }
  checkCipherSuites(issues, `${p}.cipherSuites`, tls.cipherSuites);
}

/** The cipher suites Istio accepts by name (BoringSSL's, without PSK). */
const CIPHER_SUITES = new Set([
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
  "ECDHE-ECDSA-CHACHA20-POLY1305",
  "ECDHE-RSA-CHACHA20-POLY1305",
  "ECDHE-ECDSA-AES128-SHA",
  "ECDHE-RSA-AES128-SHA",
  "ECDHE-ECDSA-AES256-SHA",
  "ECDHE-RSA-AES256-SHA",
  "AES128-GCM-SHA256",
  "AES256-GCM-SHA384",
  "AES128-SHA",
  "AES256-SHA",
  "DES-CBC3-SHA",
]);

/**
 * Unknown and repeated cipher suites are warnings, as in Istio, which drops
 * them. Entries starting with an operator (`-`, `+`, `!`, `[`) or `ALL` pass.
 */
function checkCipherSuites(issues: Issues, path: string, suites: string[]): void {
  const seen = new Set<string>();
  const invalid: string[] = [];
  const repeated: string[] = [];
  for (const suite of suites) {
    const valid =
      suite === "" || suite === "ALL" || !/^[\p{L}\p{N}]/u.test(suite) || CIPHER_SUITES.has(suite);
    if (!valid) invalid.push(suite);
    else if (seen.has(suite)) repeated.push(suite);
    else seen.add(suite);
  }
  if (invalid.length > 0)
    issues.warn(path, `ignoring invalid cipher suites: ${[...new Set(invalid)].sort().join(", ")}`);
  if (repeated.length > 0)
    issues.warn(path, `ignoring duplicate cipher suites: ${[...new Set(repeated)].sort().join(", ")}`);
}
