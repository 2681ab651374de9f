import { join } from "node:path";
import type { IdentitySnapshot, IdentitySource } from "@sextant/identity";
import type { Logger } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import { CERTIFICATE_FILES } from "../bootstrap/grpc-bootstrap.js";
import { type PreparedFile, prepareFile } from "../files/atomic-write.js";
import { pemBundle, withNewline } from "../util/pem.js";

/** The contents of the three files, as a proxyless app's file_watcher reads them. */
export interface CertificateFileContents {
  certChain: string;
  key: string;
  root: string;
}

/** The files' contents for a snapshot: the chain leaf first, every root of the bundle. */
export function certificateFileContents(snapshot: IdentitySnapshot): CertificateFileContents {
  return {
    certChain: withNewline(snapshot.certificate.certChainPem),
    key: withNewline(snapshot.certificate.privateKeyPem),
    root: pemBundle(snapshot.rootsPem),
  };
}

/** The files in the order they are put in place (see {@link writeCertificateFiles}), with their modes. */
const FILE_ORDER: ReadonlyArray<{ field: keyof CertificateFileContents; name: string; mode: number }> = [
  { field: "root", name: CERTIFICATE_FILES.root, mode: 0o644 },
  { field: "key", name: CERTIFICATE_FILES.key, mode: 0o600 },
  { field: "certChain", name: CERTIFICATE_FILES.certChain, mode: 0o644 },
];

/**
 * Writes the files that differ from `previous` (all of them when it is
 * undefined) and returns what is now on disk.
 *
 * Each file is written whole under a temporary name, then renamed over the
 * old one, so a reader never sees half a file. Two files cannot be replaced
 * in one step, though, and grpc's file_watcher reads cert-chain.pem and
 * key.pem with two separate opens: if its opens fall on either side of the
 * renames it gets the old certificate with the new key (or the reverse), and
 * keeps that pair until its next refresh. So every temporary file is written
 * first, and the renames then run back to back, synchronously: the window is
 * the few microseconds between two rename calls, not the time to write a
 * file. The root goes first, so the bundle that verifies the new certificate
 * is in place before the certificate is. A trust bundle change alone rewrites
 * only root-cert.pem, with no window at all. (Kubernetes' symlink swap would
 * not close the window either: the reader's two opens can still straddle it.)
 */
export function writeCertificateFiles(
  dir: string,
  contents: CertificateFileContents,
  previous?: CertificateFileContents,
): CertificateFileContents {
  const changed = FILE_ORDER.filter(({ field }) => previous?.[field] !== contents[field]);
  const prepared: PreparedFile[] = [];
  try {
    for (const { field, name, mode } of changed)
      prepared.push(prepareFile(join(dir, name), contents[field], mode));
  } catch (error) {
    for (const file of prepared) file.abort();
    throw error;
  }
  for (const file of prepared) file.commit();
  return contents;
}

/** Options of {@link certificateFilesRunner}. */
export interface CertificateFilesOptions {
  /** OUTPUT_CERTS. */
  dir: string;
  identity: () => IdentitySource;
  logger: Logger;
}

/**
 * Keeps cert-chain.pem, key.pem and root-cert.pem under OUTPUT_CERTS equal
 * to the workload's identity: written at start, rewritten on every rotation
 * and trust bundle change. A failed write is logged and retried with the
 * next change; it does not stop the agent (Envoy's SDS does not need the
 * files).
 */
export function certificateFilesRunner(options: CertificateFilesOptions): Runner {
  const { dir, logger } = options;
  let written: CertificateFileContents | undefined;
  let unsubscribe: (() => void) | undefined;
  const write = (snapshot: IdentitySnapshot) => {
    written = writeCertificateFiles(dir, certificateFileContents(snapshot), written);
    logger.info(
      { dir, spiffeId: snapshot.certificate.spiffeId, notAfter: snapshot.certificate.notAfter },
      "certificate files written",
    );
  };
  return {
    name: "certificate-files",
    async start() {
      const identity = options.identity();
      try {
        write(identity.current());
      } catch (error) {
        throw new Error(
          `OUTPUT_CERTS ${dir}: cannot write the certificate files: ${(error as Error).message}`,
        );
      }
      unsubscribe = identity.onChange((snapshot) => {
        try {
          write(snapshot);
        } catch (error) {
          logger.error(
            { dir, err: error },
            "cannot rewrite the certificate files; they keep the previous identity",
          );
        }
      });
    },
    async close() {
      unsubscribe?.();
    },
  };
}
