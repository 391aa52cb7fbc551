#!/usr/bin/env python3
"""test_onnx_norm.py -- LayerNormalization, RMSNormalization and the forms
exporters write for them, against onnxruntime.

Hand-built models (fp32, and fp16 against the fp32 model on the same
fp16-rounded values; tolerances as test_onnx_models.py), each planned to the
kernels it should take:

  LayerNormalization over axis -1, 1 and -2, with and without bias, rows
  of 1, 13, 768 (a warp per row) and 2049 (a block per row); with a
  residual Add before it (absorbed as the skip: one kernel) and a Relu after
  it (the epilogue: one kernel); RMSNormalization (opset 23); the
  decomposed LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div,
  Mul, Add) and RMSNorm (Pow, ReduceMean, Add, Sqrt, Div or Reciprocal, Mul,
  Mul) rewritten into one kernel, and a decomposed form over a middle axis
  that must not be rewritten.  A used Mean output is refused with its
  reason.

An fp32 x normalized into an fp16 model (the RMSNorm cast to fp16 before
the fp16 weight, rows 1, 7, 129 and 14, widths 13, 36, 45, 1031): one
layernorm kernel storing fp16, within rel L2 1e-2 of onnxruntime; the
Cast to int32, or its input also a graph output: not rewritten; an fp32
LayerNormalization cast to fp16: one kernel (layer_norm_cast_*).  The fp16
TorchScript Llama of tests/onnx/zoo: each RMSNorm one layernorm kernel,
the output within rel L2 1e-2 of onnxruntime.

With --torch (exit 77 when torch is missing; a test of its own): small modules
exported by torch.onnx (dynamo=False at opset 14 and 17, and dynamo=True):
nn.LayerNorm, a Llama-style RMSNorm, nn.RMSNorm; and a two-stage ConvNeXt
(torchvision's CNBlock and LayerNorm2d, random weights, 64x64 input)
matching onnxruntime to rel L2 <= 1e-4 in fp32, with every LayerNorm
planned to the layernorm template.

Environment: FUSEGEN_LIB (libfusegen.so), FUSEGEN_BIN (the command line).
Exit 77 (skipped) without onnx, onnxruntime or numpy.  -v prints every row.
"""
import os
import subprocess
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


def f32(*shape, lo=None):
    a = RNG.standard_normal(shape).astype(np.float32)
    return (np.abs(a) + 0.5).astype(np.float32) if lo else a


def ln_cases():
    out = []
    for shape, axis, bias in (((2, 7, 768), -1, True), ((13, 1), -1, True), ((4, 13), -1, False),
                              ((3, 2049), -1, True), ((2, 3, 5, 7), 1, True), ((2, 3, 5, 7), -2, False)):
        nshape = shape[axis:]
        inits = {"g": f32(*nshape, lo=True)}
        ins = ["x", "g"]
        if bias:
            inits["b"] = f32(*nshape)
            ins.append("b")
        name = "ln_%s_axis%d%s" % ("x".join(map(str, shape)), axis, "" if bias else "_nobias")
        out.append(tr.RCase(name, [N("LayerNormalization", ins, ["y"], axis=axis, epsilon=1e-5)], {"x": shape},
                            inits, ["y"], opset=17, kernels=1))
    # residual add absorbed as the skip; a Relu after it as the epilogue: one kernel
    inits = {"g": f32(64, lo=True), "b": f32(64)}
    out.append(tr.RCase("ln_skip_relu", [N("Add", ["x", "r"], ["u"]),
                                         N("LayerNormalization", ["u", "g", "b"], ["n"], epsilon=1e-6),
                                         N("Relu", ["n"], ["y"])],
                        {"x": (5, 9, 64), "r": (5, 9, 64)}, inits, ["y"], opset=17, kernels=1))
    # a broadcast add (a position embedding) is no skip: two kernels
    inits = {"g": f32(64, lo=True), "b": f32(64), "pe": f32(9, 64)}
    out.append(tr.RCase("ln_broadcast_add_not_skip", [N("Add", ["x", "pe"], ["u"]),
                                                      N("LayerNormalization", ["u", "g", "b"], ["y"])],
                        {"x": (5, 9, 64)}, inits, ["y"], opset=17, kernels=2))
    out.append(tr.RCase("rms_norm_op23", [N("RMSNormalization", ["x", "g"], ["y"], epsilon=1e-6)],
                        {"x": (3, 5, 96)}, {"g": f32(96, lo=True)}, ["y"], opset=23, kernels=1))
    out.append(tr.RCase("rms_norm_op23_axis1", [N("RMSNormalization", ["x", "g"], ["y"], axis=1)],
                        {"x": (3, 5, 96)}, {"g": f32(5, 96, lo=True)}, ["y"], opset=23, kernels=1))
    return out


def decomposed_ln(axis, rank_shape):
    inits = {"two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
             "g": f32(rank_shape[axis], lo=True), "b": f32(rank_shape[axis])}
    if axis != len(rank_shape) - 1 and axis != -1:
        inits["g"] = f32(rank_shape[axis], 1, lo=True)
        inits["b"] = f32(rank_shape[axis], 1)
    nodes = [N("ReduceMean", ["x"], ["m"], axes=[axis]), N("Sub", ["x", "m"], ["d"]), N("Pow", ["d", "two"], ["p"]),
             N("ReduceMean", ["p"], ["v"], axes=[axis]), N("Add", ["v", "eps"], ["e"]), N("Sqrt", ["e"], ["s"]),
             N("Div", ["d", "s"], ["n"]), N("Mul", ["n", "g"], ["w"]), N("Add", ["w", "b"], ["y"])]
    return nodes, inits


def decomposed_rms(recip):
    inits = {"two": np.array(2.0, np.float32), "eps": np.array(1e-6, np.float32),
             "w": f32(48, lo=True), "ax": np.array([-1], np.int64)}
    if not recip:
        inits["one"] = np.array(1.0, np.float32)
    nodes = [N("Pow", ["x", "two"], ["p"]), N("ReduceMean", ["p", "ax"], ["v"], keepdims=1),
             N("Add", ["v", "eps"], ["e"]), N("Sqrt", ["e"], ["s"]),
             N("Reciprocal", ["s"], ["r"]) if recip else N("Div", ["one", "s"], ["r"]),
             N("Mul", ["x", "r"], ["hh"]), N("Mul", ["w", "hh"], ["y"])]
    return nodes, inits


def rewrite_cases():
    out = []
    nodes, inits = decomposed_ln(-1, (2, 9, 40))
    out.append(tr.RCase("ln_decomposed_op14", nodes, {"x": (2, 9, 40)}, inits, ["y"], opset=14, kernels=1))
    nodes, inits = decomposed_ln(1, (2, 9, 40))   # a middle axis: no layer_norm (6 kernels), same values
    out.append(tr.RCase("ln_decomposed_middle_axis_not_rewritten", nodes, {"x": (2, 9, 40)}, inits, ["y"],
                        opset=14, kernels=None))
    for recip in (0, 1):
        nodes, inits = decomposed_rms(recip)
        out.append(tr.RCase("rms_decomposed_%s" % ("reciprocal" if recip else "div"), nodes, {"x": (3, 7, 48)},
                            inits, ["y"], opset=18, kernels=1))
    return out


def refusal(run, tmp, failed):
    case = tr.RCase("ln_mean_used", [N("LayerNormalization", ["x", "g"], ["y", "mean"], axis=-1)], {"x": (3, 8)},
                    {"g": f32(8)}, ["y", "mean"], opset=17)
    path = os.path.join(tmp, "ln_mean_used.onnx")
    onnx.save(case.model("fp32"), path)
    try:
        g = run.lib.load(path)
        run.lib.free_graph(g)
        msg = "loaded"
    except tm.fgapi.FusegenError as e:
        msg = "; ".join(e.messages)
    tm.expect("Mean and InvStdDev outputs" in msg and "ln_mean_used.onnx" in msg, "refused used Mean: %s" % msg[:160],
              failed)


# ---- fp32 in, fp16 out: the RMSNorm of an fp16 model's fp32 residual stream ------

def mixed_rms_model(shape, recip, tail="fp16"):
    """x (fp32) -> Pow, ReduceMean, Add, Sqrt, Div(1, .) or Reciprocal, Mul(x, .)
    -> Cast -> Mul(w, .), as the fp16 TorchScript export of Hugging Face's
    Llama writes its later RMSNorms.  tail "fp16": the Cast to fp16, the
    weight fp16 (one layer_norm, fp16 out); "int32": the Cast to int32 and an
    int32 weight (must not be rewritten); "shared": the Cast's input also a
    graph output (must not be rewritten)."""
    TP = onnx.TensorProto
    w = (np.abs(RNG.standard_normal(shape[-1])) + 0.5)
    inits = {"two": np.array(2.0, np.float32), "eps": np.array(1e-6, np.float32), "one": np.array(1.0, np.float32),
             "w": w.astype(np.int32 if tail == "int32" else np.float16)}
    nodes = [N("Pow", ["x", "two"], ["p"]), N("ReduceMean", ["p"], ["v"], axes=[-1], keepdims=1),
             N("Add", ["v", "eps"], ["e"]), N("Sqrt", ["e"], ["s"]),
             N("Reciprocal", ["s"], ["r"]) if recip else N("Div", ["one", "s"], ["r"]),
             N("Mul", ["x", "r"], ["hh"]),
             N("Cast", ["hh"], ["b"], to=TP.INT32 if tail == "int32" else TP.FLOAT16), N("Mul", ["w", "b"], ["y"])]
    ydt = TP.INT32 if tail == "int32" else TP.FLOAT16
    outs = [h.make_tensor_value_info("y", ydt, list(shape))]
    if tail == "shared":
        outs.append(h.make_tensor_value_info("hh", TP.FLOAT, list(shape)))
    g = h.make_graph(nodes, "mixed_rms", [h.make_tensor_value_info("x", TP.FLOAT, list(shape))], outs,
                     [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def group_templates(run, path):
    """[(template, [node names])] of the plan of the ONNX model at path."""
    import zoo_graphs
    g = run.lib.load(path)
    try:
        return [(t, nodes) for t, _, nodes in zoo_graphs.group_templates(run.lib, g)]
    finally:
        run.lib.free_graph(g)


def mixed_part(run, tmp, failed):
    """The fp32-in / fp16-out RMSNorm against onnxruntime at odd shapes: one
    layernorm kernel (rms_norm_div_cast, rms_norm_reciprocal_cast); a Cast to
    int32 and a Cast whose input is also read elsewhere stay unrewritten; the
    fp16 TorchScript Llama of tests/onnx/zoo: every RMSNorm one layernorm
    kernel, its output within rel L2 1e-2 of onnxruntime's."""
    import onnxruntime as ort
    for shape, recip in (((1, 13), 0), ((7, 36), 1), ((129, 45), 0), ((2, 7, 1031), 1)):
        name = "rms_fp32_to_fp16_%s%s" % ("x".join(map(str, shape)), "_recip" if recip else "")
        m = mixed_rms_model(shape, recip)
        x = RNG.standard_normal(shape).astype(np.float32) * 3.0
        ref = tm.ort_run(m, {"x": x})["y"]
        path = os.path.join(tmp, name + ".onnx")
        onnx.save(m, path)
        g = run.lib.load(path)
        try:
            outs, nk = run.lib.run(g, {"x": x})
        finally:
            run.lib.free_graph(g)
        mx, rel, err = tm.compare(outs["y"], ref)
        run.result(name, "mixed", mx, rel, 1e-2, err, kernels=nk)
        # onnxruntime's default optimizations fold the Cast pair its CPU fp16 Mul needs, so the
        # product is rounded once there too; unoptimized, the Cast rounds h to fp16 first
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        ref2 = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
        mx, rel, err = tm.compare(outs["y"], ref2)
        run.result(name + "_unoptimized", "mixed", mx, rel, 1e-2, err, kernels=nk)
        tm.expect(nk == 1 and outs["y"].dtype == np.float16, "%s: one kernel, fp16 out (got %d, %s)" % (
            name, nk, outs["y"].dtype), failed)
        groups = group_templates(run, path)
        tm.expect([t for t, _ in groups] == ["layernorm"], "%s: planned to layernorm (%s)" % (
            name, ",".join(t for t, _ in groups)), failed)
    # LayerNormalization in fp32 whose result is cast to fp16 (bias or not): one layernorm kernel
    TP = onnx.TensorProto
    for shape, bias in (((7, 36), True), ((129, 45), False)):
        name = "ln_fp32_cast_fp16_%s%s" % ("x".join(map(str, shape)), "" if bias else "_nobias")
        inits = [onnx.numpy_helper.from_array(f32(shape[-1], lo=True), "g")]
        if bias:
            inits.append(onnx.numpy_helper.from_array(f32(shape[-1]), "b"))
        nodes = [N("LayerNormalization", ["x", "g"] + (["b"] if bias else []), ["n"], epsilon=1e-5),
                 N("Cast", ["n"], ["y"], to=TP.FLOAT16)]
        gr = h.make_graph(nodes, name, [h.make_tensor_value_info("x", TP.FLOAT, list(shape))],
                          [h.make_tensor_value_info("y", TP.FLOAT16, list(shape))], inits)
        m = h.make_model(gr, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        x = RNG.standard_normal(shape).astype(np.float32)
        ref = tm.ort_run(m, {"x": x})["y"]
        path = os.path.join(tmp, name + ".onnx")
        onnx.save(m, path)
        g = run.lib.load(path)
        try:
            outs, nk = run.lib.run(g, {"x": x})
        finally:
            run.lib.free_graph(g)
        mx, rel, err = tm.compare(outs["y"], ref)
        run.result(name, "mixed", mx, rel, 1e-2, err, kernels=nk)
        tm.expect(nk == 1 and outs["y"].dtype == np.float16, "%s: one kernel, fp16 out (got %d, %s)" % (
            name, nk, outs["y"].dtype), failed)
    for tail in ("int32", "shared"):
        name = "rms_fp32_cast_%s_not_rewritten" % tail
        m = mixed_rms_model((7, 36), 0, tail)
        path = os.path.join(tmp, name + ".onnx")
        onnx.save(m, path)
        groups = group_templates(run, path)
        tm.expect(len(groups) > 1 and "layernorm" not in [t for t, _ in groups],
                  "%s: no layernorm kernel (%d kernels: %s)" % (name, len(groups), ",".join(t for t, _ in groups)),
                  failed)
        if tail == "shared":   # the values still those of onnxruntime
            x = RNG.standard_normal((7, 36)).astype(np.float32)
            ref = tm.ort_run(m, {"x": x})
            g = run.lib.load(path)
            try:
                outs, nk = run.lib.run(g, {"x": x})
            finally:
                run.lib.free_graph(g)
            mx, rel, err = tm.compare(outs["y"], ref["y"])
            run.result(name, "mixed", mx, rel, 1e-2, err, kernels=nk)
    llama_zoo(run, tmp, failed)


def llama_zoo(run, tmp, failed):
    """llama_masked.torchscript.fp16.onnx (tests/onnx/zoo, weights regenerated
    as zoo_graphs.py does): each of its five RMSNorms (an fp16 input for the
    first, the fp32 residual stream for the others) is one layernorm kernel;
    the output within rel L2 1e-2 of onnxruntime."""
    import json
    import onnxruntime as ort
    import zoo_graphs
    fname = "llama_masked.torchscript.fp16.onnx"
    with open(os.path.join(zoo_graphs.ZOO, "index.json")) as fh:
        ent = json.load(fh)[fname]
    m = onnx.load(os.path.join(zoo_graphs.ZOO, fname))
    zoo_graphs.regenerate(m, 1234)
    path = os.path.join(tmp, fname)
    onnx.save(m, path)
    arrays = [np.array(d["values"], dtype=d["dtype"]).reshape(d["shape"]) for d in ent["inputs"]]
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), arrays)})[0]
    g = run.lib.load(path)
    try:
        outs, nk, _ = tm.fgapi.run_ordered(run.lib, g, arrays)
        groups = [(t, nodes) for t, _, nodes in zoo_graphs.group_templates(run.lib, g)]
    finally:
        run.lib.free_graph(g)
    mx, rel, err = tm.compare(outs[0], np.asarray(ref))
    run.result("llama_masked_torchscript_fp16", "fp16", mx, rel, 1e-2, err, kernels=nk)
    norms = sorted({n.name.rsplit("/", 1)[0] for n in m.graph.node if n.op_type == "ReduceMean"})
    for pre in norms:
        stem = "".join(c if c.isalnum() or c in "_." else "_" for c in pre + "/")   # fusegen's node names
        mine = [t for t, nodes in groups if any(x.startswith((stem, "t_" + stem)) for x in nodes)]
        tm.expect(mine == ["layernorm"], "llama fp16: %s is one layernorm kernel (%s)" % (pre, ",".join(mine)), failed)
    tm.expect(len(norms) == 5, "llama fp16: 5 RMSNorms (got %d)" % len(norms), failed)
    tm.expect(nk <= 62, "llama fp16: at most 62 kernels (got %d; 78 before the fp32-in norms were one)" % nk,
              failed)


# ---- torch exports -------------------------------------------------------------

def plan_templates(path):
    """The plan's group lines from the command line (fusegen plan)."""
    p = subprocess.run([os.environ["FUSEGEN_BIN"], "plan", path], capture_output=True, text=True,
                       env=dict(os.environ, FUSEGEN_QUIET="1"))
    return p.stdout + p.stderr


def torch_part(run, tmp, failed, verbose):
    try:
        import torch
    except ImportError:
        print("torch part skipped: torch is not installed")
        return 77
    import warnings
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)

    class LlamaRMS(torch.nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.rand(d) + 0.5)
            self.eps = eps

        def forward(self, x):
            v = x.pow(2).mean(-1, keepdim=True)
            return self.weight * (x * torch.rsqrt(v + self.eps))

    class LNRes(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln = torch.nn.LayerNorm(d)
            with torch.no_grad():
                self.ln.weight.uniform_(0.5, 1.5)
                self.ln.bias.normal_()

        def forward(self, x, r):
            return torch.relu(self.ln(x + r))

    def check(name, module, args, opset, dynamo, want_kernels=None, tol=1e-4):
        path = os.path.join(tmp, name + ".onnx")
        try:
            torch.onnx.export(module, args, path, opset_version=opset, dynamo=dynamo)
        except Exception as e:  # an exporter that cannot write the module: reported, not failed
            print("  %-40s export failed (%s): not checked" % (name, type(e).__name__))
            return
        model = onnx.load(path)
        names = [i.name for i in model.graph.input]
        feeds = {n: a.numpy() for n, a in zip(names, args)}
        ref = tm.ort_run(model, feeds)
        g = run.lib.load(path)
        try:
            outs, nk = run.lib.run(g, feeds)
        except tm.fgapi.FusegenError as e:
            run.result(name, "fp32", None, None, tol, "; ".join(e.messages) or str(e))
            return
        finally:
            run.lib.free_graph(g)
        worst = (0.0, 0.0)
        for k, r in ref.items():
            mx, rel, err = tm.compare(outs[k], r)
            if err:
                run.result(name, "fp32", None, None, tol, err)
                return
            worst = (max(worst[0], mx), max(worst[1], rel))
        run.result(name, "fp32", worst[0], worst[1], tol, kernels=nk)
        if want_kernels is not None:
            tm.expect(nk == want_kernels, "%s: %d kernel(s) (got %d)" % (name, want_kernels, nk), failed)
        return path

    x = torch.randn(2, 6, 64)
    r = torch.randn(2, 6, 64)
    for dyn, opset in ((False, 14), (False, 17), (True, 18)):
        check("torch_ln_res_relu_op%d%s" % (opset, "_dynamo" if dyn else ""), LNRes(64).eval(), (x, r), opset, dyn, 1)
    for dyn, opset in ((False, 17), (True, 18)):
        check("torch_llama_rms_op%d%s" % (opset, "_dynamo" if dyn else ""), LlamaRMS(64).eval(), (x,), opset, dyn, 1)
    if hasattr(torch.nn, "RMSNorm"):
        check("torch_nn_rmsnorm_op23_dynamo", torch.nn.RMSNorm(64).eval(), (x,), 23, True, 1)

    # a two-stage ConvNeXt (torchvision's blocks) at 64x64, random weights
    try:
        from functools import partial

        from torchvision.models.convnext import CNBlock, LayerNorm2d
    except ImportError:
        print("  convnext skipped: torchvision is not installed")
        return 0
    norm = partial(LayerNorm2d, eps=1e-6)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 4, 4), norm(32),
        CNBlock(32, 1e-6, 0.0), CNBlock(32, 1e-6, 0.0),
        torch.nn.Sequential(norm(32), torch.nn.Conv2d(32, 64, 2, 2)),
        CNBlock(64, 1e-6, 0.0), CNBlock(64, 1e-6, 0.0),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(1), torch.nn.LayerNorm(64, eps=1e-6),
        torch.nn.Linear(64, 10)).eval()
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
            if isinstance(m, CNBlock):
                m.layer_scale.fill_(0.5)
    path = check("convnext_2stage_64x64", net, (torch.randn(1, 3, 64, 64),), 17, False)
    if path:
        nln = sum(1 for n in onnx.load(path).graph.node if n.op_type == "LayerNormalization")
        plan = plan_templates(path)
        fused = sum(1 for line in plan.splitlines() if " layernorm " in line)
        if verbose:
            print(plan)
        print("  convnext: %d LayerNormalization nodes, %d plan lines naming the layernorm template" % (nln, fused))
        tm.expect(nln > 0 and fused >= nln, "convnext: every LayerNorm planned to the layernorm template", failed)
    return 0


def main(argv):
    """Without --torch: the hand-built models; with it: the torch exports only
    (exit 77 without torch)."""
    verbose = "-v" in argv
    run = tm.Runner(verbose)
    failed = run.failed
    torch_rc = 0
    with tempfile.TemporaryDirectory() as tmp:
        if "--torch" in argv:
            torch_rc = torch_part(run, tmp, failed, verbose)
        else:
            for case in ln_cases() + rewrite_cases():
                for dtype in ("fp32", "fp16"):
                    tr.run_case(run, case, dtype, tmp, failed)
            refusal(run, tmp, failed)
            mixed_part(run, tmp, failed)
    print("test_onnx_norm: %d rows, %d failed" % (len(run.rows), len(failed)))
    for f in failed:
        print("  FAILED: %s" % f)
    return 1 if failed else 0 if torch_rc == 0 else 77


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
