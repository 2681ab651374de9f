/**
 * A VM running two versions of orders behind one address: a ServiceEntry
 * for orders.shop.example (HTTP on 80, selecting app orders; vip, if given,
 * as its address) and the WorkloadEntries orders-v1 and orders-v2, both at
 * address, on ports 8081 and 8082. Istio keys an endpoint by namespace,
 * workload, address and service port (pilot/pkg/model/service.go
 * IstioEndpoint.Key) and maps each WorkloadEntry's port by name
 * (serviceentry/conversion.go convertWorkloadInstanceToServiceInstance):
 * two endpoints, not one. YAML for ingest.
 */
export function ordersOnOneAddressYaml(address: string, vip?: string): string {
  return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: orders, namespace: shop}
spec:
  hosts: [orders.shop.example]
${vip ? `  addresses: [${vip}]\n` : ""}  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  workloadSelector: {labels: {app: orders}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: orders-v1, namespace: shop}
spec: {address: ${address}, ports: {http: 8081}, labels: {app: orders, version: v1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: orders-v2, namespace: shop}
spec: {address: ${address}, ports: {http: 8082}, labels: {app: orders, version: v2}}
`;
}
