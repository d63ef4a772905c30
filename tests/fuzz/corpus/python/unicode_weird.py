# -*- coding: utf-8 -*-
import torch as тorch
import torch.nn as ニューラル
from torch.nn import functional as Ф

π = 3.14159
ñame_𝔡 = "emoji 🚀🔥 and RTL \u202e text ‮ and zero‍width"
données = тorch.tensor([π, 2 * π]).cuda()


class Módulo(ニューラル.Module):
    def __init__(self):
        super().__init__()
        self.线性 = ニューラル.Linear(2, 2)

    def forward(self, 入力):
        return Ф.relu(self.线性(入力)).to(f"cuda:{0}")


s = rb'\x00\xff' + b"\N{BULLET}"
t = f"{données!r:>{10}} {'nested' + f'{π:.2f}'}"
u = "tab\there\ttoo"; v = '''multi
line''' ; w = \
    1
