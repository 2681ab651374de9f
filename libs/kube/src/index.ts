export { Informer, type InformerOptions } from "./informer.js";
export { kubernetesAvailable, loadKubeConfig } from "./kubeconfig.js";
export * from "./retry.js";
export { type CustomResource, customResourceServed, type ServedOptions } from "./served.js";
