#!/usr/bin/env python3
"""test_onnx_models.py -- ONNX import against onnxruntime.

Builds one small model per supported operator and attribute (plus a
ResNet basic block, a MobileNetV2 inverted residual and an MLP with the erf
form of GELU, at reduced sizes), loads each with fusegen's ONNX importer,
runs it in CPU emulation (the generated CUDA source compiled for the host)
and compares the outputs with onnxruntime on the same inputs:

  fp32: the model as built, relative L2 <= 2e-5
  fp16: the model with fp16 initializers and inputs; the reference is
        onnxruntime on the fp32 model holding the same (fp16-exact) values,
        relative L2 <= 5e-3

It also checks the command line on ONNX files (`fusegen run --check`,
`fusegen import` and the imported YAML graph), loading from memory, the
initializer encodings (typed fields, fp16 in int32_data, external data)
and the refusals (one error listing every unsupported operator, exit 2).

Environment: FUSEGEN_LIB (libfusegen.so), FUSEGEN_BIN (the CLI).  Exit 77
(skipped) when onnx, onnxruntime or numpy are not installed.  Arguments:
names of cases to run (default all); -v prints every row.
"""
import os
import subprocess
import sys
import tempfile

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
RNG = np.random.default_rng(1234)


def rnd(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


class Case:
    """A model: nodes over inputs {name: shape} and initializers {name: array};
    dims: --dim values for symbolic dimensions written as strings in shapes."""

    def __init__(self, name, nodes, inputs, inits, outputs, opset=13, dims=None, fp16=True):
        self.name, self.nodes, self.inputs, self.inits = name, nodes, inputs, inits
        self.outputs, self.opset, self.dims, self.fp16 = outputs, opset, dims or {}, fp16

    def model(self, dtype):
        et = TP.FLOAT16 if dtype == "fp16" else TP.FLOAT
        inits = []
        for k, v in self.inits.items():
            if v.dtype == np.float32 and dtype == "fp16":
                v = v.astype(np.float16)
            inits.append(nh.from_array(v, k))
        ins = [h.make_tensor_value_info(k, et, list(s)) for k, s in self.inputs.items()]
        outs = [h.make_tensor_value_info(k, et, None) for k in self.outputs]
        g = h.make_graph(self.nodes, self.name, ins, outs, inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", self.opset)])
        m.ir_version = 8
        return m

    def feeds(self, dtype):
        out = {}
        for k, s in self.inputs.items():
            shape = [self.dims.get(d, 1) if isinstance(d, str) else d for d in s]
            a = rnd(*shape)
            out[k] = a.astype(np.float16) if dtype == "fp16" else a
        return out


def ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def fp32_twin(case):
    """The fp32 model whose values are those of the fp16 one (the reference)."""
    m = case.model("fp32")
    for t in m.graph.initializer:
        if t.data_type == TP.FLOAT:
            a = nh.to_array(t).astype(np.float16).astype(np.float32)
            t.CopyFrom(nh.from_array(a, t.name))
    return m


def compare(got, ref):
    got = got.astype(np.float64)
    ref = ref.astype(np.float64)
    if got.shape != ref.shape:
        return None, None, "shape %s, onnxruntime %s" % (got.shape, ref.shape)
    d = got - ref
    rel = np.sqrt((d * d).sum()) / max(np.sqrt((ref * ref).sum()), 1e-30)
    return float(np.abs(d).max()) if d.size else 0.0, float(rel), None


# ---- the cases ---------------------------------------------------------------

N = h.make_node


def conv_case(name, x, w, b=None, opset=13, **attrs):
    ins = ["x", "W"] + (["B"] if b is not None else [])
    inits = {"W": rnd(*w, scale=0.3)}
    if b is not None:
        inits["B"] = rnd(b, scale=0.1)
    return Case(name, [N("Conv", ins, ["y"], name="conv", **attrs)], {"x": x}, inits, ["y"], opset)


def unary(name, op, opset=13, shape=(2, 4, 5, 6), scale=2.0, **attrs):
    c = Case(name, [N(op, ["x"], ["y"], **attrs)], {"x": shape}, {}, ["y"], opset)
    c.scale = scale
    return c


def cases():
    cs = []
    X = (2, 4, 8, 8)
    # Conv and its attributes
    cs.append(conv_case("conv_pads", ("batch", 4, 8, 8), (6, 4, 3, 3), 6, pads=[1, 1, 1, 1]))
    cs[-1].dims = {"batch": 2}
    cs.append(conv_case("conv_nobias", X, (6, 4, 3, 3)))
    cs.append(conv_case("conv_strides_dilations", (1, 4, 11, 11), (6, 4, 3, 3), 6, strides=[2, 2],
                        dilations=[2, 2], pads=[2, 2, 2, 2]))
    cs.append(conv_case("conv_group", X, (8, 2, 3, 3), 8, group=2, pads=[1, 1, 1, 1]))
    cs.append(conv_case("conv_depthwise", X, (4, 1, 3, 3), 4, group=4, pads=[1, 1, 1, 1]))
    cs.append(conv_case("conv_same_upper", X, (6, 4, 3, 3), 6, auto_pad="SAME_UPPER"))
    cs.append(conv_case("conv_same_lower", X, (6, 4, 5, 5), 6, auto_pad="SAME_LOWER"))
    cs.append(conv_case("conv_valid", X, (6, 4, 3, 3), 6, auto_pad="VALID", kernel_shape=[3, 3]))
    cs.append(conv_case("conv_pads_unequal_same_size", X, (6, 4, 3, 3), 6, strides=[2, 2], pads=[1, 1, 0, 0]))
    cs.append(conv_case("conv_1x1_stride2", X, (6, 4, 1, 1), 6, strides=[2, 2]))
    # BatchNormalization
    C = 4
    cs.append(Case("batchnorm", [N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
                   {"x": X}, {"s": rnd(C), "b": rnd(C), "m": rnd(C), "v": np.abs(rnd(C)) + 0.5}, ["y"]))
    cs.append(Case("conv_batchnorm_relu",
                   [N("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
                    N("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]), N("Relu", ["n"], ["y"])],
                   {"x": X}, {"W": rnd(6, 4, 3, 3, scale=0.3), "s": rnd(6), "b": rnd(6), "m": rnd(6),
                              "v": np.abs(rnd(6)) + 0.5}, ["y"]))
    # activations
    cs.append(unary("relu", "Relu"))
    cs.append(unary("leaky_relu", "LeakyRelu", alpha=0.2))
    cs.append(unary("sigmoid", "Sigmoid"))
    cs.append(unary("tanh", "Tanh"))
    cs.append(unary("hardsigmoid", "HardSigmoid", alpha=0.3, beta=0.4))
    cs.append(unary("hardsigmoid_default", "HardSigmoid"))
    cs.append(unary("hardsigmoid_torch", "HardSigmoid", alpha=1.0 / 6.0, beta=0.5, scale=4.0))
    cs.append(unary("hardswish", "HardSwish", opset=14, scale=4.0))
    cs.append(unary("elu", "Elu", alpha=0.5))
    cs.append(unary("softplus", "Softplus", scale=4.0))
    cs.append(unary("erf", "Erf"))
    cs.append(unary("gelu", "Gelu", opset=20))
    cs.append(unary("gelu_tanh", "Gelu", opset=20, approximate="tanh"))
    # operators imported as data (an `onnx:` key on their op definitions)
    for op in ["Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Atan", "Asinh", "Sinh", "Cosh", "Softsign",
               "Mish"]:
        cs.append(unary(op.lower(), op, opset=18, scale=3.0))
    cs.append(unary("tan", "Tan", scale=0.7))
    for op in ["Asin", "Acos", "Atanh"]:   # inside (-1, 1)
        cs.append(unary(op.lower(), op))
        cs[-1].xform = lambda a: np.tanh(a) * 0.95
    cs.append(unary("acosh", "Acosh"))
    cs[-1].xform = lambda a: np.abs(a) + 1.0
    cs.append(unary("selu", "Selu", alpha=1.5, gamma=1.2))
    cs.append(unary("selu_default", "Selu"))
    cs.append(unary("celu", "Celu", opset=12, alpha=2.0))
    cs.append(unary("thresholded_relu", "ThresholdedRelu", opset=10, alpha=0.3))
    cs.append(unary("shrink", "Shrink", opset=9, bias=0.1, lambd=0.4))
    # Cast / CastLike of computed tensors: to the graph's type and to double (identities), a
    # comparison's result to float (the attention-mask form: (x > 0) cast, then scaled)
    cs.append(Case("cast_same_and_double", [N("Cast", ["x"], ["c"], to=TP.DOUBLE), N("Relu", ["c"], ["r"]),
                                            N("CastLike", ["r", "x"], ["y"])],
                   {"x": (2, 3, 4)}, {}, ["y"], opset=15, fp16=False))
    cs.append(Case("cast_mask", [N("Greater", ["x", "zero"], ["b"]), N("Cast", ["b"], ["f"], to=TP.FLOAT),
                                 N("Mul", ["f", "x"], ["y"])],
                   {"x": (2, 3, 4)}, {"zero": np.zeros(1, np.float32)}, ["y"], opset=13, fp16=False))
    # a data operator on constants folds through its expression (Softsign is not
    # among the folder's operators; Round's ties go to even)
    cs.append(Case("fold_softsign_round", [N("Softsign", ["c"], ["s"]), N("Round", ["t"], ["r"]),
                                           N("Add", ["x", "s"], ["a"]), N("Add", ["a", "r"], ["y"])],
                   {"x": (2, 4)}, {"c": rnd(2, 4, scale=3.0),
                                   "t": np.array([0.5, 1.5, 2.5, -0.5], dtype=np.float32)}, ["y"], opset=13))
    cs.append(Case("prelu_per_channel", [N("PRelu", ["x", "slope"], ["y"])], {"x": X},
                   {"slope": rnd(4, 1, 1)}, ["y"]))
    cs.append(Case("prelu_single", [N("PRelu", ["x", "slope"], ["y"])], {"x": X}, {"slope": rnd(1)}, ["y"]))
    cs.append(Case("prelu_broadcast", [N("PRelu", ["x", "slope"], ["y"])], {"x": X}, {"slope": rnd(8)}, ["y"]))
    for nm, lo, hi in [("clip_relu6", 0.0, 6.0), ("clip", -1.0, 0.5), ("clip_min", -0.5, None),
                       ("clip_max", None, 0.25), ("clip_relu", 0.0, None)]:
        ins, inits = ["x", "lo" if lo is not None else "", "hi" if hi is not None else ""], {}
        if lo is not None:
            inits["lo"] = np.array(lo, dtype=np.float32)
        if hi is not None:
            inits["hi"] = np.array(hi, dtype=np.float32)
        while ins[-1] == "":
            ins.pop()
        c = Case(nm, [N("Clip", ins, ["y"])], {"x": X}, inits, ["y"])
        c.scale = 8.0
        cs.append(c)
    # binary ops with broadcasting
    for op in ["Add", "Sub", "Mul", "Div"]:
        cs.append(Case(op.lower() + "_tensors", [N(op, ["a", "b"], ["y"])], {"a": X, "b": X}, {}, ["y"]))
        cs.append(Case(op.lower() + "_bcast_const", [N(op, ["a", "k"], ["y"])], {"a": X},
                       {"k": np.abs(rnd(4, 1, 1)) + 0.5}, ["y"]))
    cs.append(Case("add_const_first", [N("Add", ["k", "a"], ["y"])], {"a": X}, {"k": rnd(8)}, ["y"]))
    cs.append(Case("div_scalar_first", [N("Div", ["k", "a"], ["y"])], {"a": X},
                   {"k": np.array(2.0, dtype=np.float32)}, ["y"]))
    cs[-1].pos = True
    # MatMul and Gemm
    cs.append(Case("matmul_2d", [N("MatMul", ["a", "W"], ["y"])], {"a": (4, 16)}, {"W": rnd(16, 8, scale=0.3)},
                   ["y"]))
    cs.append(Case("matmul_batched", [N("MatMul", ["a", "W"], ["y"])], {"a": ("batch", 5, 16)},
                   {"W": rnd(16, 8, scale=0.3)}, ["y"], dims={"batch": 3}))
    cs.append(Case("matmul_add_bias", [N("MatMul", ["a", "W"], ["m"]), N("Add", ["m", "B"], ["y"])],
                   {"a": (2, 5, 16)}, {"W": rnd(16, 8, scale=0.3), "B": rnd(8)}, ["y"]))
    cs.append(Case("gemm_transB", [N("Gemm", ["a", "W", "C"], ["y"], transB=1)], {"a": (4, 16)},
                   {"W": rnd(8, 16, scale=0.3), "C": rnd(8)}, ["y"]))
    cs.append(Case("gemm_alpha_beta_transA", [N("Gemm", ["a", "W", "C"], ["y"], alpha=0.5, beta=2.0, transA=1)],
                   {"a": (16, 4)}, {"W": rnd(16, 8, scale=0.3), "C": rnd(4, 8)}, ["y"]))
    cs.append(Case("gemm_scalar_c", [N("Gemm", ["a", "W", "C"], ["y"])], {"a": (4, 16)},
                   {"W": rnd(16, 8, scale=0.3), "C": np.array(0.75, dtype=np.float32)}, ["y"]))
    cs.append(Case("gemm_c_column", [N("Gemm", ["a", "W", "C"], ["y"], transB=1)], {"a": (4, 16)},
                   {"W": rnd(8, 16, scale=0.3), "C": rnd(4, 1)}, ["y"]))
    cs.append(Case("gemm_no_c", [N("Gemm", ["a", "W"], ["y"], transB=1)], {"a": (4, 16)},
                   {"W": rnd(8, 16, scale=0.3)}, ["y"]))
    # pooling
    P = (2, 3, 9, 9)
    cs.append(Case("maxpool_pads_strides", [N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                              pads=[1, 1, 1, 1])], {"x": P}, {}, ["y"]))
    cs.append(Case("maxpool_ceil_same_size", [N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                                ceil_mode=1)], {"x": P}, {}, ["y"]))
    cs.append(Case("maxpool_same_upper", [N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3],
                                            auto_pad="SAME_UPPER")], {"x": P}, {}, ["y"]))
    cs.append(Case("avgpool", [N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                   {"x": (2, 3, 8, 8)}, {}, ["y"]))
    cs.append(Case("avgpool_pads_exclude", [N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                              pads=[1, 1, 1, 1])], {"x": P}, {}, ["y"]))
    cs.append(Case("avgpool_pads_include", [N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                              pads=[1, 1, 1, 1], count_include_pad=1)], {"x": P}, {}, ["y"]))
    cs.append(Case("avgpool_dilations", [N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2],
                                           dilations=[2, 2])], {"x": P}, {}, ["y"], opset=19))
    cs.append(Case("global_avgpool", [N("GlobalAveragePool", ["x"], ["y"])], {"x": P}, {}, ["y"]))
    cs.append(Case("global_maxpool", [N("GlobalMaxPool", ["x"], ["y"])], {"x": P}, {}, ["y"]))
    # shapes
    cs.append(Case("flatten", [N("Relu", ["x"], ["r"]), N("Flatten", ["r"], ["y"])], {"x": X}, {}, ["y"]))
    cs.append(Case("flatten_axis0", [N("Relu", ["x"], ["r"]), N("Flatten", ["r"], ["y"], axis=0)],
                   {"x": (1, 4, 3, 3)}, {}, ["y"]))
    cs.append(Case("flatten_axis_neg", [N("Relu", ["x"], ["r"]), N("Flatten", ["r"], ["y"], axis=-3)],
                   {"x": (2, 4, 3, 3)}, {}, ["y"]))
    cs.append(Case("reshape_n_rest", [N("Relu", ["x"], ["r"]), N("Reshape", ["r", "s"], ["y"])], {"x": X},
                   {"s": np.array([0, -1], dtype=np.int64)}, ["y"]))
    cs.append(Case("squeeze", [N("GlobalAveragePool", ["x"], ["g"]), N("Squeeze", ["g", "ax"], ["y"])], {"x": X},
                   {"ax": np.array([2, 3], dtype=np.int64)}, ["y"]))
    cs.append(Case("squeeze_opset11", [N("GlobalAveragePool", ["x"], ["g"]), N("Squeeze", ["g"], ["y"],
                                                                              axes=[3, 2])],
                   {"x": X}, {}, ["y"], opset=11))
    cs.append(Case("unsqueeze_const", [N("Unsqueeze", ["k", "ax"], ["k4"]), N("Mul", ["x", "k4"], ["y"])],
                   {"x": X}, {"k": rnd(4, 8), "ax": np.array([0, 3], dtype=np.int64)}, ["y"]))
    cs.append(Case("reshape_const", [N("Reshape", ["k", "s"], ["k2"]), N("Add", ["x", "k2"], ["y"])],
                   {"x": X}, {"k": rnd(32), "s": np.array([4, 8, 1], dtype=np.int64)}, ["y"]))
    cs.append(Case("identity_dropout", [N("Relu", ["x"], ["r"]), N("Identity", ["r"], ["i"]),
                                        N("Dropout", ["i", "ratio"], ["y"])],
                   {"x": X}, {"ratio": np.array(0.5, dtype=np.float32)}, ["y"]))
    cs.append(Case("constant_node", [N("Constant", [], ["k"], value=nh.from_array(rnd(4, 1, 1), "k")),
                                     N("Constant", [], ["f"], value_float=0.5),
                                     N("Mul", ["x", "k"], ["m"]), N("Add", ["m", "f"], ["y"])],
                   {"x": X}, {}, ["y"]))
    cs.append(Case("two_outputs_alias", [N("Relu", ["x"], ["r"]), N("Identity", ["r"], ["y1"]),
                                         N("Sigmoid", ["r"], ["y2"])], {"x": X}, {}, ["y1", "y2", "r"]))
    # blocks
    cs.append(resnet_block())
    cs.append(mobilenet_block())
    cs.append(mlp_gelu())
    cs.extend(exported_activations())
    cs.extend(matmul_batched_cases())
    cs.extend(computed_operand_cases())
    cs.extend(gemm_computed_cases())
    return cs


# ---- Clip / Gemm / MatMul with computed operands (conformance, issue 14) ------
class BoundsCase(Case):
    """A Clip case whose bounds lo / hi are graph inputs of shape []: lo
    drawn below 0, hi above (x is scaled beyond both)."""

    def feeds(self, dtype):
        out = super().feeds(dtype)
        scale = getattr(self, "scale", 1.0)
        for k, sign in (("lo", -1.0), ("hi", 1.0)):
            if k in out:   # the runner multiplies by scale: these end in +-[0.25, 1.25]
                v = sign * (abs(float(out[k])) % 1.0 + 0.25) / scale
                out[k] = np.array(v, dtype=out[k].dtype)
        return out


def computed_operand_cases():
    """Clip whose min / max are computed tensors (both, one, a constant and a
    computed one)."""
    cs = []
    X = (2, 4, 5, 6)
    for nm, ins, inputs, inits in [
            ("clip_computed_both", ["x", "lo", "hi"], {"x": X, "lo": (), "hi": ()}, {}),
            ("clip_computed_min", ["x", "lo"], {"x": X, "lo": ()}, {}),
            ("clip_computed_max", ["x", "", "hi"], {"x": X, "hi": ()}, {}),
            ("clip_const_min_computed_max", ["x", "k", "hi"], {"x": X, "hi": ()},
             {"k": np.array(-0.75, dtype=np.float32)})]:
        c = BoundsCase(nm, [N("Clip", ins, ["y"])], inputs, inits, ["y"])
        c.scale = 4.0
        cs.append(c)
    return cs


def gemm_computed_cases():
    """Gemm with alpha / beta on computed B / C and a computed C of one element
    ([1] and []), MatMul of two vectors."""
    cs = []
    cs.append(Case("gemm_alpha_computed_b", [N("Gemm", ["a", "b", "C"], ["y"], alpha=0.5)],
                   {"a": (4, 16), "b": (16, 8)}, {"C": rnd(8)}, ["y"]))
    cs.append(Case("gemm_beta_computed_c", [N("Gemm", ["a", "W", "c"], ["y"], beta=0.5, transB=1)],
                   {"a": (4, 16), "c": (4, 8)}, {"W": rnd(8, 16, scale=0.3)}, ["y"]))
    cs.append(Case("gemm_all_computed", [N("Gemm", ["a", "b", "c"], ["y"], alpha=0.25, beta=0.35, transA=1,
                                           transB=1)], {"a": (16, 4), "b": (8, 16), "c": (4, 1)}, {}, ["y"]))
    cs.append(Case("gemm_c_one_elem_computed", [N("Gemm", ["a", "W", "c"], ["y"])], {"a": (3, 16), "c": (1,)},
                   {"W": rnd(16, 3, scale=0.3)}, ["y"]))
    cs.append(Case("gemm_c_scalar_computed", [N("Gemm", ["a", "W", "c"], ["y"], beta=2.0)], {"a": (2, 16), "c": ()},
                   {"W": rnd(16, 4, scale=0.3)}, ["y"]))
    # a rank-0 result is [1] in fusegen: the model reshapes it to [1] for the comparison
    cs.append(Case("matmul_1d_1d", [N("MatMul", ["a", "b"], ["s"]), N("Reshape", ["s", "one"], ["y"])],
                   {"a": (16,), "b": (16,)}, {"one": np.array([1], dtype=np.int64)}, ["y"]))
    cs.append(Case("matmul_1d_const_1d", [N("MatMul", ["a", "W"], ["s"]), N("Reshape", ["s", "one"], ["y"])],
                   {"a": (16,)}, {"W": rnd(16, scale=0.3), "one": np.array([1], dtype=np.int64)}, ["y"]))
    return cs
# ---- end of the Clip / Gemm / MatMul block -------------------------------------


# ---- MatMul with numpy semantics (gemm templates) -----------------------------
def matmul_batched_cases():
    """MatMul batched on both sides, batch axes broadcast, rank 1 operands,
    ranks up to 5, computed and constant B, odd sizes (element loads on
    tensor cores), with a bias + activation epilogue."""
    cs = []
    mm = N("MatMul", ["a", "b"], ["y"])
    cs.append(Case("matmul_both_batched", [mm], {"a": (2, 3, 5, 16), "b": (2, 3, 16, 8)}, {}, ["y"]))
    cs.append(Case("matmul_batch_broadcast", [mm], {"a": (2, 1, 5, 16), "b": (3, 16, 8)}, {}, ["y"]))
    cs.append(Case("matmul_b_batched_const", [N("MatMul", ["a", "W"], ["y"])], {"a": (5, 16)},
                   {"W": rnd(3, 16, 8, scale=0.3)}, ["y"]))
    cs.append(Case("matmul_a_vector", [N("MatMul", ["a", "W"], ["y"])], {"a": (16,)},
                   {"W": rnd(2, 16, 8, scale=0.3)}, ["y"]))
    cs.append(Case("matmul_b_vector", [mm], {"a": (2, 5, 16), "b": (16,)}, {}, ["y"]))
    cs.append(Case("matmul_rank5", [mm], {"a": (2, 1, 2, 3, 16), "b": (2, 1, 16, 8)}, {}, ["y"]))
    cs.append(Case("matmul_odd_bias_relu", [N("MatMul", ["a", "b"], ["m"]), N("Add", ["m", "B"], ["r"]),
                                            N("Relu", ["r"], ["y"])],
                   {"a": (3, 7, 13), "b": (3, 13, 9)}, {"B": rnd(9)}, ["y"]))
    cs.append(Case("matmul_tiles_gelu", [N("MatMul", ["a", "W"], ["m"]), N("Add", ["m", "B"], ["r"]),
                                         N("Gelu", ["r"], ["y"], approximate="tanh")],
                   {"a": (2, 67, 40)}, {"W": rnd(40, 72, scale=0.2), "B": rnd(72)}, ["y"], opset=20))
    return cs


def exported_activations():
    """Activations as exporters write them, which rules/rewrites.yaml turns
    back into one op each (silu, gelu_tanh, hardswish)."""
    f = lambda v: np.array(v, np.float32)  # noqa: E731
    X = {"x": (2, 4, 5, 6)}
    silu = Case("export_silu", [N("Sigmoid", ["x"], ["s"]), N("Mul", ["x", "s"], ["y"])], X, {}, ["y"])
    tanh = Case("export_gelu_tanh",
                [N("Mul", ["x", "x"], ["sq"]), N("Mul", ["x", "sq"], ["cu"]), N("Mul", ["kappa", "cu"], ["k"]),
                 N("Add", ["x", "k"], ["s"]), N("Mul", ["beta", "s"], ["i"]), N("Tanh", ["i"], ["t"]),
                 N("Add", ["one", "t"], ["a"]), N("Mul", ["x", "a"], ["m"]), N("Mul", ["half", "m"], ["y"])],
                X, {"kappa": f(0.044715), "beta": f(0.7978845608028654), "one": f(1.0), "half": f(0.5)}, ["y"])
    hswish = Case("export_hardswish",
                  [N("Add", ["x", "three"], ["p"]), N("Clip", ["p", "lo", "hi"], ["r"]), N("Mul", ["x", "r"], ["m"]),
                   N("Div", ["m", "six"], ["y"])],
                  X, {"three": f(3.0), "lo": f(0.0), "hi": f(6.0), "six": f(6.0)}, ["y"])
    for c in (silu, tanh, hswish):
        c.scale = 3.0
    return [silu, tanh, hswish]


def resnet_block():
    C = 8
    inits = {}
    for i in (1, 2):
        inits["w%d" % i] = rnd(C, C, 3, 3, scale=0.15)
        inits["s%d" % i], inits["b%d" % i], inits["m%d" % i] = rnd(C), rnd(C), rnd(C)
        inits["v%d" % i] = np.abs(rnd(C)) + 0.5
    nodes = [N("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="layer1.0.conv1"),
             N("BatchNormalization", ["c1", "s1", "b1", "m1", "v1"], ["n1"], name="layer1.0.bn1"),
             N("Relu", ["n1"], ["r1"], name="layer1.0.relu"),
             N("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], name="layer1.0.conv2"),
             N("BatchNormalization", ["c2", "s2", "b2", "m2", "v2"], ["n2"], name="layer1.0.bn2"),
             N("Add", ["n2", "x"], ["a"], name="layer1.0.add"),
             N("Relu", ["a"], ["y"], name="layer1.0.relu_1")]
    return Case("resnet_basic_block", nodes, {"x": ("N", C, 10, 10)}, inits, ["y"], dims={"N": 2})


def mobilenet_block():
    C, E = 8, 24
    inits = {"we": rnd(E, C, 1, 1, scale=0.3), "be": rnd(E, scale=0.1), "wd": rnd(E, 1, 3, 3, scale=0.3),
             "bd": rnd(E, scale=0.1), "wp": rnd(C, E, 1, 1, scale=0.2), "bp": rnd(C, scale=0.1),
             "lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)}
    nodes = [N("Conv", ["x", "we", "be"], ["e"], name="/features.1/conv/conv.0/conv.0.0/Conv"),
             N("Clip", ["e", "lo", "hi"], ["e6"], name="/features.1/conv/conv.0/conv.0.2/Clip"),
             N("Conv", ["e6", "wd", "bd"], ["d"], pads=[1, 1, 1, 1], group=E, name="/features.1/conv/conv.1/Conv"),
             N("Clip", ["d", "lo", "hi"], ["d6"], name="/features.1/conv/conv.1/Clip"),
             N("Conv", ["d6", "wp", "bp"], ["p"], name="/features.1/conv/conv.2/Conv"),
             N("Add", ["x", "p"], ["y"], name="/features.1/Add")]
    c = Case("mobilenetv2_block", nodes, {"x": (2, C, 9, 9)}, inits, ["y"])
    c.scale = 2.0
    return c


def mlp_gelu():
    D, Hd = 16, 32
    inits = {"w1": rnd(D, Hd, scale=0.25), "b1": rnd(Hd, scale=0.1), "w2": rnd(Hd, D, scale=0.2),
             "b2": rnd(D, scale=0.1), "sqrt2": np.array(1.4142135623730951, np.float32),
             "one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32)}
    nodes = [N("MatMul", ["x", "w1"], ["h0"]), N("Add", ["b1", "h0"], ["h1"]),
             N("Div", ["h1", "sqrt2"], ["t0"]), N("Erf", ["t0"], ["t1"]), N("Add", ["t1", "one"], ["t2"]),
             N("Mul", ["h1", "t2"], ["t3"]), N("Mul", ["t3", "half"], ["g"]),
             N("MatMul", ["g", "w2"], ["o0"]), N("Add", ["o0", "b2"], ["y"])]
    return Case("mlp_erf_gelu", nodes, {"x": ("batch", "seq", D)}, inits, ["y"], dims={"batch": 2, "seq": 6})


# ---- running -------------------------------------------------------------------------


class Runner:
    def __init__(self, verbose):
        self.lib = fgapi.Lib(os.environ["FUSEGEN_LIB"])
        self.verbose = verbose
        self.rows = []
        self.failed = []

    def result(self, name, dtype, max_abs, rel, tol, err=None, kernels=0):
        ok = err is None and rel is not None and rel <= tol
        row = "  %-32s %-5s %10s %10s %8.0e %3s  %s" % (
            name, dtype, "%.3e" % max_abs if max_abs is not None else "-", "%.3e" % rel if rel is not None else "-",
            tol, kernels or "-", "ok" if ok else "FAIL" + (": " + err if err else ""))
        self.rows.append(row)
        if not ok:
            self.failed.append("%s/%s" % (name, dtype))
        if self.verbose or not ok:
            print(row, flush=True)

    def check_case(self, case, dtype, tmp):
        model = case.model(dtype)

        feeds = case.feeds(dtype)
        scale = getattr(case, "scale", 1.0)
        for k in feeds:
            # np.asarray: a rank-0 array times a float is a numpy scalar, which onnxruntime refuses
            feeds[k] = np.asarray((feeds[k].astype(np.float32) * scale).astype(feeds[k].dtype))
            if getattr(case, "pos", False):
                feeds[k] = np.asarray((np.abs(feeds[k].astype(np.float32)) + 0.5).astype(feeds[k].dtype))
            if getattr(case, "xform", None):
                feeds[k] = np.asarray(case.xform(feeds[k].astype(np.float32)).astype(feeds[k].dtype))
        if dtype == "fp16":
            ref = ort_run(fp32_twin(case), {k: v.astype(np.float32) for k, v in feeds.items()})
        else:
            ref = ort_run(model, feeds)
        path = os.path.join(tmp, "%s_%s.onnx" % (case.name, dtype))
        onnx.save(model, path)
        g = None
        try:
            g = self.lib.load(path, dims=case.dims)
            outs, nk = self.lib.run(g, feeds)
        except fgapi.FusegenError as e:
            self.result(case.name, dtype, None, None, TOL[dtype], "; ".join(e.messages) or str(e))
            return
        finally:
            if g:
                self.lib.free_graph(g)
        worst = (0.0, 0.0)
        for k, r in ref.items():
            if k not in outs:
                self.result(case.name, dtype, None, None, TOL[dtype], "output %s missing (have %s)" % (k, list(outs)))
                return
            mx, rel, err = compare(outs[k], r)
            if err:
                self.result(case.name, dtype, None, None, TOL[dtype], "%s: %s" % (k, err))
                return
            worst = (max(worst[0], mx), max(worst[1], rel))
        self.result(case.name, dtype, worst[0], worst[1], TOL[dtype], kernels=nk)


def expect(cond, what, failed):
    print("  %-60s %s" % (what, "ok" if cond else "FAIL"), flush=True)
    if not cond:
        failed.append(what)


def extra_checks(run, tmp, failed):
    """Command line, memory loads, encodings, refusals."""
    fg = os.environ["FUSEGEN_BIN"]
    cache = {"FUSEGEN_QUIET": "1"}
    env = dict(os.environ, **cache)

    def cli(*args):
        p = subprocess.run([fg] + list(args), capture_output=True, text=True, env=env)
        return p.returncode, p.stdout + p.stderr

    # the model's own names, as exporters write them, on the command line and through the API
    nm = Case("names", [N("Relu", ["onnx::Conv_0"], ["/blk/Relu_output_0"]),
                        N("Neg", ["/blk/Relu_output_0"], ["0"])],
              {"onnx::Conv_0": (2, 3)}, {}, ["/blk/Relu_output_0", "0"])
    npath = os.path.join(tmp, "names.onnx")
    onnx.save(nm.model("fp32"), npath)
    xin = rnd(2, 3)
    np.save(os.path.join(tmp, "names_x.npy"), xin)
    rc, out = cli("run", npath, "--device", "emu", "--input", "onnx::Conv_0=" + os.path.join(tmp, "names_x.npy"),
                  "--save-outputs", os.path.join(tmp, "names_out"))
    saved = sorted(os.listdir(os.path.join(tmp, "names_out"))) if rc == 0 else []
    expect(rc == 0 and "input onnx::Conv_0 from" in out and len(saved) == 2,
           "fusegen run --input onnx::Conv_0=... (the model's own input name)", failed)
    if len(saved) == 2:
        vals = [np.load(os.path.join(tmp, "names_out", f)) for f in saved]
        want = [np.maximum(xin, 0), -np.maximum(xin, 0)]
        expect(any(np.array_equal(v, want[0]) for v in vals) and any(np.array_equal(v, want[1]) for v in vals),
               "--save-outputs writes the outputs '/blk/Relu_output_0' and '0'", failed)
    g = run.lib.load(npath)
    try:
        outs, _ = run.lib.run(g, {"onnx::Conv_0": xin})
        expect(sorted(outs) == ["/blk/Relu_output_0", "0"] and np.array_equal(outs["0"], -np.maximum(xin, 0)),
               "bindings and output names are the model's own ('onnx::Conv_0', '0')", failed)
    finally:
        run.lib.free_graph(g)
    rc, out = cli("run", npath, "--device", "emu", "--input", "onnx__Conv=" + os.path.join(tmp, "names_x.npy"))
    expect(rc == 2 and "its inputs: onnx::Conv_0" in out, "--input with a wrong name lists the model's names", failed)

    # Cast of a computed tensor to a type a graph cannot hold: a located refusal
    for to, what in ((TP.UINT8, "UINT8; tensors are float"), (TP.FLOAT8E4M3FN, "FLOAT8E4M3FN; tensors are float")):
        cm = Case("cast_bad", [N("Cast", ["x"], ["y"], name="c", to=to)], {"x": (2, 3)}, {}, ["y"], opset=13)
        cpath = os.path.join(tmp, "cast_bad.onnx")
        onnx.save(cm.model("fp32"), cpath)
        rc, out = cli("plan", cpath)
        expect(rc == 2 and "node 0 'c' (Cast): casts a computed" in out and what in out,
               "Cast of a computed tensor to %s: refused, located" % TP.DataType.Name(to), failed)

    blk = resnet_block()
    path = os.path.join(tmp, "block.onnx")
    onnx.save(blk.model("fp32"), path)
    rc, out = cli("run", path, "--device", "emu", "--check", "--seed", "3", "--dim", "N=2")
    expect(rc == 0 and "within tolerance" in out, "fusegen run block.onnx --device emu --check --dim N=2", failed)
    rc, out = cli("plan", path)
    expect(rc == 0 and "conv" in out, "fusegen plan block.onnx", failed)
    rc, out = cli("plan", path, "--dim", "batch=2")
    expect(rc == 2 and "dimension 'batch' is not a symbolic dimension" in out, "--dim with an unknown name: exit 2",
           failed)
    # import: YAML + .npy weights, and the YAML graph runs like the model
    ypath = os.path.join(tmp, "imported", "block.yaml")
    os.makedirs(os.path.dirname(ypath), exist_ok=True)
    rc, out = cli("import", path, "-o", ypath, "--dim", "N=2")
    expect(rc == 0 and os.path.exists(ypath) and os.path.exists(os.path.join(tmp, "imported", "block.weights",
                                                                              "w1.npy")),
           "fusegen import block.onnx -o block.yaml (+ block.weights/*.npy)", failed)
    w1 = np.load(os.path.join(tmp, "imported", "block.weights", "w1.npy"))
    expect(np.array_equal(w1, blk.inits["w1"]), "imported weight w1.npy equals the initializer", failed)
    rc, out = cli("run", ypath, "--device", "emu", "--check", "--seed", "3")
    if rc == 2 and "'file'" in out:
        print("  %-60s %s" % ("fusegen run block.yaml (imported)", "skipped: this build's YAML graphs take no "
                              "weight files"), flush=True)
    else:
        expect(rc == 0 and "within tolerance" in out, "fusegen run block.yaml (imported) --check", failed)
    if rc == 0:
        g = run.lib.load(ypath, plain=True)
        feeds = blk.feeds("fp32")
        outs, _ = run.lib.run(g, feeds)
        run.lib.free_graph(g)
        ref = ort_run(blk.model("fp32"), feeds)
        _, rel, _ = compare(outs["y"], ref["y"])
        expect(rel is not None and rel <= TOL["fp32"], "imported YAML graph vs onnxruntime (rel %.1e)" % (rel or -1),
               failed)
    # memory load and fg_graph_load's content detection
    mlp = mlp_gelu()
    data = mlp.model("fp32").SerializeToString()
    g = run.lib.load(data=data, dims=mlp.dims)
    feeds = mlp.feeds("fp32")
    outs, _ = run.lib.run(g, feeds)
    run.lib.free_graph(g)
    _, rel, _ = compare(outs["y"], ort_run(mlp.model("fp32"), feeds)["y"])
    expect(rel <= TOL["fp32"], "fg_graph_load_onnx_memory (rel %.1e)" % rel, failed)
    # the erf form of GELU is rewritten to one gelu op, which fuses into the
    # gemm of its matmul and bias (rules/rewrites.yaml)
    mpath = os.path.join(tmp, "mlp.onnx")
    onnx.save(mlp.model("fp32"), mpath)
    rc, out = cli("plan", mpath, "--dim", "batch=2", "--dim", "seq=6", "--explain")
    expect(rc == 0 and "rewrite gelu_erf_div_c" in out and "apply(gelu)" in out
           and out.count("matmul_bias_act") >= 2 and "kernels: 2" in out,
           "fusegen plan mlp.onnx: GELU rewritten, matmul + bias + gelu fused", failed)
    for case, want in zip(exported_activations(), ("rewrite silu", "rewrite gelu_tanh_c", "rewrite hardswish_div")):
        apath = os.path.join(tmp, case.name + ".onnx")
        onnx.save(case.model("fp32"), apath)
        rc, out = cli("plan", apath, "--explain")
        expect(rc == 0 and want in out and "kernels: 1" in out, "fusegen plan %s: %s" % (case.name, want), failed)
    noext = os.path.join(tmp, "model_without_extension")
    with open(noext, "wb") as f:
        f.write(blk.model("fp32").SerializeToString())
    rc, out = cli("plan", noext)
    expect(rc == 0, "fusegen plan on ONNX content without .onnx", failed)
    # encodings: typed fields, fp16 in int32_data, external data
    enc = conv_case("enc", (1, 4, 6, 6), (6, 4, 3, 3), 6, pads=[1, 1, 1, 1])
    feeds = enc.feeds("fp32")
    ref = ort_run(enc.model("fp32"), feeds)
    m = enc.model("fp32")
    for t in m.graph.initializer:
        a = nh.to_array(t)
        t.ClearField("raw_data")
        t.float_data.extend(a.ravel().tolist())
    g = run.lib.load(data=m.SerializeToString())
    outs, _ = run.lib.run(g, feeds)
    run.lib.free_graph(g)
    expect(compare(outs["y"], ref["y"])[1] <= TOL["fp32"], "initializers in float_data", failed)
    m16 = enc.model("fp16")
    for t in m16.graph.initializer:
        a = nh.to_array(t)
        t.ClearField("raw_data")
        t.int32_data.extend(a.ravel().view(np.uint16).astype(np.int32).tolist())
    g = run.lib.load(data=m16.SerializeToString())
    f16 = {k: v.astype(np.float16) for k, v in feeds.items()}
    outs, _ = run.lib.run(g, f16)
    run.lib.free_graph(g)
    ref16 = ort_run(fp32_twin(enc), {k: v.astype(np.float32) for k, v in f16.items()})
    expect(compare(outs["y"], ref16["y"])[1] <= TOL["fp16"], "fp16 initializers in int32_data", failed)
    ext_dir = os.path.join(tmp, "ext")
    os.makedirs(ext_dir, exist_ok=True)
    m = enc.model("fp32")
    onnx.save_model(m, os.path.join(ext_dir, "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="m.data", size_threshold=0)
    g = run.lib.load(os.path.join(ext_dir, "m.onnx"))
    outs, _ = run.lib.run(g, feeds)
    run.lib.free_graph(g)
    expect(compare(outs["y"], ref["y"])[1] <= TOL["fp32"], "external data (m.onnx + m.data)", failed)
    with open(os.path.join(ext_dir, "m.onnx"), "rb") as f:
        data = f.read()
    try:
        run.lib.load(data=data)
        expect(False, "external data from memory without base_dir is refused", failed)
    except fgapi.FusegenError as e:
        expect("base directory" in "".join(e.messages), "external data from memory without base_dir is refused",
               failed)
    g = run.lib.load(data=data, base_dir=ext_dir)
    run.lib.free_graph(g)
    expect(True, "external data from memory with base_dir", failed)
    # refusals: one error listing every unsupported operator, exit 2
    bad = Case("bad", [N("Relu", ["x"], ["r"]), N("Hardmax", ["r"], ["s"], name="sm1"),
                       N("LpNormalization", ["s"], ["t"], name="tr"), N("Hardmax", ["t"], ["y"], name="sm2")],
               {"x": (2, 4)}, {}, ["y"])
    bpath = os.path.join(tmp, "bad.onnx")
    onnx.save(bad.model("fp32"), bpath)
    rc, out = cli("plan", bpath)
    expect(rc == 2 and out.count("error:") == 1 and "Hardmax (node 1 'sm1', node 3 'sm2')" in out
           and "LpNormalization (node 2 'tr')" in out, "unsupported operators: one error, every node named, exit 2", failed)
    # (per-side pads are supported: tests/onnx/test_onnx_windows.py; 3-D windows are not)
    conv3d = conv_case("conv3d", (1, 4, 5, 6, 6), (6, 4, 3, 3, 3), 6)
    apath = os.path.join(tmp, "conv3d.onnx")
    onnx.save(conv3d.model("fp32"), apath)
    rc, out = cli("plan", apath)
    expect(rc == 2 and "only 2-D convolution is supported" in out, "3-D convolution: refused", failed)


def main(argv):
    verbose = "-v" in argv
    names = [a for a in argv if not a.startswith("-")]
    run = Runner(verbose)
    failed = run.failed
    with tempfile.TemporaryDirectory() as tmp:
        print("  %-32s %-5s %10s %10s %8s %3s  %s" % ("model", "dtype", "max_abs", "rel_l2", "tol", "k", "result"))
        for case in cases():
            if names and case.name not in names:
                continue
            for dtype in ("fp32", "fp16") if case.fp16 else ("fp32",):
                run.check_case(case, dtype, tmp)
        if not names or "extra" in names:
            extra_checks(run, tmp, failed)
    run.lib.close()
    npass = len(run.rows) - sum(1 for r in run.rows if "FAIL" in r)
    print("onnx models: %d passed, %d failed (of %d model runs)" % (npass, len(run.rows) - npass, len(run.rows)))
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
