#!/usr/bin/env bash
# The main job (README): bring up the local test bed (or reuse a running one), install the generated CRDs, start the
# M6 service-control pair in the background (nsd on the machine's PostgreSQL, its own database, and two ns-daemons on
# loopback; state under .testbed/m6), and run the controller (KOS control plane + Ayatori Database controllers)
# against the test bed in the foreground. Ctrl-C stops the controller, then nsd and the daemons, then the test bed —
# only if this script started it (a running test bed is reused and left running). As root the test bed it starts has a
# real node (kubelet, containerd, scheduler; HOMELAB_NODE=0 turns it off), and the built-in apps' stand-in images are
# imported into it, so the apps the controller installs really run (decision 0271).
set -euo pipefail
cd "$(dirname "$0")/../.."
export NX_DAEMON="${NX_DAEMON:-false}" NX_NO_CLOUD=true NX_TUI=false
[ -d node_modules ] || npm ci --no-audit --no-fund

export HOMELAB_TESTBED_STATE="${HOMELAB_TESTBED_STATE:-$PWD/.testbed/state.json}"
testbed() { node tools/testbed/bin/testbed.mjs "$@"; }
started_here=0
node_flag=()
if [ "${HOMELAB_NODE:-$([ "$(id -u)" = 0 ] && echo 1 || echo 0)}" = 1 ]; then node_flag=(--node); fi
if ! testbed status >/dev/null 2>&1; then
  echo "==> starting the test bed${node_flag:+ with a node} (the first run builds etcd, kube-apiserver, kube-controller-manager and OpenBao: ~10+ min; the node's kubelet, kube-scheduler and containerd: ~2–10 min more)"
  testbed up "${node_flag[@]}" >/dev/null
  started_here=1
fi
m6_pids=()
stop_m6() {
  [ "${#m6_pids[@]}" -gt 0 ] || return 0
  echo "==> stopping nsd and the ns-daemons"
  kill -TERM "${m6_pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "${m6_pids[@]}" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "${m6_pids[@]}" 2>/dev/null || true
  m6_pids=()
}
cleanup() {
  stop_m6
  if [ "$started_here" = 1 ]; then echo "==> stopping the test bed"; testbed down; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
eval "$(testbed env)"
has_node=0
if testbed env --json | node -e 'process.exit(JSON.parse(require("fs").readFileSync(0, "utf8")).node ? 0 : 1)'; then
  has_node=1
  echo "==> importing the built-in apps' stand-in images into the node"
  node --conditions=@homelab/source --import tsx libs/kos-kernel/test/import-stand-in-images.ts
fi

# The apps run from their built JS (dist/, no tsx at run time); tsc --build is incremental, so a second start is quick.
echo "==> building the controller, nsd and ns-daemon (nx run-many -t build)"
npx nx run-many -t build -p @homelab/controller @homelab/nsd @homelab/ns-daemon --outputStyle=static >/dev/null

# ─── M6 service control: nsd + two ns-daemons (M6_DISABLE=1 skips them) ───
m6_dir="$PWD/.testbed/m6"           # git-ignored; kept between runs (keys, daemon state); logs are overwritten
nsd_port="${NSD_PORT:-7400}"
ns_ports=("${NS_A_PORT:-7411}" "${NS_B_PORT:-7412}")
nsd_db="${NSD_DB_NAME:-homelab_nsd}"
identity() { openssl pkey -in "$1" -pubout -outform DER | tail -c 32 | od -An -v -tx1 | tr -d ' \n'; }
start_m6() {
  mkdir -p "$m6_dir"
  for n in nsd a b; do [ -f "$m6_dir/$n.pem" ] || openssl genpkey -algorithm ed25519 -out "$m6_dir/$n.pem" 2>/dev/null; done
  [ -f "$m6_dir/network" ] || openssl rand -hex 16 >"$m6_dir/network"
  [ -f "$m6_dir/admin-token" ] || (umask 077; openssl rand -hex 16 >"$m6_dir/admin-token")
  local net nsd_key ida idb
  net=$(cat "$m6_dir/network"); nsd_key=$(identity "$m6_dir/nsd.pem"); ida=$(identity "$m6_dir/a.pem"); idb=$(identity "$m6_dir/b.pem")
  [ -f "$m6_dir/a.json" ] || echo '[{"key":"web","protocols":["http"],"backend_host":"127.0.0.1","backend_port":8080,"display_name":"Web"}]' >"$m6_dir/a.json"
  [ -f "$m6_dir/b.json" ] || echo '[{"key":"db","protocols":["tcp"],"backend_host":"127.0.0.1","backend_port":5432,"display_name":"Database"}]' >"$m6_dir/b.json"
  if ! psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$nsd_db'" | grep -q 1; then
    echo "==> creating the PostgreSQL database $nsd_db for nsd"
    createdb "$nsd_db"
  fi
  echo "==> starting nsd on http://127.0.0.1:$nsd_port (database $nsd_db) and ns-daemons on :${ns_ports[0]} and :${ns_ports[1]}"
  (cd apps/nsd && NSD_PORT="$nsd_port" NSD_DB_NAME="$nsd_db" NSD_KEY_FILE="$m6_dir/nsd.pem" NSD_MEMBERS="$ida:$net,$idb:$net" \
    NSD_ADMIN_TOKEN="$(cat "$m6_dir/admin-token")" exec node dist/main.js) >"$m6_dir/nsd.log" 2>&1 &
  m6_pids+=("$!")
  for _ in $(seq 1 900); do curl -sf "http://127.0.0.1:$nsd_port/healthz" >/dev/null 2>&1 && break; kill -0 "${m6_pids[0]}" 2>/dev/null || break; sleep 0.2; done
  if ! curl -sf "http://127.0.0.1:$nsd_port/healthz" >/dev/null 2>&1; then echo "nsd did not come up; $m6_dir/nsd.log:"; tail -20 "$m6_dir/nsd.log"; return 1; fi
  local i=0 n
  for n in a b; do
    (cd apps/ns-daemon && NS_NSD_URL="http://127.0.0.1:$nsd_port" NS_NSD_KEY="$nsd_key" NS_NETWORK="$net" NS_KEY_FILE="$m6_dir/$n.pem" \
      NS_STATE_FILE="$m6_dir/$n.db" NS_DECLARATIONS="$m6_dir/$n.json" NS_PORT="${ns_ports[$i]}" \
      exec node dist/main.js) >"$m6_dir/ns-$n.log" 2>&1 &
    m6_pids+=("$!")
    i=$((i + 1))
  done
  # bound and streaming = runtime bound, session open, report accepted, config.stream connected (up to 3 min each
  # on a loaded machine)
  local port ok
  for port in "${ns_ports[@]}"; do
    ok=0
    for _ in $(seq 1 900); do
      if curl -sf "http://127.0.0.1:$port/healthz" 2>/dev/null | grep -q '"phase":"streaming"'; then ok=1; break; fi
      sleep 0.2
    done
    if [ "$ok" != 1 ]; then echo "ns-daemon on :$port is not streaming; its log:"; tail -20 "$m6_dir"/ns-*.log; return 1; fi
  done
  cat <<M6
==> M6 service control is up (Network $net)
      nsd          http://127.0.0.1:$nsd_port/healthz   http://127.0.0.1:$nsd_port/metrics   log $m6_dir/nsd.log
      ns-daemon a  http://127.0.0.1:${ns_ports[0]}/healthz   http://127.0.0.1:${ns_ports[0]}/metrics   log $m6_dir/ns-a.log   declarations $m6_dir/a.json
      ns-daemon b  http://127.0.0.1:${ns_ports[1]}/healthz   http://127.0.0.1:${ns_ports[1]}/metrics   log $m6_dir/ns-b.log   declarations $m6_dir/b.json
      owner admin  curl -H "authorization: Bearer \$(cat $m6_dir/admin-token)" "http://127.0.0.1:$nsd_port/v1/admin/services?network=$net"
                   (allow a consumer: PUT /v1/admin/policy — apps/nsd/README.md "M6-62 by hand")
M6
}
if [ "${M6_DISABLE:-0}" != 1 ]; then start_m6; fi

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
if [ "$has_node" = 1 ]; then
  cat <<NODE
    the test bed has a node: the built-in apps really run (README "Open a built-in app"), e.g.
      curl -s -X POST http://127.0.0.1:$port/api/v1/resources/Application -H 'content-type: application/json' \\
        -d '{"apiVersion":"kos.tsic.top/v1beta1","kind":"Application","metadata":{"name":"web","namespace":"default"},"spec":{"definitionRef":"static-web","namespace":"default","config":{"title":"Hello"}}}'
      kubectl get pods -o wide -l app.kubernetes.io/instance=web; curl http://<pod IP>:8080/
NODE
fi
# Not exec: the EXIT trap must still stop the test bed after the controller ends; the controller's exit code is
# the script's (a configuration error stays exit 2).
rc=0
npm start -s -w @homelab/controller -- --port "$port" --database-secret-namespace=default "$@" || rc=$?
exit "$rc"
