#!/usr/bin/env python3
"""torch_side.py -- the PyTorch side of the side-by-side GPU benchmark
(bench/device-check.sh, step 4): runs the graphs bench/gen_bench_graphs.py
wrote (their JSON twins) with PyTorch and prints one line per graph and
variant:

    id <tab> variant <tab> median_ms <tab> min_ms

Variants:
  layer, net   cudnn: channels_last, batch norm folded into the conv weights
               and bias (as fusegen folds it), torch.backends.cudnn.benchmark
               on, the whole forward captured in a CUDA graph
  gemm         addmm_act: torch._addmm_activation(bias, x, w, use_gelu=True)
               (cuBLASLt's fused epilogue; its GELU is the tanh form, as the
               graph's gelu_tanh); separate: torch.matmul, + bias, tanh GELU
  pw           eager: the chain op by op; copy: one copy of the input (the
               bandwidth a chain should reach)
  attn         sdpa: F.scaled_dot_product_attention on [1, BH, S, D] (its
               flash-attention kernel in fp16 / bf16); eager: matmul, scale,
               softmax, matmul (the S x S scores written)
  ln           layer_norm: x + r, then F.layer_norm (what the graph computes,
               two kernels); ln_only: F.layer_norm(x) alone (one kernel, no
               residual: the bound PyTorch's LayerNorm sets)
Each variant is captured in a CUDA graph after `warmup` eager runs and timed
as the median of `iters` replays, each between two CUDA events.  TF32 is on
(torch.backends.cuda.matmul.allow_tf32, cudnn.allow_tf32) only for graphs
of precision tf32; exact fp32 turns both off.

    python3 bench/torch_side.py MANIFEST [--kinds attn,ln,layer,net,gemm,pw]
        [--precisions ...] [--iters 50] [--warmup 5] [--dry-run]

--dry-run needs no torch: it reads every graph, folds, and checks that each
op has a PyTorch implementation, printing what would run.
"""
import argparse
import json
import statistics
import sys

UNARY = {"relu", "relu6", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "softplus"}
KNOWN = UNARY | {"conv2d", "batch_norm", "add", "max_pool2d", "avg_pool2d", "global_avg_pool", "flatten", "gemm",
                 "matmul", "mul", "softmax", "layer_norm"}


def plan_folds(spec):
    """conv nodes whose only consumer is a batch_norm: {conv: bn}."""
    consumers = {}
    for name, op, ins, attrs in spec["nodes"]:
        for i in ins:
            consumers.setdefault(i, []).append((name, op))
    folds = {}
    for name, op, ins, attrs in spec["nodes"]:
        c = consumers.get(name, [])
        if op == "conv2d" and len(c) == 1 and c[0][1] == "batch_norm" and name not in spec["outputs"]:
            folds[name] = c[0][0]
    return folds


def check(spec):
    bad = sorted({op for _, op, _, _ in spec["nodes"] if op not in KNOWN})
    if bad:
        raise SystemExit("torch_side: %s: no PyTorch implementation for %s" % (spec["name"], ", ".join(bad)))


class Runner:
    """Builds the weights of one graph and runs it (torch imported lazily)."""

    def __init__(self, torch, spec, device):
        self.t, self.spec = torch, spec
        F = torch.nn.functional
        self.F = F
        dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[spec["dtype"]]
        self.dtype = dt
        gen = torch.Generator(device="cpu").manual_seed(1)
        w = {}
        for name, shape, init in spec["weights"]:
            v = torch.randn(*shape, generator=gen) * (0.5 if init != "positive" else 0.1)
            if init == "positive":
                v = v.abs() + 0.5
            w[name] = v
        self.folds = plan_folds(spec)
        self.nodes = {n: (op, ins, attrs) for n, op, ins, attrs in spec["nodes"]}
        folded_bn = set(self.folds.values())
        # fold batch norm into conv weights and bias, in fp32, before the cast
        for conv, bn in self.folds.items():
            _, cins, _ = self.nodes[conv]
            _, bins, battrs = self.nodes[bn]
            gamma, beta, mean, var = (w[i] for i in bins[1:5])
            s = gamma / torch.sqrt(var + battrs.get("eps", 1e-5))
            wc = w[cins[1]] * s.reshape(-1, 1, 1, 1)
            b = w[cins[2]] if len(cins) > 2 else torch.zeros_like(mean)
            w[cins[1] + "#folded"] = wc
            w[conv + "#bias"] = (b - mean) * s + beta
        self.folded_bn = folded_bn
        cl = torch.channels_last
        self.w = {}
        for k, v in w.items():
            v = v.to(device=device, dtype=dt)
            self.w[k] = v.contiguous(memory_format=cl) if v.dim() == 4 else v.contiguous()
        self.inputs = {}
        for name, shape in spec["inputs"]:
            v = torch.rand(*shape, generator=gen).mul_(2).sub_(1).to(device=device, dtype=dt)
            self.inputs[name] = v.contiguous(memory_format=cl) if v.dim() == 4 else v

    def forward(self):
        t, F, w, env = self.t, self.F, self.w, dict(self.inputs)
        for name, op, ins, a in self.spec["nodes"]:
            x = env[ins[0]] if ins else None
            if name in self.folded_bn:
                env[name] = x
                continue
            if op == "conv2d":
                pad = a.get("padding", [0, 0])
                if len(pad) == 4:
                    x = F.pad(x, [pad[1], pad[3], pad[0], pad[2]])
                    pad = [0, 0]
                if name in self.folds:
                    weight, bias = w[ins[1] + "#folded"], w[name + "#bias"]
                else:
                    weight, bias = w[ins[1]], w[ins[2]] if len(ins) > 2 else None
                y = F.conv2d(x, weight, bias, a.get("stride", [1, 1]), pad, a.get("dilation", [1, 1]),
                             a.get("groups", 1))
            elif op == "batch_norm":
                y = F.batch_norm(x, w[ins[3]], w[ins[4]], w[ins[1]], w[ins[2]], False, 0.0, a.get("eps", 1e-5))
            elif op == "add":
                y = x + (env[ins[1]] if ins[1] in env else w[ins[1]])
            elif op == "max_pool2d":
                y = F.max_pool2d(x, a["kernel"], a.get("stride", a["kernel"]), a.get("padding", [0, 0]))
            elif op == "avg_pool2d":
                y = F.avg_pool2d(x, a["kernel"], a.get("stride", a["kernel"]), a.get("padding", [0, 0]))
            elif op == "global_avg_pool":
                y = F.adaptive_avg_pool2d(x, 1)
            elif op == "flatten":
                y = t.flatten(x, 1)
            elif op == "gemm":
                y = t.addmm(w[ins[2]], x, w[ins[1]])
            elif op == "matmul":
                b = env[ins[1]] if ins[1] in env else w[ins[1]]
                y = t.matmul(x, b.transpose(-1, -2) if a.get("trans_b") else b)
            elif op == "mul":
                y = x * (env[ins[1]] if ins[1] in env else w[ins[1]])
            elif op == "softmax":
                y = t.softmax(x, dim=a.get("axis", -1))
            elif op == "layer_norm":
                y = F.layer_norm(x, x.shape[-1:], w[ins[1]], w[ins[2]], a.get("eps", 1e-5))
            elif op == "relu":
                y = F.relu(x)
            elif op == "relu6":
                y = F.relu6(x)
            elif op == "sigmoid":
                y = t.sigmoid(x)
            elif op == "tanh":
                y = t.tanh(x)
            elif op == "silu":
                y = F.silu(x)
            elif op == "gelu":
                y = F.gelu(x)
            elif op == "gelu_tanh":
                y = F.gelu(x, approximate="tanh")
            elif op == "softplus":
                y = F.softplus(x)
            else:
                raise ValueError("unsupported op " + op)
            env[name] = y
        return [env[o] for o in self.spec["outputs"]]


def time_graph(torch, fn, warmup, iters):
    """Median and minimum ms of CUDA-graph replays of fn."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(max(warmup, 1)):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    del g
    return statistics.median(times), min(times)


def variants(torch, kind, spec, runner):
    """(variant name, callable) pairs for one graph."""
    if kind in ("layer", "net"):
        return [("cudnn", runner.forward)]
    if kind == "gemm":
        x = runner.inputs["x"]
        w, b = runner.w["fc.w"], runner.w["fc.b"]
        F = torch.nn.functional
        return [("addmm_act", lambda: torch._addmm_activation(b, x, w, use_gelu=True)),
                ("separate", lambda: F.gelu(torch.matmul(x, w) + b, approximate="tanh"))]
    if kind == "attn":
        F = torch.nn.functional
        q, k, v = (runner.inputs[n].unsqueeze(0) for n in ("q", "k", "v"))
        scale = 1.0 / q.shape[-1] ** 0.5
        return [("sdpa", lambda: F.scaled_dot_product_attention(q, k, v, scale=scale)), ("eager", runner.forward)]
    if kind == "ln":
        F = torch.nn.functional
        x = runner.inputs["x"]
        g, b = runner.w["ln.g"], runner.w["ln.b"]
        return [("layer_norm", runner.forward), ("ln_only", lambda: F.layer_norm(x, x.shape[-1:], g, b))]
    if kind == "pw":
        x = runner.inputs["x"]
        y = torch.empty_like(x)
        return [("eager", runner.forward), ("copy", lambda: y.copy_(x))]
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("manifest")
    ap.add_argument("--kinds", default="attn,ln,layer,net,gemm,pw")
    ap.add_argument("--precisions", default="")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    if a.iters < 1 or a.warmup < 0:
        ap.error("--iters must be at least 1 and --warmup at least 0")
    kinds = set(a.kinds.split(","))
    precs = set(p for p in a.precisions.split(",") if p)
    rows = []
    with open(a.manifest) as f:
        for line in f:
            gid, kind, prec, _yaml, js = line.rstrip("\n").split("\t")
            if kind in kinds and (not precs or prec in precs):
                rows.append((gid, kind, prec, js))
    if a.dry_run:
        for gid, kind, prec, js in rows:
            with open(js) as f:
                spec = json.load(f)
            check(spec)
            folds = plan_folds(spec)
            print("%s\t%s: %d ops, %d batch norms folded, tf32 %s" % (gid, kind, len(spec["nodes"]), len(folds),
                                                                     "on" if spec["precision"] == "tf32" else "off"))
        print("torch_side: dry run, %d graphs checked" % len(rows), file=sys.stderr)
        return 0
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("torch_side: no CUDA device")
    torch.backends.cudnn.benchmark = True
    print("# torch %s, cuDNN %s, %s" % (torch.__version__, torch.backends.cudnn.version(),
                                        torch.cuda.get_device_name()), flush=True)
    with torch.inference_mode():
        for gid, kind, prec, js in rows:
            with open(js) as f:
                spec = json.load(f)
            check(spec)
            tf32 = spec.get("precision") == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            try:
                runner = Runner(torch, spec, "cuda")
                for name, fn in variants(torch, kind, spec, runner):
                    med, lo = time_graph(torch, fn, a.warmup, a.iters)
                    print("%s\t%s\t%.4f\t%.4f" % (gid, name, med, lo), flush=True)
                del runner
            except Exception as e:  # one graph's failure is a row, not the end of the run
                print("%s\t-\tFAIL\t%s" % (gid, str(e).replace("\t", " ").replace("\n", " ")[:300]), flush=True)
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
