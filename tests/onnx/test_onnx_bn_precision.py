#!/usr/bin/env python3
"""test_onnx_bn_precision.py -- the precision of batch norms folded into
convolutions (codegen/fold.c, bn_into_conv), with calibrated statistics.

At random init a batch norm's statistics are (0, 1) and a fold changes
little; in a trained (or calibrated) network the running mean is most of
each conv's sum and the variance can be near zero, so the folded shift
b' = (b - mean) * s + beta (s = gamma / sqrt(var + eps)) cancels most of
the conv's sum and the scaled weights W * s reach 1/sqrt(eps).  Each case
builds MobileNetV3-style blocks (Conv -> BatchNormalization -> HardSwish /
Relu / HardSigmoid, depthwise convs, a conv without bias) whose batch norms
hold the float64 statistics of their conv's output on a calibration batch,
with adversarial channels: inputs with a large offset (the mean many times
the deviation), a dead channel (zero weights: var 0, s = gamma/sqrt(eps)),
eps from 1e-5 to 1e-3.

The arbiter is a float64 copy of the model run by onnx.reference
(f64ref.py).  fusegen (CPU emulation) must be within 1e-4 of onnxruntime,
every batch norm folded (one kernel per conv), and its distance to float64
at most 2x the larger of onnxruntime's (its own Conv + BatchNormalization
fusion) and onnx.reference fp32's (conv and batch norm apart), plus 1e-7;
onnxruntime without graph optimizations is printed too.  A fold that
gets eps, the shift or the scale wrong fails both bounds by orders of
magnitude (eps taken as 1e-5 where the node says 1e-3: 7.7e-4); one that
rounds s or the shift through float32 stays within them, as fp32 rounding
of the fold is no larger than that of the conv's own sum.

Environment: FUSEGEN_LIB (libfusegen.so).  Exit 77 (skipped) without onnx,
onnxruntime or numpy.  Arguments: case names (default all); -v prints the
distances.
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
    from onnx.reference import ReferenceEvaluator
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import f64ref  # noqa: E402
import fgapi  # noqa: E402


def conv_f64(x, w, b, group, pad):
    """Float64 NCHW convolution, stride 1, square kernel: the calibration's
    own arithmetic (numpy, no runtime under test)."""
    n, c, hh, ww = x.shape
    k, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = hh + 2 * pad - kh + 1, ww + 2 * pad - kw + 1
    y = np.zeros((n, k, oh, ow))
    kg = k // group
    for gi in range(group):
        xs = xp[:, gi * cg:(gi + 1) * cg]
        ws = w[gi * kg:(gi + 1) * kg]
        for i in range(kh):
            for j in range(kw):
                y[:, gi * kg:(gi + 1) * kg] += np.einsum("nchw,kc->nkhw", xs[:, :, i:i + oh, j:j + ow], ws[:, :, i, j])
    return y + (b.reshape(1, -1, 1, 1) if b is not None else 0)


ACTS = {
    "HardSwish": lambda y: y * np.clip(y / 6 + 0.5, 0, 1),
    "Relu": lambda y: np.maximum(y, 0),
    "HardSigmoid": lambda y: np.clip(y / 6 + 0.5, 0, 1),
}


class Builder:
    """Conv-BN-activation blocks calibrated as they are added: x_cal is the
    calibration batch's float64 activation at the current tensor."""

    def __init__(self, rng, c, hw, offset):
        self.rng, self.c, self.nodes, self.inits = rng, c, [], []
        self.x_cal = rng.standard_normal((4, c, hw, hw)) + offset
        self.cur, self.k = "x", 0

    def init(self, name, a):
        self.inits.append(nh.from_array(np.asarray(a, dtype=np.float32), name))
        return name

    def block(self, co, ksize=3, group=1, act="HardSwish", bias=True, eps=1e-5, dead=(), gamma_scale=1.0):
        """Adds Conv(ksize, group) -> BatchNormalization(eps) -> act; the
        output channels in dead get zero weights (their variance is 0)."""
        k, ci, rng = self.k, self.c, self.rng
        self.k += 1
        w = rng.standard_normal((co, ci // group, ksize, ksize)) / np.sqrt(ci // group * ksize * ksize)
        w[list(dead)] = 0.0
        w = w.astype(np.float32).astype(np.float64)
        b = (rng.standard_normal(co) * 0.1).astype(np.float32).astype(np.float64) if bias else None
        y = conv_f64(self.x_cal, w, b, group, ksize // 2)
        mean, var = y.mean(axis=(0, 2, 3)), y.var(axis=(0, 2, 3))
        gamma = (1 + 0.2 * rng.standard_normal(co)) * gamma_scale
        beta = 0.1 * rng.standard_normal(co)
        mean32, var32 = mean.astype(np.float32), var.astype(np.float32)
        gamma32, beta32 = gamma.astype(np.float32), beta.astype(np.float32)
        ins = [self.cur, self.init("w%d" % k, w)] + ([self.init("b%d" % k, b)] if bias else [])
        self.nodes.append(h.make_node("Conv", ins, ["c%d" % k], kernel_shape=[ksize, ksize],
                                      pads=[ksize // 2] * 4, group=group))
        self.nodes.append(h.make_node("BatchNormalization",
                                      ["c%d" % k, self.init("g%d" % k, gamma32), self.init("be%d" % k, beta32),
                                       self.init("m%d" % k, mean32), self.init("v%d" % k, var32)],
                                      ["n%d" % k], epsilon=eps))
        extra = {"alpha": 1.0 / 6} if act == "HardSigmoid" else {}   # PyTorch's hardsigmoid, as exported
        self.nodes.append(h.make_node(act, ["n%d" % k], ["a%d" % k], **extra))
        z = (y - mean32.reshape(1, -1, 1, 1)) * (gamma32 / np.sqrt(var32.astype(np.float64) + np.float32(eps))
                                                ).reshape(1, -1, 1, 1) + beta32.reshape(1, -1, 1, 1)
        self.x_cal = ACTS[act](z)
        self.cur, self.c = "a%d" % k, co

    def model(self, hw):
        g = h.make_graph(self.nodes, "bn_precision",
                         [h.make_tensor_value_info("x", TP.FLOAT, [1, self.c_in, hw, hw])],
                         [h.make_tensor_value_info(self.cur, TP.FLOAT, [1, self.c, hw, hw])], self.inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        return m


def build(name, seed, c, hw, offset, blocks):
    rng = np.random.default_rng(seed)
    b = Builder(rng, c, hw, offset)
    b.c_in = c
    for kw in blocks:
        b.block(**kw)
    x = (rng.standard_normal((1, c, hw, hw)) + offset).astype(np.float32)
    return b.model(hw), x, sum(1 for n in b.nodes if n.op_type == "Conv")


def cases():
    """(name, model, input, convs)."""
    mbv3 = [dict(co=16, ksize=3, act="HardSwish"),
            dict(co=16, ksize=3, group=16, act="Relu", dead=(3,)),
            dict(co=24, ksize=1, act="HardSwish", bias=False),
            dict(co=24, ksize=3, group=24, act="HardSwish", eps=1e-3),
            dict(co=16, ksize=1, act="HardSigmoid")]
    yield ("mbv3_blocks",) + build("mbv3_blocks", 11, 8, 12, 0.0, mbv3)
    # inputs far from zero: each conv's sum is mostly the mean the shift removes
    yield ("offset_input",) + build("offset_input", 12, 8, 12, 20.0, mbv3)
    deep = [dict(co=16, ksize=3, act="Relu")] + [dict(co=16, ksize=3, act="Relu", eps=1e-5) for _ in range(5)]
    yield ("deep_relu",) + build("deep_relu", 13, 8, 10, 5.0, deep)
    # near-dead channels and large gammas: s reaches 1/sqrt(eps) times gamma
    dead = [dict(co=16, ksize=3, act="HardSwish", dead=(0, 5, 9), gamma_scale=4.0),
            dict(co=16, ksize=3, group=16, act="HardSwish", dead=(2,), eps=1e-5, gamma_scale=4.0),
            dict(co=8, ksize=1, act="Relu", bias=False)]
    yield ("dead_channels",) + build("dead_channels", 14, 8, 10, 3.0, dead)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    verbose = "-v" in sys.argv
    lib = fgapi.Lib(os.environ.get("FUSEGEN_LIB", os.path.join("build", "libfusegen.so")))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    bad = 0
    for name, m, x, nconv in cases():
        if args and name not in args:
            continue
        onnx.checker.check_model(m)
        data = m.SerializeToString()
        feeds = {"x": x}
        r_ort = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        r_ort_apart = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        r_ref = ReferenceEvaluator(m).run(None, feeds)[0]
        r64 = f64ref.run(m, feeds)[0]
        g = lib.load(data=data)
        outs, nk, _ = fgapi.run_ordered(lib, g, [x])
        lib.free_graph(g)
        o = outs[0]
        d_fg, d_ort, d_apart, d_ref = (f64ref.rel_l2(a, r64) for a in (o, r_ort, r_ort_apart, r_ref))
        vs_ort = f64ref.rel_l2(o, r_ort)
        bound = 2 * max(d_ort, d_ref) + 1e-7
        problems = []
        if not vs_ort <= 1e-4:
            problems.append("rel L2 %.2e from onnxruntime > 1e-4" % vs_ort)
        if nk != nconv:
            problems.append("%d kernels for %d convs: a batch norm is not folded" % (nk, nconv))
        if not d_fg <= bound:
            problems.append("%.2e from float64 > %.2e (2x onnxruntime's %.2e / onnx.reference's %.2e)" % (
                d_fg, bound, d_ort, d_ref))
        bad += bool(problems)
        print("%-4s %-14s fusegen-onnxruntime %.2e; vs float64: fusegen %.2e, onnxruntime %.2e "
              "(no graph optimizations %.2e), onnx.reference fp32 %.2e%s" % (
                  "FAIL" if problems else "ok", name, vs_ort, d_fg, d_ort, d_apart, d_ref,
                  "  " + "; ".join(problems) if problems else ""), flush=True)
    print("bn precision: %d problem(s)" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
