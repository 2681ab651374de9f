// @peculiar/x509 loads tsyringe, which refuses to load without the Reflect
// metadata API: the polyfill must be imported first. Nothing else is set up
// here: the library finds node's WebCrypto (globalThis.crypto) by itself.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

/** @peculiar/x509, with the polyfill it needs loaded before it. */
export { x509 };
