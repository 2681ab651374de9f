#!/usr/bin/env bash
# Times a cold install and build, and warm rebuilds, in a fresh clone with an
# empty pnpm store, and prints a table for CONTRIBUTING.md.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TURBO_TELEMETRY_DISABLED=1

git clone -q "$repo" "$work/sextant"
cd "$work/sextant"
seconds() { local start end; start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N); awk -v a="$start" -v b="$end" 'BEGIN { print b - a }'; }

install=$(seconds pnpm install --frozen-lockfile --store-dir "$work/store")
build=$(seconds pnpm exec turbo run build)
cached=$(seconds pnpm exec turbo run build)
forced=$(seconds pnpm exec turbo run build --force)
printf "\n// measure-build: a content change\n" >> libs/bus/src/keys.ts
incremental=$(seconds pnpm exec turbo run build)

printf '| step | seconds |\n|---|---|\n'
printf '| cold `pnpm install --frozen-lockfile` (empty store) | %.1f |\n' "$install"
printf '| cold build (codegen + tsc, no turbo cache) | %.1f |\n' "$build"
printf '| warm rebuild, nothing changed (turbo cache) | %.1f |\n' "$cached"
printf '| warm rebuild after editing libs/bus (its dependents rebuild) | %.1f |\n' "$incremental"
printf '| full rebuild ignoring the cache (`--force`) | %.1f |\n' "$forced"
printf '\n%s, %s cores, node %s, %s\n' "$(date -u +%F)" "$(nproc)" "$(node --version)" "$(uname -m)"
