#!/usr/bin/env bash
# test_layers.sh -- the layering rule of docs/architecture.md: codegen/ never
# calls runtime/.  Checked twice: no codegen source includes a runtime header,
# and no object file of codegen/ refers to a symbol that only runtime/
# defines (nm over the library's object files).
set -euo pipefail

fail() { echo "test_layers: FAIL: $*" >&2; exit 1; }

SRC=${FUSEGEN_SOURCE_DIR:-$(pwd)}
[[ -n "${FUSEGEN_BIN:-}" ]] || fail "FUSEGEN_BIN is not set (run through ctest)"
BUILD=$(cd "$(dirname "$FUSEGEN_BIN")" && pwd)

# 1. includes
bad=""
for h in "$SRC"/runtime/*.h; do
  name=$(basename "$h")
  [[ -e "$SRC/codegen/$name" ]] && continue   # a codegen header of the same name wins
  if grep -ln "#include \"$name\"" "$SRC"/codegen/*.c "$SRC"/codegen/*.h >/dev/null 2>&1; then
    bad="$bad $(grep -ln "#include \"$name\"" "$SRC"/codegen/*.c "$SRC"/codegen/*.h | xargs -n1 basename | tr '\n' ' ')($name)"
  fi
done
[[ -z "$bad" ]] || fail "codegen files include runtime headers:$bad"

# 2. symbols
objdir=$(find "$BUILD" -type d -path '*fusegen_obj.dir/codegen' | head -1)
rtdir=$(find "$BUILD" -type d -path '*fusegen_obj.dir/runtime' | head -1)
[[ -d "$objdir" && -d "$rtdir" ]] || fail "object directories not found under $BUILD"
ncg=$(ls "$objdir"/*.o | wc -l)
[[ "$ncg" -gt 10 ]] || fail "only $ncg codegen objects found"
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-layers.XXXXXX")
trap 'rm -rf "$T"' EXIT
nm --defined-only "$rtdir"/*.o 2>/dev/null | awk 'NF==3 && $2 ~ /[TDBR]/ {print $3}' | sort -u >"$T/runtime"
nm --defined-only "$objdir"/*.o 2>/dev/null | awk 'NF==3 && $2 ~ /[TDBR]/ {print $3}' | sort -u >"$T/codegen"
nm --undefined-only "$objdir"/*.o 2>/dev/null | awk '{print $NF}' | grep '^fg_' | sort -u >"$T/needed"
[[ -s "$T/runtime" && -s "$T/needed" ]] || fail "nm found no symbols"
comm -12 "$T/needed" "$T/runtime" | comm -23 - "$T/codegen" >"$T/cross"
if [[ -s "$T/cross" ]]; then
  for s in $(cat "$T/cross"); do
    who=$(cd "$objdir" && nm -A --undefined-only ./*.o | awk -v s="$s" '$NF==s {print $1}' | tr '\n' ' ')
    echo "  $s used by $who" >&2
  done
  fail "codegen objects call runtime functions"
fi
echo "test_layers: OK ($ncg codegen objects, $(wc -l <"$T/needed") fg_ symbols needed, none from runtime/)"
