#!/usr/bin/env bash
# Daily use: lint, typecheck, test and build only the projects affected since origin/main (or the base given) up to
# HEAD (or the head given: `npm run affected -- <base> <head>`, as the hosted CI does, decision 0285), against one
# shared test bed like `npm test` (or none: HOMELAB_TEST_SCOPE=unit npm run affected). A base or head that does not
# exist is an error: silently testing everything (or nothing) would look like a pass of the change.
set -euo pipefail
cd "$(dirname "$0")/../.."
export NX_DAEMON="${NX_DAEMON:-false}" NX_NO_CLOUD=true NX_TUI=false
base="${1:-origin/main}"
head="${2:-HEAD}"
if ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
  echo "affected: the base '$base' is not a commit here (git fetch origin, or name one: npm run affected -- <commit>)" >&2
  exit 2
fi
if ! git rev-parse --verify -q "$head^{commit}" >/dev/null; then
  echo "affected: the head '$head' is not a commit here" >&2
  exit 2
fi
# HOMELAB_TEST_SCOPE=unit (decision 0282): only the test files that need no real service, and no test bed — so a
# change whose affected projects are checked this way needs no Go build. Otherwise one shared test bed for the run.
test_target=test
case "${HOMELAB_TEST_SCOPE:-all}" in
  unit)
    # each project's test-unit target (nx.json: the vitest plugin a second time, HOMELAB_TEST_SCOPE=unit)
    test_target=test-unit
    echo "==> unit scope: test files that need the test bed are left out, no test bed is started"
    ;;
  all | services)
    # shellcheck source=shared-testbed.sh
    source tools/scripts/shared-testbed.sh
    ;;
  *) echo "affected: HOMELAB_TEST_SCOPE=$HOMELAB_TEST_SCOPE: expected all, unit or services" >&2; exit 2 ;;
esac
npx nx affected -t lint typecheck "$test_target" build --base="$base" --head="$head" --outputStyle=stream
