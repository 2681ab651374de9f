import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { bookinfoNetworkingDir } from "@sextant/testing";
import { GATEWAY_API_GROUP, KINDS } from "@sextant/validation";
import { Ajv, type ValidateFunction } from "ajv";
import { parseAllDocuments } from "yaml";
import { type JsonSchema, renderCrdFiles } from "../src/crds.js";
import { DEPLOY_DIR, find, type KubeObject, ofKind, render } from "./helpers.js";

interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  schema: { openAPIV3Schema: JsonSchema };
}

interface Crd extends KubeObject {
  spec: {
    group: string;
    scope: string;
    names: { kind: string; plural: string };
    versions: CrdVersion[];
  };
}

const crds = () => ofKind<Crd>(render("crds"), "CustomResourceDefinition");
const gatewayApiCrds = () => ofKind<Crd>(render("crds/gateway-api"), "CustomResourceDefinition");
/** The Istio kinds: the Gateway API's CRDs are a kustomization of their own (crds/gateway-api). */
const istioKinds = () => [...KINDS.values()].filter((info) => info.group !== GATEWAY_API_GROUP);

describe("deploy/crds is what scripts/generate-crds.ts renders", () => {
  it("holds exactly the generated files, byte for byte", () => {
    const expected = renderCrdFiles();
    const directory = join(DEPLOY_DIR, "crds");
    const files = readdirSync(directory, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => join(entry.parentPath, entry.name).slice(directory.length + 1));
    assert.deepEqual(files.sort(), [...expected.keys()].sort(), "files in deploy/crds");
    for (const [name, content] of expected) {
      assert.equal(
        readFileSync(join(directory, name), "utf8"),
        content,
        `deploy/crds/${name} differs from what scripts/generate-crds.ts renders: run it from deploy/ and commit the result`,
      );
    }
  });
});

describe("the CRDs", () => {
  it("define every kind Sextant supports, in its group, at the versions Istio serves", () => {
    const byKind = new Map(crds().map((crd) => [crd.spec.names.kind, crd]));
    assert.deepEqual(
      [...byKind.keys()].sort(),
      istioKinds()
        .map((info) => info.kind)
        .sort(),
    );
    for (const info of istioKinds()) {
      const crd = byKind.get(info.kind) as Crd;
      assert.equal(crd.spec.group, info.group);
      assert.equal(crd.spec.scope, "Namespaced");
      assert.equal(crd.metadata.name, `${crd.spec.names.plural}.${info.group}`);
      assert.deepEqual(crd.spec.versions.map((v) => v.name).sort(), [...info.versions].sort());
      assert.ok(crd.spec.versions.every((v) => v.served));
      // Istio stores networking kinds as v1alpha3, security kinds as v1beta1 and Telemetry as v1alpha1; a kind served in one version, in it.
      const storage =
        info.versions.length === 1
          ? info.versions[0]
          : info.group === "networking.istio.io"
            ? "v1alpha3"
            : info.group === "telemetry.istio.io"
              ? "v1alpha1"
              : "v1beta1";
      assert.deepEqual(
        crd.spec.versions.filter((v) => v.storage).map((v) => v.name),
        [storage],
      );
      // One schema for every version: they are one stored object, converted with no webhook.
      const schemas = new Set(crd.spec.versions.map((v) => JSON.stringify(v.schema)));
      assert.equal(schemas.size, 1);
    }
  });

  for (const crd of [...crds(), ...gatewayApiCrds()]) {
    it(`${crd.metadata.name} has a structural schema`, () => {
      for (const version of crd.spec.versions) {
        const problems = structuralProblems(version.schema.openAPIV3Schema, "openAPIV3Schema", false);
        assert.deepEqual(problems, [], `${crd.metadata.name} ${version.name}`);
      }
    });
  }

  it("are the kinds the webhook validates and ingest's RBAC watches", () => {
    const plane = render("overlays/production");
    const validating = find<
      KubeObject & { webhooks: Array<{ rules: Array<{ apiGroups: string[]; resources: string[] }> }> }
    >(plane, "ValidatingWebhookConfiguration", "istio-validator-istio-system");
    const expected = crds()
      .map((crd) => `${crd.spec.group}/${crd.spec.names.plural}`)
      .sort();
    for (const webhook of validating.webhooks) {
      const covered = webhook.rules.flatMap((rule) =>
        rule.apiGroups.flatMap((group) => rule.resources.map((resource) => `${group}/${resource}`)),
      );
      assert.deepEqual(covered.sort(), expected);
    }
  });
});

/**
 * The rules apiextensions.k8s.io/v1 checks a schema against (Kubernetes'
 * "structural schema"): a type on every node unless it preserves unknown
 * fields or is int-or-string; properties and additionalProperties never
 * together and additionalProperties never false; no type, properties,
 * additionalProperties, nullable, default or description inside allOf,
 * anyOf, oneOf or not.
 */
function structuralProblems(schema: JsonSchema, path: string, inJunctor: boolean): string[] {
  const problems: string[] = [];
  const free =
    schema["x-kubernetes-preserve-unknown-fields"] === true || schema["x-kubernetes-int-or-string"] === true;
  if (inJunctor) {
    for (const keyword of [
      "type",
      "properties",
      "additionalProperties",
      "items",
      "nullable",
      "default",
      "description",
    ]) {
      if (keyword in schema) problems.push(`${path}: ${keyword} inside a junctor`);
    }
  } else if (typeof schema.type !== "string" && !free) {
    problems.push(`${path}: no type`);
  }
  if (schema.properties && schema.additionalProperties !== undefined) {
    problems.push(`${path}: properties with additionalProperties`);
  }
  if (schema.additionalProperties === false) problems.push(`${path}: additionalProperties: false`);
  if (schema.type === "array" && !schema.items && !inJunctor) problems.push(`${path}: array without items`);
  for (const [name, child] of Object.entries((schema.properties ?? {}) as Record<string, JsonSchema>)) {
    problems.push(...structuralProblems(child, `${path}.properties.${name}`, inJunctor));
  }
  if (typeof schema.additionalProperties === "object") {
    problems.push(
      ...structuralProblems(
        schema.additionalProperties as JsonSchema,
        `${path}.additionalProperties`,
        inJunctor,
      ),
    );
  }
  if (schema.items)
    problems.push(...structuralProblems(schema.items as JsonSchema, `${path}.items`, inJunctor));
  for (const junctor of ["allOf", "anyOf", "oneOf"]) {
    const list = schema[junctor] as JsonSchema[] | undefined;
    // int-or-string's anyOf of types is the one sanctioned exception.
    if (junctor === "anyOf" && schema["x-kubernetes-int-or-string"] === true) continue;
    for (const [i, child] of (list ?? []).entries()) {
      problems.push(...structuralProblems(child, `${path}.${junctor}[${i}]`, true));
    }
  }
  if (schema.not) problems.push(...structuralProblems(schema.not as JsonSchema, `${path}.not`, true));
  return problems;
}

/**
 * The schema as the API server enforces it for `kubectl apply` (server-side
 * field validation, Strict since Kubernetes 1.27): an unknown field is an
 * error rather than silently pruned. So every object node that does not
 * preserve unknown fields gets additionalProperties: false, and the root the
 * fields every object has. The CRD itself must not say so (structural
 * schemas forbid additionalProperties: false).
 */
function asServerValidates(schema: JsonSchema, root = true): JsonSchema {
  const copy: JsonSchema = { ...schema };
  if (copy.properties) {
    const properties: JsonSchema = {};
    for (const [name, child] of Object.entries(copy.properties as Record<string, JsonSchema>)) {
      properties[name] = asServerValidates(child, false);
    }
    if (root) {
      properties.apiVersion = { type: "string" };
      properties.kind = { type: "string" };
      properties.metadata = { type: "object" };
    }
    copy.properties = properties;
    if (copy["x-kubernetes-preserve-unknown-fields"] !== true) copy.additionalProperties = false;
  }
  if (copy.items) copy.items = asServerValidates(copy.items as JsonSchema, false);
  if (typeof copy.additionalProperties === "object") {
    copy.additionalProperties = asServerValidates(copy.additionalProperties as JsonSchema, false);
  }
  return copy;
}

/** Ajv knowing Kubernetes' vocabulary: its x-kubernetes-* keywords and OpenAPI formats. */
function kubernetesAjv(): Ajv {
  const ajv = new Ajv({ strict: true, allErrors: true, strictRequired: false, allowUnionTypes: true });
  for (const keyword of [
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
  ]) {
    ajv.addKeyword({ keyword });
  }
  for (const format of ["int32", "int64", "float", "double", "byte", "date-time"])
    ajv.addFormat(format, true);
  return ajv;
}

describe("the CRD schemas check Istio config", () => {
  const ajv = kubernetesAjv();
  const validators = new Map<string, ValidateFunction>();
  for (const crd of crds()) {
    for (const version of crd.spec.versions) {
      validators.set(
        `${crd.spec.group}/${version.name}/${crd.spec.names.kind}`,
        ajv.compile(asServerValidates(version.schema.openAPIV3Schema)),
      );
    }
  }
  const validatorFor = (apiVersion: string, kind: string) => {
    const validate = validators.get(`${apiVersion}/${kind}`);
    assert.ok(validate, `no CRD serves ${apiVersion} ${kind}`);
    return validate;
  };

  const samples = readdirSync(bookinfoNetworkingDir())
    .filter((file) => file.endsWith(".yaml"))
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(bookinfoNetworkingDir(), file), "utf8"))
        .map((document) => document.toJS() as KubeObject | null)
        .filter((document): document is KubeObject => document !== null)
        .map((document) => ({ file, document })),
    );

  it("finds the Bookinfo samples", () => {
    assert.ok(samples.length >= 30, `only ${samples.length} Bookinfo documents`);
  });

  it("accept every Bookinfo sample, at every version its kind is served", () => {
    for (const { file, document } of samples) {
      const group = document.apiVersion.split("/")[0] ?? "";
      const crd = crds().find((c) => c.spec.group === group && c.spec.names.kind === document.kind);
      assert.ok(crd, `${file}: no CRD for ${document.apiVersion} ${document.kind}`);
      for (const version of crd.spec.versions) {
        const validate = validatorFor(`${group}/${version.name}`, document.kind);
        const valid = validate({ ...document, apiVersion: `${group}/${version.name}` });
        assert.ok(
          valid,
          `${file} ${document.metadata.name} (${version.name}): ${ajv.errorsText(validate.errors)}`,
        );
      }
    }
  });

  it("reject a document with an unknown field, at any depth", () => {
    const virtualService = samples.find(({ document }) => document.kind === "VirtualService")?.document;
    assert.ok(virtualService);
    const spec = virtualService.spec as { http: Array<Record<string, unknown>> };
    const validate = validatorFor("networking.istio.io/v1", "VirtualService");
    assert.equal(validate({ ...virtualService, spec: { ...spec, hostz: ["reviews"] } }), false);
    assert.match(ajv.errorsText(validate.errors), /must NOT have additional properties/);
    const deep = { ...spec, http: [{ ...spec.http[0], rout: [] }] };
    assert.equal(validate({ ...virtualService, spec: deep }), false);
    assert.ok(validate.errors?.some((e) => e.instancePath === "/spec/http/0"));
  });

  it("reject wrong types, unknown enum values and two members of a oneof", () => {
    const validate = validatorFor("networking.istio.io/v1", "DestinationRule");
    const rule = (trafficPolicy: unknown) => ({
      apiVersion: "networking.istio.io/v1",
      kind: "DestinationRule",
      metadata: { name: "reviews" },
      spec: { host: "reviews", trafficPolicy },
    });
    assert.equal(validate(rule({ loadBalancer: { simple: "ROUND_ROBIN" } })), true);
    assert.equal(validate(rule({ loadBalancer: { consistentHash: { httpHeaderName: "x" } } })), true);
    assert.equal(validate(rule({ loadBalancer: { simple: "FASTEST" } })), false);
    assert.equal(validate(rule({ loadBalancer: { simple: 7 } })), false);
    assert.equal(
      validate(rule({ loadBalancer: { simple: "ROUND_ROBIN", consistentHash: { httpHeaderName: "x" } } })),
      false,
      "simple and consistentHash are one oneof",
    );
  });
});

describe("the Gateway API CRDs (deploy/crds/gateway-api)", () => {
  const gatewayKinds = [...KINDS.values()].filter((info) => info.group === GATEWAY_API_GROUP);

  it("define each Gateway API kind at the versions served, stored as upstream stores it", () => {
    const byPlural = new Map(gatewayApiCrds().map((crd) => [crd.spec.names.plural, crd]));
    assert.deepEqual([...byPlural.keys()].sort(), gatewayKinds.map((info) => info.plural).sort());
    const storedAt: Record<string, string> = {
      gatewayclasses: "v1",
      gateways: "v1",
      httproutes: "v1",
      grpcroutes: "v1",
      tlsroutes: "v1",
      tcproutes: "v1alpha2",
      referencegrants: "v1beta1",
      backendtlspolicies: "v1",
    };
    for (const info of gatewayKinds) {
      const crd = byPlural.get(info.plural) as Crd;
      assert.equal(crd.metadata.name, `${info.plural}.${GATEWAY_API_GROUP}`);
      assert.equal(crd.spec.names.kind, info.apiKind ?? info.kind);
      assert.equal(crd.spec.scope, info.kind === "GatewayClass" ? "Cluster" : "Namespaced");
      assert.deepEqual(crd.spec.versions.map((v) => v.name).sort(), [...info.versions].sort());
      assert.deepEqual(
        crd.spec.versions.filter((v) => v.storage).map((v) => v.name),
        [storedAt[info.plural]],
      );
      const annotations = (crd.metadata as { annotations?: Record<string, string> }).annotations;
      assert.equal(annotations?.["gateway.networking.k8s.io/bundle-version"], "v1.5.1");
    }
    assert.equal(byPlural.get("gateways")?.spec.names.kind, "Gateway");
  });

  it("check a Gateway and an HTTPRoute as the API server would: known fields, enums, limits", () => {
    const ajv = kubernetesAjv();
    const schemaOf = (plural: string) => {
      const crd = gatewayApiCrds().find((c) => c.spec.names.plural === plural) as Crd;
      return ajv.compile(asServerValidates((crd.spec.versions[0] as CrdVersion).schema.openAPIV3Schema));
    };
    const gateway = schemaOf("gateways");
    const gw = (spec: unknown) => ({
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "Gateway",
      metadata: { name: "gw" },
      spec,
    });
    const listeners = [
      { name: "http", port: 80, protocol: "HTTP", allowedRoutes: { namespaces: { from: "All" } } },
    ];
    assert.equal(gateway(gw({ gatewayClassName: "istio", listeners })), true, ajv.errorsText(gateway.errors));
    assert.equal(gateway(gw({ gatewayClassName: "istio" })), false, "listeners are required");
    assert.equal(
      gateway(gw({ gatewayClassName: "istio", listeners: [{ ...listeners[0], port: 0 }] })),
      false,
    );
    const route = schemaOf("httproutes");
    const hr = (rules: unknown) => ({
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "HTTPRoute",
      metadata: { name: "r" },
      spec: { parentRefs: [{ name: "gw" }], rules },
    });
    const backendRefs = [{ name: "reviews", port: 9080, weight: 1 }];
    assert.equal(route(hr([{ matches: [{ path: { type: "PathPrefix", value: "/" } }], backendRefs }])), true);
    assert.equal(route(hr([{ matches: [{ path: { type: "Prefix", value: "/" } }], backendRefs }])), false);
    assert.equal(route(hr([{ backendRefs, retries: 3 }])), false, "an unknown field");
  });
});
