import type { MeshProxy } from "../model/proxy.js";
import type { PushContext } from "../model/push-context.js";
import { selectorMatches } from "../model/security.js";

interface SourceLabelSelectors {
  /** Every distinct non-empty `sourceLabels` of the snapshot's VirtualService matches. */
  readonly selectors: readonly Readonly<Record<string, string>>[];
  /** The selection by the proxy's labels, memoised by their key. */
  readonly byLabels: Map<string, string>;
}

const memo = new WeakMap<PushContext, SourceLabelSelectors>();

/**
 * What of a proxy's labels its outbound routes and listeners depend on:
 * which of the VirtualServices' `sourceLabels` select it (istiod's
 * SelectVirtualServices by source labels), as a string for cache keys.
 * Empty while no VirtualService matches on source labels, so proxies of
 * different workloads share route configurations and listeners; two
 * proxies that the same selectors select share them too.
 */
export function sourceLabelsSelection(push: PushContext, proxy: Pick<MeshProxy, "labels">): string {
  let index = memo.get(push);
  if (!index) {
    index = { selectors: collectSelectors(push), byLabels: new Map() };
    memo.set(push, index);
  }
  if (index.selectors.length === 0) return "";
  const labels = labelsKey(proxy.labels);
  let selection = index.byLabels.get(labels);
  if (selection === undefined) {
    selection = index.selectors
      .map((selector) => (selectorMatches(selector, proxy.labels) ? "1" : "0"))
      .join("");
    index.byLabels.set(labels, selection);
  }
  return selection;
}

function collectSelectors(push: PushContext): Readonly<Record<string, string>>[] {
  const seen = new Map<string, Readonly<Record<string, string>>>();
  for (const { spec } of push.virtualServices) {
    for (const route of [...spec.http, ...spec.tcp, ...spec.tls]) {
      for (const match of route.match) {
        const selector = match.sourceLabels;
        if (!selector || Object.keys(selector).length === 0) continue;
        seen.set(labelsKey(selector), selector);
      }
    }
  }
  return [...seen.values()];
}

/** Labels as a stable string (sorted by name). */
export function labelsKey(labels: Readonly<Record<string, string>>): string {
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
