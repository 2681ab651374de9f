import { delimiter } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";

/**
 * The KubeConfig to use: the files of a KUBECONFIG value (a path list, later
 * files merged in and the first current-context kept, as kubectl reads it) if one is given, else client-node's
 * defaults (KUBECONFIG, ~/.kube/config, then the in-cluster service account).
 */
export function loadKubeConfig(kubeconfig?: string): KubeConfig {
  const config = new KubeConfig();
  const files = (kubeconfig ?? "").split(delimiter).filter((file) => file);
  if (files.length === 0) {
    config.loadFromDefault();
    return config;
  }
  config.loadFromFile(files[0] as string);
  for (const file of files.slice(1)) {
    const more = new KubeConfig();
    more.loadFromFile(file);
    // kubectl keeps the first current-context set; client-node's default is the last.
    config.mergeConfig(more, Boolean(config.currentContext));
  }
  return config;
}

/**
 * True where a Kubernetes API server is to be had without asking: a
 * kubeconfig was given, or the process runs in a pod (the kubelet sets
 * KUBERNETES_SERVICE_HOST), so a local mesh without Kubernetes starts without it.
 */
export function kubernetesAvailable(kubeconfig?: string, env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(kubeconfig || env.KUBERNETES_SERVICE_HOST);
}
