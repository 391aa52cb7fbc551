#!/usr/bin/env python3
"""test_onnx_conv1d.py -- 1-D window operators (Conv, ConvTranspose,
MaxPool, AveragePool, GlobalAveragePool on [N, C, L]) and Mean, against
onnxruntime.

The 1-D operators are imported as their 2-D forms with H = 1
(codegen/onnx_convert_1d.c).  Hand-built models in fp32 and fp16 (the fp16
one against the fp32 model on the same fp16-rounded values; tolerances as
test_onnx_models.py): Conv1d with pads, strides, dilations, groups, bias and
auto_pad SAME_UPPER; two Conv1d + Relu in a row, where the second conv reads
the first one's result through the views as an input map (three kernels:
conv, the view of its result with the Relu, conv); ConvTranspose1d with
strides, pads and output_padding; MaxPool1d and AveragePool1d
(count_include_pad, ceil_mode); GlobalAveragePool on rank 3 -- each with
its kernel count: the view of the input is a copy kernel unless a
convolution reads it as an input map (conv2d does, conv2d_tc for fp16 does
not), the view of the result is a copy kernel; Mean of one,
two and three inputs (broadcasting) with a Relu after it (one kernel).

With --torch (exit 77 when torch is missing): a Whisper-style convolution
stem (Conv1d, GELU, Conv1d of stride 2, GELU, a transpose to [N, L, C] and
a position embedding added), exported by torch.onnx (TorchScript at opset
17, and dynamo=True), matching onnxruntime to rel L2 <= 1e-4.

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
import test_onnx_models as tm  # noqa: E402
import test_onnx_reduce as tr  # noqa: E402  (RCase, run_case)

N = h.make_node
RNG = np.random.default_rng(20261203)


def f32(*shape):
    return (RNG.standard_normal(shape) * 0.5).astype(np.float32)


def cases():
    out = []
    for name, cin, cout, k, attrs, groups, bias, L in (
            ("conv1d_plain", 4, 6, 3, {}, 1, True, 17),
            ("conv1d_pads_strides", 4, 6, 5, dict(pads=[2, 1], strides=[2]), 1, True, 23),
            ("conv1d_dilations", 3, 5, 3, dict(pads=[2, 2], dilations=[2]), 1, False, 19),
            ("conv1d_groups", 8, 8, 3, dict(pads=[1, 1]), 4, True, 16),
            ("conv1d_depthwise", 6, 6, 3, dict(pads=[1, 1]), 6, True, 31),
            ("conv1d_same_upper", 4, 4, 4, dict(auto_pad="SAME_UPPER", strides=[2]), 1, True, 15)):
        inits = {"w": f32(cout, cin // groups, k)}
        ins = ["x", "w"]
        if bias:
            inits["b"] = f32(cout)
            ins.append("b")
        # fp32: conv2d reads the input view as its input map; fp16 (conv2d_tc for dense convs) copies it
        out.append(tr.RCase(name, [N("Conv", ins, ["y"], group=groups, **attrs)], {"x": (2, cin, L)}, inits, ["y"],
                            opset=17, kernels=(2, 2 if groups > 1 else 3)))
    # two convs in a row: the second reads the first's result through the views (an input map)
    inits = {"w1": f32(8, 4, 3), "b1": f32(8), "w2": f32(8, 8, 3), "b2": f32(8)}
    out.append(tr.RCase("conv1d_relu_conv1d", [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1]),
                                               N("Relu", ["c1"], ["r1"]),
                                               N("Conv", ["r1", "w2", "b2"], ["y"], pads=[1, 1], strides=[2])],
                        {"x": (2, 4, 20)}, inits, ["y"], opset=17, kernels=(4, 6)))
    inits = {"w": f32(4, 3, 3), "b": f32(3)}
    out.append(tr.RCase("convtranspose1d", [N("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2], pads=[1, 0],
                                              output_padding=[1])],
                        {"x": (2, 4, 9)}, inits, ["y"], opset=17, kernels=3))
    out.append(tr.RCase("maxpool1d", [N("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1],
                                        ceil_mode=1)],
                        {"x": (2, 5, 16)}, {}, ["y"], opset=17, kernels=3))
    out.append(tr.RCase("avgpool1d_count_pad", [N("AveragePool", ["x"], ["y"], kernel_shape=[4], strides=[3],
                                                  pads=[2, 1], count_include_pad=1)],
                        {"x": (2, 5, 16)}, {}, ["y"], opset=17, kernels=3))
    out.append(tr.RCase("global_avgpool1d", [N("GlobalAveragePool", ["x"], ["y"])], {"x": (2, 5, 16)}, {}, ["y"],
                        opset=17, kernels=3))
    # Mean: one input (an alias), two, three with broadcasting; a Relu after it in the same kernel
    out.append(tr.RCase("mean_two_relu", [N("Mean", ["a", "b"], ["m"]), N("Relu", ["m"], ["y"])],
                        {"a": (3, 7), "b": (3, 7)}, {}, ["y"], opset=13, kernels=1))
    out.append(tr.RCase("mean_three_bcast", [N("Mean", ["a", "b", "c"], ["y"])],
                        {"a": (2, 3, 7), "b": (3, 1)}, {"c": f32(7)}, ["y"], opset=13, kernels=1))
    out.append(tr.RCase("mean_one", [N("Mean", ["a"], ["m"]), N("Relu", ["m"], ["y"])], {"a": (4, 5)}, {}, ["y"],
                        opset=13, kernels=1))
    return out


def torch_part(run, tmp, failed):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("skipped: torch is not installed")
        return 77
    import fgapi
    import onnxruntime as ort
    torch.manual_seed(0)

    class Stem(torch.nn.Module):
        """Whisper's encoder stem: two Conv1d with GELU, then [N, L, C] plus positions."""

        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv1d(8, 16, 3, padding=1)
            self.conv2 = torch.nn.Conv1d(16, 16, 3, stride=2, padding=1)
            self.pos = torch.nn.Parameter(torch.randn(16, 16))

        def forward(self, x):
            x = F.gelu(self.conv1(x))
            x = F.gelu(self.conv2(x))
            return x.permute(0, 2, 1) + self.pos

    m = Stem().eval()
    x = torch.randn(1, 8, 32)
    for exporter in ("torchscript", "dynamo"):
        path = os.path.join(tmp, "stem_%s.onnx" % exporter)
        with torch.no_grad():
            if exporter == "torchscript":
                torch.onnx.export(m, (x,), path, opset_version=17, dynamo=False, input_names=["x"],
                                  output_names=["y"])
            else:
                torch.onnx.export(m, (x,), path, dynamo=True, external_data=False, verbose=False)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        ref = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
        g = run.lib.load(path)
        try:
            outs, nk, _ = fgapi.run_ordered(run.lib, g, [x.numpy()])
        except fgapi.FusegenError as e:
            run.result("whisper_stem_" + exporter, "fp32", None, None, 1e-4, "; ".join(e.messages) or str(e))
            continue
        finally:
            run.lib.free_graph(g)
        mx, rel, err = tm.compare(outs[0], ref)
        run.result("whisper_stem_" + exporter, "fp32", mx, rel, 1e-4, err, kernels=nk)
    return 0


def main(argv):
    run = tm.Runner("-v" in argv)
    failed = run.failed
    rc = 0
    with tempfile.TemporaryDirectory() as tmp:
        if "--torch" in argv:
            rc = torch_part(run, tmp, failed)
        else:
            for case in cases():
                want = case.kernels
                for j, dtype in enumerate(("fp32", "fp16")):
                    case.kernels = want[j] if isinstance(want, tuple) else want
                    tr.run_case(run, case, dtype, tmp, failed)
    print("test_onnx_conv1d: %d rows, %d failed" % (len(run.rows), len(failed)))
    for f in failed:
        print("  FAILED: %s" % f)
    return 1 if failed else rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
