#!/usr/bin/env bash
# The one test command (README, .ci/run): sync check, lint, typecheck and every project's tests against one
# shared real test bed, then a single closing line "N passed, N failed[, N skipped]".
set -uo pipefail
cd "$(dirname "$0")/../.."
export NX_DAEMON="${NX_DAEMON:-false}" NX_NO_CLOUD=true NX_TUI=false NX_SKIP_NX_CACHE="${NX_SKIP_NX_CACHE:-true}"

[ -d node_modules ] || npm ci --no-audit --no-fund || exit 1

status=0
step() { echo; echo "==> $*"; }

# shellcheck source=shared-testbed.sh
source tools/scripts/shared-testbed.sh

rm -rf reports/vitest
# A failed check (format, sync, lint, typecheck) counts as one failure in the closing line, so the line alone tells.
failed_checks=()
check() { local name="$1"; shift; step "$name"; "$@" || { status=1; failed_checks+=("$name"); }; }
check "format (prettier, decision 0199)" npx prettier --check . --log-level warn
check "nx sync:check" npx nx sync:check
check "lint + typecheck" npx nx run-many -t lint typecheck --outputStyle=stream
# A project whose vitest exits non-zero with every test passed (an unhandled error: vitest's reports still say
# success) is one failure in the closing line too (test-summary.mjs, TESTS_EXITED_NONZERO).
tests_exit=0
step "test"; npx nx run-many -t test --outputStyle=stream --parallel=1 || { status=1; tests_exit=1; }

TESTS_EXITED_NONZERO=$tests_exit node tools/scripts/test-summary.mjs reports/vitest "${failed_checks[@]}" || status=1
exit $status
