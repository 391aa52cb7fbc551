#!/usr/bin/env python3
"""test_torch.py -- fusegen from PyTorch (python/fusegen/torch, docs/python.md).

In emulation, on CPU tensors, against eager PyTorch (fp32 relative L2
<= 1e-4): a small CNN (conv, batch norm, relu, strided conv, global mean,
linear) and a tiny nn.TransformerEncoderLayer compiled with
fusegen.torch.compile from one example and called at batch 1, 3 and 8
(the encoder also at sequence 5 and 17), one export serving every size and
the kernels compiled per size counted (a size seen before compiles
nothing; a second compile of the same model compiles nothing either: the
kernel cache serves it; with the sizes as kernel parameters, the default,
batch 8 x sequence 17 after 8 x 5 and 3 x 17 is no new source); the same through torch.compile(backend="fusegen");
an unsupported operator (torch.cumsum: ONNX CumSum) is a fusegen.Error
naming it and the line of this file it is on, and with fallback=True the
module runs with that node eager and matches; modules with tuple / dict
arguments and results; a parameter changed in place is seen.  The CUDA
zero-copy path (fusegen.torch._compile.run_cuda) is checked with stand-in
objects: no GPU here.

Exit 77 (skipped) without torch or numpy.  Plain unittest: python3
test_torch.py [-v] [TestClass[.test_name] ...].
"""
import inspect
import os
import sys
import tempfile
import unittest

try:
    import numpy as np  # noqa: F401
    import torch
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install torch numpy)" % e)
    sys.exit(77)

SRC = os.environ.get("FUSEGEN_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
if not os.environ.get("FUSEGEN_CACHE_DIR"):
    os.environ["FUSEGEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="fusegen-torchtest-")   # mode 0700
os.environ.setdefault("FUSEGEN_QUIET", "1")

try:
    import onnxscript  # noqa: F401  (the dynamo ONNX exporter needs it)
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install onnxscript)" % e)
    sys.exit(77)

import fusegen  # noqa: E402
import fusegen.torch as ft  # noqa: E402
from fusegen import _core  # noqa: E402
from fusegen.torch import _compile as K  # noqa: E402
from fusegen.torch import _export as X  # noqa: E402

TOL = 1e-4
torch.manual_seed(5)


def rel_l2(y, ref):
    y, ref = y.detach().double(), ref.detach().double()
    return float((y - ref).norm() / max(float(ref.norm()), 1e-30))


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(16, 10)
        with torch.no_grad():                       # batch-norm statistics that are not the identity
            self.bn1.running_mean.uniform_(-0.5, 0.5)
            self.bn1.running_var.uniform_(0.5, 2.0)
            self.bn1.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        return self.fc(x.mean((2, 3)))


def encoder():
    return torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()


class WithCumsum(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.relu(self.lin(x))
        z = torch.cumsum(y, 1)          # ONNX CumSum, not supported
        return torch.sigmoid(z) * 2


CUMSUM_LINE = next(i for i, ln in enumerate(inspect.getsource(sys.modules[__name__]).splitlines(), 1)
                   if ln.strip().startswith("z = torch.cumsum(y, 1)"))


class TwoWays(torch.nn.Module):
    """Tuple in, dict out."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, pair):
        a, b = pair
        return {"sum": torch.relu(self.lin(a)) + b, "gate": torch.sigmoid(b)}


class TestCompile(unittest.TestCase):
    def test_cnn_one_export_many_batches(self):
        m = SmallCNN().eval()
        c = ft.compile(m, (torch.randn(2, 3, 16, 16),))
        self.assertEqual(len(c.exports), 1)
        # the weights are read from torch tensors' memory, not serialized into the model
        exp = c.exports[0]
        self.assertIn(m.conv2.weight.data_ptr(), [p for p, _n in exp.buffers])   # the parameter itself
        import onnx  # noqa: PLC0415

        inits = {tuple(t.dims): t for t in onnx.load_from_string(exp.model).graph.initializer}
        self.assertEqual(inits[(16, 8, 3, 3)].data_location, onnx.TensorProto.EXTERNAL)   # conv2's weight
        self.assertFalse(inits[(16, 8, 3, 3)].raw_data)
        first = c.kernel_counts()
        self.assertGreater(first["host_compiled"] + first["memory_hits"] + first["disk_hits"], 0)
        with torch.no_grad():
            for b in (1, 3, 8):
                x = torch.randn(b, 3, 16, 16)
                self.assertLessEqual(rel_l2(c(x), m(x)), TOL, "batch %d" % b)
            after = c.kernel_counts()
            for b in (1, 3, 8):                 # sizes seen before: nothing compiled
                x = torch.randn(b, 3, 16, 16)
                self.assertLessEqual(rel_l2(c(x), m(x)), TOL)
        self.assertEqual(c.kernel_counts(), after)
        self.assertEqual(len(c.exports), 1)    # one export serves every batch size
        self.assertEqual(len(c.buckets), 4)    # the example's and 1, 3, 8
        text = c.explain()
        self.assertIn("4 shape bucket(s)", text)
        self.assertIn("host", text)
        print("\n" + text)
        # the same model compiled again: every kernel from the kernel cache
        again = ft.compile(m, (torch.randn(3, 3, 16, 16),))
        k = again.kernel_counts()
        self.assertEqual(k["host_compiled"], 0, k)
        self.assertGreater(k["memory_hits"] + k["disk_hits"], 0, k)

    def test_batch_buckets(self):
        m = SmallCNN().eval()
        c = ft.compile(m, (torch.randn(2, 3, 16, 16),), batch_buckets=(4, 8))
        with torch.no_grad():
            seen, prev = set(), c.kernel_counts()
            for b in (1, 3, 4, 5, 8, 6, 2):
                x = torch.randn(b, 3, 16, 16)
                y = c(x)
                self.assertEqual(tuple(y.shape), (b, 10))
                self.assertLessEqual(rel_l2(y, m(x)), TOL, "batch %d" % b)
                bucket = 4 if b <= 4 else 8
                k = c.kernel_counts()
                if bucket in seen or bucket == 4:   # a bucket made before: nothing compiled, nothing fetched
                    self.assertEqual(k, prev, "batch %d" % b)
                seen.add(bucket)
                prev = k
            self.assertEqual(sorted(bk.shapes[0][0] for bk in c.buckets.values()), [4, 8])
            y = c(torch.randn(9, 3, 16, 16))   # above the largest: its own size
        self.assertEqual(len(c.buckets), 3)

    def test_transformer_batch_buckets(self):
        m = encoder()
        c = ft.compile(m, (torch.randn(2, 5, 32),), batch_buckets=(4, 8))
        with torch.no_grad():
            for b in (1, 3, 8):
                for s in (5, 17):
                    x = torch.randn(b, s, 32)
                    self.assertLessEqual(rel_l2(c(x), m(x)), TOL, "batch %d sequence %d" % (b, s))
        self.assertEqual(len(c.exports), 1)
        self.assertEqual(len(c.buckets), 4)   # batch 4 and 8, sequence 5 and 17
        print("\n" + c.explain())

    def test_transformer_encoder(self):
        m = encoder()
        c = ft.compile(m, (torch.randn(2, 5, 32),))
        with torch.no_grad():
            for b in (1, 3, 8):
                for s in (5, 17):
                    x = torch.randn(b, s, 32)
                    err = rel_l2(c(x), m(x))
                    self.assertLessEqual(err, TOL, "batch %d sequence %d: %g" % (b, s, err))
        self.assertEqual(len(c.exports), 1)
        self.assertEqual(len(c.buckets), 7)
        # sizes as kernel parameters: batch 8 x sequence 17, after 8 x 5 and 3 x 17, is no new source
        last = list(c.buckets.values())[-1]
        self.assertEqual(last.shapes, ((8, 17, 32),))
        self.assertEqual(last.shared, len(last.exe.kernels), c.explain())
        self.assertEqual(last.new, [])
        self.assertIn("new: kernel", c.explain())   # the reasons of the buckets that had new sources
        print("\n" + c.explain())

    def test_unsupported_operator_is_named(self):
        with self.assertRaises(fusegen.Error) as cm:
            ft.compile(WithCumsum().eval(), (torch.randn(2, 8),))
        e = cm.exception
        self.assertEqual(e.operators, ["CumSum"])
        self.assertEqual(os.path.realpath(e.file), os.path.realpath(__file__))
        self.assertEqual(e.line, CUMSUM_LINE)
        self.assertIn("unsupported operator CumSum (aten.cumsum", str(e))
        self.assertIn("torch.cumsum(y, 1)", str(e))
        self.assertEqual(e.nodes[0].op_type, "CumSum")

    def test_containers_and_changed_weights(self):
        m = TwoWays().eval()
        a, b = torch.randn(2, 6), torch.randn(2, 6)
        c = ft.compile(m, ((a, b),))
        with torch.no_grad():
            for n in (2, 5):
                a, b = torch.randn(n, 6), torch.randn(n, 6)
                got, ref = c((a, b)), m((a, b))
                self.assertEqual(sorted(got), ["gate", "sum"])
                for k in ref:
                    self.assertLessEqual(rel_l2(got[k], ref[k]), TOL)
            m.lin.weight.mul_(-2.0)           # in place: the compiled weights are stale, so it exports again
            got, ref = c((a, b)), m((a, b))
        self.assertLessEqual(rel_l2(got["sum"], ref["sum"]), TOL)
        with self.assertRaises(TypeError):
            c(a, b)                            # not the form of the example


class TestBackend(unittest.TestCase):
    def setUp(self):
        torch._dynamo.reset()
        ft.reset()

    def test_cnn(self):
        m = SmallCNN().eval()
        c = torch.compile(m, backend="fusegen")
        with torch.no_grad():
            for b in (1, 3, 8):
                x = torch.randn(b, 3, 16, 16)
                self.assertLessEqual(rel_l2(c(x), m(x)), TOL, "batch %d" % b)
        rs = ft.reports()
        self.assertTrue(rs and all(r.mode == "fusegen" for r in rs), ft.explain())
        self.assertOneExportPerGraph(rs)
        print("\n" + ft.explain())

    def assertOneExportPerGraph(self, rs):
        """Each FX graph dynamo made (a static one for the first size, then
        one with symbolic sizes) was exported once, whatever the sizes it
        was then called with."""
        for r in rs:
            for p in r.parts:
                self.assertEqual(sum(len(cm.exports) for cm in p.fx.compiled.values()), 1, ft.explain())

    def test_transformer_encoder(self):
        old = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)   # its fused inference op has no ONNX translation
        try:
            m = encoder()
            c = torch.compile(m, backend="fusegen")
            with torch.no_grad():
                for b in (1, 3, 8):
                    for s in (5, 17):
                        x = torch.randn(b, s, 32)
                        self.assertLessEqual(rel_l2(c(x), m(x)), TOL, "batch %d sequence %d" % (b, s))
        finally:
            torch.backends.mha.set_fastpath_enabled(old)
        self.assertTrue(all(r.mode == "fusegen" for r in ft.reports()), ft.explain())
        self.assertOneExportPerGraph(ft.reports())
        print("\n" + ft.explain())

    def test_unsupported_operator_is_named(self):
        c = torch.compile(WithCumsum().eval(), backend="fusegen")
        with self.assertRaises(fusegen.Error) as cm, torch.no_grad():
            c(torch.randn(2, 8))
        self.assertEqual(cm.exception.operators, ["CumSum"])
        self.assertEqual(cm.exception.line, CUMSUM_LINE)

    def test_fallback_runs_the_rest(self):
        m = WithCumsum().eval()
        c = torch.compile(m, backend="fusegen", options={"fallback": True})
        with torch.no_grad():
            for b in (2, 3, 6):
                x = torch.randn(b, 8)
                self.assertLessEqual(rel_l2(c(x), m(x)), TOL)
        r = ft.reports()[0]
        self.assertEqual(r.mode, "fallback")
        self.assertEqual([p.kind for p in r.parts], ["fusegen", "eager", "fusegen"])
        text = ft.explain()
        self.assertIn("CumSum", text)
        self.assertIn("torch.cumsum(y, 1)", text)
        print("\n" + text)


class TestMemoryWeights(unittest.TestCase):
    """External data "fusegen-memory:<i>" read from the caller's buffers
    (fg_onnx_options.buffers; Context.load_bytes(buffers=))."""

    def model(self, location):
        import onnx  # noqa: PLC0415
        from onnx import TensorProto as TP, helper as oh  # noqa: PLC0415

        w = onnx.TensorProto(name="w", data_type=TP.FLOAT, dims=[2, 3])
        w.data_location = TP.EXTERNAL
        for k, v in (("location", location), ("offset", "8"), ("length", "24")):
            e = w.external_data.add()
            e.key, e.value = k, v
        g = oh.make_graph([oh.make_node("Add", ["x", "w"], ["y"])], "g",
                          [oh.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [2, 3])], [w])
        return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)]).SerializeToString()

    def test_read_from_memory(self):
        buf = np.arange(8, dtype=np.float32)          # offset 8 bytes: the values 2 .. 7
        with fusegen.Context(device="emu") as ctx:
            exe = ctx.compile(ctx.plan(ctx.load_bytes(self.model("fusegen-memory:0"), "m.onnx",
                                                      buffers=[(buf.ctypes.data, buf.nbytes)])))
            y = exe(x=np.zeros((2, 3), np.float32))["y"]
            np.testing.assert_array_equal(y, np.arange(2, 8, dtype=np.float32).reshape(2, 3))
            for loc, bufs, msg in (("fusegen-memory:1", [(buf.ctypes.data, buf.nbytes)], "names no buffer"),
                                   ("fusegen-memory:0", [], "names no buffer"),
                                   ("fusegen-memory:0", [(buf.ctypes.data, 16)], "holds 16 bytes")):
                with self.assertRaises(fusegen.Error) as cm:
                    ctx.load_bytes(self.model(loc), "m.onnx", buffers=bufs)
                self.assertIn(msg, str(cm.exception))


# ---- the CUDA path with stand-ins (no GPU here) ------------------------------------

class FakeCudaTensor:
    """A CUDA tensor as far as the binding reads one: __cuda_array_interface__."""

    def __init__(self, ptr, shape, typestr="<f4"):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "strides": None, "version": 3, "stream": None}


class FakeCudaExe:
    """An Executable on "cuda" that binds as the real one does
    (prepare_device_run) and records what it would launch."""

    def __init__(self, inputs, outputs, outs):
        self.device, self.inputs, self.outputs, self.outs = "cuda", inputs, outputs, outs
        self.launched = None

    def __call__(self, feeds, stream=None):
        binds, result, launch, _keep = _core.prepare_device_run(self, feeds, self.outs, stream)
        self.launched = (binds, launch)
        return result


class TestCudaStandIns(unittest.TestCase):
    def test_zero_copy_binding(self):
        ti = fusegen.TensorInfo
        exe = FakeCudaExe([ti("a", (2, 4), "fp32", "NCHW", 32), ti("b", (2, 4), "fp32", "NCHW", 32)],
                          [ti("y", (2, 4), "fp32", "NCHW", 32), ti("z", (2,), "fp32", "NCHW", 8)],
                          {"y": FakeCudaTensor(0x3000, (2, 4)), "z": FakeCudaTensor(0x4000, (2,))})
        exp = X.Exported(b"", [("a", (2, 4)), None, ("b", (2, 4))], ["z", "y"], None)
        a, unused, b = FakeCudaTensor(0x1000, (2, 4)), FakeCudaTensor(0x9000, (7,)), FakeCudaTensor(0x2000, (2, 4))
        outs = K.run_cuda(exe, exp, [a, unused, b], stream=0x55)
        binds, launch = exe.launched
        # the tensors' own device memory is bound: nothing copied; the caller's stream is used
        self.assertEqual(binds, [("a", 0x1000), ("b", 0x2000), ("y", 0x3000), ("z", 0x4000)])
        self.assertEqual(launch, 0x55)
        self.assertEqual(outs, [exe.outs["z"], exe.outs["y"]])   # in the export's output order

    def test_wrong_dtype_is_refused(self):
        ti = fusegen.TensorInfo
        exe = FakeCudaExe([ti("a", (2, 4), "fp16", "NCHW", 16)], [ti("y", (2, 4), "fp16", "NCHW", 16)],
                          {"y": FakeCudaTensor(0x3000, (2, 4), "<f2")})
        exp = X.Exported(b"", [("a", (2, 4))], ["y"], None)
        with self.assertRaises(fusegen.Error) as cm:
            K.run_cuda(exe, exp, [FakeCudaTensor(0x1000, (2, 4))])
        self.assertIn("is fp32 on the GPU", str(cm.exception))

    def test_dims_for(self):
        exp = X.Exported(b"", [("x", ("batch", 3, "seq")), ("m", ("batch", "seq"))], ["y"], None)
        self.assertEqual(exp.dims_for([(4, 3, 9), (4, 9)]), {"batch": 4, "seq": 9})
        self.assertIsNone(exp.dims_for([(4, 2, 9), (4, 9)]))     # a fixed size differs
        self.assertIsNone(exp.dims_for([(4, 3, 9), (5, 9)]))     # one name, two values
        self.assertIsNone(exp.dims_for([(4, 3), (4, 9)]))        # rank


if __name__ == "__main__":
    unittest.main()
