"""Finding and loading libfusegen, and the C declarations of fusegen.h as
ctypes types.  Internal: the public surface is in the fusegen package."""
from __future__ import annotations

import ctypes as C
import ctypes.util
import glob
import os
import shutil
import subprocess
import threading
from typing import Any, List, Optional, Tuple

# ---- enums (fusegen.h) ------------------------------------------------------

STATUS_NAMES = ("ok", "input error", "hook error", "I/O error", "out of memory", "compile error",
                "CUDA error", "no CUDA device", "unsupported", "check failed", "internal error")
FG_OK = 0
FG_ERR_INPUT = 1
FG_ERR_UNSUPPORTED = 8
DTYPES = ("fp32", "fp16", "bf16", "int64", "int32", "bool")   # fg_dtype
LAYOUTS = ("NCHW", "NHWC")                       # fg_layout
DEVICES = ("auto", "cuda", "emu")                # fg_device
GROUP_INFO_MAX_NODES = 16


# ---- structs (field for field as in fusegen.h) ------------------------------

LogFn = C.CFUNCTYPE(None, C.c_void_p, C.c_int, C.c_char_p)


class Options(C.Structure):
    _fields_ = [("rules_dir", C.c_char_p), ("cache_dir", C.c_char_p), ("device", C.c_int),
                ("arch", C.c_char_p), ("jobs", C.c_int), ("no_rules", C.c_int), ("size", C.c_size_t),
                ("hook_steps", C.c_longlong), ("hook_memory", C.c_longlong), ("hook_timeout_ms", C.c_int),
                ("cache_max_mb", C.c_longlong), ("cache_off", C.c_int), ("log", LogFn),
                ("log_user", C.c_void_p)]


class ErrorRec(C.Structure):
    _fields_ = [("status", C.c_int), ("file", C.c_char_p), ("line", C.c_int), ("col", C.c_int),
                ("message", C.c_char_p)]


class OnnxDim(C.Structure):
    _fields_ = [("name", C.c_char_p), ("value", C.c_int64)]


class OnnxOptions(C.Structure):
    _fields_ = [("ndims", C.c_int), ("dims", C.POINTER(OnnxDim)), ("base_dir", C.c_char_p),
                ("size", C.c_size_t), ("nbuffers", C.c_int), ("buffers", C.POINTER(C.c_void_p)),
                ("buffer_bytes", C.POINTER(C.c_size_t))]


class GroupInfo(C.Structure):
    _fields_ = [("rule", C.c_char_p), ("rule_file", C.c_char_p), ("rule_line", C.c_int), ("nnodes", C.c_int),
                ("nodes", C.c_char_p * GROUP_INFO_MAX_NODES), ("folded", C.c_int * GROUP_INFO_MAX_NODES),
                ("anchor", C.c_char_p), ("template_name", C.c_char_p), ("output", C.c_char_p),
                ("epilogue", C.c_char * 256)]


class KernelCounts(C.Structure):
    _fields_ = [("size", C.c_size_t), ("nvrtc_compiled", C.c_uint64), ("host_compiled", C.c_uint64),
                ("memory_hits", C.c_uint64), ("disk_hits", C.c_uint64), ("remote_hits", C.c_uint64)]


class CompileOptions(C.Structure):
    _fields_ = [("device", C.c_int), ("graph_replay", C.c_int), ("timing", C.c_int), ("size", C.c_size_t),
                ("shape_params", C.c_int)]


class TensorInfo(C.Structure):
    _fields_ = [("name", C.c_char_p), ("dtype", C.c_int), ("layout", C.c_int), ("rank", C.c_int),
                ("shape", C.c_int64 * 6), ("bytes", C.c_size_t), ("float64", C.c_int)]


class Binding(C.Structure):
    _fields_ = [("name", C.c_char_p), ("data", C.c_void_p)]


class SpecOp(C.Structure):
    _fields_ = [("name", C.c_char_p), ("op", C.c_char_p), ("attrs", C.c_char_p)]


class SpecWeight(C.Structure):
    _fields_ = [("name", C.c_char_p), ("rank", C.c_int), ("shape", C.c_int64 * 6),
                ("data", C.POINTER(C.c_float))]


class KernelSpec(C.Structure):
    _fields_ = [("template_name", C.c_char_p), ("nops", C.c_int), ("ops", C.POINTER(SpecOp)),
                ("nweights", C.c_int), ("weights", C.POINTER(SpecWeight)), ("dtype", C.c_int),
                ("layout", C.c_int), ("rank", C.c_int), ("input_shape", C.c_int64 * 6),
                ("compile", CompileOptions)]


# ---- function signatures ------------------------------------------------------

_vp, _pp, _s, _i = C.c_void_p, C.POINTER(C.c_void_p), C.c_char_p, C.c_int
_SIGNATURES = {
    "fg_status_name": (_s, [_i]),
    "fg_version": (_s, []),
    "fg_context_init": (_i, [_pp, C.POINTER(Options)]),
    "fg_context_free": (None, [_vp]),
    "fg_context_error_count": (_i, [_vp]),
    "fg_context_error": (C.POINTER(ErrorRec), [_vp, _i]),
    "fg_context_clear_errors": (None, [_vp]),
    "fg_error_format": (_s, [C.POINTER(ErrorRec), C.c_char_p, C.c_size_t]),
    "fg_rules_load": (_i, [_vp, _s]),
    "fg_graph_load": (_i, [_vp, _s, _pp]),
    "fg_graph_parse": (_i, [_vp, _s, C.c_char_p, C.c_size_t, _pp]),
    "fg_graph_free": (None, [_vp]),
    "fg_graph_load_onnx": (_i, [_vp, _s, C.POINTER(OnnxOptions), _pp]),
    "fg_graph_load_onnx_memory": (_i, [_vp, _s, C.c_char_p, C.c_size_t, C.POINTER(OnnxOptions), _pp]),
    "fg_plan_build": (_i, [_vp, _vp, _pp]),
    "fg_plan_free": (None, [_vp]),
    "fg_plan_group_count": (_i, [_vp]),
    "fg_plan_group_info": (_i, [_vp, _vp, _i, C.POINTER(GroupInfo)]),
    "fg_plan_text": (_i, [_vp, _vp, _i, C.POINTER(C.c_void_p)]),
    "fg_plan_dot_text": (_i, [_vp, _vp, C.POINTER(C.c_void_p)]),
    "fg_string_free": (None, [_vp]),
    "fg_plan_compile": (_i, [_vp, _vp, C.POINTER(CompileOptions), _pp]),
    "fg_exec_free": (None, [_vp]),
    "fg_exec_device": (_i, [_vp]),
    "fg_exec_input_count": (_i, [_vp]),
    "fg_exec_output_count": (_i, [_vp]),
    "fg_exec_input_info": (_i, [_vp, _i, C.POINTER(TensorInfo)]),
    "fg_exec_output_info": (_i, [_vp, _i, C.POINTER(TensorInfo)]),
    "fg_exec_run": (_i, [_vp, C.POINTER(Binding), _i, _vp]),
    "fg_exec_run_host": (_i, [_vp, C.POINTER(Binding), _i]),
    "fg_exec_kernel_count": (_i, [_vp]),
    "fg_exec_kernel_name": (_s, [_vp, _i]),
    "fg_exec_kernel_source": (_s, [_vp, _i]),
    "fg_exec_kernel_ms": (C.c_double, [_vp, _i]),
    "fg_exec_kernel_choices": (_s, [_vp, _i]),
    "fg_exec_arena_bytes": (C.c_size_t, [_vp]),
    "fg_convert_dtype": (_i, [_vp, _i, _vp, _i, C.c_size_t]),
    "fg_convert_layout": (_i, [_vp, _i, _vp, _i, C.POINTER(C.c_int64), C.c_size_t]),
    "fg_kernel_create": (_i, [_vp, C.POINTER(KernelSpec), _pp]),
    "fg_kernel_handle_free": (None, [_vp]),
    "fg_kernel_source": (_s, [_vp]),
    "fg_kernel_exec": (_vp, [_vp]),
    "fg_kernel_launch": (_i, [_vp, C.POINTER(Binding), _i, _vp]),
    "fg_context_kernel_counts": (_i, [_vp, C.POINTER(KernelCounts)]),
}
# Functions that an older libfusegen may lack; the package works without them
# (what needs one says so when called).
OPTIONAL = frozenset({"fg_plan_group_info", "fg_plan_text", "fg_plan_dot_text", "fg_string_free",
                      "fg_context_kernel_counts", "fg_exec_kernel_choices"})

LIBRARY_ENV = "FUSEGEN_LIBRARY"
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


class LibraryNotFoundError(OSError):
    """libfusegen could not be found or loaded.  The message lists where the
    package looked: $FUSEGEN_LIBRARY, the copy bundled with the package, the
    system (the dynamic loader's path, pkg-config)."""


def bundled_candidates() -> List[str]:
    """The library copies installed with the package (fusegen/_native/lib*/)."""
    found = []
    for pat in ("libfusegen.so", "libfusegen.so.*", "libfusegen.dylib", "libfusegen*.dylib"):
        found += sorted(glob.glob(os.path.join(_PKG_DIR, "_native", "lib*", pat)))
        found += sorted(glob.glob(os.path.join(_PKG_DIR, "_native", "lib*", "*", pat)))   # lib/<multiarch>/
    return found


def _system_candidates() -> List[str]:
    out = []
    name = ctypes.util.find_library("fusegen")
    if name:
        out.append(name)
    if shutil.which("pkg-config"):
        try:
            r = subprocess.run(["pkg-config", "--variable=libdir", "fusegen"], capture_output=True, text=True,
                               timeout=10)
            if r.returncode == 0 and r.stdout.strip():
                out += sorted(glob.glob(os.path.join(r.stdout.strip(), "libfusegen.so*")))
        except (OSError, subprocess.SubprocessError):
            pass
    out += ["libfusegen.so.0", "libfusegen.so"]
    return out


def locate() -> Tuple[List[Tuple[str, str]], Optional[str]]:
    """The candidates in search order as (path or name, where from), and the
    value of $FUSEGEN_LIBRARY (which, when set, is the only candidate)."""
    env = os.environ.get(LIBRARY_ENV)
    if env:
        return [(env, "$" + LIBRARY_ENV)], env
    return [(p, "bundled") for p in bundled_candidates()] + [(p, "system") for p in _system_candidates()], None


class Lib:
    """The loaded library with typed functions; `path` says which file and
    `origin` how it was found ("$FUSEGEN_LIBRARY", "bundled", "system")."""

    def __init__(self, cdll: C.CDLL, path: str, origin: str):
        self.cdll, self.path, self.origin = cdll, path, origin
        self.missing = set()
        for fname, (res, args) in _SIGNATURES.items():
            f = getattr(cdll, fname, None)
            if f is None:
                if fname not in OPTIONAL:
                    raise LibraryNotFoundError("%s (%s) is not a usable libfusegen: it lacks %s" % (path, origin, fname))
                self.missing.add(fname)
                continue
            f.restype, f.argtypes = res, args
            setattr(self, fname, f)
        self.version = cdll.fg_version().decode()

    def __getattr__(self, name: str) -> Any:   # the fg_* functions are set in __init__
        raise AttributeError("libfusegen (%s) has no function %s" % (self.__dict__.get("path"), name))

    def has(self, fname: str) -> bool:
        return fname not in self.missing


_lock = threading.Lock()
_lib: Optional[Lib] = None


def load() -> Lib:
    """Loads libfusegen once per process (the first candidate that loads)."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        cands, env = locate()
        tried = []
        for path, origin in cands:
            if env and not os.path.exists(path):
                raise LibraryNotFoundError("%s=%s: no such file" % (LIBRARY_ENV, path))
            try:
                cdll = C.CDLL(path)
            except OSError as e:
                if env:
                    raise LibraryNotFoundError("%s=%s cannot be loaded: %s" % (LIBRARY_ENV, path, e)) from None
                tried.append("%s (%s): %s" % (path, origin, e))
                continue
            _lib = Lib(cdll, os.path.realpath(path) if os.path.exists(path) else path, origin)
            return _lib
        raise LibraryNotFoundError(
            "libfusegen not found; looked at $%s (unset), the copy bundled with the package (%s) and the system "
            "(dynamic loader, pkg-config).  Build it (bash tools/bootstrap.sh) and set %s=/path/to/libfusegen.so, "
            "or reinstall the package with `pip install ./python`, which builds it.  Tried: %s"
            % (LIBRARY_ENV, os.path.join(_PKG_DIR, "_native"), LIBRARY_ENV, "; ".join(tried) or "nothing"))
