export { Informer, type InformerOptions } from "./informer.js";
export { kubernetesAvailable, loadKubeConfig } from "./kubeconfig.js";
export * from "./retry.js";
