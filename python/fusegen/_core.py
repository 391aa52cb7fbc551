"""The Python surface of fusegen over libfusegen (ctypes): Context, Graph,
Plan, Executable, Kernel and Error.  Imported into the fusegen package;
see help(fusegen)."""
from __future__ import annotations

import ctypes as C
import difflib
import json
import operator
import os
import re
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays as A
from . import _lib

PathLike = Union[str, "os.PathLike[str]"]
LogFunction = Callable[[str, str], None]


# ---- errors -------------------------------------------------------------------

@dataclass(frozen=True)
class ErrorRecord:
    """One problem the library recorded: its status name, where (file, 1-based
    line and column; None / 0 when unknown) and the message."""
    status: str
    file: Optional[str]
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        if self.file and self.line > 0:
            return "%s:%d:%d: error: %s" % (self.file, self.line, self.col if self.col > 0 else 1, self.message)
        if self.file:
            return "%s: error: %s" % (self.file, self.message)
        return "error: %s" % self.message


class Error(Exception):
    """A failed fusegen call.

    Attributes:
        status:  the status name, as fg_status_name gives it ("input error",
                 "compile error", "no CUDA device", "unsupported", ...).
        code:    the fg_status number.
        file, line, col, message: the first recorded problem (file None and
                 line/col 0 when it has no location).
        errors:  every recorded problem (ErrorRecord), oldest first.

    str(error) is the status followed by every problem as
    "file:line:col: error: message", one per line.
    """

    def __init__(self, code: int, errors: Sequence[ErrorRecord] = ()):
        self.code = int(code)
        self.status = _lib.STATUS_NAMES[code] if 0 <= code < len(_lib.STATUS_NAMES) else "status %d" % code
        self.errors: List[ErrorRecord] = list(errors)
        first = self.errors[0] if self.errors else None
        self.file: Optional[str] = first.file if first else None
        self.line: int = first.line if first else 0
        self.col: int = first.col if first else 0
        self.message: str = first.message if first else self.status
        body = "\n".join(str(e) for e in self.errors) if self.errors else self.status
        super().__init__("%s: %s" % (self.status, body))


def _error(code: int, message: str, file: Optional[str] = None) -> Error:
    """An Error raised by the binding itself (argument checks)."""
    return Error(code, [ErrorRecord(_lib.STATUS_NAMES[code], file, 0, 0, message)])


def _int(value: Any, what: str, lo: int, hi: int) -> int:
    """value as a Python int for a C field of range lo..hi: an int (or a
    NumPy integer, or anything with __index__); OverflowError outside the
    range, which ctypes would otherwise truncate (2**64 + 2 becomes 2)."""
    n = operator.index(value)
    if not lo <= n <= hi:
        raise OverflowError("%s is %d, outside %d .. %d" % (what, n, lo, hi))
    return n


_INT64 = (-(1 << 63), (1 << 63) - 1)
_CINT = (-(1 << 31), (1 << 31) - 1)


def _s(b: Optional[bytes]) -> Optional[str]:
    return b.decode("utf-8", "replace") if b is not None else None


def _path_bytes(p: PathLike) -> bytes:
    return os.fsencode(os.fspath(p))


def _code(table: Tuple[str, ...], value: str, what: str) -> int:
    for i, name in enumerate(table):
        if isinstance(value, str) and value.lower() == name.lower():
            return i
    raise ValueError("%s must be one of %s, not %r" % (what, ", ".join(repr(t) for t in table), value))


# ---- tensors, groups, kernels ---------------------------------------------------

@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output of an Executable: name, logical shape (NCHW
    order for rank 4; () for a tensor the model declares rank 0), dtype
    ("fp32", "fp16", "bf16", "int64", "int32", "bool"), physical layout of
    rank-4 tensors ("NCHW" or "NHWC"), the storage size in bytes, and
    float64: the model declares it float64 (it is fp32 here; NumPy inputs
    are converted, results come back float64)."""
    name: str
    shape: Tuple[int, ...]
    dtype: str
    layout: str
    nbytes: int
    float64: bool = False

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype results come back in (bf16: ml_dtypes.bfloat16
        where installed, else float32)."""
        return np.dtype(np.float64) if self.float64 else A.numpy_dtype(_lib.DTYPES.index(self.dtype))

    @property
    def physical_shape(self) -> Tuple[int, ...]:
        """The shape in memory order ([N, H, W, C] for NHWC)."""
        return A.physical_shape(self.shape, _lib.LAYOUTS.index(self.layout))


@dataclass(frozen=True)
class Group:
    """One fused group of a plan (one kernel), as `fusegen plan` shows it.

    rule is None (and file None, line 0) when no rule matched a single op.
    nodes are the graph node names in chain order; folded the ones folded
    into the anchor's parameters (batch norms into a convolution's weights).
    epilogue lists the steps after the anchor ("bias", "apply(relu)", ...).
    """
    index: int
    rule: Optional[str]
    file: Optional[str]
    line: int
    nodes: Tuple[str, ...]
    folded: Tuple[str, ...]
    anchor: Optional[str]
    template: str
    epilogue: Tuple[str, ...]
    output: Optional[str]

    @property
    def location(self) -> Optional[str]:
        """"file:line" of the rule, None without a rule."""
        return "%s:%d" % (self.file, self.line) if self.file else None

    def __str__(self) -> str:
        rule = "%s (%s)" % (self.rule, self.location) if self.rule else "-"
        nodes = ", ".join(n + (" (folded)" if n in self.folded else "") for n in self.nodes)
        return "%d  %s  %s  %s  %s" % (self.index, rule, nodes, self.template, ", ".join(self.epilogue) or "-")


@dataclass(frozen=True)
class KernelInfo:
    """A compiled kernel: entry point name (a hash of the source: equal names
    are one program), generated CUDA source, and the template's choices
    ("BM=64 BN=64 SPLITS=1 ..."; "" from a library without them)."""
    name: str
    source: str
    choices: str = ""


# ---- the context ------------------------------------------------------------------

class Context:
    """A fusegen context: the loaded rules (op definitions, fusion rules, Lua
    hooks), settings, and the kernel cache.  Everything made from it (graphs,
    plans, executables, kernels) uses it; close() frees them all.

    Args:
        rules:     a rules directory, or several (the first replaces the
                   shipped rules, later ones add to them); None: $FUSEGEN_RULES,
                   else the rules shipped with the library (found beside the
                   installed library, as the C library finds them).
        device:    "auto" (CUDA when a driver and GPU are present, else
                   emulation), "cuda" or "emu" (the generated CUDA source
                   compiled for and run on the CPU).
        cache_dir: kernel cache directory; None: $FUSEGEN_CACHE_DIR,
                   $XDG_CACHE_HOME/fusegen, ~/.cache/fusegen.
        precision: None, or "fp32" / "fp16" / "bf16": the dtype fusegen.kernel
                   computes in, and the dtype every input and output of a
                   compiled graph must have (a graph's dtypes come from its
                   file; compile raises Error "unsupported" when they differ).
        arch:      CUDA arch to compile for ("sm_90"); None: the GPU's.
        jobs:      compile threads; 0: one per core.
        cache:     False: no disk cache.
        log:       called as log(level, line) for each warning ("info" or
                   "warning"); None: the library's default (stderr unless
                   $FUSEGEN_QUIET is set).  It may be called from other
                   threads and must not call back into the context.

    Use it as a context manager, or call close().  One context may compile
    and run different plans from several threads; loading and planning must
    not overlap with other calls on the same context (docs/api.md).
    """

    def __init__(self, rules: Union[None, PathLike, Sequence[PathLike]] = None, device: str = "auto",
                 cache_dir: Optional[PathLike] = None, precision: Optional[str] = None, *,
                 arch: Optional[str] = None, jobs: int = 0, cache: bool = True,
                 log: Optional[LogFunction] = None):
        self._ptr: Optional[C.c_void_p] = C.c_void_p()
        self._children: List[Tuple[int, "weakref.ref[Any]"]] = []
        lib = self._lib = _lib.load()
        if rules is None or isinstance(rules, (str, bytes, os.PathLike)):
            dirs = [] if rules is None else [rules]
        else:
            dirs = list(rules)
        self.device = device
        self.precision = precision
        dev = _code(_lib.DEVICES, device, "device")
        if precision is not None:
            _code(_lib.DTYPES[:3], precision, "precision")   # the float dtypes
        o = _lib.Options()
        o.size = C.sizeof(_lib.Options)
        o.rules_dir = _path_bytes(dirs[0]) if dirs else None
        o.cache_dir = _path_bytes(cache_dir) if cache_dir is not None else None
        o.device = dev
        o.arch = arch.encode() if arch else None
        o.jobs = _int(jobs, "jobs", *_CINT)
        o.cache_off = 0 if cache else 1
        self._log_cb = None
        if log is not None:
            def _log(_user, level, line, _f=log):
                try:
                    _f("warning" if level == 1 else "info", _s(line) or "")
                except Exception:  # noqa: BLE001 - never unwind through C
                    pass
            self._log_cb = _lib.LogFn(_log)
            o.log = self._log_cb
        st = lib.fg_context_init(C.byref(self._ptr), C.byref(o))
        if st != _lib.FG_OK:
            err = Error(st, self._take_errors())
            lib.fg_context_free(self._ptr)
            self._ptr = None
            raise err
        for d in dirs[1:]:
            self._check(lib.fg_rules_load(self._ptr, _path_bytes(d)))

    # -- plumbing
    def _take_errors(self) -> List[ErrorRecord]:
        lib, out = self._lib, []
        for i in range(lib.fg_context_error_count(self._ptr)):
            e = lib.fg_context_error(self._ptr, i)
            if not e:
                break
            e = e.contents
            out.append(ErrorRecord(_lib.STATUS_NAMES[e.status] if 0 <= e.status < len(_lib.STATUS_NAMES)
                                   else str(e.status), _s(e.file), e.line, e.col, _s(e.message) or ""))
        lib.fg_context_clear_errors(self._ptr)
        return out

    def _check(self, st: int) -> None:
        if st != _lib.FG_OK:
            raise Error(st, self._take_errors())

    def _live(self) -> C.c_void_p:
        if not self._ptr:
            raise ValueError("the fusegen.Context is closed")
        return self._ptr

    def _adopt(self, rank: int, obj: Any) -> None:
        self._children = [(r, w) for r, w in self._children if w() is not None]
        self._children.append((rank, weakref.ref(obj)))

    @property
    def closed(self) -> bool:
        return not self._ptr

    def close(self) -> None:
        """Frees the context and everything made from it (executables and
        kernels first, then plans, then graphs).  Safe to call twice."""
        if not self._ptr:
            return
        for rank in (0, 1, 2):
            for r, w in self._children:
                o = w()
                if r == rank and o is not None:
                    o._free()
        self._children = []
        self._lib.fg_context_free(self._ptr)
        self._ptr = None

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return "<fusegen.Context device=%r%s>" % (self.device, " closed" if self.closed else "")

    def kernel_counts(self) -> Dict[str, int]:
        """How this context's compiles obtained their kernels so far
        (fg_context_kernel_counts): {"nvrtc_compiled", "host_compiled",
        "memory_hits", "disk_hits", "remote_hits"}.  A kernel identical to
        another of the same compile is obtained, and counted, once."""
        lib = self._lib
        if not lib.has("fg_context_kernel_counts"):
            raise _error(_lib.FG_ERR_UNSUPPORTED, "this libfusegen (%s) has no fg_context_kernel_counts" % lib.path)
        kc = _lib.KernelCounts()
        kc.size = C.sizeof(_lib.KernelCounts)
        self._check(lib.fg_context_kernel_counts(self._live(), C.byref(kc)))
        return {name: int(getattr(kc, name)) for name, _t in _lib.KernelCounts._fields_[1:]}

    # -- rules, graphs
    def load_rules(self, directory: PathLike) -> None:
        """Loads another rules directory (op definitions, rules, hooks) into
        the context; names already defined are errors."""
        self._check(self._lib.fg_rules_load(self._live(), _path_bytes(directory)))

    def load(self, source: Union[PathLike, Any], dims: Optional[Mapping[str, int]] = None) -> "Graph":
        """Loads a model graph: a YAML graph file or an ONNX model file
        (recognised by content or a .onnx name), or an onnx.ModelProto.

        dims gives symbolic ONNX dimensions ({"batch": 4}); unnamed ones are 1.
        """
        if hasattr(source, "SerializeToString"):
            return self.load_bytes(source.SerializeToString(), getattr(getattr(source, "graph", None), "name", "")
                                   or "model.onnx", dims=dims)
        path = _path_bytes(source)
        out = C.c_void_p()
        if dims:
            o, keep = _onnx_options(dims, None)
            st = self._lib.fg_graph_load_onnx(self._live(), path, C.byref(o), C.byref(out))
        else:
            st = self._lib.fg_graph_load(self._live(), path, C.byref(out))
        self._check(st)
        return Graph(self, out, os.fsdecode(path))

    def load_bytes(self, data: Union[bytes, bytearray, memoryview], name: str = "model.onnx",
                   dims: Optional[Mapping[str, int]] = None, base_dir: Optional[PathLike] = None,
                   buffers: Sequence[Tuple[int, int]] = ()) -> "Graph":
        """Loads a serialized ONNX model from memory; name is used in error
        locations, base_dir resolves external data files (None: refused).
        buffers: (address, bytes) of memory the caller keeps alive during
        the call; a tensor whose external data location is
        "fusegen-memory:<i>" is read from buffers[i] (fusegen.torch passes
        the parameters of a module so, without serializing them)."""
        buf = bytes(data)
        o, keep = _onnx_options(dims or {}, base_dir)
        if buffers:
            ptrs = (C.c_void_p * len(buffers))(*[p for p, _n in buffers])
            sizes = (C.c_size_t * len(buffers))(*[n for _p, n in buffers])
            o.nbuffers, o.buffers, o.buffer_bytes = len(buffers), ptrs, sizes
            keep = (keep, ptrs, sizes)
        out = C.c_void_p()
        self._check(self._lib.fg_graph_load_onnx_memory(self._live(), name.encode(), buf, len(buf), C.byref(o),
                                                          C.byref(out)))
        return Graph(self, out, name)

    def parse(self, text: str, name: str = "<graph>") -> "Graph":
        """Loads a YAML graph from text; name is used in error locations.
        (Weights given as `file:` need a graph file: use load.)"""
        buf = text.encode()
        out = C.c_void_p()
        self._check(self._lib.fg_graph_parse(self._live(), name.encode(), buf, len(buf), C.byref(out)))
        return Graph(self, out, name)

    # -- planning, compiling
    def plan(self, graph: Union["Graph", PathLike]) -> "Plan":
        """Matches the loaded rules on a graph (a Graph or a path to load) and
        returns the fused groups, with parameters folded."""
        if not isinstance(graph, Graph):
            graph = self.load(graph)
        if graph.context is not self:
            raise ValueError("the graph was loaded by another fusegen.Context")
        out = C.c_void_p()
        self._check(self._lib.fg_plan_build(self._live(), graph._handle(), C.byref(out)))
        return Plan(self, out, graph)

    def compile(self, plan: Union["Plan", "Graph", PathLike], device: Optional[str] = None, *,
                graph_replay: bool = False, timing: bool = False, shape_params: bool = False) -> "Executable":
        """Compiles a plan (or a graph, or a path: planned first) into an
        Executable: one kernel per group, compiled through the kernel cache.

        device: None (the context's), "auto", "cuda" or "emu".  "cuda"
        without a usable GPU raises Error with status "no CUDA device".
        graph_replay (CUDA): capture the launches into a CUDA graph on the
        first run and replay it.  timing: record per-kernel times.
        shape_params: kernels take their sizes as parameters, so the same
        model loaded at other sizes (load(..., dims=...)) renders the same
        sources where the templates' choices agree and compiles nothing
        new (KernelInfo.choices says what a kernel still specializes on).
        """
        if not isinstance(plan, Plan):
            plan = self.plan(plan)
        if plan.context is not self:
            raise ValueError("the plan was built by another fusegen.Context")
        co = _compile_options(device, graph_replay, timing, shape_params)
        out = C.c_void_p()
        self._check(self._lib.fg_plan_compile(self._live(), plan._handle(), C.byref(co), C.byref(out)))
        exe = Executable(self, out, plan)
        if self.precision is not None:
            bad = [t for t in exe.inputs + exe.outputs if t.dtype != self.precision]
            if bad:
                exe.close()
                raise _error(_lib.FG_ERR_UNSUPPORTED,
                             "precision %r was asked for, but %s; a graph's dtypes come from its file (`dtype:` in "
                             "a YAML graph, the element types of an ONNX model) and are not converted"
                             % (self.precision, ", ".join("%s '%s' is %s" % ("input" if t in exe.inputs else
                                                                              "output", t.name, t.dtype)
                                                          for t in bad)))
        return exe

    def kernel(self, chain: Sequence[Any], input_shape: Sequence[int],
               weights: Optional[Mapping[str, Any]] = None, *, dtype: Optional[str] = None,
               layout: str = "NCHW", template: Optional[str] = None, device: Optional[str] = None) -> "Kernel":
        """One fused kernel from a chain of ops (see fusegen.kernel)."""
        return _make_kernel(self, chain, input_shape, weights, dtype, layout, template, device)


def _onnx_options(dims: Mapping[str, int], base_dir: Optional[PathLike]):
    arr = (_lib.OnnxDim * max(1, len(dims)))(*[_lib.OnnxDim(k.encode(), _int(v, "dimension %r" % k, *_INT64))
                                                for k, v in dims.items()])
    o = _lib.OnnxOptions(len(dims), arr, _path_bytes(base_dir) if base_dir is not None else None,
                         C.sizeof(_lib.OnnxOptions))
    return o, arr


def _compile_options(device: Optional[str], graph_replay: bool, timing: bool,
                     shape_params: bool = False) -> _lib.CompileOptions:
    dev = 0 if device is None else _code(_lib.DEVICES, device, "device")
    return _lib.CompileOptions(dev, 1 if graph_replay else 0, 1 if timing else 0, C.sizeof(_lib.CompileOptions),
                               1 if shape_params else 0)


class _Owned:
    """An object holding a library handle that its context frees at close.

    Lifetimes: an object keeps what it was made from alive (a plan its
    graph, an executable its plan, a kernel's executable the kernel; all
    their context), and closing an object first closes what was made from
    it (a graph its plans and their executables), so no handle outlives
    one it uses.  Every use of a closed object raises ValueError."""
    _rank = 2

    def __init__(self, ctx: Context, ptr: C.c_void_p, parent: Optional["_Owned"] = None):
        self.context = ctx
        self._ptr: Optional[C.c_void_p] = ptr
        self._kids: List["weakref.ref[_Owned]"] = []
        ctx._adopt(self._rank, self)
        if parent is not None:
            parent._kids = [w for w in parent._kids if w() is not None]
            parent._kids.append(weakref.ref(self))

    def _handle(self) -> C.c_void_p:
        if not self._ptr or not self.context._ptr:
            raise ValueError("this %s is closed" % type(self).__name__)
        return self._ptr

    def _release(self, ptr: C.c_void_p) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _free(self) -> None:
        if self._ptr:
            for w in self._kids:
                o = w()
                if o is not None:
                    o._free()
            self._kids = []
            ptr, self._ptr = self._ptr, None
            self._release(ptr)

    def close(self) -> None:
        """Frees the library object now (also done when garbage-collected),
        after closing everything made from it.  Safe to call twice."""
        self._free()

    @property
    def closed(self) -> bool:
        return not self._ptr

    def __del__(self) -> None:
        try:
            if self.context._ptr:
                self._free()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class Graph(_Owned):
    """A loaded model graph (YAML or ONNX), shapes inferred; made by
    Context.load / load_bytes / parse.  Plan it with Context.plan; plans
    keep it alive, and close() closes them (and their executables) first."""
    _rank = 2

    def __init__(self, ctx: Context, ptr: C.c_void_p, source: str):
        super().__init__(ctx, ptr)
        self.source = source

    def _release(self, ptr: C.c_void_p) -> None:
        self.context._lib.fg_graph_free(ptr)

    def plan(self) -> "Plan":
        """Context.plan(self)."""
        return self.context.plan(self)

    def __repr__(self) -> str:
        return "<fusegen.Graph %r>" % self.source


class Plan(_Owned):
    """The fused groups of a graph; made by Context.plan.

    groups:    list of Group (rule, its file:line, nodes, template, epilogue)
    str(plan): the table `fusegen plan` prints; explain() adds the near
               misses and template choices; dot() is the Graphviz graph.
    compile(): an Executable (Context.compile).
    """
    _rank = 1

    def __init__(self, ctx: Context, ptr: C.c_void_p, graph: Graph):
        super().__init__(ctx, ptr, graph)
        self.graph = graph
        self._groups: Optional[List[Group]] = None

    def _release(self, ptr: C.c_void_p) -> None:
        self.context._lib.fg_plan_free(ptr)

    def __len__(self) -> int:
        return self.context._lib.fg_plan_group_count(self._handle())

    @property
    def groups(self) -> List[Group]:
        """The groups in execution order."""
        self._handle()
        if self._groups is None:
            lib = self.context._lib
            if not lib.has("fg_plan_group_info"):
                raise _error(_lib.FG_ERR_UNSUPPORTED, "this libfusegen (%s) has no fg_plan_group_info" % lib.path)
            out = []
            for i in range(len(self)):
                gi = _lib.GroupInfo()
                self.context._check(lib.fg_plan_group_info(self.context._live(), self._handle(), i, C.byref(gi)))
                nodes = tuple(_s(gi.nodes[k]) or "" for k in range(gi.nnodes))
                folded = tuple(nodes[k] for k in range(gi.nnodes) if gi.folded[k])
                epi = _s(gi.epilogue) or "-"
                out.append(Group(i, _s(gi.rule), _s(gi.rule_file), gi.rule_line, nodes, folded, _s(gi.anchor),
                                 _s(gi.template_name) or "?", tuple(_split_epilogue(epi)), _s(gi.output)))
            self._groups = out
        return list(self._groups)

    def _text(self, fname: str, *args: int) -> str:
        lib = self.context._lib
        if not lib.has(fname):
            raise _error(_lib.FG_ERR_UNSUPPORTED, "this libfusegen (%s) has no %s" % (lib.path, fname))
        out = C.c_void_p()
        self.context._check(getattr(lib, fname)(self.context._live(), self._handle(), *args, C.byref(out)))
        try:
            return C.string_at(out.value).decode("utf-8", "replace") if out.value else ""
        finally:
            lib.fg_string_free(out)

    def table(self) -> str:
        """The group table and summary line, as `fusegen plan` prints them."""
        return self._text("fg_plan_text", 0)

    def explain(self) -> str:
        """The table plus the near misses ("relu1 not fused into conv1: ...")
        and the templates considered, as `fusegen plan --explain`."""
        return self._text("fg_plan_text", 1)

    def dot(self) -> str:
        """The plan as a Graphviz graph (a cluster per group), as --dot."""
        return self._text("fg_plan_dot_text")

    def compile(self, device: Optional[str] = None, **options: Any) -> "Executable":
        """Context.compile(self, device, **options)."""
        return self.context.compile(self, device, **options)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return "<fusegen.Plan of %r: %d groups>" % (self.graph.source, len(self)) if self._ptr else \
            "<fusegen.Plan closed>"


def _split_epilogue(s: str) -> List[str]:
    if s == "-":
        return []
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


# ---- executables --------------------------------------------------------------------

class Executable(_Owned):
    """A compiled plan, ready to run; made by Context.compile or
    fusegen.compile.

    device:   "cuda" or "emu" (never "auto").
    inputs, outputs: lists of TensorInfo (name, shape, dtype, layout, nbytes).
    kernels:  list of KernelInfo (name, source) in launch order.

    exe(x=array, ...) runs once and returns {output name: array}.  See
    __call__ for the arrays it takes.
    """
    _rank = 0

    def __init__(self, ctx: Context, ptr: C.c_void_p, owner: "_Owned", owned: bool = True):
        super().__init__(ctx, ptr, owner)
        self._owner = owner          # the plan (or kernel) that must outlive this; closing it closes this
        self._owned = owned
        lib = ctx._lib
        self.device: str = _lib.DEVICES[lib.fg_exec_device(ptr)]
        self.inputs: List[TensorInfo] = [self._info(lib.fg_exec_input_info, i)
                                         for i in range(lib.fg_exec_input_count(ptr))]
        self.outputs: List[TensorInfo] = [self._info(lib.fg_exec_output_info, i)
                                          for i in range(lib.fg_exec_output_count(ptr))]
        self._in = {t.name: t for t in self.inputs}
        self._out = {t.name: t for t in self.outputs}

    def _info(self, fn: Any, i: int) -> TensorInfo:
        ti = _lib.TensorInfo()
        self.context._check(fn(self._ptr, i, C.byref(ti)))
        return TensorInfo(_s(ti.name) or "", tuple(int(ti.shape[k]) for k in range(ti.rank)),
                          _lib.DTYPES[ti.dtype], _lib.LAYOUTS[ti.layout], int(ti.bytes), bool(ti.float64))

    def _release(self, ptr: C.c_void_p) -> None:
        if self._owned:
            self.context._lib.fg_exec_free(ptr)

    @property
    def kernels(self) -> List[KernelInfo]:
        """The kernels in launch order: entry point name and CUDA source."""
        lib, e = self.context._lib, self._handle()
        has_choices = lib.has("fg_exec_kernel_choices")
        return [KernelInfo(_s(lib.fg_exec_kernel_name(e, i)) or "", _s(lib.fg_exec_kernel_source(e, i)) or "",
                           (_s(lib.fg_exec_kernel_choices(e, i)) or "") if has_choices else "")
                for i in range(lib.fg_exec_kernel_count(e))]

    def kernel_ms(self) -> List[float]:
        """Milliseconds of each kernel in the last run (compiled with
        timing=True; -1 otherwise)."""
        lib, e = self.context._lib, self._handle()
        return [lib.fg_exec_kernel_ms(e, i) for i in range(lib.fg_exec_kernel_count(e))]

    @property
    def arena_bytes(self) -> int:
        """Peak bytes of the intermediate arena."""
        return int(self.context._lib.fg_exec_arena_bytes(self._handle()))

    def __repr__(self) -> str:
        def sig(ts: List[TensorInfo]) -> str:
            return ", ".join("%s%s %s %s" % (t.name, list(t.shape), t.dtype, t.layout) for t in ts)
        return "<fusegen.Executable on %s: (%s) -> (%s), %d kernels>" % (
            self.device, sig(self.inputs), sig(self.outputs), len(self.kernels) if self._ptr else 0)

    def __call__(self, inputs: Optional[Mapping[str, Any]] = None, /, *, out: Optional[Mapping[str, Any]] = None,
                 stream: Any = None, **named: Any) -> Dict[str, Any]:
        """Runs the plan once; returns {output name: array}.

        Inputs by keyword (exe(x=a)) or as a mapping (exe({"x": a})), every
        graph input exactly once.

        NumPy arrays (or anything np.asarray takes; both devices): logical
        arrays, NCHW order for rank 4.  They are converted to each tensor's
        dtype (fg_convert_dtype, round to nearest even) and physical layout
        (fg_convert_layout) as needed, and copied to and from the GPU by
        fg_exec_run_host.  Results are NumPy arrays in the tensor's dtype
        (float32, float16, ml_dtypes.bfloat16 or float32 without ml_dtypes),
        logical NCHW order.

        CUDA arrays (executables on "cuda"; PyTorch and CuPy tensors, or any
        object with DLPack on a CUDA device or __cuda_array_interface__):
        passed without copies to fg_exec_run, launched on `stream` (an int
        CUstream, a torch or cupy stream) or else the framework's current
        stream.  Their dtype must be the tensor's, and their memory its
        physical layout (NHWC: a channels_last tensor).  Outputs are
        allocated with the inputs' framework unless given in `out`; the call
        returns when the launches are queued.

        out: {output name: array} to write results into (NumPy on the host
        path, CUDA arrays on the device path); those arrays are returned.
        A NumPy array of the tensor's storage dtype, C-contiguous, in an
        NCHW tensor is written directly; others receive a converted copy.
        """
        self._handle()
        feeds: Dict[str, Any] = dict(inputs or {})
        for k, v in named.items():
            if k in feeds:
                raise TypeError("input %r given twice" % k)
            feeds[k] = v
        outs = dict(out or {})
        self._check_names(feeds, outs)
        values = list(feeds.values()) + list(outs.values())
        if any(A.is_cuda_array(v) for v in values):
            return self._run_device(feeds, outs, stream)
        return self._run_host(feeds, outs)

    run = __call__

    def _check_names(self, feeds: Mapping[str, Any], outs: Mapping[str, Any]) -> None:
        problems = []
        for name in feeds:
            if name not in self._in:
                hint = difflib.get_close_matches(name, list(self._in), 1)
                problems.append("'%s' is not an input%s" % (name, " (did you mean '%s'?)" % hint[0] if hint else ""))
        for name in outs:
            if name not in self._out:
                hint = difflib.get_close_matches(name, list(self._out), 1)
                problems.append("'%s' is not an output%s" % (name, " (did you mean '%s'?)" % hint[0] if hint else ""))
        missing = [t.name for t in self.inputs if t.name not in feeds]
        if missing:
            problems.append("input%s %s not given" % ("s" if len(missing) > 1 else "",
                                                       ", ".join("'%s'" % m for m in missing)))
        if problems:
            raise _error(_lib.FG_ERR_INPUT, "; ".join(problems) + "; inputs: %s; outputs: %s" % (
                ", ".join(t.name for t in self.inputs), ", ".join(t.name for t in self.outputs)))

    # -- NumPy
    def _host_input(self, t: TensorInfo, value: Any) -> np.ndarray:
        lib = self.context._lib
        a = np.asarray(value)
        if a.shape != t.shape:
            raise _error(_lib.FG_ERR_INPUT, "input '%s' has shape %s; the graph's is %s (logical, NCHW order)"
                         % (t.name, list(a.shape), list(t.shape)))
        if a.dtype.kind not in "fiub" and not (A.BFLOAT16 is not None and a.dtype == A.BFLOAT16):
            raise _error(_lib.FG_ERR_INPUT, "input '%s' has dtype %s; give real numbers" % (t.name, a.dtype))
        dt, lay = _lib.DTYPES.index(t.dtype), _lib.LAYOUTS.index(t.layout)
        buf = A.convert_dtype(lib, a, dt)
        if lay == A.FG_NHWC and len(t.shape) == 4:
            buf = A.convert_layout(lib, buf, A.FG_NCHW, A.FG_NHWC, t.shape)
        return buf

    def _run_host(self, feeds: Mapping[str, Any], outs: Mapping[str, Any]) -> Dict[str, Any]:
        lib = self.context._lib
        binds, keep, post = [], [], []
        for t in self.inputs:
            inp = self._host_input(t, feeds[t.name])
            keep.append(inp)
            binds.append(_lib.Binding(t.name.encode(), inp.ctypes.data))
        for t in self.outputs:
            dst = outs.get(t.name)
            dt, lay = _lib.DTYPES.index(t.dtype), _lib.LAYOUTS.index(t.layout)
            if dst is not None:
                if not isinstance(dst, np.ndarray):
                    raise _error(_lib.FG_ERR_INPUT, "out['%s'] must be a NumPy array (a %s on this path)"
                                 % (t.name, type(dst).__name__))
                if dst.shape != t.shape:
                    raise _error(_lib.FG_ERR_INPUT, "out['%s'] has shape %s; the output's is %s"
                                 % (t.name, list(dst.shape), list(t.shape)))
                if not dst.flags.writeable:
                    raise _error(_lib.FG_ERR_INPUT, "out['%s'] is read-only" % t.name)
            direct = (dst is not None and dst.flags.c_contiguous and
                      dst.dtype == A.storage_dtype(dt) == A.numpy_dtype(dt) and
                      not (lay == A.FG_NHWC and len(t.shape) == 4))
            buf = dst if direct and dst is not None else np.empty(t.physical_shape, dtype=A.storage_dtype(dt))
            keep.append(buf)
            binds.append(_lib.Binding(t.name.encode(), buf.ctypes.data))
            post.append((t, dst, buf, direct))
        arr = (_lib.Binding * len(binds))(*binds)
        self.context._check(lib.fg_exec_run_host(self._handle(), arr, len(binds)))
        result: Dict[str, Any] = {}
        for t, dst, buf, direct in post:
            if direct:
                result[t.name] = dst
                continue
            dt, lay = _lib.DTYPES.index(t.dtype), _lib.LAYOUTS.index(t.layout)
            if lay == A.FG_NHWC and len(t.shape) == 4:
                buf = A.convert_layout(lib, buf, A.FG_NHWC, A.FG_NCHW, t.shape).reshape(t.shape)
            val = A.to_float(lib, buf, dt)
            if t.float64:
                val = val.astype(np.float64)
            if dst is not None:
                dst[...] = val
                val = dst
            result[t.name] = val
        return result

    # -- CUDA arrays, no copies
    def _run_device(self, feeds: Mapping[str, Any], outs: Mapping[str, Any], stream: Any) -> Dict[str, Any]:
        bindings, result, launch, keep = prepare_device_run(self, feeds, outs, stream)
        lib = self.context._lib
        arr = (_lib.Binding * len(bindings))(*[_lib.Binding(n.encode(), p) for n, p in bindings])
        self.context._check(lib.fg_exec_run(self._handle(), arr, len(bindings), C.c_void_p(launch)))
        del keep
        return result


def prepare_device_run(exe: Executable, feeds: Mapping[str, Any], outs: Mapping[str, Any], stream: Any):
    """The checks and bindings of a zero-copy CUDA run, without running:
    returns ([(name, device pointer)], {output name: array}, CUstream to
    launch on, objects to keep alive).  Raises Error for what cannot run so:
    an executable in emulation, host and CUDA arrays mixed, a dtype, shape
    or memory layout that is not the tensor's."""
    if exe.device != "cuda":
        raise _error(_lib.FG_ERR_INPUT, "CUDA arrays were given, but this executable runs in emulation on the CPU; "
                     "pass NumPy arrays (or CPU tensors), or compile with device=\"cuda\"")
    host = [k for k, v in list(feeds.items()) + list(outs.items()) if not A.is_cuda_array(v)]
    if host:
        raise _error(_lib.FG_ERR_INPUT, "CUDA and host arrays mixed in one run (%s on the host): pass all inputs "
                     "and outputs on the GPU, or all as NumPy arrays" % ", ".join("'%s'" % h for h in host))
    first = next(iter(feeds.values())) if feeds else None
    s = A.stream_handle(stream)
    if s is None and first is not None:
        s = A.framework_stream(first)
    launch = A.launch_stream(s)
    bindings: List[Tuple[str, int]] = []
    keep: List[Any] = []
    result: Dict[str, Any] = {}

    def check(kind: str, t: TensorInfo, obj: Any) -> None:
        da = A.device_array(obj, stream=launch)
        keep.append(da)
        what = "%s '%s'" % (kind, t.name)
        if da.dtype != t.dtype:
            raise _error(_lib.FG_ERR_INPUT, "%s is %s on the GPU; the tensor is %s (convert it first)"
                         % (what, da.dtype or "of a dtype fusegen has no name for", t.dtype))
        if tuple(da.shape) != t.shape:
            raise _error(_lib.FG_ERR_INPUT, "%s has shape %s; the tensor's is %s (logical, NCHW order)"
                         % (what, list(da.shape), list(t.shape)))
        if not da.layout_matches(_lib.LAYOUTS.index(t.layout)):
            hint = ("a channels_last tensor: x.contiguous(memory_format=torch.channels_last)"
                    if t.layout == "NHWC" and len(t.shape) == 4 else "a contiguous tensor: x.contiguous()")
            raise _error(_lib.FG_ERR_INPUT, "%s: its strides %s are not the %s layout of the tensor; pass %s"
                         % (what, list(da.strides or ()), t.layout, hint))
        if kind == "output" and da.readonly:
            raise _error(_lib.FG_ERR_INPUT, "%s is read-only" % what)
        if not da.ptr:
            raise _error(_lib.FG_ERR_INPUT, "%s has a NULL device pointer" % what)
        bindings.append((t.name, da.ptr))

    for t in exe.inputs:
        check("input", t, feeds[t.name])
    for t in exe.outputs:
        obj = outs.get(t.name)
        if obj is None:
            obj = _alloc_device_like(first, t)
        check("output", t, obj)
        result[t.name] = obj
    return bindings, result, launch, keep


def _alloc_device_like(proto: Any, t: TensorInfo) -> Any:
    """An output array on the GPU, made with the framework of proto."""
    mod = type(proto).__module__.split(".")[0] if proto is not None else ""
    nhwc = t.layout == "NHWC" and len(t.shape) == 4
    if mod == "torch":
        import torch  # noqa: PLC0415

        dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[t.dtype]
        fmt = torch.channels_last if nhwc else torch.contiguous_format
        return torch.empty(t.shape, dtype=dt, device=proto.device, memory_format=fmt)
    if mod == "cupy":
        import cupy  # noqa: PLC0415

        if t.dtype == "bf16":
            raise _error(_lib.FG_ERR_UNSUPPORTED, "CuPy has no bfloat16: pass out={'%s': ...}" % t.name)
        with proto.device:
            a = cupy.empty(t.physical_shape, dtype=np.float32 if t.dtype == "fp32" else np.float16)
        return a.transpose(0, 3, 1, 2) if nhwc else a
    raise _error(_lib.FG_ERR_INPUT, "cannot allocate output '%s' next to a %s: pass out={'%s': <CUDA array>}"
                 % (t.name, type(proto).__name__, t.name))


# ---- one kernel from a chain -------------------------------------------------------------

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _yaml_value(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if f != f:
            return ".nan"
        if f in (float("inf"), float("-inf")):
            return ".inf" if f > 0 else "-.inf"
        return repr(f)
    if isinstance(v, str):
        return v if _IDENT.match(v) else json.dumps(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return "[" + ", ".join(_yaml_value(x) for x in v) + "]"
    raise TypeError("attribute value %r (%s) cannot be written as YAML" % (v, type(v).__name__))


def _attrs_text(attrs: Any) -> Optional[str]:
    """A dict of attributes as the one-line YAML flow mapping the spec takes."""
    if attrs is None:
        return None
    if isinstance(attrs, str):
        return attrs
    parts = []
    for k, v in dict(attrs).items():
        if not _IDENT.match(str(k)):
            raise ValueError("attribute name %r is not an identifier" % (k,))
        parts.append("%s: %s" % (k, _yaml_value(v)))
    return "{ " + ", ".join(parts) + " }" if parts else "{}"


def _chain_steps(chain: Sequence[Any]) -> List[Tuple[str, str, Optional[str]]]:
    steps, used = [], set()
    for i, item in enumerate(chain):
        if isinstance(item, str):
            name, op, attrs = None, item, None
        elif isinstance(item, Mapping):
            name, op, attrs = item.get("name"), item["op"], item.get("attrs")
        else:
            item = tuple(item)
            if len(item) == 2:
                (name, op), attrs = item, None
            elif len(item) == 3:
                name, op, attrs = item
            else:
                raise ValueError("chain step %d: give (name, op) or (name, op, attrs), not %r" % (i, item))
        if name is None:
            name = op if op not in used and _IDENT.match(op) else "%s_%d" % (re.sub(r"\W", "_", op), i)
        used.add(name)
        steps.append((str(name), str(op), _attrs_text(attrs)))
    return steps


class Kernel(_Owned):
    """One fused kernel made from a chain of ops; made by fusegen.kernel or
    Context.kernel.

    source:  the generated CUDA source.
    exec:    its Executable (inputs ["x"], outputs ["y"], kernels, ...).
    kernel(x) runs it and returns y; kernel(x, out=y) writes into y.
    """
    _rank = 0

    def __init__(self, ctx: Context, ptr: C.c_void_p):
        super().__init__(ctx, ptr)
        self.source: str = _s(ctx._lib.fg_kernel_source(ptr)) or ""
        self._exec_ref: Optional["weakref.ref[Executable]"] = None

    @property
    def exec(self) -> Executable:
        """The kernel's Executable (it keeps the kernel alive)."""
        e = self._exec_ref() if self._exec_ref is not None else None
        if e is None or e.closed:
            e = Executable(self.context, C.c_void_p(self.context._lib.fg_kernel_exec(self._handle())), self,
                           owned=False)
            self._exec_ref = weakref.ref(e)
        return e

    def _release(self, ptr: C.c_void_p) -> None:
        self.context._lib.fg_kernel_handle_free(ptr)

    @property
    def inputs(self) -> List[TensorInfo]:
        return self.exec.inputs

    @property
    def outputs(self) -> List[TensorInfo]:
        return self.exec.outputs

    @property
    def device(self) -> str:
        return self.exec.device

    def __call__(self, x: Any, *, out: Any = None, stream: Any = None) -> Any:
        """Runs the kernel on x (see Executable.__call__) and returns y."""
        return self.exec({"x": x}, out=None if out is None else {"y": out}, stream=stream)["y"]

    def __repr__(self) -> str:
        return "<fusegen.Kernel %s>" % (self.exec.kernels[0].name if self._ptr else "closed")


def _make_kernel(ctx: Context, chain: Sequence[Any], input_shape: Sequence[int],
                 weights: Optional[Mapping[str, Any]], dtype: Optional[str], layout: str,
                 template: Optional[str], device: Optional[str]) -> Kernel:
    steps = _chain_steps(chain)
    if not steps:
        raise ValueError("the chain is empty")
    dt = _code(_lib.DTYPES, dtype or ctx.precision or "fp32", "dtype")
    lay = _code(_lib.LAYOUTS, layout, "layout")
    shape = [_int(d, "input_shape[%d]" % k, *_INT64) for k, d in enumerate(input_shape)]
    if not 1 <= len(shape) <= 6:
        raise ValueError("input_shape must have 1 to 6 dimensions")
    ops = (_lib.SpecOp * len(steps))(*[_lib.SpecOp(n.encode(), o.encode(), a.encode() if a is not None else None)
                                        for n, o, a in steps])
    keep: List[Any] = [ops]
    ws = []
    for name, value in (weights or {}).items():
        w = _lib.SpecWeight()
        w.name = name.encode()
        if isinstance(value, tuple) and all(isinstance(d, (int, np.integer)) for d in value):
            shp, w.data = tuple(_int(d, "weight %r shape[%d]" % (name, k), *_INT64)
                                for k, d in enumerate(value)), None   # a shape: seeded random values
        else:
            a = np.ascontiguousarray(np.asarray(value, dtype=np.float32))
            keep.append(a)
            shp = a.shape
            w.data = a.ctypes.data_as(C.POINTER(C.c_float))
        if not 1 <= len(shp) <= 6:
            raise ValueError("weight %r must have 1 to 6 dimensions" % name)
        w.rank = len(shp)
        for k, d in enumerate(shp):
            w.shape[k] = _int(d, "weight %r shape[%d]" % (name, k), *_INT64)
        ws.append(w)
    warr = (_lib.SpecWeight * max(1, len(ws)))(*ws)
    spec = _lib.KernelSpec()
    spec.template_name = template.encode() if template else None
    spec.nops, spec.ops = len(steps), ops
    spec.nweights, spec.weights = len(ws), warr
    spec.dtype, spec.layout, spec.rank = dt, lay, len(shape)
    for k, d in enumerate(shape):
        spec.input_shape[k] = d
    spec.compile = _compile_options(device, False, False)
    out = C.c_void_p()
    ctx._check(ctx._lib.fg_kernel_create(ctx._live(), C.byref(spec), C.byref(out)))
    del keep
    return Kernel(ctx, out)


# ---- module-level shortcuts ----------------------------------------------------------------

_CONTEXT_KEYS = ("rules", "cache_dir", "precision", "arch", "jobs", "cache", "log")


def compile(graph: Union[PathLike, bytes, Any], device: str = "auto", *, dims: Optional[Mapping[str, int]] = None,
            graph_replay: bool = False, timing: bool = False, **options: Any) -> Executable:  # noqa: A001
    """Loads, plans and compiles a graph in one call.

    graph:   a YAML or ONNX file, serialized ONNX bytes, or an onnx.ModelProto.
    device:  "auto", "cuda" or "emu".
    dims:    symbolic ONNX dimensions ({"batch": 4}).
    options: Context options (rules, cache_dir, precision, arch, jobs,
             cache, log); graph_replay and timing as in Context.compile.

    The returned Executable keeps its context, graph and plan alive
    (exe.context); close it, or let it be garbage-collected.
    """
    bad = sorted(set(options) - set(_CONTEXT_KEYS))
    if bad:
        raise TypeError("compile() got unexpected options: %s" % ", ".join(bad))
    ctx = Context(device=device, **options)
    try:
        if isinstance(graph, (bytes, bytearray, memoryview)):
            g = ctx.load_bytes(graph, dims=dims)
        else:
            g = ctx.load(graph, dims=dims)
        return ctx.compile(ctx.plan(g), graph_replay=graph_replay, timing=timing)
    except BaseException:
        ctx.close()
        raise


def kernel(chain: Sequence[Any], input_shape: Sequence[int], weights: Optional[Mapping[str, Any]] = None, *,
           dtype: Optional[str] = None, layout: str = "NCHW", template: Optional[str] = None,
           device: str = "auto", context: Optional[Context] = None, **options: Any) -> Kernel:
    """One fused kernel from a chain of ops (fg_kernel_create).

    chain:       the ops in order; each a (name, op) or (name, op, attrs) tuple,
                 a {"name", "op", "attrs"} mapping, or an op name.  attrs is a
                 dict ({"stride": [2, 2], "padding": [1, 1]}) or YAML flow text.
                 The first op reads the input "x"; the result is "y".
    input_shape: logical shape of x (NCHW for rank 4).
    weights:     {"<step>.<input>": array (logical order, as float32) or a
                 shape tuple (seeded random values)} for every required
                 input of each op other than the chain ("conv.weight",
                 "bn.gamma", ...).
    dtype, layout: of x, y and the weights ("fp32" / "fp16" / "bf16";
                 "NCHW" / "NHWC"); dtype None: the context's precision or fp32.
    template:    the template the rules must choose ("conv2d"), or None.
    device:      "auto", "cuda" or "emu".
    context:     a Context to use; None: a new one from **options (rules,
                 cache_dir, precision, ...), kept alive by the kernel.

    The rules must turn the chain into exactly one kernel; otherwise Error
    "unsupported" lists the groups they made.
    """
    if context is None:
        bad = sorted(set(options) - set(_CONTEXT_KEYS))
        if bad:
            raise TypeError("kernel() got unexpected options: %s" % ", ".join(bad))
        ctx = Context(device=device, **options)
        try:
            return _make_kernel(ctx, chain, input_shape, weights, dtype, layout, template, None)
        except BaseException:
            ctx.close()
            raise
    if options:
        raise TypeError("kernel(): context options (%s) cannot be given with context=" % ", ".join(sorted(options)))
    return _make_kernel(context, chain, input_shape, weights, dtype, layout, template, device)
