#!/usr/bin/env bash
# test_cache_procs.sh -- two `fusegen compile` processes filling one empty
# cache directory at the same time both succeed and leave exactly one valid
# entry per kernel; a damaged entry is recompiled and replaced; the cache
# creates its directories 0700 and entries 0600 even under umask 0, refuses
# (recompiles and replaces) an entry others could have written, and refuses
# a directory writable by others with one warning; the `cache` subcommands
# list, explain and clear the entries.
set -euo pipefail

fail() { echo "test_cache_procs: FAIL: $*" >&2; exit 1; }

SRC=${FUSEGEN_SOURCE_DIR:-$(pwd)}
[[ -n "${FUSEGEN_BIN:-}" ]] || fail "FUSEGEN_BIN is not set (run through ctest)"
B=$FUSEGEN_BIN
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-cacheprocs.XXXXXX")
trap 'rm -rf "$T"' EXIT
export FUSEGEN_CACHE_DIR="$T/cache"
unset FUSEGEN_CACHE FUSEGEN_CACHE_MAX_MB FUSEGEN_RULES
G="$SRC/examples/resnet_basic_block.yaml"

umask 0   # the cache sets its own modes
"$B" compile "$G" --arch sm_90 --jobs 1 >"$T/a.out" 2>"$T/a.err" &
pa=$!
"$B" compile "$G" --arch sm_90 --jobs 1 >"$T/b.out" 2>"$T/b.err" &
pb=$!
wait $pa || { cat "$T/a.out" "$T/a.err"; fail "first compile failed"; }
wait $pb || { cat "$T/b.out" "$T/b.err"; fail "second compile failed"; }
n=$(sed -n 's/^total: \([0-9]*\) kernels.*/\1/p' "$T/a.out")
[[ "$n" -ge 1 ]] || { cat "$T/a.out"; fail "no kernel count in the compile output"; }

umask 022
bad=$(find "$T/cache" \( -type d ! -perm 0700 \) -o \( -type f ! -perm 0600 \) | head -1)
[[ -z "$bad" ]] || fail "created with the wrong mode: $(stat -c '%a %n' "$bad")"
files=$(find "$T/cache" -type f -name "*.fgk" | wc -l)   # beside them: the tier counters (stats)
[[ "$files" -eq "$n" ]] || { find "$T/cache" -type f; fail "expected $n files in the cache, found $files"; }
"$B" cache stats >"$T/stats" || fail "cache stats"
grep -q "entries: *$n (0 invalid)" "$T/stats" || { cat "$T/stats"; fail "cache stats: entries"; }

# A third run is served from disk.
"$B" compile "$G" --arch sm_90 >"$T/c.out" || fail "third compile"
grep -q "(0 compiled, $n from disk" "$T/c.out" || { cat "$T/c.out"; fail "third compile not from disk"; }

# Flip one byte of one entry: it is recompiled (once) and replaced.
f=$(find "$T/cache" -name '*.fgk' | head -1)
key=$(basename "$f" .fgk)
printf '\xff' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
"$B" cache explain "${key:0:10}" >"$T/explain" || true
grep -q "valid: *NO" "$T/explain" || { cat "$T/explain"; fail "explain does not see the damage"; }
"$B" compile "$G" --arch sm_90 >"$T/d.out" || fail "compile after damage"
grep -q "(1 compiled, $((n - 1)) from disk" "$T/d.out" || { cat "$T/d.out"; fail "damaged entry not recompiled"; }
"$B" cache explain "${key:0:10}" >"$T/explain" || fail "explain"
grep -q "valid: *yes" "$T/explain" || { cat "$T/explain"; fail "replacement entry not valid"; }
grep -q "arch: *sm_90" "$T/explain" || { cat "$T/explain"; fail "explain: no arch"; }

# An entry that group and others could have written is never loaded: it is
# removed, recompiled and replaced by a private one (one warning).
chmod 0666 "$f"
"$B" compile "$G" --arch sm_90 >"$T/g.out" 2>"$T/g.err" || fail "compile with a planted entry"
grep -q "(1 compiled, $((n - 1)) from disk" "$T/g.out" || { cat "$T/g.out"; fail "planted entry not recompiled"; }
[[ $(grep -c "is writable by group and others (mode 0666); removed it" "$T/g.err") -eq 1 ]] ||
  { cat "$T/g.err"; fail "planted entry: expected one warning"; }
[[ $(stat -c %a "$f") == 600 ]] || fail "replacement entry mode $(stat -c %a "$f")"

# A cache directory others can write is not used: one warning, memory only,
# nothing written into it.
mkdir "$T/shared"
chmod 0777 "$T/shared"
FUSEGEN_CACHE_DIR="$T/shared" "$B" compile "$G" --arch sm_90 >"$T/h.out" 2>"$T/h.err" ||
  { cat "$T/h.out" "$T/h.err"; fail "compile with a shared cache directory"; }
grep -q "cache: memory only" "$T/h.out" || { cat "$T/h.out"; fail "shared directory was used"; }
[[ $(grep -c "warning: kernel cache directory '$T/shared' is writable by group and others" "$T/h.err") -eq 1 ]] ||
  { cat "$T/h.err"; fail "shared directory: expected one warning"; }
[[ -z $(ls -A "$T/shared") ]] || fail "files written into the shared directory"

# ls, clear.
[[ $("$B" cache ls | grep -c cubin) -eq "$n" ]] || fail "cache ls"
"$B" cache clear | grep -q "removed $n entr" || fail "cache clear"
[[ $(find "$T/cache" -type f | wc -l) -eq 0 ]] || fail "files left after clear"

# Errors: unknown arch (exit 2), unknown subcommand (exit 2).
set +e
"$B" compile "$G" --arch sm_9 2>"$T/e.err"; rc=$?
set -e
[[ $rc -eq 2 ]] || fail "unknown arch: exit $rc"
grep -q "unknown arch 'sm_9'" "$T/e.err" || { cat "$T/e.err"; fail "unknown arch message"; }
set +e
"$B" cache stat 2>"$T/f.err"; rc=$?
set -e
[[ $rc -eq 2 ]] || fail "unknown cache command: exit $rc"
grep -q "did you mean 'stats'" "$T/f.err" || { cat "$T/f.err"; fail "cache command suggestion"; }
echo "test_cache_procs: ok ($n kernels)"
