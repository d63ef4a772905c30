#!/usr/bin/env python3
"""`portkit prof cluster` cost per rank, beside Holistic Trace Analysis on the same folder.

Builds clusters of N ranks from the real sampled pair in tests/data/traces/kineto (rank 0 and
rank 1 of a 128-rank job; copy k of the pair becomes ranks 2k and 2k+1, written gzipped like the
originals, with distributedInfo.rank rewritten), then times (best of --repeat, wall clock):
  - portkit prof cluster --no-timeline (reading + analysis), -j 1 and the default threads
  - portkit prof cluster with the merged timeline
  - HTA: TraceAnalysis(trace_dir) + get_temporal_breakdown + get_comm_comp_overlap, when
    importable (run this script with the Python that has HTA, or set PORTKIT_HTA_PYTHON)
and prints per-rank cost and throughput (uncompressed MB read per second).

usage: bench/cluster_bench.py build/portkit [--ranks 2,16,64] [--repeat 3]
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PAIR = ["timeline_analysis__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz"]

HTA_SNIPPET = r"""
import logging, sys, time
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
a.get_temporal_breakdown(visualize=False)
a.get_comm_comp_overlap(visualize=False)
print(time.perf_counter() - t)
"""


def make_cluster(folder, ranks):
    os.makedirs(folder)
    docs = [json.load(gzip.open(os.path.join(ROOT, "tests/data/traces/kineto", f))) for f in PAIR]
    total = 0
    for r in range(ranks):
        d = docs[r % 2]
        d["distributedInfo"]["rank"] = r
        d["distributedInfo"]["world_size"] = ranks
        text = json.dumps(d).encode()
        total += len(text)
        with gzip.open(os.path.join(folder, f"rank-{r}.json.gz"), "wb", compresslevel=1) as out:
            out.write(text)
    return total


def best(cmd, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("portkit")
    ap.add_argument("--ranks", default="2,16,64")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    hta_python = os.environ.get("PORTKIT_HTA_PYTHON", sys.executable)
    has_hta = subprocess.run([hta_python, "-c", "import hta.trace_analysis"], capture_output=True).returncode == 0
    print("| ranks | MB (uncompressed) | portkit -j1 s | ms/rank | MB/s | portkit -j default s | + timeline s | HTA s | HTA/portkit -j1 |")
    print("|------:|------------------:|--------------:|--------:|-----:|---------------------:|-------------:|------:|----------------:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.ranks.split(",")]:
            d = os.path.join(tmp, f"c{n}")
            mb = make_cluster(d, n) / 1e6
            out = os.path.join(tmp, f"o{n}")
            base = [args.portkit, "prof", "cluster", "-dir", d, "-o", out, "--format", "json"]
            one = best(base + ["--no-timeline", "-j", "1"], args.repeat)
            many = best(base + ["--no-timeline"], args.repeat)
            tl = best(base + ["-j", "1"], args.repeat)
            hta = "-"
            ratio = "-"
            if has_hta and n <= 16:
                h = min(float(subprocess.run([hta_python, "-c", HTA_SNIPPET, d], check=True, capture_output=True,
                                             text=True).stdout.strip().splitlines()[-1]) for _ in range(1))
                hta = f"{h:.2f}"
                ratio = f"{h / one:.1f}x"
            print(f"| {n} | {mb:.1f} | {one:.3f} | {1000 * one / n:.1f} | {mb / one:.0f} | {many:.3f} | {tl:.3f} | {hta} | {ratio} |")
            shutil.rmtree(d)


if __name__ == "__main__":
    main()
