"""fusegen from Python: plan, compile and run fused kernels with NumPy,
and with PyTorch or CuPy tensors on CUDA.

fusegen is a rule-driven operator-fusion code generator: fusion rules
(YAML files, Lua hooks) are matched on a model graph (YAML or ONNX), the
fused groups become CUDA kernels generated from templates, compiled with
NVRTC for the GPU or for the CPU (device "emu": the same CUDA source run
in emulation).  This package binds libfusegen (the C library) with ctypes.

    import numpy as np
    import fusegen

    with fusegen.Context(device="emu") as ctx:
        graph = ctx.load("model.onnx")            # or a YAML graph
        plan = ctx.plan(graph)
        print(plan.explain())                      # rule, file:line, nodes, template, epilogue
        exe = ctx.compile(plan)
        print(exe.inputs, exe.kernels[0].source)
        y = exe(x=np.ones(exe.inputs[0].shape, np.float32))   # {output name: array}

    exe = fusegen.compile("model.onnx", device="emu")           # the same in one call
    k = fusegen.kernel([("conv", "conv2d", {"padding": [1, 1]}), ("bn", "batch_norm"), ("act", "relu")],
                       input_shape=(1, 8, 16, 16), weights={...})

From PyTorch: fusegen.torch (import it on its own; it needs torch and
onnxscript) compiles a torch.nn.Module in one call and registers the
"fusegen" backend of torch.compile.

Errors raise fusegen.Error, which carries .status ("input error",
"no CUDA device", ...), .file, .line, .col, .message and every recorded
problem in .errors.

The library is found at $FUSEGEN_LIBRARY, else in the copy installed with
the package (pip install ./python builds it), else on the system;
fusegen.library_path() says which.  The rules shipped with that library
are used unless Context(rules=...) says otherwise.  docs/python.md has
the whole story.
"""
from __future__ import annotations

from ._core import (Context, Error, ErrorRecord, Executable, Graph, Group, Kernel, KernelInfo, Plan, TensorInfo,
                    compile, kernel)
from ._lib import LibraryNotFoundError

__version__ = "0.1.0"

__all__ = ["Context", "Error", "ErrorRecord", "Executable", "Graph", "Group", "Kernel", "KernelInfo",
           "LibraryNotFoundError", "Plan", "TensorInfo", "compile", "kernel", "library_path", "library_version"]


def library_path() -> str:
    """The libfusegen file in use (loading it if needed)."""
    from . import _lib
    return _lib.load().path


def library_version() -> str:
    """The version of the loaded libfusegen (fg_version)."""
    from . import _lib
    return _lib.load().version
