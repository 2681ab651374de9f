import {
  AnnotationError,
  defaultInjectionConfig,
  injectPod,
  type PodJson,
  type ProxyConfigResource,
  proxyConfigsOf,
} from "@sextant/webhook/inject";
import type { Command } from "commander";
import { stringify } from "yaml";
import { action, CommandError, ExitCode, exitOnUsageError } from "../ingest-client.js";
import { readManifests } from "../manifests.js";

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects from files, read defensively.
type Json = any;

/** Where each controller kind keeps its pod template (istioctl kube-inject's kinds). */
const TEMPLATE_PATHS: Readonly<Record<string, readonly string[]>> = {
  Deployment: ["spec", "template"],
  StatefulSet: ["spec", "template"],
  DaemonSet: ["spec", "template"],
  ReplicaSet: ["spec", "template"],
  ReplicationController: ["spec", "template"],
  Job: ["spec", "template"],
  CronJob: ["spec", "jobTemplate", "spec", "template"],
};

/**
 * `sextantctl kube-inject -f FILE`: the webhook's injection (the same pure
 * function) applied offline to Pods and the pod templates of Deployments,
 * StatefulSets, DaemonSets, ReplicaSets, ReplicationControllers, Jobs and
 * CronJobs; other documents pass through unchanged. ProxyConfigs among the
 * files are merged as the webhook merges the stored ones.
 */
export function registerKubeInject(program: Command): void {
  program
    .command("kube-inject")
    .description("inject the sidecar into the Pods and workloads of files, offline, and print them (YAML)")
    .requiredOption("-f, --filename <path...>", "files or directories of Kubernetes manifests, - for stdin")
    .option("--revision <revision>", "the injector's revision", "default")
    .addHelpText(
      "after",
      "\nExit codes: 0 printed, 1 a pod's injection annotations are invalid (nothing printed), 2 usage.",
    )
    .exitOverride(exitOnUsageError)
    .action(
      action(async (flags: { filename: string[]; revision: string }) => {
        const documents = await readManifests(flags.filename);
        if (documents.length === 0)
          throw new CommandError("no objects passed to kube-inject", ExitCode.usage);
        const config = defaultInjectionConfig({ revision: flags.revision });
        let proxyConfigs: ProxyConfigResource[];
        try {
          proxyConfigs = proxyConfigsOf(
            documents.map((d) => d.value),
            "default",
          );
        } catch (error) {
          throw new CommandError((error as Error).message);
        }
        const output = documents.map(({ value, file, line }) => {
          try {
            return stringify(injectObject(value as Json, config, proxyConfigs));
          } catch (error) {
            if (!(error instanceof AnnotationError)) throw error;
            const object = value as Json;
            throw new CommandError(
              `${file}:${line} (${object.kind} ${object.metadata?.name}): ${error.message}; fix the annotation`,
            );
          }
        });
        console.log(output.join("---\n").trimEnd());
      }),
    );
}

/** One document with its pod (or pod template) injected; documents without one are returned as they are. */
function injectObject(
  object: Json,
  config: ReturnType<typeof defaultInjectionConfig>,
  proxyConfigs: readonly ProxyConfigResource[],
): Json {
  if (typeof object !== "object" || object === null) return object;
  const namespace: string = object.metadata?.namespace || "default";
  if (object.kind === "Pod") return injectPod(object as PodJson, { namespace, proxyConfigs }, config).pod;
  const path = TEMPLATE_PATHS[object.kind];
  if (!path) return object;
  const result = structuredClone(object);
  const parent = path.slice(0, -1).reduce((node: Json, key) => node?.[key], result);
  const template = parent?.[path.at(-1)!];
  if (!template) return object;
  // The template's pod names its controller as a pod created from it would,
  // so the workload's name and owner are the controller's (istioctl uses the
  // controller's metadata too).
  const pod: PodJson = {
    ...template,
    metadata: {
      ...template.metadata,
      ownerReferences: [
        { apiVersion: object.apiVersion, kind: object.kind, name: object.metadata?.name, controller: true },
      ],
    },
  };
  const injected = injectPod(pod, { namespace, proxyConfigs }, config).pod;
  const { ownerReferences: _, ...metadata } = injected.metadata ?? {};
  parent[path.at(-1)!] = { ...injected, metadata };
  return result;
}
