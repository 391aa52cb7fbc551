#!/usr/bin/env python3
"""make_resnet50.py -- writes a ResNet-50 ONNX model in the form PyTorch's
exporter gives after it folds batch norms (Conv with bias, Relu, MaxPool,
Add, GlobalAveragePool, Flatten, Gemm with transB=1), random weights, and an
input .npy.  Used by test_networks.py; also runnable by hand:

    make_resnet50.py OUT_DIR [--size 32] [--dtype fp32|fp16] [--seed 1]
"""
import argparse
import os

import numpy as np
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh


def build(size, dtype, seed):
    rng = np.random.default_rng(seed)
    npdt = np.float16 if dtype == "fp16" else np.float32
    et = TP.FLOAT16 if dtype == "fp16" else TP.FLOAT
    nodes, inits = [], []

    def weight(name, shape, fan_in):
        a = (rng.uniform(-1, 1, shape) * np.sqrt(3.0 / fan_in)).astype(npdt)
        inits.append(nh.from_array(a, name))
        return name

    def conv(x, name, cin, cout, k, stride=1, pad=0):
        w = weight(name + ".weight", (cout, cin, k, k), cin * k * k)
        b = weight(name + ".bias", (cout,), 16)
        nodes.append(h.make_node("Conv", [x, w, b], [name], name=name, kernel_shape=[k, k],
                                 strides=[stride, stride], pads=[pad] * 4))
        return name

    def relu(x, name):
        nodes.append(h.make_node("Relu", [x], [name], name=name))
        return name

    x = relu(conv("input", "conv1", 3, 64, 7, 2, 3), "relu1")
    nodes.append(h.make_node("MaxPool", [x], ["pool1"], name="pool1", kernel_shape=[3, 3], strides=[2, 2],
                             pads=[1, 1, 1, 1]))
    x, cin = "pool1", 64
    for s, (blocks, width) in enumerate([(3, 64), (4, 128), (6, 256), (3, 512)]):
        for b in range(blocks):
            p = "layer%d.%d" % (s + 1, b)
            stride = 2 if b == 0 and s > 0 else 1
            y = relu(conv(x, p + ".conv1", cin, width, 1), p + ".relu1")
            y = relu(conv(y, p + ".conv2", width, width, 3, stride, 1), p + ".relu2")
            y = conv(y, p + ".conv3", width, width * 4, 1)
            short = conv(x, p + ".downsample", cin, width * 4, 1, stride) if b == 0 else x
            nodes.append(h.make_node("Add", [y, short], [p + ".add"], name=p + ".add"))
            x, cin = relu(p + ".add", p + ".relu3"), width * 4
    nodes.append(h.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
    nodes.append(h.make_node("Flatten", ["gap"], ["flat"], name="flat", axis=1))
    fw = weight("fc.weight", (1000, 2048), 2048)
    fb = weight("fc.bias", (1000,), 16)
    nodes.append(h.make_node("Gemm", ["flat", fw, fb], ["output"], name="fc", transB=1))
    graph = h.make_graph(nodes, "resnet50", [h.make_tensor_value_info("input", et, [1, 3, size, size])],
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
    with open(os.path.join(a.out, "resnet50.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    np.save(os.path.join(a.out, "input.npy"), xin)
