#!/usr/bin/env bash
# test_oom.sh -- host out-of-memory through the command line: with
# FUSEGEN_FAIL_ALLOC=N (codegen/oom.h) the Nth allocation that loading or
# planning makes fails.  For N = 1, 2, 4, ... until `fusegen plan` succeeds
# with no failure injected, each run of a YAML graph and of an ONNX model
# must exit 2 with "error: out of memory while ..." on stderr: never a signal,
# never another error, and (in the sanitized build) never a leak report.
# Then the same for `fusegen run --check` on the emulation backend (compile,
# run, the reference): N doubling until the run succeeds, bisection to the
# run's last allocation, then every 25th of the last 800 (where the compile,
# run and reference allocations lie); some failure must reach the compile.
# Last, graphs whose tensors do not fit under an address-space limit
# (`ulimit -v`; not in the sanitized build, whose shadow memory needs more):
# a 2^31-element input (8 GiB, the largest the loader takes) and a 2 GiB
# intermediate; `fusegen run` exits 2 with an error located at the tensor.
set -uo pipefail
F=${FUSEGEN_BIN:?FUSEGEN_BIN is not set (run through ctest)}
SRC=${FUSEGEN_SOURCE_DIR:-$(pwd)}
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-oom.XXXXXX")
trap 'rm -rf "$T"' EXIT
export FUSEGEN_CACHE=off
cp "$SRC/tests/fuzz/corpus/fuzz_onnx/conv_bn_relu" "$T/conv_bn_relu.onnx"
failures=0

for model in "$SRC/examples/resnet_basic_block.yaml" "$T/conv_bn_relu.onnx"; do
    n=1 runs=0
    while :; do
        FUSEGEN_FAIL_ALLOC=$n timeout 120 "$F" plan "$model" >"$T/out" 2>"$T/err"
        rc=$?
        runs=$((runs + 1))
        [ $rc -eq 0 ] && break
        if [ $rc -ne 2 ] || ! grep -q "error: out of memory while " "$T/err" || grep -q "LeakSanitizer" "$T/err"; then
            echo "FAIL $(basename "$model") N=$n: exit $rc"; cat "$T/err"; failures=$((failures + 1)); break
        fi
        n=$((n * 2))
        if [ $n -gt 100000000 ]; then
            echo "FAIL $(basename "$model"): still failing at N=$n"; failures=$((failures + 1)); break
        fi
    done
    echo "$(basename "$model"): $runs runs, plan succeeds from N=$n"
done
# `fusegen run`: FUSEGEN_FAIL_ALLOC=N must exit 0, or 2 with the message.
run_at() {
    FUSEGEN_CACHE=on FUSEGEN_CACHE_DIR="$T/cache" FUSEGEN_FAIL_ALLOC=$1 timeout 300 "$F" run \
        "$SRC/examples/resnet_basic_block.yaml" --device emu --check --seed 1 >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 0 ] && return 0
    if [ $rc -ne 2 ] || ! grep -q "error: out of memory while " "$T/err" || grep -q "LeakSanitizer" "$T/err"; then
        echo "FAIL run N=$1: exit $rc"; cat "$T/err"; failures=$((failures + 1)); return 2
    fi
    sed -n 's/.*error: out of memory while \([a-z ]*\).*/\1/p' "$T/err" | head -1 >>"$T/stages"
    return 1
}
: >"$T/stages"
n=1 last=0 runs=0
while :; do
    run_at $n; r=$?; runs=$((runs + 1))
    [ $r -ne 1 ] && break
    last=$n n=$((n * 2))
    [ $n -gt 100000000 ] && { echo "FAIL run: still failing at N=$n"; failures=$((failures + 1)); r=2; break; }
done
if [ $r -eq 0 ]; then   # bisect to the first N that succeeds: one past the run's last allocation
    while [ $((n - last)) -gt 1 ]; do
        m=$(( (last + n) / 2 ))
        run_at $m; r=$?; runs=$((runs + 1))
        [ $r -eq 2 ] && break
        if [ $r -eq 0 ]; then n=$m; else last=$m; fi
    done
    for ((m = n - 800 > 1 ? n - 800 : 1; m < n; m += 25)); do   # the last 800: compile, run, reference
        run_at $m; r=$?; runs=$((runs + 1))
        [ $r -eq 2 ] && break
    done
fi
echo "run: $runs runs, succeeds from N=$n; ran out of memory while: $(sort "$T/stages" | uniq -c | tr -s ' \n' ' ')"
grep -q "^compiling the plan" "$T/stages" || { echo "FAIL run: no injected failure reached the compile"; failures=$((failures + 1)); }

# Tensors too large for the address space: exit 2, located at the tensor.
if [ -n "${FUSEGEN_TEST_CFLAGS:-}" ]; then
    echo "huge tensors: not run (sanitized build: ASan's shadow memory does not fit under ulimit -v)"
else
    printf '%s\n' "graph: huge_input" "dtype: fp32" "layout: NCHW" "inputs:" \
        "  - { name: x, shape: [1, 2048, 1024, 1024] }" "nodes:" "  - { name: act, op: relu, inputs: [x] }" \
        "outputs: [act]" >"$T/huge_input.yaml"
    printf '%s\n' "graph: huge_intermediate" "dtype: fp32" "layout: NCHW" "inputs:" \
        "  - { name: x, shape: [1, 512, 1024, 1024] }" "nodes:" "  - { name: a, op: relu, inputs: [x] }" \
        "  - { name: m, op: max_pool2d, inputs: [a], attrs: { kernel: [2, 2], stride: [2, 2] } }" \
        "outputs: [m]" >"$T/huge_intermediate.yaml"
    huge() {   # FILE LIMIT_KB EXPECTED
        (ulimit -v "$2"; FUSEGEN_CACHE=off exec timeout 300 "$F" run "$T/$1" --device emu --seed 1) >"$T/out" 2>"$T/err"
        rc=$?
        if [ $rc -ne 2 ] || ! grep -qF "$T/$1:$3" "$T/err"; then
            echo "FAIL $1 under ulimit -v $2: exit $rc, expected 2 and '$1:$3'"; cat "$T/err"; failures=$((failures + 1))
        else
            echo "$1 under ulimit -v $2: exit 2, $(head -1 "$T/err" | sed "s|$T/||")"
        fi
    }
    huge huge_input.yaml 4000000 "5:5: error: out of host memory: 2147483648 values of tensor 'x'"
    huge huge_intermediate.yaml 1500000 "7:5: error: out of host memory: 2147483904 bytes for the intermediates (the largest: tensor 'a'"
fi
[ $failures -eq 0 ] || { echo "test_oom: $failures failure(s)"; exit 1; }
echo "test_oom: ok"
