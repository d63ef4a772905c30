"""What tuning a ResNet-50 costs with the default time budget: ``portkit.tune.optimize`` on
torchvision's resnet50 (random weights, batch 1, 224x224) twice with the same fresh bank. Prints
each run's wall time and CPU time (this process and its children), the phases, the plans (the
second run must reproduce the first from the bank) and the load average before and after.
Targets: first run <= 3 min, second <= 10 s, same plan.

    PYTHONPATH=python python bench/tune_resnet50_cost.py [--batch 1] [--size 224] [--time-budget S]
"""
import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import torch  # noqa: E402

import portkit.tune as pt  # noqa: E402
from portkit.tune import sgat  # noqa: E402


def _cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--time-budget", type=float, default=sgat.DEFAULT_TIME_BUDGET_S)
    args = ap.parse_args()
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    inputs = (torch.randn(args.batch, 3, args.size, args.size),)
    threads = torch.get_num_threads()
    print("torch %s, %d cores, %d threads, budget %.0f s, input %s, load average %s" % (
        torch.__version__, os.cpu_count(), threads, args.time_budget, "x".join(map(str, inputs[0].shape)),
        " ".join("%.1f" % x for x in os.getloadavg())), flush=True)
    plans = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in (1, 2):
            torch.set_num_threads(threads)
            t0, c0 = time.time(), _cpu()
            _, report = pt.optimize(model, inputs, bank=os.path.join(tmp, "bank"),
                                    output=os.path.join(tmp, "out%d" % run), time_budget=args.time_budget,
                                    progress=False)
            wall, cpu = time.time() - t0, _cpu() - c0
            plans.append(report["plan"])
            print("run %d: wall %.1f s, CPU %.1f s, tuned %s, plan %s@%dt, speed-up x%.2f, bank %s, phases %s, "
                  "not tuned for time %s, load average %s" % (
                      run, wall, cpu, report["tuned"], report["plan"]["strategy"], report["plan"]["threads"],
                      report["speedup"] or 0, json.dumps(report["repo_summary"]), report["cost"]["phases_s"],
                      report["cost"]["not_tuned_for_time"], " ".join("%.1f" % x for x in os.getloadavg())),
                  flush=True)
    print("same plan: %s" % (plans[0] == plans[1]))


if __name__ == "__main__":
    main()
