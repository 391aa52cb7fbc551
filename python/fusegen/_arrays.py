"""Arrays: NumPy dtypes of fusegen tensors, host conversion between the
caller's logical NCHW arrays and a tensor's physical dtype and layout, and
recognition of CUDA arrays (DLPack, __cuda_array_interface__) for the
zero-copy path.  Internal."""
from __future__ import annotations

import ctypes as C
from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from . import _lib

BFLOAT16: Optional[np.dtype]
try:  # bfloat16 for NumPy, where installed
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    BFLOAT16 = None

FG_F32, FG_F16, FG_BF16 = 0, 1, 2
FG_I64, FG_I32, FG_BOOL = 3, 4, 5
_INTS = {FG_I64: np.dtype(np.int64), FG_I32: np.dtype(np.int32), FG_BOOL: np.dtype(np.bool_)}
FG_NCHW, FG_NHWC = 0, 1


def numpy_dtype(fg_dtype: int) -> np.dtype:
    """The NumPy dtype results of this fusegen dtype are returned in:
    float32, float16, and ml_dtypes.bfloat16 (float32 without ml_dtypes);
    int64, int32 and bool."""
    if fg_dtype in _INTS:
        return _INTS[fg_dtype]
    if fg_dtype == FG_F32:
        return np.dtype(np.float32)
    if fg_dtype == FG_F16:
        return np.dtype(np.float16)
    return BFLOAT16 if BFLOAT16 is not None else np.dtype(np.float32)


def storage_dtype(fg_dtype: int) -> np.dtype:
    """The NumPy dtype of the raw storage (bf16 without ml_dtypes: uint16)."""
    if fg_dtype == FG_BF16 and BFLOAT16 is None:
        return np.dtype(np.uint16)
    return numpy_dtype(fg_dtype)


def _is_bf16(dt: np.dtype) -> bool:
    return BFLOAT16 is not None and dt == BFLOAT16


def _check(lib: _lib.Lib, st: int, what: str) -> None:
    if st != _lib.FG_OK:  # only on bad arguments, which the callers rule out
        raise ValueError("%s failed (%s)" % (what, _lib.STATUS_NAMES[st] if 0 <= st < len(_lib.STATUS_NAMES) else st))


def convert_dtype(lib: _lib.Lib, src: np.ndarray, to: int) -> np.ndarray:
    """src (any real dtype) as a C-contiguous array of fusegen dtype `to`
    (storage dtype), rounded to nearest even by fg_convert_dtype."""
    want = storage_dtype(to)
    if src.dtype == want or (to == FG_BF16 and _is_bf16(src.dtype)):
        return np.ascontiguousarray(src).view(want)
    if to in _INTS:   # integers from floats toward zero, bools nonzero (NumPy's casts)
        return np.ascontiguousarray(src, dtype=want)
    if to == FG_F32 or (to == FG_F16 and src.dtype == np.float16):
        return np.ascontiguousarray(src, dtype=want)
    f32 = np.ascontiguousarray(src, dtype=np.float32)   # exact from fp16 and bf16
    dst = np.empty(f32.shape, dtype=want)
    _check(lib, lib.fg_convert_dtype(f32.ctypes.data, FG_F32, dst.ctypes.data, to, f32.size), "fg_convert_dtype")
    return dst


def to_float(lib: _lib.Lib, storage: np.ndarray, fg_dtype: int) -> np.ndarray:
    """Storage of fusegen dtype fg_dtype as the dtype results are returned in."""
    if fg_dtype != FG_BF16 or BFLOAT16 is not None:
        return storage.view(numpy_dtype(fg_dtype))
    dst = np.empty(storage.shape, dtype=np.float32)
    _check(lib, lib.fg_convert_dtype(storage.ctypes.data, FG_BF16, dst.ctypes.data, FG_F32, storage.size),
           "fg_convert_dtype")
    return dst


def convert_layout(lib: _lib.Lib, src: np.ndarray, frm: int, to: int, shape) -> np.ndarray:
    """A C-contiguous [N,C,H,W] tensor (logical shape `shape`) between layouts."""
    src = np.ascontiguousarray(src)
    dst = np.empty_like(src)
    shp = (C.c_int64 * 4)(*shape)
    _check(lib, lib.fg_convert_layout(src.ctypes.data, frm, dst.ctypes.data, to, shp, src.itemsize),
           "fg_convert_layout")
    return dst


def physical_shape(shape: Tuple[int, ...], layout: int) -> Tuple[int, ...]:
    if layout == FG_NHWC and len(shape) == 4:
        n, c, h, w = shape
        return (n, h, w, c)
    return tuple(shape)


# ---- CUDA arrays --------------------------------------------------------------

KDL_CUDA, KDL_CUDA_MANAGED = 2, 13
KDL_FLOAT, KDL_BFLOAT = 2, 4


class _DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class _DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", _DLDevice), ("ndim", C.c_int32), ("dtype", _DLDataType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class DLManagedTensor(C.Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p),
                            ("deleter", C.CFUNCTYPE(None, C.POINTER(DLManagedTensor)))]

_capsule_get = C.pythonapi.PyCapsule_GetPointer
_capsule_get.restype, _capsule_get.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
_capsule_valid = C.pythonapi.PyCapsule_IsValid
_capsule_valid.restype, _capsule_valid.argtypes = C.c_int, [C.py_object, C.c_char_p]

_TYPESTR = {"<f4": "fp32", "<f2": "fp16", "=f4": "fp32", "=f2": "fp16"}


@dataclass
class DeviceArray:
    """A CUDA array as fusegen sees it: a device pointer (byte offset
    applied), logical shape, strides in elements (None: C-contiguous), the
    fusegen dtype name ("fp32", "fp16", "bf16"; None when it has none), the
    CUDA device, and what described it ("dlpack" or "cuda_array_interface").
    `keep` holds what must stay alive while the pointer is used."""
    ptr: int
    shape: Tuple[int, ...]
    strides: Optional[Tuple[int, ...]]
    dtype: Optional[str]
    device_id: int
    source: str
    readonly: bool = False
    producer_stream: Optional[int] = None
    keep: Any = None

    def layout_matches(self, layout: int) -> bool:
        """Whether the elements lie as fusegen's `layout` stores this logical
        shape: C-contiguous for NCHW (and any rank other than 4), channels
        innermost for NHWC (PyTorch's channels_last).  Strides of size-1
        dimensions do not matter."""
        phys = physical_shape(self.shape, layout)
        want, acc = [0] * len(phys), 1
        for i in range(len(phys) - 1, -1, -1):
            want[i], acc = acc, acc * phys[i]
        if layout == FG_NHWC and len(self.shape) == 4:   # back to logical N, C, H, W order
            want = [want[0], want[3], want[1], want[2]]
        if self.strides is None:
            # C-contiguous in logical order: NCHW, or NHWC where it coincides
            have, acc = [0] * len(self.shape), 1
            for i in range(len(self.shape) - 1, -1, -1):
                have[i], acc = acc, acc * self.shape[i]
        else:
            have = list(self.strides)
        return all(s == 1 or a == b for s, a, b in zip(self.shape, have, want))


def _dlpack_array(obj: Any, stream: Optional[int]) -> DeviceArray:
    try:
        cap = obj.__dlpack__(stream=stream)
    except TypeError:
        cap = obj.__dlpack__()
    if not _capsule_valid(cap, b"dltensor"):
        raise ValueError("__dlpack__ did not return a 'dltensor' capsule")
    mt = DLManagedTensor.from_address(_capsule_get(cap, b"dltensor"))
    t = mt.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    dt = None
    if t.dtype.lanes == 1 and t.dtype.code == KDL_FLOAT and t.dtype.bits in (32, 16):
        dt = "fp32" if t.dtype.bits == 32 else "fp16"
    elif t.dtype.lanes == 1 and t.dtype.code == KDL_BFLOAT and t.dtype.bits == 16:
        dt = "bf16"
    # The capsule stays with the DeviceArray: when it is released, the
    # producer's capsule destructor calls the deleter (the capsule is never
    # renamed to "used_dltensor", so ownership stays with it).
    return DeviceArray(ptr=(t.data or 0) + t.byte_offset, shape=shape, strides=strides, dtype=dt,
                       device_id=t.device.device_id, source="dlpack", keep=(cap, obj))


def _cai_array(obj: Any) -> DeviceArray:
    cai = obj.__cuda_array_interface__
    ptr, ro = cai["data"]
    shape = tuple(int(d) for d in cai["shape"])
    typestr = cai["typestr"]
    dt = _TYPESTR.get(typestr)
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 0
    strides = None
    if cai.get("strides") is not None:
        bs = tuple(int(s) for s in cai["strides"])
        if itemsize == 0 or any(s % itemsize for s in bs):
            raise ValueError("__cuda_array_interface__ strides %r are not multiples of the item size" % (bs,))
        strides = tuple(s // itemsize for s in bs)
    return DeviceArray(ptr=int(ptr or 0), shape=shape, strides=strides, dtype=dt, device_id=-1,
                       source="cuda_array_interface", readonly=bool(ro), producer_stream=cai.get("stream"),
                       keep=obj)


def is_cuda_array(obj: Any) -> bool:
    """True for an object that describes CUDA device memory: DLPack with a
    CUDA device (__dlpack_device__), or __cuda_array_interface__.  NumPy
    arrays and CPU tensors are not."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None and callable(getattr(obj, "__dlpack__", None)):
        try:
            kind = dev()[0]
        except Exception:  # noqa: BLE001 - a producer that cannot say is not a CUDA array
            kind = None
        if kind is not None:
            return kind in (KDL_CUDA, KDL_CUDA_MANAGED)   # a DLPack device that is not CUDA: host
    try:
        return hasattr(obj, "__cuda_array_interface__")
    except Exception:  # noqa: BLE001 - e.g. a CPU tensor whose property raises
        return False


def device_array(obj: Any, stream: Optional[int] = None) -> DeviceArray:
    """Describes a CUDA array (is_cuda_array(obj) is true): through DLPack
    when the object offers it with a CUDA device (bf16 included), else
    through __cuda_array_interface__.  stream is passed to __dlpack__ so
    that the producer orders its work before the consumer's stream."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None and callable(getattr(obj, "__dlpack__", None)):
        try:
            kind = dev()[0]
        except Exception:  # noqa: BLE001
            kind = None
        if kind in (KDL_CUDA, KDL_CUDA_MANAGED):
            return _dlpack_array(obj, stream)
    return _cai_array(obj)


def framework_stream(obj: Any) -> Optional[int]:
    """The caller's current CUDA stream for the framework that made obj
    (PyTorch: torch.cuda.current_stream(), CuPy: the current stream) as a
    CUstream value; None when it is not known."""
    mod = type(obj).__module__.split(".")[0]
    try:
        if mod == "torch":
            import torch  # noqa: PLC0415

            return int(torch.cuda.current_stream(obj.device).cuda_stream)
        if mod == "cupy":
            import cupy  # noqa: PLC0415

            return int(cupy.cuda.get_current_stream().ptr)
    except Exception:  # noqa: BLE001 - no stream to follow
        return None
    return None


def stream_handle(stream: Any) -> Optional[int]:
    """A stream given by the caller as a CUstream value: an int, a PyTorch
    stream (.cuda_stream), a CuPy stream (.ptr), or None."""
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    raise TypeError("stream must be an int (a CUstream), a torch.cuda.Stream or a cupy.cuda.Stream, not %s"
                    % type(stream).__name__)


def launch_stream(s: Optional[int]) -> int:
    """The CUstream to launch on for the caller's stream s.  A framework's
    default stream is 0, which fg_exec_run would read as "the exec's own
    stream": it becomes CU_STREAM_LEGACY (1), the legacy default stream that
    0 means to the CUDA runtime."""
    return 1 if not s else s
