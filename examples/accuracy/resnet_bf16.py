"""The accuracy workflow on a BatchNorm ResNet-style model: the same training step in fp32 (the
reference) and under bf16 autocast (the target, as a mixed-precision port runs it), each dumped
with portkit's dumper, then `portkit compare` names the first operator whose bf16 error stands out.

    PYTHONPATH=python python3 examples/accuracy/resnet_bf16.py OUT
    build/portkit compare OUT/ref OUT/bf16 -o OUT/compare --format csv,json,html

Runs on the CPU with torch 1.13 or 2.x (CPU autocast supports bfloat16 in both).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from portkit.torch import dumper


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        return F.relu(out + x, inplace=True)  # residual add, then in-place ReLU


class SmallResNet(nn.Module):
    def __init__(self, classes=10, width=16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(Block(width), Block(width))
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def step(model, x, y, dump_path, bf16):
    """One training step (forward, loss, backward) dumped into `dump_path`."""
    model.zero_grad()
    with dumper(dump_path=dump_path):
        if bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
        else:
            loss = F.cross_entropy(model(x), y)
        loss.backward()
    return float(loss)


def main(out):
    torch.manual_seed(0)
    model = SmallResNet()
    x = torch.randn(4, 3, 16, 16)
    y = torch.randint(0, 10, (4,))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ref_loss = step(model, x, y, os.path.join(out, "ref"), bf16=False)
    model.load_state_dict(state)  # the same BatchNorm running statistics for the second run
    bf16_loss = step(model, x, y, os.path.join(out, "bf16"), bf16=True)
    print("loss fp32 %.6f, bf16 %.6f; dumps in %s/ref and %s/bf16" % (ref_loss, bf16_loss, out, out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: resnet_bf16.py OUT_FOLDER\n")
        sys.exit(2)
    main(sys.argv[1])
