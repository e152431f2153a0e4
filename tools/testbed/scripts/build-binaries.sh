#!/usr/bin/env bash
# Builds the real test-bed binaries (etcd, kube-apiserver, kube-controller-manager, OpenBao) from the Go module proxy
# into a cache outside the repository, keyed by version. Idempotent: present binaries are reused.
# `node` builds what `testbed up --node` adds (kubelet, kube-scheduler, containerd v2 + its runc shim + ctr) and
# installs Debian's runc, containernetworking-plugins and busybox-static when missing (root, apt); `all` does not.
# Output of each build goes to a log file whose tail is printed on failure.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
# OpenBao: the root module has no /v2 path, so the proxy lists no versions; this exact pseudo-version
# (the v2.4.x release line) is served. api/v2 and sdk/v2 are tagged and pinned to the matching release.
BAO_VERSION="${BAO_VERSION:-v0.0.0-20250828202315-f9407a27fbee}"
BAO_RELEASE="${BAO_RELEASE:-v2.4.0}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
KUSTOMIZE_VERSION="${KUSTOMIZE_VERSION:-v5.8.2}"
ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-v1.7.12}"
CACHE_ROOT="${TESTBED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/homelab-testbed}"
ONLY="${1:-all}"   # all | etcd | kube-apiserver | kube-controller-manager | bao | kustomize | actionlint | node | kubelet | kube-scheduler | containerd | node-packages

export CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS=-mod=mod

log_dir="$CACHE_ROOT/logs"; mkdir -p "$log_dir"
# One build at a time per cache: concurrent test-bed starts (several vitest runs) wait here and then find the
# binaries cached, instead of compiling the same Go modules side by side.
exec 9>"$CACHE_ROOT/.build.lock"
if ! flock -n 9; then echo "testbed: another build is running; waiting for it" >&2; flock 9; fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT

run_logged() { # name, then command; prints the log tail on failure
  local name="$1"; shift
  local log="$log_dir/$name.log"
  local start=$SECONDS
  echo "testbed: building $name (log: $log)" >&2
  # A heartbeat, so a cold build (minutes) never looks hung.
  ( while sleep 30; do echo "testbed: still building $name ($((SECONDS-start))s): $(tail -n 1 "$log" 2>/dev/null | cut -c1-100)" >&2; done ) &
  local ticker=$!
  if ! ( "$@" ) >"$log" 2>&1; then
    kill "$ticker" 2>/dev/null || true
    echo "testbed: building $name FAILED after $((SECONDS-start))s; last lines of $log:" >&2
    tail -n 40 "$log" >&2
    return 1
  fi
  kill "$ticker" 2>/dev/null || true
  echo "testbed: built $name in $((SECONDS-start))s" >&2
}

# A Go command whose module builds as published, without a wrapper: `go get -tool` it into a throw-away module and
# build one binary. Arguments: name, version, the command's package, the cached path, extra ldflags.
build_go_module() {
  local name="$1" version="$2" pkg="$3" out="$4" ldflags="${5:-}"
  [ -x "$out" ] && { echo "testbed: $name $version cached at $out" >&2; return 0; }
  mkdir -p "$work/$name" && cd "$work/$name"
  go mod init "local.invalid/${name}build"
  go get -tool "$pkg@$version"
  mkdir -p "$(dirname "$out")"
  go build -trimpath -ldflags="-s -w $ldflags" -o "$out.tmp" "$pkg"
  mv "$out.tmp" "$out"
}

build_etcd() {
  build_go_module etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3 "$CACHE_ROOT/etcd-$ETCD_VERSION/etcd"
}

# A k8s.io/kubernetes command (kube-apiserver, kube-controller-manager) from a wrapper module that requires
# k8s.io/kubernetes and replaces each staging module named in its go.mod with the published v0.X.Y.
build_kube_cmd() {
  local cmd="$1"
  local out="$CACHE_ROOT/kubernetes-$K8S_VERSION/$cmd"
  [ -x "$out" ] && { echo "testbed: $cmd $K8S_VERSION cached at $out" >&2; return 0; }
  mkdir -p "$work/$cmd" && cd "$work/$cmd"
  go mod init "local.invalid/${cmd//-/}build"
  local staging="v0.${K8S_VERSION#v1.}"
  local kmod
  kmod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  [ -f "$kmod" ] || { echo "cannot find go.mod of k8s.io/kubernetes@$K8S_VERSION" >&2; return 1; }
  local m
  for m in $(awk '$2=="=>" && $3 ~ /^\.\/staging\// {print $1}' "$kmod"); do
    go mod edit -replace="$m=$m@$staging"
  done
  local gd; gd="$(awk '$1=="godebug" && NF==2 {print $2}' "$kmod")"
  [ -z "$gd" ] || go mod edit -godebug="$gd"
  go get -tool "k8s.io/kubernetes/cmd/$cmd@$K8S_VERSION"
  local minor; minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
  local ld='-s -w' p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  mkdir -p "$(dirname "$out")"
  go build -trimpath -ldflags="$ld" -o "$out.tmp" "k8s.io/kubernetes/cmd/$cmd"
  mv "$out.tmp" "$out"
}

build_bao() {
  local out="$CACHE_ROOT/openbao-$BAO_VERSION/bao"
  [ -x "$out" ] && { echo "testbed: bao $BAO_VERSION cached at $out" >&2; return 0; }
  mkdir -p "$work/bao" && cd "$work/bao"
  go mod init local.invalid/baobuild
  # Some openbao-owned dependencies (e.g. go-kms-wrapping/wrappers/transit/v2) are served by the proxy
  # but absent from the checksum database, so checksum lookups are skipped for that owner only.
  export GONOSUMDB="github.com/openbao/*"
  go get "github.com/openbao/openbao@$BAO_VERSION" \
         "github.com/openbao/openbao/api/v2@$BAO_RELEASE" "github.com/openbao/openbao/sdk/v2@$BAO_RELEASE"
  go get -tool "github.com/openbao/openbao@$BAO_VERSION"
  mkdir -p "$(dirname "$out")"
  go build -trimpath -ldflags='-s -w' -o "$out.tmp" github.com/openbao/openbao
  mv "$out.tmp" "$out"
}

# kustomize (renders deploy/, decision 0283).
build_kustomize() {
  build_go_module kustomize "$KUSTOMIZE_VERSION" sigs.k8s.io/kustomize/kustomize/v5 \
    "$CACHE_ROOT/kustomize-$KUSTOMIZE_VERSION/kustomize" "-X sigs.k8s.io/kustomize/api/provenance.version=$KUSTOMIZE_VERSION"
}

# actionlint (checks .github/workflows in `npm test`, decision 0285).
build_actionlint() {
  build_go_module actionlint "$ACTIONLINT_VERSION" github.com/rhysd/actionlint/cmd/actionlint \
    "$CACHE_ROOT/actionlint-$ACTIONLINT_VERSION/actionlint" "-X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION"
}

# containerd v2 (daemon, runc shim, ctr) from one wrapper module. CGO is off, so the btrfs snapshotter (cgo only) is
# left out by its own build constraint; the test bed uses overlayfs.
build_containerd() {
  local dir="$CACHE_ROOT/containerd-$CONTAINERD_VERSION"
  if [ -x "$dir/containerd" ] && [ -x "$dir/containerd-shim-runc-v2" ] && [ -x "$dir/ctr" ]; then
    echo "testbed: containerd $CONTAINERD_VERSION cached in $dir" >&2; return 0
  fi
  mkdir -p "$work/containerd" && cd "$work/containerd"
  go mod init local.invalid/containerdbuild
  local m=github.com/containerd/containerd/v2 c
  go get -tool "$m/cmd/containerd@$CONTAINERD_VERSION" "$m/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" "$m/cmd/ctr@$CONTAINERD_VERSION"
  mkdir -p "$dir"
  for c in containerd containerd-shim-runc-v2 ctr; do
    go build -trimpath -ldflags="-s -w -X $m/version.Version=$CONTAINERD_VERSION" -o "$dir/$c.tmp" "$m/cmd/$c"
  done
  for c in containerd containerd-shim-runc-v2 ctr; do mv "$dir/$c.tmp" "$dir/$c"; done
}

# What the node needs from the machine: Debian's runc (crun fails on hybrid cgroups), the CNI plugins (bridge,
# host-local, loopback in /usr/lib/cni) and busybox-static (the pause and busybox images are made from it).
install_node_packages() {
  local missing=() p
  for p in runc containernetworking-plugins busybox-static; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && { echo "testbed: node packages present (runc, containernetworking-plugins, busybox-static)" >&2; return 0; }
  [ "$(id -u)" = 0 ] || { echo "testbed: the node needs ${missing[*]}; install them as root: apt-get install -y ${missing[*]}" >&2; return 1; }
  echo "testbed: installing ${missing[*]} (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" || { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; }
}

case "$ONLY" in
  all)
    run_logged etcd build_etcd
    run_logged kube-apiserver build_kube_cmd kube-apiserver
    run_logged kube-controller-manager build_kube_cmd kube-controller-manager
    run_logged bao build_bao
    run_logged kustomize build_kustomize
    run_logged actionlint build_actionlint ;;
  etcd) run_logged etcd build_etcd ;;
  kustomize) run_logged kustomize build_kustomize ;;
  actionlint) run_logged actionlint build_actionlint ;;
  kube-apiserver|kube-controller-manager) run_logged "$ONLY" build_kube_cmd "$ONLY" ;;
  bao) run_logged bao build_bao ;;
  node)
    run_logged node-packages install_node_packages
    run_logged kubelet build_kube_cmd kubelet
    run_logged kube-scheduler build_kube_cmd kube-scheduler
    run_logged containerd build_containerd ;;
  kubelet|kube-scheduler) run_logged "$ONLY" build_kube_cmd "$ONLY" ;;
  containerd) run_logged containerd build_containerd ;;
  node-packages) run_logged node-packages install_node_packages ;;
  *) echo "usage: $0 [all|etcd|kube-apiserver|kube-controller-manager|bao|kustomize|actionlint|node|kubelet|kube-scheduler|containerd|node-packages]" >&2; exit 2 ;;
esac
