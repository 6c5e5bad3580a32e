#!/usr/bin/env bash
# Create (once) and print the path of the Python venv that runs the real Triton test zoo.
#
#   venv_dir=$(test/triton/venv.sh)      # only stdout line: the venv directory
#   "$venv_dir/bin/python" test/triton/zoo.py ...
#
# The venv lives in ${TENSORGATE_CACHE_DIR:-$HOME/.cache/tensorgate}/venv-<sha256(requirements.txt)[:12]>
# and is built from Debian's /usr/bin/python3.11 (python3.11 + python3.11-venv packages):
# PyTriton's python backend stub embeds libpython3.11, so a pyenv/other interpreter will not do.
# A marker file is written only after pip succeeded, so an interrupted install is redone.
# Concurrent callers are serialised with flock. Progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# An optional argument names another requirements file (its venv is cached apart, by its hash).
req="${1:-$here/requirements.txt}"
py="${TENSORGATE_PYTHON:-/usr/bin/python3.11}"
cache="${TENSORGATE_CACHE_DIR:-$HOME/.cache/tensorgate}"

log() { echo "venv.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ -f "$req" ] || die "missing $req"
[ -x "$py" ] || die "$py not found. Install Debian's python3.11 and python3.11-venv (apt-get install -y python3.11 python3.11-venv)."
"$py" -c 'import venv, ensurepip' >/dev/null 2>&1 ||
  die "$py has no working venv/ensurepip module. Install python3.11-venv (apt-get install -y python3.11-venv)."

hash="$(sha256sum "$req" | cut -c1-12)"
dir="$cache/venv-$hash"
marker="$dir/.tensorgate-venv-ok"

if [ -f "$marker" ]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/venv-$hash.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi

if [ ! -f "$marker" ]; then
  start=$(date +%s)
  log "creating $dir from $py (requirements sha256 $hash)"
  rm -rf "$dir"
  "$py" -m venv "$dir" >&2 || die "python -m venv failed"
  "$dir/bin/python" -m pip install --disable-pip-version-check --no-input -r "$req" >&2 ||
    die "pip install -r $req failed (the venv is left unmarked and will be rebuilt next time)"
  if [ "$req" = "$here/requirements.txt" ]; then
    "$dir/bin/python" -c 'import pytriton.triton, tritonclient.grpc, tritonclient.http, tritonclient.http.aio, numpy' >&2 ||
      die "installed venv does not import pytriton/tritonclient"
  fi
  date -u +%Y-%m-%dT%H:%M:%SZ >"$marker"
  log "venv ready in $(($(date +%s) - start))s"
fi

echo "$dir"
