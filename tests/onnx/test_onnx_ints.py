#!/usr/bin/env python3
"""test_onnx_ints.py -- integer and bool tensors of ONNX models against
onnxruntime.

Hand-built graphs of what text models compute on int64 and bool tensors:
token and position embeddings (Gather of a table by int64 `input_ids`, also
negative ids), an attention mask turned into an additive bias (Cast,
Sub, Mul, Unsqueeze) inside a small attention block, the comparisons, And /
Or / Xor / Not, IsNaN / IsInf, Where and Cast between float, int64, int32
and bool (graph outputs of every type), a GatherND with constant indices of
a computed bool mask (the torch.export form of `mask[:, None, None, :]`),
a Gather by computed int32 indices, a Trilu / Equal / Where causal mask of
constants, a GatherElements of constants, and an integer weight beyond
2^24 refused.  Each runs in CPU emulation (fp32, and fp16 where the float
tensors are fp16) and is compared with onnxruntime: float outputs by
relative L2 (fp32 <= 1e-4, fp16 <= 1e-2), integer and bool outputs exactly.

Environment: FUSEGEN_LIB (libfusegen.so).  Exit 77 (skipped) without onnx,
onnxruntime or numpy.  Arguments: names of cases to run (default all); -v
prints every row.
"""
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import helper as h
    from onnx import numpy_helper as nh
    from onnx import TensorProto as TP
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fgapi  # noqa: E402

N = h.make_node
TOL = {"fp32": 1e-4, "fp16": 1e-2}
NP = {TP.FLOAT: np.float32, TP.FLOAT16: np.float16, TP.INT64: np.int64, TP.INT32: np.int32, TP.BOOL: np.bool_}
F = "F"   # the case's float type (FLOAT or FLOAT16)


class Case:
    """nodes over inputs {name: (type, shape, values or None)} and
    initializers {name: array}; outputs {name: type}; type F is the case's
    float type."""

    def __init__(self, name, nodes, inputs, inits, outputs, fp16=True, opset=17, error=None):
        self.name, self.nodes, self.inputs, self.inits = name, nodes, inputs, inits
        self.outputs, self.fp16, self.opset, self.error = outputs, fp16, opset, error

    def model(self, dtype):
        ft = TP.FLOAT16 if dtype == "fp16" else TP.FLOAT
        ty = lambda t: ft if t == F else t  # noqa: E731
        inits = [nh.from_array(v.astype(np.float16) if v.dtype == np.float32 and dtype == "fp16" else v, k)
                 for k, v in self.inits.items()]
        ins = [h.make_tensor_value_info(k, ty(t), list(s)) for k, (t, s, _) in self.inputs.items()]
        outs = [h.make_tensor_value_info(k, ty(t), None) for k, t in self.outputs.items()]
        nodes = []
        for n in self.nodes:   # a Cast to FLOAT is to the case's float type
            n2 = onnx.NodeProto()
            n2.CopyFrom(n)
            for at in n2.attribute:
                if n2.op_type == "Cast" and at.name == "to" and at.i == TP.FLOAT:
                    at.i = ft
            nodes.append(n2)
        m = h.make_model(h.make_graph(nodes, self.name, ins, outs, inits),
                         opset_imports=[h.make_opsetid("", self.opset)])
        m.ir_version = 8
        return m

    def feeds(self, dtype, rng):
        ft = TP.FLOAT16 if dtype == "fp16" else TP.FLOAT
        out = {}
        for k, (t, s, v) in self.inputs.items():
            t = ft if t == F else t
            if v is not None:
                out[k] = np.asarray(v, dtype=NP[t])
            elif t in (TP.FLOAT, TP.FLOAT16):
                out[k] = rng.uniform(-1, 1, s).astype(NP[t])
            elif t == TP.BOOL:
                out[k] = rng.uniform(0, 1, s) < 0.5
            else:
                out[k] = rng.integers(-8, 8, s).astype(NP[t])
        return out


def f32(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def embed_attention():
    """input_ids -> word + position embeddings -> LayerNorm -> one head of
    attention whose scores get (1 - mask) * -10000 from an int64 mask."""
    S, H, V = 7, 16, 50
    nodes = [
        N("Gather", ["wte", "ids"], ["we"]),
        N("Gather", ["wpe", "pos"], ["pe"]),
        N("Add", ["we", "pe"], ["e"]),
        N("LayerNormalization", ["e", "ln_g", "ln_b"], ["x"], axis=-1, epsilon=1e-5),
        N("MatMul", ["x", "wq"], ["q"]),
        N("MatMul", ["x", "wk"], ["k"]),
        N("MatMul", ["x", "wv"], ["v"]),
        N("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        N("MatMul", ["q", "kt"], ["s0"]),
        N("Mul", ["s0", "scale"], ["s1"]),
        N("Cast", ["mask"], ["mf"], to=TP.FLOAT),
        N("Sub", ["one", "mf"], ["inv"]),
        N("Mul", ["inv", "neg"], ["bias"]),
        N("Unsqueeze", ["bias", "ax1"], ["b3"]),
        N("CastLike", ["b3", "s1"], ["b3t"]),
        N("Add", ["s1", "b3t"], ["s2"]),
        N("Softmax", ["s2"], ["p"], axis=-1),
        N("MatMul", ["p", "v"], ["y"]),
    ]
    inits = {"wte": f32(V, H, seed=1), "wpe": f32(S, H, seed=2), "pos": np.arange(S, dtype=np.int64),
             "ln_g": f32(H, seed=3) + 1, "ln_b": f32(H, seed=4), "wq": f32(H, H, seed=5), "wk": f32(H, H, seed=6),
             "wv": f32(H, H, seed=7), "scale": np.array(0.25, np.float32), "one": np.array(1.0, np.float32),
             "neg": np.array(-10000.0, np.float32), "ax1": np.array([1], np.int64)}
    ids = [[3, 49, 0, 7, -1, 12, 5], [1, 2, 3, 4, 5, 6, -50]]
    mask = [[1] * 7, [1] * 4 + [0] * 3]
    return Case("embed_attention", nodes, {"ids": (TP.INT64, (2, S), ids), "mask": (TP.INT64, (2, S), mask)},
                inits, {"y": F})


def logic_casts():
    nodes = [
        N("Less", ["x", "z"], ["lt"]),
        N("Greater", ["x", "zero"], ["gt"]),
        N("Cast", ["m"], ["mb"], to=TP.BOOL),
        N("And", ["lt", "mb"], ["a"]),
        N("Or", ["a", "gt"], ["o"]),
        N("Xor", ["o", "lt"], ["xo"]),
        N("Not", ["xo"], ["nx"]),
        N("Div", ["x", "z"], ["q"]),          # 0/0 and x/0 where z is 0: NaN and inf
        N("IsNaN", ["q"], ["isn"]),
        N("IsInf", ["q"], ["isi"], detect_negative=0),
        N("Or", ["isn", "isi"], ["bad"]),
        N("Where", ["bad", "zero", "q"], ["qf"]),
        N("Where", ["nx", "x", "qf"], ["y"]),
        N("Mul", ["x", "ten"], ["x10"]),
        N("Cast", ["x10"], ["xi"], to=TP.INT64),
        N("Cast", ["xi"], ["xi32"], to=TP.INT32),
        N("Equal", ["xi32", "three"], ["eq3"]),
        N("Cast", ["m"], ["mfl"], to=TP.FLOAT),
        N("CastLike", ["mfl", "x"], ["mfx"]),
        N("Add", ["y", "mfx"], ["y2"]),
    ]
    inits = {"zero": np.array(0.0, np.float32), "ten": np.array(10.0, np.float32),
             "three": np.array(3, np.int32)}
    zv = np.random.default_rng(9).uniform(-1, 1, (3, 5)).astype(np.float32)
    zv[0, :2] = 0   # x / 0
    xv = np.random.default_rng(8).uniform(-1, 1, (3, 5)).astype(np.float32)
    xv[0, 0] = 0    # 0 / 0
    xv[1, 1] = 0.3  # 3 exactly after the cast
    # fp32 only: onnxruntime's IsInf takes no float16 before opset 20
    return Case("logic_casts", nodes,
                {"x": (F, (3, 5), xv), "z": (F, (3, 5), zv), "m": (TP.INT64, (3, 5), None)}, inits,
                {"y2": F, "xi": TP.INT64, "eq3": TP.BOOL, "nx": TP.BOOL}, fp16=False)


def gather_nd_mask():
    """A bool mask of [B, S] expanded to [B, 1, 1, S] by a GatherND of
    constant indices (torch.export's `mask[:, None, None, :]`), then a
    masked fill of scores."""
    B, S = 2, 6
    idx = np.zeros((B, 1, 1, S, 2), np.int64)
    for b in range(B):
        idx[b, 0, 0, :, 0] = b
        idx[b, 0, 0, :, 1] = np.arange(S)
    nodes = [N("Cast", ["mask"], ["mb"], to=TP.BOOL),
             N("GatherND", ["mb", "idx"], ["m4"]),
             N("Where", ["m4", "s", "ninf"], ["y"])]
    mask = [[1, 1, 0, 1, 0, 1], [0, 1, 1, 1, 1, 1]]
    return Case("gather_nd_mask", nodes, {"mask": (TP.INT64, (B, S), mask), "s": (F, (B, 3, S, S), None)},
                {"idx": idx, "ninf": np.array(-1e4, np.float32)}, {"y": F})


def gather_computed_int32():
    nodes = [N("Relu", ["x"], ["r"]), N("Gather", ["r", "i"], ["y"], axis=1)]
    return Case("gather_computed_int32", nodes,
                {"x": (F, (3, 9, 4), None), "i": (TP.INT32, (2, 5), [[0, 8, -1, 4, 4], [-9, 1, 2, 3, 7]])}, {},
                {"y": F})


def causal_mask_consts():
    """GPT-2's causal mask from constants (Trilu, Equal, Where fold at
    import) applied to computed scores; GatherElements of constants."""
    S = 5
    nodes = [N("Trilu", ["ones"], ["tri"], upper=0),
             N("Equal", ["tri", "zero"], ["up"]),
             N("Where", ["up", "ninf", "s"], ["ms"]),
             N("GatherElements", ["tab", "gi"], ["ge"], axis=1),
             N("Add", ["ms", "ge"], ["y"])]
    inits = {"ones": np.ones((S, S), np.float32), "zero": np.array(0.0, np.float32),
             "ninf": np.array(-1e4, np.float32), "tab": f32(S, S, seed=3),
             "gi": np.array([[(i + j) % S for j in range(S)] for i in range(S)], np.int64)}
    return Case("causal_mask_consts", nodes, {"s": (F, (2, S, S), None)}, inits, {"y": F})


def big_int_weight():
    nodes = [N("Add", ["x", "c"], ["y"])]
    return Case("big_int_weight", nodes, {"x": (TP.INT64, (3,), None)}, {"c": np.array([1, 2, 1 << 25], np.int64)},
                {"y": TP.INT64}, fp16=False, error="beyond 2^24")


def cases():
    return [embed_attention(), logic_casts(), gather_nd_mask(), gather_computed_int32(), causal_mask_consts(),
            big_int_weight()]


def compare(got, ref):
    if got.shape != ref.shape:
        return None, "shape %s, onnxruntime %s" % (got.shape, ref.shape)
    if ref.dtype.kind in "biu":
        bad = int((got.astype(np.int64) != ref.astype(np.int64)).sum())
        return (0.0 if not bad else float("inf")), ("%d of %d elements differ" % (bad, ref.size) if bad else None)
    g, r = got.astype(np.float64), ref.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(r)):
        return float("inf"), "NaN where onnxruntime has none, or the reverse"
    g, r = np.nan_to_num(g), np.nan_to_num(r)
    return float(np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-30)), None


def main(argv):
    verbose = "-v" in argv
    names = [a for a in argv if not a.startswith("-")]
    lib = fgapi.Lib(os.environ.get("FUSEGEN_LIB", "build/libfusegen.so"))
    failed = []
    print("  %-24s %-5s %10s %4s  %s" % ("case", "dtype", "rel_l2", "k", "result"))
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases():
            if names and case.name not in names:
                continue
            for dtype in ("fp32", "fp16") if case.fp16 else ("fp32",):
                model = case.model(dtype)
                path = os.path.join(tmp, "%s_%s.onnx" % (case.name, dtype))
                onnx.save(model, path)
                feeds = case.feeds(dtype, np.random.default_rng(0))
                g, err, worst, nk = None, None, 0.0, 0
                try:
                    g = lib.load(path)
                    outs, nk = lib.run(g, feeds)
                    if case.error:
                        err = "loaded and ran; expected the error '%s'" % case.error
                    else:
                        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
                        ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
                        for k, r in ref.items():
                            rel, e = compare(outs[k], r)
                            worst = max(worst, rel if rel is not None else float("inf"))
                            err = err or (e and "%s: %s" % (k, e))
                except fgapi.FusegenError as e:
                    msg = "; ".join(e.messages) or str(e)
                    if not (case.error and case.error in msg):
                        err = msg
                finally:
                    if g:
                        lib.free_graph(g)
                ok = err is None and worst <= TOL[dtype]
                row = "  %-24s %-5s %10.3e %4s  %s" % (case.name, dtype, worst, nk or "-",
                                                      "ok" + (" (refused as expected)" if case.error else "")
                                                      if ok else "FAIL: %s" % (err or "over %g" % TOL[dtype]))
                if verbose or not ok:
                    print(row, flush=True)
                if not ok:
                    failed.append("%s/%s" % (case.name, dtype))
    print("%d failed%s" % (len(failed), ": " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
