import { X509Certificate } from "node:crypto";
import { Buckets, type Bus, encodeKey } from "@sextant/bus";
import type { Logger } from "@sextant/observability";
import type { TrustAnchor, TrustBundle } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";

/** The key of a trust domain's bundle in `sextant-trust`. */
export function trustBundleKey(trustDomain: string): string {
  return encodeKey(trustDomain);
}

/**
 * The next trust bundle, given the one stored and the root this CA signs
 * under. Rotation rules:
 * - the signing root is in the bundle, active, until its own expiry;
 * - a root that was active and is no longer stays, inactive, until the
 *   longest certificate it may have issued has expired (now + max TTL,
 *   never past its own expiry);
 * - anchors past their not_after are dropped.
 * Returns `current` itself when nothing changes, so no write happens.
 */
export function nextTrustBundle(
  current: TrustBundle | undefined,
  trustDomain: string,
  rootPem: string,
  maxWorkloadTtlSeconds: number,
  now = new Date(),
): TrustBundle {
  const root = new X509Certificate(rootPem);
  const anchors: TrustAnchor[] = [];
  let changed = !current || current.trustDomain !== trustDomain;
  for (const anchor of current?.anchors ?? []) {
    const cert = new X509Certificate(anchor.certificatePem);
    if (cert.raw.equals(root.raw)) continue;
    if (anchor.notAfter && anchor.notAfter.getTime() <= now.getTime()) {
      changed = true;
      continue;
    }
    if (anchor.active) {
      changed = true;
      const lastLeafExpiry = now.getTime() + maxWorkloadTtlSeconds * 1000;
      const notAfter = new Date(Math.min(lastLeafExpiry, new Date(cert.validTo).getTime()));
      anchors.push({ certificatePem: anchor.certificatePem, notAfter, active: false });
    } else {
      anchors.push(anchor);
    }
  }
  const existing = current?.anchors.find((a) => new X509Certificate(a.certificatePem).raw.equals(root.raw));
  const signing: TrustAnchor = { certificatePem: rootPem, notAfter: new Date(root.validTo), active: true };
  if (!existing?.active || existing.notAfter?.getTime() !== signing.notAfter?.getTime()) changed = true;
  // The signing root first: readers that take one root take the right one.
  const next = { trustDomain, anchors: [signing, ...anchors] };
  return changed || !current ? next : current;
}

/** Options of {@link trustBundleRunner}. */
export interface TrustBundleRunnerOptions {
  bus: () => Bus;
  trustDomain: string;
  rootPem: () => string;
  maxWorkloadTtlSeconds: number;
  logger: Logger;
}

/**
 * Publishes the CA's root to `sextant-trust` at start. It runs before the
 * gRPC server, so a root is in the bundle before it signs anything. The
 * update is a compare-and-set loop: replicas starting together never lose
 * each other's anchors.
 */
export function trustBundleRunner(options: TrustBundleRunnerOptions): Runner {
  return {
    name: "trust-bundle",
    async start() {
      const bucket = await options.bus().bucket(Buckets.trust);
      const result = await bucket.update(trustBundleKey(options.trustDomain), (current) =>
        nextTrustBundle(current, options.trustDomain, options.rootPem(), options.maxWorkloadTtlSeconds),
      );
      options.logger.info(
        { trustDomain: options.trustDomain, changed: result.changed, revision: result.revision },
        "trust bundle published",
      );
    },
    async close() {},
  };
}
