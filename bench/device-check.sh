#!/usr/bin/env bash
# device-check.sh -- the GPU check, sized for one short lease on one GPU
# machine: a smoke test of the riskiest kernels under a hard timeout, then
# side-by-side timings against PyTorch, then numerics against the host
# reference in a budget of their own, a short table last.
#
#   bash bench/device-check.sh build   # here, on a machine with the build
#                                      # dependencies: a Release build with
#                                      # libyaml/Lua/xxhash/Jansson linked
#                                      # statically (build-static/), and the
#                                      # carry set build-device/: only the
#                                      # binaries `run` starts, stripped
#   bash bench/device-check.sh run     # on the GPU machine, from the repository
#                                      # root, with build-device/ beside it
#   bash bench/device-check.sh run --dry-run
#                                      # anywhere: DEVICE=emu, tiny shapes, the
#                                      # PyTorch side only checked (no torch)
#   bash bench/device-check.sh plan    # prints the wall-clock plan of `run`
#
# `run`, in order, each step in a budget of its own (seconds, counted from
# the step's start, never from the script's):
#  0. smoke (SMOKE_TIMEOUT_S, 30 s a kernel, killed at the limit): one
#     mma.sync kernel (gemm_tc_splitk: ldmatrix + cp.async), one wgmma kernel
#     (gemm_wgmma: 2-D TMA into an mbarrier ring) and one 4-D TMA kernel
#     (conv2d_wgmma pixel tiles of a stride-2 conv), each `fusegen run
#     --check`.  A first deadlock on real hardware costs seconds: when the
#     wgmma or TMA kernel fails or hangs, the later steps leave out every
#     shape that would plan onto the Hopper templates (batch 32, GEMMs over
#     64 tokens, the Hopper-sized numerics) and say so.
#  1. side by side (TIMING_BUDGET_S, 240 s): the graphs of
#     bench/gen_bench_graphs.py -- first the attention kernel (BH x S x D
#     16x512x64, 32x2048x64, 16x1024x128; fp16, bf16) against PyTorch's
#     F.scaled_dot_product_attention (flash) and eager attention, and the
#     LayerNorm kernel with its residual add (512x768, 4096x768, 4096x4096;
#     fp16, bf16, fp32) against F.layer_norm; then each distinct ResNet-50 and MobileNetV2
#     conv layer (conv + BN + activation) and the whole networks at batch 1
#     and 32, in fp16 NHWC, fp32 TF32, bf16 NHWC and fp32 exact (in that
#     order: the budget may cut the last); transformer MLP GEMMs (tokens
#     1-4096; 768x3072, 4096x11008) with bias + tanh GELU; element-wise
#     chains of 2-6 ops over 2^24-2^28 values -- timed by bench/bench_graphs
#     (all kernels compiled at once, then each graph with CUDA-graph replay,
#     median of CUDA-event times after warm-up), by bench/torch_side.py
#     (PyTorch with cuDNN, channels_last, BN folded, cudnn.benchmark, CUDA
#     graph; cuBLASLt's fused GELU epilogue and matmul + separate ops; a copy
#     kernel), and by bench_graphs again with the rules that fuse nothing (the
#     unfused plan, for UNFUSED_PRECISIONS, default fp16_nhwc), and right
#     after the first precision its whole networks once more with
#     FUSEGEN_PDL=0 (the same kernels, from the cache, launched without
#     programmatic dependent launch: the "no PDL" column; PDL_OFF=0 leaves
#     it out); joined by bench/side_table.py.
#  2. numerics (NUMERICS_BUDGET_S, 120 s): the Hopper-sized graphs first (the
#     basic and bottleneck blocks at batch 8 and the MLP at 4096 tokens, fp16 /
#     bf16 / tf32 NHWC, with how many groups took wgmma), then the example
#     blocks, then the whole example networks, in fp32 / fp16 / bf16 x NCHW /
#     NHWC through `fusegen run --check`, then the emulation matrix of
#     tests/unit/test_numerics.c on the GPU with what is left.  Each run gets
#     at most what the budget has left; what the budget did not reach is
#     counted, never passed.
# Results: at most 8 files come back from the GPU machine, so $OUT (or
# ./device-results/) receives exactly summary.txt, graphs.txt,
# side-summary.txt, side-layers.txt and results.tar.gz (every log and TSV).
# Knobs: ITERS (50), WARMUP (5), PRECISIONS, UNFUSED_PRECISIONS, BATCHES
# (1,32), KINDS (attn,ln,layer,net,gemm,pw), SMOKE/SIDE/NUMERICS/HOPPER/PDL_OFF=0 leave a
# step out, GRAPHS (the example graphs checked), the three budgets above.
# Record the table of every real GPU run in bench/RESULTS.md.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

SMOKE_TIMEOUT_S=${SMOKE_TIMEOUT_S:-30}
TIMING_BUDGET_S=${TIMING_BUDGET_S:-240}
NUMERICS_BUDGET_S=${NUMERICS_BUDGET_S:-120}
OVERHEAD_S=15        # header, graph generation, packing the results
LEASE_LIMIT_S=480    # the plan must fit 8 minutes (one call may run 10)
CARRY_LIMIT_MB=64    # what may travel to the GPU machine, the tree included

# The wall-clock plan of a real run: every step's worst case.
plan() {
  local smoke=$((3 * SMOKE_TIMEOUT_S))
  local total=$((smoke + TIMING_BUDGET_S + NUMERICS_BUDGET_S + OVERHEAD_S))
  echo "plan of a real run (worst case, s): smoke 3 x $SMOKE_TIMEOUT_S = $smoke, timings $TIMING_BUDGET_S," \
    "numerics $NUMERICS_BUDGET_S, header/generation/packing $OVERHEAD_S: total $total (limit $LEASE_LIMIT_S)"
  [ "$total" -le "$LEASE_LIMIT_S" ]
}

# ---- build: the static build and the carry set --------------------------------
if [ "${1:-}" = build ]; then
  S=${STATIC_DIR:-build-static}
  D=${BUILD_DIR:-build-device}
  cmake -S . -B "$S" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEGEN_STATIC_DEPS=ON >/dev/null || exit 1
  cmake --build "$S" -j "$(nproc)" --target fusegen_cli bench_graphs test_numerics || exit 1
  rm -rf "$D"
  mkdir -p "$D/bench" "$D/tests" "$D/lib"
  cp "$S/fusegen" "$D/" && cp "$S/bench/bench_graphs" "$D/bench/" && cp "$S/tests/test_numerics" "$D/tests/" || exit 1
  strip --strip-debug "$D/fusegen" "$D/bench/bench_graphs" "$D/tests/test_numerics" || exit 1
  # test_numerics links cmocka dynamically; the GPU machine lacks it.
  cp -L "$(ldconfig -p | awk '/libcmocka.so.0 /{print $NF; exit}')" "$D/lib/" || exit 1
  carry_kb=$(du -sk "$D" | cut -f1)
  tree_kb=$(( $(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) / 1024 ))
  total_mb=$(( (carry_kb + tree_kb + 1023) / 1024 ))
  echo "carry set: $D ($((carry_kb / 1024)) MiB: fusegen, bench/bench_graphs, tests/test_numerics, lib/libcmocka.so.0)"
  echo "with the tracked tree ($((tree_kb / 1024)) MiB): $total_mb MiB of $CARRY_LIMIT_MB MiB"
  plan
  [ "$total_mb" -lt "$CARRY_LIMIT_MB" ] || { echo "device-check.sh: the carry set is too large" >&2; exit 1; }
  echo "on the GPU machine: bash bench/device-check.sh run   (carry: $D)"
  exit 0
fi
if [ "${1:-}" = plan ]; then plan; exit; fi
[ "${1:-}" = run ] || { echo "usage: bash bench/device-check.sh build|run [--dry-run]|plan" >&2; exit 2; }
DRY=0
case "${2:-}" in
  "") ;;
  --dry-run) DRY=1 ;;
  *) echo "device-check.sh: unknown option '${2}' (run takes --dry-run)" >&2; exit 2 ;;
esac
B=${BUILD_DIR:-build-device}
if [ "$DRY" = 1 ]; then
  # The script's own logic on a machine without a GPU: emulation, tiny
  # shapes, generous budgets (emulation compiles and runs on the host CPU).
  B=${BUILD_DIR:-build}
  DEVICE=emu NUMERICS_MATRIX=0 HOPPER=${HOPPER:-0} ITERS=${ITERS:-2} WARMUP=${WARMUP:-1} BATCHES=${BATCHES:-1,2}
  GRAPHS=${GRAPHS:-"mobilenetv2_block transformer_mlp"} PRECISIONS=${PRECISIONS:-"fp16_nhwc tf32"}
  SMOKE_TIMEOUT_S=600 TIMING_BUDGET_S=3600 NUMERICS_BUDGET_S=1800
  dry_plan=$(SMOKE_TIMEOUT_S=30 TIMING_BUDGET_S=240 NUMERICS_BUDGET_S=120 bash "$0" plan)
fi
[ -x "$root/$B/fusegen" ] || { echo "device-check.sh: $B/fusegen not found (bash bench/device-check.sh build)" >&2; exit 2; }

out=${OUT:-$root/device-results}
mkdir -p "$out"
rm -f "$out"/summary.txt "$out"/graphs.txt "$out"/side-summary.txt "$out"/side-layers.txt "$out"/results.tar.gz
DEVICE=${DEVICE:-cuda}
F="$root/$B/fusegen"
export LD_LIBRARY_PATH="$root/$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FUSEGEN_RULES="$root/rules" FUSEGEN_SOURCE_DIR="$root"
export FUSEGEN_CACHE_DIR=${FUSEGEN_CACHE_DIR:-/tmp/fusegen-device-cache}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
res="$work/results"           # everything but the short tables: packed at the end
mkdir -p "$res"
summary="$work/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
# Seconds left of the step that began at $step0 with budget $1.
left() { echo $(($1 - (SECONDS - step0))); }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "device: $(nvidia-smi -L 2>/dev/null | head -1 || echo none) ($DEVICE)"
  echo "fusegen: $("$F" --version)"
} | tee -a "$summary"
if [ "$DRY" = 1 ]; then note "dry run: emulation, tiny shapes; $dry_plan"; else note "$(plan)"; fi

# An example graph with its dtype, layout and sizes replaced: variant NAME
# GRAPH DTYPE(fp32|fp16|bf16|tf32) LAYOUT [BATCH TOKENS]; prints the path.
variant() {
  local v="$work/$1.yaml" d="dtype: $3"
  [ "$3" = tf32 ] && d='dtype: fp32\nprecision: tf32'   # fp32 planned with precision tf32
  sed -e "s/^dtype: fp32/$d/" -e "s/^layout: NCHW/layout: $4/" \
      -e "s/shape: \[1, \(64\|256\), 56, 56\]/shape: [${5:-1}, \1, 56, 56]/" \
      -e "s/shape: \[128, 256\]/shape: [${6:-128}, 256]/" "examples/$2.yaml" >"$v"
  echo "$v"
}
# One `fusegen run --check` under a hard limit: check NAME GRAPH LIMIT;
# appends a row to graphs.txt and returns fusegen's status (124: killed).
printf "%-28s %-7s %s\n" run result "rel_l2 (tolerance), templates" >"$work/graphs.txt"
check() {
  local log="$res/run-$1.log" rc r tmpl
  "$F" plan "$2" >"$log.plan" 2>&1
  tmpl=$(grep -o '_wgmma \|_tc \|_tc_splitk ' "$log.plan" | sort | uniq -c | awk '{printf "%s%s x%s", s, $2, $1; s=", "}')
  timeout -k 5 "$3" "$F" run "$2" --device "$DEVICE" --check --seed 1 >"$log" 2>&1
  rc=$?
  case $rc in 0) r=ok ;; 124|137) r=TIMEOUT ;; *) r="FAIL($rc)" ;; esac
  printf "%-28s %-7s %s%s\n" "$1" "$r" "$(awk '$NF=="ok"||$NF=="FAIL"{print $4" ("$5")"; exit}' "$log")" \
    "${tmpl:+, $tmpl}" >>"$work/graphs.txt"
  return $rc
}

# ---- 0. smoke: one mma.sync, one wgmma, one 4-D TMA kernel, hard limits ------
HOPPER_OK=1
if [ "${SMOKE:-1}" = 1 ]; then
  check smoke-mma.sync "$(variant smoke_mma transformer_mlp fp16 NHWC 1 128)" "$SMOKE_TIMEOUT_S"
  note "smoke mma.sync (gemm_tc_splitk, MLP at 128 tokens, fp16): rc $?"
  if [ "$DRY" = 1 ]; then
    note "smoke wgmma / TMA: left out in the dry run (emulating Hopper-sized graphs takes minutes)"
  else
    check smoke-wgmma "$(variant smoke_wgmma transformer_mlp fp16 NHWC 1 4096)" "$SMOKE_TIMEOUT_S"
    rc=$?; [ $rc = 0 ] || HOPPER_OK=0
    note "smoke wgmma + 2-D TMA (gemm_wgmma, MLP at 4096 tokens, fp16): rc $rc"
    check smoke-tma4d "$(variant smoke_tma resnet_bottleneck fp16 NHWC 8)" "$SMOKE_TIMEOUT_S"
    rc=$?; [ $rc = 0 ] || HOPPER_OK=0
    note "smoke 4-D TMA (conv2d_wgmma pixel tiles, bottleneck at batch 8, fp16): rc $rc"
  fi
  if [ "$HOPPER_OK" = 0 ]; then
    note "smoke: a Hopper kernel failed or hung; left out below: batch 32, GEMMs over 64 tokens, Hopper-sized numerics"
    BATCHES=1 HOPPER=0 TOKENS=1,16,64
  fi
fi

# ---- 1. side by side: fusegen vs PyTorch vs the unfused plan -------------------
step0=$SECONDS
bench="$work/bench"
BG="$root/$B/bench/bench_graphs"
ITERS=${ITERS:-50} WARMUP=${WARMUP:-5}
precs=${PRECISIONS:-"fp16_nhwc tf32 bf16_nhwc fp32"}
: >"$res/fusegen-fused.tsv"; : >"$res/fusegen-unfused.tsv"; : >"$res/fusegen-nopdl.tsv"; : >"$res/torch.tsv"
if [ "${SIDE:-1}" = 1 ]; then
  gen=(python3 bench/gen_bench_graphs.py "$bench" --batches "${BATCHES:-1,32}" --kinds "${KINDS:-attn,ln,layer,net,gemm,pw}"
       --precisions "$(echo $precs | tr ' ' ,)")
  [ -n "${TOKENS:-}" ] && gen+=(--tokens "$TOKENS")
  [ "$DRY" = 1 ] && gen+=(--tiny)
  "${gen[@]}" >"$res/gen.log" 2>&1 || { note "side by side: generating the graphs failed (gen.log)"; SIDE=0; }
fi
if [ "${SIDE:-1}" = 1 ]; then
  unfused="$work/unfused-rules"
  mkdir -p "$unfused"
  cp rules/ops.yaml rules/pointwise.yaml "$unfused/"
  # fusegen's side of one precision: bench_graphs over its graphs of the given kinds
  fusegen_side() {  # precision kinds rules-dir(or "") out-file
    local p=$1 kinds=$2 rules=$3 dst=$4 list="$work/list-$1-$(basename "$4" .tsv).tsv" t
    awk -F'\t' -v p="$p" -v k=",$kinds," 'BEGIN{OFS="\t"} $3==p && index(k, ","$2",") {print $1, $4}' \
      "$bench/manifest.tsv" >"$list"
    [ -s "$list" ] || return 0
    t=$(left "$TIMING_BUDGET_S")
    [ "$t" -gt 5 ] || { note "side by side: $p $(basename "$dst" .tsv) skipped: time budget spent"; return 0; }
    local args=(--device "$DEVICE" --iters "$ITERS" --warmup "$WARMUP")
    [ "$p" = tf32 ] && args+=(--precision tf32)
    [ -n "$rules" ] && args+=(--rules "$rules")
    timeout -k 5 "$t" "$BG" "${args[@]}" "$list" >>"$dst" 2>>"$res/bench_graphs.log"
    [ $? = 124 ] && note "side by side: $p $(basename "$dst" .tsv) cut short by the time budget"
    return 0
  }
  torch_side() {  # precision
    local t args=(bench/torch_side.py "$bench/manifest.tsv" --precisions "$1" --iters "$ITERS" --warmup "$WARMUP"
                  --kinds "${KINDS:-attn,ln,layer,net,gemm,pw}")
    local dst="$res/torch.tsv"
    [ "$DEVICE" = cuda ] || { args+=(--dry-run); dst="$res/torch-dry-run.txt"; }
    t=$(left "$TIMING_BUDGET_S")
    [ "$t" -gt 5 ] || { note "side by side: PyTorch $1 skipped: time budget spent"; return 0; }
    timeout -k 5 "$t" python3 "${args[@]}" >>"$dst" 2>>"$res/torch_side.log" ||
      note "side by side: PyTorch $1: rc $? (torch_side.log)"
  }
  first=1
  for p in $precs; do
    fusegen_side "$p" attn,ln,layer,net,gemm,pw "" "$res/fusegen-fused.tsv"
    torch_side "$p"
    # the first precision's whole networks without programmatic dependent launch, in the same budget
    if [ "$first" = 1 ] && [ "${PDL_OFF:-1}" = 1 ]; then
      ( export FUSEGEN_PDL=0; fusegen_side "$p" net "" "$res/fusegen-nopdl.tsv" )
    fi
    first=0
  done
  for p in ${UNFUSED_PRECISIONS:-fp16_nhwc}; do
    fusegen_side "$p" layer,net "$unfused" "$res/fusegen-unfused.tsv"
  done
  nf=$(grep -vc FAIL "$res/fusegen-fused.tsv"); ff=$(grep -c FAIL "$res/fusegen-fused.tsv")
  note "side by side ($((SECONDS - step0)) s of $TIMING_BUDGET_S): fusegen timed $nf graphs ($ff failed; bench_graphs.log), unfused $(grep -vc FAIL "$res/fusegen-unfused.tsv"), without PDL $(grep -vc FAIL "$res/fusegen-nopdl.tsv"), PyTorch rows $(grep -vc '^#' "$res/torch.tsv")"
  python3 bench/side_table.py "$bench/manifest.tsv" "$res/fusegen-fused.tsv" "$res/fusegen-unfused.tsv" \
    "$res/torch.tsv" "$res" "$res/fusegen-nopdl.tsv" >/dev/null 2>"$res/side_table.log" ||
    note "side by side: the table failed (side_table.log)"
fi

# ---- 2. numerics, in a budget of their own ------------------------------------
step0=$SECONDS
npass=0 nfail=0 nleft=0
runs=()   # name|graph-args, most telling first
if [ "${HOPPER:-1}" = 1 ]; then
  for dt in fp16 bf16 tf32; do
    runs+=("hopper-basic-$dt|resnet_basic_block $dt NHWC 8" "hopper-bottleneck-$dt|resnet_bottleneck $dt NHWC 8"
           "hopper-mlp-$dt|transformer_mlp $dt NHWC 1 4096")
  done
fi
GRAPHS=${GRAPHS:-"resnet_basic_block resnet_bottleneck mobilenetv2_block transformer_mlp resnet50 mobilenetv2"}
for g in $GRAPHS; do
  for dt in fp16 bf16 fp32; do
    for lay in NHWC NCHW; do runs+=("$g-$dt-$lay|$g $dt $lay"); done
  done
done
if [ "${NUMERICS:-1}" = 1 ]; then
  for r in "${runs[@]}"; do
    t=$(left "$NUMERICS_BUDGET_S")
    if [ "$t" -le 5 ]; then nleft=$((nleft + 1)); continue; fi
    [ "$t" -gt 120 ] && t=120
    # shellcheck disable=SC2086
    if check "${r%%|*}" "$(variant "${r%%|*}" ${r#*|})" "$t"; then npass=$((npass + 1)); else nfail=$((nfail + 1)); fi
  done
  note "numerics ($((SECONDS - step0)) s of $NUMERICS_BUDGET_S): $npass passed, $nfail failed, $nleft not reached (budget)"
  t=$(left "$NUMERICS_BUDGET_S")
  if [ "${NUMERICS_MATRIX:-1}" = 1 ] && [ -x "$root/$B/tests/test_numerics" ] && [ "$t" -gt 20 ]; then
    FUSEGEN_NUMERICS_DEVICE=$DEVICE timeout -k 5 "$t" "$root/$B/tests/test_numerics" >"$res/numerics-matrix.log" 2>&1
    rc=$?
    note "numerics matrix ($DEVICE, $t s): $(grep -E 'PASSED|FAILED' "$res/numerics-matrix.log" | tr '\n' ' ') rc=$rc"
    [ $rc = 0 ] || nfail=$((nfail + 1))
  fi
fi

# ---- the results: at most 8 files back, the short table last -------------------
cp "$work/graphs.txt" "$out/graphs.txt"
for f in side-summary.txt side-layers.txt; do [ -s "$res/$f" ] && cp "$res/$f" "$out/$f"; done
tar -czf "$out/results.tar.gz" -C "$work" results
echo "elapsed: ${SECONDS} s" >>"$summary"
cp "$summary" "$out/summary.txt"
echo
cat "$out/graphs.txt"
if [ -s "$out/side-summary.txt" ]; then
  echo
  [ "$DEVICE" = cuda ] || echo "(DEVICE=$DEVICE: emulation wall-clock times of tiny shapes, no PyTorch side; not a benchmark)"
  cat "$out/side-summary.txt"
fi
echo
cat "$out/summary.txt"
echo "results: $(find "$out" -maxdepth 1 -type f | wc -l) files in $out (at most 8 come back)"
[ "$nfail" = 0 ]
