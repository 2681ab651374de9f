#!/usr/bin/env bash
# Every check `npm test` runs: lint, type checks and each package's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1
export OTEL_SDK_DISABLED=true
pnpm exec biome check .
pnpm exec turbo run lint typecheck --output-logs=errors-only
# Packages' suites start their own nats-server on random ports; run them one
# package at a time so the two cores are not oversubscribed.
pnpm exec turbo run test --concurrency=1
