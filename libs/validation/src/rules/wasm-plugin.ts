import {
  EnvValueSource,
  type VmConfig,
  type WasmPlugin,
  type WasmPlugin_TrafficSelector,
} from "@sextant/proto/gen/istio/extensions/v1alpha1/wasm";
import { at, type Issues } from "../issues.js";
import type { RuleContext } from "./context.js";
import { checkSelector } from "./security.js";

/** The schemes a module can be fetched from; no scheme means an OCI image. */
const URL_SCHEMES = new Set(["", "file", "http", "https", "oci"]);
const SHA256_HEX = /^[a-f0-9]{64}$/;
const SCHEME_PREFIX = /^([a-zA-Z][a-zA-Z0-9+.-]*):(.*)$/s;

/**
 * Istio's ValidateWasmPlugin (1.30.3): how it is attached (selector or
 * targetRef(s), as a security policy), where the module comes from, its VM
 * and matches.
 */
export function validateWasmPlugin(plugin: WasmPlugin, ctx: RuleContext): void {
  const { issues, path } = ctx;
  checkSelector(issues, path, plugin.selector, plugin.targetRef, plugin.targetRefs);
  checkUrl(issues, `${path}.url`, plugin.url);
  if (plugin.sha256 !== "" && plugin.sha256.length !== 64)
    issues.error(`${path}.sha256`, "sha256 must be 64 characters long");
  else if (plugin.sha256 !== "" && !SHA256_HEX.test(plugin.sha256))
    issues.error(`${path}.sha256`, "sha256 must be 64 lowercase hexadecimal digits ([a-f0-9]{64})");
  if (plugin.imagePullSecret.length > 253)
    issues.error(`${path}.imagePullSecret`, "imagePullSecret must be at most 253 characters long");
  if (plugin.pluginName.length > 256)
    issues.error(`${path}.pluginName`, "pluginName must be at most 256 characters long");
  checkVmConfig(issues, `${path}.vmConfig`, plugin.vmConfig);
  checkMatch(issues, `${path}.match`, plugin.match);
}

/**
 * Istio parses the url as a request URI and, failing that, as `http://<url>`
 * (so `registry.io/image:tag` is a URL with no scheme); the scheme must be
 * one a module can be fetched from.
 */
function checkUrl(issues: Issues, path: string, url: string): void {
  if (url === "") {
    issues.error(
      path,
      "url is required: where the Wasm module comes from (oci://, https://, http:// or file://)",
    );
    return;
  }
  const scheme = SCHEME_PREFIX.exec(url);
  // A scheme counts only before a hierarchical part ("host:5000/image" is a host and port, not a scheme).
  if (scheme?.[2]?.startsWith("/")) {
    if (!parses(url)) issues.error(path, `url "${url}" cannot be parsed`);
    else if (!URL_SCHEMES.has(scheme[1]!.toLowerCase()))
      issues.error(path, `url has an unsupported scheme "${scheme[1]}": use oci, https, http or file`);
    return;
  }
  if (url.startsWith("/")) return;
  if (!parses(`http://${url}`)) issues.error(path, `url "${url}" cannot be parsed`);
}

function parses(url: string): boolean {
  return !/\s/.test(url) && URL.canParse(url);
}

/** Environment variables: named, each once, a value only when INLINE. */
function checkVmConfig(issues: Issues, path: string, vm: VmConfig | undefined): void {
  const names = new Set<string>();
  vm?.env.forEach((env, i) => {
    const p = at(`${path}.env`, i);
    if (env.name === "") issues.error(`${p}.name`, "an environment variable needs a name");
    else if (env.name.length > 256) issues.error(`${p}.name`, "env name must be at most 256 characters long");
    else if (names.has(env.name)) issues.error(`${p}.name`, `environment variable ${env.name} is set twice`);
    names.add(env.name);
    if (env.valueFrom !== EnvValueSource.INLINE && env.value !== "")
      issues.error(`${p}.value`, "value may only be set when valueFrom is INLINE");
  });
}

function checkMatch(issues: Issues, path: string, selectors: WasmPlugin_TrafficSelector[]): void {
  selectors.forEach((selector, i) => {
    selector.ports.forEach((port, j) => {
      if (port.number < 1 || port.number > 65535)
        issues.error(
          `${at(`${at(path, i)}.ports`, j)}.number`,
          `port ${port.number} is out of range 1..65535`,
        );
    });
  });
}
