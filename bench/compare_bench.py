"""Benchmark of `portkit compare` beside a numpy implementation of the same metrics.

Generates a reference/target dump pair (fp32, `--gb` GB in all, default 2), times
`portkit compare` (all cores, then one thread) and two numpy scripts computing the same metrics in
float64 like ours: the fair one (`numpy_fair`: whole-tensor calls, shared intermediates computed
once, as a user would write it) that the ratios are against, and the earlier one for reference (cosine, euclidean, max abs/rel error, the two error ratios, RMSE, mean abs/rel error,
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


def numpy_fair(ref, tgt, count):
    """The same metrics as a user would write them with numpy, one tensor pair at a time: each
    array converted to float64 once, every metric one whole-tensor call, shared intermediates
    (difference, absolute values, dot products) computed once, the fp32 ULP from np.spacing of the
    fp32 reference. No Python loop over elements, no redundant passes."""
    for i in range(count):
        name = "op_%06d.safetensors" % i
        b32 = safetensors_io.read(os.path.join(ref, name))["output.0"]
        n32 = safetensors_io.read(os.path.join(tgt, name))["output.0"]
        b, n = b32.astype(np.float64), n32.astype(np.float64)
        size = b.size
        d = n - b
        ad, ab, an = np.abs(d), np.abs(b), np.abs(n)
        rel = ad / np.maximum(ab, 1e-10)
        nn, bb, nb, dd = n @ n, b @ b, n @ b, d @ d
        sa, sn = ab.sum(), an.sum()
        kl = np.dot(ab, np.log((ab + 1e-10) / (an + 1e-10))) / sa - np.log(sa) + np.log(sn)
        ulp = np.spacing(np.abs(b32)).astype(np.float64)
        small = ab < 2.0 ** -20
        _ = (nb / math.sqrt(nn * bb), math.sqrt(dd), ad.max(), rel.max(), np.count_nonzero(rel < 0.001) / size,
             np.count_nonzero(rel < 0.005) / size, math.sqrt(dd / size), ad.mean(), rel.mean(), kl,
             (ad / ulp).max(), np.count_nonzero(small & (ad > 2.0 ** -30)) / max(1, np.count_nonzero(small)),
             n.max(), n.min(), n.sum() / size, math.sqrt(nn), b.max(), b.min(), b.sum() / size, math.sqrt(bb))


def cpu_seconds(fn, *args):
    """(wall seconds, CPU seconds of this process) of fn(*args)."""
    start, cpu = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - start, time.process_time() - cpu


def time_portkit(binary, ref, tgt, out, jobs):
    """(seconds, peak RSS in MB, CPU seconds) of one `portkit compare` run."""
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
    return secs, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime


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
        ours, rss, ours_cpu = time_portkit(args.portkit, ref, tgt, os.path.join(work, "out"), 0)
        ours_1, rss_1, ours_1_cpu = time_portkit(args.portkit, ref, tgt, os.path.join(work, "out1"), 1)
        numpy_secs, numpy_cpu = cpu_seconds(numpy_compare, ref, tgt, count)
        fair_secs, fair_cpu = cpu_seconds(numpy_fair, ref, tgt, count)
        print("compare benchmark: %d tensor pairs, %.2f GB read in all (fp32), %d cores, load %s" % (
            count, total / 1e9, cores, " ".join("%.2f" % v for v in os.getloadavg())))
        print("GB/s per core = bytes / CPU seconds (user + system); ratios are the fair numpy script's time / this")
        print("| %-34s | %8s | %14s | %15s | %14s | %13s |" % (
            "what", "GB/s", "GB/s per core", "fair numpy wall", "fair numpy CPU", "peak RSS (MB)"))
        rows = [("portkit compare, %d threads" % cores, ours, ours_cpu, "%.0f" % rss),
                ("portkit compare, 1 thread", ours_1, ours_1_cpu, "%.0f" % rss_1),
                ("numpy, fair (whole-tensor calls)", fair_secs, fair_cpu, ""),
                ("numpy, earlier script", numpy_secs, numpy_cpu, "")]
        for what, wall, cpu, mem in rows:
            print("| %-34s | %8.2f | %14.2f | %15.2f | %14.2f | %13s |" % (
                what, total / 1e9 / wall, total / 1e9 / cpu, fair_secs / wall, fair_cpu / cpu, mem))
        print("\ngoals: >= 10x the fair numpy script, >= 2 GB/s per core")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
