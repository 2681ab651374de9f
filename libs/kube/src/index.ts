export { Backoff, type BackoffPolicy, type RetryOptions, retry } from "./backoff.js";
export { Informer, type InformerOptions } from "./informer.js";
export { kubernetesAvailable, loadKubeConfig } from "./kubeconfig.js";
export { WorkQueue, type WorkQueueOptions } from "./work-queue.js";
