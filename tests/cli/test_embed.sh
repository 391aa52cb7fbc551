#!/usr/bin/env bash
# test_embed.sh -- installs fusegen into a temporary prefix, checks what was
# installed (library exporting only the public API, header, rules, templates,
# pkg-config and CMake package files), then builds examples/embed against it
# twice (find_package and pkg-config) and runs both; each must print OK.
set -euo pipefail

fail() { echo "test_embed: FAIL: $*" >&2; exit 1; }

SRC=${FUSEGEN_SOURCE_DIR:-$(pwd)}
[[ -n "${FUSEGEN_BIN:-}" ]] || fail "FUSEGEN_BIN is not set (run through ctest)"
BUILD=$(cd "$(dirname "$FUSEGEN_BIN")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-embed.XXXXXX")
trap 'rm -rf "$T"' EXIT
P="$T/prefix"
export FUSEGEN_CACHE_DIR="$T/cache"
unset FUSEGEN_RULES

cmake --install "$BUILD" --prefix "$P" >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "cmake --install"; }

LIB=$(ls "$P"/lib*/libfusegen.so 2>/dev/null | head -1) || true
[[ -n "$LIB" ]] || fail "no libfusegen.so under $P/lib*"
LIBDIR=$(dirname "$LIB")
for f in include/fusegen.h share/fusegen/rules/ops.yaml; do
    [[ -f "$P/$f" ]] || fail "not installed: $f"
done
[[ -n "$(ls "$P/share/fusegen/templates")" ]] || fail "no templates installed"
[[ -f "$LIBDIR/pkgconfig/fusegen.pc" ]] || fail "no fusegen.pc"
for f in fusegenConfig.cmake fusegenConfigVersion.cmake fusegenTargets.cmake; do
    [[ -f "$LIBDIR/cmake/fusegen/$f" ]] || fail "no lib/cmake/fusegen/$f"
done

# Only FG_API functions may be exported: every exported symbol must be an
# fg_ name declared with FG_API in the public header.
grep -o 'FG_API [^(]*(' "$P/include/fusegen.h" | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | grep '^fg_' | sort -u >"$T/api.txt"
nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$' \
    | sort -u >"$T/exported.txt"
extra=$(comm -23 "$T/exported.txt" "$T/api.txt")
[[ -z "$extra" ]] || fail "libfusegen.so exports symbols outside the public API: $(echo $extra | head -c 400)"
missing=$(comm -13 "$T/exported.txt" "$T/api.txt")
[[ -z "$missing" ]] || fail "public API functions not exported: $(echo $missing | head -c 400)"
if readelf -d "$LIB" | grep -q 'NEEDED.*libcuda'; then fail "libfusegen.so links libcuda (it must be dlopen'd)"; fi

# find_package(fusegen)
# FUSEGEN_TEST_CFLAGS: the library's sanitizer flags, which a program linking
# a sanitizer-built library needs too.
CFL=${FUSEGEN_TEST_CFLAGS:-}
cmake -S "$SRC/examples/embed" -B "$T/build" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="$CFL" -DCMAKE_EXE_LINKER_FLAGS="$CFL" \
    >"$T/configure.log" 2>&1 || { cat "$T/configure.log"; fail "configuring examples/embed"; }
cmake --build "$T/build" >"$T/build.log" 2>&1 || { cat "$T/build.log"; fail "building examples/embed"; }
"$T/build/embed" >"$T/run.log" 2>&1 || { cat "$T/run.log"; fail "examples/embed (find_package build) failed"; }
grep -qx OK "$T/run.log" || { cat "$T/run.log"; fail "examples/embed did not print OK"; }
cat "$T/run.log"

# pkg-config
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
flags=$(pkg-config --cflags --libs fusegen) || fail "pkg-config fusegen"
rules=$(pkg-config --variable=rulesdir fusegen)
[[ -f "$rules/ops.yaml" ]] || fail "pkg-config rulesdir '$rules' has no ops.yaml"
cc $CFL -std=c11 -O1 -DEMBED_RULES_DIR="\"$rules\"" "$SRC/examples/embed/embed.c" $flags -Wl,-rpath,"$LIBDIR" -lm \
    -o "$T/embed_pc" || fail "building examples/embed with pkg-config flags"
"$T/embed_pc" >"$T/run_pc.log" 2>&1 || { cat "$T/run_pc.log"; fail "examples/embed (pkg-config build) failed"; }
grep -qx OK "$T/run_pc.log" || { cat "$T/run_pc.log"; fail "pkg-config build did not print OK"; }
echo "test_embed: ok"
