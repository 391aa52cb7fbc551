"""The "fusegen" backend of torch.compile: each FX graph dynamo captures is
compiled through the same path as fusegen.torch.compile (the graph with its
parameters bound as weights, exported to ONNX in memory, one shape bucket
per input size).  With options={"fallback": True}, a graph that fusegen
cannot compile whole is split into the parts it can compile and the nodes
it named as unsupported, which run eagerly (graph breaks inside the FX
graph); each graph's outcome is a GraphReport (reports(), explain()).
Internal to fusegen.torch."""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch

from .._core import Error
from . import _compile as K
from . import _export as X

_PARAM_NAME = re.compile(r"_(parameters|buffers)_")
_lock = threading.Lock()
_reports: List["GraphReport"] = []


@dataclass
class Part:
    """One part of a graph: run by fusegen ("fusegen", its CompiledModule
    once compiled) or eagerly ("eager", with the reason)."""
    kind: str
    nodes: List[str]
    reason: str = ""
    compiled: Optional[K.CompiledModule] = None
    fx: Optional["_FxCall"] = None    # every CompiledModule of the part (one per fixed size argument)

    def describe(self) -> str:
        head = "%s: %d node%s (%s)" % (self.kind, len(self.nodes), "" if len(self.nodes) == 1 else "s",
                                       ", ".join(self.nodes[:8]) + (", ..." if len(self.nodes) > 8 else ""))
        if self.compiled is not None:
            cms = list(self.fx.compiled.values()) if self.fx is not None else [self.compiled]
            ks = [cm.kernel_counts() for cm in cms]
            head += "; %d export(s), %d bucket(s), %d kernels compiled, %d from the cache" % (
                sum(len(cm.exports) for cm in cms), sum(len(cm.buckets) for cm in cms),
                sum(k["host_compiled"] + k["nvrtc_compiled"] for k in ks),
                sum(k["memory_hits"] + k["disk_hits"] + k["remote_hits"] for k in ks))
        elif self.kind == "fusegen":
            head += "; compiled on first call"
        return head + ("; " + self.reason if self.reason else "")


@dataclass
class GraphReport:
    """What the backend made of one FX graph: "fusegen" (compiled whole),
    "fallback" (split into fusegen and eager parts) or "eager" (nothing
    compiled: the reason says why)."""
    index: int
    nodes: int
    mode: str = "fusegen"
    parts: List[Part] = field(default_factory=list)
    reason: str = ""

    def explain(self) -> str:
        lines = ["graph %d (%d nodes): %s%s" % (self.index, self.nodes, self.mode,
                                                 " -- " + self.reason if self.reason else "")]
        lines += ["  part %d %s" % (i, p.describe()) for i, p in enumerate(self.parts)]
        return "\n".join(lines)


def reports() -> List[GraphReport]:
    """The report of every FX graph the backend compiled, oldest first."""
    with _lock:
        return list(_reports)


def reset() -> None:
    """Forgets the reports."""
    with _lock:
        _reports.clear()


def explain() -> str:
    """Every report's explain(), one after the other."""
    return "\n".join(r.explain() for r in reports())


def _calls(gm: torch.fx.GraphModule) -> List[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def _bind(gm: torch.fx.GraphModule, slots: List[Tuple[str, Any]], consts: List[torch.Tensor],
          ints: Dict[int, int]) -> torch.fx.GraphModule:
    """gm rewritten to take only its tensor inputs: parameters and buffers
    bound as attributes that share their memory (exported as weights), size
    arguments computed from the inputs' shapes (so they stay symbolic) or
    fixed to their value.  Nodes are copied with their metadata, so the
    export records the module's own source lines."""
    graph = torch.fx.Graph()
    env: Dict[torch.fx.Node, Any] = {}
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ninputs = sum(1 for kind, _v in slots if kind == "input")
    inputs = [graph.placeholder("x%d" % k) for k in range(ninputs)]
    for j, c in enumerate(consts):
        gm.register_buffer("_fusegen_w%d" % j, c.detach(), persistent=False)
    for n, (kind, v) in zip(ph, slots):
        if kind == "const":
            env[n] = graph.get_attr("_fusegen_w%d" % v)
        elif kind == "input":
            env[n] = inputs[v]
        elif kind == "dim":
            env[n] = graph.call_function(torch.ops.aten.sym_size.int, (inputs[v[0]], v[1]))
        else:
            env[n] = ints[v]
        if isinstance(env[n], torch.fx.Node):
            env[n].meta = dict(n.meta)
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            env[n] = graph.node_copy(n, lambda m: env[m])
    return torch.fx.GraphModule(gm, graph)


class _FxCall:
    """A compiled FX graph, called as dynamo calls it (every placeholder's
    value, parameters and sizes included)."""

    def __init__(self, gm: torch.fx.GraphModule, example: Sequence[Any], dynamic: Any, options: Dict[str, Any],
                 baked: Set[int]):
        self.gm, self.dynamic = gm, dynamic
        self.options = dict(options)
        self.batch_buckets = self.options.pop("batch_buckets", None)
        ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.slots: List[Tuple[str, Any]] = []
        self.consts: List[torch.Tensor] = []
        self.inputs: List[int] = []           # placeholder index of each tensor input
        self.int_slots: List[int] = []
        for i, (n, v) in enumerate(zip(ph, example)):
            if isinstance(v, torch.Tensor):
                if isinstance(v, torch.nn.Parameter) or id(v) in baked or _PARAM_NAME.search(str(n.target)):
                    self.slots.append(("const", len(self.consts)))
                    self.consts.append(v)
                    baked.add(id(v))
                else:
                    self.slots.append(("input", len(self.inputs)))
                    self.inputs.append(i)
            else:
                self.slots.append(("int", i))
        # a size argument that is a dimension of a tensor input is computed from it (stays symbolic)
        shapes = [getattr(ph[i].meta.get("example_value"), "shape", None) for i in self.inputs]
        for s, (kind, v) in enumerate(self.slots):
            if kind != "int" or not isinstance(example[v], (int, torch.SymInt)):
                continue
            sym = str(ph[v].meta.get("example_value", example[v]))   # the symbol ("s0"), not its value
            for k, shp in enumerate(shapes):
                hit = [d for d, x in enumerate(shp or ()) if str(x) == sym]
                if hit and not sym.isdigit():
                    self.slots[s] = ("dim", (k, hit[0]))
                    break
            else:
                self.int_slots.append(v)
        self.compiled: Dict[Tuple[int, ...], K.CompiledModule] = {}
        self.first = self._compile(example)

    @staticmethod
    def _int(v: Any) -> int:
        if isinstance(v, torch.SymInt):
            hint = getattr(v.node, "hint", None)
            return int(hint) if hint is not None else int(v)
        return int(v)

    def _compile(self, args: Sequence[Any]) -> K.CompiledModule:
        ints = {i: self._int(args[i]) for i in self.int_slots}
        key = tuple(ints[i] for i in self.int_slots)
        cm = self.compiled.get(key)
        if cm is None:
            tensors = [args[i].detach() for i in self.inputs]
            cm = K.CompiledModule(_bind(self.gm, self.slots, self.consts, ints), tuple(tensors), None,
                                  self.dynamic, self.batch_buckets, **self.options)
            self.compiled[key] = cm
        return cm

    def __call__(self, *args: Any) -> Any:
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return self.gm(*args)           # training: autograd needs the eager graph
        cm = self._compile(args)
        out = cm(*[args[i] for i in self.inputs])
        return out


class _EagerPart(torch.nn.Module):
    """A part of a split graph run by fusegen: compiled on its first call
    (with the values it is called with); if fusegen refuses it after all,
    it stays eager and its Part says why."""

    def __init__(self, sub: torch.fx.GraphModule, part: Part, dynamic: Any, options: Dict[str, Any],
                 baked: Set[int]):
        super().__init__()
        self.sub, self.part, self.dynamic, self.options, self.baked = sub, part, dynamic, options, baked
        self.call: Optional[Callable[..., Any]] = None

    def forward(self, *args: Any) -> Any:
        if self.call is None:
            try:
                fx = _FxCall(self.sub, args, self.dynamic, self.options, self.baked)
                self.part.compiled, self.part.fx = fx.first, fx
                self.call = fx
            except Error as e:
                self.part.kind, self.part.reason = "eager", "fusegen: %s" % e.message
                self.call = self.sub
        return self.call(*args)


def _unsupported_nodes(gm: torch.fx.GraphModule, err: Error) -> List[torch.fx.Node]:
    """The nodes of gm that the ONNX nodes err names came from, matched by
    their recorded stack trace (then by innermost file and line)."""
    srcs = getattr(err, "nodes", [])
    out: List[torch.fx.Node] = []
    for src in srcs:
        exact = [n for n in _calls(gm) if (n.meta.get("stack_trace") or "") == src.stack_trace and src.stack_trace]
        if not exact and src.file:
            exact = [n for n in _calls(gm) if X._frame(n.meta.get("stack_trace") or "")[:2] == (src.file, src.line)]
        out += [n for n in exact if n not in out]
    return out


def _split(gm: torch.fx.GraphModule, bad: List[torch.fx.Node], report: GraphReport, dynamic: Any,
           options: Dict[str, Any], baked: Set[int]) -> torch.fx.GraphModule:
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner  # noqa: PLC0415
    from torch.fx.passes.operator_support import OperatorSupportBase  # noqa: PLC0415

    bad_set = set(bad)

    class _Support(OperatorSupportBase):
        def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
            return node.op in ("call_function", "call_method", "call_module") and node not in bad_set

    where = {n: X._frame(n.meta.get("stack_trace") or "") for n in bad}
    part = CapabilityBasedPartitioner(gm, _Support(), allows_single_node_partition=True)
    fused = part.fuse_partitions(part.propose_partitions())
    for n in fused.graph.nodes:
        if n.op == "call_module" and str(n.target).startswith("fused_"):
            sub = fused.get_submodule(str(n.target))
            p = Part("fusegen", [m.name for m in _calls(sub)])
            report.parts.append(p)
            setattr(fused, str(n.target), _EagerPart(sub, p, dynamic, options, baked))
        elif n.op in ("call_function", "call_method", "call_module"):
            orig = next((b for b in bad if b.name == n.name), None)
            f, line, _fn, code = where.get(orig, (None, 0, None, None)) if orig is not None else (None, 0, None, None)
            report.parts.append(Part("eager", [n.name], "unsupported by fusegen%s" % (
                " (%s:%d: %s)" % (f, line, (code or "").strip()) if f else "")))
    fused.recompile()
    return fused


class _Graph:
    """What the backend returns for one FX graph: compiled on its first
    call, outside dynamo's tracing (torch.export cannot run inside it), with
    the values of that call; then each call goes to the compiled graph, the
    split graph (fallback) or the eager graph."""

    def __init__(self, gm: torch.fx.GraphModule, fallback: bool, dynamic: Any, options: Dict[str, Any],
                 report: GraphReport):
        self.gm, self.fallback, self.dynamic, self.options, self.report = gm, fallback, dynamic, options, report
        self.call: Optional[Callable[..., Any]] = None
        self._lock = threading.Lock()

    def _build(self, args: Sequence[Any]) -> Callable[..., Any]:
        gm, report = self.gm, self.report
        baked: Set[int] = set()
        try:
            fx = _FxCall(gm, args, self.dynamic, self.options, baked)
            report.parts.append(Part("fusegen", [n.name for n in _calls(gm)], compiled=fx.first, fx=fx))
            return fx
        except Error as e:
            if not self.fallback:
                report.mode, report.reason = "failed", str(e.message)
                raise
            bad = _unsupported_nodes(gm, e)
            if not bad:
                report.mode, report.reason = "eager", "fusegen could not compile it and named no node: %s" % e.message
                report.parts.append(Part("eager", [n.name for n in _calls(gm)], e.message))
                return gm.forward
            report.mode = "fallback"
            report.reason = "unsupported: %s" % ", ".join(sorted(set(getattr(e, "operators", []))))
            return _split(gm, bad, report, self.dynamic, self.options, baked).forward

    def __call__(self, *args: Any) -> Any:
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return self.gm(*args)           # training: autograd needs the eager graph
        if self.call is None:
            with self._lock:
                if self.call is None:
                    self.call = self._build(args)
        return self.call(*args)


def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: Optional[Dict[str, Any]] = None,
            **kwargs: Any) -> Callable[..., Any]:
    """The torch.compile backend: torch.compile(m, backend="fusegen",
    options={...}).  Options: fallback (False: an unsupported graph raises
    fusegen.Error naming the operator and source line; True: it runs with
    its unsupported nodes eager), dynamic and batch_buckets (as
    fusegen.torch.compile; batch buckets pad each graph's inputs), and
    the Context options (rules, cache_dir, precision, jobs, cache, log).
    The graph is compiled on its first call (torch.export cannot run while
    dynamo traces), so errors come from that call."""
    opts = dict(options or {})
    opts.update(kwargs)
    fallback = bool(opts.pop("fallback", False))
    dynamic = opts.pop("dynamic", None)
    with _lock:
        report = GraphReport(len(_reports), len(_calls(gm)))
        _reports.append(report)
    return _Graph(gm, fallback, dynamic, opts, report)


def register(name: str = "fusegen") -> None:
    """Registers the backend with torch._dynamo under name (done on import
    of fusegen.torch; a backend found through the package's entry point is
    left to dynamo to register)."""
    try:
        from torch._dynamo.backends import registry  # noqa: PLC0415
    except ImportError:  # pragma: no cover - a torch without dynamo
        return
    if name in registry._COMPILER_FNS or registry._BACKENDS.get(name) is not None:
        return
    registry.register_backend(compiler_fn=backend, name=name)
