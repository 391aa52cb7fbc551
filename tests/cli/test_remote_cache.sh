#!/usr/bin/env bash
# test_remote_cache.sh -- the remote kernel cache against a real Redis server
# ($FUSEGEN_TEST_REDIS, which .ci/run starts and exports; this test uses its
# database 7 and empties it).  Each "host" is a fresh cache directory:
#   - two hosts share the remote cache: the second compiles nothing (emulation);
#   - read-only hosts never write;
#   - two writers at once leave valid entries;
#   - tampered entries (a flipped byte, another secret, another key, other key
#     material, oversized) are refused, counted and recompiled; a read-write
#     host replaces them;
#   - a server that refuses connections, stalls, answers garbage or a hostile
#     reply (dripped a byte at a time, a line that never ends, a 1 GiB bulk
#     string, 2^31-1 elements) costs one warning and at most the timeout,
#     never a failure;
#   - `fusegen cache warm` fills the remote cache ahead of time.
# Without a reachable server it prints "not run" and exits 77 (skipped).
set -euo pipefail

fail() { echo "test_remote_cache: FAIL: $*" >&2; exit 1; }
skip() { echo "test_remote_cache: not run: $*"; exit 77; }

SRC=${FUSEGEN_SOURCE_DIR:-$(pwd)}
[[ -n "${FUSEGEN_BIN:-}" ]] || fail "FUSEGEN_BIN is not set (run through ctest)"
B=$FUSEGEN_BIN
HELP="python3 $SRC/tests/cli/remote_helper.py"
URL=${FUSEGEN_TEST_REDIS:-}
[[ -n "$URL" ]] || skip "no Redis server (FUSEGEN_TEST_REDIS is not set; .ci/run starts one)"
command -v redis-cli >/dev/null || skip "redis-cli is not installed"
hp=${URL#redis://}
hp=${hp%%/*}
H=${hp%:*}
P=${hp##*:}
DB=7
R() { redis-cli -h "$H" -p "$P" -n "$DB" "$@"; }
[[ "$(R PING 2>/dev/null)" == PONG ]] || skip "no Redis server answers at $H:$P"

T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-remote.XXXXXX")
helpers=()
cleanup() {
  for p in "${helpers[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
chmod 700 "$T"
head -c 32 /dev/urandom >"$T/fleet.key"
chmod 600 "$T/fleet.key"
unset FUSEGEN_CACHE FUSEGEN_CACHE_MAX_MB FUSEGEN_RULES FUSEGEN_QUIET FUSEGEN_REMOTE_CACHE_MODE \
      FUSEGEN_REMOTE_CACHE_TIMEOUT_MS FUSEGEN_REMOTE_CACHE_TTL
export FUSEGEN_REMOTE_CACHE="redis://$H:$P/$DB" FUSEGEN_REMOTE_CACHE_KEY_FILE="$T/fleet.key"
G="$SRC/examples/resnet_bottleneck.yaml"
R FLUSHDB >/dev/null

# Runs `fusegen ARGS...` as host NAME (its own cache directory); output in
# $T/NAME.out and $T/NAME.err, wall time in $T/NAME.time.
host() {
  local name=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  FUSEGEN_CACHE_DIR="$T/$name" "$B" "$@" >"$T/$name.out" 2>"$T/$name.err" ||
    { cat "$T/$name.out" "$T/$name.err"; fail "host $name: fusegen $* failed"; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }' >"$T/$name.time"
}
stats() { FUSEGEN_CACHE_DIR="$T/$1" "$B" cache stats >"$T/$1.stats" 2>&1 || { cat "$T/$1.stats"; fail "cache stats $1"; }; }
# The value of row $2 ("memory", "remote", ...) column $3 (1: hits, 2: misses) of host $1's stats.
row() { awk -v r="$2" -v c="$3" '$1 == r && $2 ~ /^[0-9]+$/ { print $(c + 1) }' "$T/$1.stats"; }
# The value of "NAME N" in the remote counters line of host $1's stats.
counter() { sed -n "s/.*$2 \([0-9]*\).*/\1/p" "$T/$1.stats"; }
warnings() { grep -c "warning: remote kernel cache" "$T/$1.err" || true; }
kernels() { sed -n 's/^total: \([0-9]*\) kernels.*/\1/p' "$T/$1.out"; }
compiled() { sed -n 's/^total: [0-9]* kernels[^(]*(\([0-9]*\) compiled.*/\1/p' "$T/$1.out"; }
from_remote() { sed -n 's/^total: .* \([0-9]*\) from the remote cache.*/\1/p' "$T/$1.out"; }

# ---- two hosts share one remote cache (emulation) ---------------------------
FUSEGEN_REMOTE_CACHE_MODE=rw host a run "$G" --device emu --iters 1
host b run "$G" --device emu --iters 1
stats a
stats b
n=$(row a compiled 1)
[[ "$n" -ge 2 ]] || { cat "$T/a.stats"; fail "host a compiled $n kernels"; }
[[ "$(counter a stores)" == "$n" ]] || { cat "$T/a.stats"; fail "host a did not store its $n kernels"; }
[[ "$(row b compiled 1)" == 0 ]] || { cat "$T/b.stats"; fail "host b compiled kernels"; }
[[ "$(row b remote 1)" == "$n" ]] || { cat "$T/b.stats"; fail "host b did not get its $n kernels from the remote cache"; }
grep -q "entries: *$n (0 invalid)" "$T/b.stats" || { cat "$T/b.stats"; fail "remote hits not written back to disk"; }
[[ "$(warnings a)$(warnings b)" == 00 ]] || { cat "$T/a.err" "$T/b.err"; fail "warnings"; }
echo "two hosts, emulation, $n kernels: first $(cat "$T/a.time") s, second $(cat "$T/b.time") s (0 compiled)"
# A third run on host b is served from its own disk.
host b run "$G" --device emu --iters 1
stats b
[[ "$(row b disk 1)" == "$n" ]] || { cat "$T/b.stats"; fail "host b's second run not from disk"; }

# ---- read-only hosts never write ---------------------------------------------
R FLUSHDB >/dev/null
host c compile "$G" --jobs 1
stats c
m=$(kernels c)
[[ "$(R DBSIZE)" == 0 ]] || fail "a read-only host wrote to the remote cache"
[[ "$(counter c stores)" == 0 && "$(row c remote 2)" == "$m" ]] || { cat "$T/c.stats"; fail "read-only counters"; }

# ---- two writers at once --------------------------------------------------------
FUSEGEN_REMOTE_CACHE_MODE=rw FUSEGEN_CACHE_DIR="$T/d1" "$B" compile "$G" --jobs 1 >"$T/d1.out" 2>&1 &
p1=$!
FUSEGEN_REMOTE_CACHE_MODE=rw FUSEGEN_CACHE_DIR="$T/d2" "$B" compile "$G" --jobs 1 >"$T/d2.out" 2>&1 &
p2=$!
wait $p1 || { cat "$T/d1.out"; fail "writer 1"; }
wait $p2 || { cat "$T/d2.out"; fail "writer 2"; }
[[ "$(R DBSIZE)" == "$m" ]] || fail "expected $m entries after two writers, found $(R DBSIZE)"
host e compile "$G"
[[ "$(compiled e)" == 0 && "$(from_remote e)" == "$m" ]] || { cat "$T/e.out"; fail "entries of concurrent writers"; }
[[ "$(warnings e)" == 0 ]] || { cat "$T/e.err"; fail "warnings reading entries of concurrent writers"; }

# ---- tampered entries are refused ---------------------------------------------------
mapfile -t keys < <(R --scan --pattern 'fusegen:kernel:*' | sort)
[[ ${#keys[@]} -ge 4 ]] || fail "need 4 entries to tamper with, have ${#keys[@]}"
$HELP tamper "$H" "$P" "$DB" "$T/fleet.key" flip "${keys[0]}"
$HELP tamper "$H" "$P" "$DB" "$T/fleet.key" other-secret "${keys[1]}"
$HELP tamper "$H" "$P" "$DB" "$T/fleet.key" copy "${keys[2]}" "${keys[3]}"
$HELP tamper "$H" "$P" "$DB" "$T/fleet.key" material "${keys[3]}"
host f compile "$G"
stats f
[[ "$(compiled f)" == 4 && "$(from_remote f)" == $((m - 4)) ]] || { cat "$T/f.out"; fail "tampered entries used"; }
[[ "$(counter f "rejected entries")" == 4 ]] || { cat "$T/f.stats"; fail "tampered entries not counted"; }
[[ "$(grep -c "refused the entry" "$T/f.err")" == 1 ]] || { cat "$T/f.err"; fail "expected one warning"; }
grep -q "refused the entry" "$T/f.err" || fail "no warning for tampered entries"
# A read-write host replaces them; then an oversized value is refused unread.
FUSEGEN_REMOTE_CACHE_MODE=rw host g compile "$G"
host h compile "$G"
[[ "$(compiled h)" == 0 ]] || { cat "$T/h.out" "$T/h.err"; fail "refused entries not replaced by a read-write host"; }
$HELP tamper "$H" "$P" "$DB" "$T/fleet.key" oversize "${keys[0]}"
host i compile "$G"
stats i
[[ "$(compiled i)" == 1 && "$(counter i "rejected entries")" == 1 ]] || { cat "$T/i.out" "$T/i.stats"; fail "oversized entry"; }

# ---- servers that fail: one warning, local compilation, bounded time ------------------
FUSEGEN_REMOTE_CACHE=off host base compile "$G"
port=$($HELP port)
FUSEGEN_REMOTE_CACHE="redis://127.0.0.1:$port/0" host down compile "$G"
for kind in stall garbage drip long-line huge-bulk huge-array; do
  $HELP serve "$kind" "$T/$kind.port" &
  helpers+=($!)
  for _ in $(seq 50); do [[ -s "$T/$kind.port" ]] && break; sleep 0.1; done
  [[ -s "$T/$kind.port" ]] || fail "the $kind server did not start"
  FUSEGEN_REMOTE_CACHE="redis://127.0.0.1:$(cat "$T/$kind.port")/0" FUSEGEN_REMOTE_CACHE_TIMEOUT_MS=300 \
    host "$kind" compile "$G"
done
# The time without a remote cache, measured before and after (the larger: a
# loaded machine varies by seconds; a server that stalled a compile would add
# more).
FUSEGEN_REMOTE_CACHE=off host base2 compile "$G"
base=$(awk -v a="$(cat "$T/base.time")" -v b="$(cat "$T/base2.time")" 'BEGIN { print (a > b ? a : b) }')
for h in down stall garbage drip long-line huge-bulk huge-array; do
  [[ "$(compiled $h)" == "$m" ]] || { cat "$T/$h.out"; fail "$h: kernels not compiled locally"; }
  [[ "$(warnings $h)" == 1 ]] || { cat "$T/$h.err"; fail "$h: expected exactly one warning"; }
  # Compiling locally takes what it takes; the remote may add its timeout (0.3 s), once.
  extra=$(awk -v a="$base" -v b="$(cat "$T/$h.time")" 'BEGIN { printf "%.2f", b - a }')
  echo "remote $h: $(cat "$T/$h.time") s vs $base s without a remote cache: $(head -1 "$T/$h.err")"
  awk -v x="$extra" 'BEGIN { exit !(x < 3) }' || fail "$h: $extra s slower than without a remote cache"
done
# The hostile replies were cut off by the deadline or a bound of the reader.
grep -q "did not finish within the 300 ms timeout" "$T/drip.err" || { cat "$T/drip.err"; fail "drip: not the deadline"; }
grep -q "reply line longer than" "$T/long-line.err" || { cat "$T/long-line.err"; fail "long-line: not the bound"; }
grep -q "bulk string of 1073741824 bytes" "$T/huge-bulk.err" || { cat "$T/huge-bulk.err"; fail "huge-bulk"; }
grep -q "2147483647 elements" "$T/huge-array.err" || { cat "$T/huge-array.err"; fail "huge-array"; }

# ---- cache warm ------------------------------------------------------------------
R FLUSHDB >/dev/null
FUSEGEN_CACHE_DIR="$T/w" "$B" cache warm "$G" >"$T/w.out" 2>&1 || { cat "$T/w.out"; fail "cache warm"; }
grep -q "^stored $m entries" "$T/w.out" || { cat "$T/w.out"; fail "cache warm did not store $m entries"; }
host j compile "$G"
[[ "$(compiled j)" == 0 && "$(from_remote j)" == "$m" ]] || { cat "$T/j.out"; fail "warmed entries not used"; }
FUSEGEN_REMOTE_CACHE=off FUSEGEN_CACHE_DIR="$T/w" "$B" cache warm "$G" >"$T/w2.out" 2>&1 &&
  fail "cache warm without a remote cache succeeded"
grep -q "needs a remote cache" "$T/w2.out" || { cat "$T/w2.out"; fail "cache warm without a remote: message"; }

R FLUSHDB >/dev/null
echo "test_remote_cache: ok"
