import {
  ConfigResource,
  ConfigStatus,
  Credential,
  CredentialPresence,
  EndpointShard,
  NackEvent,
  ProxyStatus,
  Service,
  Struct,
  TrustBundle,
  WorkloadRegistration,
} from "@sextant/proto";
import { defineBucket } from "./bucket.js";
import { defineSubject } from "./subject.js";

/** Sextant's KV buckets: the state services share. Each has one writing service; the others only read it. */
export const Buckets = {
  config: defineBucket(
    "sextant-config",
    ConfigResource,
    "Istio config resources, key kind.namespace.name; written by ingest only",
  ),
  configStatus: defineBucket(
    "sextant-config-status",
    ConfigStatus,
    "validation, analysis and NACK messages per resource, and a Gateway API resource's Kubernetes status; written by ingest",
  ),
  services: defineBucket(
    "sextant-services",
    Service,
    "the service registry, key namespace.hostname; written by discovery",
  ),
  endpoints: defineBucket(
    "sextant-endpoints",
    EndpointShard,
    "endpoints per service and source, key namespace.hostname.shard; written by discovery",
  ),
  proxyStatus: defineBucket(
    "sextant-proxy-status",
    ProxyStatus,
    "sync state per connected proxy; written by push",
  ),
  credentials: defineBucket(
    "sextant-credentials",
    Credential,
    "TLS material of the Secrets that Gateways and DestinationRules name by credentialName, key namespace.name; written by discovery, read by push only",
  ),
  credentialIndex: defineBucket(
    "sextant-credential-index",
    CredentialPresence,
    "which Secrets named by credentialName exist and hold a key pair or CA, names and booleans only, key namespace.name; written by discovery",
  ),
  trust: defineBucket("sextant-trust", TrustBundle, "the mesh's trusted roots; written by ca"),
  // A google.protobuf.Struct (holder, acquired, renewals, durationMs) so that
  // no message type is needed for four fields.
  leases: defineBucket(
    "sextant-leases",
    Struct,
    "leader leases, key = role; written by the replicas competing for it",
  ),
  // Struct values (ConfigTraceRecord and PushTraceRecord in @sextant/model)
  // rather than a message type: a short-lived debugging record read as JSON.
  traces: defineBucket(
    "sextant-traces",
    Struct,
    "the trace of each resource's last change, key kind.namespace.name (ingest: stored) and kind.namespace.name.replica (push: built, sent, ACKed, NACKed per proxy); keys expire after an hour",
    { ttlMs: 60 * 60 * 1000 },
  ),
  // Struct values (MemberRecord in members.ts): four strings per running
  // process, read by ingest's GET /v1/version.
  members: defineBucket(
    "sextant-members",
    Struct,
    "the running control-plane processes, key service.instance: service, version, start time; written by each service about itself, refreshed every 10 s, keys expire after 30 s",
    { ttlMs: 30_000 },
  ),
} as const;

/** Sextant's event subjects: transient facts with no key/value home. */
export const Subjects = {
  registration: defineSubject(
    "sextant.registration",
    WorkloadRegistration,
    "a proxy naming a WorkloadGroup connected or disconnected; from push to discovery",
  ),
  nack: defineSubject("sextant.nack", NackEvent, "a proxy rejected config; from push to ingest"),
} as const;
