import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type BindingObject,
  containerOf,
  deploymentOf,
  envValue,
  type KubeObject,
  NAMESPACE,
  ofKind,
  type PolicyRule,
  type RoleObject,
  render,
  SERVICES,
  type ServiceName,
  workloadsOf,
} from "./helpers.js";

/** What the API server's RBAC authorizer would be asked. */
interface Request {
  verb: string;
  group: string;
  resource: string;
  name?: string;
}

/** RBAC's matching: a rule allows a request if every list matches ("*" matches anything). */
function allows(rule: PolicyRule, request: Request): boolean {
  const has = (list: string[] | undefined, value: string) =>
    !!list && (list.includes(value) || list.includes("*"));
  return (
    has(rule.verbs, request.verb) &&
    has(rule.apiGroups, request.group) &&
    has(rule.resources, request.resource) &&
    (!rule.resourceNames?.length || (request.name !== undefined && rule.resourceNames.includes(request.name)))
  );
}

/** Every rule bound to each service account of a render, by `namespace/name`. */
function rulesBySubject(objects: KubeObject[]): Map<string, PolicyRule[]> {
  const roles = new Map<string, RoleObject>();
  for (const role of ofKind<RoleObject>(objects, "ClusterRole"))
    roles.set(`ClusterRole/${role.metadata.name}`, role);
  for (const role of ofKind<RoleObject>(objects, "Role")) {
    roles.set(`Role/${role.metadata.namespace}/${role.metadata.name}`, role);
  }
  const bound = new Map<string, PolicyRule[]>();
  for (const binding of [
    ...ofKind<BindingObject>(objects, "ClusterRoleBinding"),
    ...ofKind<BindingObject>(objects, "RoleBinding"),
  ]) {
    const key =
      binding.roleRef.kind === "ClusterRole"
        ? `ClusterRole/${binding.roleRef.name}`
        : `Role/${binding.metadata.namespace}/${binding.roleRef.name}`;
    const role = roles.get(key);
    assert.ok(role, `${binding.kind} ${binding.metadata.name} refers to ${key}, which is not deployed`);
    for (const subject of binding.subjects ?? []) {
      assert.equal(subject.kind, "ServiceAccount", `${binding.metadata.name} binds a ${subject.kind}`);
      const id = `${subject.namespace}/${subject.name}`;
      bound.set(id, [...(bound.get(id) ?? []), ...(role.rules ?? [])]);
    }
  }
  return bound;
}

const account = (service: ServiceName | "nats") => `${NAMESPACE}/sextant-${service}`;

for (const env of ["dev", "production"]) {
  describe(`RBAC is least privilege (overlays/${env})`, () => {
    const objects = render(`overlays/${env}`);
    const bound = rulesBySubject(objects);
    const accounts = [...SERVICES.map(account), account("nats")];
    const can = (subject: string, request: Request) =>
      (bound.get(subject) ?? []).some((r) => allows(r, request));
    const who = (request: Request) => accounts.filter((subject) => can(subject, request));

    it("binds only the control plane's own service accounts, each used by its workload", () => {
      for (const subject of bound.keys())
        assert.ok(accounts.includes(subject), `${subject} is bound to a role`);
      for (const workload of workloadsOf(objects)) {
        const name = workload.spec.template.spec.serviceAccountName;
        assert.equal(
          name,
          workload.metadata.name,
          `${workload.metadata.name} runs as its own service account`,
        );
        assert.ok(
          ofKind(objects, "ServiceAccount").some((sa) => sa.metadata.name === name),
          `ServiceAccount ${name} is not deployed`,
        );
      }
    });

    it("grants no wildcard, no escalation verbs and no built-in role", () => {
      for (const role of [
        ...ofKind<RoleObject>(objects, "ClusterRole"),
        ...ofKind<RoleObject>(objects, "Role"),
      ]) {
        for (const rule of role.rules ?? []) {
          for (const list of [rule.verbs, rule.apiGroups, rule.resources, rule.resourceNames]) {
            assert.ok(!list?.includes("*"), `${role.metadata.name} has a wildcard`);
          }
          for (const verb of ["escalate", "bind", "impersonate", "deletecollection"]) {
            assert.ok(!rule.verbs.includes(verb), `${role.metadata.name} may ${verb}`);
          }
          assert.equal(rule.nonResourceURLs, undefined, `${role.metadata.name} names non-resource URLs`);
        }
      }
      for (const binding of [
        ...ofKind<BindingObject>(objects, "ClusterRoleBinding"),
        ...ofKind<BindingObject>(objects, "RoleBinding"),
      ]) {
        assert.ok(
          binding.roleRef.name.startsWith("sextant-"),
          `${binding.metadata.name} binds ${binding.roleRef.name}`,
        );
      }
    });

    it("only discovery lists pods and endpointslices", () => {
      for (const verb of ["list", "watch", "get"]) {
        assert.deepEqual(
          who({ verb, group: "", resource: "pods" }),
          verb === "get" ? [] : [account("discovery")],
        );
        assert.deepEqual(
          who({ verb, group: "discovery.k8s.io", resource: "endpointslices" }),
          verb === "get" ? [] : [account("discovery")],
        );
      }
    });

    it("only ca and ingest (API_AUTH=kubernetes) create tokenreviews; only ingest creates subjectaccessreviews", () => {
      assert.deepEqual(who({ verb: "create", group: "authentication.k8s.io", resource: "tokenreviews" }), [
        account("ingest"),
        account("ca"),
      ]);
      assert.deepEqual(
        who({ verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews" }),
        [account("ingest")],
      );
    });

    it("only ca writes ConfigMaps (istio-ca-root-cert in every namespace): create and update, never patch, delete or get", () => {
      for (const verb of ["list", "watch", "create", "update"])
        assert.deepEqual(who({ verb, group: "", resource: "configmaps" }), [account("ca")], verb);
      for (const verb of ["get", "patch", "delete"])
        assert.deepEqual(who({ verb, group: "", resource: "configmaps" }), [], verb);
      for (const verb of ["list", "watch"])
        assert.ok(
          can(account("ca"), { verb, group: "", resource: "namespaces" }),
          `ca may ${verb} namespaces`,
        );
      for (const verb of ["get", "create", "update", "patch", "delete"])
        assert.deepEqual(who({ verb, group: "", resource: "namespaces" }), [], verb);
    });

    it("discovery may create and delete WorkloadEntries (what ingest's SubjectAccessReview asks for auto-registration), nothing else of Istio's", () => {
      const group = "networking.istio.io";
      for (const verb of ["create", "delete"])
        assert.deepEqual(who({ verb, group, resource: "workloadentries" }), [account("discovery")], verb);
      for (const verb of ["update", "patch", "get", "list", "watch"])
        assert.ok(!can(account("discovery"), { verb, group, resource: "workloadentries" }), verb);
      for (const resource of ["virtualservices", "destinationrules", "serviceentries", "workloadgroups"])
        for (const verb of ["create", "delete"])
          assert.ok(!can(account("discovery"), { verb, group, resource }), `${verb} ${resource}`);
    });

    it("discovery deploys Gateways: get, list, watch, create and patch (server-side apply) of ServiceAccounts, Services and Deployments, no update or delete; list and watch of Gateways and GatewayClasses", () => {
      const discovery = account("discovery");
      for (const [group, resource] of [
        ["", "serviceaccounts"],
        ["", "services"],
        ["apps", "deployments"],
      ] as const) {
        for (const verb of ["get", "create", "patch"])
          assert.deepEqual(who({ verb, group, resource }), [discovery], `${verb} ${resource}`);
        // Those it made, by label, to put back what someone edits or deletes.
        for (const verb of ["list", "watch"])
          assert.ok(can(discovery, { verb, group, resource }), `${verb} ${resource}`);
        for (const verb of ["update", "delete"])
          assert.deepEqual(who({ verb, group, resource }), [], `${verb} ${resource}`);
      }
      for (const resource of ["gateways", "gatewayclasses"]) {
        const group = "gateway.networking.k8s.io";
        for (const verb of ["list", "watch"])
          assert.ok(can(discovery, { verb, group, resource }), `${verb} ${resource}`);
        for (const verb of ["get", "create", "update", "patch", "delete"])
          assert.ok(!can(discovery, { verb, group, resource }), `${verb} ${resource}`);
        // Istio writes its controller-version annotation through gateways/status; discovery does not.
        assert.ok(!can(discovery, { verb: "patch", group, resource: `${resource}/status` }));
      }
      // Nor anything else of apps: no StatefulSets, DaemonSets or ReplicaSets.
      for (const resource of ["statefulsets", "daemonsets", "replicasets"])
        for (const verb of ["create", "patch", "update", "delete"])
          assert.ok(!can(discovery, { verb, group: "apps", resource }), `${verb} ${resource}`);
    });

    it("discovery shows ingest a short-lived projected token, which INGEST_TOKEN_FILE names", () => {
      const discovery = deploymentOf(objects, "discovery");
      const file = envValue(containerOf(discovery), "INGEST_TOKEN_FILE");
      const mount = (containerOf(discovery).volumeMounts ?? []).find((m) =>
        file.startsWith(`${m.mountPath}/`),
      );
      assert.ok(mount?.readOnly, `a read-only mount holds ${file}`);
      const volume = (discovery.spec.template.spec.volumes ?? []).find((v) => v.name === mount.name);
      const token = volume?.projected?.sources.find((s) => s.serviceAccountToken)?.serviceAccountToken;
      assert.equal(token && `${mount.mountPath}/${token.path}`, file);
      assert.ok((token?.expirationSeconds ?? Number.POSITIVE_INFINITY) <= 3600, "expires within the hour");
    });

    it("only discovery lists and watches Secrets (for credentialName, as istiod); nobody gets one, only ca mounts cacerts", () => {
      for (const verb of ["list", "watch"]) {
        assert.deepEqual(who({ verb, group: "", resource: "secrets" }), [account("discovery")], verb);
      }
      assert.deepEqual(who({ verb: "get", group: "", resource: "secrets", name: "cacerts" }), []);
      assert.deepEqual(who({ verb: "get", group: "", resource: "secrets" }), []);
      for (const verb of ["create", "update", "patch", "delete"])
        assert.deepEqual(who({ verb, group: "", resource: "secrets" }), [], verb);
      const mounting = workloadsOf(objects)
        .filter((w) =>
          (w.spec.template.spec.volumes ?? []).some((volume) => volume.secret?.secretName === "cacerts"),
        )
        .map((w) => w.metadata.name);
      assert.deepEqual(mounting, ["sextant-ca"]);
    });

    it("push has no access to Secrets, nor to anything else in the API", () => {
      for (const verb of ["get", "list", "watch", "create", "update", "patch", "delete"]) {
        assert.ok(
          !can(account("push"), { verb, group: "", resource: "secrets" }),
          `push may ${verb} secrets`,
        );
      }
      assert.equal(bound.get(account("push")), undefined, "push is bound to a role");
      // Its only API credential is the projected istio-ca token it shows ca.
      const push = workloadsOf(objects).find((w) => w.metadata.name === "sextant-push");
      const serviceAccount = ofKind<KubeObject & { automountServiceAccountToken?: boolean }>(
        objects,
        "ServiceAccount",
      ).find((sa) => sa.metadata.name === "sextant-push");
      assert.equal(serviceAccount?.automountServiceAccountToken, false);
      const audiences = (push?.spec.template.spec.volumes ?? []).flatMap((v) =>
        (v.projected?.sources ?? []).map((s) => s.serviceAccountToken?.audience),
      );
      assert.deepEqual(audiences, ["istio-ca"]);
      // And the one Secret it reads is its own NATS password.
      const secretRefs = (containerOf(push as NonNullable<typeof push>).env ?? [])
        .map((v) => v.valueFrom?.secretKeyRef)
        .filter((ref) => ref !== undefined);
      assert.deepEqual(secretRefs, [{ name: "sextant-nats-users", key: "push" }]);
    });

    it("only webhook modifies webhook configurations, and only its own two", () => {
      for (const resource of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
        for (const verb of ["update", "patch", "create", "delete"]) {
          const group = "admissionregistration.k8s.io";
          const anyName = accounts.filter((s) =>
            can(s, { verb, group, resource, name: "some-other-webhook" }),
          );
          assert.deepEqual(anyName, [], `${verb} ${resource} of another name`);
          // The configurations the webhook keeps the caBundle of.
          const own = envValue(
            containerOf(deploymentOf(objects, "webhook")),
            resource === "mutatingwebhookconfigurations"
              ? "INJECTOR_WEBHOOK_CONFIG_NAME"
              : "VALIDATION_WEBHOOK_CONFIG_NAME",
          );
          assert.deepEqual(
            who({ verb, group, resource, name: own }),
            verb === "update" ? [account("webhook")] : [],
          );
        }
      }
    });

    it("ingest watches the Istio kinds of the CRDs and patches only their status", () => {
      const crds = ofKind<KubeObject & { spec: { group: string; names: { plural: string } } }>(
        objects,
        "CustomResourceDefinition",
      );
      assert.ok(crds.length > 0);
      for (const crd of crds) {
        const { group } = crd.spec;
        const plural = crd.spec.names.plural;
        for (const verb of ["list", "watch"]) {
          assert.deepEqual(who({ verb, group, resource: plural }), [account("ingest")], `${verb} ${plural}`);
        }
        assert.deepEqual(who({ verb: "patch", group, resource: `${plural}/status` }), [account("ingest")]);
        for (const verb of ["create", "update", "patch", "delete"]) {
          // Discovery's grant is for ingest's SubjectAccessReview (above).
          const granted =
            plural === "workloadentries" && (verb === "create" || verb === "delete")
              ? [account("discovery")]
              : [];
          assert.deepEqual(who({ verb, group, resource: plural }), granted, `${verb} ${plural}`);
        }
      }
    });
  });
}

describe("RBAC is least privilege (gateways beside the control plane)", () => {
  const objects = [...render("overlays/production"), ...render("gateways")];
  const bound = rulesBySubject(objects);
  const gatewayAccounts = ofKind(render("gateways"), "ServiceAccount").map(
    (sa) => `${sa.metadata.namespace}/${sa.metadata.name}`,
  );

  it("binds no role to a gateway: push serves its certificates, so it reads no Secret and calls no API", () => {
    assert.deepEqual(gatewayAccounts.sort(), [
      `${NAMESPACE}/istio-egressgateway-service-account`,
      `${NAMESPACE}/istio-ingressgateway-service-account`,
    ]);
    for (const subject of gatewayAccounts) assert.equal(bound.get(subject), undefined, `${subject} is bound`);
    assert.deepEqual(ofKind(render("gateways"), "Role"), []);
    assert.deepEqual(ofKind(render("gateways"), "RoleBinding"), []);
  });

  it("each gateway runs as its own service account, whose only token is the projected istio-ca one", () => {
    for (const workload of workloadsOf(render("gateways"))) {
      const pod = workload.spec.template.spec;
      assert.equal(pod.serviceAccountName, `${workload.metadata.name}-service-account`);
      assert.equal(pod.automountServiceAccountToken, false);
      const audiences = (pod.volumes ?? []).flatMap((v) =>
        (v.projected?.sources ?? []).map((s) => s.serviceAccountToken?.audience),
      );
      assert.deepEqual(audiences, ["istio-ca"]);
    }
  });
});

describe("RBAC: ingest reads the Gateway API's kinds", () => {
  const objects = [...render("overlays/production"), ...render("crds/gateway-api")];
  const bound = rulesBySubject(objects);
  const who = (request: Request) =>
    [...bound].filter(([, rules]) => rules.some((rule) => allows(rule, request))).map(([subject]) => subject);
  it("lists and watches each of them and patches the status of those that have one, and nothing more", () => {
    const crds = ofKind<
      KubeObject & {
        spec: {
          group: string;
          names: { plural: string };
          versions: Array<{ subresources?: { status?: object } }>;
        };
      }
    >(objects, "CustomResourceDefinition").filter((crd) => crd.spec.group === "gateway.networking.k8s.io");
    assert.equal(crds.length, 8);
    for (const crd of crds) {
      const { group } = crd.spec;
      const plural = crd.spec.names.plural;
      // Discovery follows Gateways and their classes to deploy them (below).
      const readers = ["gateways", "gatewayclasses"].includes(plural)
        ? [account("ingest"), account("discovery")]
        : [account("ingest")];
      for (const verb of ["list", "watch"]) {
        assert.deepEqual(who({ verb, group, resource: plural }).sort(), readers.sort(), `${verb} ${plural}`);
      }
      const hasStatus = crd.spec.versions.some((v) => v.subresources?.status);
      assert.equal(
        who({ verb: "patch", group, resource: `${plural}/status` }).includes(account("ingest")),
        hasStatus,
        `patch ${plural}/status`,
      );
      for (const verb of ["create", "update", "patch", "delete"]) {
        assert.deepEqual(who({ verb, group, resource: plural }), [], `${verb} ${plural}`);
      }
    }
  });
});
