"""ResNet-18 for 32x32 inputs with a prototype (distance based) head."""
import torch
import torch.nn as nn
from torch.nn import functional as F

from .layers import ConvBNAct, Mish, _init_weights


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1, activation=Mish):
        super().__init__()
        self.conv1 = ConvBNAct(in_planes, planes, 3, stride, activation)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.act = activation()
        self.shortcut = nn.Identity()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )

    def forward(self, x):
        out = self.conv1(x)
        out = self.bn2(self.conv2(out))
        return self.act(out + self.shortcut(x))


class PrototypeHead(nn.Module):
    """Classifies by negative distance to learned class prototypes."""

    def __init__(self, dim, num_classes, momentum=0.1):
        super().__init__()
        self.prototypes = nn.Parameter(torch.randn(num_classes, dim) * 0.02)
        self.mix = nn.Parameter(torch.eye(dim).unsqueeze(0))
        self.bias = nn.Parameter(torch.zeros(1, 1, dim))
        self.register_buffer("running_mean", torch.zeros(dim))
        self.register_buffer("running_var", torch.ones(dim))
        self.momentum = momentum

    def forward(self, x):
        # x: (N, dim)
        if self.training:
            var, mean = torch.var_mean(x.detach(), dim=0, unbiased=False)
            self.running_mean.mul_(1 - self.momentum).add_(mean, alpha=self.momentum)
            self.running_var.mul_(1 - self.momentum).add_(var, alpha=self.momentum)
        x = (x - self.running_mean) / (self.running_var + 1e-5).sqrt()
        x = torch.baddbmm(self.bias, x.unsqueeze(1), self.mix.expand(x.size(0), -1, -1)).squeeze(1)
        dist = torch.cdist(x, self.prototypes, p=2.0)
        return -dist


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10, activation=Mish):
        super().__init__()
        self.in_planes = 64
        self.stem = ConvBNAct(3, 64, 3, 1, activation)
        self.layer1 = self._make_layer(block, 64, num_blocks[0], 1, activation)
        self.layer2 = self._make_layer(block, 128, num_blocks[1], 2, activation)
        self.layer3 = self._make_layer(block, 256, num_blocks[2], 2, activation)
        self.layer4 = self._make_layer(block, 512, num_blocks[3], 2, activation)
        self.proj = nn.Parameter(torch.empty(512, 256))
        nn.init.xavier_uniform_(self.proj)
        self.head = PrototypeHead(256, num_classes)
        self.apply(_init_weights)

    def _make_layer(self, block, planes, n, stride, activation):
        layers = []
        for s in [stride] + [1] * (n - 1):
            layers.append(block(self.in_planes, planes, s, activation))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        x = torch.matmul(x, self.proj)
        std, _ = torch.std_mean(x, dim=1, keepdim=True)
        x = x / (std + 1e-6)
        return self.head(x)


def ResNet18(num_classes=10, activation=Mish):
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes, activation)
