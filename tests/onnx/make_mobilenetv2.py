#!/usr/bin/env python3
"""make_mobilenetv2.py -- writes a MobileNetV2 (width 1.0, torchvision's
layer list) as an ONNX model in the form PyTorch's exporter gives in eval
mode: batch norms folded into Conv biases, ReLU6 as Clip with min/max
inputs (opset 13), depthwise convolutions as Conv with group = channels,
residual Add, GlobalAveragePool, Flatten and Gemm with transB=1 (Dropout
removed); random weights, and an input .npy.  Used by test_networks.py;
also runnable by hand:

    make_mobilenetv2.py OUT_DIR [--size 32] [--dtype fp32|fp16] [--seed 1]
"""
import argparse
import os

import numpy as np
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

# (expansion t, output channels c, repeats n, first stride s), torchvision's table
SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
            (6, 320, 1, 1)]


def build(size, dtype, seed):
    rng = np.random.default_rng(seed)
    npdt = np.float16 if dtype == "fp16" else np.float32
    et = TP.FLOAT16 if dtype == "fp16" else TP.FLOAT
    nodes, inits = [], []

    def weight(name, shape, fan_in):
        a = (rng.uniform(-1, 1, shape) * np.sqrt(3.0 / fan_in)).astype(npdt)
        inits.append(nh.from_array(a, name))
        return name

    inits.append(nh.from_array(np.array(0, dtype=npdt), "relu6.min"))
    inits.append(nh.from_array(np.array(6, dtype=npdt), "relu6.max"))

    def conv(x, name, cin, cout, k, stride=1, group=1):
        w = weight(name + ".weight", (cout, cin // group, k, k), cin // group * k * k)
        b = weight(name + ".bias", (cout,), 16)
        pad = k // 2
        nodes.append(h.make_node("Conv", [x, w, b], [name], name=name, kernel_shape=[k, k],
                                 strides=[stride, stride], pads=[pad] * 4, group=group))
        return name

    def relu6(x, name):
        nodes.append(h.make_node("Clip", [x, "relu6.min", "relu6.max"], [name], name=name))
        return name

    x, cin = relu6(conv("input", "features.0", 3, 32, 3, 2), "features.0.act"), 32
    i = 1
    for t, c, n, s in SETTINGS:
        for r in range(n):
            p = "features.%d" % i
            stride = s if r == 0 else 1
            hidden = cin * t
            y = x
            if t != 1:
                y = relu6(conv(y, p + ".expand", cin, hidden, 1), p + ".expand.act")
            y = relu6(conv(y, p + ".dw", hidden, hidden, 3, stride, group=hidden), p + ".dw.act")
            y = conv(y, p + ".project", hidden, c, 1)
            if stride == 1 and cin == c:
                nodes.append(h.make_node("Add", [x, y], [p + ".add"], name=p + ".add"))
                y = p + ".add"
            x, cin, i = y, c, i + 1
    x = relu6(conv(x, "features.18", cin, 1280, 1), "features.18.act")
    nodes.append(h.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
    nodes.append(h.make_node("Flatten", ["gap"], ["flat"], name="flat", axis=1))
    fw = weight("classifier.weight", (1000, 1280), 1280)
    fb = weight("classifier.bias", (1000,), 16)
    nodes.append(h.make_node("Gemm", ["flat", fw, fb], ["output"], name="classifier", transB=1))
    graph = h.make_graph(nodes, "mobilenetv2", [h.make_tensor_value_info("input", et, [1, 3, size, size])],
                         [h.make_tensor_value_info("output", et, [1, 1000])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], producer_name="fusegen-tests")
    model.ir_version = 8
    xin = rng.standard_normal((1, 3, size, size)).astype(npdt)
    return model, xin


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    m, xin = build(a.size, a.dtype, a.seed)
    with open(os.path.join(a.out, "mobilenetv2.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    np.save(os.path.join(a.out, "input.npy"), xin)
