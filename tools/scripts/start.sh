#!/usr/bin/env bash
# The main job (README): bring up the local test bed (or reuse a running one), install the generated CRDs, and run
# the controller (KOS control plane + Ayatori Database controllers) against it in the foreground. Ctrl-C stops the
# controller, then the test bed if this script started it.
set -euo pipefail
cd "$(dirname "$0")/../.."
export NX_DAEMON="${NX_DAEMON:-false}" NX_NO_CLOUD=true NX_TUI=false
[ -d node_modules ] || npm ci --no-audit --no-fund

export HOMELAB_TESTBED_STATE="${HOMELAB_TESTBED_STATE:-$PWD/.testbed/state.json}"
testbed() { node tools/testbed/bin/testbed.mjs "$@"; }
started_here=0
if ! testbed status >/dev/null 2>&1; then
  echo "==> starting the test bed (the first run builds etcd, kube-apiserver and OpenBao: ~9 min)"
  testbed up >/dev/null
  started_here=1
fi
cleanup() { if [ "$started_here" = 1 ]; then echo "==> stopping the test bed"; testbed down; fi; }
trap cleanup EXIT
eval "$(testbed env)"

echo "==> installing the CRDs from deploy/crds"
testbed install-crds deploy/crds/kos deploy/crds/ayatori

port="${PORT:-8080}"
cat <<INFO
==> starting the controller on http://127.0.0.1:$port (Ctrl-C stops it)
    in another shell:
      eval "\$(npm run -s testbed -- env)"        # KUBECONFIG, PGHOST…, BAO_ADDR/BAO_TOKEN of the test bed
      curl -s http://127.0.0.1:$port/readyz; curl -s http://127.0.0.1:$port/api/v1/resources/Application
      curl -s http://127.0.0.1:$port/metrics | grep controller_runtime_reconcile_total
INFO
# Not exec: the EXIT trap must still stop the test bed after the controller ends.
npm start -s -w @homelab/controller -- --port "$port" --database-secret-namespace=default "$@" || true
