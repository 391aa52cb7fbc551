#!/usr/bin/env bash
# test_npy_io.sh -- `fusegen run --input NAME=FILE.npy --save-outputs DIR
# --save-reference DIR`: an input read from a hand-made .npy file (NaN
# included) gives the expected output bytes; a saved output read back as the
# input of a second run round-trips; fp16 inputs and outputs stay float16;
# --check matches NaN the reference produces; a file of the wrong shape or
# dtype, an unknown input name, a malformed or repeated --input are usage
# errors (exit 2) with a clear message; an output directory that cannot be
# created is exit 1.
set -uo pipefail
fail() { echo "test_npy_io: FAIL: $*" >&2; exit 1; }
F=${FUSEGEN_BIN:?FUSEGEN_BIN is not set (run through ctest)}
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-npy.XXXXXX")
trap 'rm -rf "$T"' EXIT
export FUSEGEN_CACHE_DIR="$T/cache" FUSEGEN_CUDA_LIBRARY=/nonexistent/libcuda.so

# npy FILE DESCR SHAPE DATA: an .npy file (format 1.0) whose header is padded
# to 64 bytes like NumPy's; DATA is printf escapes.
npy() {
    local h="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
    while (( (10 + ${#h} + 1) % 64 )); do h="$h "; done
    printf '\x93NUMPY\x01\x00'"$(printf '\\x%02x\\x00' $(( ${#h} + 1 )))"'%s\n' "$h" > "$1"
    printf "$4" >> "$1"
}
hex() { od -An -v -tx1 "$1" | tr -d ' \n'; }

cat > "$T/g.yaml" <<'EOF'
graph: npy_io
inputs: [ { name: x, shape: [4] } ]
nodes:
  - { name: r, op: relu, inputs: [x] }
outputs: [r]
EOF
# 1, -2, NaN, 3.5 as little-endian float32
npy "$T/in.npy" '<f4' '(4,)' '\x00\x00\x80\x3f\x00\x00\x00\xc0\x00\x00\xc0\x7f\x00\x00\x60\x40'
out=$("$F" run "$T/g.yaml" --device emu --check --input "x=$T/in.npy" --save-outputs "$T/out" \
      --save-reference "$T/ref" 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "$out"; fail "run with --input exited $rc"; }
for want in "input x from $T/in.npy" "outputs saved in $T/out" "reference outputs saved in $T/ref" \
            "the reference has 1 NaN and 0 infinite elements, matched" "within tolerance"; do
    grep -qF -- "$want" <<<"$out" || { echo "$out"; fail "missing '$want'"; }
done
# relu(1, -2, NaN, 3.5) = 1, 0, NaN, 3.5: NaN propagates (ONNX / PyTorch)
npy "$T/want.npy" '<f4' '(4,)' '\x00\x00\x80\x3f\x00\x00\x00\x00\x00\x00\xc0\x7f\x00\x00\x60\x40'
[[ "$(hex "$T/out/r.npy")" == "$(hex "$T/want.npy")" ]] || { od -An -tx1 "$T/out/r.npy"; fail "saved output bytes"; }
# the reference is float64: a 160-byte file (128-byte header + 4 doubles)
[[ $(stat -c %s "$T/ref/r.npy") -eq 160 ]] || fail "reference file size $(stat -c %s "$T/ref/r.npy")"
grep -qF "'descr': '<f8'" "$T/ref/r.npy" || fail "reference is not float64"

# round trip: the saved output is a valid input of the same shape and dtype
out=$("$F" run "$T/g.yaml" --device emu --input "x=$T/out/r.npy" --save-outputs "$T/out2" 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "$out"; fail "round trip exited $rc"; }
cmp -s "$T/out/r.npy" "$T/out2/r.npy" || fail "relu(relu(x)) != relu(x) through files"

# fp16: float16 in, float16 out
cat > "$T/h.yaml" <<'EOF'
graph: npy_half
dtype: fp16
inputs: [ { name: x, shape: [2, 2] } ]
nodes:
  - { name: y, op: relu6, inputs: [x] }
outputs: [y]
EOF
# 1, -2, 7, NaN as float16: relu6 gives 1, 0, 6, NaN
npy "$T/h.npy" '<f2' '(2, 2)' '\x00\x3c\x00\xc0\x00\x47\x00\x7e'
out=$("$F" run "$T/h.yaml" --device emu --check --input "x=$T/h.npy" --save-outputs "$T/hout" 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "$out"; fail "fp16 run exited $rc"; }
npy "$T/hwant.npy" '<f2' '(2, 2)' '\x00\x3c\x00\x00\x00\x46\x00\x7e'
[[ "$(hex "$T/hout/y.npy")" == "$(hex "$T/hwant.npy")" ]] || { od -An -tx1 "$T/hout/y.npy"; fail "fp16 output bytes"; }

# refusals
expect() {   # expect RC NEEDLE ARGS...
    local want_rc=$1 needle=$2; shift 2
    out=$("$F" run "$@" 2>&1); rc=$?
    [[ $rc -eq $want_rc ]] || { echo "$out"; fail "'$*' exited $rc, want $want_rc"; }
    grep -qF -- "$needle" <<<"$out" || { echo "$out"; fail "'$*' does not say '$needle'"; }
}
npy "$T/s5.npy" '<f4' '(5,)' '\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
expect 2 "the file holds shape [5] but input 'x' has shape [4]" "$T/g.yaml" --device emu --input "x=$T/s5.npy"
npy "$T/h4.npy" '<f2' '(4,)' '\x00\x3c\x00\xc0\x00\x47\x00\x7e'
expect 2 "the file holds fp16 data but input 'x' is fp32" "$T/g.yaml" --device emu --input "x=$T/h4.npy"
npy "$T/d.npy" '<f8' '(4,)' '\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
expect 2 "the file holds float64 data but input 'x' is fp32" "$T/g.yaml" --device emu --input "x=$T/d.npy"
npy "$T/t.npy" '<f4' '(4,)' '\x00\x00\x80\x3f'
expect 2 "truncated" "$T/g.yaml" --device emu --input "x=$T/t.npy"
expect 2 "the graph has no input 'y' (its inputs: x)" "$T/g.yaml" --device emu --input "y=$T/in.npy"
expect 2 "No such file" "$T/g.yaml" --device emu --input "x=$T/none.npy"
expect 2 "--input takes NAME=FILE.npy" "$T/g.yaml" --device emu --input "x"
expect 2 "--input x is given twice" "$T/g.yaml" --device emu --input "x=$T/in.npy" --input "x=$T/in.npy"
: > "$T/afile"
expect 1 "cannot create directory $T/afile/sub" "$T/g.yaml" --device emu --save-outputs "$T/afile/sub"
echo "test_npy_io: ok"
