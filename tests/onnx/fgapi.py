"""fgapi.py -- a small ctypes binding of libfusegen for the ONNX tests: load a
model (fg_graph_load_onnx / fg_graph_load_onnx_memory / fg_graph_load), plan,
compile for a device, run on NumPy arrays with fg_exec_run_host, and read
the recorded errors.  Only what the tests need."""
import ctypes as C

import numpy as np

DEVICE = {"auto": 0, "cuda": 1, "emu": 2}
DTYPES = {0: np.float32, 1: np.float16, 3: np.int64, 4: np.int32, 5: np.bool_}
try:  # bfloat16 arrays (FG_DTYPE_BF16) where ml_dtypes (an onnx dependency) is installed
    import ml_dtypes
    DTYPES[2] = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover
    pass


def poisoned(shape, dtype):
    """An output buffer with every byte 0xFF (NaN for floats, -1 for
    integers, an invalid bool), so that an element left unwritten shows."""
    a = np.empty(shape, dtype=dtype)
    a.reshape(-1).view(np.uint8)[...] = 0xFF   # reshape(-1): a 0-d array's bytes too
    return a


class Dim(C.Structure):
    _fields_ = [("name", C.c_char_p), ("value", C.c_int64)]


class OnnxOptions(C.Structure):
    _fields_ = [("ndims", C.c_int), ("dims", C.POINTER(Dim)), ("base_dir", C.c_char_p), ("size", C.c_size_t)]


class CompileOptions(C.Structure):
    _fields_ = [("device", C.c_int), ("graph_replay", C.c_int), ("timing", C.c_int), ("size", C.c_size_t)]


class TensorInfo(C.Structure):
    _fields_ = [("name", C.c_char_p), ("dtype", C.c_int), ("layout", C.c_int), ("rank", C.c_int),
                ("shape", C.c_int64 * 6), ("bytes", C.c_size_t), ("float64", C.c_int)]


class Binding(C.Structure):
    _fields_ = [("name", C.c_char_p), ("data", C.c_void_p)]


class Error(C.Structure):
    _fields_ = [("status", C.c_int), ("file", C.c_char_p), ("line", C.c_int), ("col", C.c_int),
                ("message", C.c_char_p)]


class FusegenError(Exception):
    def __init__(self, status, messages):
        super().__init__("status %d: %s" % (status, "\n".join(messages)))
        self.status = status
        self.messages = messages


class Lib:
    def __init__(self, path):
        L = self.L = C.CDLL(path)
        vp, pp = C.c_void_p, C.POINTER(C.c_void_p)
        sig = {
            "fg_context_init": (C.c_int, [pp, vp]),
            "fg_context_free": (None, [vp]),
            "fg_context_error_count": (C.c_int, [vp]),
            "fg_context_error": (C.POINTER(Error), [vp, C.c_int]),
            "fg_context_clear_errors": (None, [vp]),
            "fg_error_format": (C.c_char_p, [C.POINTER(Error), C.c_char_p, C.c_size_t]),
            "fg_graph_load": (C.c_int, [vp, C.c_char_p, pp]),
            "fg_graph_load_onnx": (C.c_int, [vp, C.c_char_p, C.POINTER(OnnxOptions), pp]),
            "fg_graph_load_onnx_memory": (C.c_int, [vp, C.c_char_p, C.c_char_p, C.c_size_t,
                                                    C.POINTER(OnnxOptions), pp]),
            "fg_graph_free": (None, [vp]),
            "fg_plan_build": (C.c_int, [vp, vp, pp]),
            "fg_plan_free": (None, [vp]),
            "fg_plan_group_count": (C.c_int, [vp]),
            "fg_plan_compile": (C.c_int, [vp, vp, C.POINTER(CompileOptions), pp]),
            "fg_exec_free": (None, [vp]),
            "fg_exec_input_count": (C.c_int, [vp]),
            "fg_exec_output_count": (C.c_int, [vp]),
            "fg_exec_input_info": (C.c_int, [vp, C.c_int, C.POINTER(TensorInfo)]),
            "fg_exec_output_info": (C.c_int, [vp, C.c_int, C.POINTER(TensorInfo)]),
            "fg_exec_run_host": (C.c_int, [vp, C.POINTER(Binding), C.c_int]),
            "fg_exec_kernel_count": (C.c_int, [vp]),
        }
        for name, (res, args) in sig.items():
            f = getattr(L, name)
            f.restype, f.argtypes = res, args
        self.ctx = C.c_void_p()
        st = L.fg_context_init(C.byref(self.ctx), None)
        if st:
            raise FusegenError(st, self.errors())

    def errors(self):
        out = []
        buf = C.create_string_buffer(4096)
        for i in range(self.L.fg_context_error_count(self.ctx)):
            self.L.fg_error_format(self.L.fg_context_error(self.ctx, i), buf, 4096)
            out.append(buf.value.decode(errors="replace"))
        return out

    def check(self, st):
        if st:
            msgs = self.errors()
            self.L.fg_context_clear_errors(self.ctx)
            raise FusegenError(st, msgs)

    def load(self, path=None, data=None, dims=None, base_dir=None, plain=False):
        """A graph handle from an ONNX file or bytes; plain: through fg_graph_load."""
        g = C.c_void_p()
        dims = dims or {}
        arr = (Dim * max(1, len(dims)))(*[Dim(k.encode(), v) for k, v in dims.items()])
        o = OnnxOptions(len(dims), arr, base_dir.encode() if base_dir else None, C.sizeof(OnnxOptions))
        if plain:
            st = self.L.fg_graph_load(self.ctx, path.encode(), C.byref(g))
        elif data is not None:
            st = self.L.fg_graph_load_onnx_memory(self.ctx, b"mem.onnx", data, len(data), C.byref(o), C.byref(g))
        else:
            st = self.L.fg_graph_load_onnx(self.ctx, path.encode(), C.byref(o), C.byref(g))
        self.check(st)
        return g

    def run(self, g, feeds, device="emu"):
        """Plans, compiles and runs graph g once; returns ({name: array}, kernels)."""
        p, e = C.c_void_p(), C.c_void_p()
        try:
            self.check(self.L.fg_plan_build(self.ctx, g, C.byref(p)))
            co = CompileOptions(DEVICE[device], 0, 0, C.sizeof(CompileOptions))
            self.check(self.L.fg_plan_compile(self.ctx, p, C.byref(co), C.byref(e)))
            binds, keep, outs = [], [], {}
            for i in range(self.L.fg_exec_input_count(e)):
                info = TensorInfo()
                self.L.fg_exec_input_info(e, i, C.byref(info))
                name = info.name.decode()
                a = np.ascontiguousarray(feeds[name], dtype=DTYPES[info.dtype])
                assert a.nbytes == info.bytes, (name, a.shape, info.bytes)
                keep.append(a)
                binds.append(Binding(info.name, a.ctypes.data))
            for i in range(self.L.fg_exec_output_count(e)):
                info = TensorInfo()
                self.L.fg_exec_output_info(e, i, C.byref(info))
                shape = tuple(info.shape[:info.rank])
                a = poisoned(shape, DTYPES[info.dtype])
                outs[info.name.decode()] = a
                binds.append(Binding(info.name, a.ctypes.data))
            arr = (Binding * len(binds))(*binds)
            self.check(self.L.fg_exec_run_host(e, arr, len(binds)))
            return outs, self.L.fg_exec_kernel_count(e)
        finally:
            self.L.fg_exec_free(e)
            self.L.fg_plan_free(p)

    def free_graph(self, g):
        self.L.fg_graph_free(g)

    def close(self):
        self.L.fg_context_free(self.ctx)
        self.ctx = None


# ---- additions for the conformance runner (tests/onnx/test_conformance.py) ----

GROUP_INFO_MAX_NODES = 16   # FG_GROUP_INFO_MAX_NODES in include/fusegen.h


class GroupInfo(C.Structure):
    _fields_ = [("rule", C.c_char_p), ("rule_file", C.c_char_p), ("rule_line", C.c_int), ("nnodes", C.c_int),
                ("nodes", C.c_char_p * GROUP_INFO_MAX_NODES), ("folded", C.c_int * GROUP_INFO_MAX_NODES),
                ("anchor", C.c_char_p), ("template_name", C.c_char_p), ("output", C.c_char_p),
                ("epilogue", C.c_char * 256)]


def _bind_extra(L):
    L.fg_plan_group_info.restype = C.c_int
    L.fg_plan_group_info.argtypes = [C.c_void_p, C.c_void_p, C.c_int, C.POINTER(GroupInfo)]


def node_id(name):
    """The identifier fusegen gives a node named name: bytes other than
    letters, digits, `_` and `.` become `_`, a name not starting with a
    letter or `_` gets `t_` (docs/onnx.md, "names"; a clash's `_2` suffix
    aside)."""
    s = "".join(c if c.isascii() and (c.isalnum() or c in "_.") else "_" for c in name)
    return s if s[:1].isalpha() or s[:1] == "_" else "t_" + s


def run_ordered(lib, g, arrays, device="emu"):
    """Plans, compiles and runs graph g once with the graph inputs given by
    position (arrays[i] for the i-th graph input, converted to its dtype);
    returns (outputs in graph output order, kernels, ops): ops is the number
    of graph nodes the plan's groups compute (after rewrites), kernels the
    number of kernels launched."""
    L = lib.L
    if not getattr(L, "_fg_extra", False):
        _bind_extra(L)
        L._fg_extra = True
    p, e = C.c_void_p(), C.c_void_p()
    try:
        lib.check(L.fg_plan_build(lib.ctx, g, C.byref(p)))
        ops = 0
        for i in range(L.fg_plan_group_count(p)):
            gi = GroupInfo()
            lib.check(L.fg_plan_group_info(lib.ctx, p, i, C.byref(gi)))
            ops += gi.nnodes
        co = CompileOptions(DEVICE[device], 0, 0, C.sizeof(CompileOptions))
        lib.check(L.fg_plan_compile(lib.ctx, p, C.byref(co), C.byref(e)))
        nin = L.fg_exec_input_count(e)
        if nin != len(arrays):
            raise FusegenError(-1, ["the plan has %d inputs, %d arrays given" % (nin, len(arrays))])
        binds, keep, outs = [], [], []
        for i in range(nin):
            info = TensorInfo()
            L.fg_exec_input_info(e, i, C.byref(info))
            shape = tuple(info.shape[:info.rank])
            a = np.ascontiguousarray(arrays[i], dtype=DTYPES[info.dtype])
            if a.size != int(np.prod(shape)) or a.nbytes != info.bytes:
                raise FusegenError(-1, ["input %d '%s': %s given, the plan takes %s" %
                                        (i, info.name.decode(), a.shape, shape)])
            keep.append(a)
            binds.append(Binding(info.name, a.ctypes.data))
        for i in range(L.fg_exec_output_count(e)):
            info = TensorInfo()
            L.fg_exec_output_info(e, i, C.byref(info))
            a = poisoned(tuple(info.shape[:info.rank]), DTYPES[info.dtype])
            outs.append(a)
            binds.append(Binding(info.name, a.ctypes.data))
        arr = (Binding * len(binds))(*binds)
        lib.check(L.fg_exec_run_host(e, arr, len(binds)))
        return outs, L.fg_exec_kernel_count(e), ops
    finally:
        L.fg_exec_free(e)
        L.fg_plan_free(p)


def plan_counts(lib, g):
    """(kernels, ops) of graph g's plan without compiling: the number of
    fused groups and of graph nodes they compute."""
    L = lib.L
    if not getattr(L, "_fg_extra", False):
        _bind_extra(L)
        L._fg_extra = True
    p = C.c_void_p()
    try:
        lib.check(L.fg_plan_build(lib.ctx, g, C.byref(p)))
        ops = 0
        for i in range(L.fg_plan_group_count(p)):
            gi = GroupInfo()
            lib.check(L.fg_plan_group_info(lib.ctx, p, i, C.byref(gi)))
            ops += gi.nnodes
        return L.fg_plan_group_count(p), ops
    finally:
        L.fg_plan_free(p)
