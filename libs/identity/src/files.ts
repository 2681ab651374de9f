import { readFile } from "node:fs/promises";

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
