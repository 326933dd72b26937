"""PyTorch's own integer path in the same LibTorch build: the peer of igb's INT8 runtime.

ResNet-20 (CIFAR, option-A shortcuts) and ResNet-18 (ImageNet stem) with the layer shapes of igb's
zoo, random weights and BatchNorm statistics (timing does not depend on them). FP32 is TorchScript
frozen and optimized for inference (conv-BatchNorm folding, MKL-DNN prepacking); INT8 is FX
post-training quantization with the `onednn` engine (activations quint8 per tensor, weights qint8
per channel, calibrated on 4 random batches), scripted and frozen. Prints one JSON object.
"""
import argparse
import copy
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx


def conv_bn(cin, cout, k, stride):
    return [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]


class Block(nn.Module):
    """Basic residual block; option A (subsample and zero-pad channels) or B (1x1 conv) shortcut."""

    def __init__(self, cin, cout, stride, option_a):
        super().__init__()
        self.body1 = nn.Sequential(*conv_bn(cin, cout, 3, stride), nn.ReLU())
        self.body2 = nn.Sequential(*conv_bn(cout, cout, 3, 1))
        self.relu = nn.ReLU()
        self.pad = (cout - cin) // 2 if (stride != 1 or cin != cout) and option_a else 0
        self.down = None
        if (stride != 1 or cin != cout) and not option_a:
            self.down = nn.Sequential(*conv_bn(cin, cout, 1, stride))

    def forward(self, x):
        y = self.body2(self.body1(x))
        if self.down is not None:
            skip = self.down(x)
        elif self.pad:
            skip = F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))
        else:
            skip = x
        return self.relu(y + skip)


def make(name):
    if name == "resnet20_cifar":
        widths, blocks, option_a, classes = (16, 32, 64), 3, True, 10
        stem = nn.Sequential(*conv_bn(3, 16, 3, 1), nn.ReLU())
        cin = 16
    else:
        widths, blocks, option_a, classes = (64, 128, 256, 512), 2, False, 1000
        stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                             nn.MaxPool2d(3, 2, 1))
        cin = 64
    layers = []
    for i, w in enumerate(widths):
        for b in range(blocks):
            layers.append(Block(cin, w, 2 if i > 0 and b == 0 else 1, option_a))
            cin = w
    net = nn.Sequential(stem, *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return net.eval()


def median_ms(f, x, warmup, repeat):
    for _ in range(warmup):
        f(x)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f(x)
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet20_cifar,resnet18")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    torch.backends.quantized.engine = "onednn"
    rows = []
    with torch.no_grad():
        for name in a.models.split(","):
            size = 32 if name == "resnet20_cifar" else 224
            net = make(name)
            example = torch.randn(1, 3, size, size)
            fp32 = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(net)))
            prepared = prepare_fx(copy.deepcopy(net), get_default_qconfig_mapping("onednn"), (example,))
            for _ in range(4):
                prepared(torch.randn(4, 3, size, size))
            int8 = torch.jit.freeze(torch.jit.script(convert_fx(prepared)))
            for batch in (int(b) for b in a.batches.split(",")):
                x = torch.randn(batch, 3, size, size)
                rows.append({"model": name, "batch": batch,
                             "torch_fp32_ms": median_ms(fp32, x, a.warmup, a.repeat),
                             "torch_int8_ms": median_ms(int8, x, a.warmup, a.repeat)})
    print(json.dumps({"bench": "int8_peer", "torch": torch.__version__, "engine": "onednn",
                      "threads": a.threads, "rows": rows}))


if __name__ == "__main__":
    main()
