import {
  type ServiceEntry,
  ServiceEntry_Resolution,
} from "@sextant/proto/gen/istio/networking/v1alpha3/service_entry";
import type { WorkloadEntry } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_entry";
import type { WorkloadGroup } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_group";
import { at, type Issues, key } from "../issues.js";
import {
  checkExportTo,
  checkLabels,
  checkPort,
  checkSelectorLabels,
  cidrProblem,
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

/** Istio's ServiceEntry rules. */
export function validateServiceEntry(se: ServiceEntry, ctx: RuleContext): void {
  const { issues, path } = ctx;
  const R = ServiceEntry_Resolution;
  if (se.hosts.length === 0) issues.error(`${path}.hosts`, "a ServiceEntry needs at least one host");
  se.hosts.forEach((host, i) => {
    const p = at(`${path}.hosts`, i);
    if (host === "*") issues.error(p, 'host "*" is not allowed in a ServiceEntry');
    else {
      const problem = hostProblem(host);
      if (problem) issues.error(p, problem);
      else if (host.includes("*") && !host.startsWith("*."))
        issues.warn(p, `partial wildcard "${host}" is not supported: use a "*." prefix`);
    }
  });

  let cidrFound = false;
  se.addresses.forEach((address, i) => {
    const problem = cidrProblem(address);
    if (problem) issues.error(at(`${path}.addresses`, i), problem);
    if (address.includes("/")) cidrFound = true;
  });
  if (cidrFound && se.resolution !== R.NONE && se.resolution !== R.STATIC) {
    issues.error(`${path}.addresses`, "CIDR addresses are only allowed with resolution NONE or STATIC");
  }

  const numbers = new Set<number>();
  const names = new Set<string>();
  se.ports.forEach((port, i) => {
    const p = at(`${path}.ports`, i);
    checkPort(issues, `${p}.number`, port.number);
    if (numbers.has(port.number)) issues.error(`${p}.number`, `port ${port.number} is defined twice`);
    numbers.add(port.number);
    if (!port.name) issues.error(`${p}.name`, "port name is required");
    else if (!isIstioDnsLabel(port.name))
      issues.error(`${p}.name`, `port name "${port.name}" must be a DNS-1123 label (either case)`);
    else if (names.has(port.name)) issues.error(`${p}.name`, `port name "${port.name}" is defined twice`);
    names.add(port.name);
    if (port.protocol && !isKnownProtocol(port.protocol)) {
      issues.error(`${p}.protocol`, `unsupported protocol "${port.protocol}"`);
    }
    if (port.targetPort !== 0) checkPort(issues, `${p}.targetPort`, port.targetPort);
  });

  if (se.workloadSelector) {
    if (se.endpoints.length > 0) {
      issues.error(`${path}.workloadSelector`, "workloadSelector and endpoints cannot both be set");
    }
    checkSelectorLabels(issues, `${path}.workloadSelector.labels`, se.workloadSelector.labels);
  }

  switch (se.resolution) {
    case R.NONE:
      if (se.endpoints.length > 0)
        issues.error(`${path}.endpoints`, "resolution NONE does not take endpoints");
      if (se.workloadSelector)
        issues.warn(`${path}.workloadSelector`, "workloadSelector should not be set with resolution NONE");
      break;
    case R.STATIC:
      // Istio requires neither endpoints nor a selector here: a STATIC
      // entry without them simply has no endpoints yet.
      se.endpoints.forEach((ep, i) => {
        checkWorkloadAddress(issues, at(`${path}.endpoints`, i), ep, {
          allowDnsName: false,
          servicePorts: names,
        });
      });
      break;
    case R.DNS:
    case R.DNS_ROUND_ROBIN:
      if (se.endpoints.length === 0) {
        const i = se.hosts.findIndex((host) => host.includes("*"));
        if (i >= 0) {
          issues.error(
            at(`${path}.hosts`, i),
            `wildcard host "${se.hosts[i]}" cannot be resolved by DNS without endpoints`,
          );
        }
      }
      if (se.resolution === R.DNS_ROUND_ROBIN && se.endpoints.length > 1) {
        issues.error(`${path}.endpoints`, "resolution DNS_ROUND_ROBIN takes at most one endpoint");
      }
      se.endpoints.forEach((ep, i) => {
        const p = at(`${path}.endpoints`, i);
        if (
          !isIpAddress(ep.address) &&
          (ep.address === "" || hostProblem(ep.address) || ep.address.includes("*"))
        ) {
          issues.error(`${p}.address`, `endpoint address "${ep.address}" must be a DNS name or IP address`);
        }
        checkLabels(issues, `${p}.labels`, ep.labels);
        checkEndpointPorts(issues, `${p}.ports`, ep.ports, names);
      });
      break;
  }
  // Plain TCP cannot tell several hosts apart (HTTP has the authority, TLS
  // the SNI), so Istio refuses them unless resolution is NONE.
  if (se.resolution !== R.NONE && se.hosts.length > 1) {
    const i = se.ports.findIndex((port) => !isHttpProtocol(port.protocol) && !isTlsProtocol(port.protocol));
    if (i >= 0) {
      issues.error(
        `${at(`${path}.ports`, i)}.protocol`,
        "several hosts need HTTP or TLS ports (unless resolution is NONE): plain TCP cannot tell them apart",
      );
    }
  }
  se.subjectAltNames.forEach((san, i) => {
    if (san === "")
      issues.error(at(`${path}.subjectAltNames`, i), "subjectAltNames entries must not be empty");
  });
  checkExportTo(issues, `${path}.exportTo`, se.exportTo, ctx.namespace, true);
}

/** Checks endpoint ports: known names (of the ServiceEntry, when given) and valid numbers. */
function checkEndpointPorts(
  issues: Issues,
  path: string,
  ports: Record<string, number>,
  servicePorts: Set<string> | undefined,
): void {
  for (const [name, number] of Object.entries(ports)) {
    const p = key(path, name);
    if (servicePorts && !servicePorts.has(name))
      issues.error(p, `port "${name}" is not one of the ServiceEntry's ports`);
    else if (!isIstioDnsLabel(name)) issues.error(p, `port name "${name}" must be a DNS-1123 label`);
    checkPort(issues, p, number);
  }
}

/**
 * Istio's checks of a workload's address, ports and labels (WorkloadEntry,
 * STATIC ServiceEntry endpoint). The address is required unless a network
 * is set (then a warning: the workload is reached through that network's
 * gateway). A `unix://` address names a socket file (absolute path, not a
 * directory, or `@abstract`) and takes no ports. Otherwise it is an IP, or
 * a DNS name where `allowDnsName`.
 */
function checkWorkloadAddress(
  issues: Issues,
  path: string,
  we: WorkloadEntry,
  opts: { allowDnsName: boolean; servicePorts?: Set<string> },
): void {
  const address = we.address;
  if (!address) {
    if (!we.network) {
      issues.error(`${path}.address`, "address is required (unless network is set)");
      return;
    }
    issues.warn(`${path}.address`, `address is unset with network "${we.network}"`);
  }
  if (address.startsWith(UNIX_PREFIX)) {
    const problem = unixAddressProblem(address);
    if (problem) issues.error(`${path}.address`, problem);
    if (Object.keys(we.ports).length > 0)
      issues.error(`${path}.ports`, `unix endpoint ${address} must not have ports`);
    if (opts.servicePorts && opts.servicePorts.size !== 1)
      issues.error(`${path}.address`, "a unix endpoint needs exactly one ServiceEntry port");
  } else if (address && !isIpAddress(address)) {
    if (!opts.allowDnsName) {
      issues.error(
        `${path}.address`,
        `endpoint address "${address}" must be an IP address (or unix://) for STATIC`,
      );
    } else if (hostProblem(address) || address.includes("*")) {
      issues.error(`${path}.address`, `address "${address}" must be an IP address, DNS name or unix:// path`);
    }
  }
  checkEndpointPorts(issues, `${path}.ports`, we.ports, opts.servicePorts);
  checkLabels(issues, `${path}.labels`, we.labels);
}

/** Istio's WorkloadEntry rules. */
export function validateWorkloadEntry(we: WorkloadEntry, ctx: RuleContext): void {
  checkWorkloadAddress(ctx.issues, ctx.path, we, { allowDnsName: true });
}

// Kubernetes' rule for probe header names (letters, digits and dashes).
const PROBE_HEADER_NAME = /^[-A-Za-z0-9]+$/;

/**
 * Istio's WorkloadGroup rules. The template is required (so a WorkloadGroup
 * without a spec is refused) but not checked: its address and ports are
 * filled in when a workload registers, so Istio leaves them alone.
 */
export function validateWorkloadGroup(wg: WorkloadGroup, ctx: RuleContext): void {
  const { issues, path } = ctx;
  if (!wg.template) issues.error(`${path}.template`, "template is required");
  if (wg.metadata) checkLabels(issues, `${path}.metadata.labels`, wg.metadata.labels);
  const probe = wg.probe;
  if (!probe) return;
  const p = `${path}.probe`;
  const methods = [probe.httpGet, probe.tcpSocket, probe.exec].filter((m) => m !== undefined).length;
  if (methods === 0) issues.error(p, "probe needs one of httpGet, tcpSocket or exec");
  for (const field of [
    "initialDelaySeconds",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
  ] as const) {
    if (probe[field] < 0) issues.error(`${p}.${field}`, `${field} must not be negative`);
  }
  if (probe.httpGet) {
    const h = probe.httpGet;
    checkPort(issues, `${p}.httpGet.port`, h.port);
    if (h.scheme !== "" && h.scheme !== "HTTP" && h.scheme !== "HTTPS")
      issues.error(`${p}.httpGet.scheme`, `scheme "${h.scheme}" must be HTTP or HTTPS`);
    h.httpHeaders.forEach((header, i) => {
      if (!PROBE_HEADER_NAME.test(header.name))
        issues.error(
          `${at(`${p}.httpGet.httpHeaders`, i)}.name`,
          header.name === ""
            ? "header name must not be empty"
            : `"${header.name}" is not a valid probe header name (letters, digits and "-")`,
        );
    });
  }
  if (probe.tcpSocket) checkPort(issues, `${p}.tcpSocket.port`, probe.tcpSocket.port);
  if (probe.exec && probe.exec.command.length === 0) issues.error(`${p}.exec.command`, "command is required");
}
