#!/usr/bin/env python3
"""test_onnx_attention.py -- scaled dot-product attention from ONNX as one kernel.

Models: a hand-built multi-head attention block (projections, Reshape and
Transpose for the heads, K^T by a Transpose, MatMul, Div by sqrt(d), an
additive padding mask [B, 1, 1, S], Softmax, MatMul, heads merged, output
projection), fp32 and fp16; and torch exports (torch.onnx.export,
dynamo=False opset 17, and dynamo=True where the export's operators import):
a scaled_dot_product_attention module with a float mask, and
nn.MultiheadAttention as cross-attention (kdim != embed_dim, so the
projections are separate MatMuls; the packed self-attention form exports
Gather / Split, which the importer does not take).  Each is imported, planned
(rules/attention.yaml: the plan must hold an `attention` group), run in CPU
emulation and compared with onnxruntime: fp32 relative L2 <= 1e-4, fp16 as
test_onnx_models.py.

Environment: FUSEGEN_LIB (libfusegen.so).  Exit 77 (skipped) without onnx,
onnxruntime or numpy; the torch rows are skipped, and say so, without torch.
-v prints every row.
"""
import ctypes as C
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
import fgapi  # noqa: E402
import test_onnx_models as tm  # noqa: E402  (Case, ort_run, compare; skips itself without onnxruntime)

N = h.make_node
TOL = {"fp32": 1e-4, "fp16": tm.TOL["fp16"]}


def templates(lib, g):
    """The plan's groups as (rule, template) pairs, without compiling."""
    L = lib.L
    if not getattr(L, "_fg_extra", False):
        fgapi._bind_extra(L)
        L._fg_extra = True
    p = C.c_void_p()
    try:
        lib.check(L.fg_plan_build(lib.ctx, g, C.byref(p)))
        out = []
        for i in range(L.fg_plan_group_count(p)):
            gi = fgapi.GroupInfo()
            lib.check(L.fg_plan_group_info(lib.ctx, p, i, C.byref(gi)))
            out.append(((gi.rule or b"-").decode(), gi.template_name.decode()))
        return out
    finally:
        L.fg_plan_free(p)


def mha_block(B=2, S=13, E=64, H=4):
    """Hand-built self-attention block: x [B, S, E], mask [B, 1, 1, S]."""
    D = E // H
    nodes, inits = [], {}
    for n in ("q", "k", "v", "o"):
        inits["w" + n] = tm.rnd(E, E, scale=E ** -0.5)
    inits["heads"] = np.array([B, S, H, D], dtype=np.int64)
    inits["merged"] = np.array([B, S, E], dtype=np.int64)
    inits["scale"] = np.array(np.sqrt(D), dtype=np.float32)
    for n in ("q", "k", "v"):
        nodes.append(N("MatMul", ["x", "w" + n], [n + "p"]))
        nodes.append(N("Reshape", [n + "p", "heads"], [n + "r"]))
    nodes.append(N("Transpose", ["qr"], ["qh"], perm=[0, 2, 1, 3]))
    nodes.append(N("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]))   # K^T [B, H, D, S]
    nodes.append(N("Transpose", ["vr"], ["vh"], perm=[0, 2, 1, 3]))
    nodes += [N("MatMul", ["qh", "kt"], ["sc"]), N("Div", ["sc", "scale"], ["sd"]),
              N("Add", ["sd", "mask"], ["sm_in"]), N("Softmax", ["sm_in"], ["p"], axis=-1),
              N("MatMul", ["p", "vh"], ["ctx"]), N("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3]),
              N("Reshape", ["ct", "merged"], ["cm"]), N("MatMul", ["cm", "wo"], ["y"])]
    return tm.Case("mha_block", nodes, {"x": (B, S, E), "mask": (B, 1, 1, S)}, inits, ["y"])


def mask_feed(B, S):
    """Padding: batch b keeps its first S - 4 b keys (0), the rest -10000."""
    m = np.zeros((B, 1, 1, S), dtype=np.float32)
    for b in range(B):
        m[b, ..., S - 4 * b:] = -10000.0
    return m


def torch_models(tmp, skip):
    """(name, path, feeds) of the torch exports that worked; reasons for the others in skip."""
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        skip.append("torch rows NOT RUN: %s" % e)
        return []
    torch.manual_seed(7)

    class SDPA(nn.Module):
        def forward(self, q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    class Cross(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = nn.MultiheadAttention(64, 4, kdim=48, vdim=48, batch_first=True)

        def forward(self, x, mem):
            return self.m(x, mem, mem, need_weights=False)[0]

    q, k, v = torch.randn(2, 3, 17, 32), torch.randn(2, 3, 70, 32), torch.randn(2, 3, 70, 32)
    mask = torch.randn(2, 1, 17, 70)
    x, mem = torch.randn(2, 9, 64), torch.randn(2, 77, 48)
    specs = [("sdpa", SDPA().eval(), (q, k, v, mask), ["q", "k", "v", "mask"]),
             ("mha_cross", Cross().eval(), (x, mem), ["x", "mem"])]
    out = []
    for name, mod, args, names in specs:
        for dynamo in (False, True):
            tag = "%s_%s" % (name, "dynamo" if dynamo else "ts17")
            path = os.path.join(tmp, tag + ".onnx")
            try:
                kw = {"dynamo": True} if dynamo else {"dynamo": False, "opset_version": 17}
                with torch.no_grad():
                    torch.onnx.export(mod, args, path, input_names=names, output_names=["y"], **kw)
            except Exception as e:  # an exporter failure is the exporter's, not ours
                skip.append("%s NOT RUN: the export failed (%s)" % (tag, str(e).splitlines()[0][:120]))
                continue
            out.append((tag, path, {n: a.numpy() for n, a in zip(names, args)}))
    return out


def main(argv):
    verbose = "-v" in argv
    run = tm.Runner(verbose)
    failed, skip = run.failed, []
    with tempfile.TemporaryDirectory() as tmp:
        items = []
        case = mha_block()
        for dtype in ("fp32", "fp16"):
            model = case.model(dtype)
            feeds = case.feeds(dtype)
            feeds["mask"] = mask_feed(2, 13).astype(feeds["mask"].dtype)
            path = os.path.join(tmp, "mha_block_%s.onnx" % dtype)
            onnx.save(model, path)
            if dtype == "fp16":
                ref = tm.ort_run(tm.fp32_twin(case), {n: a.astype(np.float32) for n, a in feeds.items()})
            else:
                ref = tm.ort_run(model, feeds)
            items.append(("mha_block", dtype, path, feeds, ref["y"]))
        for tag, path, feeds in torch_models(tmp, skip):
            ref = tm.ort_run(onnx.load(path), feeds)
            items.append((tag, "fp32", path, feeds, ref["y"]))
        for name, dtype, path, feeds, ref in items:
            try:
                g = run.lib.load(path)
            except fgapi.FusegenError as e:
                msg = "; ".join(e.messages) or str(e)
                if name.endswith("_dynamo") and "unsupported operator" in msg:
                    # the exporter's operators, not the attention subgraph: said, not failed
                    skip.append("%s NOT RUN: %s" % (name, msg.split(": error: ")[-1]))
                    continue
                run.result(name, dtype, None, None, TOL[dtype], "import: " + msg)
                continue
            try:
                groups = templates(run.lib, g)
                outs, nk = run.lib.run(g, feeds)
            except fgapi.FusegenError as e:
                run.result(name, dtype, None, None, TOL[dtype], "; ".join(e.messages) or str(e))
                continue
            finally:
                run.lib.free_graph(g)
            mx, rel, err = tm.compare(outs["y"], ref)
            run.result(name, dtype, mx, rel, TOL[dtype], err, kernels=nk)
            att = [gr for gr in groups if gr == ("attention", "attention")]
            tm.expect(len(att) == 1, "%s %s: one attention group in the plan (groups: %s)" %
                      (name, dtype, ", ".join("%s/%s" % gr for gr in groups)), failed)
            if verbose:
                print("    plan: %s" % ", ".join("%s/%s" % gr for gr in groups))
    for s in skip:
        print("  " + s)
    print("test_onnx_attention: %d rows, %d failed" % (len(run.rows), len(failed)))
    for f in failed:
        print("  FAILED: %s" % f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
