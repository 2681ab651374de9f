/** A PEM block ending in exactly one newline, so that blocks can be concatenated into a valid bundle. */
export function withNewline(pem: string): string {
  return `${pem.trimEnd()}\n`;
}

/** PEM blocks concatenated into one bundle file (roots, or a chain). */
export function pemBundle(pems: readonly string[]): string {
  return pems.map(withNewline).join("");
}
