import { readFileSync } from "node:fs";
import { AdmissionregistrationV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";

/** Options of {@link CaBundlePatcher}. */
export interface CaBundlePatcherOptions {
  kubeConfig: KubeConfig;
  /** The serving certificate chain (PEM); its last certificate is the CA the API server must trust. */
  certFile: string;
  /** MutatingWebhookConfiguration to patch (istiod: istio-sidecar-injector), if any. */
  mutatingName?: string;
  /** ValidatingWebhookConfiguration to patch (istiod: istio-validator-<namespace>), if any. */
  validatingName?: string;
  /** How often the certificate file is checked, so a rotated CA reaches the API server. */
  intervalMs: number;
  logger: Logger;
}

/** The CA bundle (base64 of the PEM) for a serving chain: its last certificate. */
export function caBundleOf(chainPem: string): string {
  const blocks = chainPem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  const root = blocks.at(-1);
  if (!root) throw new Error("the serving certificate file holds no PEM certificate");
  return Buffer.from(`${root}\n`).toString("base64");
}

type WebhookConfiguration = { webhooks?: Array<{ clientConfig: { caBundle?: string } }> };

/**
 * CaBundlePatcher keeps the `caBundle` of the webhook's Mutating and
 * Validating webhook configurations equal to the CA of its serving
 * certificate, as istiod does, so the API server trusts /inject and
 * /validate. It writes only when a bundle differs (read, compare, replace
 * with the read resourceVersion; a conflict is retried on the next tick),
 * and rechecks every interval, which also repairs a bundle someone reset.
 */
export class CaBundlePatcher implements Runner {
  readonly name = "ca-bundle-patcher";
  readonly #api: AdmissionregistrationV1Api;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> = Promise.resolve();

  constructor(private readonly options: CaBundlePatcherOptions) {
    this.#api = options.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  }

  async start(): Promise<void> {
    await this.sync();
    this.#timer = setInterval(() => {
      this.#running = this.sync();
    }, this.options.intervalMs);
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }

  /** Patches both configurations if their bundles differ; failures are logged and retried on the next tick. */
  async sync(): Promise<void> {
    let bundle: string;
    try {
      bundle = caBundleOf(readFileSync(this.options.certFile, "utf8"));
    } catch (error) {
      this.options.logger.warn({ err: error }, "cannot read the serving certificate for the CA bundle");
      return;
    }
    const { mutatingName, validatingName } = this.options;
    if (mutatingName) {
      await this.patch("MutatingWebhookConfiguration", mutatingName, bundle, async () => {
        const current = await this.#api.readMutatingWebhookConfiguration({ name: mutatingName });
        return {
          current,
          replace: (body) => this.#api.replaceMutatingWebhookConfiguration({ name: mutatingName, body }),
        };
      });
    }
    if (validatingName) {
      await this.patch("ValidatingWebhookConfiguration", validatingName, bundle, async () => {
        const current = await this.#api.readValidatingWebhookConfiguration({ name: validatingName });
        return {
          current,
          replace: (body) => this.#api.replaceValidatingWebhookConfiguration({ name: validatingName, body }),
        };
      });
    }
  }

  private async patch<T extends WebhookConfiguration>(
    kind: string,
    name: string,
    bundle: string,
    read: () => Promise<{ current: T; replace: (body: T) => Promise<unknown> }>,
  ): Promise<void> {
    try {
      const { current, replace } = await read();
      const webhooks = current.webhooks ?? [];
      if (webhooks.every((webhook) => webhook.clientConfig.caBundle === bundle)) return;
      for (const webhook of webhooks) webhook.clientConfig.caBundle = bundle;
      await replace(current);
      this.options.logger.info({ kind, name, webhooks: webhooks.length }, "patched the webhook CA bundle");
    } catch (error) {
      this.options.logger.warn({ kind, name, err: error }, "cannot patch the webhook CA bundle; will retry");
    }
  }
}
