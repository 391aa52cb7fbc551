#!/usr/bin/env python3
"""model_zoo.py -- the models people export today, through fusegen's ONNX
import, against onnxruntime.

Builds models from torchvision (classification and segmentation), timm and
Hugging Face transformers constructors with random weights and tiny
configurations (never a download), plus a small UNet (ConvTranspose,
Upsample) and a YOLO-style block (Split, Concat, Upsample) of its own,
exports each with both PyTorch exporters (the TorchScript one, opset 17,
and the torch.export-based one), and for every export records:

  ops      the ONNX model's node count
  plan     whether fusegen loads and plans it, else its first error
  kernels  the plan's kernels and the graph nodes they compute
  rel L2   with --run: the largest relative L2 distance of fusegen's outputs
           in CPU emulation from onnxruntime's on the same random inputs
           (fp32; the tolerance is 1e-4)

    python3 tests/onnx/model_zoo.py [--run] [--only REGEX] [--exporters torchscript,dynamo]
                                    [--table docs-table.md] [--keep DIR] [--timeout S]
                                    [--half] [--calibrate-bn]

--calibrate-bn gives every batch norm the statistics of one random batch
before the export (calibrate_bn): at random init the running statistics
(0, 1) leave a segmentation head's output nearly its bias, which compares
little.  Calibrated, a deep network's fp32 result is only as good as fp32
accumulation lets it be (the folded batch norm's shift cancels most of
each conv's sum), so the arbiter is a float64 copy of the export run by
onnx.reference (f64ref.py): the row's message gives fusegen's,
onnxruntime's and onnx.reference's (fp32) distances to it, and the row is
ok when fusegen is within 1e-4 of onnxruntime or no farther from float64
than twice the farther of the two other fp32 runtimes.

Environment: FUSEGEN_LIB (libfusegen.so; default build/libfusegen.so).
Each export is loaded in a child process with a time limit, so a crash or
a hang is a row of the table, not the end of the run.  Exit 77 (skipped)
when torch, torchvision, transformers, onnx or onnxruntime are missing;
otherwise 0 (the table is the result: this is a survey, not a test with
expected failures).  Seeds are fixed (torch.manual_seed(0), numpy 1234)
and printed.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


# ---- the models ---------------------------------------------------------------

def _tv(name, size=64, **kw):
    def make():
        import torch
        import torchvision.models as tvm
        m = getattr(tvm, name)(weights=None, **kw)
        for mod in m.modules():   # torchvision's ViT starts its head at zero: an all-zero output compares nothing
            if isinstance(mod, torch.nn.Linear) and not mod.weight.any():
                torch.nn.init.normal_(mod.weight, std=0.02)
        return m
    return make, lambda torch: (torch.randn(1, 3, size, size),)


def _tv_seg(name, size=64):
    def make():
        import torch
        import torchvision.models.segmentation as seg

        class Out(torch.nn.Module):   # the dict output's "out" tensor
            def __init__(self):
                super().__init__()
                self.m = getattr(seg, name)(weights=None, weights_backbone=None, num_classes=4, aux_loss=False)

            def forward(self, x):
                return self.m(x)["out"]
        return Out()
    return make, lambda torch: (torch.randn(1, 3, size, size),)


def _timm(name, size=64):
    def make():
        import timm
        return timm.create_model(name, pretrained=False, num_classes=10)
    return make, lambda torch: (torch.randn(1, 3, size, size),)


def _unet():
    import torch
    nn = torch.nn

    def block(ci, co):
        return nn.Sequential(nn.Conv2d(ci, co, 3, padding=1), nn.BatchNorm2d(co), nn.ReLU(),
                             nn.Conv2d(co, co, 3, padding=1), nn.BatchNorm2d(co), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2, self.mid = block(3, 8), block(8, 16), block(16, 32)
            self.up2 = nn.ConvTranspose2d(32, 16, 2, stride=2)
            self.d2 = block(32, 16)
            self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.d1 = block(16 + 8, 8)
            self.head = nn.Conv2d(8, 2, 1)

        def forward(self, x):
            a = self.e1(x)
            b = self.e2(nn.functional.max_pool2d(a, 2))
            m = self.mid(nn.functional.max_pool2d(b, 2))
            u = self.d2(torch.cat([self.up2(m), b], 1))
            return self.head(self.d1(torch.cat([self.up1(u), a], 1)))
    return UNet()


def _yolo_block():
    import torch
    nn = torch.nn

    def cbs(ci, co, k=1, s=1):
        return nn.Sequential(nn.Conv2d(ci, co, k, s, k // 2, bias=False), nn.BatchNorm2d(co), nn.SiLU())

    class C2f(nn.Module):   # split in halves, a bottleneck chain, concat
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2 = cbs(c, c), cbs(c + c // 2, c)
            self.m = nn.Sequential(cbs(c // 2, c // 2, 3), cbs(c // 2, c // 2, 3))

        def forward(self, x):
            a, b = self.cv1(x).chunk(2, 1)
            return self.cv2(torch.cat([a, b, self.m(b) + b], 1))

    class Neck(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.down, self.c2f = cbs(3, 16, 3, 2), cbs(16, 32, 3, 2), C2f(32)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.fuse = C2f(48)

        def forward(self, x):
            p3 = self.stem(x)
            p4 = self.c2f(self.down(p3))
            return self.fuse(torch.cat([self.up(p4), p3], 1))
    return Neck()


def _hf(kind):
    def make():
        import transformers as T
        small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        if kind == "bert":
            return T.BertModel(T.BertConfig(vocab_size=100, max_position_embeddings=64, **small))
        if kind == "distilbert":
            return T.DistilBertModel(T.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=2,
                                                        hidden_dim=64, max_position_embeddings=64))
        if kind == "gpt2":
            return T.GPT2Model(T.GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=2))
        if kind == "vit":
            return T.ViTModel(T.ViTConfig(image_size=32, patch_size=8, num_channels=3, **small))
        if kind == "llama":
            return T.LlamaModel(T.LlamaConfig(vocab_size=100, max_position_embeddings=64, num_key_value_heads=1,
                                              **small))
        if kind == "whisper":
            cfg = T.WhisperConfig(vocab_size=100, d_model=32, encoder_layers=2, encoder_attention_heads=2,
                                  decoder_layers=1, decoder_attention_heads=2, encoder_ffn_dim=64,
                                  decoder_ffn_dim=64, num_mel_bins=8, max_source_positions=16,
                                  pad_token_id=1, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
            return T.WhisperModel(cfg).encoder
        if kind == "t5":
            return T.T5EncoderModel(T.T5Config(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                               num_heads=2))
        raise KeyError(kind)

    def inputs(torch):
        if kind == "vit":
            return (torch.randn(1, 3, 32, 32),)
        if kind == "whisper":
            return (torch.randn(1, 8, 32),)
        return (torch.randint(0, 100, (1, 7)),)
    return make, inputs


def _own(fn, shape):
    return fn, lambda torch: (torch.randn(*shape),)


def _hf_masked(kind):
    make, _ = _hf(kind)

    class Masked:
        def __call__(self):
            import torch

            class M(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.m = make()

                def forward(self, ids, mask):
                    return self.m(input_ids=ids, attention_mask=mask).last_hidden_state
            return M()
    return Masked(), lambda torch: (torch.randint(0, 100, (2, 7)),
                                    torch.tensor([[1] * 7, [1] * 4 + [0] * 3], dtype=torch.int64))


MODELS = {
    # classic CNNs (expected to run today: the regression guard)
    "resnet18": _tv("resnet18"),
    "mobilenet_v3_small": _tv("mobilenet_v3_small"),
    "alexnet": _tv("alexnet", 64),
    # today's CNNs and hybrids
    "shufflenet_v2_x0_5": _tv("shufflenet_v2_x0_5"),
    "convnext_tiny": _tv("convnext_tiny"),
    "vit_b_16": _tv("vit_b_16", 32, image_size=32),
    "swin_t": _tv("swin_t"),
    "mobilevit_xxs": _timm("mobilevit_xxs"),
    "ghostnet_100": _timm("ghostnet_100"),
    # dense prediction
    "fcn_resnet50": _tv_seg("fcn_resnet50"),
    "deeplabv3_mobilenet_v3_large": _tv_seg("deeplabv3_mobilenet_v3_large"),
    "lraspp_mobilenet_v3_large": _tv_seg("lraspp_mobilenet_v3_large"),
    "unet": _own(_unet, (1, 3, 32, 32)),
    "yolo_block": _own(_yolo_block, (1, 3, 32, 32)),
    # transformers
    "bert": _hf("bert"),
    "bert_masked": _hf_masked("bert"),
    "distilbert": _hf("distilbert"),
    "gpt2": _hf("gpt2"),
    "vit_hf": _hf("vit"),
    "llama": _hf("llama"),
    "llama_masked": _hf_masked("llama"),
    "whisper_encoder": _hf("whisper"),
    "t5_encoder": _hf("t5"),
}


# ---- export (parent) -------------------------------------------------------------

def calibrate_bn(m, inputs, torch, batch=4, seed=1):
    """Gives every batch norm of module m the statistics of one random
    batch: in train mode with momentum 1 the running mean and var become
    those of a batch of `batch` draws of inputs(torch) (seed fixed), then m
    is put back in eval mode.  At random init a batch norm's running
    statistics are (0, 1), which leaves activations uncentred and a
    segmentation head's output nearly its bias; calibrated, every layer
    sees unit-scale data as a trained network does.  Returns the number of
    batch norms calibrated (0: m is unchanged)."""
    bns = [x for x in m.modules() if isinstance(x, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    torch.manual_seed(seed)
    draws = [inputs(torch) for _ in range(batch)]
    args = tuple(torch.cat([d[i] for d in draws]) for i in range(len(draws[0])))
    saved = [x.momentum for x in bns]
    for x in bns:
        x.momentum = 1.0
    m.train()
    with torch.no_grad():
        m(*args)
    for x, mo in zip(bns, saved):
        x.momentum = mo
    m.eval()
    return len(bns)


def export(name, exporter, path, half=False, calibrate=False):
    """Exports MODELS[name] with the exporter to path (in fp16 with half:
    the module's parameters and floating inputs; with calibrate, its batch
    norms calibrated first, see calibrate_bn); returns the inputs as numpy
    arrays, or raises with the exporter's message."""
    import warnings
    import torch
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    make, inputs = MODELS[name]
    m = make().eval()
    args = inputs(torch)   # drawn first: the same inputs with and without calibrate
    if calibrate:
        calibrate_bn(m, inputs, torch)
    if half:
        m = m.half()
        args = tuple(a.half() if a.is_floating_point() else a for a in args)
    with torch.no_grad():
        # The HF models return ModelOutput dicts: the first tensor is the one exported.
        class First(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, *a):
                y = self.inner(*a)
                if isinstance(y, dict):
                    y = y.get("last_hidden_state", next(iter(y.values())))
                elif isinstance(y, (tuple, list)):
                    y = y[0]
                return y
        wrapped = First(m).eval()
        if exporter == "torchscript":
            torch.onnx.export(wrapped, args, path, opset_version=17, dynamo=False,
                              input_names=["input_%d" % i for i in range(len(args))], output_names=["output"])
        else:
            torch.onnx.export(wrapped, args, path, dynamo=True, external_data=False, verbose=False)
    return [a.numpy() for a in args]


def judge_f64(model, feeds, outs, ref, worst, limit):
    """(status, message) of a calibrated fp32 row: the distances of fusegen
    (outs), onnxruntime (ref) and onnx.reference in fp32 to a float64 run
    of the same export (the largest over the outputs); ok when fusegen is
    within limit of onnxruntime (worst) or no farther from float64 than
    twice the farther of the other two."""
    sys.path.insert(0, HERE)
    import f64ref
    from onnx.reference import ReferenceEvaluator
    try:
        r64 = f64ref.run(model, feeds)
        r32 = ReferenceEvaluator(model).run(None, feeds)
    except Exception as e:  # the reference's own failure leaves onnxruntime the judge
        return ("ok" if worst <= limit else "mismatch"), "no float64 reference: %s" % str(e).split("\n")[0][:120]
    d = [max(f64ref.rel_l2(a, b) for a, b in zip(xs, r64)) for xs in (outs, ref, r32)]
    ok = worst <= limit or d[0] <= 2 * max(d[1], d[2])
    why = "vs float64: fusegen %.2e, onnxruntime %.2e, onnx.reference fp32 %.2e" % tuple(d)
    return ("ok" if ok else "mismatch"), why


# ---- load, plan, run (child) --------------------------------------------------------

def child(name, exporter, path, do_run, half, calibrate=False):
    """Exports MODELS[name] to path, then loads, plans and (do_run) runs it;
    prints one line: ops<TAB>status<TAB>kernels/nodes<TAB>rel_l2<TAB>message.
    The limit on rel L2 is 1e-4, 1e-2 in fp16 (half); with calibrate (batch
    norms calibrated, fp32) the float64 reference judges too (main's
    docstring)."""
    import numpy as np
    import onnx
    try:
        arrays = export(name, exporter, path, half, calibrate)
    except Exception as e:  # the exporter's own failure is a row
        print("-\texport fails\t-\t-\t%s" % str(e).replace("\t", " ").split("\n")[0][:200])
        return
    sys.path.insert(0, HERE)
    import fgapi
    model = onnx.load(path)
    nops = len(model.graph.node)
    lib = fgapi.Lib(os.environ.get("FUSEGEN_LIB", os.path.join(ROOT, "build", "libfusegen.so")))
    try:
        g = lib.load(path)
        kernels, nodes = fgapi.plan_counts(lib, g)
    except fgapi.FusegenError as e:
        msg = e.args[1][0] if len(e.args) > 1 and e.args[1] else str(e)
        print("%d\tfails\t-\t-\t%s" % (nops, msg.replace("\t", " ").replace("\n", " ")[:300]))
        return
    if not do_run:
        print("%d\tplans\t%d/%d\t-\t" % (nops, kernels, nodes))
        return
    import onnxruntime as ort
    try:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {i.name: a for i, a in zip(sess.get_inputs(), arrays)}
        ref = sess.run(None, feeds)
    except Exception as e:  # an export onnxruntime refuses is a row, not a comparison
        print("%d\tort-fails\t%d/%d\t-\t%s" % (nops, kernels, nodes, str(e).replace("\n", " ")[:200]))
        return
    try:
        outs, nk, _ = fgapi.run_ordered(lib, g, arrays)
    except fgapi.FusegenError as e:
        msg = e.args[1][0] if len(e.args) > 1 and e.args[1] else str(e)
        print("%d\truns-fail\t%d/%d\t-\t%s" % (nops, kernels, nodes, msg.replace("\n", " ")[:300]))
        return
    worst, flat = 0.0, False
    for o, r in zip(outs, ref):
        r = np.asarray(r, dtype=np.float64)
        flat = flat or not np.any(r) or not np.all(np.isfinite(r))   # nothing to compare against
        d = np.linalg.norm(o.astype(np.float64).ravel() - r.ravel()) / max(np.linalg.norm(r.ravel()), 1e-30)
        worst = max(worst, d if np.isfinite(d) else float("inf"))
    limit = 1e-2 if half else 1e-4
    status = "degenerate" if flat else "ok" if worst <= limit else "mismatch"
    why = "onnxruntime's output is all zero or not finite (random weights in this dtype)" if flat else ""
    if calibrate and not half and not flat:
        status, why = judge_f64(model, feeds, outs, ref, worst, limit)
    print("%d\t%s\t%d/%d\t%.2e\t%s" % (nops, status, nk, nodes, worst, why))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true", help="run in emulation and compare with onnxruntime")
    ap.add_argument("--only", default=".", help="regex over model names")
    ap.add_argument("--exporters", default="torchscript,dynamo")
    ap.add_argument("--table", help="write the markdown table here too")
    ap.add_argument("--keep", help="keep the exported models in this directory")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--half", action="store_true", help="export in fp16 (model.half()); limit 1e-2")
    ap.add_argument("--calibrate-bn", action="store_true",
                    help="give batch norms a random batch's statistics; judge against a float64 reference too")
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], a.child[2], a.child[3] == "1", a.child[4] == "1", a.child[5] == "1")
        return 0
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print("skipped: %s (pip install torch torchvision transformers timm onnxscript onnx onnxruntime)" % e)
        return 77
    print("seeds: torch.manual_seed(0) per model; inputs drawn by torch%s" %
          ("; batch norms calibrated on 4 draws after torch.manual_seed(1)" if a.calibrate_bn else ""))
    out = a.keep or tempfile.mkdtemp(prefix="fusegen-zoo-")
    os.makedirs(out, exist_ok=True)
    rows = []
    for name in MODELS:
        if not re.search(a.only, name):
            continue
        for ex in a.exporters.split(","):
            path = os.path.join(out, "%s.%s%s%s.onnx" % (name, ex, ".fp16" if a.half else "",
                                                         ".bn" if a.calibrate_bn else ""))
            try:
                r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, ex, path,
                                    "1" if a.run else "0", "1" if a.half else "0",
                                    "1" if a.calibrate_bn else "0"], capture_output=True, text=True, timeout=a.timeout)
                lines = [x for x in r.stdout.split("\n") if x.count("\t") == 4]
                f = lines[-1].split("\t") if lines else ["-", "crash(rc %d)" % r.returncode, "-", "-",
                                                         (r.stderr.strip().splitlines() or [""])[-1][:200]]
            except subprocess.TimeoutExpired:
                f = ["-", "timeout", "-", "-", "over %d s" % a.timeout]
            rows.append((name, ex + (" fp16" if a.half else "") + (" bn" if a.calibrate_bn else ""), *f))
            print("%-30s %-11s %s" % (name, ex, "  ".join(x for x in f if x)), flush=True)
    lines = ["| model | exporter | ONNX ops | fusegen | kernels / nodes | rel L2 vs onnxruntime | first error |",
             "|---|---|---|---|---|---|---|"]
    lines += ["| %s |" % " | ".join(x.replace("|", "\\|") for x in row) for row in rows]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if a.table:
        with open(a.table, "w") as fh:
            fh.write(text)
    if not a.keep:
        subprocess.run(["rm", "-rf", out])
    return 0


if __name__ == "__main__":
    sys.exit(main())
