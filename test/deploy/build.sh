#!/usr/bin/env bash
# Build the Dockerfile with podman as CI can (no registry: the local base of base.sh) and print
# the image name:
#
#   image=$(test/deploy/build.sh [NAME])     # only stdout line; NAME defaults to localhost/tensorgate:dev
#   podman --runtime runc run --rm --network=host -e TENSORGATE_DEMO=true "$image"
#
# Behind a TLS-intercepting proxy (the CI machines' egress), the CA file that Node or npm is told
# about here (NODE_EXTRA_CA_CERTS, else npm's cafile) is mounted into the build stages and given
# to their Node as NODE_EXTRA_CA_CERTS, so their npm ci reaches the registry; the runtime image
# never sees it. Layers are cached by podman: a build
# with an unchanged package-lock.json reuses both npm ci layers. Progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
image="${1:-localhost/tensorgate:dev}"

base="$(bash "$here/base.sh")"
args=(--network=host --layers --build-arg "BASE_IMAGE=$base" -t "$image")
ca="${NODE_EXTRA_CA_CERTS:-}"
[ -f "$ca" ] || ca="$(npm config get cafile 2>/dev/null || true)"
if [ -n "$ca" ] && [ "$ca" != null ] && [ -f "$ca" ]; then
  args+=(-v "$(readlink -f "$ca"):/tmp/build-ca.crt:ro" --build-arg NODE_EXTRA_CA_CERTS=/tmp/build-ca.crt)
fi
start=$(date +%s)
podman --runtime runc build "${args[@]}" "$root" >&2
echo "build.sh: $image built in $(($(date +%s) - start))s" >&2
echo "$image"
