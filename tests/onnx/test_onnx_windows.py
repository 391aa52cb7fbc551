#!/usr/bin/env python3
"""test_onnx_windows.py -- convolution and pooling window semantics of the
ONNX importer and the pool2d / global_pool kernels, against onnxruntime and
the ONNX backend node tests.

Part 1 (generated): every combination of the window attributes the node
tests exercise -- pads per side, auto_pad SAME_UPPER / SAME_LOWER / VALID
(odd totals included), strides, dilations, ceil_mode (partial last windows),
count_include_pad, storage_order 0 -- for MaxPool, AveragePool and Conv on
odd spatial sizes, plus GlobalMaxPool / GlobalAveragePool and special values
(NaN, -inf) through max pooling.  Each model runs in fusegen's CPU emulation
(the generated CUDA source compiled for the host) and in onnxruntime on the
same inputs:

  fp32: relative L2 <= 2e-5
  fp16 (every other case, and the special values): fp16 inputs and
        weights; the reference is onnxruntime on the fp32
        model holding the same (fp16-exact) values, relative L2 <= 5e-3

Special values compare elementwise: NaN where onnxruntime has NaN, equal
infinities, finite values within the fp32 tolerance.

Part 2 (node tests): the cases `onnx.backend.test.case.node.collect_testcases()`
gives for test_maxpool_*, test_averagepool_*, test_globalmaxpool*,
test_globalaveragepool*, the conv padding cases and every *autopad* case run
with their own inputs and compare with their expected outputs (relative
1e-3, absolute 1e-5); the *autopad* cases include ConvTranspose's
(2-D, claimed; its other cases: test_onnx_resize.py and the conformance
run).  Cases fusegen does not claim (3-D windows, uint8 data, the
Indices output of MaxPool) must be refused with a clear error, and are
listed as unsupported with it.

Environment: FUSEGEN_LIB (libfusegen.so).  Exit 77 (skipped) without onnx,
onnxruntime or numpy.  Arguments: substrings of case names to run (default
all); -v prints every row.
"""
import os
import sys
import warnings

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fgapi  # noqa: E402

TOL = {"fp32": 2e-5, "fp16": 5e-3}
RNG = np.random.default_rng(20261201)
N = h.make_node


# ---- generated models ------------------------------------------------------------


class Case:
    """One node `op` on input x (and weight W for Conv) with attributes."""

    def __init__(self, name, op, xshape, attrs, wshape=None, bias=False, opset=19, special=False):
        self.name, self.op, self.xshape, self.attrs = name, op, xshape, attrs
        self.wshape, self.bias, self.opset, self.special = wshape, bias, opset, special
        self.inits = {}
        if wshape:
            self.inits["W"] = (RNG.standard_normal(wshape) * 0.3).astype(np.float32)
            if bias:
                self.inits["B"] = (RNG.standard_normal(wshape[0]) * 0.1).astype(np.float32)

    def model(self, dtype, attrs=None):
        et = TP.FLOAT16 if dtype == "fp16" else TP.FLOAT
        inits = [nh.from_array(v.astype(np.float16) if dtype == "fp16" else v, k) for k, v in self.inits.items()]
        ins = ["x"] + (["W"] if self.wshape else []) + (["B"] if self.bias else [])
        g = h.make_graph([N(self.op, ins, ["y"], name="n0", **(attrs or self.attrs))], self.name,
                         [h.make_tensor_value_info("x", et, list(self.xshape))],
                         [h.make_tensor_value_info("y", et, None)], inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", self.opset)])
        m.ir_version = 8
        return m

    def ref_model(self):
        """The model onnxruntime runs as the reference: this one, except that
        onnxruntime refuses auto_pad SAME with dilations in Conv, so those get
        the explicit pads the ONNX specification defines for SAME."""
        a = dict(self.attrs)
        ap = a.get("auto_pad", "NOTSET")
        if self.op == "Conv" and ap.startswith("SAME") and a.get("dilations", [1, 1]) != [1, 1]:
            del a["auto_pad"]
            beg, end = [], []
            for i in range(2):
                size, st, dil, k = self.xshape[2 + i], a.get("strides", [1, 1])[i], a["dilations"][i], self.wshape[2 + i]
                out = -(-size // st)
                total = max(0, (out - 1) * st + (k - 1) * dil + 1 - size)
                small, big = total // 2, total - total // 2
                beg.append(small if ap == "SAME_UPPER" else big)
                end.append(big if ap == "SAME_UPPER" else small)
            a["pads"] = beg + end
        return self.model("fp32", a)

    def fp32_twin(self):
        """The fp32 model whose values are those of the fp16 one (the reference)."""
        m = self.ref_model()
        for t in m.graph.initializer:
            t.CopyFrom(nh.from_array(nh.to_array(t).astype(np.float16).astype(np.float32), t.name))
        return m

    def feed(self, dtype):
        x = RNG.standard_normal(self.xshape).astype(np.float32) * 2.0
        if self.special:
            flat = x.reshape(-1)
            idx = RNG.permutation(flat.size)
            flat[idx[:3]] = np.nan
            flat[idx[3:9]] = -np.inf
            flat[idx[9:11]] = np.inf
            flat[idx[11:13]] = -0.0
            # one whole channel of -inf: windows inside it give -inf
            x[0, -1] = -np.inf
        return x.astype(np.float16) if dtype == "fp16" else x


def pool_cases():
    """Every pads kind x ceil_mode (x count_include_pad for a padded average),
    the kernel / stride / dilation triple rotating through WINDOWS so each
    appears with every pads kind; then auto_pad and special cases."""
    cs = []
    P = (2, 3, 11, 9)  # odd sizes, H != W
    pads_sets = {"nopad": None, "sym": [1, 1, 1, 1], "asym": [1, 0, 0, 1], "asym2": [0, 1, 1, 0]}  # pads < kernel
    windows = (([3, 3], [2, 2], [1, 1]), ([2, 3], [3, 2], [2, 1]), ([3, 2], [1, 2], [1, 2]), ([2, 2], [2, 3], [2, 2]))
    turn = 0
    for op in ("MaxPool", "AveragePool"):
        short = "max" if op == "MaxPool" else "avg"
        for pname, pads in pads_sets.items():
            for ceil in (0, 1):
                for cip in ((0, 1) if op == "AveragePool" and pads else (0,)):
                    k, s, d = windows[turn % len(windows)]
                    turn += 1
                    a = {"kernel_shape": k, "strides": s}
                    if pads:
                        a["pads"] = pads
                    if d != [1, 1]:
                        a["dilations"] = d
                    if ceil:
                        a["ceil_mode"] = 1
                    if cip:
                        a["count_include_pad"] = 1
                    name = "%s_%s_k%d%d_s%d%d_d%d%d_c%d%s" % (short, pname, k[0], k[1], s[0], s[1], d[0], d[1],
                                                              ceil, "_incl" if cip else "")
                    cs.append(Case(name, op, P, a))
        for ap in ("SAME_UPPER", "SAME_LOWER", "VALID"):
            for k, s in (([3, 2], [2, 2]), ([4, 3], [1, 3])):
                a = {"kernel_shape": k, "strides": s, "auto_pad": ap}
                name = "%s_%s_k%d%d_s%d%d" % (short, ap.lower(), k[0], k[1], s[0], s[1])
                cs.append(Case(name, op, P, a))
                if op == "AveragePool" and ap != "VALID":
                    a2 = dict(a, count_include_pad=1)
                    cs.append(Case(name + "_incl", op, P, a2))
    cs.append(Case("max_storage_order0", "MaxPool", P, {"kernel_shape": [2, 2], "storage_order": 0}))
    # ceil_mode whose last window would start in the end padding: dropped
    cs.append(Case("avg_ceil_last_on_pad", "AveragePool", (1, 2, 6, 6),
                   {"kernel_shape": [3, 3], "strides": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1,
                    "count_include_pad": 1}))
    cs.append(Case("max_ceil_k1_s2", "MaxPool", (1, 2, 6, 5), {"kernel_shape": [1, 1], "strides": [2, 2],
                                                                "ceil_mode": 1}))
    cs.append(Case("global_max", "GlobalMaxPool", (2, 5, 7, 9), {}))
    cs.append(Case("global_max_big", "GlobalMaxPool", (1, 3, 13, 11), {}))
    cs.append(Case("global_avg", "GlobalAveragePool", (2, 5, 7, 9), {}))
    # special values through max pooling
    cs.append(Case("max_special", "MaxPool", (2, 3, 9, 7), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                            "pads": [1, 0, 1, 2], "ceil_mode": 1}, special=True))
    cs.append(Case("max_special_dil", "MaxPool", (2, 3, 9, 7), {"kernel_shape": [2, 2], "dilations": [2, 3]},
                   special=True))
    cs.append(Case("global_max_special", "GlobalMaxPool", (2, 3, 9, 7), {}, special=True))
    return cs


def conv_cases():
    cs = []
    X = (2, 4, 9, 7)
    for pname, pads in (("asym", [1, 0, 2, 1]), ("asym2", [0, 2, 0, 1]), ("tb", [2, 0, 0, 0])):
        for s, d in (([1, 1], [1, 1]), ([2, 2], [1, 1]), ([2, 1], [1, 2])):
            name = "conv_%s_s%d%d_d%d%d" % (pname, s[0], s[1], d[0], d[1])
            cs.append(Case(name, "Conv", X, {"pads": pads, "strides": s, "dilations": d}, wshape=(6, 4, 3, 3),
                           bias=True))
    for ap in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        for s, d, w in (([2, 2], [1, 1], (6, 4, 3, 3)), ([1, 2], [2, 1], (6, 4, 4, 3)), ([3, 2], [1, 1], (5, 4, 2, 2))):
            name = "conv_%s_s%d%d_d%d%d_k%d%d" % (ap.lower(), s[0], s[1], d[0], d[1], w[2], w[3])
            cs.append(Case(name, "Conv", X, {"auto_pad": ap, "strides": s, "dilations": d}, wshape=w, bias=True))
    # grouped and depthwise with asymmetric pads
    cs.append(Case("conv_group_asym", "Conv", (1, 4, 8, 7), {"pads": [1, 2, 0, 1], "group": 2}, wshape=(6, 2, 3, 3)))
    cs.append(Case("conv_dw_same_upper", "Conv", (1, 4, 8, 7), {"auto_pad": "SAME_UPPER", "group": 4, "strides": [2, 2]},
                   wshape=(4, 1, 4, 4)))
    return cs


def ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def nan_propagating_max(model, x):
    """Max pooling with PyTorch's semantics (a NaN in the window gives NaN; a
    window of only -inf gives -inf), from onnxruntime, whose MaxPool skips
    NaN and gives the lowest float for a window of -inf: NaN where
    onnxruntime's max pool of isnan(x) is 1, -inf where its max pool of
    x > -inf is 0, elsewhere its max pool of x with NaN replaced by -inf."""
    has_nan = ort_run(model, {"x": np.isnan(x).astype(np.float32)})["y"] > 0
    has_more = ort_run(model, {"x": (np.isnan(x) | (x > -np.inf)).astype(np.float32)})["y"] > 0
    clean = ort_run(model, {"x": np.where(np.isnan(x), np.float32(-np.inf), x)})["y"]
    return np.where(has_nan, np.float32(np.nan), np.where(has_more, clean, np.float32(-np.inf)))


def compare(got, ref, rtol, atol=None):
    """(max_abs, rel_l2, error) of got against ref; special values must match
    elementwise (NaN for NaN, equal infinities)."""
    got = got.astype(np.float64)
    ref = ref.astype(np.float64)
    if got.shape != ref.shape:
        return None, None, "shape %s, expected %s" % (got.shape, ref.shape)
    gn, rn = np.isnan(got), np.isnan(ref)
    if (gn != rn).any():
        return None, None, "NaN at %d places where the reference has none, or missing at %d" % (
            int((gn & ~rn).sum()), int((rn & ~gn).sum()))
    gi, ri = np.isinf(got), np.isinf(ref)
    if (gi != ri).any() or (got[gi] != ref[ri]).any():
        return None, None, "infinities differ at %d places" % int((gi != ri).sum())
    fin = ~(rn | ri)
    d = got[fin] - ref[fin]
    rel = np.sqrt((d * d).sum()) / max(np.sqrt((ref[fin] ** 2).sum()), 1e-30) if d.size else 0.0
    mx = float(np.abs(d).max()) if d.size else 0.0
    if atol is not None:  # node tests: elementwise |got - ref| <= atol + rtol * |ref|
        bad = np.abs(d) > atol + rtol * np.abs(ref[fin])
        if bad.any():
            return mx, float(rel), "%d elements outside atol %g + rtol %g" % (int(bad.sum()), atol, rtol)
    return mx, float(rel), None


class Runner:
    def __init__(self, verbose):
        self.lib = fgapi.Lib(os.environ["FUSEGEN_LIB"])
        self.verbose = verbose
        self.failed = []
        self.nrows = 0

    def row(self, name, dtype, mx, rel, tol, result, bad):
        self.nrows += 1
        line = "  %-44s %-5s %10s %10s %8s  %s" % (name, dtype, "-" if mx is None else "%.3e" % mx,
                                                  "-" if rel is None else "%.3e" % rel, tol, result)
        if bad:
            self.failed.append("%s/%s" % (name, dtype))
        if self.verbose or bad:
            print(line, flush=True)

    def fusegen(self, model_bytes, feeds):
        g = self.lib.load(data=model_bytes)
        try:
            return self.lib.run(g, feeds)[0]
        finally:
            self.lib.free_graph(g)

    def generated(self, case, dtype):
        x = case.feed(dtype)
        ref_model = case.fp32_twin() if dtype == "fp16" else case.ref_model()
        ref = ort_run(ref_model, {"x": x.astype(np.float32)})["y"]
        if case.special and case.op in ("MaxPool", "GlobalMaxPool"):
            ref = nan_propagating_max(ref_model, x.astype(np.float32))
        try:
            got = self.fusegen(case.model(dtype).SerializeToString(), {"x": x})
        except fgapi.FusegenError as e:
            self.row(case.name, dtype, None, None, "%.0e" % TOL[dtype], "FAIL: " + "; ".join(e.messages), True)
            return
        y = got.get("y")
        if y is None:
            self.row(case.name, dtype, None, None, "%.0e" % TOL[dtype], "FAIL: no output y (%s)" % list(got), True)
            return
        mx, rel, err = compare(y, ref, TOL[dtype])
        bad = err is not None or rel > TOL[dtype]
        self.row(case.name, dtype, mx, rel, "%.0e" % TOL[dtype], "FAIL: " + (err or "rel_l2") if bad else "ok", bad)

    def node_test(self, tc, table):
        """One backend node test case: run it with its inputs, compare with its
        expected outputs; an unclaimed case must be refused with an error."""
        name = tc.name
        op = tc.model.graph.node[0].op_type
        model = tc.model
        claimed, why = claims(tc)
        for di, (inputs, outputs) in enumerate(tc.data_sets or []):
            feeds = {model.graph.input[i].name: a for i, a in enumerate(inputs)}
            label = name if len(tc.data_sets) == 1 else "%s[%d]" % (name, di)
            try:
                got = self.fusegen(model.SerializeToString(), feeds)
            except fgapi.FusegenError as e:
                msg = "; ".join(e.messages)
                if claimed:
                    table.setdefault(op, [0, 0, 0])[1] += 1
                    self.row(label, "node", None, None, "1e-03", "FAIL: " + msg, True)
                else:
                    table.setdefault(op, [0, 0, 0])[2] += 1
                    self.row(label, "node", None, None, "-", "unsupported (%s): %s" % (why, msg[:120]), False)
                continue
            if not claimed:
                table.setdefault(op, [0, 0, 0])[1] += 1
                self.row(label, "node", None, None, "-", "FAIL: ran although unclaimed (%s)" % why, True)
                continue
            worst, err = (0.0, 0.0), None
            for i, exp in enumerate(outputs):
                oname = model.graph.output[i].name
                if oname not in got:
                    err = "output %s missing" % oname
                    break
                mx, rel, err = compare(got[oname], exp, 1e-3, 1e-5)
                if mx is not None:
                    worst = (max(worst[0], mx), max(worst[1], rel))
                if err:
                    break
            table.setdefault(op, [0, 0, 0])[0 if err is None else 1] += 1
            self.row(label, "node", worst[0], worst[1], "1e-03", "ok" if err is None else "FAIL: " + err,
                     err is not None)


# ---- backend node tests ------------------------------------------------------------

NODE_PREFIXES = ("test_maxpool_", "test_averagepool_", "test_globalmaxpool", "test_globalaveragepool",
                 "test_conv_with_", "test_basic_conv_")


def node_cases():
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    out = []
    for tc in cases:
        if tc.name.startswith(NODE_PREFIXES) or "autopad" in tc.name:
            out.append(tc)
    return sorted(out, key=lambda t: t.name)


def claims(tc):
    """(claimed, reason): whether fusegen claims this node test."""
    model = tc.model
    node = model.graph.node[0]
    if node.op_type not in ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool"):
        return False, node.op_type + " is not supported"
    if len(model.graph.node) != 1:
        return False, "more than one node"
    x = model.graph.input[0].type.tensor_type
    if x.elem_type not in (TP.FLOAT, TP.FLOAT16):
        return False, "element type %s" % TP.DataType.Name(x.elem_type)
    if len(x.shape.dim) not in (3, 4):   # 1-D windows run as 2-D ones with H = 1
        return False, "%d-D window" % (len(x.shape.dim) - 2)
    if len(node.output) > 1 and node.output[1]:
        return False, "the Indices output"
    return True, ""


def main(argv):
    verbose = "-v" in argv
    names = [a for a in argv[1:] if not a.startswith("-")]
    run = Runner(verbose)
    print("  %-44s %-5s %10s %10s %8s  %s" % ("case", "dtype", "max_abs", "rel_l2", "tol", "result"))
    for i, case in enumerate(pool_cases() + conv_cases()):
        if names and not any(n in case.name for n in names):
            continue
        # fp16 on every other case (and the special values): the window
        # arithmetic does not depend on the dtype, the loads and stores do
        for dtype in ("fp32", "fp16") if i % 2 == 0 or case.special or names else ("fp32",):
            run.generated(case, dtype)
    table = {}
    for tc in node_cases():
        if names and not any(n in tc.name for n in names):
            continue
        run.node_test(tc, table)
    if table:
        print("\n  ONNX node tests by operator (pass / fail / unsupported):")
        for op in sorted(table):
            p, f, u = table[op]
            print("  %-20s %4d %4d %4d" % (op, p, f, u))
    run.lib.close()
    print("\n%d rows, %d failed" % (run.nrows, len(run.failed)))
    if run.failed:
        print("FAILED: " + ", ".join(run.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
