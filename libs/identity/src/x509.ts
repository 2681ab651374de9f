// @peculiar/x509 registers its providers through tsyringe, which needs the
// Reflect metadata API: load the polyfill before it.
import "reflect-metadata";
import { webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** @peculiar/x509, ready to use with node's WebCrypto. */
export { x509 };
