#!/usr/bin/env python3
"""test_onnx_gemm_softmax.py -- MatMul / Gemm followed by Softmax from ONNX.

Models built with the onnx helper API: MatMul + Softmax, attention scores
(batched MatMul, Div by sqrt(d), Softmax over the last axis, and with an
additive mask), Gemm with bias (transB, alpha) + Softmax in opset 13 and in
the coerced 2-D form of opset 11.  Each is imported by fusegen, planned
(rules/matmul.yaml, matmul_softmax: one kernel, template gemm_softmax), run in
CPU emulation and compared with onnxruntime (fp32 and fp16, tolerances as
test_onnx_models.py); the kernel count is checked.  The must-not-fuse cases
(Softmax over another axis, rows longer than the template takes, the MatMul's
output read by another node) plan to two or more kernels and still match.

Environment: FUSEGEN_LIB (libfusegen.so).  Exit 77 (skipped) without onnx,
onnxruntime or numpy.  -v prints every row.
"""
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import helper as h
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_onnx_models as tm  # noqa: E402  (Case, ort_run, compare, TOL; skips itself without onnxruntime)

N = h.make_node
Case = tm.Case


def f32(*shape, scale=1.0):
    return tm.rnd(*shape, scale=scale)


def cases():
    """(case, kernels wanted)."""
    out = []
    out.append((Case("matmul_softmax", [N("MatMul", ["a", "w"], ["s"]), N("Softmax", ["s"], ["y"], axis=-1)],
                     {"a": (5, 24)}, {"w": f32(24, 33)}, ["y"]), 1))
    # attention scores: Q K^T / sqrt(d), softmax over the keys
    out.append((Case("attention_scores", [N("MatMul", ["q", "kt"], ["s"]), N("Div", ["s", "d"], ["t"]),
                                          N("Softmax", ["t"], ["y"], axis=-1)],
                     {"q": (2, 7, 16), "kt": (2, 16, 40)}, {"d": np.array(4.0, dtype=np.float32)}, ["y"]), 1))
    out.append((Case("attention_masked", [N("MatMul", ["q", "kt"], ["s"]), N("Mul", ["s", "d"], ["t"]),
                                          N("Add", ["t", "mask"], ["u"]), N("Softmax", ["u"], ["y"], axis=-1)],
                     {"q": (2, 9, 8), "kt": (2, 8, 17)},
                     {"d": np.array(0.35, dtype=np.float32), "mask": f32(9, 17)}, ["y"]), 1))
    out.append((Case("gemm_bias_softmax", [N("Gemm", ["a", "w", "c"], ["s"], transB=1, alpha=0.5),
                                           N("Softmax", ["s"], ["y"], axis=-1)],
                     {"a": (7, 13)}, {"w": f32(129, 13), "c": f32(129)}, ["y"]), 1))
    out.append((Case("gemm_softmax_op11", [N("Gemm", ["a", "w", "c"], ["s"]), N("Softmax", ["s"], ["y"])],
                     {"a": (3, 21)}, {"w": f32(21, 1000), "c": f32(1000)}, ["y"], opset=11), 1))
    # must not fuse
    out.append((Case("softmax_axis0", [N("MatMul", ["a", "w"], ["s"]), N("Softmax", ["s"], ["y"], axis=0)],
                     {"a": (5, 24)}, {"w": f32(24, 33)}, ["y"]), 2))
    out.append((Case("rows_too_long", [N("MatMul", ["a", "w"], ["s"]), N("Softmax", ["s"], ["y"], axis=-1)],
                     {"a": (3, 8)}, {"w": f32(8, 1100)}, ["y"]), 2))
    out.append((Case("matmul_read_twice", [N("MatMul", ["a", "w"], ["s"]), N("Softmax", ["s"], ["p"], axis=-1),
                                           N("Add", ["p", "s"], ["y"])],
                     {"a": (5, 24)}, {"w": f32(24, 33)}, ["y"]), 3))
    return out


def main(argv):
    verbose = "-v" in argv
    run = tm.Runner(verbose)
    failed = run.failed
    with tempfile.TemporaryDirectory() as tmp:
        for case, want in cases():
            for dtype in ("fp32", "fp16"):
                model = case.model(dtype)
                feeds = case.feeds(dtype)
                if dtype == "fp16":
                    ref = tm.ort_run(tm.fp32_twin(case), {k: v.astype(np.float32) for k, v in feeds.items()})
                else:
                    ref = tm.ort_run(model, feeds)
                path = os.path.join(tmp, "%s_%s.onnx" % (case.name, dtype))
                onnx.save(model, path)
                g = run.lib.load(path)
                try:
                    outs, nk = run.lib.run(g, feeds)
                except tm.fgapi.FusegenError as e:
                    run.result(case.name, dtype, None, None, tm.TOL[dtype], "; ".join(e.messages) or str(e))
                    continue
                finally:
                    run.lib.free_graph(g)
                mx, rel, err = tm.compare(outs["y"], ref["y"])
                run.result(case.name, dtype, mx, rel, tm.TOL[dtype], err, kernels=nk)
                tm.expect(nk == want, "%s %s: %d kernel%s (got %d)" % (case.name, dtype, want,
                                                                      "" if want == 1 else "s", nk), failed)
    print("test_onnx_gemm_softmax: %d rows, %d failed" % (len(run.rows), len(failed)))
    for f in failed:
        print("  FAILED: %s" % f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
