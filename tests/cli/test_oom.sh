#!/usr/bin/env bash
# test_oom.sh -- host out-of-memory through the command line: with
# FUSEGEN_FAIL_ALLOC=N (codegen/oom.h) the Nth allocation that loading or
# planning makes fails.  For N = 1, 2, 4, ... until `fusegen plan` succeeds
# with no failure injected, each run of a YAML graph and of an ONNX model
# must exit 2 with "error: out of memory while ..." on stderr: never a signal,
# never another error, and (in the sanitized build) never a leak report.
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
[ $failures -eq 0 ] || { echo "test_oom: $failures failure(s)"; exit 1; }
echo "test_oom: ok"
