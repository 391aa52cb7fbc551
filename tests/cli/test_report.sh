#!/usr/bin/env bash
# test_report.sh -- `fusegen compile GRAPH --report` through the command line:
# the report of a small fp16 NHWC conv + BN + ReLU graph and a matmul; the
# conv's row (registers read with the tools, tensor-core mma, no local
# memory) and its FLOPs against 2 N K P Q C R S + one per output element per
# epilogue stage computed here; the same with the tools switched off
# (FUSEGEN_CUDA_TOOLS=off: one note, '-' where they would have read, exit
# 0); the device model's arch (a100 -> sm_80); and the usage errors (an
# unknown model, --device-model without --report, a PTX target).
set -uo pipefail
F=${FUSEGEN_BIN:?FUSEGEN_BIN is not set (run through ctest)}
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-report.XXXXXX")
trap 'rm -rf "$T"' EXIT
export FUSEGEN_CACHE_DIR="$T/cache"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

N=2 C=16 H=10 W=12 K=32
cat >"$T/g.yaml" <<EOF
graph: report_cli
seed: 5
dtype: fp16
layout: NHWC
inputs:
  - { name: x, shape: [$N, $C, $H, $W] }
  - { name: a, shape: [24, 64] }
weights:
  - { name: conv.w, shape: [$K, $C, 3, 3] }
  - { name: bn.gamma, shape: [$K], init: positive }
  - { name: bn.beta, shape: [$K] }
  - { name: bn.mean, shape: [$K] }
  - { name: bn.var, shape: [$K], init: positive }
  - { name: mm.w, shape: [64, 40] }
nodes:
  - { name: conv, op: conv2d, inputs: [x, conv.w], attrs: { stride: [1, 1], padding: [1, 1] } }
  - { name: bn, op: batch_norm, inputs: [conv, bn.gamma, bn.beta, bn.mean, bn.var] }
  - { name: relu, op: relu, inputs: [bn] }
  - { name: mm, op: matmul, inputs: [a, mm.w] }
outputs: [relu, mm]
EOF

# ---- with the tools (when installed) --------------------------------------------
timeout 600 "$F" compile "$T/g.yaml" --report >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 0 ] || { fail "compile --report: exit $rc"; cat "$T/err"; }
grep -q '^performance report: 2 kernels for sm_90, device model h200' "$T/out" || fail "no report header"; 
# the conv's row of the report (not of the compile table above it)
report_row() { awk '/^performance report:/ { on = 1 } on && $1 == "0" && $2 ~ /conv/' "$1"; }
row=$(report_row "$T/out")
[ -n "$row" ] || { fail "no row for the conv kernel"; cat "$T/out"; }
# MFLOP column (20th field): 2 N K P Q C R S (P = H, Q = W: 3x3, padding 1) + bias + relu per output element
want=$(awk -v n=$N -v c=$C -v h=$H -v w=$W -v k=$K 'BEGIN { printf "%.2f", (2 * n * k * h * w * c * 9 + 2 * n * k * h * w) / 1e6 }')
got=$(echo "$row" | awk '{print $20}')
[ "$got" = "$want" ] || fail "conv MFLOP: report $got, computed $want"
if grep -q '^tools: ' "$T/out"; then
    reg=$(echo "$row" | awk '{print $7}') mma=$(echo "$row" | awk '{print $11}')
    stack=$(echo "$row" | awk '{print $9}') ldl=$(echo "$row" | awk '{print $16}') stl=$(echo "$row" | awk '{print $17}')
    [[ "$reg" =~ ^[0-9]+$ ]] && [ "$reg" -gt 0 ] || fail "conv registers '$reg'"
    [[ "$mma" =~ ^[0-9]+$ ]] && [ "$mma" -gt 0 ] || fail "conv on conv2d_tc without tensor-core mma ('$mma'): $row"
    [ "$stack" = 0 ] && [ "$ldl" = 0 ] && [ "$stl" = 0 ] || fail "conv uses local memory: $row"
    grep -q 'fp16 tensor core' <<<"$row" || fail "conv bound not at the fp16 tensor-core rate: $row"
else
    echo "note: cuobjdump / nvdisasm not installed; the tool columns are not checked"
fi

# ---- the tools switched off: one note, '-' for what they read, exit 0 ------------
FUSEGEN_CUDA_TOOLS=off timeout 600 "$F" compile "$T/g.yaml" --report >"$T/out2" 2>"$T/err2"
rc=$?
[ $rc = 0 ] || { fail "compile --report without tools: exit $rc"; cat "$T/err2"; }
[ "$(grep -c '^note: cuobjdump and nvdisasm not found' "$T/out2")" = 1 ] || { fail "no single note about the tools"; cat "$T/out2"; }
row2=$(report_row "$T/out2")
[ "$(echo "$row2" | awk '{print $7}')" = "-" ] || fail "registers shown without cuobjdump: $row2"
[ "$(echo "$row2" | awk '{print $18}')" = "-" ] || fail "occupancy shown without the registers: $row2"
grep -q '(fp32)' <<<"$row2" || fail "bound without SASS not at the fp32 rate: $row2"
[ "$(echo "$row2" | awk '{print $20}')" = "$want" ] || fail "FLOPs differ without the tools: $row2"

# ---- the device model sets the target ----------------------------------------------
timeout 600 "$F" compile "$T/g.yaml" --report --device-model a100 >"$T/out3" 2>"$T/err3" || fail "a100: exit $?"
grep -q '^performance report: 2 kernels for sm_80, device model a100' "$T/out3" || fail "a100 report header"

# ---- usage errors --------------------------------------------------------------------
expect_usage() {
    local what=$1 pattern=$2
    shift 2
    timeout 60 "$F" "$@" >"$T/o" 2>"$T/e"
    local rc=$?
    [ $rc = 2 ] || fail "$what: exit $rc, expected 2"
    grep -q -- "$pattern" "$T/e" || { fail "$what: stderr lacks '$pattern'"; cat "$T/e"; }
}
expect_usage "unknown model" "unknown device model 'h2000' (known: h200, h100, a100)" \
    compile "$T/g.yaml" --report --device-model h2000
expect_usage "model without --report" "--device-model is an option of --report" compile "$T/g.yaml" --device-model h200
expect_usage "PTX target" "give --arch sm_XX, not 'compute_90'" compile "$T/g.yaml" --report --arch compute_90

if [ $failures = 0 ]; then echo "report CLI: ok"; else echo "report CLI: $failures failure(s)"; exit 1; fi
