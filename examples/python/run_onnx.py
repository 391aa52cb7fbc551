#!/usr/bin/env python3
"""run_onnx.py -- an ONNX model through fusegen from Python.

Loads a model (the file given, else a small CNN built here with the onnx
package: conv + batch norm + relu, a residual block, global average pool
and a classifier), prints the fusion plan with the near misses, the CUDA
source of one kernel, runs the model in emulation (the generated CUDA
source compiled for the CPU) and compares the outputs with onnxruntime.

    python3 examples/python/run_onnx.py                  # the built-in model
    python3 examples/python/run_onnx.py model.onnx --dim batch=2 --device emu

Needs numpy, onnx and onnxruntime, and the fusegen package: installed
(pip install ./python), or found in the repository's python/ with
FUSEGEN_LIBRARY pointing at a built libfusegen.so.
"""
import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

try:
    import fusegen
except ImportError:  # run from the repository without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import fusegen


def small_cnn(seed: int = 0) -> onnx.ModelProto:
    """A small residual CNN with its weights, as an ONNX model."""
    rng = np.random.default_rng(seed)

    def w(*shape, scale=0.3):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    inits = {
        "stem.w": w(16, 3, 3, 3), "stem.gamma": 1 + w(16, scale=0.1), "stem.beta": w(16, scale=0.1),
        "stem.mean": w(16, scale=0.1), "stem.var": 1 + np.abs(w(16, scale=0.1)),
        "block.w1": w(16, 16, 3, 3, scale=0.1), "block.b1": w(16, scale=0.1),
        "block.w2": w(16, 16, 3, 3, scale=0.1), "block.b2": w(16, scale=0.1),
        "fc.w": w(10, 16), "fc.b": w(10, scale=0.1),
    }
    N = helper.make_node
    nodes = [
        N("Conv", ["x", "stem.w"], ["s"], name="stem_conv", pads=[1, 1, 1, 1]),
        N("BatchNormalization", ["s", "stem.gamma", "stem.beta", "stem.mean", "stem.var"], ["sb"], name="stem_bn"),
        N("Relu", ["sb"], ["sr"], name="stem_relu"),
        N("Conv", ["sr", "block.w1", "block.b1"], ["c1"], name="block_conv1", pads=[1, 1, 1, 1]),
        N("Relu", ["c1"], ["r1"], name="block_relu1"),
        N("Conv", ["r1", "block.w2", "block.b2"], ["c2"], name="block_conv2", pads=[1, 1, 1, 1]),
        N("Add", ["c2", "sr"], ["a"], name="block_add"),
        N("Relu", ["a"], ["r2"], name="block_relu2"),
        N("GlobalAveragePool", ["r2"], ["g"], name="pool"),
        N("Flatten", ["g"], ["f"], name="flatten"),
        N("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="an ONNX file (default: a small CNN built here)")
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="a symbolic dimension")
    ap.add_argument("--device", default="emu", choices=["emu", "cuda", "auto"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    dims = {k: int(v) for k, v in (d.split("=", 1) for d in args.dim)}
    if args.model:
        model = onnx.load(args.model)
    else:
        model = small_cnn(args.seed)
        dims.setdefault("batch", 2)

    with fusegen.Context(device=args.device) as ctx:
        graph = ctx.load(model, dims=dims)              # an onnx.ModelProto, a path or bytes
        plan = ctx.plan(graph)
        print(plan.explain())
        for g in plan.groups:
            if g.rule:
                print("group %d: rule %s at %s fuses %s" % (g.index, g.rule, g.location, ", ".join(g.nodes)))

        exe = ctx.compile(plan)
        print("\ncompiled for %s: %d kernels, inputs %s, outputs %s" % (
            exe.device, len(exe.kernels), [(t.name, t.shape, t.dtype) for t in exe.inputs],
            [(t.name, t.shape, t.dtype) for t in exe.outputs]))
        k = max(exe.kernels, key=lambda k: len(k.source))
        print("\n---- the CUDA source of %s ----" % k.name)
        print(k.source)

        rng = np.random.default_rng(args.seed + 1)
        feeds = {t.name: rng.uniform(-1, 1, t.shape).astype(np.float32) for t in exe.inputs}
        ours = exe(**feeds)

        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        worst = 0.0
        for name, y in ours.items():
            r = ref[name].astype(np.float64)
            err = float(np.linalg.norm(y.astype(np.float64) - r) / max(np.linalg.norm(r), 1e-30))
            worst = max(worst, err)
            print("%s: shape %s, max abs error %.3g, relative L2 error %.3g (against onnxruntime)"
                  % (name, y.shape, float(np.max(np.abs(y - r))), err))
    tol = 1e-5 if all(t.dtype == "fp32" for t in exe.outputs) else 1e-2
    print("OK" if worst <= tol else "MISMATCH (tolerance %g)" % tol)
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
