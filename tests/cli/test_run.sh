#!/usr/bin/env bash
# test_run.sh -- `fusegen run`: a checked run in emulation passes and prints
# its seed and table; --device cuda without a driver exits 1 with the clear
# message; --device auto falls back to emulation and says so; bad options
# are usage errors (exit 2).
set -uo pipefail
fail() { echo "test_run: FAIL: $*" >&2; exit 1; }
F=${FUSEGEN_BIN:?FUSEGEN_BIN is not set (run through ctest)}
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-run.XXXXXX")
trap 'rm -rf "$T"' EXIT
export FUSEGEN_CACHE_DIR="$T/cache" FUSEGEN_CUDA_LIBRARY=/nonexistent/libcuda.so
G=examples/resnet_basic_block.yaml

out=$("$F" run $G --device emu --check --seed 11 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "$out"; fail "emu --check exited $rc"; }
for want in "device emu" "seed 11" "fg_conv_bn_act_" "block_relu" "within tolerance"; do
    grep -qF -- "$want" <<<"$out" || { echo "$out"; fail "missing '$want'"; }
done

out=$("$F" run $G --device cuda 2>&1); rc=$?
[[ $rc -eq 1 ]] || { echo "$out"; fail "--device cuda without a driver exited $rc, want 1"; }
grep -qF "/nonexistent/libcuda.so not found" <<<"$out" || { echo "$out"; fail "no-driver message"; }
grep -qF -- "--device emu" <<<"$out" || { echo "$out"; fail "no-driver message lacks the alternative"; }

out=$("$F" run $G --seed 3 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "$out"; fail "auto exited $rc"; }
grep -qF "device emu (auto: no CUDA driver or GPU)" <<<"$out" || { echo "$out"; fail "auto did not say why"; }

"$F" run $G --device gpu >/dev/null 2>&1; [[ $? -eq 2 ]] || fail "--device gpu should be a usage error"
"$F" run $G --seed x >/dev/null 2>&1; [[ $? -eq 2 ]] || fail "--seed x should be a usage error"
"$F" run >/dev/null 2>&1; [[ $? -eq 2 ]] || fail "no graph should be a usage error"
echo "test_run: ok"
