#!/usr/bin/env python3
"""test_onnx_reduce.py -- ONNX reductions, LogSoftmax and the Softmax /
LogSoftmax function bodies.

Models built with the onnx helper API, imported by fusegen, run in CPU
emulation and compared with onnxruntime (fp32, and fp16 against the fp32
model on the same fp16-rounded values; tolerances as test_onnx_models.py):

  every Reduce* operator (L1, L2, LogSum, LogSumExp, Max, Mean, Min, Prod,
  Sum, SumSquare) in one model per operator and dtype with four reductions
  of a [3, 4, 5, 16] input: the last axis kept, axes [0, 2] dropped (not
  adjacent), no axes (every axis), axis -2 dropped; axes as the attribute
  (opset 13; ReduceSum 11) and as a constant input (opset 18; ReduceSum 13);
  noop_with_empty_axes; rows of 3000 (a block per output) and outer-axis
  reductions of many outputs (a thread per output)
  LogSoftmax in opset 13 (one axis) and 11 (the coerced 2-D form)
  the function bodies of Softmax and LogSoftmax (ReduceMax, Sub, Exp,
  ReduceSum, Div / Log, Sub; opset 13 and 18), and of ReduceL1,
  ReduceSumSquare, ReduceLogSum: each must plan to one kernel (the rewrite
  rules of rules/rewrites.yaml); a body over two different axes must not be
  rewritten (four kernels) and still match

NaN and infinities against numpy (onnxruntime's max and min return NaN only
when the NaN comes first in the row): ReduceMax /
ReduceMin of a row holding NaN is NaN, ReduceLogSumExp of a row of -inf is
-inf and of a row holding +inf is +inf.  A Reduce* with an axis out of
range or given twice is refused with a located error.

Environment: FUSEGEN_LIB (libfusegen.so).  Exit 77 (skipped) without onnx,
onnxruntime or numpy.  -v prints every row.
"""
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_onnx_models as tm  # noqa: E402  (Case, ort_run, compare, TOL; skips itself without onnxruntime)

N = h.make_node
RNG = np.random.default_rng(20261201)
OPS = ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
       "ReduceProd", "ReduceSum", "ReduceSumSquare")


def axes_opset(op):
    """The first opset taking axes as an input."""
    return 13 if op == "ReduceSum" else 18


class RCase(tm.Case):
    """A tm.Case with its own input values: gen(shape) -> float32 array."""

    def __init__(self, name, nodes, inputs, inits, outputs, opset=13, gen=None, kernels=None):
        super().__init__(name, nodes, inputs, inits, outputs, opset=opset)
        self.gen, self.kernels = gen, kernels

    def feeds(self, dtype):
        out = {}
        for k, s in self.inputs.items():
            a = (self.gen or (lambda sh: RNG.standard_normal(sh).astype(np.float32)))(s)
            out[k] = a.astype(np.float16) if dtype == "fp16" else a
        return out


def gen_for(op):
    if op == "ReduceLogSum":
        return lambda s: (np.abs(RNG.standard_normal(s)) + 0.5).astype(np.float32)   # log of a positive sum
    if op == "ReduceProd":
        return lambda s: (1.0 + 0.05 * RNG.standard_normal(s)).astype(np.float32)   # a product near 1
    return None


def reduce_node(op, x, y, axes, keepdims, opset, extra=None, inits=None):
    """A Reduce* node; axes as attribute or constant input per opset."""
    kw = dict(extra or {})
    if keepdims is not None:
        kw["keepdims"] = keepdims
    if axes is None:
        return N(op, [x], [y], **kw)
    if opset >= axes_opset(op):
        name = "%s_axes" % y
        inits[name] = np.array(axes, dtype=np.int64)
        return N(op, [x, name], [y], **kw)
    return N(op, [x], [y], axes=axes, **kw)


def reduce_cases():
    out = []
    for op in OPS:
        for opset in (axes_opset(op) - (2 if op == "ReduceSum" else 5), axes_opset(op)):
            inits = {}
            nodes = [reduce_node(op, "x", "y0", [3], 1, opset, inits=inits),
                     reduce_node(op, "x", "y1", [0, 2], 0, opset, inits=inits),
                     reduce_node(op, "x", "y2", None, 1, opset, inits=inits),
                     reduce_node(op, "x", "y3", [-2], 0, opset, inits=inits)]
            out.append(RCase("%s_op%d" % (op, opset), nodes, {"x": (3, 4, 5, 16)}, inits, ["y0", "y1", "y2", "y3"],
                             opset=opset, gen=gen_for(op), kernels=4))
    # a block per output (rows of 3000) and a thread per output (an outer axis, many outputs)
    for op in ("ReduceSum", "ReduceMax", "ReduceLogSumExp", "ReduceL2"):
        inits = {}
        nodes = [reduce_node(op, "x", "y0", [1], 0, 18, inits=inits),
                 reduce_node(op, "z", "y1", [0], 1, 18, inits=inits)]
        out.append(RCase("%s_long_rows" % op, nodes, {"x": (2, 3000), "z": (6, 9000)}, inits, ["y0", "y1"],
                         opset=18, kernels=2))
    # noop_with_empty_axes: the identity (a copy of the input as the graph output); empty axes input without it
    inits = {"e": np.array([], dtype=np.int64)}
    out.append(RCase("ReduceSum_noop_empty_axes", [N("ReduceSum", ["x", "e"], ["y0"], noop_with_empty_axes=1),
                                                   N("ReduceSum", ["x", "e"], ["y1"], keepdims=0)],
                     {"x": (3, 7)}, inits, ["y0", "y1"], opset=13, kernels=2))
    return out


def softmax_body(log, axis, opset, rank=3):
    """Softmax's (or LogSoftmax's) ONNX function body over axis."""
    nodes, inits = [], {}
    if opset >= 18:
        inits["ax"] = np.array([axis], dtype=np.int64)
        nodes.append(N("ReduceMax", ["x", "ax"], ["m"], keepdims=1))
    else:
        nodes.append(N("ReduceMax", ["x"], ["m"], axes=[axis], keepdims=1))
    nodes += [N("Sub", ["x", "m"], ["s"]), N("Exp", ["s"], ["e"])]
    if opset >= 13:
        inits["ax2"] = np.array([axis], dtype=np.int64)
        nodes.append(N("ReduceSum", ["e", "ax2"], ["r"], keepdims=1))
    else:
        nodes.append(N("ReduceSum", ["e"], ["r"], axes=[axis], keepdims=1))
    if log:
        nodes += [N("Log", ["r"], ["l"]), N("Sub", ["s", "l"], ["y"])]
    else:
        nodes.append(N("Div", ["e", "r"], ["y"]))
    return nodes, inits


def fusion_cases():
    out = []
    for log in (0, 1):
        name = "log_softmax" if log else "softmax"
        for opset, axis in ((13, 1), (18, -1)):
            nodes, inits = softmax_body(log, axis, opset)
            out.append(RCase("%s_body_op%d_axis%d" % (name, opset, axis), nodes, {"x": (3, 7, 40)}, inits, ["y"],
                             opset=opset, kernels=1))
    # must not be rewritten: the max over axis 1, the sum over axis 2 (four kernels: max, Sub + Exp, sum, Div;
    # still the same values)
    nodes, inits = softmax_body(0, 1, 18)
    inits["ax2"] = np.array([2], dtype=np.int64)
    out.append(RCase("softmax_body_two_axes", nodes, {"x": (3, 7, 40)}, inits, ["y"], opset=18, kernels=4))
    # the other bodies: ReduceL1 (Abs, ReduceSum), ReduceSumSquare (Mul, ReduceSum), ReduceLogSum (ReduceSum, Log)
    ax = {"ax": np.array([0, 2], dtype=np.int64)}
    out.append(RCase("reduce_l1_body", [N("Abs", ["x"], ["a"]), N("ReduceSum", ["a", "ax"], ["y"], keepdims=0)],
                     {"x": (3, 4, 5)}, dict(ax), ["y"], opset=18, kernels=1))
    out.append(RCase("reduce_sum_square_body", [N("Mul", ["x", "x"], ["a"]), N("ReduceSum", ["a", "ax"], ["y"])],
                     {"x": (3, 4, 5)}, dict(ax), ["y"], opset=18, kernels=1))
    out.append(RCase("reduce_log_sum_body", [N("ReduceSum", ["x", "ax"], ["a"]), N("Log", ["a"], ["y"])],
                     {"x": (3, 4, 5)}, dict(ax), ["y"], opset=18, gen=gen_for("ReduceLogSum"), kernels=1))
    # LogSoftmax itself
    out.append(RCase("LogSoftmax_op13", [N("LogSoftmax", ["x"], ["y"], axis=1)], {"x": (3, 33, 5)}, {}, ["y"],
                     opset=13, kernels=1))
    out.append(RCase("LogSoftmax_op11_2d", [N("LogSoftmax", ["x"], ["y"], axis=1)], {"x": (3, 33, 5)}, {}, ["y"],
                     opset=11, kernels=1))
    return out


def run_case(run, case, dtype, tmp, failed):
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
        return
    finally:
        run.lib.free_graph(g)
    worst, err = (0.0, 0.0), None
    for k, r in ref.items():
        got = outs[k]
        if r.ndim == 0 and got.size == 1:
            got = got.reshape(())   # rank 0 is [1] in fusegen
        mx, rel, err = tm.compare(got, r)
        if err:
            err = "%s: %s" % (k, err)
            break
        worst = (max(worst[0], mx), max(worst[1], rel))
    run.result(case.name, dtype, worst[0], worst[1], tm.TOL[dtype], err, kernels=nk)
    if case.kernels is not None:
        tm.expect(nk == case.kernels, "%s %s: %d kernel%s (got %d)" % (
            case.name, dtype, case.kernels, "" if case.kernels == 1 else "s", nk), failed)


def special_values(run, tmp, failed):
    """NaN and infinities against numpy (the ONNX definitions)."""
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    x[1, 2] = np.nan
    x[2, :] = -np.inf
    x[3, 4] = np.inf
    nodes = [N("ReduceMax", ["x"], ["mx"], axes=[1], keepdims=0), N("ReduceMin", ["x"], ["mn"], axes=[1], keepdims=0),
             N("ReduceLogSumExp", ["x"], ["lse"], axes=[1], keepdims=0)]
    case = RCase("special", nodes, {"x": (4, 6)}, {}, ["mx", "mn", "lse"], opset=13)
    path = os.path.join(tmp, "special.onnx")
    onnx.save(case.model("fp32"), path)
    g = run.lib.load(path)
    try:
        outs, _ = run.lib.run(g, {"x": x})
    finally:
        run.lib.free_graph(g)
    with np.errstate(all="ignore"):
        want = {"mx": np.max(x, axis=1), "mn": np.min(x, axis=1), "lse": np.log(np.sum(np.exp(x.astype(np.float64)),
                                                                                         axis=1))}
    for k, w in want.items():
        ok = np.array_equal(np.isnan(outs[k]), np.isnan(w)) and np.allclose(outs[k], w, rtol=1e-5, atol=1e-6,
                                                                          equal_nan=True)
        tm.expect(ok, "special values %s: %s (numpy %s)" % (k, outs[k].tolist(), w.tolist()), failed)


def refusals(run, tmp, failed):
    """Bad axes: a located error, no crash."""
    for name, axes, want in (("out_of_range", [2], "axis 2 is out of range for rank 2"),
                             ("twice", [1, -1], "axis -1 is given twice")):
        case = RCase("bad_" + name, [N("ReduceSum", ["x"], ["y"], axes=axes)], {"x": (3, 4)}, {}, ["y"], opset=11)
        path = os.path.join(tmp, "bad_%s.onnx" % name)
        onnx.save(case.model("fp32"), path)
        try:
            g = run.lib.load(path)
            run.lib.free_graph(g)
            msg = "loaded"
        except tm.fgapi.FusegenError as e:
            msg = "; ".join(e.messages)
        tm.expect(want in msg and "bad_%s.onnx" % name in msg, "refused %s: %s" % (name, msg[:150]), failed)


def main(argv):
    verbose = "-v" in argv
    run = tm.Runner(verbose)
    failed = run.failed
    with tempfile.TemporaryDirectory() as tmp:
        for case in reduce_cases() + fusion_cases():
            for dtype in ("fp32", "fp16"):
                run_case(run, case, dtype, tmp, failed)
        special_values(run, tmp, failed)
        refusals(run, tmp, failed)
    print("test_onnx_reduce: %d rows, %d failed" % (len(run.rows), len(failed)))
    for f in failed:
        print("  FAILED: %s" % f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
