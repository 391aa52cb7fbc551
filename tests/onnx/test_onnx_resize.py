#!/usr/bin/env python3
"""test_onnx_resize.py -- Resize, Upsample and ConvTranspose through fusegen's
ONNX import and the resize / conv_transpose kernels (CPU emulation), against
onnxruntime on the same inputs, fp32, relative L2 <= 1e-4.

Part 1 (hand-built graphs): Resize in every mode (nearest with each
nearest_mode, linear, cubic with cubic_coeff_a and exclude_outside) and
coordinate transformation mode, from scales or sizes, up- and down-sampling
with non-integer scales on odd sizes (1, 7, 13), in opsets 10, 11, 13, 18
and 19 (empty-string and empty-tensor inputs, `axes`,
keep_aspect_ratio_policy); Upsample (opset 7 attribute, opset 9 input);
ConvTranspose with strides 2 and 3, pads, output_padding, dilations, group,
1x1 kernels, auto_pad SAME_UPPER / SAME_LOWER / VALID and output_shape.
tf_crop_and_resize and antialias must be refused with their reason.

Part 2 (PyTorch models, random weights, 64x64 inputs, exported with
torch.onnx.export dynamo=False opset 17, and dynamo=True for the UNets):
torchvision's lraspp_mobilenet_v3_large and a small UNet of our own with a
ConvTranspose up path and variants with nn.Upsample bilinear
(align_corners True and False) and nearest.  (fcn_resnet50 and
deeplabv3_mobilenet_v3_large are surveyed by model_zoo.py, which takes
minutes for them in emulation.)

Environment: FUSEGEN_LIB (libfusegen.so).  Exit 77 (skipped) without onnx,
onnxruntime, numpy (part 2: torch, torchvision).  Arguments: substrings of
case names to run (default all); -v prints every row.
"""
import os
import sys
import tempfile
import warnings

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP
    from onnx import helper as h
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fgapi  # noqa: E402

TOL = 1e-4
RNG = np.random.default_rng(20261203)


def f32(a):
    return h.make_tensor("c%d" % RNG.integers(1 << 30), TP.FLOAT, [len(a)], list(a))


def model(node, xshape, opset, consts=(), weights=()):
    """A one-node model: input x, output y; consts / weights: initializers."""
    inits = [h.make_tensor(n, dt, list(np.shape(v)), np.asarray(v).ravel().tolist()) for n, dt, v in consts]
    inits += [h.make_tensor(n, TP.FLOAT, list(v.shape), v.ravel().tolist()) for n, v in weights]
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", TP.FLOAT, list(xshape))],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)], initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 19 else 9
    return m


def resize(name, xshape, opset=19, scales=None, sizes=None, refuse=None, **attrs):
    """A Resize case: scales / sizes constants (opset 10: X, scales)."""
    consts, ins = [], ["x"]
    if opset == 10:
        consts.append(("scales", TP.FLOAT, scales))
        ins.append("scales")
    else:
        if opset == 11:   # roi is required in opset 11: an empty tensor
            consts.append(("roi", TP.FLOAT, np.zeros(0, np.float32)))
            ins.append("roi")
        else:
            ins.append("")
        if scales is not None:
            consts.append(("scales", TP.FLOAT, scales))
            ins.append("scales")
        elif opset == 11:
            consts.append(("scales", TP.FLOAT, np.zeros(0, np.float32)))   # empty: sizes follow
            ins.append("scales")
        else:
            ins.append("")
        if sizes is not None:
            consts.append(("sizes", TP.INT64, sizes))
            ins.append("sizes")
    return (name, model(h.make_node("Resize", ins, ["y"], **attrs), xshape, opset, consts), xshape, refuse)


def upsample(name, xshape, opset, scales, mode):
    if opset == 7:
        node = h.make_node("Upsample", ["x"], ["y"], mode=mode, scales=scales)
        return (name, model(node, xshape, 7), xshape, None)
    node = h.make_node("Upsample", ["x", "scales"], ["y"], mode=mode)
    return (name, model(node, xshape, 9, [("scales", TP.FLOAT, scales)]), xshape, None)


def convt(name, xshape, wshape, bias=True, **attrs):
    w = RNG.standard_normal(wshape).astype(np.float32)
    weights = [("w", w)]
    ins = ["x", "w"]
    if bias:
        weights.append(("b", RNG.standard_normal(wshape[1] * attrs.get("group", 1)).astype(np.float32)))
        ins.append("b")
    return (name, model(h.make_node("ConvTranspose", ins, ["y"], **attrs), xshape, 19, weights=weights), xshape, None)


def hand_cases():
    out = []
    X, O = [2, 3, 7, 13], [1, 2, 1, 7]
    coords = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]
    for ci, c in enumerate(coords):
        for nm in ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]:
            if c == "half_pixel_symmetric" and nm in ("floor", "ceil"):
                continue   # its coordinates land on integers here: floor / ceil of a float tie
            out.append(resize("nearest_%s_%s" % (c, nm), X, scales=[1, 1, 1.7, 0.65], mode="nearest",
                              coordinate_transformation_mode=c, nearest_mode=nm))
        out.append(resize("linear_%s_up" % c, X, scales=[1, 1, 2.0, 1.5], mode="linear",
                          coordinate_transformation_mode=c))
        out.append(resize("linear_%s_sizes" % c, X, sizes=[2, 3, 5, 20], mode="linear",
                          coordinate_transformation_mode=c))
        out.append(resize("cubic_%s" % c, X, scales=[1, 1, 1.4, 0.7], mode="cubic",
                          coordinate_transformation_mode=c))
        out.append(resize("linear_%s_one" % c, O, sizes=[1, 2, 7, 1], mode="linear", coordinate_transformation_mode=c))
    out.append(resize("cubic_exclude_a05", X, sizes=[2, 3, 13, 9], mode="cubic", cubic_coeff_a=-0.5,
                      exclude_outside=1))
    out.append(resize("nearest_int2_gather", X, scales=[1, 1, 2.0, 2.0], mode="nearest",
                      coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    out.append(resize("tf_half_pixel_for_nn_11", X, opset=11, sizes=[2, 3, 13, 17], mode="nearest",
                      coordinate_transformation_mode="tf_half_pixel_for_nn"))
    out.append(resize("opset10_nearest", X, opset=10, scales=[1, 1, 2.0, 3.0], mode="nearest"))
    out.append(resize("opset10_linear", X, opset=10, scales=[1, 1, 2.0, 0.5], mode="linear"))
    out.append(resize("opset11_sizes_empty_scales", X, opset=11, sizes=[2, 3, 9, 9], mode="linear",
                      coordinate_transformation_mode="align_corners"))
    out.append(resize("opset13_scales", X, opset=13, scales=[1, 1, 0.5, 0.5], mode="cubic"))
    out.append(resize("opset18_axes_sizes", X, opset=18, sizes=[11, 5], axes=[2, 3], mode="linear"))
    out.append(resize("opset18_axes_scales", X, opset=18, scales=[2.5, 1.0], axes=[-2, -1], mode="nearest"))
    out.append(resize("opset18_not_larger", X, opset=18, sizes=[2, 3, 20, 20], mode="linear",
                      keep_aspect_ratio_policy="not_larger"))
    out.append(resize("opset18_not_smaller", X, opset=18, sizes=[9, 9], axes=[2, 3], mode="nearest",
                      keep_aspect_ratio_policy="not_smaller"))
    out.append(resize("refuse_tf_crop", X, scales=[1, 1, 2, 2], mode="linear",
                      coordinate_transformation_mode="tf_crop_and_resize", refuse="tf_crop_and_resize"))
    out.append(resize("refuse_antialias", X, scales=[1, 1, 0.5, 0.5], mode="linear", antialias=1,
                      refuse="antialias"))
    out.append(resize("refuse_channel_scale", X, scales=[1, 2, 2, 2], mode="nearest", refuse="only H and W"))
    out.append(upsample("upsample7_nearest", X, 7, [1.0, 1.0, 2.0, 3.0], "nearest"))
    out.append(upsample("upsample7_linear", X, 7, [1.0, 1.0, 2.0, 2.0], "linear"))
    out.append(upsample("upsample9_nearest", X, 9, [1.0, 1.0, 3.0, 2.0], "nearest"))
    out.append(convt("convt_s2_p1", X, [3, 4, 3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    out.append(convt("convt_s3_asym_outpad", X, [3, 2, 3, 2], strides=[3, 2], pads=[0, 1, 2, 0],
                     output_padding=[2, 1]))
    out.append(convt("convt_dilation", X, [3, 4, 3, 3], bias=False, strides=[2, 1], dilations=[2, 3]))
    out.append(convt("convt_group", [1, 4, 7, 13], [4, 3, 2, 3], strides=[2, 3], group=2))
    out.append(convt("convt_depthwise", [1, 4, 7, 13], [4, 1, 3, 3], strides=[2, 2], group=4, pads=[1, 1, 1, 1]))
    out.append(convt("convt_1x1", X, [3, 5, 1, 1], strides=[2, 2]))
    out.append(convt("convt_1x1_s1", O, [2, 3, 1, 1]))
    out.append(convt("convt_same_upper", X, [3, 4, 3, 3], strides=[2, 2], auto_pad="SAME_UPPER"))
    out.append(convt("convt_same_lower", X, [3, 4, 4, 3], strides=[2, 3], auto_pad="SAME_LOWER"))
    out.append(convt("convt_valid", X, [3, 4, 3, 3], strides=[2, 2], auto_pad="VALID"))
    out.append(convt("convt_output_shape", X, [3, 4, 3, 3], strides=[3, 2], output_shape=[22, 28]))
    out.append(convt("convt_output_shape_pads", X, [3, 4, 3, 3], strides=[2, 2], output_shape=[12, 24]))
    out.append(convt("convt_kernel_shape", X, [3, 4, 2, 2], strides=[2, 2], kernel_shape=[2, 2]))
    return out


# ---- PyTorch models ------------------------------------------------------------------

def _unet(up):
    import torch
    nn = torch.nn

    def block(ci, co):
        return nn.Sequential(nn.Conv2d(ci, co, 3, padding=1), nn.BatchNorm2d(co), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2, self.mid = block(3, 8), block(8, 16), block(16, 16)
            if up == "convt":
                self.up2 = nn.ConvTranspose2d(16, 16, 2, stride=2)
                self.up1 = nn.ConvTranspose2d(16, 16, 3, stride=2, padding=1, output_padding=1)
            else:
                mode, ac = up.split("_") if "_" in up else (up, None)
                kw = {} if ac is None else {"align_corners": ac == "ac"}
                self.up2 = nn.Upsample(scale_factor=2, mode=mode, **kw)
                self.up1 = nn.Upsample(scale_factor=2, mode=mode, **kw)
            self.d2, self.d1, self.head = block(32, 16), block(24, 8), nn.Conv2d(8, 2, 1)

        def forward(self, x):
            a = self.e1(x)
            b = self.e2(nn.functional.max_pool2d(a, 2))
            m = self.mid(nn.functional.max_pool2d(b, 2))
            u = self.d2(torch.cat([self.up2(m), b], 1))
            return self.head(self.d1(torch.cat([self.up1(u), a], 1)))
    return UNet()


def _lraspp():
    import torch
    import torchvision.models.segmentation as seg

    class Out(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = seg.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3)

        def forward(self, x):
            return self.m(x)["out"]
    return Out()


# (name, builder, exporters)
TORCH_MODELS = [
    ("unet_convt", lambda: _unet("convt"), ("torchscript", "dynamo")),
    ("unet_bilinear_ac", lambda: _unet("bilinear_ac"), ("torchscript", "dynamo")),
    ("unet_bilinear", lambda: _unet("bilinear_hp"), ("torchscript", "dynamo")),
    ("unet_nearest", lambda: _unet("nearest"), ("torchscript", "dynamo")),
    ("lraspp_mobilenet_v3_large", _lraspp, ("torchscript",)),
]


def export(build, exporter, path):
    import torch
    torch.manual_seed(0)
    m = build().eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        if exporter == "torchscript":
            torch.onnx.export(m, (x,), path, opset_version=17, dynamo=False, input_names=["x"], output_names=["y"])
        else:
            torch.onnx.export(m, (x,), path, dynamo=True, external_data=False, verbose=False)
    return x.numpy()


# ---- running ---------------------------------------------------------------------

class Runner:
    def __init__(self, verbose):
        self.lib = fgapi.Lib(os.environ["FUSEGEN_LIB"])
        self.verbose = verbose
        self.failed = []
        self.nrows = 0

    def row(self, name, rel, result, bad):
        self.nrows += 1
        if bad:
            self.failed.append(name)
        if self.verbose or bad:
            print("  %-48s %10s  %s" % (name, "-" if rel is None else "%.3e" % rel, result), flush=True)

    def check(self, name, mbytes, x, refuse=None):
        try:
            g = self.lib.load(data=mbytes)
            try:
                outs, _, _ = fgapi.run_ordered(self.lib, g, [x])
            finally:
                self.lib.free_graph(g)
        except fgapi.FusegenError as e:
            msg = "; ".join(e.messages)
            if refuse and refuse in msg:
                self.row(name, None, "refused: " + msg[:100], False)
            else:
                self.row(name, None, "FAIL: " + msg[:300], True)
            return None
        if refuse:
            self.row(name, None, "FAIL: ran, want a refusal naming '%s'" % refuse, True)
            return None
        sess = ort.InferenceSession(mbytes, providers=["CPUExecutionProvider"])
        ref = sess.run(None, {sess.get_inputs()[0].name: x})[0].astype(np.float64)
        got = outs[0].astype(np.float64)
        if got.shape != ref.shape:
            self.row(name, None, "FAIL: shape %s, onnxruntime %s" % (got.shape, ref.shape), True)
            return None
        rel = float(np.linalg.norm((got - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-30))
        bad = not rel <= TOL
        self.row(name, rel, "FAIL: rel_l2" if bad else "ok", bad)
        return rel


def main(argv):
    verbose = "-v" in argv
    names = [a for a in argv[1:] if not a.startswith("-")]
    run = Runner(verbose)
    print("  %-48s %10s  %s" % ("case", "rel_l2", "result"))
    for name, m, xshape, refuse in hand_cases():
        if names and not any(n in name for n in names):
            continue
        x = RNG.standard_normal(xshape).astype(np.float32)
        run.check(name, m.SerializeToString(), x, refuse)
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        have_torch = True
    except ImportError:
        print("part 2 skipped: no torch / torchvision")
        have_torch = False
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        for name, build, exporters in TORCH_MODELS if have_torch else []:
            for ex in exporters:
                label = "%s/%s" % (name, ex)
                if names and not any(n in label for n in names):
                    continue
                path = os.path.join(tmp, "%s.%s.onnx" % (name, ex))
                try:
                    x = export(build, ex, path)
                except Exception as e:  # noqa: BLE001 -- an exporter failure is reported, not ours
                    print("  %-48s %10s  export fails: %s" % (label, "-", str(e).split("\n")[0][:100]))
                    continue
                rel = run.check(label, open(path, "rb").read(), x)
                if rel is not None and not verbose:
                    print("  %-48s %10.3e  ok" % (label, rel), flush=True)
    run.lib.close()
    print("\n%d rows, %d failed" % (run.nrows, len(run.failed)))
    if run.failed:
        print("FAILED: " + ", ".join(run.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
