"""From a torch.nn.Module to an ONNX model in memory: torch.export and the
ONNX exporter (torch.onnx.export(..., dynamo=True)), no file written; and
errors of the library about that model turned into errors that name the
operator and the line of the module's source it came from (the exporter
records each ONNX node's stack trace in its metadata).  Internal to
fusegen.torch."""
from __future__ import annotations

import contextlib
import inspect
import io
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch

from .. import _lib
from .._core import Error, ErrorRecord

# A dimension of an exported input: an int (fixed) or the name of a
# symbolic dimension (dim_param), shared by the inputs that have it.
Dim = Union[int, str]

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in ([^\n]+)\n([^\n]*)')
_QUOTED = re.compile(r"'([^']+)'")


@dataclass
class NodeSource:
    """Where an ONNX node of an export came from: its operator, the aten
    operator it was translated from (when recorded) and the innermost frame
    of its stack trace (file, line, function, code), None when unrecorded."""
    name: str
    op_type: str
    aten: Optional[str]
    stack_trace: str
    file: Optional[str]
    line: int
    function: Optional[str]
    code: Optional[str]

    def where(self) -> str:
        """"file:line (in function): code", or "" without a trace."""
        if not self.file:
            return ""
        return "%s:%d (in %s): %s" % (self.file, self.line, self.function, (self.code or "").strip())


@dataclass
class Exported:
    """One ONNX export of a module: the serialized model, its inputs (ONNX
    name, dims) in the order of the module's flattened tensor arguments
    (None for an argument the model does not read), output names, the
    pytree spec the outputs are rebuilt with, the source of each node, and
    the weights the model names as external data "fusegen-memory:<i>":
    buffers[i] is the memory of a torch tensor the exporter holds (the
    module's parameter itself, or the exporter's copy of it), passed to
    Context.load_bytes(buffers=)."""
    model: bytes
    inputs: List[Optional[Tuple[str, Tuple[Dim, ...]]]]
    outputs: List[str]
    out_spec: Any
    nodes: Dict[str, NodeSource] = field(default_factory=dict)
    seconds: float = 0.0
    buffers: List[Tuple[int, int]] = field(default_factory=list)   # (address, bytes) of weights left out of model
    keep: List[torch.Tensor] = field(default_factory=list)         # the tensors those addresses are in

    def dims_for(self, shapes: Sequence[Tuple[int, ...]]) -> Optional[Dict[str, int]]:
        """The symbolic dimension values that make this export take inputs of
        these shapes ({name: value}), or None when it cannot (a fixed size
        differs, a rank differs, one name would take two values)."""
        if len(shapes) != len(self.inputs):
            return None
        out: Dict[str, int] = {}
        for inp, shape in zip(self.inputs, shapes):
            if inp is None:
                continue
            dims = inp[1]
            if len(dims) != len(shape):
                return None
            for d, n in zip(dims, shape):
                if isinstance(d, int):
                    if d != n:
                        return None
                elif out.setdefault(d, n) != n:
                    return None
        return out


def _varargs(module: Any) -> bool:
    """Whether module's forward takes its tensors as *args."""
    fn = module.forward if isinstance(module, torch.nn.Module) else module
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0].kind == inspect.Parameter.VAR_POSITIONAL


def dynamic_shapes(args: Sequence[torch.Tensor], dynamic: Any, varargs: bool = False) -> Any:
    """The dynamic_shapes argument of torch.export for the flat tensor args
    (of a forward(*args) when varargs): None/True: every dimension Dim.AUTO
    (symbolic where the module allows, fixed where it pins the size);
    False: none; anything else is passed through as given (a torch.export
    dynamic_shapes spec)."""
    if dynamic is False:
        return None
    if dynamic is None or dynamic is True:
        auto = torch.export.Dim.AUTO
        spec = tuple({d: auto for d in range(a.dim())} for a in args)
        return (spec,) if varargs else spec
    return dynamic


def _frame(trace: str) -> Tuple[Optional[str], int, Optional[str], Optional[str]]:
    """The innermost frame of a recorded stack trace."""
    frames = _FRAME.findall(trace or "")
    if not frames:
        return None, 0, None, None
    f, line, fn, code = frames[-1]
    return f, int(line), fn.strip(), code


def _aten(fx_node: str) -> Optional[str]:
    m = re.search(r"target=torch\.ops\.([\w.]+)", fx_node or "")
    return m.group(1) if m else None


def _shape_of(value_info: Any) -> Tuple[Dim, ...]:
    dims: List[Dim] = []
    for d in value_info.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or "?")
    return tuple(dims)


def export(module: torch.nn.Module, args: Sequence[torch.Tensor], dynamic: Any, in_spec: Any = None) -> Exported:
    """Exports module(*args) (args: the flattened tensor arguments, rebuilt
    with in_spec when given) to ONNX in memory.  A failure of the exporter
    raises Error "unsupported" carrying the exporter's summary."""
    import time  # noqa: PLC0415

    t0 = time.perf_counter()

    class _Flat(torch.nn.Module):
        """module called with the flat tensors, rebuilt into its arguments."""

        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, *flat: torch.Tensor) -> Any:
            if in_spec is None:
                return self.inner(*flat)
            a, kw = torch.utils._pytree.tree_unflatten(list(flat), in_spec)
            return self.inner(*a, **kw)

    target = _Flat() if in_spec is not None else module
    log = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(log):
            warnings.simplefilter("ignore")
            prog = torch.onnx.export(target, tuple(args), dynamo=True, verbose=False, report=False,
                                     dynamic_shapes=dynamic_shapes(args, dynamic, _varargs(target)))
    except Exception as e:  # noqa: BLE001 - the exporter's failures are the user's to see
        text = str(e)
        summary = text.split("## Exception summary", 1)[-1].strip().split("\n\n")[0] if "## Exception summary" in \
            text else text.strip().splitlines()[0] if text.strip() else type(e).__name__
        if "_transformer_encoder_layer_fwd" in text or "_native_multi_head_attention" in text:
            summary += ("\n(the inference fast path of nn.TransformerEncoderLayer / nn.MultiheadAttention, one fused "
                        "aten operator with no ONNX translation: call torch.backends.mha.set_fastpath_enabled(False) "
                        "before compiling)")
        raise Error(_lib.FG_ERR_UNSUPPORTED, [ErrorRecord(
            "unsupported", None, 0, 0, "the module could not be exported to ONNX (torch.onnx.export, dynamo=True): "
            "%s" % summary)]) from e
    proto, buffers, keep = _serialize(prog.model)
    ep = prog.exported_program
    user = list(ep.graph_signature.user_inputs) if ep is not None else [i.name for i in proto.graph.input]
    by_name = {i.name: i for i in proto.graph.input}
    inputs: List[Optional[Tuple[str, Tuple[Dim, ...]]]] = []
    for k in range(len(args)):
        name = user[k] if k < len(user) else None
        vi = by_name.get(name) if name is not None else None
        inputs.append((vi.name, _shape_of(vi)) if vi is not None else None)
    nodes: Dict[str, NodeSource] = {}
    for n in proto.graph.node:
        md = {p.key: p.value for p in n.metadata_props}
        trace = md.get("pkg.torch.onnx.stack_trace", "")
        f, line, fn, code = _frame(trace)
        nodes[n.name] = NodeSource(n.name, n.op_type, _aten(md.get("pkg.torch.onnx.fx_node", "")), trace, f, line,
                                   fn, code)
    out_spec = ep.call_spec.out_spec if ep is not None else None
    return Exported(proto.SerializeToString(), inputs, [o.name for o in proto.graph.output], out_spec, nodes,
                    time.perf_counter() - t0, buffers, keep)


def _serialize(model: Any) -> Tuple[Any, List[Tuple[int, int]], List[torch.Tensor]]:
    """The ONNX ModelProto of an onnx_ir model, each initializer held in a
    contiguous CPU torch tensor left out of it: named as external data
    "fusegen-memory:<i>" with its (address, bytes) in the list, so the
    library reads it from the tensor's memory.  Others are serialized."""
    import onnx_ir as ir  # noqa: PLC0415

    buffers: List[Tuple[int, int]] = []
    keep: List[torch.Tensor] = []
    swapped = []
    try:
        for v in model.graph.initializers.values():
            cv = v.const_value
            t = getattr(cv, "raw", None)
            if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or not t.is_contiguous() or t.numel() == 0:
                continue
            t = t.detach()
            n = t.numel() * t.element_size()
            ext = ir.ExternalTensor("fusegen-memory:%d" % len(buffers), 0, n, cv.dtype, shape=cv.shape,
                                    name=cv.name or v.name or "")
            buffers.append((t.data_ptr(), n))
            keep.append(t)
            swapped.append((v, cv))
            v.const_value = ext
        proto = ir.serde.serialize_model(model)
    finally:
        for v, cv in swapped:
            v.const_value = cv
    return proto, buffers, keep


def located(err: Error, exp: Exported) -> Error:
    """err (raised loading, planning or compiling exp) with the ONNX nodes
    it names traced back to the module: for each, a record "file:line:
    error: unsupported operator CumSum (aten.cumsum.default), ONNX node
    'node_cumsum': <the library's message>" at the module's source line,
    before the library's own records.  err.nodes lists the NodeSource of
    each named node, err.operators their ONNX operator names."""
    found: List[NodeSource] = []
    for rec in err.errors:
        for name in _QUOTED.findall(rec.message):
            src = exp.nodes.get(name)
            if src is not None and src not in found:
                found.append(src)
    records: List[ErrorRecord] = []
    for src in found:
        what = "unsupported operator" if err.status == "unsupported" or any(
            "unsupported" in r.message and src.name in r.message for r in err.errors) else "operator"
        msg = "%s %s%s, ONNX node '%s'%s" % (what, src.op_type, " (%s)" % src.aten if src.aten else "", src.name,
                                             ": " + (src.code or "").strip() if src.code else "")
        records.append(ErrorRecord(err.status, src.file, src.line, 0, msg))
    out = Error(err.code, records + list(err.errors))
    out.nodes = found             # type: ignore[attr-defined]
    out.operators = sorted({s.op_type for s in found})   # type: ignore[attr-defined]
    return out
