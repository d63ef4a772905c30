import torch
import torch.nn as
from . import
class Broken(nn.Module:
    def __init__(self
        super().__init__()
        self.fc = nn.Linear(3, 4
    def forward(self, x):
        return self.fc(x)).cuda(]
def f(:
  return torch.cdist(x, ,)
    x = 1
  y = 2
if True
    torch.cuda.synchronize(
"""unterminated
