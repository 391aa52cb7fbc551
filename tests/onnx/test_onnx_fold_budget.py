#!/usr/bin/env python3
"""test_onnx_fold_budget.py -- the memory budget of import-time constant
folding (docs/onnx.md, Constant folding), through `fusegen plan` under an
address-space limit (ulimit -v 1.5 GiB), each model a few hundred bytes:

  * Concat of 1024 references to one 2^18+1-value constant: refused from
    the inputs' shapes (over 2^28 elements) before any value is copied (the
    copies alone were 2 GiB);
  * forty ConstantOfShape nodes of 2^24 floats (64 MiB each) under
    FUSEGEN_ONNX_FOLD_MB=64: the second is over the budget, a located error
    naming the node and the budget, exit 2, no abort;
  * the same model within a budget of 256 MiB folds (no limit reached);
  * an invalid FUSEGEN_ONNX_FOLD_MB is one warning and the default.

Environment: FUSEGEN_BIN (the CLI).  Exit 77 (skipped) when onnx or numpy
are not installed.
"""
import os
import resource
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx numpy)" % e)
    sys.exit(77)

VMEM = 1536 << 20


def save(path, nodes, inits):
    nodes = nodes + [h.make_node("Relu", ["x"], ["y"], name="relu")]
    g = h.make_graph(nodes, "bomb", [h.make_tensor_value_info("x", TP.FLOAT, [1, 4])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def fill(name, out, shape="shape"):
    return h.make_node("ConstantOfShape", [shape], [out], name=name, value=nh.from_array(np.array([1.0], np.float32)))


def plan(path, env=None):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (VMEM, VMEM))
    e = dict(os.environ, FUSEGEN_QUIET="0", **(env or {}))
    r = subprocess.run([os.environ.get("FUSEGEN_BIN", "build/fusegen"), "plan", path], env=e, preexec_fn=limit,
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def main():
    failed = []

    def expect(cond, what, out=""):
        print("%s %s" % ("ok  " if cond else "FAIL", what))
        if not cond:
            print("    " + out.strip().replace("\n", "\n    "))
            failed.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        n = (1 << 18) + 1
        concat = save(os.path.join(tmp, "concat.onnx"),
                      [fill("fill", "c"), h.make_node("Concat", ["c"] * 1024, ["cat"], name="cat", axis=0)],
                      [nh.from_array(np.array([n], np.int64), "shape")])
        rc, out = plan(concat)
        expect(rc == 2 and "concat.onnx: error: node 1 'cat' (Concat): cannot be folded (its inputs are constants): "
               "the result would have more than 268435456 elements" in out,
               "Concat over the element limit refused before copying (exit %d)" % rc, out)

        many = save(os.path.join(tmp, "many.onnx"), [fill("fill%d" % i, "c%d" % i) for i in range(40)],
                    [nh.from_array(np.array([1 << 24], np.int64), "shape")])
        rc, out = plan(many, {"FUSEGEN_ONNX_FOLD_MB": "64"})
        expect(rc == 2 and "many.onnx: error: node 1 'fill1' (ConstantOfShape): cannot be folded (its inputs are "
               "constants): the result (16777216 values, 64.0 MiB) is over what is left of the folding budget "
               "(0.0 MiB; FUSEGEN_ONNX_FOLD_MB sets it)" in out and "out of memory" not in out,
               "40 x 64 MiB of folded constants stop at the budget with a located error (exit %d)" % rc, out)

        few = save(os.path.join(tmp, "few.onnx"), [fill("fill%d" % i, "c%d" % i) for i in range(3)],
                   [nh.from_array(np.array([1 << 22], np.int64), "shape")])
        rc, out = plan(few, {"FUSEGEN_ONNX_FOLD_MB": "64"})
        expect(rc == 0, "3 x 16 MiB within a 64 MiB budget fold (exit %d)" % rc, out)
        rc, out = plan(few, {"FUSEGEN_ONNX_FOLD_MB": "40"})
        expect(rc == 2 and "node 2 'fill2'" in out and "over what is left of the folding budget (8.0 MiB" in out,
               "the budget is for the whole load: the third of 3 x 16 MiB is over 40 MiB (exit %d)" % rc, out)
        rc, out = plan(few, {"FUSEGEN_ONNX_FOLD_MB": "lots"})
        expect(rc == 0 and "FUSEGEN_ONNX_FOLD_MB" in out, "an invalid FUSEGEN_ONNX_FOLD_MB warns, the default holds",
               out)
    if failed:
        print("FAILED: %s" % ", ".join(failed))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
