#!/usr/bin/env python3
"""zoo_graphs.py -- exported models of today without torch: the graphs of
tests/onnx/model_zoo.py's exports, kept in the tree without their weights,
run against onnxruntime.

The model zoo needs torch, torchvision, timm and transformers (several GB),
which CI does not install.  This script keeps what CI can check:

  --make     (needs torch and the rest; run by hand when the exporters or
             the zoo change) exports the models of SET below through
             model_zoo.export, and writes tests/onnx/zoo/<model>.<exporter>
             [.fp16].onnx with every floating initializer of more than 64
             elements replaced by its statistics (its data cleared; the
             tensor's doc_string holds "fusegen-regen <mean> <std> <1 when
             no element is negative>"), and
             tests/onnx/zoo/index.json: per file the inputs (name, dtype,
             shape; integer inputs -- token ids, masks -- verbatim), the
             ONNX op counts and the kernels fusegen planned at --make time.
  (default)  for every file in the index: regenerates the cleared
             initializers from a seed (normal(mean, std) per tensor, so
             norms' ones and biases' zeros come back as such), draws the
             float inputs from the seed (a tensor of no negative element,
             such as a batch norm's variance, as |normal|), calibrates
             the convolutions of the files in CALIBRATE (calibrate_convs),
             runs onnxruntime and fusegen (CPU emulation), and checks
               - every output within rel L2 1e-4 (fp32) / 1e-2 (fp16);
               - the plan has no more kernels than at --make time;
               - one `attention` kernel per Softmax of the model (every
                 attention block is one kernel), at least one `layernorm`
                 kernel per LayerNormalization node, and no residual Add a
                 LayerNormalization reads is a kernel of its own (it is
                 the norm's skip input, or the epilogue of the GEMM before
                 it where its sum is also the next block's residual).

Environment: FUSEGEN_LIB (libfusegen.so; default build/libfusegen.so).
Arguments: REGEX (only files whose name matches), -v.  Exit 77 (skipped)
without onnx, onnxruntime or numpy.
"""
import argparse
import json
import os
import re
import sys
import tempfile
import time

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper as nh
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZOO = os.path.join(HERE, "zoo")
sys.path.insert(0, HERE)
import fgapi  # noqa: E402

# (model, exporter, fp16): the text models with and without a mask, a vision
# transformer, dense prediction, today's CNNs (small enough for CI's time).
SET = [
    ("bert", "dynamo", False), ("bert_masked", "torchscript", False), ("distilbert", "dynamo", False),
    ("gpt2", "torchscript", False), ("vit_hf", "dynamo", False), ("llama_masked", "dynamo", False),
    ("whisper_encoder", "dynamo", False), ("t5_encoder", "torchscript", False),
    ("bert", "dynamo", True), ("llama_masked", "dynamo", True),
    ("unet", "dynamo", False), ("yolo_block", "torchscript", False), ("shufflenet_v2_x0_5", "dynamo", False),
    ("convnext_tiny", "dynamo", False), ("deeplabv3_mobilenet_v3_large", "dynamo", False),
    ("llama_masked", "torchscript", True), ("t5_encoder", "torchscript", True),
]
# Exports whose regenerated weights leave the output (nearly) independent of
# the input, as their batch norms were folded away with random-init
# statistics: two inputs' outputs differ by 0 (DeepLabV3), 6.8e-5
# (ShuffleNetV2), 5.5e-2 (UNet) relative, by 1.1, 0.18, 1.3 once their convs
# have a calibration input's statistics (calibrate_convs; about 1 s for
# DeepLabV3).
CALIBRATE = {"deeplabv3_mobilenet_v3_large.dynamo.onnx", "shufflenet_v2_x0_5.dynamo.onnx", "unet.dynamo.onnx"}
KEEP_NUMEL = 64
TAG = "fusegen-regen"
FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)


def strip(model):
    """Clears the data of model's large floating initializers in place,
    keeping their statistics in doc_string, and drops what only describes
    the export (node metadata: the exporter's stack traces; value_info)."""
    for n in model.graph.node:
        del n.metadata_props[:]
        n.doc_string = ""
    del model.graph.value_info[:]
    del model.metadata_props[:]
    for t in model.graph.initializer:
        if t.data_type not in FLOATS or int(np.prod(t.dims)) <= KEEP_NUMEL or t.doc_string.startswith(TAG):
            continue
        a = nh.to_array(t).astype(np.float64)
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.ClearField("int32_data")
        t.doc_string = "%s %.9g %.9g %d" % (TAG, a.mean(), a.std(), int(a.min() >= 0))


def regenerate(model, seed):
    """Fills the cleared initializers of model in place from seed."""
    rs = np.random.RandomState(seed)
    for t in model.graph.initializer:
        if not t.doc_string.startswith(TAG):
            continue
        f = t.doc_string.split()
        mean, std = float(f[1]), float(f[2])
        a = rs.normal(mean, std, size=tuple(t.dims)) if std > 0 else np.full(tuple(t.dims), mean)
        if len(f) > 3 and f[3] == "1":   # a tensor of no negative value (a batch norm's variance) stays so
            a = np.abs(a)
        dt = np.float16 if t.data_type == onnx.TensorProto.FLOAT16 else np.float32
        t.CopyFrom(nh.from_array(a.astype(dt), t.name))


def conv2d(x, w, b, strides, pads, dilations, group):
    """NCHW convolution in numpy (float64 when x is): what onnx.reference's
    Conv computes, without its per-group loops."""
    n, c, hh, ww = x.shape
    k, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    eh, ew = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (eh, ew), axis=(2, 3))
    win = win[:, :, ::strides[0], ::strides[1], ::dilations[0], ::dilations[1]]
    oh, ow = win.shape[2], win.shape[3]
    win = win.reshape(n, group, cg, oh, ow, kh, kw)
    y = np.einsum("ngchwij,gkcij->ngkhw", win, w.reshape(group, k // group, cg, kh, kw), optimize=True)
    y = y.reshape(n, k, oh, ow)
    return y + b.reshape(1, -1, 1, 1) if b is not None else y


def calibrate_convs(model, x, seed):
    """What calibrating a network's batch norms does, on an export whose
    batch norms are folded into its convs: one pass of onnx.reference over
    input x in which every 2-D Conv of more than 3 output positions gets the
    per-channel scale s = gamma/std and shift beta - mean*s of its output
    (gamma ~ 1 + 0.2 N(0,1), beta ~ 0.1 N(0,1) from seed), folded into its
    weight and bias in place (a conv without bias gets one).  The smaller
    convs (squeeze-excitation, global pooling branches) and those whose
    weight or bias is no initializer keep their weights."""
    from onnx.reference import ReferenceEvaluator
    rs = np.random.RandomState(seed)
    ev = ReferenceEvaluator(model)
    adj = {}
    for nd in ev.rt_nodes_:
        p = nd.onnx_node
        if p.op_type != "Conv":
            continue
        at = {a.name: (list(a.ints) if a.ints else a.i) for a in p.attribute}

        def run(*a, _p=p, _at=at, **_k):
            x, w = a[0].astype(np.float64), a[1].astype(np.float64)
            b = a[2].astype(np.float64) if len(a) > 2 and a[2] is not None else None
            y = conv2d(x, w, b, _at.get("strides", [1, 1]), _at.get("pads", [0, 0, 0, 0]),
                       _at.get("dilations", [1, 1]), _at.get("group", 1) or 1)
            if y.ndim != 4 or y.shape[0] * y.shape[2] * y.shape[3] < 4:
                return (y.astype(np.float32),)
            mean, std = y.mean(axis=(0, 2, 3)), y.std(axis=(0, 2, 3))
            s = (1 + 0.2 * rs.randn(len(std))) / np.where(std > 0, std, 1.0)
            sh = 0.1 * rs.randn(len(std)) - mean * s
            adj[_p.output[0]] = (s, sh)
            return ((y * s.reshape(1, -1, 1, 1) + sh.reshape(1, -1, 1, 1)).astype(np.float32),)
        nd.run = run
    ev.run(None, {model.graph.input[0].name: x})
    inits = {t.name: t for t in model.graph.initializer}
    for n in model.graph.node:
        if n.output[0] not in adj or n.input[1] not in inits or (len(n.input) > 2 and n.input[2] and
                                                                 n.input[2] not in inits):
            continue   # a weight or bias computed or held by a Constant node: left as it is
        s, sh = adj[n.output[0]]
        w = nh.to_array(inits[n.input[1]]).astype(np.float64)
        inits[n.input[1]].CopyFrom(nh.from_array((w * s.reshape(-1, 1, 1, 1)).astype(np.float32), n.input[1]))
        if len(n.input) < 3 or not n.input[2]:
            name = n.input[1] + ".calibrated_bias"
            model.graph.initializer.append(nh.from_array(np.zeros(len(s), np.float32), name))
            inits[name] = model.graph.initializer[-1]
            del n.input[2:]
            n.input.append(name)
        b = nh.to_array(inits[n.input[2]]).astype(np.float64)
        inits[n.input[2]].CopyFrom(nh.from_array((b * s + sh).astype(np.float32), n.input[2]))


def make(only):
    import model_zoo
    os.makedirs(ZOO, exist_ok=True)
    index = {}
    lib = fgapi.Lib(os.environ.get("FUSEGEN_LIB", os.path.join(ROOT, "build", "libfusegen.so")))
    with tempfile.TemporaryDirectory() as tmp:
        for name, ex, half in SET:
            fname = "%s.%s%s.onnx" % (name, ex, ".fp16" if half else "")
            if not re.search(only, fname):
                continue
            path = os.path.join(tmp, fname)
            arrays = model_zoo.export(name, ex, path, half)
            m = onnx.load(path)
            strip(m)
            onnx.save(m, os.path.join(ZOO, fname))
            g = lib.load(path)
            kernels, nodes = fgapi.plan_counts(lib, g)
            ins = []
            for vi, a in zip(m.graph.input, arrays):
                d = {"name": vi.name, "dtype": str(a.dtype), "shape": list(a.shape)}
                if a.dtype.kind in "iub":
                    d["values"] = a.astype(np.int64).ravel().tolist()
                ins.append(d)
            ops = {}
            for n in m.graph.node:
                ops[n.op_type] = ops.get(n.op_type, 0) + 1
            index[fname] = {"model": name, "exporter": ex, "fp16": half, "inputs": ins, "ops": ops,
                            "kernels": kernels, "bytes": os.path.getsize(os.path.join(ZOO, fname))}
            print("%-45s %7d bytes, %d kernels" % (fname, index[fname]["bytes"], kernels), flush=True)
    old = {}
    if os.path.exists(os.path.join(ZOO, "index.json")):
        with open(os.path.join(ZOO, "index.json")) as fh:
            old = json.load(fh)
    old.update(index)
    with open(os.path.join(ZOO, "index.json"), "w") as fh:
        json.dump(old, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return 0


def group_templates(lib, g):
    """[(template, [node names])] of g's plan, in group order."""
    L = lib.L
    if not getattr(L, "_fg_extra", False):
        fgapi._bind_extra(L)
        L._fg_extra = True
    p = fgapi.C.c_void_p()
    lib.check(L.fg_plan_build(lib.ctx, g, fgapi.C.byref(p)))
    try:
        out = []
        for i in range(L.fg_plan_group_count(p)):
            gi = fgapi.GroupInfo()
            lib.check(L.fg_plan_group_info(lib.ctx, p, i, fgapi.C.byref(gi)))
            out.append(((gi.template_name or b"").decode(), (gi.output or b"").decode(),
                        [gi.nodes[k].decode() for k in range(min(gi.nnodes, fgapi.GROUP_INFO_MAX_NODES))]))
        return out
    finally:
        L.fg_plan_free(p)


def check_one(lib, fname, ent, tmp, verbose):
    m = onnx.load(os.path.join(ZOO, fname))
    regenerate(m, 1234)
    if fname in CALIBRATE:
        d = ent["inputs"][0]
        calibrate_convs(m, np.random.RandomState(2468).randn(*d["shape"]).astype(d["dtype"]), 1357)
    path = os.path.join(tmp, fname)
    onnx.save(m, path)
    rs = np.random.RandomState(4321)
    arrays = []
    for d in ent["inputs"]:
        if "values" in d:
            arrays.append(np.array(d["values"], dtype=d["dtype"]).reshape(d["shape"]))
        else:
            arrays.append(rs.randn(*d["shape"]).astype(d["dtype"]))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), arrays)})
    g = lib.load(path)
    problems = []
    groups = group_templates(lib, g)
    outs, nk, _ = fgapi.run_ordered(lib, g, arrays)
    worst = 0.0
    for o, r in zip(outs, ref):
        r = np.asarray(r, dtype=np.float64).ravel()
        if not np.any(r) or not np.all(np.isfinite(r)):
            problems.append("onnxruntime's output is all zero or not finite: nothing to compare against")
        d = np.linalg.norm(o.astype(np.float64).ravel() - r) / max(np.linalg.norm(r), 1e-30)
        worst = max(worst, d if np.isfinite(d) else float("inf"))
    limit = 1e-2 if ent["fp16"] else 1e-4
    if not worst <= limit:
        problems.append("rel L2 %.2e > %.0e" % (worst, limit))
    if nk > ent["kernels"]:
        problems.append("%d kernels, %d at --make time" % (nk, ent["kernels"]))
    nattn = sum(t == "attention" for t, _, _ in groups)
    nsoft = ent["ops"].get("Softmax", 0)
    if nattn != nsoft:
        problems.append("%d attention kernels for %d Softmax nodes" % (nattn, nsoft))
    nln = sum(t == "layernorm" for t, _, _ in groups)
    if ent["ops"].get("LayerNormalization", 0) and nln < ent["ops"]["LayerNormalization"]:
        problems.append("%d layernorm kernels for %d LayerNormalization nodes" % (nln, ent["ops"]["LayerNormalization"]))
    # a residual Add that a LayerNormalization reads is no kernel of its own: the norm's skip
    # input (post-norm: the rewrite takes it into the layer_norm node) or the epilogue of the
    # kernel before it (pre-norm, where the sum is also the next block's residual)
    producer = {o: n for n in m.graph.node for o in n.output}
    anchors = {fgapi.node_id(nodes[0]) for t, _, nodes in groups if nodes}
    for n in m.graph.node:
        p = producer.get(n.input[0]) if n.op_type == "LayerNormalization" else None
        if p is not None and p.op_type == "Add" and fgapi.node_id(p.name) in anchors:
            problems.append("the residual add %s before %s is a kernel of its own" % (p.name, n.name))
    lib.free_graph(g)
    return worst, nk, nattn, nln, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--make", action="store_true")
    ap.add_argument("only", nargs="?", default=".")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    if a.make:
        return make(a.only)
    with open(os.path.join(ZOO, "index.json")) as fh:
        index = json.load(fh)
    lib = fgapi.Lib(os.environ.get("FUSEGEN_LIB", os.path.join(ROOT, "build", "libfusegen.so")))
    bad = 0
    with tempfile.TemporaryDirectory(prefix="fusegen-zoo-graphs-") as tmp:
        for fname in sorted(index):
            if not re.search(a.only, fname):
                continue
            t0 = time.time()
            try:
                worst, nk, nattn, nln, problems = check_one(lib, fname, index[fname], tmp, a.v)
            except fgapi.FusegenError as e:
                worst, nk, nattn, nln, problems = float("nan"), 0, 0, 0, ["fusegen: %s" % (e.args[1:] or e,)]
            bad += bool(problems)
            print("%-4s %-45s rel L2 %.2e  %3d kernels (%d attention, %d layernorm)  %5.1f s%s" % (
                "FAIL" if problems else "ok", fname, worst, nk, nattn, nln, time.time() - t0,
                "  " + "; ".join(problems) if problems else ""), flush=True)
    print("zoo graphs: %d problem(s)" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
