"""Records the noise set of `portkit prof diff` (docs/prof.md, "Noise-aware gate"): CPU profiles
(Kineto JSON via torch.profiler) of a ResNet-18 inference step (the torchvision architecture,
written out here so that no torchvision is needed: torch 1.13 and 2.x alike).

    python record_resnet.py OUT_DIR [--pairs 20] [--slow-runs 8] [--steps 60] [--slow 10,5]

For i < pairs it writes OUT_DIR/a_i and OUT_DIR/b_i (identical runs, one profiler session and one
`*.pt.trace.json` each, back to back in this process). For each percentage P of `--slow` and
i < slow-runs it writes OUT_DIR/s<P>_i: the same step with a real slowdown of P % — one more 3×3
convolution of a 48×48 image, repeated until it costs P % of the step's thread CPU time (CPU time,
not wall time: calibrated the same way under any load). Each trace has ProfilerStep#0 (the
warm-up, left out by `prof diff`) and `--steps` measured steps. OUT_DIR/truth.json gives, per run,
the mean thread CPU time of its steps (what the run really cost, whatever the machine's load) and
the load average before and after it. Nothing is downloaded: random weights, seed 0, one thread.
"""
import argparse
import json
import os
import time

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


def resnet18(num_classes=10):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes)]
    return nn.Sequential(*layers)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--slow-runs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--slow", default="10,5", help="comma-separated slowdowns in percent")
    ap.add_argument("--size", type=int, default=32)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = resnet18().eval()
    extra = nn.Conv2d(3, 32, 3, padding=1).eval()
    extra_x = torch.randn(1, 3, 48, 48)
    x = torch.randn(1, 3, a.size, a.size)

    def run_step(reps):
        with torch.no_grad():
            model(x)
            for _ in range(reps):
                extra(extra_x)

    def cpu_seconds(fn, n):  # thread CPU time: what the work costs, not how busy the machine is
        t0 = time.thread_time()
        for _ in range(n):
            fn()
        return (time.thread_time() - t0) / n

    for _ in range(5):
        run_step(0)
    step_s = min(cpu_seconds(lambda: run_step(0), 20) for _ in range(5))

    def extra_only():
        with torch.no_grad():
            extra(extra_x)

    extra_s = min(cpu_seconds(extra_only, 50) for _ in range(5))
    slows = [float(p) for p in a.slow.split(",") if p]
    reps = {p: max(1, round(step_s * p / 100.0 / max(extra_s, 1e-7))) for p in slows}
    print(f"step {step_s * 1e3:.3f} ms CPU, extra pass {extra_s * 1e3:.3f} ms CPU, passes {reps}", flush=True)
    truth = {"torch": torch.__version__, "step_cpu_ms": step_s * 1e3, "extra_cpu_ms": extra_s * 1e3,
             "passes": {str(p): r for p, r in reps.items()}, "runs": {}}

    def record(folder, n):
        sched = torch.profiler.schedule(wait=0, warmup=1, active=a.steps + 1, repeat=1)
        out = os.path.join(a.out, folder)
        os.makedirs(out, exist_ok=True)
        load0, cpu = loadavg(), []
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                    on_trace_ready=torch.profiler.tensorboard_trace_handler(out)) as prof:
            for i in range(a.steps + 2):
                t0 = time.thread_time()
                run_step(n)
                if i >= 2:
                    cpu.append(time.thread_time() - t0)
                prof.step()
        truth["runs"][folder] = {"cpu_ms": 1e3 * sum(cpu) / len(cpu), "load": [load0, loadavg()], "passes": n}

    for i in range(a.pairs):
        record(f"a_{i}", 0)
        record(f"b_{i}", 0)
        for p in slows:
            if i < a.slow_runs:
                record(f"s{p:g}_{i}", reps[p])
    with open(os.path.join(a.out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
