"""Per-step cost of portkit.torch.dumper against the same step without it, beside msprobe's dumper
(docs/benchmarks.md).

    python3 bench/dumper_overhead.py [--steps N] [--model cnn|transformer|resnet18|resnet50] [--size PX] [--no-msprobe]

A training step (forward, backward) of a model on the CPU (one thread), timed without the dumper,
with stats_only=True (statistics on the tensor's device, nothing copied to the host), with
stats_only=True and checksum=True (crc32 of every tensor: a host copy, like msprobe's md5 mode),
and with a full dump (every tensor written). When mindstudio-probe is importable by this
interpreter, msprobe's own dumper (PrecisionDebugger at level L1, task statistics and task tensor)
runs the same step, each task in a child process of this interpreter (msprobe keeps one debugger per
process and leaves its API wrappers installed): the child times its own plain step the same way.

Each case's steps alternate with plain steps, so a change of the machine's load reaches both; the
median wall time and the median CPU time of the process (time.process_time) of each are printed
with their ratios to the plain step's. A benchmark, not a test: nothing is asserted; timings on a
shared machine are noisy, so the load average is printed before and after.

Models: cnn (3 conv + BatchNorm + ReLU blocks, 16x3x32x32), transformer (one pre-norm encoder
layer, 8x64x256), resnet18 / resnet50 (torchvision, random weights, batch 16, --size square images,
64 by default; torchvision must be importable).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from portkit.torch import dumper  # noqa: E402

BATCH = 16


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0,
                                                      batch_first=True, norm_first=True)

    def forward(self, x):
        return self.layer(x)


def make(model, size):
    torch.manual_seed(0)
    if model == "cnn":
        net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(inplace=True),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.BatchNorm2d(64),
            torch.nn.ReLU(inplace=True), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))
        x = torch.randn(BATCH, 3, 32, 32)
    elif model == "transformer":
        net = Block().train()
        x = torch.randn(8, 64, 256)
    else:
        try:
            import torchvision
        except ImportError:
            sys.exit("--model %s needs torchvision, which %s cannot import" % (model, sys.executable))
        net = getattr(torchvision.models, model)().train()  # random weights: nothing is downloaded
        x = torch.randn(BATCH, 3, size, size)
    return net, x


def step(net, x):
    net.zero_grad(set_to_none=True)
    net(x).float().pow(2).mean().backward()


def _timed(run):
    folder = tempfile.mkdtemp(prefix="pk_dump_")
    w0, c0 = time.perf_counter(), time.process_time()
    run(folder)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    shutil.rmtree(folder, ignore_errors=True)
    if hasattr(run, "cleanup"):
        run.cleanup()
    return wall, cpu


def measure(net, x, cases, steps):
    """{case: [(wall, cpu) per step]}, with a plain step before each step of each case ("no dump")."""
    times = {name: [] for name, _ in cases}
    times["no dump"] = []
    for name, run in cases:
        for _ in range(steps):
            times["no dump"].append(_timed(lambda folder: step(net, x)))
            times[name].append(_timed(lambda folder: run(folder, lambda: step(net, x))))
    return times


def _ours(options):
    def run(folder, one_step):
        with dumper(dump_path=folder, **options):
            one_step()
    return run


def _msprobe_debugger(task, folder):
    """msprobe's PrecisionDebugger for `task` (statistics or tensor) at level L1 (its API dump),
    dumping under `folder`; a function running one step under it."""
    from msprobe.pytorch import PrecisionDebugger
    config = os.path.join(folder, "config.json")
    with open(config, "w") as f:
        json.dump({"task": task, "dump_path": os.path.join(folder, "dump"), "rank": [], "step": [],
                   "level": "L1", task: {"scope": [], "list": [], "data_mode": ["all"]}}, f)
    debugger = PrecisionDebugger(config_path=config)  # one per process (msprobe keeps a single instance)

    def run(dump_folder, one_step):
        debugger.start()
        one_step()
        debugger.stop()
        debugger.step()

    def cleanup():  # untimed: the steps msprobe wrote before the last one
        steps = sorted((int(n[4:]), n) for n in os.listdir(os.path.join(folder, "dump")) if n[4:].isdigit())
        for _, name in steps[:-1]:
            shutil.rmtree(os.path.join(folder, "dump", name), ignore_errors=True)
    run.cleanup = cleanup
    return run


def msprobe_child(args):
    """In the child process: times this process's plain step, then msprobe's `args.msprobe_task`
    alternating with plain steps (msprobe's API wrappers stay installed, switched off, between its
    steps); prints {"plain before msprobe": [...], "no dump": [...], "msprobe": [...]} as JSON."""
    torch.set_num_threads(1)
    net, x = make(args.model, args.size)
    for _ in range(2):
        step(net, x)  # warm-up
    plain = [_timed(lambda folder: step(net, x)) for _ in range(args.steps)]  # before msprobe wraps anything
    folder = tempfile.mkdtemp(prefix="pk_msprobe_")
    try:
        run = _msprobe_debugger(args.msprobe_task, folder)
        run(folder, lambda: step(net, x))  # msprobe's first step wraps the APIs: not timed
        times = measure(net, x, [("msprobe", run)], args.steps)
        times["plain before msprobe"] = plain
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("PORTKIT_BENCH " + json.dumps(times))


def msprobe_cases(args):
    """{label: times} of msprobe's statistics and tensor tasks, each in a child process; {} when
    mindstudio-probe is not importable here, with the reason printed."""
    probe = subprocess.run([sys.executable, "-c", "import msprobe.pytorch"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        print("  (msprobe not run: %s cannot import msprobe.pytorch: %s)" % (sys.executable, last))
        return {}
    found = {}
    for task in ("statistics", "tensor"):
        cmd = [sys.executable, os.path.abspath(__file__), "--msprobe-task", task, "--model", args.model,
               "--size", str(args.size), "--steps", str(args.steps)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        line = next((ln for ln in res.stdout.splitlines() if ln.startswith("PORTKIT_BENCH ")), None)
        if res.returncode != 0 or line is None:
            print("  (msprobe %s failed: %s)" % (task, (res.stderr.strip().splitlines() or ["?"])[-1]))
            continue
        found["msprobe %s (L1)" % task] = json.loads(line[len("PORTKIT_BENCH "):])
    return found


def _medians(samples):
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--model", choices=("cnn", "transformer", "resnet18", "resnet50"), default="cnn")
    ap.add_argument("--size", type=int, default=64, help="image side of the resnet models (default 64)")
    ap.add_argument("--no-msprobe", action="store_true", help="portkit's cases only")
    ap.add_argument("--msprobe-task", choices=("statistics", "tensor"), help=argparse.SUPPRESS)  # the child
    args = ap.parse_args()
    if args.msprobe_task:
        return msprobe_child(args)
    torch.set_num_threads(1)
    net, x = make(args.model, args.size)
    for _ in range(2):
        step(net, x)  # warm-up
    load = " ".join("%.2f" % v for v in os.getloadavg())
    cases = [("stats_only", _ours({"stats_only": True})),
             ("stats_only + checksum", _ours({"stats_only": True, "checksum": True})),
             ("full dump", _ours({}))]
    ours = measure(net, x, cases, args.steps)
    print("torch %s, model %s%s, 1 thread, median of %d steps, each after a plain step; load before %s" % (
        torch.__version__, args.model, " %dx3x%dx%d" % (BATCH, args.size, args.size) if "resnet" in args.model else "",
        args.steps, load))
    print("  %-26s %10s %10s   %s" % ("", "wall", "CPU", "ratio to the plain step (wall, CPU)"))
    base = _medians(ours["no dump"])
    for name in ["no dump"] + [n for n, _ in cases]:
        wall, cpu = _medians(ours[name])
        print("  %-26s %8.1f ms %8.1f ms   %5.2fx %5.2fx" % (name, 1000 * wall, 1000 * cpu, wall / base[0],
                                                            cpu / base[1]))
    for name, times in ({} if args.no_msprobe else msprobe_cases(args)).items():
        # Against its own process's plain step, taken before msprobe wrapped torch's APIs; the plain
        # steps between its steps (wrappers installed, switched off) are printed beside.
        own, idle = _medians(times["plain before msprobe"]), _medians(times["no dump"])
        wall, cpu = _medians(times["msprobe"])
        print("  %-26s %8.1f ms %8.1f ms   %5.2fx %5.2fx   (its process: plain %.1f ms, %.1f ms CPU; "
              "plain with its wrappers idle %.1f ms, %.1f ms CPU)" % (
                  name, 1000 * wall, 1000 * cpu, wall / own[0], cpu / own[1], 1000 * own[0], 1000 * own[1],
                  1000 * idle[0], 1000 * idle[1]))
    print("  load after %s" % " ".join("%.2f" % v for v in os.getloadavg()))


if __name__ == "__main__":
    main()
