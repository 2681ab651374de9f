# syntax=docker/dockerfile:1
# Every Sextant image, one service at a time. The build context is the
# repository root, SERVICE the package's short name:
#   docker build --build-arg SERVICE=push -t sextant/push:dev .
# SERVICE is ingest, discovery, push, ca, webhook or agent, or bookinfo for
# the demo's mesh workloads (libs/bookinfo). The sidecar image is a target:
#   docker build --build-arg SERVICE=agent --target proxy -t sextant/proxy:0.0.0 .
# compose.yaml builds each image this way; test-e2e/test/compose.test.ts
# checks this file (stages, versions, user, ports, healthcheck) without an
# engine.
ARG NODE_IMAGE=node:20-bookworm-slim
ARG SERVICE

# pnpm as package.json's packageManager pins it, turbo as pnpm-workspace.yaml's
# catalog does (the test compares both), so the image builds what CI builds.
FROM ${NODE_IMAGE} AS tools
ENV TURBO_TELEMETRY_DISABLED=1
RUN npm install -g --no-fund --no-audit pnpm@10.34.9 turbo@2.11.11

# The workspace cut down to @sextant/${SERVICE} and what it depends on, so
# that a change in another service neither invalidates these layers nor
# ships in this image.
FROM tools AS prune
ARG SERVICE
RUN test -n "${SERVICE}" || { echo "build with --build-arg SERVICE=<name>" >&2; exit 1; }
WORKDIR /src
COPY . .
RUN turbo prune @sextant/${SERVICE} --docker --out-dir /out

FROM tools AS build
ARG SERVICE
WORKDIR /src
# Manifests and the pruned lockfile first: this layer stays cached until a
# dependency of the closure changes. devDependencies are installed too,
# because @sextant/proto generates its code at build time with buf, ts-proto
# and the Envoy protos of @grpc/grpc-js-xds (all devDependencies).
COPY --from=prune /out/json/ ./
RUN --mount=type=cache,id=sextant-pnpm-store,target=/pnpm/store \
    pnpm install --frozen-lockfile --store-dir /pnpm/store
COPY --from=prune /out/full/ ./
# turbo prune copies packages only: @sextant/proto's generator reads the
# root's proto/ (../../proto), and every tsconfig extends the root's base.
COPY proto ./proto
COPY tsconfig.base.json tsconfig.source.json ./
RUN pnpm turbo run build --filter @sextant/${SERVICE}... --output-logs=errors-only
# --legacy: pnpm 10's default deploy needs inject-workspace-packages=true,
# which would change how every workspace package links (and the lockfile);
# the legacy deploy copies the built workspace packages as they are.
RUN --mount=type=cache,id=sextant-pnpm-store,target=/pnpm/store \
    pnpm deploy --filter @sextant/${SERVICE} --prod --legacy --store-dir /pnpm/store /app

# What every image shares: a fixed non-root uid (so that volumes and the
# Envoy sidecar in compose.yaml can name it), the deployed package in /app,
# owned by root (the process reads its code and never writes it), and /ready
# as the healthcheck on the service's HTTP_PORT, which each stage below sets
# to its default (slim images have no curl: node's fetch, failing on a
# refused connection too).
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
RUN groupadd --gid 10001 sextant \
  && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /app --shell /usr/sbin/nologin sextant
WORKDIR /app
COPY --from=build /app /app
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.HTTP_PORT}/ready`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/main.js"]

# One stage per image, named after SERVICE: what differs between services.
# Ports: each service's contract (services/<name>/src/contract.ts).

FROM runtime AS ingest
ENV HTTP_PORT=8080
EXPOSE 8080
USER 10001:10001

FROM runtime AS discovery
ENV HTTP_PORT=15015
EXPOSE 15015
USER 10001:10001

FROM runtime AS push
RUN install -d -o 10001 -g 10001 -m 0750 /var/run/secrets/istio /var/run/secrets/tokens
# Istio's absolute paths; the relative defaults would resolve under /app.
ENV CA_ROOT_CERT=/var/run/secrets/istio/root-cert.pem \
    TOKEN_FILE=/var/run/secrets/tokens/istio-token \
    HTTP_PORT=15014
EXPOSE 15010 15012 15014
USER 10001:10001

FROM runtime AS ca
RUN install -d -o 10001 -g 10001 -m 0750 /var/lib/sextant/cacerts /var/run/secrets/istio
# The root and signing key live in a volume mounted here (Istio's cacerts layout);
# the relative default would resolve under /app, which the service's user cannot write.
ENV CA_CERTS_DIR=/var/lib/sextant/cacerts \
    HTTP_PORT=15016
EXPOSE 8060 15016
USER 10001:10001

FROM runtime AS webhook
ENV HTTP_PORT=15018
EXPOSE 15017 15018
USER 10001:10001

FROM runtime AS agent
RUN install -d -o 10001 -g 10001 -m 0750 /etc/istio/proxy /var/lib/istio/data /var/run/secrets/workload-spiffe-uds /var/run/secrets/istio /var/run/secrets/tokens
# Istio's absolute paths (istio-proxy runs from /); the relative defaults would
# resolve under /app, which the agent's user cannot write.
ENV CA_ROOT_CERT=/var/run/secrets/istio/root-cert.pem \
    TOKEN_FILE=/var/run/secrets/tokens/istio-token \
    SDS_SOCKET=/var/run/secrets/workload-spiffe-uds/socket \
    XDS_SOCKET=/etc/istio/proxy/XDS \
    OUTPUT_CERTS=/var/lib/istio/data \
    POD_LABELS_FILE=/etc/istio/pod/labels \
    POD_ANNOTATIONS_FILE=/etc/istio/pod/annotations \
    HTTP_PORT=15020
# `agent bootstrap envoy --output <file>` (and `agent bootstrap grpc`) from any
# working directory, as compose's one-shot bootstrap containers run it.
RUN printf '#!/bin/sh\nexec node /app/dist/main.js "$@"\n' > /usr/local/bin/agent \
  && chmod 0755 /usr/local/bin/agent
EXPOSE 15020
USER 10001:10001

# Envoy for the proxy image: the official image, pinned by digest so that a
# re-pushed tag cannot change what ships. The digest is v1.34.10's as found
# pinned in public material; it was not checked against the registry here
# (no engine, no registry access): verify it with
# `docker buildx imagetools inspect envoyproxy/envoy:v1.34.10` before a release.
FROM envoyproxy/envoy:v1.34.10@sha256:3343a698c1bdfdbb174f1bd907dea789d728692f4f99a943e3e6f0bc5ef6513f AS envoy

# The sidecar image `sextant/proxy` (Istio's proxyv2): the agent image plus
# Envoy at Istio's path, run as Istio's proxy uid 1337, whose traffic the
# iptables rules leave alone. The entrypoint is the agent, so a pod's
# `args: [proxy, sidecar, ...]` and the init container's `[istio-iptables, ...]`
# are its subcommands; iptables (iptables-restore) is for the latter, which
# runs as root with NET_ADMIN. Built with the agent's closure:
#   docker build --build-arg SERVICE=agent --target proxy -t sextant/proxy:<version> .
FROM agent AS proxy
USER root
COPY --from=envoy /usr/local/bin/envoy /usr/local/bin/envoy
RUN apt-get update \
  && apt-get install -y --no-install-recommends iptables iproute2 \
  && rm -rf /var/lib/apt/lists/* \
  && groupadd --gid 1337 istio-proxy \
  && useradd --uid 1337 --gid 1337 --no-create-home --home-dir /app --shell /usr/sbin/nologin istio-proxy \
  && chown 1337:1337 /etc/istio/proxy /var/lib/istio/data /var/run/secrets/workload-spiffe-uds /var/run/secrets/istio /var/run/secrets/tokens
# The agent (15020), Envoy's health (15021) and Prometheus (15090) ports of Istio's sidecar.
EXPOSE 15021 15090
USER 1337:1337
ENTRYPOINT ["/usr/local/bin/agent"]
# No default subcommand (the runtime's `node dist/main.js` would become its arguments): the pod gives them.
CMD []

# The demo's Bookinfo-style workloads (libs/bookinfo: mesh-workload.js, a
# proxyless @grpc/grpc-js-xds server or client); no HTTP port to check.
FROM runtime AS bookinfo
HEALTHCHECK NONE
USER 10001:10001
CMD ["node", "dist/mesh-workload.js"]

# The image: the stage named SERVICE (the proxy image is the `proxy` target, above).
FROM ${SERVICE}
