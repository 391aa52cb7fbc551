#!/usr/bin/env python3
"""test_onnx_mlp.py -- transformer MLP blocks: GEMM + bias + GELU (erf and
tanh forms) or SiLU in one kernel, and gated units (SwiGLU, GeGLU) in two
GEMM kernels, against onnxruntime with their kernel counts.

Hand-built models (fp32 and fp16; tolerances as test_onnx_models.py): a ViT
MLP, MatMul + Add + GELU + MatMul + Add, with GELU as the erf subgraph the
TorchScript exporter writes (Div by sqrt(2), Erf, Add 1, Mul, Mul 0.5), as
the tanh subgraph of Hugging Face's GPT-2 GELU (Pow 3, Mul 0.044715, Add,
Mul sqrt(2/pi), Tanh, Add 1, Mul 0.5 * x, Mul) and as the Gelu operator (opset 20, both approximations):
two kernels (rule matmul_bias_act: the activation in the first GEMM's
epilogue); SiLU as x * Sigmoid(x): two kernels; SwiGLU (MatMul, SiLU, MatMul,
Mul, MatMul) and GeGLU with a biased up projection: three kernels (gemm_act
for the gate, matmul_gated multiplies the up GEMM by it in its epilogue).
`fusegen plan --explain` on the erf MLP names matmul_bias_act with
apply(gelu) (when FUSEGEN_BIN is set).

With --torch (exit 77 without torch): torch.nn.Sequential(Linear, GELU,
Linear) with approximate none and tanh, with SiLU, and a Llama-style
SwiGLU module, exported by torch.onnx (TorchScript at opset 17 and
dynamo=True): the same kernel counts, rel L2 <= 1e-4.

Environment: FUSEGEN_LIB (libfusegen.so), FUSEGEN_BIN (the command line,
optional).  Exit 77 (skipped) without onnx, onnxruntime or numpy.  -v prints
every row.
"""
import math
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
D, F = 32, 64


def f32(*shape, s=0.2):
    return (RNG.standard_normal(shape) * s).astype(np.float32)


def scalar(v):
    return np.array(v, dtype=np.float32)


def gelu_nodes(form, x, y, inits):
    """GELU of x into y in the given exported form."""
    if form == "erf":
        inits.update({"sq2": scalar(math.sqrt(2.0)), "one": scalar(1.0), "half": scalar(0.5)})
        return [N("Div", [x, "sq2"], ["g_d"]), N("Erf", ["g_d"], ["g_e"]), N("Add", ["g_e", "one"], ["g_a"]),
                N("Mul", [x, "g_a"], ["g_m"]), N("Mul", ["g_m", "half"], [y])]
    if form == "tanh":
        inits.update({"three": scalar(3.0), "c": scalar(0.044715), "k": scalar(math.sqrt(2.0 / math.pi)),
                      "one": scalar(1.0), "half": scalar(0.5)})
        return [N("Pow", [x, "three"], ["g_p"]), N("Mul", ["g_p", "c"], ["g_c"]), N("Add", [x, "g_c"], ["g_s"]),
                N("Mul", ["g_s", "k"], ["g_k"]), N("Tanh", ["g_k"], ["g_t"]), N("Add", ["g_t", "one"], ["g_a"]),
                N("Mul", ["half", x], ["g_h"]), N("Mul", ["g_h", "g_a"], [y])]   # 0.5 * x * (...): Hugging Face's
    if form == "silu":
        return [N("Sigmoid", [x], ["g_s"]), N("Mul", [x, "g_s"], [y])]
    return [N("Gelu", [x], [y], approximate=form.split("_")[1])]   # op_none, op_tanh


def mlp_case(form):
    inits = {"w1": f32(D, F), "b1": f32(F), "w2": f32(F, D), "b2": f32(D)}
    nodes = [N("MatMul", ["x", "w1"], ["m1"]), N("Add", ["m1", "b1"], ["h"])]
    nodes += gelu_nodes(form, "h", "a", inits)
    nodes += [N("MatMul", ["a", "w2"], ["m2"]), N("Add", ["m2", "b2"], ["y"])]
    return tr.RCase("mlp_" + form, nodes, {"x": (2, 17, D)}, inits, ["y"], opset=20 if form.startswith("op") else 17,
                    kernels=2)


def glu_case(form, up_bias):
    inits = {"wg": f32(D, F), "wu": f32(D, F), "wd": f32(F, D)}
    nodes = [N("MatMul", ["x", "wg"], ["g"])]
    nodes += gelu_nodes(form, "g", "a", inits)
    nodes.append(N("MatMul", ["x", "wu"], ["u"]))
    up = "u"
    if up_bias:
        inits["bu"] = f32(F)
        nodes.append(N("Add", ["u", "bu"], ["ub"]))
        up = "ub"
    nodes += [N("Mul", ["a", up], ["p"]), N("MatMul", ["p", "wd"], ["y"])]
    name = "%s%s" % ("swiglu" if form == "silu" else "geglu", "_up_bias" if up_bias else "")
    return tr.RCase(name, nodes, {"x": (2, 17, D)}, inits, ["y"], opset=17, kernels=3)


def cases():
    return [mlp_case(f) for f in ("erf", "tanh", "silu", "op_none", "op_tanh")] + \
        [glu_case("silu", False), glu_case("erf", True)]


def explain_check(run, tmp, failed):
    """`fusegen plan --explain` shows the GEMM, its bias and GELU as one group."""
    exe = os.environ.get("FUSEGEN_BIN")
    if not exe:
        return
    case = mlp_case("erf")
    path = os.path.join(tmp, "mlp_explain.onnx")
    onnx.save(case.model("fp32"), path)
    r = subprocess.run([exe, "plan", "--explain", path], capture_output=True, text=True)
    line = [x for x in r.stdout.splitlines() if x.startswith("0 ")]
    ok = r.returncode == 0 and line and "matmul_bias_act" in line[0] and "apply(gelu)" in line[0]
    tm.expect(bool(ok), "plan --explain: group 0 is matmul_bias_act with apply(gelu) (got: %s)" %
              (line[0] if line else r.stdout[-300:] + r.stderr[-300:]), failed)


def torch_part(run, tmp):
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed")
        return 77
    import fgapi
    import onnxruntime as ort
    torch.manual_seed(0)

    class SwiGLU(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.g = torch.nn.Linear(D, F, bias=False)
            self.u = torch.nn.Linear(D, F, bias=False)
            self.d = torch.nn.Linear(F, D, bias=False)

        def forward(self, x):
            return self.d(torch.nn.functional.silu(self.g(x)) * self.u(x))

    mods = [("vit_mlp_gelu", torch.nn.Sequential(torch.nn.Linear(D, F), torch.nn.GELU(), torch.nn.Linear(F, D)), 2),
            ("vit_mlp_gelu_tanh", torch.nn.Sequential(torch.nn.Linear(D, F), torch.nn.GELU(approximate="tanh"),
                                                      torch.nn.Linear(F, D)), 2),
            ("mlp_silu", torch.nn.Sequential(torch.nn.Linear(D, F), torch.nn.SiLU(), torch.nn.Linear(F, D)), 2),
            ("llama_swiglu", SwiGLU(), 3)]
    x = torch.randn(2, 17, D)
    for name, m, want in mods:
        m = m.eval()
        for exporter in ("torchscript", "dynamo"):
            path = os.path.join(tmp, "%s_%s.onnx" % (name, exporter))
            with torch.no_grad():
                if exporter == "torchscript":
                    torch.onnx.export(m, (x,), path, opset_version=17, dynamo=False, input_names=["x"],
                                      output_names=["y"])
                else:
                    torch.onnx.export(m, (x,), path, dynamo=True, external_data=False, verbose=False)
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            ref = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
            g = run.lib.load(path)
            row = "%s_%s" % (name, exporter)
            try:
                outs, nk, _ = fgapi.run_ordered(run.lib, g, [x.numpy()])
            except fgapi.FusegenError as e:
                run.result(row, "fp32", None, None, 1e-4, "; ".join(e.messages) or str(e))
                continue
            finally:
                run.lib.free_graph(g)
            mx, rel, err = tm.compare(outs[0], ref)
            run.result(row, "fp32", mx, rel, 1e-4, err, kernels=nk)
            tm.expect(nk == want, "%s: %d kernels (got %d)" % (row, want, nk), run.failed)
    return 0


def main(argv):
    run = tm.Runner("-v" in argv)
    failed = run.failed
    rc = 0
    with tempfile.TemporaryDirectory() as tmp:
        if "--torch" in argv:
            rc = torch_part(run, tmp)
        else:
            for case in cases():
                for dtype in ("fp32", "fp16"):
                    tr.run_case(run, case, dtype, tmp, failed)
            explain_check(run, tmp, failed)
    print("test_onnx_mlp: %d rows, %d failed" % (len(run.rows), len(failed)))
    for f in failed:
        print("  FAILED: %s" % f)
    return 1 if failed else rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
