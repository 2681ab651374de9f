import type { MemberRecord } from "@sextant/bus";
import type { RequestHandler } from "express";

/**
 * GET /v1/members: every running control-plane process as it records itself
 * in sextant-members (service, version, instance, started), for `sextantctl
 * version`'s versions and replica counts. Any authenticated caller may read
 * it, as Kubernetes' /version: it names no config.
 */
export function membersRoute(members: () => Promise<MemberRecord[]>): RequestHandler {
  return async (_request, response) => {
    response.json({ members: await members() });
  };
}
