#!/usr/bin/env python3
"""test_python.py -- the fusegen Python package (python/, docs/python.md).

Imports the package from python/ with FUSEGEN_LIBRARY pointing at the
build's libfusegen (CTest sets it), and checks: installing from the
repository (pip install --target, with scikit-build-core when it is
importable; the full CMake build with FUSEGEN_PYTHON_FULL_INSTALL=1),
errors as fusegen.Error with file:line:col and status, a YAML graph and
small ONNX models run in emulation against onnxruntime (fp32 relative L2
<= 1e-5, fp16 <= 1e-2), fp16 and bf16 inputs, caller-provided outputs,
NHWC tensors, plan.groups / explain / dot, kernel sources,
fusegen.kernel on conv + batch norm + relu, device="cuda" without a GPU,
examples/python/run_onnx.py, and the recognition of CUDA arrays (DLPack, __cuda_array_interface__)
with stand-in objects: the zero-copy CUDA path itself needs a GPU and
PyTorch or CuPy and is not run here.

Exit 77 (skipped) without numpy; the onnxruntime comparisons are skipped
without onnx and onnxruntime.  Plain unittest: python3 test_python.py [-v]
[TestClass[.test_name] ...].
"""
import ctypes as C
import os
import pydoc
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print("skipped: %s (pip install numpy)" % e)
    sys.exit(77)

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP
    from onnx import helper as oh
    from onnx import numpy_helper as nh
except ImportError:  # pragma: no cover
    onnx = ort = None

SRC = os.environ.get("FUSEGEN_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
if not os.environ.get("FUSEGEN_CACHE_DIR"):
    os.environ["FUSEGEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="fusegen-pytest-")   # mode 0700
os.environ.setdefault("FUSEGEN_QUIET", "1")

import fusegen  # noqa: E402
from fusegen import _arrays as A  # noqa: E402
from fusegen import _core  # noqa: E402

RNG = np.random.default_rng(11)
EXAMPLE = os.path.join(SRC, "examples", "resnet_basic_block.yaml")
needs_onnx = unittest.skipIf(onnx is None, "onnx and onnxruntime are not installed")


def rel_l2(y, ref):
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-30))


def rnd(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def conv_bn_relu_ref(x, w, gamma, beta, mean, var, eps=1e-5, pad=1):
    """NumPy reference: conv2d (stride 1, padding pad), batch norm, relu."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    y = np.einsum("nchwrs,kcrs->nkhw", win, w.astype(np.float64))
    s = (gamma / np.sqrt(var + eps))[None, :, None, None]
    y = (y - mean[None, :, None, None]) * s + beta[None, :, None, None]
    return np.maximum(y, 0)


def yaml_values(a):
    return "[" + ", ".join(repr(float(v)) for v in np.asarray(a, np.float32).ravel()) + "]"


class Weights:
    """One conv + batch norm + residual add + relu block's weights."""

    def __init__(self, c=4, k=4):
        self.w = rnd(k, c, 3, 3, scale=0.3)
        self.gamma = (RNG.random(k) + 0.5).astype(np.float32)
        self.beta = rnd(k, scale=0.1)
        self.mean = rnd(k, scale=0.1)
        self.var = (RNG.random(k) + 0.5).astype(np.float32)

    def yaml(self, dtype="fp32", layout="NCHW", shape=(1, 4, 6, 6)):
        return """graph: block
dtype: %s
layout: %s
inputs:
  - { name: x, shape: %s }
weights:
  - { name: w, shape: %s, values: %s }
  - { name: g, shape: [%d], values: %s }
  - { name: b, shape: [%d], values: %s }
  - { name: m, shape: [%d], values: %s }
  - { name: v, shape: [%d], values: %s }
nodes:
  - { name: conv, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }
  - { name: bn, op: batch_norm, inputs: [conv, g, b, m, v] }
  - { name: add, op: add, inputs: [bn, x] }
  - { name: y, op: relu, inputs: [add] }
outputs: [y]
""" % (dtype, layout, list(shape), list(self.w.shape), yaml_values(self.w), len(self.gamma), yaml_values(self.gamma),
            len(self.beta), yaml_values(self.beta), len(self.mean), yaml_values(self.mean), len(self.var),
            yaml_values(self.var))

    def onnx_model(self, dtype="fp32"):
        et, npt = (TP.FLOAT16, np.float16) if dtype == "fp16" else (TP.FLOAT, np.float32)
        inits = [nh.from_array(a.astype(npt), n) for n, a in
                 (("w", self.w), ("g", self.gamma), ("b", self.beta), ("m", self.mean), ("v", self.var))]
        nodes = [oh.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                 oh.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["bn"], name="bn", epsilon=1e-5),
                 oh.make_node("Add", ["bn", "x"], ["a"], name="add"),
                 oh.make_node("Relu", ["a"], ["y"], name="relu")]
        g = oh.make_graph(nodes, "block", [oh.make_tensor_value_info("x", et, [1, 4, 6, 6])],
                          [oh.make_tensor_value_info("y", et, None)], inits)
        m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
        m.ir_version = 8
        return m


def ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


class Base(unittest.TestCase):
    def setUp(self):
        self.ctx = fusegen.Context(device="emu")

    def tearDown(self):
        self.ctx.close()


class TestPackage(unittest.TestCase):
    def test_import_uses_library_from_env(self):
        env = os.environ.get("FUSEGEN_LIBRARY")
        if not env:
            self.skipTest("FUSEGEN_LIBRARY is not set")
        self.assertEqual(fusegen.library_path(), os.path.realpath(env))
        self.assertEqual(fusegen.library_version(), "0.1.0")
        self.assertTrue(fusegen.__file__.startswith(os.path.join(SRC, "python")))

    def test_missing_library_is_a_clear_error(self):
        code = ("import fusegen\ntry:\n    fusegen.Context()\nexcept fusegen.LibraryNotFoundError as e:\n"
                "    print('NOTFOUND', e)\n")
        env = dict(os.environ, FUSEGEN_LIBRARY="/nonexistent/libfusegen.so", PYTHONPATH=os.path.join(SRC, "python"))
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertIn("NOTFOUND FUSEGEN_LIBRARY=/nonexistent/libfusegen.so: no such file", r.stdout, r.stderr)

    def _pip_install(self, target, build):
        try:
            import scikit_build_core  # noqa: F401
        except ImportError:
            self.skipTest("scikit-build-core is not installed (pip install scikit-build-core)")
        env = dict(os.environ)
        if not build:
            env["FUSEGEN_PYTHON_NO_BUILD"] = "1"
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                            "--no-index", "--target", target, os.path.join(SRC, "python")],
                           env=env, capture_output=True, text=True, timeout=1800)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def _run_installed(self, target, env_lib):
        code = """
import os, numpy as np, fusegen
assert fusegen.__file__.startswith(%r), fusegen.__file__
print("LIB", fusegen.library_path())
with fusegen.Context(device="emu") as ctx:
    plan = ctx.plan(%r)
    print("RULES", plan.groups[0].file if fusegen._lib.load().has("fg_plan_group_info") else plan.table())
    exe = ctx.compile(plan)
    y = exe(x=np.ones(exe.inputs[0].shape, np.float32))
    print("OK", sorted(y))
""" % (target, EXAMPLE)
        env = {k: v for k, v in os.environ.items() if k not in ("FUSEGEN_LIBRARY", "PYTHONPATH", "FUSEGEN_RULES")}
        env["PYTHONPATH"] = target
        if env_lib:
            env["FUSEGEN_LIBRARY"] = env_lib
            if os.environ.get("FUSEGEN_RULES"):
                env["FUSEGEN_RULES"] = os.environ["FUSEGEN_RULES"]
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                           cwd=target)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("OK ['block_relu']", r.stdout)
        return r.stdout

    def test_pip_install_from_repository(self):
        """pip install --target of python/ without the C build; the installed
        package runs with FUSEGEN_LIBRARY set."""
        env_lib = os.environ.get("FUSEGEN_LIBRARY")
        if not env_lib:
            self.skipTest("FUSEGEN_LIBRARY is not set")
        with tempfile.TemporaryDirectory() as t:
            self._pip_install(t, build=False)
            self.assertTrue(os.path.isfile(os.path.join(t, "fusegen", "py.typed")))
            self.assertFalse(os.path.exists(os.path.join(t, "fusegen", "_native")))
            out = self._run_installed(t, env_lib)
            self.assertIn("LIB " + os.path.realpath(env_lib), out)

    @unittest.skipUnless(os.environ.get("FUSEGEN_PYTHON_FULL_INSTALL") == "1",
                         "the full CMake build runs with FUSEGEN_PYTHON_FULL_INSTALL=1 (a minute or more)")
    def test_pip_install_builds_library(self):
        """pip install --target of python/ with the C build: the bundled
        library and its shipped rules are found without any variable."""
        with tempfile.TemporaryDirectory() as t:
            self._pip_install(t, build=True)
            out = self._run_installed(t, None)
            native = os.path.join(t, "fusegen", "_native")
            self.assertIn("LIB " + native, out)
            self.assertIn(os.path.join("fusegen", "_native", "share", "fusegen", "rules", "conv_bn.yaml"), out)

    def test_help_reads_well(self):
        text = pydoc.render_doc(fusegen, renderer=pydoc.plaintext)
        for word in ("Context", "compile", "kernel", "Error", "FUSEGEN_LIBRARY"):
            self.assertIn(word, text)
        self.assertIn("precision", pydoc.render_doc(fusegen.Context, renderer=pydoc.plaintext))
        self.assertIn("CUDA arrays", pydoc.render_doc(fusegen.Executable.__call__, renderer=pydoc.plaintext))


class TestErrors(Base):
    def test_bad_yaml_graph(self):
        with self.assertRaises(fusegen.Error) as cm:
            self.ctx.parse("graph: g\ninputs:\n  - { name: x, shape: [1, 2] \nnodes: [}\n", "bad.yaml")
        e = cm.exception
        self.assertEqual(e.status, "input error")
        self.assertEqual(e.code, 1)
        self.assertEqual(e.file, "bad.yaml")
        self.assertGreater(e.line, 0)
        self.assertGreater(e.col, 0)
        self.assertIn("bad.yaml:%d:%d: error: " % (e.line, e.col), str(e))
        self.assertTrue(str(e).startswith("input error: "))

    def test_unknown_op_and_every_error_listed(self):
        text = ("graph: g\ninputs:\n  - { name: x, shape: [1, 4] }\nnodes:\n"
                "  - { name: a, op: frobnicate, inputs: [x] }\n"
                "  - { name: b, op: wibble, inputs: [a] }\noutputs: [b]\n")
        with tempfile.TemporaryDirectory() as t:
            path = os.path.join(t, "unknown.yaml")
            with open(path, "w") as f:
                f.write(text)
            with self.assertRaises(fusegen.Error) as cm:
                self.ctx.load(path)
        e = cm.exception
        self.assertEqual(e.status, "input error")
        self.assertEqual((e.file, e.line), (path, 5))
        self.assertGreater(e.col, 0)
        self.assertIn("frobnicate", e.message)
        self.assertGreaterEqual(len(e.errors), 2)
        self.assertIn("%s:5:" % path, str(e))
        self.assertIn("%s:6:" % path, str(e))
        self.assertIn("wibble", str(e))
        # the errors were taken off the context: the next call starts clean
        self.ctx.load(EXAMPLE)

    def test_unknown_and_missing_inputs(self):
        exe = self.ctx.compile(EXAMPLE)
        with self.assertRaises(fusegen.Error) as cm:
            exe(xx=np.zeros(exe.inputs[0].shape, np.float32))
        self.assertIn("'xx' is not an input (did you mean 'x'?)", str(cm.exception))
        self.assertIn("input 'x' not given", str(cm.exception))
        with self.assertRaises(fusegen.Error) as cm:
            exe(x=np.zeros((1, 2, 3, 4), np.float32))
        self.assertIn("shape [1, 2, 3, 4]", str(cm.exception))

    def test_cuda_without_gpu(self):
        """device="cuda" on a machine without a driver (simulated by pointing
        FUSEGEN_CUDA_LIBRARY at nothing, in a fresh process)."""
        code = """
import fusegen
for how in ("context", "compile", "shortcut"):
    try:
        if how == "context":
            fusegen.Context(device="cuda").compile(%r)
        elif how == "compile":
            fusegen.Context(device="emu").compile(%r, device="cuda")
        else:
            fusegen.compile(%r, device="cuda")
        print(how, "NO ERROR")
    except fusegen.Error as e:
        print(how, "STATUS", e.status, e.code, "|", str(e).splitlines()[0])
""" % (EXAMPLE, EXAMPLE, EXAMPLE)
        env = dict(os.environ, FUSEGEN_CUDA_LIBRARY="/nonexistent/libcuda.so",
                   PYTHONPATH=os.path.join(SRC, "python"))
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        for how in ("context", "compile", "shortcut"):
            self.assertIn("%s STATUS no CUDA device 7 | no CUDA device: " % how, r.stdout)
        self.assertIn("emu", r.stdout)   # the message names the way out

    def test_precision_mismatch(self):
        with fusegen.Context(device="emu", precision="fp16") as ctx:
            with self.assertRaises(fusegen.Error) as cm:
                ctx.compile(EXAMPLE)
        self.assertEqual(cm.exception.status, "unsupported")
        self.assertIn("input 'x' is fp32", str(cm.exception))

    def test_closed_objects(self):
        plan = self.ctx.plan(EXAMPLE)
        exe = plan.compile()
        self.ctx.close()
        self.assertTrue(exe.closed and plan.closed and plan.graph.closed)
        with self.assertRaises(ValueError):
            len(plan)
        with self.assertRaises(ValueError):
            self.ctx.load(EXAMPLE)


class TestPlan(Base):
    def test_kernel_counts(self):
        if not fusegen._lib.load().has("fg_context_kernel_counts"):
            self.skipTest("this libfusegen has no fg_context_kernel_counts")
        with fusegen.Context(device="emu", cache_dir=tempfile.mkdtemp(prefix="fusegen-kc-")) as ctx:
            self.assertEqual(set(ctx.kernel_counts().values()), {0})
            ctx.compile(EXAMPLE)
            first = ctx.kernel_counts()
            self.assertEqual((first["host_compiled"], first["nvrtc_compiled"], first["memory_hits"]), (2, 0, 0))
            ctx.compile(EXAMPLE)        # the same kernels again: from the context's memory tier
            again = ctx.kernel_counts()
            self.assertEqual((again["host_compiled"], again["memory_hits"]), (2, 2))

    def test_groups(self):
        if not fusegen._lib.load().has("fg_plan_group_info"):
            self.skipTest("this libfusegen has no fg_plan_group_info")
        plan = self.ctx.plan(EXAMPLE)
        self.assertEqual(len(plan), 2)
        g0, g1 = plan.groups
        self.assertEqual(g0.rule, "conv_bn_act")
        self.assertTrue(g0.file.endswith("conv_bn.yaml"), g0.file)
        self.assertGreater(g0.line, 0)
        self.assertEqual(g0.location, "%s:%d" % (g0.file, g0.line))
        self.assertEqual(g0.nodes, ("block_conv1", "block_conv1_bn", "block_conv1_relu"))
        self.assertEqual(g0.folded, ("block_conv1_bn",))
        self.assertEqual(g0.anchor, "block_conv1")
        self.assertEqual(g0.template, "conv2d")
        self.assertEqual(g0.epilogue, ("bias", "apply(relu)"))
        self.assertEqual(g0.output, "block_conv1_relu")
        self.assertEqual(g1.rule, "conv_bn_add_act")
        self.assertEqual(g1.epilogue, ("bias", "apply(add)", "apply(relu)"))
        self.assertEqual(g1.nodes[-1], "block_relu")

    def test_text_explain_dot(self):
        plan = self.ctx.plan(EXAMPLE)
        table = str(plan)
        self.assertIn("conv_bn_act", table)
        self.assertIn("ops: 7 -> kernels: 2", table)
        ex = plan.explain()
        self.assertTrue(ex.startswith(table))
        self.assertIn("near misses", ex)
        dot = plan.dot()
        self.assertTrue(dot.startswith('digraph "resnet_basic_block"'))
        self.assertIn("cluster_g1", dot)

    def test_text_functions_check_arguments(self):
        """fg_plan_text / fg_plan_dot_text given NULLs: FG_ERR_INPUT, *out NULL."""
        lib = fusegen._lib.load()
        plan = self.ctx.plan(EXAMPLE)
        out = C.c_void_p(1234)
        self.assertEqual(lib.fg_plan_text(None, plan._handle(), 0, C.byref(out)), 1)
        self.assertEqual(lib.fg_plan_text(self.ctx._ptr, None, 1, C.byref(out)), 1)
        self.assertIsNone(out.value)
        self.assertEqual(lib.fg_plan_dot_text(self.ctx._ptr, plan._handle(), None), 1)
        self.assertEqual(lib.fg_plan_dot_text(self.ctx._ptr, None, C.byref(out)), 1)
        errs = self.ctx._take_errors()
        self.assertEqual([e.message for e in errs], ["fg_plan_text: plan is NULL", "fg_plan_dot_text: out is NULL",
                                                     "fg_plan_dot_text: plan is NULL"])
        lib.fg_string_free(None)

    def test_kernel_sources(self):
        exe = self.ctx.compile(self.ctx.plan(EXAMPLE))
        self.assertEqual(exe.device, "emu")
        ks = exe.kernels
        self.assertEqual(len(ks), 2)
        for k in ks:
            self.assertRegex(k.name, r"^fg_[a-z0-9_]+_[0-9a-f]{12}$")
            self.assertIn("FG_KERNEL(%s," % k.name, k.source)
        self.assertIn("conv_bn_act", ks[0].name)
        x = exe.inputs[0]
        self.assertEqual((x.name, x.shape, x.dtype, x.layout), ("x", (1, 64, 56, 56), "fp32", "NCHW"))
        self.assertEqual(x.nbytes, 64 * 56 * 56 * 4)
        self.assertGreater(exe.arena_bytes, 0)


class TestRun(Base):
    def test_yaml_graph_against_onnxruntime(self):
        w = Weights()
        x = rnd(1, 4, 6, 6)
        exe = self.ctx.compile(self.ctx.parse(w.yaml(), "block.yaml"))
        y = exe(x=x)["y"]
        self.assertEqual((y.shape, y.dtype), ((1, 4, 6, 6), np.float32))
        ref = np.maximum(_conv_bn(x, w) + x, 0)
        self.assertLessEqual(rel_l2(y, ref), 1e-5)
        if onnx is not None:
            self.assertLessEqual(rel_l2(y, ort_run(w.onnx_model(), {"x": x})), 1e-5)

    @needs_onnx
    def test_onnx_model_against_onnxruntime(self):
        """A small CNN: conv + bn + relu, max pool, conv + bias + add,
        global average pool, flatten, gemm; from a file, from bytes, and
        from a ModelProto, with a symbolic batch dimension."""
        inits = {"w1": rnd(8, 3, 3, 3, scale=0.3), "g": (RNG.random(8) + 0.5).astype(np.float32),
                 "b": rnd(8, scale=0.1), "m": rnd(8, scale=0.1), "v": (RNG.random(8) + 0.5).astype(np.float32),
                 "w2": rnd(8, 8, 3, 3, scale=0.2), "b2": rnd(8, scale=0.1), "fw": rnd(5, 8, scale=0.3),
                 "fb": rnd(5, scale=0.1)}
        nodes = [oh.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
                 oh.make_node("BatchNormalization", ["c1", "g", "b", "m", "v"], ["bn1"], name="bn1"),
                 oh.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
                 oh.make_node("MaxPool", ["r1"], ["p1"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                 oh.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
                 oh.make_node("Add", ["c2", "p1"], ["a2"], name="add"),
                 oh.make_node("Relu", ["a2"], ["r2"], name="relu2"),
                 oh.make_node("GlobalAveragePool", ["r2"], ["gp"], name="gap"),
                 oh.make_node("Flatten", ["gp"], ["fl"], name="flat"),
                 oh.make_node("Gemm", ["fl", "fw", "fb"], ["y"], name="fc", transB=1)]
        g = oh.make_graph(nodes, "small_cnn", [oh.make_tensor_value_info("x", TP.FLOAT, ["batch", 3, 8, 8])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, None)],
                          [nh.from_array(v, k) for k, v in inits.items()])
        model = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
        model.ir_version = 8
        x = rnd(2, 3, 8, 8)
        ref = ort_run(model, {"x": x})
        with tempfile.TemporaryDirectory() as t:
            path = os.path.join(t, "small_cnn.onnx")
            onnx.save(model, path)
            exe = fusegen.compile(path, device="emu", dims={"batch": 2})
            y = exe(x=x)["y"]
            self.assertEqual(y.shape, (2, 5))
            self.assertLessEqual(rel_l2(y, ref), 1e-5)
            self.assertLess(len(exe.kernels), len(nodes))
            exe.context.close()
        for src in (model.SerializeToString(), model):
            graph = (self.ctx.load_bytes(src, "small_cnn.onnx", dims={"batch": 2}) if isinstance(src, bytes)
                     else self.ctx.load(src, dims={"batch": 2}))
            y = self.ctx.compile(graph)(x=x)["y"]
            self.assertLessEqual(rel_l2(y, ref), 1e-5)
        with self.assertRaises(fusegen.Error) as cm:
            self.ctx.load_bytes(b"\x08\x07garbage", "broken.onnx")
        self.assertEqual(cm.exception.file, "broken.onnx")

    @needs_onnx
    def test_int64_ids_and_bool_outputs(self):
        """Token ids (int64) gather embedding rows; a bool and an int64
        output come back as NumPy bool and int64 arrays, equal to
        onnxruntime's."""
        table = rnd(10, 4)
        nodes = [oh.make_node("Gather", ["table", "ids"], ["e"]),
                 oh.make_node("Greater", ["e", "zero"], ["pos"]),
                 oh.make_node("Cast", ["e"], ["ei"], to=TP.INT64)]
        g = oh.make_graph(nodes, "ids", [oh.make_tensor_value_info("ids", TP.INT64, [2, 3])],
                          [oh.make_tensor_value_info("e", TP.FLOAT, None),
                           oh.make_tensor_value_info("pos", TP.BOOL, None),
                           oh.make_tensor_value_info("ei", TP.INT64, None)],
                          [nh.from_array(table * 4, "table"), nh.from_array(np.array(0.0, np.float32), "zero")])
        model = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
        model.ir_version = 8
        ids = np.array([[0, 9, -1], [3, 3, 7]], np.int64)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = dict(zip(["e", "pos", "ei"], sess.run(None, {"ids": ids})))
        out = self.ctx.compile(self.ctx.load(model))(ids=ids)
        self.assertEqual(out["pos"].dtype, np.bool_)
        self.assertEqual(out["ei"].dtype, np.int64)
        np.testing.assert_array_equal(out["pos"], ref["pos"])
        np.testing.assert_array_equal(out["ei"], ref["ei"])
        self.assertLessEqual(rel_l2(out["e"], ref["e"]), 1e-6)

    @needs_onnx
    def test_example_script(self):
        """examples/python/run_onnx.py on its built-in model."""
        env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"))
        r = subprocess.run([sys.executable, os.path.join(SRC, "examples", "python", "run_onnx.py")], env=env,
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr)
        self.assertIn("near misses", r.stdout)
        self.assertIn("---- the CUDA source of fg_", r.stdout)
        self.assertEqual(r.stdout.splitlines()[-1], "OK")

    @needs_onnx
    def test_fp16_onnx_against_onnxruntime(self):
        """fp16 model (inputs and initializers); the reference is onnxruntime
        on the fp32 model holding the same fp16-exact values."""
        w = Weights()
        for name in ("w", "gamma", "beta", "mean", "var"):
            setattr(w, name, getattr(w, name).astype(np.float16).astype(np.float32))
        x16 = rnd(1, 4, 6, 6).astype(np.float16)
        ref = ort_run(w.onnx_model("fp32"), {"x": x16.astype(np.float32)})
        exe = self.ctx.compile(self.ctx.load_bytes(w.onnx_model("fp16").SerializeToString(), "block16.onnx"))
        self.assertEqual((exe.inputs[0].dtype, exe.outputs[0].dtype), ("fp16", "fp16"))
        y = exe(x=x16)["y"]
        self.assertEqual(y.dtype, np.float16)
        self.assertLessEqual(rel_l2(y, ref), 1e-2)
        # float32 input: rounded to fp16 by fg_convert_dtype, the same values
        y32in = exe(x=x16.astype(np.float32))["y"]
        np.testing.assert_array_equal(y32in, y)

    def test_fp16_and_bf16_yaml(self):
        w = Weights()
        x = rnd(1, 4, 6, 6)
        ref = np.maximum(_conv_bn(x, w) + x, 0)
        exe16 = self.ctx.compile(self.ctx.parse(w.yaml("fp16"), "b16.yaml"))
        y16 = exe16(x=x.astype(np.float16))["y"]
        self.assertEqual(y16.dtype, np.float16)
        self.assertLessEqual(rel_l2(y16, ref), 1e-2)
        exebf = self.ctx.compile(self.ctx.parse(w.yaml("bf16"), "bf.yaml"))
        ybf = exebf(x=x)["y"]
        self.assertEqual(ybf.dtype, A.numpy_dtype(A.FG_BF16))
        self.assertLessEqual(rel_l2(ybf.astype(np.float32), ref), 3e-2)
        if A.BFLOAT16 is not None:
            ybf2 = exebf(x=x.astype(A.BFLOAT16))["y"]
            np.testing.assert_array_equal(ybf2.astype(np.float32), ybf.astype(np.float32))

    def test_caller_provided_outputs(self):
        w = Weights()
        x = rnd(1, 4, 6, 6)
        exe = self.ctx.compile(self.ctx.parse(w.yaml(), "block.yaml"))
        ref = exe(x=x)["y"]
        out = np.full((1, 4, 6, 6), np.nan, np.float32)
        r = exe(out={"y": out}, x=x)
        self.assertIs(r["y"], out)
        np.testing.assert_array_equal(out, ref)
        out64 = np.zeros((1, 4, 6, 6), np.float64)         # another dtype: a converted copy
        self.assertIs(exe({"x": x}, out={"y": out64})["y"], out64)
        np.testing.assert_array_equal(out64, ref.astype(np.float64))
        with self.assertRaises(fusegen.Error):
            exe(x=x, out={"y": np.zeros((4, 6, 6), np.float32)})
        with self.assertRaises(fusegen.Error) as cm:
            exe(x=x, out={"z": out})
        self.assertIn("'z' is not an output", str(cm.exception))

    def test_nhwc_tensors(self):
        """Logical NCHW arrays in and out of an NHWC graph (fg_convert_layout)."""
        w = Weights()
        x = rnd(1, 4, 6, 6)
        nchw = self.ctx.compile(self.ctx.parse(w.yaml(), "a.yaml"))(x=x)["y"]
        exe = self.ctx.compile(self.ctx.parse(w.yaml(layout="NHWC"), "b.yaml"))
        self.assertEqual(exe.inputs[0].layout, "NHWC")
        self.assertEqual(exe.inputs[0].physical_shape, (1, 6, 6, 4))
        y = exe(x=x)["y"]
        self.assertEqual(y.shape, (1, 4, 6, 6))
        self.assertLessEqual(rel_l2(y, nchw), 1e-6)
        out = np.zeros((1, 4, 6, 6), np.float32)
        exe(x=x, out={"y": out})
        np.testing.assert_array_equal(out, y)


def _conv_bn(x, w):
    """conv + batch norm without the relu (conv_bn_relu_ref before max)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    y = np.einsum("nchwrs,kcrs->nkhw", win, w.w.astype(np.float64))
    s = (w.gamma / np.sqrt(w.var.astype(np.float64) + 1e-5))[None, :, None, None]
    return (y - w.mean[None, :, None, None]) * s + w.beta[None, :, None, None]


class TestLifetimes(Base):
    """An object keeps alive what it was made from; closing a parent closes
    what was made from it first; every later use raises ValueError; integers
    are range-checked before ctypes could truncate them."""

    def _exe(self):
        w = Weights()
        g = self.ctx.parse(w.yaml(), "block.yaml")
        p = self.ctx.plan(g)
        return g, p, self.ctx.compile(p)

    def test_executable_keeps_plan_and_graph(self):
        import gc
        exe = self._exe()[2]
        gc.collect()
        self.assertFalse(exe._owner.closed or exe._owner.graph.closed)
        y = exe(x=rnd(1, 4, 6, 6))["y"]
        self.assertEqual(y.shape, (1, 4, 6, 6))

    def test_close_plan_closes_its_executables(self):
        g, p, exe = self._exe()
        p.close()
        self.assertTrue(exe.closed)
        self.assertFalse(g.closed)
        with self.assertRaisesRegex(ValueError, "Executable is closed"):
            exe(x=rnd(1, 4, 6, 6))
        with self.assertRaises(ValueError):
            exe.kernels
        with self.assertRaises(ValueError):
            exe.arena_bytes
        with self.assertRaises(ValueError):
            p.compile()
        with self.assertRaises(ValueError):
            p.groups
        p.close()   # twice: nothing
        exe.close()
        # the graph still plans
        self.assertGreater(len(self.ctx.plan(g)), 0)

    def test_close_graph_closes_plans_and_executables(self):
        g, p, exe = self._exe()
        groups = p.groups
        self.assertTrue(groups)
        g.close()
        self.assertTrue(p.closed and exe.closed)
        for use in (lambda: self.ctx.compile(p), lambda: len(p), lambda: p.groups, lambda: p.explain(),
                    lambda: self.ctx.plan(g), lambda: exe(x=rnd(1, 4, 6, 6))):
            with self.assertRaises(ValueError):
                use()

    def test_close_kernel_closes_its_executable(self):
        k = self.ctx.kernel(["relu"], (1, 4, 3, 3))
        e = k.exec
        k.close()
        self.assertTrue(e.closed)
        for use in (lambda: k(rnd(1, 4, 3, 3)), lambda: k.exec, lambda: e(x=rnd(1, 4, 3, 3))):
            with self.assertRaises(ValueError):
                use()

    def test_integers_range_checked(self):
        big = 2 ** 64 + 2   # ctypes would store 2
        with self.assertRaises(OverflowError):
            self.ctx.kernel(["relu"], (1, 4, big, 3))
        with self.assertRaises(OverflowError):
            self.ctx.kernel([("c", "conv2d")], (1, 4, 6, 6), {"c.weight": (4, 4, big, 3)})
        with self.assertRaises(OverflowError):
            fusegen.Context(device="emu", jobs=2 ** 32 + 1)
        with self.assertRaises(TypeError):
            self.ctx.kernel(["relu"], (1, 4, 2.5, 3))
        if onnx is not None:
            g = oh.make_graph([oh.make_node("Relu", ["x"], ["y"], name="relu")], "r",
                              [oh.make_tensor_value_info("x", TP.FLOAT, ["batch", 4])],
                              [oh.make_tensor_value_info("y", TP.FLOAT, None)])
            model = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
            model.ir_version = 8
            with self.assertRaises(OverflowError):
                self.ctx.load(model, dims={"batch": big})
            with self.assertRaises(OverflowError):
                self.ctx.load_bytes(model.SerializeToString(), dims={"batch": -2 ** 63 - 1})
            self.assertEqual(self.ctx.compile(self.ctx.load(model, dims={"batch": np.int64(3)})).inputs[0].shape,
                             (3, 4))


class TestKernel(unittest.TestCase):
    def test_conv_bn_relu(self):
        c, k = 6, 8
        x = rnd(1, c, 9, 9)
        wt = rnd(k, c, 3, 3, scale=0.3)
        gamma, beta = (RNG.random(k) + 0.5).astype(np.float32), rnd(k, scale=0.1)
        mean, var = rnd(k, scale=0.1), (RNG.random(k) + 0.5).astype(np.float32)
        kern = fusegen.kernel([("conv", "conv2d", {"padding": [1, 1]}), ("bn", "batch_norm"), ("act", "relu")],
                              input_shape=(1, c, 9, 9), device="emu", template="conv2d",
                              weights={"conv.weight": wt, "bn.gamma": gamma, "bn.beta": beta, "bn.mean": mean,
                                       "bn.var": var})
        self.assertIn("FG_KERNEL(fg_conv_bn_act_", kern.source)
        self.assertEqual(kern.device, "emu")
        self.assertEqual([t.name for t in kern.inputs], ["x"])
        self.assertEqual(kern.outputs[0].shape, (1, k, 9, 9))
        self.assertEqual(kern.exec.kernels[0].source, kern.source)
        y = kern(x)
        self.assertLessEqual(rel_l2(y, conv_bn_relu_ref(x, wt, gamma, beta, mean, var)), 1e-5)
        out = np.zeros((1, k, 9, 9), np.float32)
        self.assertIs(kern(x, out=out), out)
        np.testing.assert_array_equal(out, y)
        kern.context.close()

    def test_shared_context_random_weights_fp16(self):
        with fusegen.Context(device="emu") as ctx:
            kern = fusegen.kernel([("conv", "conv2d", "{ stride: [2, 2], padding: [1, 1] }"), "relu"],
                                  input_shape=(1, 4, 8, 8), weights={"conv.weight": (4, 4, 3, 3)},
                                  dtype="fp16", context=ctx)
            y = kern(rnd(1, 4, 8, 8))
            self.assertEqual((y.shape, y.dtype), ((1, 4, 4, 4), np.float16))
            self.assertTrue((y >= 0).all())

    def test_kernel_errors(self):
        with fusegen.Context(device="emu") as ctx:
            with self.assertRaises(fusegen.Error) as cm:
                ctx.kernel([("conv", "conv2d")], input_shape=(1, 4, 8, 8))
            self.assertIn("conv.weight", str(cm.exception))
            with self.assertRaises(fusegen.Error) as cm:
                ctx.kernel([("a", "nosuchop")], input_shape=(1, 4))
            self.assertIn("nosuchop", str(cm.exception))

    def test_attrs_text(self):
        self.assertEqual(_core._attrs_text({"stride": (2, 2), "eps": 1e-3, "training": False, "mode": "x y"}),
                         '{ stride: [2, 2], eps: 0.001, training: false, mode: "x y" }')
        self.assertIsNone(_core._attrs_text(None))
        with self.assertRaises(ValueError):
            _core._attrs_text({"bad key": 1})


# ---- CUDA arrays: recognition with stand-ins (no GPU here) -------------------------

class FakeCAI:
    """An object with __cuda_array_interface__ (version 3)."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None, readonly=False, stream=None):
        self.__cuda_array_interface__ = {"data": (ptr, readonly), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3, "stream": stream}


_capsule_new = C.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = C.py_object, [C.c_void_p, C.c_char_p, C.c_void_p]


class FakeDLPack:
    """A DLPack producer on a CUDA device: __dlpack__ returns a real
    'dltensor' capsule over a DLManagedTensor built here."""

    def __init__(self, ptr, shape, code=A.KDL_FLOAT, bits=32, strides=None, device=(A.KDL_CUDA, 0), offset=0):
        self.device = device
        self._shape = (C.c_int64 * len(shape))(*shape)
        self._strides = (C.c_int64 * len(shape))(*strides) if strides else None
        mt = self._mt = A.DLManagedTensor()
        t = mt.dl_tensor
        t.data, t.ndim, t.byte_offset = ptr, len(shape), offset
        t.device.device_type, t.device.device_id = device
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
        t.shape = C.cast(self._shape, C.POINTER(C.c_int64))
        t.strides = C.cast(self._strides, C.POINTER(C.c_int64)) if strides else None
        self.streams = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return _capsule_new(C.addressof(self._mt), b"dltensor", None)


class FakeCudaExec:
    """What prepare_device_run reads of an Executable, on "cuda"."""

    def __init__(self, inputs, outputs):
        self.device, self.inputs, self.outputs = "cuda", inputs, outputs


def ti(name, shape, dtype="fp32", layout="NCHW"):
    return fusegen.TensorInfo(name, tuple(shape), dtype, layout, 0)


class TestCudaArrays(unittest.TestCase):
    def test_host_objects_are_not_cuda(self):
        self.assertFalse(A.is_cuda_array(np.zeros(3)))
        self.assertFalse(A.is_cuda_array([1.0, 2.0]))
        self.assertFalse(A.is_cuda_array(FakeDLPack(0x1000, (2,), device=(1, 0))))   # kDLCPU

    def test_cuda_array_interface(self):
        a = FakeCAI(0x7000, (1, 4, 2, 3), "<f2", stream=5)
        self.assertTrue(A.is_cuda_array(a))
        d = A.device_array(a)
        self.assertEqual((d.ptr, d.shape, d.dtype, d.strides, d.source, d.producer_stream),
                         (0x7000, (1, 4, 2, 3), "fp16", None, "cuda_array_interface", 5))
        self.assertTrue(d.layout_matches(A.FG_NCHW))
        self.assertFalse(d.layout_matches(A.FG_NHWC))
        # channels_last strides (bytes): N, C, H, W -> H*W*C, 1, W*C, C elements
        cl = A.device_array(FakeCAI(0x7000, (1, 4, 2, 3), "<f4", strides=(96, 4, 48, 16)))
        self.assertEqual(cl.strides, (24, 1, 12, 4))
        self.assertTrue(cl.layout_matches(A.FG_NHWC))
        self.assertFalse(cl.layout_matches(A.FG_NCHW))
        self.assertIsNone(A.device_array(FakeCAI(0x7000, (4,), "<i8")).dtype)

    def test_dlpack(self):
        a = FakeDLPack(0x9000, (2, 3), code=A.KDL_BFLOAT, bits=16, offset=64)
        self.assertTrue(A.is_cuda_array(a))
        d = A.device_array(a, stream=7)
        self.assertEqual((d.ptr, d.shape, d.dtype, d.source), (0x9000 + 64, (2, 3), "bf16", "dlpack"))
        self.assertEqual(a.streams, [7])          # the consumer's stream reaches the producer
        self.assertEqual(A.device_array(FakeDLPack(0x9000, (2, 3), bits=16)).dtype, "fp16")
        s = A.device_array(FakeDLPack(0x9000, (1, 4, 2, 3), strides=(24, 1, 12, 4)))
        self.assertTrue(s.layout_matches(A.FG_NHWC))

    def test_streams(self):
        self.assertEqual(A.launch_stream(None), 1)          # default stream -> CU_STREAM_LEGACY
        self.assertEqual(A.launch_stream(0), 1)
        self.assertEqual(A.launch_stream(0xABC), 0xABC)

        class TorchLike:
            cuda_stream = 0x55

        class CupyLike:
            ptr = 0x66

        self.assertEqual(A.stream_handle(TorchLike()), 0x55)
        self.assertEqual(A.stream_handle(CupyLike()), 0x66)
        with self.assertRaises(TypeError):
            A.stream_handle("default")

    def test_prepare_device_run(self):
        exe = FakeCudaExec([ti("x", (1, 4, 2, 3), "fp16", "NHWC")], [ti("y", (1, 8), "fp32")])
        x = FakeDLPack(0x1000, (1, 4, 2, 3), bits=16, strides=(24, 1, 12, 4))
        y = FakeCAI(0x2000, (1, 8))
        binds, result, launch, keep = _core.prepare_device_run(exe, {"x": x}, {"y": y}, stream=0x77)
        self.assertEqual(binds, [("x", 0x1000), ("y", 0x2000)])
        self.assertIs(result["y"], y)
        self.assertEqual(launch, 0x77)
        self.assertEqual(x.streams, [0x77])
        # dtype, layout, shape, read-only and mixing are refused
        cases = [({"x": FakeDLPack(0x1000, (1, 4, 2, 3), bits=32, strides=(24, 1, 12, 4))}, {"y": y}, "is fp32"),
                 ({"x": FakeDLPack(0x1000, (1, 4, 2, 3), bits=16)}, {"y": y}, "channels_last"),
                 ({"x": x}, {"y": FakeCAI(0x2000, (8,))}, "has shape [8]"),
                 ({"x": x}, {"y": FakeCAI(0x2000, (1, 8), readonly=True)}, "read-only"),
                 ({"x": x}, {"y": np.zeros((1, 8), np.float32)}, "mixed"),
                 ({"x": x}, {}, "cannot allocate output 'y'")]
        for feeds, outs, msg in cases:
            with self.assertRaises(fusegen.Error) as cm:
                _core.prepare_device_run(exe, feeds, outs, None)
            self.assertIn(msg, str(cm.exception))

    def test_emulation_refuses_cuda_arrays(self):
        with fusegen.Context(device="emu") as ctx:
            exe = ctx.compile(EXAMPLE)
            with self.assertRaises(fusegen.Error) as cm:
                exe(x=FakeCAI(0x1000, exe.inputs[0].shape))
            self.assertIn("runs in emulation", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
