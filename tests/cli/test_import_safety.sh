#!/usr/bin/env bash
# test_import_safety.sh -- `fusegen import` output that cannot mean something
# else and cannot be lost (tools/cmd_import.c, docs/onnx.md):
#   - names that are YAML keywords (true, off, No, null, yes, Null, ~), an
#     output file name with ", #", ":", quotes and a newline, and a model
#     file name with a newline (once copied raw into a comment, injecting a
#     `graph:` key) round-trip through import, plan and run (the YAML graph
#     computes what the ONNX model computes);
#   - an import over an earlier one, killed at every call that changes a
#     file (tests/cli/step_fault.c, LD_PRELOAD), leaves the earlier result or
#     the new one, loadable and consistent (its run gives exactly the old or
#     the new output), never a mix;
#   - the same calls failing (ENOSPC) leave the earlier result and nothing
#     else (the directory as it was), or succeed with the new one;
#   - a file-size limit (ulimit -f 0: SIGXFSZ, or EFBIG where it is ignored)
#     leaves the earlier result;
#   - files and directories follow the umask (import, run --save-outputs).
# Needs python3 with numpy and onnx to make the models (exit 77 without).
set -euo pipefail

fail() { echo "test_import_safety: FAIL: $*" >&2; exit 1; }
skip() { echo "test_import_safety: not run: $*"; exit 77; }

SRC=${FUSEGEN_SOURCE_DIR:-$(pwd)}
[[ -n "${FUSEGEN_BIN:-}" ]] || fail "FUSEGEN_BIN is not set (run through ctest)"
[[ -n "${FUSEGEN_STEP_FAULT:-}" && -f "$FUSEGEN_STEP_FAULT" ]] || fail "FUSEGEN_STEP_FAULT is not set (run through ctest)"
B=$FUSEGEN_BIN
python3 -c "import numpy, onnx" 2>/dev/null || skip "python3 has no numpy or onnx"
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-import.XXXXXX")
trap 'rm -rf "$T"' EXIT
export FUSEGEN_CACHE_DIR=${FUSEGEN_CACHE_DIR:-$T/cache} FUSEGEN_QUIET=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0

# model.py SEED PATH: conv (weights True, off) -> mul (No) -> relu, tensors
# null, yes, Null, nodes true, ~, on; and the input x.npy beside it.
cat >"$T/model.py" <<'PY'
import os, sys
import numpy as np, onnx
from onnx import helper as oh, TensorProto as TP, numpy_helper as nh
seed, path = int(sys.argv[1]), sys.argv[2]
r = np.random.default_rng(seed)
w = (r.standard_normal((4, 4, 3, 3)) * 0.3).astype(np.float32)
b = r.standard_normal(4).astype(np.float32)
s = r.standard_normal((1, 4, 1, 1)).astype(np.float32)
nodes = [oh.make_node("Conv", ["x", "True", "off"], ["null"], name="true", pads=[1, 1, 1, 1]),
         oh.make_node("Mul", ["null", "No"], ["yes"], name="~"),
         oh.make_node("Relu", ["yes"], ["Null"], name="on")]
g = oh.make_graph(nodes, "no", [oh.make_tensor_value_info("x", TP.FLOAT, [1, 4, 5, 5])],
                  [oh.make_tensor_value_info("Null", TP.FLOAT, None)],
                  [nh.from_array(w, "True"), nh.from_array(b, "off"), nh.from_array(s, "No")])
m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, path)
np.save(os.path.join(os.path.dirname(path), "x.npy"), r.standard_normal((1, 4, 5, 5)).astype(np.float32))
PY
python3 "$T/model.py" 1 "$T/a.onnx"
python3 "$T/model.py" 2 "$T/b.onnx"
python3 "$T/model.py" 3 "$T/x.onnx"   # the input both runs use: x.npy of seed 3

# run GRAPH OUTDIR: runs GRAPH on x.npy in emulation, the output in OUTDIR/Null.npy.
run() { "$B" run "$1" --device emu --iters 1 --input "x=$T/x.npy" --save-outputs "$2" >"$T/run.out" 2>&1; }
run "$T/a.onnx" "$T/ref_a" || { cat "$T/run.out"; fail "run a.onnx"; }
run "$T/b.onnx" "$T/ref_b" || { cat "$T/run.out"; fail "run b.onnx"; }
cmp -s "$T/ref_a/Null.npy" "$T/ref_b/Null.npy" && fail "models a and b compute the same"

# ---- names and paths YAML could misread --------------------------------------
odd="$T/odd"
mkdir "$odd"
model="$odd/m
graph: evil
.onnx"
out="$odd/o, #x: 'q\"
z.yaml"
cp "$T/a.onnx" "$model"
"$B" import "$model" -o "$out" >"$T/imp.out" 2>&1 || { cat "$T/imp.out"; fail "import of odd names"; }
"$B" plan "$out" >"$T/plan.out" 2>&1 || { cat "$T/plan.out"; fail "plan of the imported YAML"; }
grep -q "ops: 3 -> kernels: 2" "$T/plan.out" || { cat "$T/plan.out"; fail "plan of the imported YAML"; }
grep -q "^graph: \"no\"$" "$out" || { cat "$out"; fail "graph name"; }
[[ "$(grep -c '^graph:' "$out")" == 1 ]] || { cat "$out"; fail "the model's file name injected a key"; }
run "$out" "$T/odd_out" || { cat "$T/run.out"; fail "run of the imported YAML"; }
cmp -s "$T/odd_out/Null.npy" "$T/ref_a/Null.npy" || fail "the imported YAML does not compute what the model does"
echo "odd names: import, plan and run ok"

# ---- interrupted imports ------------------------------------------------------------
# fresh DIR: DIR holds the import of a.onnx as g.yaml.
fresh() {
  rm -rf "$1"
  mkdir -p "$1"
  "$B" import "$T/a.onnx" -o "$1/g.yaml" >/dev/null 2>&1 || fail "import a.onnx"
}
# which DIR: "old" or "new" by what DIR/g.yaml computes; fails on anything else.
which_result() {
  rm -rf "$T/o"
  run "$1/g.yaml" "$T/o" || { cat "$T/run.out"; ls -la "$1"; fail "$2: g.yaml does not load and run"; }
  if cmp -s "$T/o/Null.npy" "$T/ref_a/Null.npy"; then echo old
  elif cmp -s "$T/o/Null.npy" "$T/ref_b/Null.npy"; then echo new
  else fail "$2: g.yaml computes neither the old nor the new result (a mix)"; fi
}
listing() { (cd "$1" && find . | sort; find . -name '*.npy' -exec cksum {} + | sort); }
fresh "$T/d"
FG_STEP_COUNT="$T/count" LD_PRELOAD="$FUSEGEN_STEP_FAULT" "$B" import "$T/b.onnx" -o "$T/d/g.yaml" >/dev/null ||
  fail "import b.onnx over a.onnx"
steps=$(cat "$T/count")
[[ "$steps" -ge 8 ]] || fail "only $steps file-changing calls counted: the fault library did not take"
[[ "$(which_result "$T/d" "uninterrupted")" == new ]] || fail "import over an earlier one"
old=0 new=0
for k in $(seq 1 "$steps"); do
  fresh "$T/d"
  rc=0
  { FG_STEP_KILL=$k LD_PRELOAD="$FUSEGEN_STEP_FAULT" "$B" import "$T/b.onnx" -o "$T/d/g.yaml" >/dev/null 2>&1; } \
    2>/dev/null || rc=$?
  [[ $rc == 137 ]] || fail "killed at step $k: exit $rc, not killed"
  r=$(which_result "$T/d" "killed at step $k")
  [[ $r == old ]] && old=$((old + 1)) || new=$((new + 1))
done
echo "killed at each of $steps steps: $old left the old result, $new the new one, none a mix"
[[ $old -ge 1 && $new -ge 1 ]] || fail "expected both outcomes"
fok=0 ffail=0
for k in $(seq 1 "$steps"); do
  fresh "$T/d"
  before=$(listing "$T/d")
  rc=0
  FG_STEP_FAIL=$k LD_PRELOAD="$FUSEGEN_STEP_FAULT" "$B" import "$T/b.onnx" -o "$T/d/g.yaml" >"$T/f.out" 2>&1 || rc=$?
  r=$(which_result "$T/d" "ENOSPC at step $k")
  if [[ $rc == 0 ]]; then
    [[ $r == new ]] || fail "ENOSPC at step $k: exit 0 but the old result"
    fok=$((fok + 1))
  else
    [[ $rc == 1 && $r == old ]] || { cat "$T/f.out"; fail "ENOSPC at step $k: exit $rc with the $r result"; }
    [[ "$(listing "$T/d")" == "$before" ]] || { diff <(echo "$before") <(listing "$T/d") || true; cat "$T/f.out"
      fail "ENOSPC at step $k: files left behind"; }
    grep -q "cannot" "$T/f.out" || { cat "$T/f.out"; fail "ENOSPC at step $k: no message"; }
    ffail=$((ffail + 1))
  fi
done
echo "ENOSPC at each of $steps steps: $ffail failed leaving the old result and nothing else, $fok succeeded"

fresh "$T/d"
rc=0
{ (ulimit -f 0 && exec "$B" import "$T/b.onnx" -o "$T/d/g.yaml" >/dev/null 2>&1); } 2>/dev/null || rc=$?
[[ $rc != 0 ]] || fail "import under ulimit -f 0 succeeded"
[[ "$(which_result "$T/d" "ulimit -f 0")" == old ]] || fail "ulimit -f 0: not the old result"
echo "file-size limit: exit $rc, the old result intact"

# ---- the umask ------------------------------------------------------------------------
modes() { stat -c %a "$@" | sort -u | tr '\n' ' '; }
for m in 077 022; do
  rm -rf "$T/u$m"
  mkdir "$T/u$m"
  (umask $m && "$B" import "$T/a.onnx" -o "$T/u$m/g.yaml" >/dev/null && run "$T/u$m/g.yaml" "$T/u$m/out") ||
    fail "umask $m"
  f=$(modes "$T/u$m/g.yaml" "$T"/u$m/g.weights.v*/*.npy "$T/u$m/out/Null.npy")
  d=$(modes "$T"/u$m/g.weights.v*/)
  want_f=$(printf '%o' $((0666 & ~0$m)))
  want_d=$(printf '%o' $((0777 & ~0$m)))
  [[ "$f" == "$want_f " && "$d" == "$want_d " ]] || fail "umask $m: files $f, directories $d; want $want_f, $want_d"
done
echo "umask 077 and 022 respected (import, run --save-outputs)"
echo "test_import_safety: ok"
