"""The Python half of bench/train_speed.sh: ResNet-20 for CIFAR (He et al., zero-padded identity
shortcuts) trained with the same loop as bench/train_speed.cpp, in PyTorch's Python API."""
import argparse
import json
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.stride, self.pad = stride, cout - cin

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)), inplace=True)))
        s = x
        if self.stride != 1 or self.pad:
            s = F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return F.relu(y + s, inplace=True)


class ResNetCifar(nn.Module):
    def __init__(self, depth=20, classes=10):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for stage in range(3):
            cout = 16 << stage
            for b in range(n):
                layers.append(Block(cin, cout, 2 if (b == 0 and stage > 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x)), inplace=True))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = ResNetCifar()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(a.batch, 3, 32, 32)
    y = torch.randint(0, 10, (a.batch,))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    secs = time.perf_counter() - t0
    print(json.dumps({"impl": "pytorch-python", "model": "resnet20_cifar", "batch": a.batch, "threads": a.threads,
                      "steps": a.steps, "images_per_s": a.batch * a.steps / secs,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))


if __name__ == "__main__":
    main()
