# Sourced by test-all.sh and affected.sh: one test bed for the whole run (vitest's global setup reuses it through the
# state file); started here if none is running, and then stopped when the calling script exits.
export HOMELAB_TESTBED_STATE="${HOMELAB_TESTBED_STATE:-$PWD/.testbed/state.json}"
started_here=0
if ! node tools/testbed/bin/testbed.mjs status >/dev/null 2>&1; then
  echo; echo "==> starting the test bed (builds the binaries on first use)"
  if ! node tools/testbed/bin/testbed.mjs up >/dev/null; then
    echo "test bed failed to start (see the reason above)"; exit 1
  fi
  started_here=1
fi
stop_testbed() { [ "$started_here" = 1 ] && node tools/testbed/bin/testbed.mjs down >/dev/null 2>&1; }
trap stop_testbed EXIT
