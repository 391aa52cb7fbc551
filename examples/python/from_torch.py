#!/usr/bin/env python3
"""from_torch.py -- PyTorch models compiled by fusegen in one call, each
called at three batch sizes from one compilation, in emulation (CPU
tensors), compared with eager PyTorch.

A torchvision ResNet-18 (random weights, 10 classes, 64x64 images) through
fusegen.torch.compile, and a small Hugging Face BERT encoder (random
weights; its stack of layers, fed hidden states, since the embedding
lookup takes integer ids) through torch.compile(backend="fusegen").

Needs torch, torchvision, transformers, onnx and onnxscript; run from the
repository root after the build:

    PYTHONPATH=python FUSEGEN_LIBRARY=build/libfusegen.so python3 examples/python/from_torch.py
"""
import torch
import torchvision
from transformers import BertConfig, BertModel

import fusegen.torch  # registers the "fusegen" backend of torch.compile


def rel_l2(y, ref):
    return float((y - ref).norm() / ref.norm())


def main():
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(num_classes=10).eval()
    compiled = fusegen.torch.compile(resnet, (torch.randn(2, 3, 64, 64),))
    with torch.no_grad():
        for batch in (1, 4, 8):
            x = torch.randn(batch, 3, 64, 64)
            print("resnet18 batch %d: rel L2 vs eager %.2e" % (batch, rel_l2(compiled(x), resnet(x))))
    print(compiled.explain())

    cfg = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                     attn_implementation="eager")
    encoder = BertModel(cfg, add_pooling_layer=False).encoder.eval()
    fast = torch.compile(lambda h: encoder(h).last_hidden_state, backend="fusegen")
    with torch.no_grad():
        for batch in (1, 4, 8):
            h = torch.randn(batch, 16, 64)
            print("bert encoder batch %d: rel L2 vs eager %.2e"
                  % (batch, rel_l2(fast(h), encoder(h).last_hidden_state)))
    print(fusegen.torch.explain())


if __name__ == "__main__":
    main()
