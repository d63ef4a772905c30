"""A small real model for `portkit tune`: a LeNet-style CNN with a two-layer MLP head.

    cd examples/tune && PYTHONPATH=../../python /usr/bin/python3 -m portkit.export_ops \
        --model tiny_cnn:make --input 8x3x32x32 -o tiny_cnn_ops.json
    build/portkit tune --job-type=2 --model=examples/tune/tiny_cnn_ops.json --output out
"""
import torch.nn as nn


class TinyCnn(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.act = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(4)
        self.fc1 = nn.Linear(64 * 4 * 4, 256)
        self.fc2 = nn.Linear(256, classes)

    def forward(self, x):
        x = self.act(self.conv1(x))
        x = self.act(self.conv2(x))
        x = self.act(self.conv3(x))
        x = self.pool(x).flatten(1)
        return self.fc2(self.act(self.fc1(x)))


def make():
    return TinyCnn()
