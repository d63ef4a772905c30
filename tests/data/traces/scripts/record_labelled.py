"""Records the labelled advisor traces: small models profiled for 4 steps with record_shapes.
usage: python record_labelled.py OUT_DIR"""
import gzip, json, os, sys
import torch, torch.nn as nn
from torch.profiler import profile, ProfilerActivity, schedule

torch.manual_seed(0)
torch.set_num_threads(1)


class Block(nn.Module):
    def __init__(self, c, act):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.act = act()

    def forward(self, x):
        return self.act(x + self.bn2(self.conv2(self.act(self.bn1(self.conv1(x))))))


def cnn(act):
    layers = [nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), act(), Block(8, act)]
    for cin, cout in [(8, 12), (12, 16), (16, 20), (20, 24)]:  # stages of a ResNet: one shape each
        layers += [nn.Conv2d(cin, cout, 3, stride=2 if cout <= 16 else 1, padding=1), act(), Block(cout, act)]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, 10))


class SeqModel(nn.Module):
    """A token model fed batches of different lengths (genuinely dynamic shapes)."""
    def __init__(self):
        super().__init__()
        self.emb, self.fc1, self.fc2 = nn.Embedding(50, 16), nn.Linear(16, 32), nn.Linear(32, 10)

    def forward(self, tokens):
        return self.fc2(torch.relu(self.fc1(self.emb(tokens)))).mean(dim=1)


def run(name, model, batches, out):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    path = os.path.join(out, name + ".json")
    # Steps 1..N of the batches are recorded (ProfilerStep#1..N); the first batch is the warm-up.
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=len(batches) - 1),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for x, y in batches:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            prof.step()
    with open(path, "rb") as f, gzip.GzipFile(path + ".gz", "wb", mtime=0) as g:
        g.write(f.read())
    os.remove(path)


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    steps = 5  # ProfilerStep#0..4
    img = [(torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))) for _ in range(steps)]
    run("static_resnet_relu", cnn(nn.ReLU), img, out)
    run("static_resnet_silu", cnn(nn.SiLU), img, out)
    run("static_resnet_hardswish", cnn(nn.Hardswish), img, out)
    run("static_resnet_mish", cnn(nn.Mish), img, out)
    run("static_resnet_gelu", cnn(nn.GELU), img, out)
    lengths = [7, 12, 9, 15, 11]
    seq = [(torch.randint(0, 50, (2, n)), torch.randint(0, 10, (2,))) for n in lengths]
    run("dynamic_seq_len_relu", SeqModel(), seq, out)
    fixed = [(torch.randint(0, 50, (2, 10)), torch.randint(0, 10, (2,))) for _ in range(steps)]
    run("static_seq_relu", SeqModel(), fixed, out)
