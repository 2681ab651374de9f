#!/usr/bin/env bash
# Every check `npm test` runs: lint, unused files, dependencies and exports
# (knip), type checks and each package's tests, then one closing line with the
# totals of all the packages' test runs.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1
export OTEL_SDK_DISABLED=true

pnpm exec biome check .
# Unused files, dependencies and exports (knip.jsonc says where the entry
# points are); then, from production code alone, that each package's
# dependencies are exactly what its src/ imports at run time.
pnpm exec knip --no-config-hints
pnpm exec knip --no-config-hints --production --strict --dependencies
pnpm exec turbo run lint typecheck --output-logs=errors-only

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Suites start their own nats-server and processes on random ports; one
# package at a time keeps the two cores of a CI machine from thrashing.
status=0
pnpm exec turbo run test --concurrency=1 --continue --output-logs=full 2>&1 | tee "$log" || status=$?

# node's test runner ends each package's run with "# pass N", "# fail N" and
# "# cancelled N"; a cancelled test (its file's time limit, a failed hook)
# counts as a failure.
passed=$(grep -E ':test: # pass [0-9]+$' "$log" | awk '{ sum += $NF } END { print sum + 0 }')
failed=$(grep -E ':test: # (fail|cancelled) [0-9]+$' "$log" | awk '{ sum += $NF } END { print sum + 0 }')
# A skipped test or suite is reported as "ok N - name # SKIP reason" (node's
# own "# skipped" count leaves out a suite skipped as a whole): print each,
# with its reason (e.g. the upstream compatibility suite, where Istio's
# samples are absent), and count them.
skips=$(grep -E ':test: +ok [0-9]+ - .* # SKIP' "$log" | sed -E 's/^[^:]+:test: +//' || true)
skipped=$(printf '%s' "$skips" | grep -c . || true)
echo
if [ -n "$skips" ]; then printf '%s\n' "$skips"; fi
# Each failed or cancelled test again, with the first line of its error, so
# that the end of a long log (all a CI summary may keep) names what failed.
awk '/:test: +not ok [0-9]+ - / { sub(/^[^:]+:test: +/, ""); print; want = 1; next }
     want == 2 { sub(/^[^:]+:test: +/, ""); print "      " $0; want = 0; next }
     want && /:test: +error: / { sub(/^[^:]+:test: +/, ""); print "    " $0; want = ($0 ~ /error: [|>]-?$/) ? 2 : 0 }' "$log"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
if [ "$status" -eq 0 ] && [ "$failed" -ne 0 ]; then status=1; fi
exit "$status"
