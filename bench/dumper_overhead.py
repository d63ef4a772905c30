"""Per-step cost of portkit.torch.dumper against the same step without it (docs/benchmarks.md).

    python3 bench/dumper_overhead.py [--steps N] [--model cnn|transformer]

A training step (forward, backward) of a small model on the CPU, timed without the dumper, with
stats_only=True (statistics on the tensor's device, nothing copied to the host), with
stats_only=True and checksum=True (crc32 of every tensor: a host copy, like msprobe's md5 mode),
and with a full dump (every tensor written); with mindstudio-probe importable (torch 2), also msprobe's
own statistics dump (PrecisionDebugger, task statistics, level L1) of the same step. Prints the median step time of each and its ratio to
the plain step. A benchmark, not a test: nothing is asserted; timings on a shared machine are noisy,
so the load average is printed with them.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from portkit.torch import dumper  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0,
                                                      batch_first=True, norm_first=True)

    def forward(self, x):
        return self.layer(x)


def make(model):
    torch.manual_seed(0)
    if model == "cnn":
        net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(inplace=True),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.BatchNorm2d(64),
            torch.nn.ReLU(inplace=True), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))
        x = torch.randn(16, 3, 32, 32)
    else:
        net = Block().train()
        x = torch.randn(8, 64, 256)
    return net, x


def step(net, x):
    net.zero_grad(set_to_none=True)
    net(x).float().pow(2).mean().backward()


def timed(net, x, steps, options):
    times = []
    for _ in range(steps):
        folder = tempfile.mkdtemp(prefix="pk_dump_")
        t0 = time.perf_counter()
        if options is None:
            step(net, x)
        elif callable(options):  # msprobe: its debugger around the same step
            options(lambda: step(net, x))
        else:
            with dumper(dump_path=folder, **options):
                step(net, x)
        times.append(time.perf_counter() - t0)
        shutil.rmtree(folder, ignore_errors=True)
    return statistics.median(times)


def _msprobe_case(folder):
    """msprobe's PrecisionDebugger in statistics mode at level L1 (its API dump), when mindstudio-probe
    is importable (it needs torch 2): a function running one step under it; None otherwise."""
    try:
        from msprobe.pytorch import PrecisionDebugger
    except Exception:  # noqa: BLE001  (not installed, or not for this torch)
        return None
    import json
    config = os.path.join(folder, "config.json")
    with open(config, "w") as f:
        json.dump({"task": "statistics", "dump_path": os.path.join(folder, "dump"), "rank": [], "step": [],
                   "level": "L1", "statistics": {"scope": [], "list": [], "data_mode": ["all"]}}, f)
    debugger = PrecisionDebugger(config_path=config)  # one per process (msprobe keeps a single instance)

    def run(one_step):
        debugger.start()
        one_step()
        debugger.stop()
        debugger.step()
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--model", choices=("cnn", "transformer"), default="cnn")
    args = ap.parse_args()
    torch.set_num_threads(1)
    net, x = make(args.model)
    for _ in range(2):
        step(net, x)  # warm-up
    cases = [("no dump", None), ("stats_only", {"stats_only": True}),
             ("stats_only + checksum", {"stats_only": True, "checksum": True}), ("full dump", {})]
    msprobe = _msprobe_case(tempfile.mkdtemp(prefix="pk_msprobe_"))
    if msprobe:
        cases.insert(2, ("msprobe statistics (L1)", msprobe))
    print("torch %s, model %s, 1 thread, median of %d steps, load %s" % (
        torch.__version__, args.model, args.steps, " ".join("%.2f" % v for v in os.getloadavg())))
    base = None
    for name, options in cases:
        t = timed(net, x, args.steps, options)
        base = base or t
        print("  %-22s %8.1f ms  %5.1fx" % (name, 1000 * t, t / base))


if __name__ == "__main__":
    main()
