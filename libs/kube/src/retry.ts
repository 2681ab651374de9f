// The helpers that need no Kubernetes client, on their own entry point
// (@sextant/kube/retry): services and libraries that never talk to an API
// server import them without loading @kubernetes/client-node.
export { Backoff, type BackoffPolicy, type RetryOptions, retry } from "./backoff.js";
export { WorkQueue, type WorkQueueOptions } from "./work-queue.js";
