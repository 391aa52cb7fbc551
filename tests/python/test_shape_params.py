#!/usr/bin/env python3
"""test_shape_params.py -- one model at many sizes with the sizes as kernel
parameters (fg_compile_options.shape_params, docs/codegen.md "Sizes as
parameters").

A small attention block built with the onnx package (LayerNorm, Q/K/V
projections, heads by Reshape [0, 0, 4, 8] and Transpose, scaled
Q K^T, Softmax, P V, the heads merged back, the output projection with
the residual, and a GELU MLP) has symbolic `batch` and `seq`.  It is
loaded at several sizes through the Python package and run in emulation
against onnxruntime (fp32 relative L2 <= 1e-4) at each:

  * with shape_params, sizes whose template choices agree render the same
    sources and compile nothing: batch 3 after batch 2 at sequence 9 (the
    projections are batched matrix products of M = sequence rows, a gemv
    holding its 9 rows in registers for both), batch 5 after 2 at
    sequence 6, batch 5 after 8 at sequence 17 (tiled GEMMs); a new
    sequence length below 17 compiles the gemv kernels again (their row
    count is a template choice); every size's compiles equal its kernels
    whose names no earlier size had;
  * without it, the same second sizes compile kernels of their own (the
    contrast the option exists for);
  * `fusegen compile --dim ... --shape-params` at the second size reports
    0 compiled, every kernel from the disk cache of the first.

Environment: FUSEGEN_LIB (libfusegen.so), FUSEGEN_BIN (the fusegen
command).  Exit 77 (skipped) without numpy, onnx or onnxruntime.
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import onnx  # noqa: F401
    import onnxruntime as ort
    from onnx import TensorProto as TP
    from onnx import helper as oh
    from onnx import numpy_helper as nh
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install numpy onnx onnxruntime)" % e)
    sys.exit(77)

SRC = os.environ.get("FUSEGEN_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
if os.environ.get("FUSEGEN_LIB") and not os.environ.get("FUSEGEN_LIBRARY"):
    os.environ["FUSEGEN_LIBRARY"] = os.environ["FUSEGEN_LIB"]
os.environ["FUSEGEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="fusegen-shapetest-")   # mode 0700, this test's own
os.environ.setdefault("FUSEGEN_QUIET", "1")

import fusegen  # noqa: E402

TOL = 1e-4
D, H, F = 32, 4, 64
RNG = np.random.default_rng(26)


def rel_l2(y, ref):
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-30))


def block_model():
    """The attention block, opset 17, x [batch, seq, D] -> y [batch, seq, D]."""
    def w(name, *shape, scale=0.2):
        return nh.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [w("g1", D, scale=1.0), w("b1", D), w("wq", D, D), w("wk", D, D), w("wv", D, D), w("wo", D, D),
             w("bo", D), w("g2", D, scale=1.0), w("b2", D), w("w1", D, F), w("c1", F), w("w2", F, D), w("c2", D),
             nh.from_array(np.array([0, 0, H, D // H], np.int64), "heads"),
             nh.from_array(np.array([0, 0, D], np.int64), "merged"),
             nh.from_array(np.array(1.0 / np.sqrt(D // H), np.float32), "scale"),
             nh.from_array(np.array(np.sqrt(0.5), np.float32), "rsqrt2"),
             nh.from_array(np.array(1.0, np.float32), "one"), nh.from_array(np.array(0.5, np.float32), "half")]
    n = oh.make_node
    nodes = [n("LayerNormalization", ["x", "g1", "b1"], ["ln1"], axis=-1, epsilon=1e-5)]
    for p in "qkv":
        nodes += [n("MatMul", ["ln1", "w" + p], [p + "0"]), n("Reshape", [p + "0", "heads"], [p + "1"])]
    nodes += [n("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]), n("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
              n("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
              n("MatMul", ["q", "kt"], ["s0"]), n("Mul", ["s0", "scale"], ["s"]),
              n("Softmax", ["s"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["o0"]),
              n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]), n("Reshape", ["o1", "merged"], ["o2"]),
              n("MatMul", ["o2", "wo"], ["o3"]), n("Add", ["o3", "bo"], ["o4"]), n("Add", ["o4", "x"], ["r1"]),
              n("LayerNormalization", ["r1", "g2", "b2"], ["ln2"], axis=-1, epsilon=1e-5),
              n("MatMul", ["ln2", "w1"], ["f0"]), n("Add", ["f0", "c1"], ["f1"]),
              # GELU, erf form as the exporters write it
              n("Mul", ["f1", "rsqrt2"], ["e0"]), n("Erf", ["e0"], ["e1"]), n("Add", ["e1", "one"], ["e2"]),
              n("Mul", ["f1", "e2"], ["e3"]), n("Mul", ["e3", "half"], ["f2"]),
              n("MatMul", ["f2", "w2"], ["f3"]), n("Add", ["f3", "c2"], ["f4"]), n("Add", ["f4", "r1"], ["y"])]
    g = oh.make_graph(nodes, "block", [oh.make_tensor_value_info("x", TP.FLOAT, ["batch", "seq", D])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, ["batch", "seq", D])], inits)
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


MODEL = block_model()
ORT = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])


class Sizes:
    """One context compiling MODEL at sizes, recording per size the kernel
    names, the compiles it cost and the error against onnxruntime."""

    def __init__(self, shape_params):
        self.ctx = fusegen.Context(device="emu")
        self.shape_params = shape_params
        self.names = set()

    def run(self, batch, seq):
        before = self.ctx.kernel_counts()
        g = self.ctx.load_bytes(MODEL, "block.onnx", dims={"batch": batch, "seq": seq})
        exe = self.ctx.compile(g, shape_params=self.shape_params)
        after = self.ctx.kernel_counts()
        compiled = after["host_compiled"] - before["host_compiled"]
        names = [k.name for k in exe.kernels]
        new = len(set(names) - self.names)
        self.names |= set(names)
        x = RNG.standard_normal((batch, seq, D)).astype(np.float32)
        err = rel_l2(exe({"x": x})["y"], ORT.run(None, {"x": x})[0])
        choices = [k.choices for k in exe.kernels]
        exe.close()
        return compiled, new, err, choices


class TestShapeParams(unittest.TestCase):
    def test_sizes_share_compiles(self):
        s = Sizes(True)
        seen = []
        for b, q in ((2, 9), (3, 9), (2, 6), (5, 6), (1, 5), (8, 17), (5, 17)):
            compiled, new, err, choices = s.run(b, q)
            seen.append((b, q, compiled))
            self.assertLessEqual(err, TOL, "batch %d seq %d: rel L2 %g" % (b, q, err))
            self.assertEqual(compiled, new, "batch %d seq %d: compiles are the kernels no earlier size had" % (b, q))
            if (b, q) == (2, 9):
                self.assertGreater(compiled, 0)
                self.assertTrue(any("MR=" in c or "BM=" in c or "TILE_M=" in c for c in choices), choices)
            if (b, q) in ((3, 9), (5, 6), (5, 17)):
                self.assertEqual(compiled, 0, "batch %d seq %d compiled %d kernels" % (b, q, compiled))
        print("shape_params: compiles per (batch, seq): %s" % seen)

    def test_specialized_sizes_compile_their_own(self):
        s = Sizes(False)
        first, _, err1, _ = s.run(2, 9)
        second, new, err2, _ = s.run(3, 9)
        self.assertLessEqual(max(err1, err2), TOL)
        self.assertGreater(second, 0)
        self.assertEqual(second, new)
        print("specialized: batch 2 compiled %d, then batch 3 compiled %d" % (first, second))

    def test_cli_second_size_from_the_cache(self):
        exe = os.environ.get("FUSEGEN_BIN") or os.path.join(SRC, "build", "fusegen")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "block.onnx")
            with open(path, "wb") as f:
                f.write(MODEL)
            env = dict(os.environ, FUSEGEN_CACHE_DIR=os.path.join(d, "cache"))
            totals = []
            for b in (2, 3):
                r = subprocess.run([exe, "compile", path, "--dim", "batch=%d" % b, "--dim", "seq=9",
                                    "--shape-params"], env=env, capture_output=True, text=True, timeout=600)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                m = re.search(r"total: (\d+) kernels, (\d+) distinct \((\d+) compiled, (\d+) from disk", r.stdout)
                self.assertIsNotNone(m, r.stdout)
                totals.append(tuple(int(v) for v in m.groups()))
            self.assertGreater(totals[0][2], 0, totals)
            self.assertEqual(totals[1][2], 0, totals)          # nothing compiled at the second size
            self.assertEqual(totals[1][3], totals[1][1], totals)   # every distinct kernel from disk
            r = subprocess.run([exe, "plan", path, "--shape-params"], env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 2)
            self.assertIn("--shape-params applies to the commands that emit kernels", r.stderr)


if __name__ == "__main__":
    unittest.main()
