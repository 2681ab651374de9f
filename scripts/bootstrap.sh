#!/usr/bin/env bash
# Installs whatever the two README commands need and is missing, then builds:
#   pnpm (from npm), nats-server (apt-get when root), for `npm test` also
#   python3-grpcio (gRPC C-core for the system Python: the second proxyless
#   client of test-e2e) and, as root, iptables, iproute2 and dnsutils (the
#   agent's iptables and DNS tests), the workspace (frozen lockfile) and the build.
#   Safe to run again: each step checks first.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1

pnpm_version=$(node -p "require('./package.json').packageManager.split('@')[1]")
if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null | cut -d. -f1)" != "${pnpm_version%%.*}" ]; then
  echo "sextant: installing pnpm@${pnpm_version} from npm"
  npm install -g "pnpm@${pnpm_version}" --no-fund --no-audit
fi

if ! command -v nats-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "sextant: installing nats-server with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null
  else
    echo "sextant: nats-server (2.9 or later, with JetStream) is required and was not found." >&2
    echo "  On Debian/Ubuntu: sudo apt-get install -y nats-server" >&2
    echo "  Elsewhere: see https://docs.nats.io/running-a-nats-service/introduction/installation" >&2
    exit 1
  fi
fi

# test-e2e/test/proxyless-ccore.test.ts runs Python workloads on gRPC C-core
# with the system Python (a pyenv or venv python3 on PATH would not see apt's
# package). Only the tests need it: npm sets npm_lifecycle_event=test for `npm test`.
if [ "${npm_lifecycle_event:-}" = test ] && ! /usr/bin/python3 -c 'import grpc' >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "sextant: installing python3-grpcio with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-grpcio >/dev/null
  else
    echo "sextant: gRPC C-core for Python (python3-grpcio, 1.51 or later) is required by the tests and was not found." >&2
    echo "  On Debian/Ubuntu: sudo apt-get install -y python3-grpcio" >&2
    exit 1
  fi
fi

# services/agent/test/iptables-netns.test.ts applies `agent iptables` rules in
# network namespaces it creates (as root), and the DNS tests query with dig.
# Without root that suite skips itself, so only root installs what is missing.
if [ "${npm_lifecycle_event:-}" = test ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=()
  command -v iptables-restore >/dev/null 2>&1 || missing+=(iptables)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  command -v dig >/dev/null 2>&1 || missing+=(dnsutils)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "sextant: installing ${missing[*]} with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

pnpm install --frozen-lockfile --reporter=append-only
pnpm exec turbo run build --output-logs=errors-only
