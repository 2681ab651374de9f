/** The client's version (the package's), printed by `version`. */
export const CLIENT_VERSION = "0.0.0";
