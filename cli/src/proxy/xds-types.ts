/** The xDS types proxy-status and proxy-config show: istioctl's column name, its plural, its type URL. */
export const XDS_COLUMNS = [
  { column: "CDS", title: "Clusters", typeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster" },
  { column: "LDS", title: "Listeners", typeUrl: "type.googleapis.com/envoy.config.listener.v3.Listener" },
  {
    column: "EDS",
    title: "Endpoints",
    typeUrl: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
  },
  { column: "RDS", title: "Routes", typeUrl: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration" },
  { column: "NDS", title: "Name tables", typeUrl: "type.googleapis.com/istio.networking.nds.v1.NameTable" },
  {
    column: "SDS",
    title: "Secrets",
    typeUrl: "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
  },
] as const;

/** Columns shown only when some proxy subscribes to them (istioctl shows its optional ECDS the same way). */
export const OPTIONAL_COLUMNS: ReadonlySet<string> = new Set(["NDS", "SDS"]);

/** A type URL's title (Clusters, Listeners, ...), or the URL itself. */
export function typeTitle(typeUrl: string): string {
  return XDS_COLUMNS.find((type) => type.typeUrl === typeUrl)?.title ?? typeUrl;
}
