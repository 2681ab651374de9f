import { readFile } from "node:fs/promises";

/**
 * The headers that authenticate discovery to ingest's API: `Authorization:
 * Bearer <token>`, the token being the content of tokenFile (in Kubernetes,
 * a projected service-account token). The file is read again on every call:
 * the kubelet rewrites a projected token before it expires, and a token read
 * once at start would stop working within hours. Calls are rare (one per
 * workload connection or removal), so a read each time costs nothing worth
 * caching. Without a file, no header: an ingest that does not authenticate
 * (API_AUTH=none) needs none.
 *
 * A missing or empty file throws, so that the caller's retry tries again
 * (the kubelet may not have written the token yet) rather than calling
 * ingest anonymously.
 */
export async function ingestAuthorization(tokenFile: string | undefined): Promise<Record<string, string>> {
  if (!tokenFile) return {};
  const token = (await readFile(tokenFile, "utf8")).trim();
  if (!token) throw new Error(`the token file ${tokenFile} (INGEST_TOKEN_FILE) is empty`);
  return { authorization: `Bearer ${token}` };
}
