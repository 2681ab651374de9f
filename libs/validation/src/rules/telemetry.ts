import type {
  AccessLogging,
  Metrics,
  ProviderRef,
  Telemetry,
  Tracing,
} from "@sextant/proto/gen/istio/telemetry/v1alpha1/telemetry";
import { MetricsOverrides_TagOverride_Operation } from "@sextant/proto/gen/istio/telemetry/v1alpha1/telemetry";
import { at, type Issues, key } from "../issues.js";
import type { RuleContext } from "./context.js";
import { checkSelector } from "./security.js";

/** Istio's Telemetry rules (pkg/config/validation ValidateTelemetry, 1.30.3). */
export function validateTelemetry(telemetry: Telemetry, ctx: RuleContext): void {
  const { issues, path } = ctx;
  checkSelector(issues, path, telemetry.selector, telemetry.targetRef, telemetry.targetRefs);
  telemetry.metrics.forEach((metrics, i) => {
    checkMetrics(issues, at(`${path}.metrics`, i), metrics);
  });
  if (telemetry.tracing.length > 1)
    issues.warn(`${path}.tracing`, "multiple tracing is not currently supported");
  telemetry.tracing.forEach((tracing, i) => {
    checkTracing(issues, at(`${path}.tracing`, i), tracing);
  });
  telemetry.accessLogging.forEach((logging, i) => {
    checkAccessLogging(issues, at(`${path}.accessLogging`, i), logging);
  });
}

function checkProviders(issues: Issues, path: string, providers: ProviderRef[]): void {
  providers.forEach((provider, i) => {
    if (provider.name === "")
      issues.error(`${at(`${path}.providers`, i)}.name`, "providers.name may not be empty");
  });
}

function checkAccessLogging(issues: Issues, path: string, logging: AccessLogging): void {
  if (logging.filter) {
    const problem = celSyntaxProblem(logging.filter.expression);
    if (problem) issues.error(`${path}.filter.expression`, `must be a valid CEL expression, ${problem}`);
  }
  checkProviders(issues, path, logging.providers);
}

function checkTracing(issues: Issues, path: string, tracing: Tracing): void {
  if (tracing.providers.length > 1)
    issues.warn(`${path}.providers`, "multiple providers is not currently supported");
  checkProviders(issues, path, tracing.providers);
  const sampling = tracing.randomSamplingPercentage;
  if (sampling !== undefined && (sampling < 0 || sampling > 100 || Number.isNaN(sampling)))
    issues.error(
      `${path}.randomSamplingPercentage`,
      "randomSamplingPercentage must be in range [0.0, 100.0]",
    );
  for (const [name, tag] of Object.entries(tracing.customTags)) {
    const tagPath = key(`${path}.customTags`, name);
    if (name === "") issues.error(tagPath, "tag name may not be empty");
    if (tag.literal !== undefined && tag.literal.value === "")
      issues.error(`${tagPath}.literal.value`, "literal tag value may not be empty");
    if (tag.header !== undefined && tag.header.name === "")
      issues.error(`${tagPath}.header.name`, "header tag name may not be empty");
    if (tag.environment !== undefined && tag.environment.name === "")
      issues.error(`${tagPath}.environment.name`, "environment tag name may not be empty");
  }
}

function checkMetrics(issues: Issues, path: string, metrics: Metrics): void {
  checkProviders(issues, path, metrics.providers);
  metrics.overrides.forEach((override, i) => {
    const overridePath = at(`${path}.overrides`, i);
    for (const [tag, value] of Object.entries(override.tagOverrides)) {
      const tagPath = key(`${overridePath}.tagOverrides`, tag);
      if (tag === "") issues.warn(tagPath, "tagOverrides.name may not be empty");
      if (value.operation === MetricsOverrides_TagOverride_Operation.UPSERT && value.value === "")
        issues.error(`${tagPath}.value`, "tagOverrides.value must be set when operation is UPSERT");
      if (value.operation === MetricsOverrides_TagOverride_Operation.REMOVE && value.value !== "")
        issues.error(`${tagPath}.value`, "tagOverrides.value may only be set when operation is UPSERT");
    }
    if (override.match?.customMetric !== undefined && override.match.customMetric === "")
      issues.error(`${overridePath}.match.customMetric`, "customMetric may not be empty");
  });
}

/**
 * What istiod's CEL parser would refuse that a scan can see: an empty
 * expression, unbalanced brackets, an unterminated string. Istio parses
 * the expression fully; Sextant has no CEL parser, so an expression that
 * passes here can still be refused by Envoy (the proxy then NACKs).
 */
export function celSyntaxProblem(expression: string): string | undefined {
  if (expression.trim() === "") return "the expression is empty";
  const closing: Record<string, string> = { "(": ")", "[": "]", "{": "}" };
  const open: string[] = [];
  for (let i = 0; i < expression.length; i++) {
    const c = expression[i] as string;
    if (c === '"' || c === "'") {
      const end = stringEnd(expression, i);
      if (end < 0) return `unterminated string starting at offset ${i}`;
      i = end;
    } else if (closing[c]) {
      open.push(closing[c]);
    } else if (c === ")" || c === "]" || c === "}") {
      if (open.pop() !== c) return `unexpected ${JSON.stringify(c)} at offset ${i}`;
    }
  }
  if (open.length > 0) return `missing ${JSON.stringify(open[open.length - 1])}`;
  return undefined;
}

function stringEnd(text: string, start: number): number {
  const quote = text[start];
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === quote) return i;
  }
  return -1;
}
