import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import DataLoader
from . import layers
from ..common.helpers import seed_all as seed


class Net(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.register_buffer("pos", torch.arange(16).float())

    def forward(self, x, mask=None):
        h = self.fc(x).view(x.size(0), -1).permute(1, 0).contiguous()
        h = F.relu(self.norm(h)).masked_fill(mask == 0, float("-inf")) if mask is not None else h
        return torch.cdist(h, h).cuda()


def train(loader: DataLoader, epochs=2):
    model = Net().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler()
    for epoch in range(epochs):
        for x, y in loader:
            with torch.cuda.amp.autocast():
                loss = F.cross_entropy(model(x.cuda()), y.cuda())
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    torch.backends.cudnn.benchmark = True
    return model
