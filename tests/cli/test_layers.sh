#!/usr/bin/env bash
# test_layers.sh -- the layering of docs/architecture.md#layering, checked on
# the library's object files (nm) and sources:
#
#   leaf -> IR (the record) -> loaders -> registry -> planner
#        -> emit framework -> template families -> runtime
#
# A file may call into its own layer and the layers to its left.  The
# never-edges below are what is enforced: a symbol an object needs that an
# object of a forbidden layer defines is a failure naming both files and the
# symbol.  Besides, codegen/ never calls runtime/: no codegen source includes
# a runtime header, no codegen object needs a symbol only runtime/ defines,
# no runtime object reaches into a writable global of codegen/ (a callback
# slot is a call in disguise), and no object of the library runs a
# constructor (nothing is installed behind the caller's back).
#
# The table is the part to adjust when a file moves: one row per layer,
# object base names (shell globs) of codegen/.  A file in no row is not
# checked.  PENDING lists edges that break a rule today in files still being
# reworked elsewhere ("from->to"); each is reported as pending and must
# disappear when that work lands.
set -euo pipefail
export LC_ALL=C

# ---- the table ---------------------------------------------------------------
LEAF="util oom oom_guard diag arch num* embedded safe_open"
IR="context env graph expr kind shape axes reduce where precision layernorm"
LOADERS="yaml_doc rules_dir opdef_load rule_load rewrite_load template_load graph_load onnx_* weights_file input_file weight_set hook hook_lib hook_sandbox"
REGISTRY="template fold_names"
PLANNER="plan fold rewrite_pass layout_assign concat_inplace reshape_alias plan_print plan_text group_info"
EMIT="emit emit_name emit_render emit_epilogue emit_epilogue_vec emit_index index_map"
FAMILIES="emit_*"                 # every emit_* file that is not in EMIT
# layer: the layers it never calls
NEVER_leaf="ir loaders registry planner emit families other"
NEVER_ir="loaders registry planner emit families"
NEVER_loaders="planner emit families"
NEVER_registry="loaders planner emit families"
NEVER_planner="emit families"
NEVER_emit="families"
PENDING=""
# Circles of files allowed: a module split into parts behind one private
# header (one group of file names a line, sorted): the emit framework
# (emit_impl.h), the Lua hook sandbox (hook_sandbox.h), the ONNX importer
# (onnx_impl.h).  PENDING_CIRCLES: circles
# still to be cut, reported on each run; one that no longer exists fails.
MODULES="emit emit_epilogue emit_epilogue_vec emit_index emit_render
hook_lib hook_sandbox
onnx_convert onnx_convert_1d onnx_convert_index onnx_convert_resize onnx_decode onnx_graph"
PENDING_CIRCLES=""
# -------------------------------------------------------------------------------

fail() { echo "test_layers: FAIL: $*" >&2; exit 1; }

SRC=${FUSEGEN_SOURCE_DIR:-$(pwd)}
[[ -n "${FUSEGEN_BIN:-}" ]] || fail "FUSEGEN_BIN is not set (run through ctest)"
BUILD=$(cd "$(dirname "$FUSEGEN_BIN")" && pwd)
objdir=$(find "$BUILD" -type d -path '*fusegen_obj.dir/codegen' | head -1)
rtdir=$(find "$BUILD" -type d -path '*fusegen_obj.dir/runtime' | head -1)
[[ -d "$objdir" && -d "$rtdir" ]] || fail "object directories not found under $BUILD"
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-layers.XXXXXX")
trap 'rm -rf "$T"' EXIT
bad=0
violation() { echo "  $*" >&2; bad=1; }

# The objects of sources that exist (a build tree may keep an object whose
# source was removed or renamed).
objects() {   # dir srcdir
  local o n
  for o in "$1"/*.c.o; do
    n=$(basename "$o" .c.o)
    [[ -e "$2/$n.c" ]] && echo "$o"
  done
}
objects "$objdir" "$SRC/codegen" >"$T/cg_objs"
objects "$rtdir" "$SRC/runtime" >"$T/rt_objs"
ncg=$(wc -l <"$T/cg_objs")
[[ "$ncg" -gt 10 ]] || fail "only $ncg codegen objects found"

# "symbol file" for every defined function or object; "file symbol" for
# every fg_ symbol a codegen file needs.
defs() { xargs nm -A --defined-only <"$1" 2>/dev/null |
           awk 'NF==3 && $2 ~ /[TDBR]/ {f=$1; sub(/:.*/, "", f); sub(/.*\//, "", f); sub(/\.c\.o$/, "", f); print $3, f}' |
           sort -u; }
defs "$T/cg_objs" >"$T/cg_defs"
defs "$T/rt_objs" >"$T/rt_defs"
xargs nm -A --undefined-only <"$T/cg_objs" 2>/dev/null |
  awk '$NF ~ /^fg_/ {f=$1; sub(/:.*/, "", f); sub(/.*\//, "", f); sub(/\.c\.o$/, "", f); print $NF, f}' |
  sort -u >"$T/cg_needs"
[[ -s "$T/cg_defs" && -s "$T/rt_defs" && -s "$T/cg_needs" ]] || fail "nm found no symbols"

# ---- 1. codegen never calls runtime ------------------------------------------
for h in "$SRC"/runtime/*.h; do
  name=$(basename "$h")
  [[ -e "$SRC/codegen/$name" ]] && continue   # a codegen header of the same name wins
  for f in $(grep -l "#include \"$name\"" "$SRC"/codegen/*.c "$SRC"/codegen/*.h 2>/dev/null); do
    violation "codegen -> runtime: $(basename "$f") includes runtime/$name"
  done
done
cut -d' ' -f1 "$T/cg_defs" | sort -u >"$T/cg_syms"
cut -d' ' -f1 "$T/rt_defs" | sort -u >"$T/rt_syms"
sort -k1,1 "$T/cg_needs" | join - "$T/rt_syms" | join -v1 - "$T/cg_syms" | while read -r s f; do
  echo "codegen -> runtime: $f calls $s"
done >"$T/v1"
# writable globals of codegen (data, bss) that runtime objects refer to
xargs nm -A --defined-only <"$T/cg_objs" 2>/dev/null | awk 'NF==3 && $2 ~ /[DB]/ {print $3}' | sort -u >"$T/cg_data"
xargs nm -A --undefined-only <"$T/rt_objs" 2>/dev/null |
  awk '{f=$1; sub(/:.*/, "", f); sub(/.*\//, "", f); sub(/\.c\.o$/, "", f); print $NF, f}' | sort -u |
  join - "$T/cg_data" | while read -r s f; do
  echo "codegen -> runtime: runtime/$f.c sets codegen's global $s (a hook slot)"
done >>"$T/v1"
# a constructor of ours lands in .init_array (or .ctors); the sanitizers' own module constructors
# are placed in .init_array.00099 and are not ours
while read -r o; do
  if objdump -h "$o" 2>/dev/null | grep -qE '\.(init_array|ctors)[[:space:]]'; then
    echo "codegen -> runtime: $(basename "$(dirname "$o")")/$(basename "$o" .o) runs a constructor"
  fi
done < <(cat "$T/cg_objs" "$T/rt_objs") >>"$T/v1"
while read -r line; do violation "$line"; done <"$T/v1"

# ---- 2. the never-edges inside codegen ---------------------------------------
# layer of a file base name: the first row whose glob matches
layer_of() {
  local n=$1 row p
  for row in LEAF IR LOADERS REGISTRY PLANNER EMIT FAMILIES; do
    for p in ${!row}; do
      # shellcheck disable=SC2053
      if [[ $n == $p ]]; then
        echo "$row" | tr 'A-Z' 'a-z'
        return
      fi
    done
  done
  echo other
}
cut -d' ' -f2 "$T/cg_defs" | sort -u | while read -r f; do echo "$f $(layer_of "$f")"; done >"$T/layers"
# file -> its layer, then "from to symbol" for every call between two files
sort -k1,1 "$T/cg_needs" | join - "$T/cg_defs" | awk '$2 != $3 {print $2, $3, $1}' | sort -u >"$T/edges"
nedges=$(wc -l <"$T/edges")
awk 'NR==FNR {L[$1]=$2; next} {print $1, L[$1], $2, L[$2], $3}' "$T/layers" "$T/edges" >"$T/ledges"
npending=0
while read -r from lf to lt sym; do
  var="NEVER_$lf"
  never=" ${!var:-} "
  [[ "$never" == *" $lt "* ]] || continue
  if [[ " $PENDING " == *" $from->$to "* ]]; then
    echo "test_layers: pending: $from ($lf) -> $to ($lt): $sym" >&2
    npending=$((npending + 1))
    continue
  fi
  violation "$lf -> $lt: $from calls $sym ($to)"
done <"$T/ledges"
for p in $PENDING; do
  grep -q "^${p%%->*} [a-z]* ${p##*->} " "$T/ledges" ||
    violation "pending edge $p no longer exists: remove it from PENDING"
done

# ---- 3. no circle of files but the modules ------------------------------------
# strongly connected components of the call graph between codegen files
awk '{print $1, $2}' "$T/edges" | sort -u | python3 -c '
import sys
g = {}
for line in sys.stdin:
    a, b = line.split()
    g.setdefault(a, set()).add(b)
    g.setdefault(b, set())
index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    for w in sorted(g[v]):
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            out.append(" ".join(sorted(comp)))
sys.setrecursionlimit(100000)
for v in sorted(g):
    if v not in index:
        visit(v)
print("\n".join(sorted(out)))
' >"$T/circles" || fail "python3 is needed for the circle check"
ncircles=0
while read -r c; do
  [[ -n "$c" ]] || continue
  if grep -qxF "$c" <<<"$MODULES"; then continue; fi
  if grep -qxF "$c" <<<"$PENDING_CIRCLES"; then
    echo "test_layers: pending circle: $c" >&2
    ncircles=$((ncircles + 1))
    continue
  fi
  violation "circle of files: $c (not a module behind one private header)"
done <"$T/circles"
while read -r c; do
  [[ -z "$c" ]] || grep -qxF "$c" "$T/circles" || violation "pending circle '$c' no longer exists: remove it"
done <<<"$PENDING_CIRCLES"

[[ $bad -eq 0 ]] || fail "the layering is broken (see above; docs/architecture.md#layering)"
echo "test_layers: OK ($ncg codegen objects, $nedges calls between files, none on a never-edge;" \
     "$npending pending; $ncircles pending circle; codegen/ calls no runtime/)"
