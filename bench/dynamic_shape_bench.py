"""Step-time overhead of the dynamic-shape detector: the same small training loop, plain and
wrapped in DETECTOR.start(...), measured in one run (interleaved rounds, median step time).

Run: /usr/bin/python3 bench/dynamic_shape_bench.py   (needs torch; Debian's python3-torch works)
"""
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from portkit.dynamic_shape.hook import DynamicShapeDetector  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 4)
        x = x.flatten(1)
        return self.fc2(torch.relu(self.fc1(x)))


def batches(n, size):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(size, 3, 32, 32, generator=g), torch.randint(0, 10, (size,), generator=g))
            for _ in range(n)]


def train(model, opt, data, wrap):
    times = []
    it = wrap(data) if wrap else data
    for x, y in it:
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    steps, rounds = 30, 5
    report_dir = tempfile.mkdtemp()
    results = {}
    for batch in (2, 32):
        data = batches(steps, batch)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        train(model, opt, data[:5], None)  # warm-up
        plain, instr = [], []
        for _ in range(rounds):
            plain += train(model, opt, data, None)
            det = DynamicShapeDetector({"copy_root": HERE, "display_root": "bench", "report_dir": report_dir})
            instr += train(model, opt, data, det.start)
        results[batch] = (statistics.median(plain), statistics.median(instr))
    print("dynamic-shape detector overhead (small CNN, CPU, 1 thread, median step time)")
    print("%-12s | %14s | %14s | %s" % ("batch", "plain (ms)", "detector (ms)", "ratio detector/plain"))
    for batch, (p, i) in results.items():
        print("%-12s | %14.3f | %14.3f | %.2f" % (batch, p * 1e3, i * 1e3, i / p))


if __name__ == "__main__":
    main()
