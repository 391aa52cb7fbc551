"""fusegen from PyTorch in one call.

    import torch, fusegen.torch

    compiled = fusegen.torch.compile(model.eval(), (torch.randn(2, 3, 32, 32),))
    y = compiled(torch.randn(8, 3, 32, 32))        # another batch size: one more shape bucket
    print(compiled.explain())

    fast = torch.compile(model, backend="fusegen")                       # each FX graph through fusegen
    fast = torch.compile(model, backend="fusegen", options={"fallback": True})   # unsupported parts eager

fusegen.torch.compile exports the module with torch.export and the ONNX
exporter in memory (nothing is written to disk), plans and compiles it
with libfusegen and returns a callable on torch tensors: CPU tensors run
in emulation, CUDA tensors on the GPU without copies, on torch's current
stream.  Importing this module registers the "fusegen" backend of
torch.compile.  docs/python.md ("From PyTorch") has the whole story.
"""
from __future__ import annotations

from ._backend import GraphReport, Part, backend, explain, register, reports, reset
from ._compile import Bucket, CompiledModule, compile

__all__ = ["Bucket", "CompiledModule", "GraphReport", "Part", "backend", "compile", "explain", "register", "reports",
           "reset"]

register()
