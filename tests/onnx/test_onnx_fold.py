#!/usr/bin/env python3
"""test_onnx_fold.py -- import-time constant folding (codegen/onnx_fold.c,
docs/onnx.md "Constant folding") against onnxruntime.

Each model computes its weights or its reshape targets with constant
subgraphs, as exporters and the ONNX "light" model-zoo networks write them
(ConstantOfShape, Shape of a computed tensor, Gather, Unsqueeze, Concat,
Slice, Cast, Range, Transpose, Expand, int64 shape arithmetic, float
arithmetic on weights, casts to float16).  fusegen loads it (the subgraphs
are folded away), runs it in CPU emulation, and the outputs are compared
with onnxruntime on the same inputs (relative L2 <= 2e-5 in fp32, 5e-3 in
fp16).  The graphs must plan to the computed ops only: a folded subgraph
leaves no kernel behind.  The refusals are checked too: a constant node
that cannot be evaluated, a folding-only operator on a computed tensor
(listed with the other unsupported operators in one error), casts to types
the importer does not hold.

Environment: FUSEGEN_LIB (libfusegen.so).  Exit 77 (skipped) without onnx,
onnxruntime or numpy.  Arguments: case names (default all).
"""
import os
import sys

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

RNG = np.random.default_rng(4321)
TOL = {TP.FLOAT: 2e-5, TP.FLOAT16: 5e-3}


def i64(name, vals):
    return nh.from_array(np.array(vals, dtype=np.int64), name)


def const(out, arr):
    return h.make_node("Constant", [], [out], value=nh.from_array(np.asarray(arr)))


def model(nodes, inputs, outputs, inits=(), opset=13, et=TP.FLOAT):
    ins = [h.make_tensor_value_info(k, et, s) for k, s in inputs.items()]
    outs = [h.make_tensor_value_info(k, et, None) for k in outputs]
    g = h.make_graph(nodes, "fold", ins, outs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8

    return m


def cases():
    """(name, model, computed op count): computed ops are what must remain."""
    out = []
    # 1. Reshape target from Shape of a computed tensor: Gather, Unsqueeze,
    #    Concat with a constant -1, int64 Mul; the bias from ConstantOfShape.
    n = [
        h.make_node("Relu", ["x"], ["r"]),
        h.make_node("Shape", ["r"], ["s"]),
        h.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        h.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        h.make_node("Slice", ["s", "st", "en"], ["hw"]),            # [H, W]
        h.make_node("Identity", ["hw"], ["hw2"]),
        h.make_node("Gather", ["hw2", "i0"], ["hh"]),
        h.make_node("Gather", ["hw2", "i1"], ["ww"]),
        h.make_node("Mul", ["hh", "ww"], ["hwm"]),                   # int64 H * W
        h.make_node("Gather", ["s", "i1"], ["cc"]),
        h.make_node("Mul", ["hwm", "cc"], ["chw"]),
        h.make_node("Unsqueeze", ["chw", "ax0"], ["chw1"]),
        h.make_node("Concat", ["n1", "chw1"], ["shape"], axis=0),    # [N, C*H*W]
        h.make_node("Reshape", ["r", "shape"], ["f"]),
        h.make_node("ConstantOfShape", ["chw1"], ["bias0"], value=nh.from_array(np.array([0.25], np.float32))),
        h.make_node("Cast", ["chw1"], ["chwf"], to=TP.FLOAT),
        h.make_node("Div", ["bias0", "chwf"], ["bias"]),             # 0.25 / 60, broadcast
        h.make_node("Add", ["f", "bias"], ["y"]),
    ]
    inits = [i64("i0", 0), i64("i1", 1), i64("ax0", [0]), i64("st", [2]), i64("en", [4])]
    out.append(("shape_arith", model(n, {"x": [2, 3, 4, 5]}, ["y"], inits), 3))

    # 2. Weights computed from constants: Range, Cast, Sqrt, Pow, Sub, Mul,
    #    Reshape of a constant, Transpose, Expand; a Conv using them.
    n = [
        h.make_node("Range", ["r0", "r1", "r2"], ["ramp"]),          # int64 0..53
        h.make_node("Cast", ["ramp"], ["rampf"], to=TP.FLOAT),
        h.make_node("Sqrt", ["rampf"], ["sq"]),
        h.make_node("Pow", ["sq", "p"], ["pw"]),
        h.make_node("Sub", ["pw", "half"], ["w0"]),
        h.make_node("Reshape", ["w0", "wshape"], ["w1"]),            # [3, 2, 3, 3]
        h.make_node("Transpose", ["w1"], ["w"], perm=[1, 0, 2, 3]),  # [2, 3, 3, 3]
        h.make_node("Expand", ["b0", "bshape"], ["b"]),              # [2]
        h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c"], ["y"]),
    ]
    inits = [i64("r0", 0), i64("r1", 54), i64("r2", 1), nh.from_array(np.array(1.5, np.float32), "p"),
             nh.from_array(np.array(3.0, np.float32), "half"), i64("wshape", [3, 2, 3, 3]),
             nh.from_array(np.array([0.5], np.float32), "b0"), i64("bshape", [2])]
    out.append(("weight_arith", model(n, {"x": [1, 3, 6, 6]}, ["y"], inits), 2))

    # 3. int64 shape arithmetic with negative values: Div truncating toward
    #    zero, Neg, Abs, Max, Sub, Slice with a negative step, Squeeze; the
    #    result cast to float and used as a per-channel scale.
    n = [
        h.make_node("Div", ["a", "d"], ["q"]),                        # [-7, 7, -8, 9] / [2, -2, 3, 4]
        h.make_node("Neg", ["q"], ["nq"]),
        h.make_node("Abs", ["nq"], ["aq"]),
        h.make_node("Max", ["q", "nq"], ["mx"]),
        h.make_node("Sub", ["mx", "aq"], ["z"]),                      # zeros
        h.make_node("Add", ["z", "q"], ["q2"]),
        h.make_node("Slice", ["q2", "s_st", "s_en", "s_ax", "s_sp"], ["rev"]),   # reversed
        h.make_node("Cast", ["rev"], ["revf"], to=TP.FLOAT),
        h.make_node("Unsqueeze", ["revf", "ax12"], ["scale"]),        # [4, 1, 1]
        h.make_node("Squeeze", ["scale3", "ax0"], ["scale2"]),
        h.make_node("Mul", ["x", "scale"], ["m"]),
        h.make_node("Add", ["m", "scale2"], ["y"]),
        h.make_node("Unsqueeze", ["scale", "ax0"], ["scale3"]),
    ]
    # topological order: scale3 before its Squeeze
    n = n[:9] + [n[12], n[9], n[10], n[11]]
    inits = [i64("a", [-7, 7, -8, 9]), i64("d", [2, -2, 3, 4]), i64("s_st", [-1]), i64("s_en", [-100]),
             i64("s_ax", [0]), i64("s_sp", [-1]), i64("ax12", [1, 2]), i64("ax0", [0])]
    out.append(("int_arith", model(n, {"x": [1, 4, 3, 3]}, ["y"], inits), 2))

    # 4. Opset 11 forms (Unsqueeze / Squeeze axes as attributes), Size,
    #    Flatten of a constant, Concat of float constants, Dropout, Min, Exp,
    #    Log.
    n = [
        h.make_node("Size", ["x"], ["sz"]),                           # 24
        h.make_node("Cast", ["sz"], ["szf"], to=TP.FLOAT),
        h.make_node("Unsqueeze", ["szf"], ["sz1"], axes=[0]),
        h.make_node("Concat", ["sz1", "c2"], ["v0"], axis=0),         # [24, 2, 0.5, -1]
        h.make_node("Dropout", ["v0"], ["v"], ratio=0.5),             # inference: the data
        h.make_node("Exp", ["v"], ["e"]),
        h.make_node("Log", ["e"], ["le"]),
        h.make_node("Min", ["le", "cap"], ["lm"]),
        h.make_node("Flatten", ["lm"], ["lf"], axis=0),               # [1, 4]
        h.make_node("Squeeze", ["lf"], ["ls"], axes=[0]),             # [4]
        h.make_node("Mul", ["x", "ls"], ["y"]),
    ]
    inits = [nh.from_array(np.array([2.0, 0.5, -1.0], np.float32), "c2"),
             nh.from_array(np.array(10.0, np.float32), "cap")]
    out.append(("opset11_forms", model(n, {"x": [2, 3, 4]}, ["y"], inits, opset=11), 1))

    # 5. fp16: weights computed in float and cast to float16 (rounded to
    #    nearest even), a ConstantOfShape of a float16 value.
    n = [
        h.make_node("Div", ["one", "three"], ["third"]),
        h.make_node("Cast", ["third"], ["t16"], to=TP.FLOAT16),
        h.make_node("ConstantOfShape", ["shp"], ["bias"], value=nh.from_array(np.array([0.1], np.float16))),
        h.make_node("Mul", ["x", "t16"], ["m"]),
        h.make_node("Add", ["m", "bias"], ["y"]),
    ]
    inits = [nh.from_array(np.array([1.0, 2.0, 1e-5, 70000.0], np.float32), "one"),
             nh.from_array(np.array(3.0, np.float32), "three"), i64("shp", [4])]
    out.append(("fp16_cast", model(n, {"x": [2, 4]}, ["y"], inits, et=TP.FLOAT16), 2))

    # 6. A constant node listed as a graph input too (the light networks'
    #    weights are ConstantOfShape outputs whose shapes are initializers).
    n = [
        h.make_node("ConstantOfShape", ["w_shape"], ["w"], value=nh.from_array(np.array([0.02], np.float32))),
        h.make_node("Conv", ["x", "w"], ["y"]),
    ]
    out.append(("constant_of_shape_weight", model(n, {"x": [1, 2, 5, 5]}, ["y"], [i64("w_shape", [3, 2, 3, 3])]), 1))

    # 7. Rounding of casts: float -> float16 -> float and float -> bfloat16
    #    -> float round to nearest even; int64 -> int32 keeps the value.
    n = [
        h.make_node("Cast", ["c"], ["c16"], to=TP.FLOAT16),
        h.make_node("Cast", ["c16"], ["w16"], to=TP.FLOAT),
        h.make_node("Cast", ["c"], ["cb"], to=TP.BFLOAT16),
        h.make_node("Cast", ["cb"], ["wb"], to=TP.FLOAT),
        h.make_node("Cast", ["k"], ["k32"], to=TP.INT32),
        h.make_node("Cast", ["k32"], ["kf"], to=TP.FLOAT),
        h.make_node("Mul", ["x", "w16"], ["m"]),
        h.make_node("Add", ["m", "wb"], ["a"]),
        h.make_node("Mul", ["a", "kf"], ["y"]),
    ]
    c = (RNG.standard_normal(16) * 3).astype(np.float32)
    inits = [nh.from_array(c, "c"), i64("k", [-3])]
    out.append(("cast_rounding", model(n, {"x": [2, 16]}, ["y"], inits), 3))
    return out


def error_cases():
    """(name, model, [texts the one error must contain])."""
    out = []
    n = [h.make_node("Gather", ["c", "bad"], ["g"], axis=0), h.make_node("Cast", ["g"], ["gf"], to=TP.FLOAT),
         h.make_node("Add", ["x", "gf"], ["y"])]
    out.append(("gather_out_of_range", model(n, {"x": [3]}, ["y"], [i64("c", [1, 2, 3]), i64("bad", [3])]),
                ["node 0", "(Gather): cannot be folded", "index 3 is out of range"]))
    n = [h.make_node("Relu", ["x"], ["r"]), h.make_node("Det", ["r"], ["g"]),
         h.make_node("Hardmax", ["g"], ["y"])]
    out.append(("fold_op_on_computed", model(n, {"x": [2, 3, 3]}, ["y"]),
                ["unsupported operators: Det (node 1", "Hardmax (node 2"]))
    n = [h.make_node("Cast", ["c"], ["b"], to=TP.INT8), h.make_node("Cast", ["b"], ["bf"], to=TP.FLOAT),
         h.make_node("Add", ["x", "bf"], ["y"])]
    out.append(("cast_to_int8", model(n, {"x": [3]}, ["y"], [i64("c", [1, 0, 3])]),
                ["(Cast): cannot be folded", "cast to INT8"]))
    n = [h.make_node("Reshape", ["c", "s"], ["r"]), h.make_node("Add", ["x", "r"], ["y"])]
    out.append(("reshape_count", model(n, {"x": [4]}, ["y"], [nh.from_array(np.ones(6, np.float32), "c"),
                                                               i64("s", [4])]),
                ["(Reshape): cannot be folded", "cannot reshape 6 elements to [4]"]))
    n = [h.make_node("Add", ["x", "c"], ["y"])]
    out.append(("int_constant_beyond_2_24", model(n, {"x": [3]}, ["y"], [i64("c", [1, 2, 1 << 25])], et=TP.INT64),
                ["integer constant 'c' holds 33554432, beyond 2^24"]))
    return out


def rel_l2(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def main(argv):
    names = [a for a in argv if not a.startswith("-")]
    lib = fgapi.Lib(os.environ.get("FUSEGEN_LIB", "build/libfusegen.so"))
    failed = []
    print("  %-26s %10s %8s %8s  %s" % ("model", "rel_l2", "tol", "kernels", "result"))
    for name, m, ncomputed in cases():
        if names and name not in names:
            continue
        data = m.SerializeToString()
        et = m.graph.input[0].type.tensor_type.elem_type
        feeds = {}
        for vi in m.graph.input:
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            feeds[vi.name] = RNG.standard_normal(shape).astype(np.float16 if et == TP.FLOAT16 else np.float32)
        sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
        try:
            g = lib.load(data=data)
            try:
                got, kernels = lib.run(g, feeds)
            finally:
                lib.free_graph(g)
        except fgapi.FusegenError as e:
            print("  %-26s FAIL: %s" % (name, e))
            failed.append(name)
            continue
        err = max(rel_l2(got[o.name], w) for o, w in zip(m.graph.output, want))
        shapes_ok = all(got[o.name].shape == w.shape for o, w in zip(m.graph.output, want))
        ok = err <= TOL[et] and shapes_ok and kernels <= ncomputed
        print("  %-26s %10.2e %8.0e %4d/%-3d  %s" % (name, err, TOL[et], kernels, ncomputed,
                                                    "ok" if ok else "FAIL" + ("" if shapes_ok else " (shape)")))
        if not ok:
            failed.append(name)
    for name, m, texts in error_cases():
        if names and name not in names:
            continue
        try:
            g = lib.load(data=m.SerializeToString())
            lib.free_graph(g)
            msgs = ["(loaded without an error)"]
        except fgapi.FusegenError as e:
            msgs = e.messages
        text = "\n".join(msgs)
        ok = all(t in text for t in texts) and len(msgs) == 1
        print("  %-26s %s  %s" % (name, "ok  " if ok else "FAIL", text.replace("\n", " | ")[:200]))
        if not ok:
            failed.append(name)
    lib.close()
    print("onnx fold: %d failed" % len(failed) + (": " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
