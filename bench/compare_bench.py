"""Benchmark of `portkit compare` beside a numpy implementation of the same metrics.

Generates a reference/target dump pair (fp32, `--gb` GB in all, default 2), times
`portkit compare` (all cores, then one thread) and numpy computing the same metrics in float64
like ours (cosine, euclidean, max abs/rel error, the two error ratios, RMSE, mean abs/rel error,
KL divergence, max ULP error, small-value error ratio, and the four statistics per side), and
prints GB/s (bytes of both dumps read) and the ratios, all measured in this one run. The dumps are
in the page cache for every contender (numpy reads them after portkit did).
Run: /usr/bin/python3 bench/compare_bench.py [--gb 2]
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from portkit import safetensors_io  # noqa: E402


def make_dump(path, tensors, noise, seed):
    os.makedirs(path)
    rng = np.random.default_rng(seed)
    with open(os.path.join(path, "manifest.jsonl"), "w") as manifest:
        for i, n in enumerate(tensors):
            base = np.random.default_rng(i).standard_normal(n, dtype=np.float32)
            data = base + noise * rng.standard_normal(n, dtype=np.float32) if noise else base
            name = "op_%06d.safetensors" % i
            safetensors_io.write(os.path.join(path, name), [("output.0", "F32", (n,), data.tobytes())])
            manifest.write(json.dumps({"index": i, "name": "aten::op%d" % (i % 7), "kind": "op", "phase": "forward",
                                       "module": "", "stack": "", "overflow": False, "file": name,
                                       "tensors": [{"key": "output.0", "dtype": "F32", "shape": [n]}]}) + "\n")


def numpy_compare(ref, tgt, count):
    for i in range(count):
        name = "op_%06d.safetensors" % i
        b = safetensors_io.read(os.path.join(ref, name))["output.0"].astype(np.float64)
        n = safetensors_io.read(os.path.join(tgt, name))["output.0"].astype(np.float64)
        d = np.abs(n - b)
        rel = d / np.maximum(np.abs(b), 1e-10)
        an, ab = np.abs(n), np.abs(b)
        kl = np.sum(ab * np.log((ab + 1e-10) / (an + 1e-10))) / ab.sum() - np.log(ab.sum()) + np.log(an.sum())
        _, e = np.frexp(b)
        ulp = np.ldexp(1.0, np.maximum(e - 1 - 23, -149))
        small = ab < 2.0 ** -20
        _ = (n @ b / (np.linalg.norm(n) * np.linalg.norm(b)), np.linalg.norm(d), d.max(), rel.max(),
             np.mean(rel < 0.001), np.mean(rel < 0.005), np.sqrt(np.mean(d * d)), d.mean(), rel.mean(), kl,
             (d / ulp).max(), np.sum(small & (d > 2.0 ** -30)) / max(1, np.sum(small)),
             n.max(), n.min(), n.mean(), np.linalg.norm(n), b.max(), b.min(), b.mean(), np.linalg.norm(b))


def time_portkit(binary, ref, tgt, out, jobs):
    """(seconds, peak RSS in MB) of one `portkit compare` run."""
    cmd = [binary, "compare", ref, tgt, "-o", out] + (["-j", str(jobs)] if jobs else [])
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        secs = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            sys.exit("portkit compare failed: " + err.read().decode(errors="replace"))
    return secs, usage.ru_maxrss / 1024.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=2.0)
    parser.add_argument("--portkit", default=os.path.join(HERE, "..", "build", "portkit"))
    args = parser.parse_args()
    per_tensor = 16 * 1024 * 1024  # 64 MB of fp32
    count = max(1, math.ceil(args.gb * 1e9 / 2 / (per_tensor * 4)))  # at least --gb in all
    work = tempfile.mkdtemp(prefix="portkit_compare_bench_")
    try:
        ref, tgt = os.path.join(work, "ref"), os.path.join(work, "tgt")
        make_dump(ref, [per_tensor] * count, 0.0, 1)
        make_dump(tgt, [per_tensor] * count, 1e-3, 2)
        total = 2 * count * per_tensor * 4
        cores = os.cpu_count() or 1
        time_portkit(args.portkit, ref, tgt, os.path.join(work, "warm"), 0)  # pages into the cache
        ours, rss = time_portkit(args.portkit, ref, tgt, os.path.join(work, "out"), 0)
        ours_1, rss_1 = time_portkit(args.portkit, ref, tgt, os.path.join(work, "out1"), 1)
        start = time.perf_counter()
        numpy_compare(ref, tgt, count)
        numpy_secs = time.perf_counter() - start
        print("compare benchmark: %d tensor pairs, %.2f GB read in all (fp32), %d cores, load %s" % (
            count, total / 1e9, cores, " ".join("%.2f" % v for v in os.getloadavg())))
        print("| %-32s | %8s | %17s | %13s |" % ("what", "GB/s", "numpy time / this", "peak RSS (MB)"))
        print("| %-32s | %8.2f | %17.2f | %13.0f |" % ("portkit compare, %d threads" % cores, total / 1e9 / ours,
                                                     numpy_secs / ours, rss))
        print("| %-32s | %8.2f | %17.2f | %13.0f |" % ("portkit compare, 1 thread", total / 1e9 / ours_1,
                                                     numpy_secs / ours_1, rss_1))
        print("| %-32s | %8.2f | %17.2f | %13s |" % ("numpy, same metrics (1 thread)", total / 1e9 / numpy_secs, 1.0,
                                                   ""))
        print("\ngoals: >= 10x numpy (all cores), >= 1 GB/s per core (1 thread row)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
