"""Three small models for `portkit tune --framework=pytorch` (SGAT): a ResNet-style CNN with
BatchNorm, an MLP and a transformer encoder block. Each factory takes sizes so that the tests can
use small shapes and the benchmark (bench/tune_torch_bench.py) realistic ones.

    build/portkit tune --framework=pytorch --job-type=1 --model=examples.tune.models:make_resnet \
        --input 8x3x64x64 --output out

(run from the repository root, or put examples/tune on PYTHONPATH and use models:make_resnet).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + identity)


class ResNetSmall(nn.Module):
    """ResNet-18-like layout with fewer blocks: stem, three stages of basic blocks, pooled head."""

    def __init__(self, width=32, blocks=(1, 1, 1), classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        layers, cin = [], width
        for i, n in enumerate(blocks):
            cout = width * (2 ** i)
            for j in range(n):
                layers.append(BasicBlock(cin, cout, stride=2 if (j == 0 and i > 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class Mlp(nn.Module):
    def __init__(self, features=256, hidden=512, depth=3, classes=10):
        super().__init__()
        dims = [features] + [hidden] * depth
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        for layer in self.hidden:
            x = F.gelu(layer(x))
        return self.out(x)


class EncoderBlock(nn.Module):
    """A pre-norm transformer encoder block written out (attention, then an MLP), as models do."""

    def __init__(self, dim=128, heads=4, ffn=512):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, ffn)
        self.fc2 = nn.Linear(ffn, dim)

    def forward(self, x):
        b, t, d = x.size(0), x.size(1), x.size(2)
        h = self.heads
        qkv = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // h), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def make_resnet(width=32):
    torch.manual_seed(0)
    return ResNetSmall(width=width).eval()


def make_mlp(features=256, hidden=512):
    torch.manual_seed(0)
    return Mlp(features, hidden).eval()


def make_encoder(dim=128, heads=4, ffn=512):
    torch.manual_seed(0)
    return EncoderBlock(dim, heads, ffn).eval()
