#!/usr/bin/env python3
"""side_table.py -- joins the two sides of the GPU benchmark
(bench/device-check.sh, step 4) into the tables it prints last.

    python3 bench/side_table.py MANIFEST FUSED_TSV UNFUSED_TSV TORCH_TSV OUT_DIR [NOPDL_TSV]

FUSED_TSV / UNFUSED_TSV: bench_graphs lines (id, kernels, median_ms, min_ms)
of the shipped rules and of the rules without fusion; NOPDL_TSV (optional):
the same for graphs run with FUSEGEN_PDL=0 (no programmatic dependent
launch), shown beside the whole networks; TORCH_TSV:
torch_side.py lines (id, variant, median_ms, min_ms).  Missing files or rows
print as '-'.  Writes OUT_DIR/side-layers.txt (every layer) and
OUT_DIR/side-summary.txt (what is printed: attention, LayerNorm, whole
networks, conv layers, GEMMs, element-wise chains).  Ratios are speedups of fusegen:
x = other side's time / fusegen's time (above 1: fusegen is faster).
"""
import math
import os
import sys


def read(path, keyed_variant=False):
    rows = {}
    if not path or not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            p = line.rstrip("\n").split("\t")
            if len(p) < 3 or p[2] == "FAIL":
                continue
            try:
                ms = float(p[2])
            except ValueError:
                continue
            if keyed_variant:
                rows[(p[0], p[1])] = ms
            else:
                rows[p[0]] = (p[1], ms)
    return rows


def fmt(v, spec="%.4f"):
    return spec % v if v is not None else "-"


def ratio(a, b):
    return a / b if a is not None and b else None


def geomean(v):
    v = [x for x in v if x]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def main():
    if len(sys.argv) not in (6, 7):
        sys.exit(__doc__)
    manifest, fused_p, unfused_p, torch_p, out = sys.argv[1:6]
    nopdl = read(sys.argv[6] if len(sys.argv) == 7 else None)
    rows = [line.rstrip("\n").split("\t") for line in open(manifest) if line.strip()]
    fused, unfused, torch = read(fused_p), read(unfused_p), read(torch_p, True)
    ms = lambda d, i: d[i][1] if i in d else None  # noqa: E731
    kn = lambda d, i: d[i][0] if i in d else "-"  # noqa: E731
    summary, layers = [], []

    summary.append("attention softmax(q k^T * scale) v, one fusegen kernel: median ms; x = other / fusegen")
    summary.append("%-16s %-10s %8s %9s %7s %9s %7s" % ("BH x S x D", "precision", "fusegen", "sdpa", "x", "eager",
                                                      "x"))
    for gid, kind, prec, _, _ in rows:
        if kind != "attn":
            continue
        _, shape, _ = gid.split("/")
        f, a, e = ms(fused, gid), torch.get((gid, "sdpa")), torch.get((gid, "eager"))
        summary.append("%-16s %-10s %8s %9s %7s %9s %7s" % (shape, prec, fmt(f), fmt(a), fmt(ratio(a, f), "%.2f"),
                                                          fmt(e), fmt(ratio(e, f), "%.2f")))
    summary.append("")
    summary.append("LayerNorm(x + r) over the last axis, one fusegen kernel: median ms; x = other / fusegen")
    summary.append("%-12s %-10s %8s %10s %7s %9s %7s" % ("T x C", "precision", "fusegen", "layer_norm", "x",
                                                       "ln_only", "x"))
    for gid, kind, prec, _, _ in rows:
        if kind != "ln":
            continue
        _, shape, _ = gid.split("/")
        f, a, o = ms(fused, gid), torch.get((gid, "layer_norm")), torch.get((gid, "ln_only"))
        summary.append("%-12s %-10s %8s %10s %7s %9s %7s" % (shape, prec, fmt(f), fmt(a), fmt(ratio(a, f), "%.2f"),
                                                           fmt(o), fmt(ratio(o, f), "%.2f")))
    summary.append("")
    summary.append("whole networks: median ms per run, CUDA graph replay on both sides; x = other / fusegen; "
                   "no PDL: fusegen with FUSEGEN_PDL=0")
    summary.append("%-12s %-5s %-10s %8s %9s %9s %7s %9s %7s %9s %7s" % (
        "net", "batch", "precision", "kernels", "fusegen", "pytorch", "x", "unfused", "x", "no PDL", "x"))
    for gid, kind, prec, _, _ in rows:
        if kind != "net":
            continue
        _, net, b, _ = gid.split("/")
        f, t, u, n = ms(fused, gid), torch.get((gid, "cudnn")), ms(unfused, gid), ms(nopdl, gid)
        summary.append("%-12s %-5s %-10s %8s %9s %9s %7s %9s %7s %9s %7s" % (
            net, b[1:], prec, kn(fused, gid), fmt(f), fmt(t), fmt(ratio(t, f), "%.2f"), fmt(u),
            fmt(ratio(u, f), "%.2f"), fmt(n), fmt(ratio(n, f), "%.2f")))

    layers.append("%-58s %8s %9s %7s %9s %7s" % ("layer", "fusegen", "pytorch", "x", "unfused", "x"))
    groups = {}
    for gid, kind, prec, _, _ in rows:
        if kind != "layer":
            continue
        _, net, shape, b, _ = gid.split("/")
        f, t, u = ms(fused, gid), torch.get((gid, "cudnn")), ms(unfused, gid)
        layers.append("%-58s %8s %9s %7s %9s %7s" % (gid, fmt(f), fmt(t), fmt(ratio(t, f), "%.2f"), fmt(u),
                                                    fmt(ratio(u, f), "%.2f")))
        g = groups.setdefault((net, b, prec), {"n": 0, "x": [], "ux": [], "worst": []})
        g["n"] += 1
        if ratio(t, f):
            g["x"].append(ratio(t, f))
            g["worst"].append((ratio(t, f), shape))
        if ratio(u, f):
            g["ux"].append(ratio(u, f))
    summary.append("")
    summary.append("conv layers (conv + folded BN + activation): geometric mean of x over the distinct shapes "
                   "(all rows: side-layers.txt)")
    summary.append("%-12s %-5s %-10s %6s %10s %8s %10s  %s" % ("net", "batch", "precision", "layers", "x pytorch",
                                                             "min x", "x unfused", "slowest vs pytorch"))
    for (net, b, prec), g in groups.items():
        worst = sorted(g["worst"])[:2]
        summary.append("%-12s %-5s %-10s %6d %10s %8s %10s  %s" % (
            net, b[1:], prec, g["n"], fmt(geomean(g["x"]), "%.2f"), fmt(min(g["x"]) if g["x"] else None, "%.2f"),
            fmt(geomean(g["ux"]), "%.2f"), ", ".join("%s %.2f" % (s, x) for x, s in worst) or "-"))

    summary.append("")
    summary.append("GEMM + bias + tanh GELU: median ms; x = other / fusegen")
    summary.append("%-12s %-6s %-10s %9s %10s %7s %9s %7s" % ("shape", "tokens", "precision", "fusegen", "addmm_act",
                                                            "x", "separate", "x"))
    for gid, kind, prec, _, _ in rows:
        if kind != "gemm":
            continue
        _, shape, t, _ = gid.split("/")
        f, a, s = ms(fused, gid), torch.get((gid, "addmm_act")), torch.get((gid, "separate"))
        summary.append("%-12s %-6s %-10s %9s %10s %7s %9s %7s" % (shape, t[1:], prec, fmt(f), fmt(a),
                                                                fmt(ratio(a, f), "%.2f"), fmt(s),
                                                                fmt(ratio(s, f), "%.2f")))

    summary.append("")
    summary.append("pointwise chains: median ms; of copy = copy time / chain time (the share of copy bandwidth)")
    summary.append("%-4s %-6s %-10s %9s %9s %8s %9s" % ("ops", "n", "precision", "fusegen", "copy", "of copy",
                                                      "eager"))
    for gid, kind, prec, _, _ in rows:
        if kind != "pw":
            continue
        _, n, size, _ = gid.split("/")
        f, c, e = ms(fused, gid), torch.get((gid, "copy")), torch.get((gid, "eager"))
        summary.append("%-4s %-6s %-10s %9s %9s %8s %9s" % (n[1:], size, prec, fmt(f), fmt(c),
                                                          fmt(ratio(c, f), "%.2f"), fmt(e)))

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "side-layers.txt"), "w") as f:
        f.write("\n".join(layers) + "\n")
    with open(os.path.join(out, "side-summary.txt"), "w") as f:
        f.write("\n".join(summary) + "\n")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
