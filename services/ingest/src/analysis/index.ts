/**
 * Ingest's analysis as a library, for offline use (sextantctl analyze -f):
 * the cross-resource analyzers and the apply's parse-and-validate step, the
 * same functions the service runs on its stored snapshot.
 */
export { prepareDocuments } from "../apply/prepare.js";
export { type AnalysisInput, analyze } from "./analyzers.js";
export type { AnalysisWorkload, SecretPresence } from "./gateway-analyzers.js";
export { levelName } from "./report.js";
