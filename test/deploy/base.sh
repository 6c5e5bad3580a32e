#!/usr/bin/env bash
# Build (once) and print the name of a local stand-in for the public node:24-bookworm-slim image,
# for CI machines that reach Debian's packages but no container registry:
#
#   base=$(test/deploy/base.sh)          # only stdout line: the image name
#   podman --runtime runc build --network=host --build-arg BASE_IMAGE="$base" .
#
# A minimal Debian bookworm (debootstrap --variant=minbase, from the mirror apt uses here) plus
# the project's own Node 24 (the npm `node` package: node_modules/node/bin/node, the official
# binary) as /usr/local/bin/node, and this machine's npm as /usr/local/lib/node_modules/npm, laid
# out as the official image lays them out. The tag carries both versions, so a new Node builds a
# new base and an existing one is reused. Needs root, podman, runc and debootstrap (.ci/run
# installs them). Progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
podman=(podman --runtime runc)

log() { echo "base.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (apt-get install -y podman runc debootstrap)"
done
node_bin="$root/node_modules/node/bin/node"
[ -x "$node_bin" ] || die "$node_bin missing: run npm ci first (the npm 'node' package brings Node 24)"
npm_cli="$(readlink -f "$(command -v npm)")" || die "npm not found"
npm_dir="$(cd "$(dirname "$npm_cli")/.." && pwd)"
[ -f "$npm_dir/package.json" ] || die "cannot find npm's package directory from $npm_cli"

node_version="$("$node_bin" --version)"
npm_version="$("$node_bin" -p "require('$npm_dir/package.json').version")"
# "-napi": the layout holds Node-API's headers too (below); a base built before them is not reused.
image="localhost/tensorgate-base-debian:bookworm-node-${node_version#v}-npm-$npm_version-napi"

if "${podman[@]}" image exists "$image"; then
  echo "$image"
  exit 0
fi

# Serialise concurrent callers (two test runs on one machine).
cache="${TENSORGATE_CACHE_DIR:-$HOME/.cache/tensorgate}"
mkdir -p "$cache"
exec 9>"$cache/container-base.lock"
command -v flock >/dev/null 2>&1 && flock 9
if "${podman[@]}" image exists "$image"; then
  echo "$image"
  exit 0
fi

# The Debian mirror apt uses here (deb822 sources first, then the one-line format).
mirror="$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -n1 || true)"
[ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)"
[ -n "$mirror" ] || mirror="http://deb.debian.org/debian"

start=$(date +%s)
dir="$(mktemp -d "${TMPDIR:-/tmp}/tensorgate-base.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
log "debootstrap --variant=minbase bookworm from $mirror"
debootstrap --variant=minbase bookworm "$dir/root" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
  { tail -n 40 "$dir/debootstrap.log" >&2; die "debootstrap failed"; }
# What the official slim image drops too: downloaded packages and package lists.
rootfs="$dir/root"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*

log "adding Node $node_version and npm $npm_version"
install -D -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
mkdir -p "$rootfs/usr/local/lib/node_modules"
cp -a "$npm_dir" "$rootfs/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
# The official image has Node's headers in /usr/local/include/node; the build stage compiles the
# native base64 decoder against Node-API's four (stable across Node versions: this machine's
# Node's serve, as for npm run build here). The npm `node` package brings no headers.
napi_dir=""
for d in "$(dirname "$node_bin")/../include/node" /usr/include/node /usr/local/include/node; do
  [ -f "$d/node_api.h" ] && { napi_dir="$d"; break; }
done
[ -n "$napi_dir" ] || die "no node_api.h on this machine (apt-get install -y nodejs brings /usr/include/node)"
for h in node_api.h node_api_types.h js_native_api.h js_native_api_types.h; do
  install -D -m 0644 "$napi_dir/$h" "$rootfs/usr/local/include/node/$h"
done

tar -C "$rootfs" -c . | "${podman[@]}" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=${node_version#v}" \
  --change 'CMD ["node"]' \
  - "$image" >&2 || die "podman import failed"
log "$image ready in $(($(date +%s) - start))s"
echo "$image"
