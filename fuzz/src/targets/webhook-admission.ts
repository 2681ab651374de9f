// The admission webhook's POST /inject and /validate, after express's JSON
// body parser: an AdmissionReview parsed, then answered by the injector and
// by the validator, and the answer serialized. Refusals are the body
// parser's (bad JSON: a 400) and parseReview's own (a deny or a 400); an
// exception from admitInjection or admitValidation would be a 500.
import { admitInjection, admitValidation, parseReview, reviewResponse } from "@sextant/webhook/fuzzing";
import { defaultInjectionConfig } from "@sextant/webhook/inject";
import type { FuzzTarget } from "../target.js";

const config = defaultInjectionConfig();

export const target: FuzzTarget = {
  tokens: [
    '"apiVersion":"admission.k8s.io/v1"',
    '"kind":"AdmissionReview"',
    '"operation":"CREATE"',
    '"operation":"UPDATE"',
    '"operation":"DELETE"',
    '"kind":{"group":"","version":"v1","kind":"Pod"}',
    '"kind":{"group":"networking.istio.io","version":"v1","kind":"VirtualService"}',
    '"annotations":{',
    '"labels":{',
    '"sidecar.istio.io/inject":"true"',
    '"sidecar.istio.io/proxyCPU":"',
    '"proxy.istio.io/config":"',
    '"traffic.sidecar.istio.io/includeOutboundIPRanges":"',
    '"traffic.sidecar.istio.io/excludeInboundPorts":"',
    '"containers":[',
    '"initContainers":[',
    '"ports":[{"containerPort":',
    '"oldObject":',
    "null",
    "[]",
    "{}",
    "1e400",
    "-1",
    '"\\u0000"',
    '"\\ud800"',
    '"__proto__"',
  ],
  run(input) {
    // express.json({ strict: true }): UTF-8, an object or array at the top.
    const body: unknown = JSON.parse(Buffer.from(input).toString("utf8"));
    const parsed = parseReview(body);
    if (!parsed.ok) return;
    JSON.stringify(reviewResponse(admitInjection(parsed.request, config)));
    JSON.stringify(reviewResponse(admitValidation(parsed.request)));
  },
  refusal: (error) => error instanceof SyntaxError,
};
