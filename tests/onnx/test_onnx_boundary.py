#!/usr/bin/env python3
"""test_onnx_boundary.py -- what an ONNX model declares at its boundary, and
ArgMax / ArgMin, against onnxruntime and the ONNX reference implementation.

 - Rank-0 graph inputs and outputs: the Python package reports their shape
   as () and takes and returns 0-d arrays; `fusegen run --save-outputs`
   writes shape () and `--input` takes a 0-d .npy file; `plan --explain`
   says so.
 - float64 graph inputs and outputs: fp32 inside; the package converts
   float64 arrays in and returns float64 results, `--input` takes a float64
   .npy file and `--save-outputs` writes float64; `plan --explain` says so.
   Compared with onnxruntime (which computes in float64) at rel L2 <= 1e-6.
 - ArgMax / ArgMin (every axis, keepdims both ways, select_last_index, ties
   and a NaN): int64 results equal to onnx.reference's exactly; onnxruntime
   agrees where the rows hold no NaN (it lets a NaN lose every comparison,
   numpy and the ONNX reference let it win, as fusegen's reduce_max does).

Environment: FUSEGEN_LIB (libfusegen.so), FUSEGEN_BIN (the fusegen
command), FUSEGEN_SOURCE_DIR (for the Python package).  Exit 77 (skipped)
without onnx, onnxruntime or numpy.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import helper as h
    from onnx import TensorProto as TP
    from onnx.reference import ReferenceEvaluator
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnx onnxruntime numpy)" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FUSEGEN_SOURCE_DIR", os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
os.environ.setdefault("FUSEGEN_LIBRARY", os.environ.get("FUSEGEN_LIB", ""))
import fusegen  # noqa: E402

BIN = os.environ.get("FUSEGEN_BIN", os.path.join(SRC, "build", "fusegen"))
failures = []


def check(ok, what):
    print("%-4s %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def save(nodes, inputs, outputs, path, opset=17):
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(*i) for i in inputs],
                     [h.make_tensor_value_info(*o) for o in outputs])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]), path)
    return path


def cli(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def boundary(tmp):
    # x, y: rank 0 float; v: float64 [4]; z = x * y (rank 0), s = ReduceSum(a) (rank 0),
    # w = v * v + 0.5 as float64, c = Cast(ReduceMax(v), FLOAT) rank 0.
    path = save([h.make_node("Mul", ["x", "y"], ["z"]),
                 h.make_node("ReduceSum", ["a"], ["s"], keepdims=0),
                 h.make_node("Mul", ["v", "v"], ["vv"]),
                 h.make_node("Add", ["vv", "half"], ["w"]),
                 h.make_node("ReduceMax", ["v"], ["m"], keepdims=0),
                 h.make_node("Cast", ["m"], ["c"], to=TP.FLOAT)],
                [("x", TP.FLOAT, []), ("y", TP.FLOAT, []), ("a", TP.FLOAT, [3, 4]), ("v", TP.DOUBLE, [4]),
                 ("half", TP.DOUBLE, [])],
                [("z", TP.FLOAT, []), ("s", TP.FLOAT, []), ("w", TP.DOUBLE, [4]), ("c", TP.FLOAT, [])],
                os.path.join(tmp, "boundary.onnx"))
    rs = np.random.RandomState(5)
    feeds = {"x": np.float32(1.5), "y": np.float32(-2.25), "a": rs.randn(3, 4).astype(np.float32),
             "v": rs.randn(4), "half": np.float64(0.5)}
    want = dict(zip(["z", "s", "w", "c"], ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {k: np.asarray(v) for k, v in feeds.items()})))

    # the Python package
    with fusegen.Context(device="emu") as ctx:
        exe = ctx.load(path).plan().compile()
        info = {t.name: t for t in exe.inputs + exe.outputs}
        check(info["x"].shape == () and info["z"].shape == () and info["s"].shape == (),
              "package: rank-0 inputs and outputs have shape ()")
        check(info["v"].float64 and info["w"].float64 and not info["z"].float64 and info["v"].dtype == "fp32",
              "package: float64 tensors are fp32 with float64 set")
        got = exe(**feeds)
        for k in want:
            ok = got[k].shape == np.asarray(want[k]).shape and got[k].dtype == np.asarray(want[k]).dtype
            err = rel_l2(got[k], want[k])
            check(ok and err <= 1e-6, "package: %s shape %s dtype %s, rel L2 %.1e vs onnxruntime"
                  % (k, got[k].shape, got[k].dtype, err))

    # the command line: --explain, --input (0-d and float64 files), --save-outputs
    rc, out = cli("plan", "--explain", path)
    check(rc == 0 and "input 'x' is rank 0 in the model" in out and "input 'v' is float64 in the model" in out
          and "output 'w' is float64 in the model" in out, "plan --explain states the boundary conversions")
    args = ["run", path, "--device", "emu", "--save-outputs", os.path.join(tmp, "out")]
    for k, v in feeds.items():
        np.save(os.path.join(tmp, k + ".npy"), np.asarray(v))
        args += ["--input", "%s=%s" % (k, os.path.join(tmp, k + ".npy"))]
    rc, out = cli(*args)
    check(rc == 0, "fusegen run with 0-d and float64 .npy inputs (rc %d%s)" % (rc, "" if rc == 0 else ": " + out[-300:]))
    for k in want if rc == 0 else []:
        a = np.load(os.path.join(tmp, "out", k + ".npy"))
        w = np.asarray(want[k])
        check(a.shape == w.shape and a.dtype == w.dtype and rel_l2(a, w) <= 1e-6,
              "run --save-outputs: %s.npy shape %s dtype %s" % (k, a.shape, a.dtype))
    np.save(os.path.join(tmp, "v32.npy"), feeds["v"].astype(np.float32))
    np.save(os.path.join(tmp, "x64.npy"), np.float64(1.0))
    rc, out = cli("run", path, "--device", "emu", "--input", "x=" + os.path.join(tmp, "x64.npy"))
    check(rc == 2 and "holds float64 data but input 'x' is fp32" in out, "a float64 file for an fp32 input is refused")


def arg_ops(tmp):
    rs = np.random.RandomState(7)
    x = rs.randn(3, 7, 5).astype(np.float32)
    x[0, :, 0] = 1.0     # ties along axis 1
    x[2] = 0.5           # a block of ties
    xn = x.copy()
    xn[1, 2, 3] = np.nan
    n = bad = 0
    for op in ("ArgMax", "ArgMin"):
        for axis in (0, 1, -1):
            for kd in (0, 1):
                for last in (0, 1):
                    path = save([h.make_node(op, ["x"], ["y"], axis=axis, keepdims=kd, select_last_index=last)],
                                [("x", TP.FLOAT, [3, 7, 5])], [("y", TP.INT64, None)],
                                os.path.join(tmp, "arg.onnx"), opset=13)
                    model = onnx.load(path)
                    with fusegen.Context(device="emu") as ctx:
                        exe = ctx.load(path).plan().compile()
                        for data, oracle in ((x, "ort"), (xn, "ref")):
                            want = (ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                                    .run(None, {"x": data})[0] if oracle == "ort"
                                    else ReferenceEvaluator(model).run(None, {"x": data})[0])
                            got = exe(x=data)["y"]
                            n += 1
                            if not (got.dtype == np.int64 and got.shape == want.shape and np.array_equal(got, want)):
                                bad += 1
                                print("  %s axis %d keepdims %d last %d (%s): %s vs %s" %
                                      (op, axis, kd, last, oracle, got.ravel()[:8], want.ravel()[:8]))
    check(bad == 0, "ArgMax / ArgMin: %d cases equal (onnxruntime without NaN, onnx.reference with one), %d differ"
          % (n - bad, bad))


def main():
    with tempfile.TemporaryDirectory(prefix="fusegen-boundary-") as tmp:
        boundary(tmp)
        arg_ops(tmp)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
