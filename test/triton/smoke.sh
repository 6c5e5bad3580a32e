#!/usr/bin/env bash
# Smoke check of the real Triton zoo: venv -> start zoo.py -> TRITON_READY -> health + one HTTP
# infer on `simple` -> SIGTERM -> verify clean exit and no leftover tritonserver. Exit 0 = OK.
# Env: TENSORGATE_CACHE_DIR (venv cache), SMOKE_READY_TIMEOUT (seconds, default 180).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
timeout_s="${SMOKE_READY_TIMEOUT:-180}"
work="$(mktemp -d "${TMPDIR:-/tmp}/tg-smoke.XXXXXX")"
zoo_pid=""

log() { echo "smoke: $*" >&2; }
cleanup() {
  if [ -n "$zoo_pid" ] && kill -0 "$zoo_pid" 2>/dev/null; then
    kill -TERM "$zoo_pid" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$zoo_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$zoo_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  log "FAIL: $*"
  log "---- zoo stderr (tail) ----"
  tail -n 40 "$work/zoo.err" >&2 2>/dev/null || true
  exit 1
}

venv="$("$here/venv.sh")"
py="$venv/bin/python"

t0=$(date +%s.%N)
"$py" "$here/zoo.py" >"$work/zoo.out" 2>"$work/zoo.err" &
zoo_pid=$!

ready=""
deadline=$(($(date +%s) + timeout_s))
while [ -z "$ready" ]; do
  ready="$(grep -m1 '^TRITON_READY ' "$work/zoo.out" || true)"
  [ -n "$ready" ] && break
  kill -0 "$zoo_pid" 2>/dev/null || fail "zoo.py exited before TRITON_READY"
  [ "$(date +%s)" -lt "$deadline" ] || fail "no TRITON_READY within ${timeout_s}s"
  sleep 0.2
done
log "$ready (after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s)"

json="${ready#TRITON_READY }"
http_port="$(printf '%s' "$json" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["http"])')"
base="http://127.0.0.1:$http_port"

code="$(curl -s -o /dev/null -w '%{http_code}' "$base/v2/health/ready")"
[ "$code" = 200 ] || fail "GET /v2/health/ready -> $code"

body='{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}'
resp="$(curl -s -f -X POST -H 'Content-Type: application/json' -d "$body" "$base/v2/models/simple/infer")" ||
  fail "POST /v2/models/simple/infer failed"
printf '%s' "$resp" | "$py" -c '
import json, sys
r = json.load(sys.stdin)
out = {o["name"]: o for o in r["outputs"]}
assert r["model_name"] == "simple", r
assert out["OUTPUT0"]["data"] == list(range(1, 17)), out["OUTPUT0"]
assert out["OUTPUT1"]["data"] == list(range(-1, 15)), out["OUTPUT1"]
assert out["OUTPUT0"]["shape"] == [1, 16] and out["OUTPUT0"]["datatype"] == "INT32"
' || fail "unexpected infer response: $resp"
log "health + infer OK"

kill -TERM "$zoo_pid"
rc=0
wait "$zoo_pid" || rc=$?
zoo_pid=""
[ "$rc" = 0 ] || fail "zoo.py exit status $rc after SIGTERM"
[ "$(grep -c '' "$work/zoo.out")" = 1 ] || fail "zoo.py wrote more than one stdout line"
sleep 0.5
if pgrep -f "tritonserver --.*--http-port $http_port " >/dev/null 2>&1; then
  fail "tritonserver still running after SIGTERM"
fi
log "OK"
