#!/usr/bin/env python3
"""test_onnx_swin.py -- the constant subgraphs Swin exports compute (the
shifted-window attention mask, window padding from shapes), folded at import
time, against onnxruntime.

Hand-built models whose constant parts use the operators the folder
evaluates for them (codegen/onnx_fold.c): ScatterND (reduction none and add,
negative indices) on a ConstantOfShape, Mod (int64 with fmod 0 and negative
operands, float with fmod 1), Equal / Less / Greater / LessOrEqual /
GreaterOrEqual, Not / And / Or / Xor and Where on bool constants, and the
Shape -> Mod -> Pad arithmetic of a window partition; each result is added to
a computed input, so the whole model is one kernel (the folded constant is a
weight).

With --torch (exit 77 without torch and torchvision): torchvision's
SwinTransformerBlock with a shifted window on a feature map that needs
padding (6 x 6, window 4, shift 2), exported by torch.onnx (TorchScript at
opset 17 and dynamo=True), matching onnxruntime to rel L2 <= 1e-4.

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
I64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731


def swin_mask_case():
    """Swin's mask: regions of an 8 x 8 map numbered by ScatterND, windows of
    4 x 4, pairs of positions in different regions get -100."""
    H = W = 8
    ws, sh = 4, 2
    inits = {"hw": I64(H, W), "zero": np.zeros(1, np.float32), "m100": np.full(1, -100.0, np.float32)}
    nodes = [N("Expand", ["zero", "hw"], ["m0"])]   # new_zeros (ConstantOfShape in fp32 exports)
    cnt, prev = 0, "m0"
    for hs in ((0, H - ws), (H - ws, H - sh), (H - sh, H)):
        for wsl in ((0, W - ws), (W - ws, W - sh), (W - sh, W)):
            idx = np.array([[[i, j] for j in range(*wsl)] for i in range(*hs)], dtype=np.int64)
            inits["i%d" % cnt] = idx
            inits["u%d" % cnt] = np.full(idx.shape[:2], float(cnt), np.float32)
            nodes.append(N("ScatterND", [prev, "i%d" % cnt, "u%d" % cnt], ["m%d" % (cnt + 1)]))
            prev = "m%d" % (cnt + 1)
            cnt += 1
    inits.update({"s4": I64(H // ws, ws, W // ws, ws), "s2": I64((H // ws) * (W // ws), ws * ws),
                  "a1": I64(1), "a2": I64(2)})
    nodes += [N("Reshape", [prev, "s4"], ["r4"]), N("Transpose", ["r4"], ["t4"], perm=[0, 2, 1, 3]),
              N("Reshape", ["t4", "s2"], ["r2"]), N("Unsqueeze", ["r2", "a1"], ["ua"]),
              N("Unsqueeze", ["r2", "a2"], ["ub"]), N("Sub", ["ua", "ub"], ["d"]),
              N("Equal", ["d", "zero"], ["eq"]), N("Not", ["eq"], ["ne"]),
              N("Where", ["ne", "m100", "zero"], ["mask"]), N("Add", ["x", "mask"], ["y"])]
    return tr.RCase("swin_mask", nodes, {"x": (4, 16, 16)}, inits, ["y"], opset=17, kernels=1)


def logic_case():
    """Comparisons, logic and Where on constants (every operator once)."""
    inits = {"a": np.array([[1, -2, 3], [0, 5, -6]], np.float32), "b": np.array([1, 0, 4], np.float32),
             "one": np.ones(1, np.float32), "zero": np.zeros(1, np.float32)}
    nodes = [N("Equal", ["a", "b"], ["e"]), N("Less", ["a", "b"], ["l"]), N("Greater", ["a", "b"], ["g"]),
             N("LessOrEqual", ["a", "b"], ["le"]), N("GreaterOrEqual", ["a", "b"], ["ge"]),
             N("Or", ["e", "l"], ["o"]), N("And", ["o", "le"], ["n1"]), N("Xor", ["n1", "g"], ["x1"]),
             N("Not", ["ge"], ["x2"]), N("Where", ["x1", "a", "b"], ["w1"]), N("Where", ["x2", "one", "zero"], ["w2"]),
             N("Add", ["w1", "w2"], ["c"]), N("Mul", ["x", "c"], ["y"])]
    return tr.RCase("compare_logic_where", nodes, {"x": (2, 3)}, inits, ["y"], opset=17, kernels=1)


def mod_scatter_case():
    """Mod in int64 (fmod 0: the divisor's sign) and float (fmod 1), ScatterND
    with reduction add and a negative index."""
    inits = {"ia": I64(7, -7, 7, -7, 0, 9), "ib": I64(3, 3, -3, -3, 5, 4),
             "fa": np.array([5.5, -5.5, 5.5, -5.5, 1.0, 2.0], np.float32),
             "fb": np.array([2.0, 2.0, -2.0, -2.0, 3.0, 0.75], np.float32),
             "idx": I64(-1, 0, -1).reshape(3, 1), "upd": np.array([10.0, 20.0, 30.0], np.float32)}
    nodes = [N("Mod", ["ia", "ib"], ["im"]), N("CastLike", ["im", "fa"], ["imf"]),
             N("Mod", ["fa", "fb"], ["fm"], fmod=1), N("Add", ["imf", "fm"], ["s"]),
             N("ScatterND", ["s", "idx", "upd"], ["sc"], reduction="add"), N("Add", ["x", "sc"], ["y"])]
    return tr.RCase("mod_scatternd_add", nodes, {"x": (2, 6)}, inits, ["y"], opset=18, kernels=1)


def window_pad_case():
    """The window partition's padding from shapes: pad = (ws - W % ws) % ws,
    both spatial axes of an [N, H, W, C] map (Swin's F.pad), then Relu."""
    inits = {"ws": I64(4), "i1": I64(1), "i2": I64(2), "z": I64(0), "zz": I64(0, 0, 0, 0)}
    nodes = [N("Shape", ["x"], ["shp"])]
    for ax, nm in ((1, "h"), (2, "w")):
        nodes += [N("Gather", ["shp", "i%d" % ax], [nm]), N("Mod", [nm, "ws"], [nm + "m"]),
                  N("Sub", ["ws", nm + "m"], [nm + "d"]), N("Mod", [nm + "d", "ws"], [nm + "p"])]
    nodes += [N("Concat", ["zz", "z", "hp", "wp", "z"], ["pads"], axis=0),
              N("Pad", ["x", "pads"], ["p"]), N("Relu", ["p"], ["y"])]
    return tr.RCase("window_pad_from_shapes", nodes, {"x": (1, 6, 7, 8)}, inits, ["y"], opset=17, kernels=1)


def cases():
    return [swin_mask_case(), logic_case(), mod_scatter_case(), window_pad_case()]


def torch_part(run, tmp):
    try:
        import torch
        from torchvision.models.swin_transformer import SwinTransformerBlock
    except ImportError:
        print("skipped: torch or torchvision is not installed")
        return 77
    import fgapi
    import onnxruntime as ort
    torch.manual_seed(0)
    m = SwinTransformerBlock(32, 2, window_size=[4, 4], shift_size=[2, 2]).eval()
    x = torch.randn(1, 6, 6, 32)
    for exporter in ("torchscript", "dynamo"):
        path = os.path.join(tmp, "swin_block_%s.onnx" % exporter)
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
            run.result("swin_block_" + exporter, "fp32", None, None, 1e-4, "; ".join(e.messages) or str(e))
            continue
        finally:
            run.lib.free_graph(g)
        mx, rel, err = tm.compare(outs[0], ref)
        run.result("swin_block_" + exporter, "fp32", mx, rel, 1e-4, err, kernels=nk)
    return 0


def main(argv):
    run = tm.Runner("-v" in argv)
    failed = run.failed
    rc = 0
    with tempfile.TemporaryDirectory() as tmp:
        if "--torch" in argv:
            rc = torch_part(run, tmp)
        else:
            for case in cases():
                for dtype in ("fp32", "fp16"):
                    tr.run_case(run, case, dtype, tmp, failed)
    print("test_onnx_swin: %d rows, %d failed" % (len(run.rows), len(failed)))
    for f in failed:
        print("  FAILED: %s" % f)
    return 1 if failed else rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
