"""f64ref.py -- a float64 copy of an fp32 ONNX model, run by onnx.reference:
the arbiter when fusegen and onnxruntime disagree by more than float32
rounding explains.

    import f64ref
    outs = f64ref.run(model, feeds)          # float64 outputs, graph order
    d = f64ref.rel_l2(candidate, outs[0])    # ||a - b|| / ||b|| in float64

to_f64(model) rewrites every float tensor of the graph to double: the
initializers, Constant and ConstantOfShape values, Cast/CastLike targets
and the declared types of inputs, outputs and value_info.  The weights are
the fp32 model's own (widened exactly), so the copy computes the same
function as the fp32 model with no rounding in between: distances to it
measure each runtime's float32 error, not a difference of models.
"""
import numpy as np

F32 = 1    # onnx.TensorProto.FLOAT
F64 = 11   # onnx.TensorProto.DOUBLE


def _widen_tensor(t):
    """TensorProto t widened to double in place when it is float."""
    from onnx import numpy_helper
    if t.data_type != F32:
        return
    a = numpy_helper.to_array(t).astype(np.float64)
    t.CopyFrom(numpy_helper.from_array(a, t.name))


def _widen_type(tp):
    """TypeProto tp: a float tensor type becomes double."""
    if tp.HasField("tensor_type") and tp.tensor_type.elem_type == F32:
        tp.tensor_type.elem_type = F64


def _widen_graph(g):
    for t in g.initializer:
        _widen_tensor(t)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        _widen_type(vi.type)
    for n in g.node:
        for a in n.attribute:
            if a.name == "to" and n.op_type == "Cast" and a.i == F32:
                a.i = F64
            if a.type == 4:      # TENSOR (Constant value, ConstantOfShape value)
                _widen_tensor(a.t)
            if a.type == 5:      # GRAPH (If/Loop/Scan bodies)
                _widen_graph(a.g)
            if a.type == 10:     # GRAPHS
                for sg in a.graphs:
                    _widen_graph(sg)
            if a.name == "dtype" and a.type == 2 and a.i == F32:
                a.i = F64


def to_f64(model):
    """A float64 copy of ONNX model (a ModelProto; not modified)."""
    import onnx
    m = onnx.ModelProto()
    m.CopyFrom(model)
    _widen_graph(m.graph)
    return m


def run(model, feeds):
    """Runs the float64 copy of model on feeds ({input name: array}; float
    arrays are widened); returns the outputs in graph order as float64."""
    from onnx.reference import ReferenceEvaluator
    sess = ReferenceEvaluator(to_f64(model))
    f = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in feeds.items()}
    return [np.asarray(o) for o in sess.run(None, f)]


def rel_l2(a, ref):
    """||a - ref|| / ||ref|| in float64 (ref all zero: the absolute norm)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    r = np.asarray(ref, dtype=np.float64).ravel()
    return float(np.linalg.norm(a - r) / max(np.linalg.norm(r), 1e-30))
