"""Small building blocks shared by the models."""
import torch
import torch.nn as nn
from torch.nn import functional as F

__all__ = ["Mish", "ConvBNAct", "move_to_gpu"]


class Mish(nn.Module):
    """Mish activation: x * tanh(softplus(x))."""

    def forward(self, x):
        return x * torch.tanh(F.softplus(x))


class ConvBNAct(nn.Sequential):
    def __init__(self, in_ch, out_ch, kernel_size=3, stride=1, activation=Mish):
        super().__init__(
            nn.Conv2d(in_ch, out_ch, kernel_size, stride=stride, padding=kernel_size // 2, bias=False),
            nn.BatchNorm2d(out_ch),
            activation(),
        )


def move_to_gpu(p):
    # `p` is not annotated: an analyser cannot tell whether it is a Tensor or a Module.
    return p.cuda()


def _init_weights(module):
    if isinstance(module, nn.Conv2d):
        nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
    elif isinstance(module, nn.BatchNorm2d):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
