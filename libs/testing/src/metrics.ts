/**
 * The value of one sample in Prometheus text: the first line of metric
 * `name` whose labels include every one given (as `key="value"`). NaN when
 * there is none, so a missing metric fails any `> 0` check.
 */
export function metricValue(text: string, name: string, ...labels: string[]): number {
  const line = text
    .split("\n")
    .find(
      (l) =>
        (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && labels.every((label) => l.includes(label)),
    );
  return Number(line?.split(" ").pop());
}
