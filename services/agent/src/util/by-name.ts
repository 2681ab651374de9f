/**
 * Orders [name, value] entries by name in code-unit order: unlike
 * localeCompare it is the same on every machine, so generated files are
 * stable byte for byte.
 */
export function byName(a: readonly [string, unknown], b: readonly [string, unknown]): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}
