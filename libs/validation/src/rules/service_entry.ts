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
  cidrProblem,
  hostProblem,
  isDns1123Label,
  isIpAddress,
  isKnownProtocol,
} from "./common.js";
import type { RuleContext } from "./context.js";
import { checkPortMap } from "./destination_rule.js";

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
    else if (!isDns1123Label(port.name))
      issues.error(`${p}.name`, `port name "${port.name}" must be a DNS-1123 label`);
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
    checkLabels(issues, `${path}.workloadSelector.labels`, se.workloadSelector.labels);
  }

  switch (se.resolution) {
    case R.NONE:
      if (se.endpoints.length > 0)
        issues.error(`${path}.endpoints`, "resolution NONE does not take endpoints");
      break;
    case R.STATIC:
      if (se.endpoints.length === 0 && !se.workloadSelector) {
        issues.error(`${path}.endpoints`, "resolution STATIC needs endpoints or a workloadSelector");
      }
      se.endpoints.forEach((ep, i) => {
        const p = at(`${path}.endpoints`, i);
        if (!isIpAddress(ep.address) && !ep.address.startsWith("unix://")) {
          issues.error(
            `${p}.address`,
            `endpoint address "${ep.address}" must be an IP address (or unix://) for STATIC`,
          );
        }
      });
      break;
    case R.DNS:
    case R.DNS_ROUND_ROBIN:
      if (se.endpoints.length === 0) {
        se.hosts.forEach((host, i) => {
          if (host.includes("*")) {
            issues.error(
              at(`${path}.hosts`, i),
              `wildcard host "${host}" cannot be resolved by DNS without endpoints`,
            );
          }
        });
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
      });
      break;
  }
  se.endpoints.forEach((ep, i) => {
    const p = at(`${path}.endpoints`, i);
    checkLabels(issues, `${p}.labels`, ep.labels);
    for (const [name, number] of Object.entries(ep.ports)) {
      if (!names.has(name))
        issues.error(key(`${p}.ports`, name), `port "${name}" is not one of the ServiceEntry's ports`);
      checkPort(issues, key(`${p}.ports`, name), number);
    }
  });
  se.subjectAltNames.forEach((san, i) => {
    if (san === "")
      issues.error(at(`${path}.subjectAltNames`, i), "subjectAltNames entries must not be empty");
  });
  checkExportTo(issues, `${path}.exportTo`, se.exportTo, ctx.namespace);
}

/** Istio's WorkloadEntry rules. */
export function validateWorkloadEntry(we: WorkloadEntry, ctx: RuleContext): void {
  checkWorkloadEntry(ctx.issues, ctx.path, we, false);
}

function checkWorkloadEntry(issues: Issues, path: string, we: WorkloadEntry, isTemplate: boolean): void {
  if (isTemplate) {
    if (we.address) issues.error(`${path}.address`, "a WorkloadGroup template must not set address");
  } else if (!we.address && !we.network) {
    issues.error(`${path}.address`, "address is required (unless network is set)");
  } else if (we.address && !isIpAddress(we.address) && !we.address.startsWith("unix://")) {
    const problem = hostProblem(we.address);
    if (problem || we.address.includes("*")) {
      issues.error(
        `${path}.address`,
        `address "${we.address}" must be an IP address, DNS name or unix:// path`,
      );
    }
  }
  checkPortMap(issues, `${path}.ports`, we.ports);
  checkLabels(issues, `${path}.labels`, we.labels);
}

/** Istio's WorkloadGroup rules. */
export function validateWorkloadGroup(wg: WorkloadGroup, ctx: RuleContext): void {
  const { issues, path } = ctx;
  if (wg.metadata) checkLabels(issues, `${path}.metadata.labels`, wg.metadata.labels);
  if (wg.template) checkWorkloadEntry(issues, `${path}.template`, wg.template, true);
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
  if (probe.httpGet) checkPort(issues, `${p}.httpGet.port`, probe.httpGet.port);
  if (probe.tcpSocket) checkPort(issues, `${p}.tcpSocket.port`, probe.tcpSocket.port);
  if (probe.exec && probe.exec.command.length === 0) issues.error(`${p}.exec.command`, "command is required");
}
