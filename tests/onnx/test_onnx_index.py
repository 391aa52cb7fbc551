#!/usr/bin/env python3
"""test_onnx_index.py -- Slice, Split, Gather, Expand, Tile and Pad of computed
tensors against onnxruntime.

Hand-built graphs of each operator (opset 1 / 10 / 13 attribute and input
forms; negative and clamped indices, negative steps; Split by sizes, into
equal parts and num_outputs with an uneven last part; Gather with a scalar,
a 1-element, an arithmetic-progression, a general and a negative index list;
Expand from rank 1 to 4; Tile; Pad in constant / reflect / edge / wrap modes
with negative pads and axes, opset 2 attribute form) and two networks built
with torch (random weights, 64x64 input): torchvision's shufflenet_v2_x0_5
(its channel split is a Split or a Slice, its shuffle Reshape / Transpose)
and a GhostNet-like block (a cheap depthwise branch concatenated and sliced
back to the output channels, an SE gate, a padded max pool).  The torch
models are exported with torch.onnx.export dynamo=False at opset 17 and,
where it works, dynamo=True.  Each is loaded by fusegen's ONNX importer, run
in CPU emulation and compared with onnxruntime (fp32 rel L2 <= 1e-4; fp16
hand-built graphs as test_onnx_models.py).  Kernel counts show chains
composed into one copy kernel.  Refusals (computed indices or
starts) are checked for their reason.

Environment: FUSEGEN_LIB (libfusegen.so).  Exit 77 (skipped) without onnx,
onnxruntime or numpy (the torch models are skipped without torch or
torchvision).  Arguments: names of cases to run (default all); -v prints
every row.
"""
import os
import sys
import tempfile
import warnings

try:
    import numpy as np
    import onnx
    from onnx import helper as h
    from onnx import TensorProto as TP
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_onnx_models as tm  # noqa: E402  (Case, Runner, ort_run, compare; skips itself without onnxruntime)
import fgapi  # noqa: E402

N = h.make_node
Case = tm.Case


def i64(vals):
    return np.array(vals, dtype=np.int64)


def relu_then(op, ins, outs=("y",), **attrs):
    """A Relu first (so the operator reads a computed tensor), then op."""
    return [N("Relu", ["x"], ["r"]), N(op, ["r"] + list(ins), list(outs), **attrs)]


def slice_cases():
    out = []
    for name, xs, st, en, ax, sp in [
            ("slice_basic", (2, 7, 13, 5), [0, 2], [1, 6], [0, 1], None),
            ("slice_negative", (2, 7, 13, 5), [-5, -1], [-1, -100], [2, 3], [1, -1]),
            ("slice_clamped", (2, 7, 13, 5), [1, -1000], [1000, 1000], [1, 2], [2, 3]),
            ("slice_neg_step", (3, 13, 7), [12, 6], [-1000, 0], [1, 2], [-2, -3]),
            ("slice_start_clamped_neg", (7, 13), [100, 3], [-100, 1000], [0, 1], [-1, 4]),
            ("slice_default_axes", (7, 13, 1), [1, 0, 0], [6, 13, 1], None, None),
            ("slice_last_axis", (2, 3, 13), [3], [9223372036854775807], [-1], None)]:
        inits = {"s": i64(st), "e": i64(en)}
        ins = ["s", "e"]
        if ax is not None or sp is not None:
            inits["a"] = i64(ax if ax is not None else list(range(len(st))))
            ins.append("a")
        if sp is not None:
            inits["k"] = i64(sp)
            ins.append("k")
        out.append(Case(name, relu_then("Slice", ins), {"x": xs}, inits, ["y"]))
    out.append(Case("slice_opset1", relu_then("Slice", [], starts=[1, -4], ends=[3, 1000], axes=[1, 3]),
                    {"x": (2, 7, 13, 5)}, {}, ["y"], opset=9))
    # a slice then a transpose and an activation: one copy kernel
    out.append(Case("slice_transpose", [N("Relu", ["x"], ["r"]), N("Slice", ["r", "s", "e", "a", "k"], ["t"]),
                                        N("Transpose", ["t"], ["u"], perm=[0, 2, 3, 1]), N("Sigmoid", ["u"], ["y"])],
                    {"x": (2, 7, 13, 5)}, {"s": i64([6, 1]), "e": i64([-1000, 12]), "a": i64([1, 2]),
                                           "k": i64([-2, 2])}, ["y"]))
    return out


def split_cases():
    out = []
    out.append(Case("split_sizes", relu_then("Split", ["sp"], ("y0", "y1", "y2"), axis=1), {"x": (2, 13, 5)},
                    {"sp": i64([3, 7, 3])}, ["y0", "y1", "y2"]))
    out.append(Case("split_equal", relu_then("Split", [], ("y0", "y1"), axis=-1), {"x": (2, 3, 14)}, {},
                    ["y0", "y1"]))
    out.append(Case("split_attr_op11", relu_then("Split", [], ("y0", "y1"), axis=2, split=[6, 7]),
                    {"x": (2, 3, 13)}, {}, ["y0", "y1"], opset=11))
    out.append(Case("split_num_outputs_uneven", relu_then("Split", [], ("y0", "y1", "y2"), axis=1, num_outputs=3),
                    {"x": (2, 13, 5)}, {}, ["y0", "y1", "y2"], opset=18))
    out.append(Case("split_one_used", relu_then("Split", [], ("y0", "y1"), axis=0), {"x": (2, 7)}, {}, ["y1"]))
    return out


def gather_cases():
    out = []
    for name, xs, idx, axis in [("gather_scalar", (2, 7, 13), np.array(3, dtype=np.int64), 1),
                                ("gather_scalar_neg", (2, 7, 13), np.array(-1, dtype=np.int64), 2),
                                ("gather_one", (2, 7, 13), i64([0]), 1),
                                ("gather_ap", (2, 13, 5), i64([1, 4, 7, 10]), 1),
                                ("gather_ap_desc", (13, 5), i64([12, 8, 4, 0]), 0),
                                ("gather_general", (2, 13, 5), i64([3, 0, 0, 5, 6, 7, -1]), 1),
                                ("gather_2d_idx", (7, 13), i64([[0, 2], [4, 6]]), 1),
                                ("gather_int32", (2, 7, 13), np.array([6, 5, 4], dtype=np.int32), 1)]:
        out.append(Case(name, relu_then("Gather", ["i"], axis=axis), {"x": xs}, {"i": idx}, ["y"]))
    return out


def expand_tile_cases():
    out = []
    for name, xs, shape in [("expand_1_to_4", (7,), [2, 3, 1, 7]), ("expand_ones", (3, 1, 13), [2, 1, 5, 1]),
                            ("expand_same", (3, 1), [3, 7]), ("expand_smaller_shape", (2, 3, 5), [5])]:
        out.append(Case(name, relu_then("Expand", ["s"]), {"x": xs}, {"s": i64(shape)}, ["y"]))
    for name, xs, reps in [("tile_2d", (3, 7), [2, 3]), ("tile_4d", (1, 3, 5, 7), [2, 1, 1, 3]),
                           ("tile_ones", (3, 7), [1, 1])]:
        out.append(Case(name, relu_then("Tile", ["r2"]), {"x": xs}, {"r2": i64(reps)}, ["y"]))
    # an expand feeding an Add: one copy kernel with the Add as its epilogue
    out.append(Case("expand_add", [N("Relu", ["x"], ["r"]), N("Expand", ["r", "s"], ["e"]), N("Add", ["e", "z"], ["y"])],
                    {"x": (1, 7, 1, 1), "z": (2, 7, 5, 5)}, {"s": i64([2, 7, 5, 5])}, ["y"]))
    return out


def pad_cases():
    out = []
    for name, xs, pads, mode, value in [
            ("pad_constant", (2, 3, 7, 13), [0, 1, 2, 3, 0, 0, 1, 2], "constant", 1.5),
            ("pad_constant_default", (3, 7, 13), [0, 2, 1, 0, 0, 3], "constant", None),
            ("pad_reflect", (2, 3, 7, 13), [0, 0, 2, 3, 0, 0, 3, 2], "reflect", None),
            ("pad_reflect_edge", (2, 3, 7, 5), [0, 0, 6, 4, 0, 0, 6, 4], "reflect", None),
            ("pad_edge", (2, 3, 7, 13), [0, 1, 5, 1, 0, 2, 2, 0], "edge", None),
            ("pad_wrap", (3, 7, 13), [0, 3, 2, 0, 7, 13], "wrap", None),
            ("pad_crop", (2, 3, 7, 13), [0, 0, -2, 3, 0, 0, 1, -4], "constant", None),
            ("pad_crop_reflect", (2, 3, 7, 13), [0, 0, -2, 3, 0, 0, 2, -4], "reflect", None),
            ("pad_rank1", (13,), [3, 1], "edge", None)]:
        inits, ins = {"p": i64(pads)}, ["p"]
        if value is not None:
            inits["v"] = np.array(value, dtype=np.float32)
            ins.append("v")
        out.append(Case(name, relu_then("Pad", ins, mode=mode), {"x": xs}, inits, ["y"],
                        opset=19 if mode == "wrap" else 13))
    out.append(Case("pad_axes", relu_then("Pad", ["p", "", "a"], mode="constant"), {"x": (2, 3, 7, 13)},
                    {"p": i64([1, 2, 3, 0]), "a": i64([-1, 1])}, ["y"], opset=18))
    out.append(Case("pad_opset2", relu_then("Pad", [], mode="constant", pads=[0, 0, 1, 2, 0, 0, 2, 1], value=-0.5),
                    {"x": (2, 3, 7, 13)}, {}, ["y"], opset=10))
    out.append(Case("pad_opset2_reflect", relu_then("Pad", [], mode="reflect", pads=[0, 1, 2, 0, 1, 2]),
                    {"x": (3, 7, 13)}, {}, ["y"], opset=10))
    # a constant pad then a reflect pad then a slice: one copy kernel
    out.append(Case("pad_chain", [N("Relu", ["x"], ["r"]), N("Pad", ["r", "p1", "v"], ["a"]),
                                  N("Pad", ["a", "p2"], ["b"], mode="reflect"),
                                  N("Slice", ["b", "s", "e", "ax", "k"], ["y"])],
                    {"x": (2, 3, 7, 13)}, {"p1": i64([0, 0, 1, 1, 0, 0, 2, 2]), "v": np.array(2.0, np.float32),
                                           "p2": i64([0, 0, 3, 0, 0, 0, 1, 5]), "s": i64([12, 1]),
                                           "e": i64([0, 100]), "ax": i64([2, 3]), "k": i64([-1, 3])}, ["y"]))
    return out


def cases():
    return slice_cases() + split_cases() + gather_cases() + expand_tile_cases() + pad_cases()


def refusals(run, tmp, failed):
    """Computed starts, indices and pads are refused with the reason."""
    lib = run.lib
    for name, nodes, inputs, inits, want in [
            # a computed tensor where an integer list belongs (every computed tensor is float: the
            # importer refuses integer graph inputs, so this is the only way to reach the refusal)
            ("slice_computed_starts", [N("Relu", ["x"], ["r"]), N("Slice", ["r", "z", "e"], ["y"])],
             {"x": (4, 5), "z": (1,)}, {"e": i64([3])}, "only constant starts are supported"),
            # float "indices" (the case's inputs are float): refused by type; int64 ones gather (test_onnx_ints.py)
            ("gather_computed_indices", [N("Relu", ["x"], ["r"]), N("Gather", ["r", "z"], ["y"])],
             {"x": (4, 5), "z": (2,)}, {}, "int64 or int32 expected"),
            ("slice_empty", relu_then("Slice", ["s", "e"]), {"x": (4, 5)}, {"s": i64([3]), "e": i64([3])}, "empty"),
            ("pad_rank5", relu_then("Pad", ["p"]), {"x": (1, 2, 3, 4, 5)}, {"p": i64([0, 0, 0, 0, 1, 0, 0, 0, 0, 1])},
             "at most rank 4")]:
        c = Case(name, nodes, inputs, inits, ["y"])
        path = os.path.join(tmp, name + ".onnx")
        onnx.save(c.model("fp32"), path)
        try:
            g = lib.load(path)
            lib.free_graph(g)
            failed.append("%s: loaded, expected a refusal naming '%s'" % (name, want))
        except fgapi.FusegenError as e:
            if want not in str(e):
                failed.append("%s: %s" % (name, e))
            elif run.verbose:
                print("  %-32s refused: %s" % (name, str(e).splitlines()[0][:140]))


def ghost_block():
    """A GhostNet-like block: a primary 1x1 conv, a cheap depthwise 3x3 branch, their concat sliced back to
    the output channels, a squeeze-excitation gate, a padded max pool and the channel-half split."""
    import torch
    from torch import nn

    class Ghost(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            init = (cout + 1) // 2
            self.cout = cout
            self.primary = nn.Sequential(nn.Conv2d(cin, init, 1, bias=False), nn.BatchNorm2d(init), nn.ReLU())
            self.cheap = nn.Sequential(nn.Conv2d(init, init, 3, padding=1, groups=init, bias=False),
                                       nn.BatchNorm2d(init), nn.ReLU())

        def forward(self, x):
            a = self.primary(x)
            return torch.cat([a, self.cheap(a)], dim=1)[:, :self.cout]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU())
            self.g1 = Ghost(16, 27)
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(27, 8, 1), nn.ReLU(), nn.Conv2d(8, 27, 1),
                                    nn.Hardsigmoid())
            self.g2 = Ghost(27, 24)
            self.head = nn.Linear(12 * 16 * 16, 10)

        def forward(self, x):
            x = self.stem(x)
            x = self.g1(x)
            x = x * self.se(x)
            x = nn.functional.pad(x, (1, 0, 0, 1), mode="reflect")
            x = nn.functional.max_pool2d(x, 2)
            x = self.g2(x)
            a, b = x.chunk(2, dim=1)
            y = a + b.flip(2)   # a Slice with step -1 (or Flip's own form)
            return self.head(y.flatten(1)), x[:, 0]

    return Net()


def networks(run, tmp, failed):
    """shufflenet_v2_x0_5 and the GhostNet-like block, torch-exported, against onnxruntime (fp32)."""
    try:
        import torch
        import torchvision
    except ImportError as e:
        print("  networks skipped: %s" % e)
        return
    torch.manual_seed(0)
    nets = [("shufflenet_v2_x0_5", torchvision.models.shufflenet_v2_x0_5(weights=None)), ("ghost_block", ghost_block())]
    x = torch.randn(1, 3, 64, 64)
    for name, net in nets:
        net.eval()
        # random batch-norm statistics, so the folded scales are not the identity
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
        for dynamo in (False, True):
            tag = "%s_%s" % (name, "dynamo" if dynamo else "ts17")
            path = os.path.join(tmp, tag + ".onnx")
            try:
                with torch.no_grad(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if dynamo:
                        torch.onnx.export(net, (x,), path, dynamo=True, opset_version=18, verbose=False)
                    else:
                        torch.onnx.export(net, (x,), path, dynamo=False, opset_version=17, input_names=["x"])
                model = onnx.load(path)
            except Exception as e:  # dynamo export is best effort
                if not dynamo:
                    failed.append("%s: export failed: %s" % (tag, e))
                print("  %-32s export failed (%s): %s" % (tag, "skipped" if dynamo else "FAIL", str(e)[:100]))
                continue
            iname = model.graph.input[0].name
            feeds = {iname: x.numpy()}
            ref = tm.ort_run(model, feeds)
            ops = sorted({n.op_type for n in model.graph.node})
            g = None
            try:
                g = run.lib.load(path)
                outs, nk = run.lib.run(g, feeds)
            except fgapi.FusegenError as e:
                run.result(tag, "fp32", None, None, 1e-4, "; ".join(e.messages) or str(e))
                continue
            finally:
                if g:
                    run.lib.free_graph(g)
            worst = (0.0, 0.0)
            err = None
            for k, r in ref.items():
                if k not in outs:
                    err = "output %s missing" % k
                    break
                mx, rel, err = tm.compare(outs[k], r)
                if err:
                    break
                worst = (max(worst[0], mx), max(worst[1], rel))
            run.result(tag, "fp32", worst[0] if not err else None, worst[1] if not err else None, 1e-4, err, kernels=nk)
            print("  %-32s operators: %s" % (tag, " ".join(ops)))


def kernels_of(run, case, tmp):
    path = os.path.join(tmp, case.name + "_k.onnx")
    onnx.save(case.model("fp32"), path)
    g = run.lib.load(path)
    try:
        _, nk = run.lib.run(g, case.feeds("fp32"))
    finally:
        run.lib.free_graph(g)
    return nk


def structure(run, tmp, failed):
    """Chains compose into one copy kernel after the Relu (rules/copy_chain.yaml); no-op forms add none."""
    by = {c.name: c for c in cases()}
    for name, want in [("slice_transpose", 2), ("pad_chain", 2), ("expand_add", 2), ("gather_scalar", 2),
                       ("tile_ones", 1), ("expand_same", 2)]:
        nk = kernels_of(run, by[name], tmp)
        tm.expect(nk == want, "%s: %d kernels (got %d)" % (name, want, nk), failed)


def main(argv):
    verbose = "-v" in argv
    names = [a for a in argv if not a.startswith("-")]
    run = tm.Runner(verbose)
    failed = run.failed
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases():
            if names and c.name not in names:
                continue
            for dtype in ("fp32", "fp16"):
                run.check_case(c, dtype, tmp)
        if not names or "structure" in names:
            structure(run, tmp, failed)
        if not names or "refusals" in names:
            refusals(run, tmp, failed)
        if not names or "networks" in names:
            networks(run, tmp, failed)
    print("%d rows, %d failed" % (len(run.rows), len(failed)))
    for f in failed:
        print("FAILED:", f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
