import type { ProxyKind } from "../model/proxy.js";
import type { Generator } from "../translate/generator.js";

/** A ts-proto message codec, as far as /debug/config_dump needs it. */
export interface DebugCodec {
  decode(bytes: Uint8Array): unknown;
  toJSON(message: never): unknown;
}

/**
 * Everything push knows about one xDS type, in one place: adding a type is
 * its generators and one entry, and nothing in the server changes.
 */
export interface XdsType {
  readonly typeUrl: string;
  /** Istio's short name for the type, the `type` label of the metrics (lds, rds, cds, eds). */
  readonly label: string;
  /** Decodes a resource of the type for /debug/config_dump. */
  readonly codec: DebugCodec;
  /**
   * True if an empty first subscription means "*" (Envoy's legacy wildcard,
   * for listeners and clusters); otherwise it means "none".
   */
  readonly wildcardWhenEmpty: boolean;
  /**
   * True if a SotW push that is not a full one (endpoints or Secrets changed)
   * carries only the resources that changed: allowed for the types whose
   * clients keep a subscribed resource a response leaves out (EDS, RDS; never
   * listeners or clusters, where a response is the whole set).
   */
  readonly changedOnlyInSotw: boolean;
  /** The generator for each kind of proxy that is served the type; other kinds' requests go unanswered. */
  readonly generators: Partial<Record<ProxyKind, Generator>>;
}

/**
 * The xDS types push serves, in push order: a push sends a proxy's types in
 * the order of the table, so every type has a place in it by construction.
 * The server reads everything type-specific from here (as go-control-plane's
 * server takes its cache), and `main.ts` hands it the table.
 */
export class XdsTypeTable {
  readonly #byUrl: ReadonlyMap<string, XdsType>;

  constructor(readonly types: readonly XdsType[]) {
    const byUrl = new Map<string, XdsType>();
    for (const type of types) {
      if (byUrl.has(type.typeUrl)) throw new Error(`xDS type ${type.typeUrl} is in the table twice`);
      byUrl.set(type.typeUrl, type);
    }
    this.#byUrl = byUrl;
  }

  /** The generator of a type for a kind of proxy; undefined if that kind is not served the type. */
  generator(kind: ProxyKind, typeUrl: string): Generator | undefined {
    return this.#byUrl.get(typeUrl)?.generators[kind];
  }

  /** The type's metric label; for a type not in the table (never served), the last part of its URL. */
  label(typeUrl: string): string {
    return this.#byUrl.get(typeUrl)?.label ?? typeUrl.slice(typeUrl.lastIndexOf(".") + 1);
  }

  /** True if an empty first subscription to the type is a wildcard. */
  wildcardWhenEmpty(typeUrl: string): boolean {
    return this.#byUrl.get(typeUrl)?.wildcardWhenEmpty ?? false;
  }

  /** True if a SotW push that is not full sends only the type's changed resources. */
  changedOnlyInSotw(typeUrl: string): boolean {
    return this.#byUrl.get(typeUrl)?.changedOnlyInSotw ?? false;
  }
}
