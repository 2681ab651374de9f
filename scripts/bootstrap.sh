#!/usr/bin/env bash
# Installs whatever the two README commands need and is missing, then builds:
#   pnpm (from npm), nats-server (apt-get when root), the workspace (frozen
#   lockfile) and the build. Safe to run again: each step checks first.
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

pnpm install --frozen-lockfile --reporter=append-only
pnpm exec turbo run build --output-logs=errors-only
