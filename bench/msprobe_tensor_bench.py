"""Benchmark of `portkit compare` on an msprobe tensor-mode dump pair read natively (its .pt files)
beside the way it had to go before: `python -m portkit.msprobe` converting each side to a portkit
dump, then `portkit compare` of the conversions.

Writes two msprobe step/rank folders (dump.json + dump_tensor_data/*.pt written by torch.save):
`--calls` calls of one tiny fp32 input and output each (64 elements: the per-file cost), and one
call whose input and output are fp32 tensors of `--big-mb` MB each (the bandwidth), the target's
output slightly off. Prints the seconds of each path, measured in this one run, and their ratio,
and checks that both paths give the same verdict counts.
Run: /usr/bin/python3 bench/msprobe_tensor_bench.py [--calls 2000] [--big-mb 128] [--portkit build/portkit]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "python")


def record(t, name):
    return {"type": "torch.Tensor", "dtype": str(t.dtype), "shape": list(t.shape), "Max": float(t.max()),
            "Min": float(t.min()), "Mean": float(t.mean()), "Norm": float(t.norm()), "requires_grad": False,
            "data_name": name}


def write_dump(folder, calls, big_mb, noise):
    data_dir = os.path.join(folder, "dump_tensor_data")
    os.makedirs(data_dir)
    data = {}
    g = torch.Generator().manual_seed(0)
    specs = [("Functional.relu.%d.forward" % i, 64) for i in range(calls)]
    specs.append(("Functional.linear.0.forward", big_mb * (1 << 20) // 4))
    for call, n in specs:
        x = torch.randn(n, generator=g)
        y = x.relu()
        if noise and n > 64:
            y = y + noise * torch.randn(n, generator=torch.Generator().manual_seed(1))
        entry = {"input_kwargs": {}}
        for part, role, t in (("input_args", "input", x), ("output", "output", y)):
            name = "%s.%s.0.pt" % (call, role)
            torch.save(t, os.path.join(data_dir, name))
            entry[part] = [record(t, name)]
        data[call] = entry
    with open(os.path.join(folder, "dump.json"), "w") as f:
        json.dump({"task": "tensor", "level": "L1", "framework": "pytorch", "dump_data_dir": data_dir, "data": data}, f)


def timed(cmd, **kw):
    start = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    elapsed = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), res.stdout[-2000:], res.stderr[-2000:]))
    return elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--big-mb", type=int, default=128)
    ap.add_argument("--portkit", default=os.path.join(HERE, "..", "build", "portkit"))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="msprobe_bench_")
    try:
        ref, tgt = os.path.join(tmp, "ref"), os.path.join(tmp, "tgt")
        write_dump(ref, args.calls, args.big_mb, 0)
        write_dump(tgt, args.calls, args.big_mb, 1e-3)
        # Page cache warm for both paths: one untimed native run first.
        timed([args.portkit, "compare", ref, tgt, "-o", os.path.join(tmp, "warm"), "-j", str(args.jobs)])
        native = timed([args.portkit, "compare", ref, tgt, "-o", os.path.join(tmp, "native"), "-j", str(args.jobs)])
        conv = 0.0
        for side in ("ref", "tgt"):
            conv += timed([sys.executable, "-m", "portkit.msprobe", os.path.join(tmp, side),
                           os.path.join(tmp, "conv_" + side)], cwd=PYTHON_DIR)
        converted = timed([args.portkit, "compare", os.path.join(tmp, "conv_ref"), os.path.join(tmp, "conv_tgt"),
                           "-o", os.path.join(tmp, "converted"), "-j", str(args.jobs)])
        verdicts = [json.load(open(os.path.join(tmp, d, "compare_result.json")))["verdicts"]
                    for d in ("native", "converted")]
        assert verdicts[0] == verdicts[1], verdicts
        files = 2 * (2 * args.calls + 2)
        print("msprobe tensor-mode pair: %d calls of 64 fp32 + one call of 2 x %d MB; %d .pt files; torch %s; -j %d"
              % (args.calls, args.big_mb, files, torch.__version__, args.jobs))
        print("| path | seconds | ratio |")
        print("|---|---|---|")
        print("| compare, .pt read natively | %.2f | 1.00 |" % native)
        print("| python -m portkit.msprobe (both sides) | %.2f | %.2f |" % (conv, conv / native))
        print("| compare of the conversions | %.2f | %.2f |" % (converted, converted / native))
        print("| convert + compare | %.2f | %.2f |" % (conv + converted, (conv + converted) / native))
        print("verdicts (same both ways):", verdicts[0])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
