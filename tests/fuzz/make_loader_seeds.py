#!/usr/bin/env python3
"""make_loader_seeds.py -- writes the seed corpora of the file-format fuzz
targets: tests/fuzz/corpus/fuzz_npy (files written by numpy, then broken in
the ways a reader must refuse), tests/fuzz/corpus/fuzz_safetensors (files in
the safetensors layout: an 8-byte little-endian header length, a JSON header
and the data of numpy arrays) and tests/fuzz/corpus/fuzz_onnx (small models
built with the onnx package).

The seeds are committed; run this again only to change them:

    python3 tests/fuzz/make_loader_seeds.py [CORPUS_DIR]

It never deletes files, so regression inputs kept in those directories stay.
Needs numpy and onnx (pip install numpy onnx).
"""
import io
import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
RNG = np.random.default_rng(7)


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- .npy ----------------------------------------------------------------------

def npy(a, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, a, allow_pickle=False)
    else:
        np.lib.format.write_array(b, a, version=version, allow_pickle=False)
    return b.getvalue()


def npy_seeds():
    f4 = RNG.standard_normal((2, 3)).astype(np.float32)
    put("fuzz_npy", "f4_2x3", npy(f4))
    put("fuzz_npy", "f4_vector", npy(np.array([1.5, -0.0, np.inf], np.float32)))
    put("fuzz_npy", "f4_nan", npy(np.array([np.nan, -np.nan, 3e38, 1e-45], np.float32)))
    put("fuzz_npy", "f2_vector", npy(np.array([1, -2, 65504, 6e-8, np.inf, np.nan], np.float16)))
    put("fuzz_npy", "f4_big_endian", npy(f4.astype(">f4")))
    put("fuzz_npy", "f2_big_endian", npy(np.arange(6, dtype=">f2").reshape(3, 2)))
    put("fuzz_npy", "f4_version2", npy(f4, version=(2, 0)))
    put("fuzz_npy", "f4_version3", npy(f4, version=(3, 0)))
    put("fuzz_npy", "f4_rank6", npy(np.ones((1, 2, 1, 2, 1, 2), np.float32)))
    # refused
    put("fuzz_npy", "f4_rank7", npy(np.ones((1, 1, 1, 1, 1, 1, 2), np.float32)))
    put("fuzz_npy", "f4_fortran", npy(np.asfortranarray(f4)))
    put("fuzz_npy", "f8", npy(f4.astype(np.float64)))
    put("fuzz_npy", "i4", npy(np.arange(4, dtype=np.int32)))
    put("fuzz_npy", "bool", npy(np.array([True, False])))
    put("fuzz_npy", "scalar", npy(np.float32(2.5)))
    put("fuzz_npy", "empty_dim", npy(np.zeros((0, 3), np.float32)))
    big = npy(np.zeros((65, 65), np.float32))    # over the target's 4096-element limit;
    put("fuzz_npy", "too_many_elements", big[:128])   # the header alone (refused before the data)
    good = npy(f4)
    put("fuzz_npy", "truncated_data", good[:-3])
    put("fuzz_npy", "extra_byte", good + b"\0")
    put("fuzz_npy", "truncated_header", good[:40])
    put("fuzz_npy", "bad_magic", b"\x93NUMPX" + good[6:])
    put("fuzz_npy", "version9", good[:6] + b"\x09\x00" + good[8:])
    hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }"
    hdr += b" " * (63 - 10 - len(hdr)) + b"\n"
    put("fuzz_npy", "python2_long", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + f4.tobytes())
    hdr = b"{'descr': '', 'fortran_order': False, 'shape': (2, 3), }"
    hdr += b" " * (63 - 10 - len(hdr)) + b"\n"
    put("fuzz_npy", "descr_empty", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + f4.tobytes())
    put("fuzz_npy", "empty", b"")


# ---- .safetensors ------------------------------------------------------------------

def safetensors(tensors, metadata=None, header=None, extra=b""):
    """tensors: [(name, dtype string, array or raw bytes, shape or None)]."""
    hd, data = {}, b""
    if metadata is not None:
        hd["__metadata__"] = metadata
    for name, dt, a, shape in tensors:
        raw = a if isinstance(a, bytes) else a.tobytes()
        hd[name] = {"dtype": dt, "shape": list(shape if shape is not None else a.shape),
                    "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = header if header is not None else json.dumps(hd, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data + extra


def bf16_bytes(a):
    u = np.asarray(a, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()


def safetensors_seeds():
    w = RNG.standard_normal((2, 3)).astype("<f4")
    hv = np.array([1, -2, 0.5, np.inf], "<f2")
    bf = bf16_bytes([1.0, -3.5, 1e30])
    three = [("layer.weight", "F32", w, None), ("half", "F16", hv, None), ("brain", "BF16", bf, [3])]
    put("fuzz_safetensors", "three_dtypes", safetensors(three, metadata={"format": "pt"}))
    put("fuzz_safetensors", "one_f32", safetensors([("x", "F32", w, None)]))
    put("fuzz_safetensors", "rank6", safetensors([("x", "F32", np.ones((1, 2, 1, 1, 2, 1), "<f4"), None)]))
    put("fuzz_safetensors", "empty_header", safetensors([], header=b"{}"))
    put("fuzz_safetensors", "padded_header", safetensors([], header=b'{"__metadata__":{"a":"b"}}   '))
    # refused at open or at read
    put("fuzz_safetensors", "i64", safetensors([("ids", "I64", np.arange(3, dtype="<i8"), None)]))
    put("fuzz_safetensors", "rank7", safetensors([("x", "F32", np.ones((1,) * 6 + (2,), "<f4"), None)]))
    put("fuzz_safetensors", "scalar", safetensors([("x", "F32", np.array(1.0, "<f4"), [])]))
    put("fuzz_safetensors", "zero_dim", safetensors([("x", "F32", b"", [0, 3])]))
    put("fuzz_safetensors", "size_mismatch", safetensors([("x", "F32", w, [3, 3])]))
    good = safetensors(three)
    put("fuzz_safetensors", "truncated", good[:-5])
    put("fuzz_safetensors", "short", good[:6])
    put("fuzz_safetensors", "huge_header_length", struct.pack("<Q", 1 << 62) + good[8:])
    put("fuzz_safetensors", "not_object", safetensors([], header=b"[1, 2]"))
    put("fuzz_safetensors", "bad_json", safetensors([], header=b'{"x": {"dtype": "F32",'))
    put("fuzz_safetensors", "duplicate_key", safetensors([], header=b'{"a": 1, "a": 2}'))
    put("fuzz_safetensors", "offsets_outside",
        safetensors([], header=b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', extra=b"\0\0\0\0"))
    put("fuzz_safetensors", "offsets_reversed",
        safetensors([], header=b'{"x":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}', extra=b"\0" * 8))
    put("fuzz_safetensors", "negative_shape",
        safetensors([], header=b'{"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', extra=b"\0" * 4))
    put("fuzz_safetensors", "entry_not_object", safetensors([], header=b'{"x": "F32"}'))


# ---- ONNX ---------------------------------------------------------------------------

def model(nodes, inputs, outputs, inits=(), opset=13):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="seed")
    m.ir_version = 8
    return m.SerializeToString()


def vi(name, shape, et=TP.FLOAT):
    return h.make_tensor_value_info(name, et, shape)


def onnx_seeds():
    x = vi("x", ["batch", 2, 5, 5])
    put("fuzz_onnx", "relu", model([h.make_node("Relu", ["x"], ["y"])], [vi("x", [1, 4])], [vi("y", [1, 4])]))
    wc = nh.from_array(RNG.standard_normal((3, 2, 3, 3)).astype(np.float32), "w")
    bc = nh.from_array(RNG.standard_normal(3).astype(np.float32), "b")
    bn = [nh.from_array(RNG.random(3).astype(np.float32) + 0.5, n) for n in ("s", "bb", "m", "v")]
    put("fuzz_onnx", "conv_bn_relu", model(
        [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 0, 1, 0], strides=[2, 1]),
         h.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], epsilon=1e-5),
         h.make_node("Relu", ["n"], ["y"])],
        [x], [vi("y", None)], [wc, bc] + bn))
    put("fuzz_onnx", "conv_auto_pad_group", model(
        [h.make_node("Conv", ["x", "wg"], ["y"], auto_pad="SAME_LOWER", group=2, dilations=[2, 1])],
        [x], [vi("y", None)], [nh.from_array(np.ones((2, 1, 2, 3), np.float32), "wg")]))
    wg = h.make_tensor("wm", TP.FLOAT, [4, 3], RNG.standard_normal(12).astype(np.float32).tolist())
    put("fuzz_onnx", "gemm_typed_fields", model(
        [h.make_node("Gemm", ["a", "wm", "cb"], ["y"], transB=1, alpha=0.5, beta=2.0)],
        [vi("a", [2, 3])], [vi("y", [2, 4])], [wg, nh.from_array(np.ones((1, 4), np.float32), "cb")]))
    hw = nh.from_array(RNG.standard_normal((3, 4)).astype(np.float16), "wh")
    put("fuzz_onnx", "matmul_fp16_gelu", model(
        [h.make_node("MatMul", ["a", "wh"], ["m"]),
         h.make_node("Div", ["m", "sq"], ["d"]), h.make_node("Erf", ["d"], ["e"]),
         h.make_node("Add", ["e", "one"], ["e1"]), h.make_node("Mul", ["m", "e1"], ["p"]),
         h.make_node("Mul", ["p", "half"], ["y"])],
        [vi("a", [2, 3], TP.FLOAT16)], [vi("y", [2, 4], TP.FLOAT16)],
        [hw, nh.from_array(np.array(1.4142135, np.float16), "sq"), nh.from_array(np.array(1, np.float16), "one"),
         nh.from_array(np.array(0.5, np.float16), "half")]))
    put("fuzz_onnx", "clip_constant_inputs", model(
        [h.make_node("Constant", [], ["lo"], value=nh.from_array(np.array(0, np.float32))),
         h.make_node("Constant", [], ["hi"], value_float=6.0),
         h.make_node("Clip", ["x", "lo", "hi"], ["y"])],
        [x], [vi("y", None)]))
    put("fuzz_onnx", "pool_flatten", model(
        [h.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2], ceil_mode=1),
         h.make_node("AveragePool", ["p"], ["q"], kernel_shape=[2, 2], count_include_pad=1, pads=[1, 1, 1, 1]),
         h.make_node("GlobalAveragePool", ["q"], ["g"]), h.make_node("Flatten", ["g"], ["y"], axis=1)],
        [x], [vi("y", None)]))
    put("fuzz_onnx", "reshape_unsqueeze", model(
        [h.make_node("Reshape", ["a", "shp"], ["r"]), h.make_node("Unsqueeze", ["r", "ax"], ["u"]),
         h.make_node("Squeeze", ["u", "ax"], ["s"]), h.make_node("HardSwish", ["s"], ["y"])],
        [vi("a", [2, 3, 2])], [vi("y", None)],
        [nh.from_array(np.array([2, 6], np.int64), "shp"), nh.from_array(np.array([0], np.int64), "ax")]))
    put("fuzz_onnx", "prelu_leaky_opset11", model(
        [h.make_node("PRelu", ["x", "sl"], ["p"]), h.make_node("LeakyRelu", ["p"], ["y"], alpha=0.2)],
        [x], [vi("y", None)], [nh.from_array(np.array([[[0.1]], [[0.2]]], np.float32), "sl")], opset=11))
    ext = onnx.TensorProto()
    ext.name, ext.data_type = "we", TP.FLOAT
    ext.dims.extend([4])
    ext.data_location = TP.EXTERNAL
    for k, v in (("location", "data.bin"), ("offset", "16"), ("length", "16")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    put("fuzz_onnx", "external_data", model(
        [h.make_node("Add", ["a", "we"], ["y"])], [vi("a", [4])], [vi("y", [4])], [ext]))
    ext.external_data[0].value = "../outside.bin"
    put("fuzz_onnx", "external_data_outside", model(
        [h.make_node("Add", ["a", "we"], ["y"])], [vi("a", [4])], [vi("y", [4])], [ext]))
    put("fuzz_onnx", "unsupported_ops", model(
        [h.make_node("Softmax", ["x"], ["s"], name="sm"), h.make_node("TopK", ["s", "k"], ["y", "i"], name="tk")],
        [x], [vi("y", None)], [nh.from_array(np.array([1], np.int64), "k")]))
    put("fuzz_onnx", "conv_asymmetric_pads", model(
        [h.make_node("Conv", ["x", "wg"], ["y"], pads=[0, 1, 1, 2])],
        [x], [vi("y", None)], [nh.from_array(np.ones((2, 2, 2, 2), np.float32), "wg")]))
    put("fuzz_onnx", "empty", b"")


if __name__ == "__main__":
    npy_seeds()
    safetensors_seeds()
    onnx_seeds()
    for t in ("fuzz_npy", "fuzz_safetensors", "fuzz_onnx"):
        d = os.path.join(ROOT, t)
        print("%s: %d seeds, largest %d bytes" % (t, len(os.listdir(d)),
                                                 max(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))))
