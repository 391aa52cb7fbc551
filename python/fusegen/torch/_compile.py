"""fusegen.torch.compile: a torch.nn.Module (or any callable torch.export
takes) exported to ONNX in memory, planned and compiled by libfusegen, and
called with torch tensors.  One CompiledModule serves many input sizes: the
export keeps the sizes torch.export found symbolic (batch, sequence) as
symbolic ONNX dimensions, and each new combination of sizes is one shape
bucket: the same ONNX model loaded with those sizes, planned and compiled
(kernels are specialized for their shapes; kernels that come out identical
are served by the kernel cache, not compiled again).  Internal to
fusegen.torch."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils import _pytree as pytree

from .. import _lib
from .._core import Context, Error, Executable, Plan, _error
from . import _export as X

COUNTERS = ("nvrtc_compiled", "host_compiled", "memory_hits", "disk_hits", "remote_hits")
_TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass
class Bucket:
    """One specialization: the input shapes and device it serves, the export
    it was loaded from with which symbolic sizes, its plan and executable,
    and what compiling it cost (kernel counts of this bucket alone; seconds)."""
    key: Tuple[Any, ...]
    device: str
    shapes: Tuple[Tuple[int, ...], ...]
    export_index: int
    dims: Dict[str, int]
    plan: Plan
    exe: Executable
    counts: Dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    calls: int = 0
    shared: int = 0                      # kernels whose source an earlier bucket already had
    new: List[str] = field(default_factory=list)   # why each other kernel is a source of its own
    kernels: List[Any] = field(default_factory=list)   # exe.kernels (KernelInfo), read once

    def describe(self) -> str:
        dims = ", ".join("%s=%d" % kv for kv in sorted(self.dims.items())) or "no symbolic sizes"
        return ("%s %s (export %d, %s): %d kernels, %d of them sources an earlier bucket has; compiled %d "
                "(NVRTC %d, host %d), from the cache %d; %.2f s; %d calls"
                % (self.device, " ".join("x".join(map(str, s)) or "scalar" for s in self.shapes),
                   self.export_index, dims, len(self.kernels), self.shared,
                   self.counts.get("nvrtc_compiled", 0) + self.counts.get("host_compiled", 0),
                   self.counts.get("nvrtc_compiled", 0), self.counts.get("host_compiled", 0),
                   self.counts.get("memory_hits", 0) + self.counts.get("disk_hits", 0) +
                   self.counts.get("remote_hits", 0), self.seconds, self.calls))


def specialization(kernels: Sequence[Any], dims: Dict[str, int],
                   earlier: Sequence[Tuple[Sequence[Any], Dict[str, int]]]) -> Tuple[int, List[str]]:
    """How many of a bucket's kernels (KernelInfo, in launch order; its
    symbolic sizes dims) have a source that a kernel of an earlier bucket
    (kernels, dims) has (equal entry point names: the name hashes the
    source), and for each other kernel why it is new: the template choices
    that differ from the kernel at the same place of the first earlier
    bucket with as many kernels; else a size of 1 on one side only (an axis
    of size 1 drops out of the index arithmetic and the broadcasts); else a
    size the source still holds; or a group no earlier plan has.  The first
    bucket: (0, [])."""
    if not earlier:
        return 0, []
    seen = {k.name for ks, _d in earlier for k in ks}
    twin, tdims = next(((ks, d) for ks, d in earlier if len(ks) == len(kernels)), (None, {}))
    ones = sorted(n for n in set(dims) & set(tdims) if (dims[n] == 1) != (tdims[n] == 1))
    shared, why = 0, []
    for i, k in enumerate(kernels):
        if k.name in seen:
            shared += 1
            continue
        rule = k.name.rsplit("_", 1)[0]
        if twin is None or twin[i].name.rsplit("_", 1)[0] != rule:
            why.append("kernel %d %s: a group no earlier plan has" % (i, rule))
            continue
        a = dict(kv.split("=", 1) for kv in twin[i].choices.split() if "=" in kv)
        b = dict(kv.split("=", 1) for kv in k.choices.split() if "=" in kv)
        diff = ["%s %s -> %s" % (n, a.get(n, "-"), b.get(n, "-")) for n in sorted(set(a) | set(b))
                if a.get(n) != b.get(n)]
        if diff:
            why.append("kernel %d %s: %s" % (i, rule, ", ".join(diff)))
        elif ones:
            why.append("kernel %d %s: the same choices; %s is 1 on one side (specialized)" % (i, rule, ", ".join(ones)))
        else:
            why.append("kernel %d %s: the same choices; the source holds a size (specialized)" % (i, rule))
    return shared, why


def _is_cuda(t: torch.Tensor) -> bool:
    return t.device.type == "cuda"


def host_feed(t: torch.Tensor) -> np.ndarray:
    """A CPU tensor as the NumPy array the host path reads: a view of its
    memory when it is contiguous (no copy), bf16 widened to float32 (which
    the library rounds back exactly)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.float().numpy()
    return t.contiguous().numpy()


def run_host(exe: Any, exp: X.Exported, flat: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Runs exe on CPU tensors: inputs read in place where contiguous,
    outputs written straight into new torch tensors (fp32 / fp16 NCHW),
    returned in the export's output order."""
    feeds = {inp[0]: host_feed(t) for t, inp in zip(flat, exp.inputs) if inp is not None}
    outs: Dict[str, np.ndarray] = {}
    tensors: Dict[str, torch.Tensor] = {}
    for info in exe.outputs:
        if info.dtype == "bf16":
            continue                                     # NumPy has no bfloat16 of torch's: converted below
        t = torch.empty(info.shape, dtype=_TORCH_DTYPES[info.dtype])
        tensors[info.name] = t
        outs[info.name] = t.numpy()
    res = exe(feeds, out=outs)
    result = []
    for name in exp.outputs:
        if name in tensors:
            result.append(tensors[name])
        else:
            result.append(torch.from_numpy(np.asarray(res[name], np.float32)).to(torch.bfloat16))
    return result


def run_cuda(exe: Any, exp: X.Exported, flat: Sequence[torch.Tensor], stream: Any = None) -> List[torch.Tensor]:
    """Runs exe on CUDA tensors without copies: each tensor is bound by its
    device pointer (DLPack / __cuda_array_interface__), outputs are
    allocated by torch on the inputs' device, and the kernels are queued on
    `stream` or else torch's current stream (Executable.__call__).  A
    rank-4 input of an NHWC tensor is passed channels_last (a copy only
    when it is not already)."""
    layouts = {t.name: t.layout for t in exe.inputs}
    feeds = {}
    for t, inp in zip(flat, exp.inputs):
        if inp is None:
            continue
        if layouts.get(inp[0]) == "NHWC" and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        elif hasattr(t, "is_contiguous") and not t.is_contiguous():
            t = t.contiguous()
        feeds[inp[0]] = t.detach() if hasattr(t, "detach") else t
    res = exe(feeds, stream=stream)
    return [res[name] for name in exp.outputs]


class CompiledModule:
    """A module compiled by fusegen, called like the module.

    compiled(*args, **kwargs) takes what the module takes (torch tensors,
    in the containers of the example) and returns what it returns.  CPU
    tensors run in emulation (the generated CUDA compiled for the CPU);
    CUDA tensors run on the GPU without copies, on torch's current stream.

    One object serves every input size the export left symbolic: a size
    not seen before is one new shape bucket (load, plan and compile of the
    same ONNX model at that size; identical kernels come from the kernel
    cache); sizes the export fixed need a new export, made on first use.

    Attributes and methods:
      buckets            the Bucket of each size served so far
      exports            the ONNX exports made (X.Exported)
      kernel_counts()    compiles and cache hits of all buckets together
      explain()          what was exported, which sizes are symbolic, and
                         every bucket with its kernels and compiles
    """

    def __init__(self, module: Any, example_inputs: Sequence[Any], example_kwargs: Optional[Dict[str, Any]] = None,
                 dynamic: Any = None, batch_buckets: Optional[Sequence[int]] = None, shape_params: bool = True,
                 **options: Any):
        self.module = module
        self.dynamic = dynamic
        self.shape_params = bool(shape_params)
        self.batch_buckets = sorted({int(b) for b in batch_buckets}) if batch_buckets else []
        if any(b < 1 for b in self.batch_buckets):
            raise ValueError("batch_buckets must be positive sizes, not %r" % (batch_buckets,))
        self._options = options
        self._contexts: Dict[str, Context] = {}
        self._lock = threading.RLock()
        self.exports: List[X.Exported] = []
        self.buckets: Dict[Tuple[Any, ...], Bucket] = {}
        flat, self._in_spec = pytree.tree_flatten((tuple(example_inputs), dict(example_kwargs or {})))
        self._check_flat(flat)
        self._weights = self._weight_state()
        self._bucket(self._pad(flat)[1])   # the example's bucket now: an unsupported module fails here

    # -- plumbing
    @staticmethod
    def _check_flat(flat: Sequence[Any]) -> None:
        bad = [type(v).__name__ for v in flat if not isinstance(v, torch.Tensor)]
        if bad:
            raise TypeError("fusegen.torch.compile takes tensor arguments only (in tuples, lists and dicts); got %s"
                            % ", ".join(sorted(set(bad))))

    def _weight_state(self) -> Tuple[Any, ...]:
        if not isinstance(self.module, torch.nn.Module):
            return ()
        ts = list(self.module.parameters()) + list(self.module.buffers())
        return tuple((id(t), t.data_ptr(), t._version) for t in ts)

    def _context(self, device: str) -> Context:
        ctx = self._contexts.get(device)
        if ctx is None:
            ctx = self._contexts[device] = Context(device=device, **self._options)
        return ctx

    def close(self) -> None:
        """Frees every bucket and context."""
        with self._lock:
            self.buckets.clear()
            for ctx in self._contexts.values():
                ctx.close()
            self._contexts.clear()

    # -- buckets
    def _key(self, flat: Sequence[torch.Tensor]) -> Tuple[Any, ...]:
        dev = "cuda" if flat and any(_is_cuda(t) for t in flat) else "emu"
        return (dev,) + tuple((tuple(t.shape), str(t.dtype).replace("torch.", "")) for t in flat)

    def _bucket(self, flat: Sequence[torch.Tensor]) -> Bucket:
        key = self._key(flat)
        b = self.buckets.get(key)
        if b is not None:
            return b
        with self._lock:
            b = self.buckets.get(key)
            if b is None:
                b = self.buckets[key] = self._make_bucket(key, flat)
            return b

    def _make_bucket(self, key: Tuple[Any, ...], flat: Sequence[torch.Tensor]) -> Bucket:
        device = key[0]
        if device == "cuda" and not all(_is_cuda(t) for t in flat):
            raise _error(_lib.FG_ERR_INPUT, "CUDA and CPU tensors mixed in one call: pass all on one device")
        shapes = tuple(tuple(t.shape) for t in flat)
        tried_new = False
        for i, exp in enumerate(self.exports):
            dims = exp.dims_for(shapes)
            if dims is not None:
                b = self._try_bucket(key, device, shapes, i, dims, last_chance=False)
                if b is not None:
                    return b
        while True:
            self.exports.append(X.export(self.module, [t.detach() for t in flat], self.dynamic,
                                         self._in_spec if self._needs_spec() else None))
            i = len(self.exports) - 1
            dims = self.exports[i].dims_for(shapes)
            if dims is None:
                if tried_new or self.dynamic is False:
                    raise _error(_lib.FG_ERR_INTERNAL, "the ONNX export does not take the inputs it was made from "
                                 "(shapes %s)" % list(shapes))
                tried_new = True
                continue
            b = self._try_bucket(key, device, shapes, i, dims, last_chance=True)
            assert b is not None
            return b

    def _needs_spec(self) -> bool:
        """Whether the example is more than positional tensors (then the
        export goes through a wrapper that takes the flat tensors)."""
        n = self._in_spec.num_leaves
        return self._in_spec != pytree.tree_flatten((tuple(range(n)), {}))[1]

    def _try_bucket(self, key: Tuple[Any, ...], device: str, shapes: Tuple[Tuple[int, ...], ...], index: int,
                    dims: Dict[str, int], last_chance: bool) -> Optional[Bucket]:
        """Loads export `index` at dims, plans and compiles it.  An export
        that does not come out with the sizes asked for (a size it fixed
        inside) is None unless last_chance; errors name the operator."""
        exp = self.exports[index]
        ctx = self._context(device)
        before = ctx.kernel_counts() if ctx._lib.has("fg_context_kernel_counts") else {}
        t0 = time.perf_counter()
        name = "%s.onnx" % type(self.module).__name__
        try:
            g = ctx.load_bytes(exp.model, name, dims=dims, buffers=exp.buffers)
            plan = ctx.plan(g)
            exe = ctx.compile(plan, shape_params=self.shape_params)
        except Error as e:
            if not last_chance and e.status == "input error":
                return None             # e.g. a reshape to a size the export fixed: export again at these sizes
            raise X.located(e, exp) from None
        got = {t.name: t.shape for t in exe.inputs}
        want = {inp[0]: s for inp, s in zip(exp.inputs, shapes) if inp is not None}
        if any(got.get(n) != s for n, s in want.items()):
            exe.close()
            if not last_chance:
                return None
            raise _error(_lib.FG_ERR_INTERNAL, "the export loaded at %s has inputs %s, not %s" % (dims, got, want))
        after = ctx.kernel_counts() if before else {}
        counts = {k: after.get(k, 0) - before.get(k, 0) for k in COUNTERS}
        kernels = exe.kernels
        shared, why = specialization(kernels, dims, [(b.kernels, b.dims) for b in self.buckets.values()
                                                     if b.device == device])
        return Bucket(key, device, shapes, index, dims, plan, exe, counts, time.perf_counter() - t0, 0, shared, why,
                      kernels)

    # -- calling
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        if spec != self._in_spec:
            raise TypeError("the arguments are not in the form of the example inputs (%s; got %s)"
                            % (self._in_spec, spec))
        self._check_flat(flat)
        w = self._weight_state()
        if w != self._weights:          # parameters replaced or changed in place: their values are compiled in
            with self._lock:
                self.buckets.clear()
                self.exports.clear()
                self._weights = w
        n, padded = self._pad(flat)
        b = self._bucket(padded)
        b.calls += 1
        exp = self.exports[b.export_index]
        outs = run_cuda(b.exe, exp, padded) if b.device == "cuda" else run_host(b.exe, exp, padded)
        if padded is not flat:
            outs = [self._unpad(o, n, len(padded[0])) for o in outs]
        if exp.out_spec is None:
            return outs[0] if len(outs) == 1 else tuple(outs)
        return pytree.tree_unflatten(outs, exp.out_spec)

    def _pad(self, flat: List[torch.Tensor]) -> Tuple[int, List[torch.Tensor]]:
        """With batch_buckets: the call's batch n (dim 0 of every input) and
        the inputs zero-padded to the smallest bucket size >= n (unchanged
        when n is a bucket size or above them all)."""
        if not self.batch_buckets or not flat or any(t.dim() == 0 for t in flat):
            return 0, flat
        n = flat[0].shape[0]
        if any(t.shape[0] != n for t in flat):
            raise _error(_lib.FG_ERR_INPUT, "batch_buckets: every input's first dimension is the batch, but they "
                         "are %s" % [t.shape[0] for t in flat])
        size = next((b for b in self.batch_buckets if b >= n), None)
        if size is None or size == n:
            return n, flat
        return n, [torch.cat([t, t.new_zeros((size - n,) + tuple(t.shape[1:]))]) for t in flat]

    @staticmethod
    def _unpad(out: torch.Tensor, n: int, size: int) -> torch.Tensor:
        if out.dim() == 0 or out.shape[0] != size:
            raise _error(_lib.FG_ERR_INPUT, "batch_buckets: an output of shape %s has no batch of %d first; the "
                         "module does not keep the batch in dimension 0 (compile without batch_buckets)"
                         % (list(out.shape), size))
        return out[:n]

    # -- what was done
    def kernel_counts(self) -> Dict[str, int]:
        """Kernels compiled (NVRTC, host) and served by the cache (memory,
        disk, remote) by all buckets so far."""
        total = {k: 0 for k in COUNTERS}
        for b in self.buckets.values():
            for k in COUNTERS:
                total[k] += b.counts.get(k, 0)
        return total

    def explain(self, plans: bool = False) -> str:
        """The exports (which input sizes are symbolic), the buckets (sizes,
        kernels, compiles) and, with plans=True, each bucket's plan explained
        (groups, rules, near misses)."""
        lines = ["fusegen.torch: %s, %d export(s), %d shape bucket(s)"
                 % (type(self.module).__name__, len(self.exports), len(self.buckets))]
        for i, exp in enumerate(self.exports):
            ins = ", ".join("%s[%s]" % (inp[0], ", ".join(map(str, inp[1]))) for inp in exp.inputs if inp)
            lines.append("  export %d (%.1f s): inputs %s; outputs %s" % (i, exp.seconds, ins, ", ".join(exp.outputs)))
        for b in self.buckets.values():
            lines.append("  bucket " + b.describe())
            lines.extend("    new: " + w for w in b.new)
            if plans:
                lines.extend("    " + ln for ln in b.plan.explain().splitlines())
        k = self.kernel_counts()
        lines.append("  total: compiled %d (NVRTC %d, host %d), from the cache %d (memory %d, disk %d, remote %d)"
                     % (k["nvrtc_compiled"] + k["host_compiled"], k["nvrtc_compiled"], k["host_compiled"],
                        k["memory_hits"] + k["disk_hits"] + k["remote_hits"], k["memory_hits"], k["disk_hits"],
                        k["remote_hits"]))
        if self.shape_params:
            lines.append("  sizes: a size symbolic in the export is a new bucket (a plan for it); its kernels take "
                         "their sizes as parameters, so a kernel whose template choices (tiles, split-K, vector "
                         "widths) are those of an earlier bucket is the same source and compiles nothing; a size "
                         "the export fixed needs a new export")
        else:
            lines.append("  sizes: a size symbolic in the export is a new bucket (kernels specialized to it); a size "
                         "the export fixed needs a new export")
        if self.batch_buckets:
            lines.append("  batch buckets %s: a batch is padded to the smallest bucket size that holds it (above "
                         "them: its own size); batches inside a bucket compile nothing" % self.batch_buckets)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return "<fusegen.torch.CompiledModule of %s: %d buckets>" % (type(self.module).__name__, len(self.buckets))


def compile(module: Any, example_inputs: Sequence[Any] = (), dynamic: Any = None, *,  # noqa: A001
            example_kwargs: Optional[Dict[str, Any]] = None, batch_buckets: Optional[Sequence[int]] = None,
            **options: Any) -> CompiledModule:
    """Exports module (torch.export and the ONNX exporter, in memory), plans
    and compiles it with fusegen, and returns a CompiledModule to call with
    torch tensors.

    example_inputs: a tuple of the module's arguments (tensors, or tuples,
        lists and dicts of tensors); example_kwargs: keyword arguments.
    dynamic: None or True: every input dimension Dim.AUTO for torch.export
        (symbolic where the module allows: batch, sequence; fixed where it
        pins the size); False: all sizes fixed (each new size exports
        again); or a torch.export dynamic_shapes spec, passed as given.
        Sizes of 1 in the example are often fixed by torch.export: give
        examples with batch and sequence of 2 or more.
    batch_buckets: sizes such as (1, 4, 8, 16): a call of batch n (dim 0
        of every input) runs in the bucket of the smallest size >= n, its
        inputs zero-padded and its outputs cut back to n, so batches 5..8
        share one compile; above the largest size, the exact size.  Only
        for modules whose batch rows do not mix (eval-mode networks): a
        module that reduces over the batch would see the padding.
    shape_params: True (the default): kernels take their sizes as
        parameters, so a new size compiles only the kernels whose template
        choices change with it (explain() lists them and why); False:
        every bucket's kernels specialized to its sizes (constants in the
        source: a little less index arithmetic, a compile per new size).
    options: Context options (rules, cache_dir, precision, arch, jobs,
        cache, log).

    The module's parameters and buffers become the model's weights (the
    library folds and holds its own copy); change them and the next call
    exports again.  An operator the library cannot compile raises
    fusegen.Error naming it and the module source line (err.nodes,
    err.operators).  Inference only: no gradients flow through the result.
    """
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    return CompiledModule(module, tuple(example_inputs), example_kwargs, dynamic, batch_buckets, **options)
