// ECDS in the golden tests: a proxy asks, as Envoy does, for the extension
// configs its listeners' filters name in config_discovery, and gets them as
// a golden file. What Envoy would refuse is reported: a name not served (the
// listener would wait for it forever, its initial fetch timeout being 0), a
// resource of a type the filter does not list in type_urls, and the
// validate rules of Envoy's protos.
import { typeUrlOf } from "@sextant/proto";
import { TypedExtensionConfig, TypeUrl } from "@sextant/proto/envoy";
import { StringValue } from "@sextant/proto/gen/google/protobuf/wrappers";
import { stringify } from "yaml";
import type { GenerationContext } from "../src/translate/generator.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { formatViolation, validateAny } from "./envoy-validate.js";
import { type Codec, dumpAny } from "./golden-inputs.js";

/** The config_discovery filters of dumped listeners: the name each refers to, with the types it accepts. */
export function discoveredFilters(listeners: unknown): Map<string, string[]> {
  const found = new Map<string, string[]>();
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) for (const item of value) walk(item);
    else if (value && typeof value === "object") {
      const object = value as { name?: string; configDiscovery?: { typeUrls?: string[] } };
      if (object.configDiscovery && typeof object.name === "string")
        found.set(object.name, object.configDiscovery.typeUrls ?? []);
      for (const inner of Object.values(value)) walk(inner);
    }
  };
  walk(listeners);
  return found;
}

/** The ECDS resources the listeners name, as YAML, and what Envoy would refuse in them. */
export function renderExtensionConfigs(
  context: GenerationContext,
  dumpedListeners: unknown,
  codecs: Readonly<Record<string, Codec>>,
): { yaml: string; violations: string[] } {
  const wanted = discoveredFilters(dumpedListeners);
  const generator = XDS_TYPES.generator(context.proxy.kind, TypeUrl.TypedExtensionConfig);
  const resources = generator?.generate(context, new Set(wanted.keys())) ?? [];
  const violations: string[] = [];
  const served = new Set(resources.map((r) => r.name));
  for (const name of wanted.keys()) {
    if (!served.has(name)) violations.push(`ecds ${name}: named by a listener's filter but not served`);
  }
  for (const r of resources) {
    for (const v of validateAny(r.resource)) violations.push(`ecds ${r.name}: ${formatViolation(v)}`);
    const type = TypedExtensionConfig.decode(r.resource.value).typedConfig?.typeUrl ?? "";
    if (!wanted.get(r.name)?.includes(type))
      violations.push(`ecds ${r.name}: ${type} is not among the filter's type_urls`);
  }
  const withStrings = { ...codecs, [typeUrlOf("google.protobuf.StringValue")]: StringValue };
  const yaml = stringify(
    resources.map((r) => ({
      sources: r.sources,
      resource: dumpAny(r.resource, withStrings, { emptyAnys: true }),
    })),
    { aliasDuplicateObjects: false },
  );
  return { yaml, violations };
}
