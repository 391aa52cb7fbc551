#!/usr/bin/env python3
"""gen_bench_graphs.py -- the graphs of the side-by-side GPU benchmark
(bench/device-check.sh, step 4), written twice: as fusegen graph YAML and as
JSON for the PyTorch side (bench/torch_side.py), from one description, so
both sides run the same shapes.

    python3 bench/gen_bench_graphs.py OUT_DIR [--batches 1,32]
        [--precisions fp16_nhwc,bf16_nhwc,fp32,tf32] [--tokens 1,16,64,512,4096]
        [--pointwise-log2 24,26,28] [--chains 2,4,6]
        [--attn-shapes 16x512x64,...] [--ln-shapes 4096x768,...] [--tiny]

Graphs (ids in the manifest):
  layer/<net>/<shape>/b<B>/<prec>   every distinct conv layer of ResNet-50
                                    and MobileNetV2 (examples/gen_examples.py):
                                    conv + batch norm + its activation
  net/<net>/b<B>/<prec>             the whole network
  gemm/<d>x<h>/t<T>/<prec>          x[T, d] @ w[d, h] + bias, tanh GELU
  pw/n<ops>/2^<k>/<prec>            a chain of element-wise ops over 2^k values
  attn/<BH>x<S>x<D>/<prec>          attention over BH batch-heads: softmax(q k^T
                                    * scale) v, sequence S, head dim D (the
                                    attention rule: one kernel)
  ln/<T>x<C>/<prec>                 layer_norm(x + r) * g + b over the last
                                    axis of [T, C] (the residual add as the
                                    skip: one kernel)

GEMMs run in --gemm-precisions (fp16_nhwc, bf16_nhwc, tf32), chains in
--pointwise-precisions (fp32, fp16_nhwc), attention in --attn-precisions
(fp16_nhwc, bf16_nhwc) and LayerNorm in --ln-precisions (fp16_nhwc,
bf16_nhwc, fp32), each only where --precisions has it; attention and
LayerNorm come first in the manifest (timed first in each precision).  Precisions: fp16_nhwc, bf16_nhwc, fp32 (NHWC, exact), tf32 (the fp32 graph
planned with --precision tf32).  --tiny shrinks everything (spatial sizes
/ 8 and at least 8, batch 1 and 2, tokens 1 and 16, 2^10 values, 2 layers
per net, one block of each network at 16x16 in place of the whole
network, attention 4x16x32, LayerNorm 16x64) for a dry run in emulation.

OUT_DIR receives graphs/*.yaml, graphs/*.json and manifest.tsv: one line per
graph, `id <tab> kind <tab> precision <tab> yaml <tab> json`.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import gen_examples as ge  # noqa: E402

DTYPE = {"fp16_nhwc": ("fp16", "NHWC"), "bf16_nhwc": ("bf16", "NHWC"), "fp32": ("fp32", "NHWC"),
         "tf32": ("fp32", "NHWC")}
CHAIN = ["sigmoid", "tanh", "silu", "relu", "gelu_tanh", "softplus"]


def spec(g, dtype, layout):
    """The JSON description of a gen_examples.Graph for torch_side.py."""
    return {"name": g.name, "dtype": dtype, "layout": layout,
            "inputs": [[n, s] for n, s in g.inputs],
            "weights": [[n, s, i] for n, s, i in g.weights],
            "nodes": [[n, op, ins, attrs] for n, op, ins, attrs in g.nodes],
            "outputs": list(g.outputs)}


def yaml_text(g, dtype, layout):
    text = g.yaml()
    return text.replace("\ndtype: fp32\n", "\ndtype: %s\n" % dtype).replace("\nlayout: NCHW\n",
                                                                             "\nlayout: %s\n" % layout)


def conv_layers(make, tiny):
    """Distinct conv layers of a network: (key, C, H, W, K, R, stride, groups, act)."""
    g = make()
    consumers = {}
    for name, op, ins, attrs in g.nodes:
        for i in ins:
            consumers.setdefault(i, []).append((name, op))
    seen, out = set(), []
    for name, op, ins, attrs in g.nodes:
        if op != "conv2d":
            continue
        _, c, h, w = g.shapes[ins[0]]
        k, r = g.shapes[name][1], [s for n, s, _ in g.weights if n == ins[1]][0][2]
        stride, groups = attrs.get("stride", [1, 1])[0], attrs.get("groups", 1)
        act = None
        bn = [n for n, o in consumers.get(name, []) if o == "batch_norm"]
        if bn:
            nxt = consumers.get(bn[0], [])
            if len(nxt) == 1 and nxt[0][1] in ("relu", "relu6"):
                act = nxt[0][1]
        if tiny:
            h, w = max(8, h // 8), max(8, w // 8)
        key = "c%dk%dr%ds%dg%d_%dx%d%s" % (c, k, r, stride, groups, h, w, "_" + act if act else "")
        if key in seen:
            continue
        seen.add(key)
        out.append((key, c, h, w, k, r, stride, groups, act))
    return out[:2] if tiny else out


def layer_graph(net, key, c, h, w, k, r, stride, groups, act, batch):
    g = ge.Graph("%s_%s_b%d" % (net, key, batch), 7, "bench layer")
    x = g.input("x", [batch, c, h, w])
    g.outputs.append(g.conv_bn("conv", x, k, r, stride, act=act, groups=groups))
    return g


def net_graph(make, batch, tiny):
    g = make()
    name, shape = g.inputs[0]
    hw = 16 if tiny else shape[2]
    g.inputs[0] = (name, [batch, shape[1], hw, hw])
    g.name = "%s_b%d" % (g.name, batch)
    return g


def gemm_graph(d, hdim, tokens):
    g = ge.Graph("gemm_%dx%d_t%d" % (d, hdim, tokens), 5, "bench gemm")
    x = g.input("x", [tokens, d])
    y = g.node("fc", "matmul", [x, g.weight("fc.w", [d, hdim])], [tokens, hdim])
    y = g.node("fc_bias", "add", [y, g.weight("fc.b", [hdim])], [tokens, hdim])
    g.outputs.append(g.act("act", "gelu_tanh", y))
    return g


def pointwise_graph(nops, log2n):
    g = ge.Graph("pw_n%d_%d" % (nops, log2n), 6, "bench pointwise chain")
    y = g.input("x", [1 << log2n])
    for i in range(nops):
        y = g.act("op%d" % i, CHAIN[i % len(CHAIN)], y)
    g.outputs.append(y)
    return g


def attn_graph(bh, seq, d):
    g = ge.Graph("attn_%dx%dx%d" % (bh, seq, d), 8, "bench attention")
    q, k, v = (g.input(n, [bh, seq, d]) for n in ("q", "k", "v"))
    y = g.node("qk", "matmul", [q, k], [bh, seq, seq], {"trans_b": True})
    y = g.node("sc", "mul", [y, g.weight("scale", [1])], [bh, seq, seq])
    y = g.node("sm", "softmax", [y], [bh, seq, seq])
    g.outputs.append(g.node("pv", "matmul", [y, v], [bh, seq, d]))
    return g


def ln_graph(tokens, c):
    g = ge.Graph("ln_%dx%d" % (tokens, c), 9, "bench layer norm")
    x, r = g.input("x", [tokens, c]), g.input("r", [tokens, c])
    u = g.add("res", x, r)
    g.outputs.append(g.node("ln", "layer_norm", [u, g.weight("ln.g", [c], "positive"), g.weight("ln.b", [c])],
                            [tokens, c]))
    return g


def ints(s):
    return [int(v) for v in s.split(",") if v.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--precisions", default="fp16_nhwc,bf16_nhwc,fp32,tf32")
    ap.add_argument("--gemm-precisions", default="fp16_nhwc,bf16_nhwc,tf32")
    ap.add_argument("--pointwise-precisions", default="fp32,fp16_nhwc")
    ap.add_argument("--tokens", default="1,16,64,512,4096")
    ap.add_argument("--gemm-shapes", default="768x3072,4096x11008")
    ap.add_argument("--pointwise-log2", default="24,26,28")
    ap.add_argument("--chains", default="2,4,6")
    ap.add_argument("--nets", default="resnet50,mobilenetv2")
    ap.add_argument("--attn-shapes", default="16x512x64,32x2048x64,16x1024x128")
    ap.add_argument("--attn-precisions", default="fp16_nhwc,bf16_nhwc")
    ap.add_argument("--ln-shapes", default="512x768,4096x768,4096x4096")
    ap.add_argument("--ln-precisions", default="fp16_nhwc,bf16_nhwc,fp32")
    ap.add_argument("--kinds", default="attn,ln,layer,net,gemm,pw")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    precs = [p for p in a.precisions.split(",") if p]
    for p in (precs + a.gemm_precisions.split(",") + a.pointwise_precisions.split(",") +
              a.attn_precisions.split(",") + a.ln_precisions.split(",")):
        if p and p not in DTYPE:
            ap.error("unknown precision '%s' (known: %s)" % (p, ", ".join(DTYPE)))
    kinds = set(a.kinds.split(","))
    nets = {"resnet50": ge.resnet50, "mobilenetv2": ge.mobilenetv2}
    # --tiny: one block of each network stands in for the whole network
    whole = {"resnet50": ge.resnet_bottleneck, "mobilenetv2": ge.mobilenetv2_block} if a.tiny else nets
    for n in a.nets.split(","):
        if n and n not in nets:
            ap.error("unknown network '%s' (known: %s)" % (n, ", ".join(nets)))
    batches, tokens = ints(a.batches), ints(a.tokens)
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.gemm_shapes.split(",") if s]
    logs, chains = ints(a.pointwise_log2), ints(a.chains)
    attn = [tuple(int(v) for v in s.split("x")) for s in a.attn_shapes.split(",") if s]
    lns = [tuple(int(v) for v in s.split("x")) for s in a.ln_shapes.split(",") if s]
    if a.tiny:
        batches, tokens, shapes, logs = [1, 2], [1, 16], [(64, 96)], [10]
        attn, lns = [(4, 16, 32)], [(16, 64)]
    gdir = os.path.join(a.out, "graphs")
    os.makedirs(gdir, exist_ok=True)
    rows = []

    def emit(gid, kind, prec, g):
        dt, lay = DTYPE[prec]
        base = gid.replace("/", "_").replace("^", "")
        y, j = os.path.join(gdir, base + ".yaml"), os.path.join(gdir, base + ".json")
        with open(y, "w") as f:
            f.write(yaml_text(g, dt, lay))
        s = spec(g, dt, lay)
        s["precision"] = "tf32" if prec == "tf32" else "exact"
        with open(j, "w") as f:
            json.dump(s, f)
        rows.append((gid, kind, prec, y, j))

    # attention and LayerNorm first: the budget of a run cuts the last graphs
    if "attn" in kinds:
        for bh, seq, d in attn:
            for p in [p for p in a.attn_precisions.split(",") if p in precs]:
                emit("attn/%dx%dx%d/%s" % (bh, seq, d, p), "attn", p, attn_graph(bh, seq, d))
    if "ln" in kinds:
        for t, c in lns:
            for p in [p for p in a.ln_precisions.split(",") if p in precs]:
                emit("ln/%dx%d/%s" % (t, c, p), "ln", p, ln_graph(t, c))
    for net in [n for n in a.nets.split(",") if n]:
        if "layer" in kinds:
            for key, c, h, w, k, r, s, grp, act in conv_layers(nets[net], a.tiny):
                for b in batches:
                    for p in precs:
                        emit("layer/%s/%s/b%d/%s" % (net, key, b, p), "layer", p,
                             layer_graph(net, key, c, h, w, k, r, s, grp, act, b))
        if "net" in kinds:
            for b in batches:
                for p in precs:
                    emit("net/%s/b%d/%s" % (net, b, p), "net", p, net_graph(whole[net], b, a.tiny))
    # GEMMs and chains run in the precisions asked for that they have
    gemm_precs = [p for p in a.gemm_precisions.split(",") if p in precs]
    pw_precs = [p for p in a.pointwise_precisions.split(",") if p in precs]
    if "gemm" in kinds:
        for d, hdim in shapes:
            for t in tokens:
                for p in gemm_precs:
                    emit("gemm/%dx%d/t%d/%s" % (d, hdim, t, p), "gemm", p, gemm_graph(d, hdim, t))
    if "pw" in kinds:
        for n in chains:
            for k in logs:
                for p in pw_precs:
                    emit("pw/n%d/2^%d/%s" % (n, k, p), "pw", p, pointwise_graph(n, k))
    with open(os.path.join(a.out, "manifest.tsv"), "w") as f:
        for r in rows:
            f.write("\t".join(r) + "\n")
    print("%d graphs in %s" % (len(rows), a.out))


if __name__ == "__main__":
    main()
