// How push and the agent configure an identity: the files they read and Istio's variable names.
import { readFile } from "node:fs/promises";
import type { WorkloadIdentityOptions } from "./workload-identity.js";

/**
 * A token file's content (TOKEN_FILE), read fresh for every request because
 * projected service-account tokens rotate; undefined when there is no file,
 * since renewals authenticate with the certificate itself.
 */
export async function readTokenFile(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, "utf8")).trim() || undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`TOKEN_FILE ${path}: ${(error as Error).message}`);
  }
}

/** The root that verifies ca's serving certificate (CA_ROOT_CERT); the error names the file and what it is for. */
export async function readCaRootFile(path: string, consequence = ""): Promise<string> {
  return readFile(path, "utf8").catch((error: Error) => {
    throw new Error(
      `CA_ROOT_CERT ${path}: cannot read the root that verifies ca (${error.message})${consequence ? `; ${consequence}` : ""}`,
    );
  });
}

/** The settings (Istio's variable names, already parsed) a workload identity is configured by. */
export interface IdentitySettings {
  CA_ADDR: string;
  TRUST_DOMAIN: string;
  POD_NAMESPACE: string;
  SERVICE_ACCOUNT: string;
  TOKEN_FILE: string;
  /** Seconds. */
  SECRET_TTL: number;
  SECRET_GRACE_PERIOD_RATIO?: number;
  SECRET_GRACE_PERIOD_RATIO_JITTER?: number;
}

/** WorkloadIdentity's options from those settings: the one mapping push and the agent share. */
export function identityOptions(
  settings: IdentitySettings,
  parts: Pick<WorkloadIdentityOptions, "caRootPem" | "trust" | "logger">,
): WorkloadIdentityOptions {
  return {
    caAddress: settings.CA_ADDR,
    trustDomain: settings.TRUST_DOMAIN,
    namespace: settings.POD_NAMESPACE,
    serviceAccount: settings.SERVICE_ACCOUNT,
    token: () => readTokenFile(settings.TOKEN_FILE),
    ttlSeconds: settings.SECRET_TTL,
    ...(settings.SECRET_GRACE_PERIOD_RATIO !== undefined
      ? { gracePeriodRatio: settings.SECRET_GRACE_PERIOD_RATIO }
      : {}),
    ...(settings.SECRET_GRACE_PERIOD_RATIO_JITTER !== undefined
      ? { gracePeriodRatioJitter: settings.SECRET_GRACE_PERIOD_RATIO_JITTER }
      : {}),
    ...parts,
  };
}
