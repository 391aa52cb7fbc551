#!/usr/bin/env python3
"""test_networks.py -- whole networks through ONNX import, against onnxruntime.

A ResNet-50 and a MobileNetV2 in the form PyTorch's exporter writes
(make_resnet50.py, make_mobilenetv2.py: BN folded into Conv biases, Relu or
Clip for ReLU6, depthwise Conv, MaxPool, Add, GlobalAveragePool, Flatten,
Gemm), random weights, input 1x3x32x32 so that CPU emulation stays quick.
For each network, in fp32 and fp16, it runs

    fusegen plan MODEL.onnx        (as many kernels as the YAML example plans)
    fusegen run MODEL.onnx --device emu --input input=x.npy --save-outputs OUT

and compares OUT/output.npy with onnxruntime: fp32 against the model itself
(relative L2 <= 1e-5), fp16 against onnxruntime on the fp32 twin holding the
same fp16 weights and input (relative L2 <= 1e-2).

Environment: FUSEGEN_BIN (the CLI).  Exit 77 (skipped) without onnx,
onnxruntime or numpy.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper as nh
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_mobilenetv2  # noqa: E402
import make_resnet50  # noqa: E402

TOL = {"fp32": 1e-5, "fp16": 1e-2}
# (name, builder, ONNX nodes, kernels): the kernel counts are those the YAML
# examples (examples/resnet50.yaml, examples/mobilenetv2.yaml) plan to.
NETWORKS = [("resnet50", make_resnet50.build, 122, 56), ("mobilenetv2", make_mobilenetv2.build, 100, 54)]


def fp32_twin(model):
    """The fp16 model with every initializer and value type widened to fp32."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i, t in enumerate(m.graph.initializer):
        a = nh.to_array(t).astype(np.float32)
        m.graph.initializer[i].CopyFrom(nh.from_array(a, t.name))
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    return m


def main():
    fg = os.environ.get("FUSEGEN_BIN")
    if not fg:
        print("FUSEGEN_BIN is not set (run through ctest)")
        return 1
    failed = 0
    with tempfile.TemporaryDirectory(prefix="fusegen-nets-") as d:
        for (net, build, nops, nkernels), dtype in [(n, t) for n in NETWORKS for t in ("fp32", "fp16")]:
            model, x = build(32, dtype, 1)
            path = os.path.join(d, "%s_%s.onnx" % (net, dtype))
            xin = os.path.join(d, "x_%s_%s.npy" % (net, dtype))
            out = os.path.join(d, "out_%s_%s" % (net, dtype))
            with open(path, "wb") as f:
                f.write(model.SerializeToString())
            np.save(xin, x)
            plan = subprocess.run([fg, "plan", path], capture_output=True, text=True)
            line = [s for s in plan.stdout.splitlines() if s.startswith("ops:")]
            want = "ops: %d -> kernels: %d" % (nops, nkernels)
            if plan.returncode != 0 or not line or not line[0].startswith(want):
                print("FAIL %s %s plan: expected '%s...', got %r (rc %d)\n%s" % (net, dtype, want, line,
                                                                                  plan.returncode, plan.stderr))
                failed += 1
                continue
            run = subprocess.run([fg, "run", path, "--device", "emu", "--input", "input=" + xin,
                                  "--save-outputs", out], capture_output=True, text=True)
            if run.returncode != 0:
                print("FAIL %s %s run (rc %d):\n%s%s" % (net, dtype, run.returncode, run.stdout[-2000:], run.stderr[-2000:]))
                failed += 1
                continue
            got = np.load(os.path.join(out, "output.npy")).astype(np.float64)
            ref_model = model if dtype == "fp32" else fp32_twin(model)
            sess = ort.InferenceSession(ref_model.SerializeToString(), providers=["CPUExecutionProvider"])
            ref = sess.run(None, {"input": x.astype(np.float32)})[0].astype(np.float64)
            rel = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
            ok = got.shape == ref.shape and np.isfinite(got).all() and rel <= TOL[dtype]
            print("%s %s %s: %s, rel_l2 %.3e (tolerance %.0e), max_abs %.3e" % (
                "ok  " if ok else "FAIL", net, dtype, line[0], rel, TOL[dtype], np.abs(got - ref).max()))
            failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
