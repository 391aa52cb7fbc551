#!/usr/bin/env bash
# device-check.sh -- the GPU check: the numerics matrix on a real GPU against
# the host reference, then fused-vs-unfused timings.  Two halves:
#
#   bash bench/device-check.sh build   # here, on a machine with the build
#                                      # dependencies: a Release build with
#                                      # libyaml/Lua/xxhash linked statically
#                                      # into build-static/ (carry that folder)
#   bash bench/device-check.sh run     # on the GPU machine, from the repository
#                                      # root, with build-static/ beside it
#
# `run` checks numerics first (the emulation matrix of tests/unit/
# test_numerics.c run on the GPU, then every example graph in fp32, fp16 and
# bf16, NCHW and NHWC through `fusegen run --check`), then times each example
# fused and unfused (the same ops, no fusion rules) as medians of repeated
# runs, and prints a short table last.  Full logs go to $OUT (when set) or
# ./device-results/.  DEVICE=emu runs the same steps in CPU emulation (to try
# the script on a machine without a GPU; slow, so keep it to small graphs
# with GRAPHS=... and NUMERICS=0 to leave out the matrix).  Budget: well under 8 minutes on one H200.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
B=${BUILD_DIR:-build-static}

if [ "${1:-}" = build ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEGEN_STATIC_DEPS=ON >/dev/null || exit 1
  cmake --build "$B" -j "$(nproc)" || exit 1
  # The test programs link cmocka dynamically; the GPU machine lacks it.
  mkdir -p "$B/lib"
  cp -L "$(ldconfig -p | awk '/libcmocka.so.0 /{print $NF; exit}')" "$B/lib/" || exit 1
  echo "built $B ($(du -sh "$B" | cut -f1)); carry it to the GPU machine"
  exit 0
fi
[ "${1:-}" = run ] || { echo "usage: bash bench/device-check.sh build|run" >&2; exit 2; }

out=${OUT:-$root/device-results}
mkdir -p "$out"
DEVICE=${DEVICE:-cuda}
F="$root/$B/fusegen"
export LD_LIBRARY_PATH="$root/$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FUSEGEN_RULES="$root/rules" FUSEGEN_SOURCE_DIR="$root"
export FUSEGEN_CACHE_DIR=${FUSEGEN_CACHE_DIR:-/tmp/fusegen-device-cache}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "device: $(nvidia-smi -L 2>/dev/null | head -1 || echo none)"
  echo "fusegen: $("$F" --version)"
} | tee -a "$summary"

# ---- 1. numerics: the emulation matrix, on the GPU --------------------------
if [ "${NUMERICS:-1}" = 1 ] && [ -x "$root/$B/tests/test_numerics" ]; then
  FUSEGEN_NUMERICS_DEVICE=$DEVICE timeout 300 "$root/$B/tests/test_numerics" >"$out/numerics-matrix.log" 2>&1
  rc=$?
  note "numerics matrix ($DEVICE): $(grep -E 'PASSED|FAILED' "$out/numerics-matrix.log" | tr '\n' ' ') rc=$rc"
fi

# ---- 2. numerics: example graphs x dtype x layout ---------------------------
GRAPHS=${GRAPHS:-"resnet_basic_block resnet_bottleneck mobilenetv2_block transformer_mlp resnet50 mobilenetv2"}
pass=0 fail=0
printf "%-20s %-5s %-5s %-6s %s\n" graph dtype layout result "rel_l2 (tolerance)" >"$out/graphs.txt"
for g in $GRAPHS; do
  for dt in fp32 fp16 bf16; do
    for lay in NCHW NHWC; do
      v="$work/${g}_${dt}_${lay}.yaml"
      sed -e "s/^dtype: fp32/dtype: $dt/" -e "s/^layout: NCHW/layout: $lay/" "examples/$g.yaml" >"$v"
      log="$out/run-${g}-${dt}-${lay}.log"
      timeout 120 "$F" run "$v" --device "$DEVICE" --check --seed 1 >"$log" 2>&1
      rc=$?
      res=$(awk '$NF=="ok"||$NF=="FAIL"{print $4" ("$5")"; exit}' "$log")
      if [ $rc = 0 ]; then pass=$((pass + 1)); r=ok; else fail=$((fail + 1)); r="FAIL($rc)"; fi
      printf "%-20s %-5s %-5s %-6s %s\n" "$g" "$dt" "$lay" "$r" "${res:--}" >>"$out/graphs.txt"
    done
  done
done
note "example graphs x {fp32,fp16,bf16} x {NCHW,NHWC}: $pass passed, $fail failed"

# ---- 3. timing: fused vs unfused, medians --------------------------------------
unfused="$work/unfused-rules"
mkdir -p "$unfused"
cp rules/ops.yaml rules/pointwise.yaml "$unfused/"
median_ms() { awk '/^  total/{print $2; exit}' "$1"; }
kernels() { awk '/ kernels \(compiled/{for(i=1;i<=NF;i++) if($i=="kernels") print $(i-1); exit}' "$1"; }
printf "%-20s %-5s %8s %10s %8s %10s %7s\n" graph dtype kernels fused_ms unfused unfused_ms speedup >"$out/timing.txt"
ITERS=${ITERS:-50}
for g in $GRAPHS; do
  for dt in fp32 fp16; do
    v="$work/${g}_${dt}_NCHW.yaml"
    timeout 120 "$F" run "$v" --device "$DEVICE" --iters "$ITERS" --seed 1 >"$out/time-${g}-${dt}-fused.log" 2>&1
    timeout 120 "$F" run "$v" --rules "$unfused" --device "$DEVICE" --iters "$ITERS" --seed 1 \
      >"$out/time-${g}-${dt}-unfused.log" 2>&1
    a=$(median_ms "$out/time-${g}-${dt}-fused.log") b=$(median_ms "$out/time-${g}-${dt}-unfused.log")
    ka=$(kernels "$out/time-${g}-${dt}-fused.log") kb=$(kernels "$out/time-${g}-${dt}-unfused.log")
    sp=$(awk -v a="${a:-0}" -v b="${b:-0}" 'BEGIN{ if (a > 0) printf "%.2fx", b / a; else print "-" }')
    printf "%-20s %-5s %8s %10s %8s %10s %7s\n" "$g" "$dt" "${ka:--}" "${a:--}" "${kb:--}" "${b:--}" "$sp" >>"$out/timing.txt"
  done
done

# ---- the short table, last ------------------------------------------------------
echo
cat "$out/graphs.txt"
echo
echo "median ms per run over $ITERS runs (first excluded), batch 1; speedup = unfused / fused"
cat "$out/timing.txt"
echo
cat "$summary"
[ "$fail" = 0 ]
