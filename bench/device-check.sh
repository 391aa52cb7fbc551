#!/usr/bin/env bash
# device-check.sh -- the GPU check: numerics on a real GPU against the host
# reference first, then side-by-side timings against PyTorch, a short table
# last.  Two halves:
#
#   bash bench/device-check.sh build   # here, on a machine with the build
#                                      # dependencies: a Release build with
#                                      # libyaml/Lua/xxhash linked statically
#                                      # into build-static/ (carry that folder)
#   bash bench/device-check.sh run     # on the GPU machine, from the repository
#                                      # root, with build-static/ beside it
#   bash bench/device-check.sh run --dry-run
#                                      # anywhere: DEVICE=emu, tiny shapes, the
#                                      # PyTorch side only checked (no torch)
#
# `run`, in order:
#  1. numerics: the emulation matrix of tests/unit/test_numerics.c run on the
#     GPU (NUMERICS=0 leaves it out), then every example graph (GRAPHS=...) in
#     fp32, fp16 and bf16, NCHW and NHWC through `fusegen run --check`, then
#     the basic and bottleneck blocks at batch 8 and the MLP at 4096 tokens in
#     fp16, bf16 and tf32 NHWC (the Hopper templates' sizes);
#  2. side by side (SIDE=0 leaves it out): the graphs of
#     bench/gen_bench_graphs.py -- each distinct ResNet-50 and MobileNetV2
#     conv layer (conv + BN + activation) and the whole networks at batch 1
#     and 32, in fp16 NHWC, bf16 NHWC, fp32 exact and fp32 TF32 (--precision
#     tf32; the column is skipped with a note when the binary lacks it);
#     transformer MLP GEMMs (tokens 1-4096; 768x3072, 4096x11008) with bias +
#     tanh GELU; element-wise chains of 2-6 ops over 2^24-2^28 values --
#     timed by bench/bench_graphs (fusegen: all kernels compiled at once,
#     then each graph with CUDA-graph replay, median of CUDA-event times
#     after warm-up), by bench/torch_side.py (PyTorch with cuDNN,
#     channels_last, BN folded, cudnn.benchmark, CUDA graph; cuBLASLt's
#     fused GELU epilogue and matmul + separate ops; a copy kernel), and by
#     bench_graphs again with the rules that fuse nothing (the unfused plan,
#     for UNFUSED_PRECISIONS, default fp16_nhwc); bench/side_table.py joins
#     them.
# Full results go to $OUT (when set) or ./device-results/: numerics logs,
# fusegen-*.tsv, torch.tsv, side-summary.txt, side-layers.txt, summary.txt.
#
# Time: the whole run must stay well under 8 minutes on one H200; BUDGET_S
# (default 420) is the wall-clock budget, and each timing step gets only
# what is left (precisions in the order fp16_nhwc, tf32, bf16_nhwc, fp32; a
# step cut short prints what it finished).  Knobs: ITERS (50), WARMUP (5),
# PRECISIONS, UNFUSED_PRECISIONS, BATCHES (1,32), KINDS (layer,net,gemm,pw),
# NUMERICS_TIMEOUT (150 s for the matrix).  Record the table of every real
# GPU run in bench/RESULTS.md.
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
[ "${1:-}" = run ] || { echo "usage: bash bench/device-check.sh build|run [--dry-run]" >&2; exit 2; }
DRY=0
case "${2:-}" in
  "") ;;
  --dry-run) DRY=1 ;;
  *) echo "device-check.sh: unknown option '${2}' (run takes --dry-run)" >&2; exit 2 ;;
esac
if [ "$DRY" = 1 ]; then
  # the script's own logic on a machine without a GPU: emulation, tiny shapes
  DEVICE=emu NUMERICS=0 HOPPER=${HOPPER:-0} ITERS=${ITERS:-2} WARMUP=${WARMUP:-1} BATCHES=${BATCHES:-1,2}
  GRAPHS=${GRAPHS:-"mobilenetv2_block transformer_mlp"} PRECISIONS=${PRECISIONS:-"fp16_nhwc tf32"}
  BUDGET_S=${BUDGET_S:-3600}   # emulation compiles on the host: slower than the GPU machine
fi
BUDGET_S=${BUDGET_S:-420}

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
  FUSEGEN_NUMERICS_DEVICE=$DEVICE timeout "${NUMERICS_TIMEOUT:-150}" "$root/$B/tests/test_numerics" >"$out/numerics-matrix.log" 2>&1
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

# ---- 2b. numerics: shapes large enough for the Hopper templates ----------------
# The examples run at batch 1, too small for gemm_wgmma / conv2d_wgmma (at
# least 66 tiles); on an sm_90 GPU the planner picks them for these: the
# basic block at batch 8 (two stride-1 3x3 convs on shifted rows, the
# residual add), the bottleneck block at batch 8 (a 1x1 GEMM conv, a
# stride-2 3x3 and a stride-2 1x1 on pixel tiles, the residual conv3) and
# the MLP at 4096
# tokens (its [K, N] weights stored [N, K] in tf32), fp16, bf16 and tf32
# NHWC, checked against the host reference before
# any of them is timed.  The plan is logged beside each run (.plan).  HOPPER=0
# leaves it out (the dry run does: emulation of these sizes is slow).
hpass=0 hfail=0
[ "${HOPPER:-1}" = 1 ] && for dt in fp16 bf16 tf32; do
  for g in resnet_basic_block resnet_bottleneck transformer_mlp; do
    v="$work/hopper_${g}_${dt}.yaml"
    d="dtype: $dt"
    [ "$dt" = tf32 ] && d='dtype: fp32\nprecision: tf32'   # fp32 planned with precision tf32
    sed -e "s/^dtype: fp32/$d/" -e "s/^layout: NCHW/layout: NHWC/" \
        -e "s/shape: \[1, \(64\|256\), 56, 56\]/shape: [8, \1, 56, 56]/" -e "s/shape: \[128, 256\]/shape: [4096, 256]/" \
        "examples/$g.yaml" >"$v"
    log="$out/run-hopper-${g}-${dt}.log"
    "$F" plan "$v" >"$log.plan" 2>&1
    wg=$(grep -c "_wgmma " "$log.plan")   # groups on gemm_wgmma / conv2d_wgmma
    timeout 300 "$F" run "$v" --device "$DEVICE" --check --seed 1 >"$log" 2>&1
    rc=$?
    res=$(awk '$NF=="ok"||$NF=="FAIL"{print $4" ("$5")"; exit}' "$log")
    if [ $rc = 0 ]; then hpass=$((hpass + 1)); r=ok; else hfail=$((hfail + 1)); r="FAIL($rc)"; fi
    printf "%-20s %-5s %-5s %-6s %s, %s of its groups on wgmma\n" "${g}_big" "$dt" NHWC "$r" "${res:--}" "$wg" \
      >>"$out/graphs.txt"
  done
done
fail=$((fail + hfail))
[ "${HOPPER:-1}" = 1 ] && note "Hopper-sized graphs (basic and bottleneck blocks at batch 8, MLP at 4096 tokens) x {fp16,bf16,tf32}: $hpass passed, $hfail failed"

# ---- 3. side by side: fusegen vs PyTorch vs the unfused plan -------------------
left() { echo $((BUDGET_S - SECONDS)); }
bench="$work/bench"
BG="$root/$B/bench/bench_graphs"
ITERS=${ITERS:-50} WARMUP=${WARMUP:-5}
precs=${PRECISIONS:-"fp16_nhwc tf32 bf16_nhwc fp32"}
if [ "${SIDE:-1}" = 1 ]; then
  gen=(python3 bench/gen_bench_graphs.py "$bench" --batches "${BATCHES:-1,32}" --kinds "${KINDS:-layer,net,gemm,pw}"
       --precisions "$(echo $precs | tr ' ' ,)")
  [ "$DRY" = 1 ] && gen+=(--tiny)
  "${gen[@]}" >"$out/gen.log" 2>&1 || { note "side by side: generating the graphs failed (gen.log)"; SIDE=0; }
fi
if [ "${SIDE:-1}" = 1 ]; then
  unfused="$work/unfused-rules"
  mkdir -p "$unfused"
  cp rules/ops.yaml rules/pointwise.yaml "$unfused/"
  probe=$(awk -F'\t' 'NR==1{print $4}' "$bench/manifest.tsv")
  if ! "$F" plan "$probe" --precision tf32 >/dev/null 2>&1; then
    note "side by side: this fusegen has no --precision tf32; the tf32 column is skipped"
    precs=$(echo "$precs" | tr ' ' '\n' | grep -vx tf32 | tr '\n' ' ')
  fi
  : >"$out/fusegen-fused.tsv"; : >"$out/fusegen-unfused.tsv"; : >"$out/torch.tsv"
  # fusegen's side of one precision: bench_graphs over its graphs of the given kinds
  fusegen_side() {  # precision kinds rules-dir(or "") out-file
    local p=$1 kinds=$2 rules=$3 dst=$4 list="$work/list-$1-$(basename "$4" .tsv).tsv" t
    awk -F'\t' -v p="$p" -v k=",$kinds," 'BEGIN{OFS="\t"} $3==p && index(k, ","$2",") {print $1, $4}' \
      "$bench/manifest.tsv" >"$list"
    [ -s "$list" ] || return 0
    t=$(left)
    [ "$t" -gt 5 ] || { note "side by side: $p $(basename "$dst" .tsv) skipped: time budget spent"; return 0; }
    local args=(--device "$DEVICE" --iters "$ITERS" --warmup "$WARMUP")
    [ "$p" = tf32 ] && args+=(--precision tf32)
    [ -n "$rules" ] && args+=(--rules "$rules")
    timeout "$t" "$BG" "${args[@]}" "$list" >>"$dst" 2>>"$out/bench_graphs.log"
    local rc=$?
    [ $rc = 124 ] && note "side by side: $p $(basename "$dst" .tsv) cut short by the time budget"
    return 0
  }
  torch_side() {  # precision
    local t=$(left) args=(bench/torch_side.py "$bench/manifest.tsv" --precisions "$1" --iters "$ITERS" --warmup "$WARMUP"
                          --kinds "${KINDS:-layer,net,gemm,pw}")
    local dst="$out/torch.tsv"
    [ "$DEVICE" = cuda ] || { args+=(--dry-run); dst="$out/torch-dry-run.txt"; }
    [ "$t" -gt 5 ] || { note "side by side: PyTorch $1 skipped: time budget spent"; return 0; }
    timeout "$t" python3 "${args[@]}" >>"$dst" 2>>"$out/torch_side.log" ||
      note "side by side: PyTorch $1: rc $? (torch_side.log)"
  }
  for p in $precs; do
    fusegen_side "$p" layer,net,gemm,pw "" "$out/fusegen-fused.tsv"
    torch_side "$p"
  done
  for p in ${UNFUSED_PRECISIONS:-fp16_nhwc}; do
    fusegen_side "$p" layer,net "$unfused" "$out/fusegen-unfused.tsv"
  done
  nf=$(grep -vc FAIL "$out/fusegen-fused.tsv"); ff=$(grep -c FAIL "$out/fusegen-fused.tsv")
  note "side by side: fusegen timed $nf graphs ($ff failed; bench_graphs.log), unfused $(grep -vc FAIL "$out/fusegen-unfused.tsv"), PyTorch rows $(grep -vc '^#' "$out/torch.tsv")"
  python3 bench/side_table.py "$bench/manifest.tsv" "$out/fusegen-fused.tsv" "$out/fusegen-unfused.tsv" \
    "$out/torch.tsv" "$out" >/dev/null 2>"$out/side_table.log" || note "side by side: the table failed (side_table.log)"
fi

# ---- the short table, last ------------------------------------------------------
echo
cat "$out/graphs.txt"
if [ -s "$out/side-summary.txt" ]; then
  echo
  [ "$DEVICE" = cuda ] || echo "(DEVICE=$DEVICE: emulation wall-clock times of tiny shapes, no PyTorch side; not a benchmark)"
  cat "$out/side-summary.txt"
fi
echo
echo "elapsed: ${SECONDS} s (budget ${BUDGET_S} s)" | tee -a "$summary"
cat "$summary"
[ "$fail" = 0 ]
