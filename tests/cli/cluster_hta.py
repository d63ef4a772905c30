#!/usr/bin/env python3
"""`portkit prof cluster` against Holistic Trace Analysis (HTA) itself on the same real traces.

Per rank: idle, compute and non-compute time (HTA's get_temporal_breakdown), communication time
(the sum of communication kernels, HTA's get_gpu_kernel_breakdown) and the comm/compute overlap
(get_comm_comp_overlap) must agree within 1 %, on two real 2-rank sets, the first again in
PyTorch 1.8-1.9's categories, and a trace without distributedInfo (rank 0 for both). Exits 77 (skipped) when HTA cannot be imported:
the project does not depend on it (install it with `pip install HolisticTraceAnalysis` in a venv
and point PORTKIT_HTA_PYTHON at its python, or run this script with that python).

usage: cluster_hta.py PORTKIT
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SETS = {
    # name: (trace files from tests/data/traces/kineto, one per rank; how each is rewritten)
    "sampled_pair": (["timeline_analysis__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz"], None),
    "trace_diff_pair": (["trace_diff__control__control.json.gz", "trace_diff__test__test.json.gz"], None),
    # The same pair in PyTorch 1.8-1.9's categories (ProfilerStep as cat Operator, Kernel, Runtime).
    "pt19_pair": (["timeline_analysis__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz"], "pt19"),
    # A trace without distributedInfo (HTA and portkit both take it as rank 0).
    "rankless": (["trace_filter__sampled_rank-1.json.gz"], "rankless"),
}
PT19 = {"cpu_op": "Operator", "kernel": "Kernel", "cuda_runtime": "Runtime", "gpu_memcpy": "Memcpy",
        "gpu_memset": "Memset"}


def rewrite(src, dst, how):
    """Copies trace `src` to folder `dst`, rewritten as `how` says."""
    if how is None:
        shutil.copy(src, dst)
        return
    import gzip
    d = json.load(gzip.open(src))
    if how == "pt19":
        for e in d["traceEvents"]:
            if e.get("cat") in PT19:
                e["cat"] = PT19[e["cat"]]
            if str(e.get("name", "")).startswith("ProfilerStep#"):
                e["cat"] = "Operator"
    elif how == "rankless":
        d.pop("distributedInfo", None)
    name = os.path.basename(src).replace("rank-", "r")  # no rank left in the name either
    with gzip.open(os.path.join(dst, name), "wt") as f:
        json.dump(d, f)


def within(ours, theirs, what, failures, tol=0.01):
    ok = abs(ours - theirs) <= tol * max(abs(theirs), 1e-9) or abs(ours - theirs) < 1e-6
    print(f"{'ok  ' if ok else 'FAIL'} {what}: portkit {ours:.3f}, HTA {theirs:.3f}")
    if not ok:
        failures.append(what)


def main():
    portkit = sys.argv[1]
    try:
        from hta.trace_analysis import TraceAnalysis  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        print(f"skipped: HTA is not importable here ({type(e).__name__}: {e})")
        return 77
    import logging

    logging.disable(logging.WARNING)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "traces", "kineto")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (files, how) in SETS.items():
            d = os.path.join(tmp, name)
            os.makedirs(d)
            for f in files:
                rewrite(os.path.join(root, f), d, how)
            out = os.path.join(tmp, name + "_out")
            subprocess.run([portkit, "prof", "cluster", "-dir", d, "-o", out, "--format", "json", "--no-timeline"],
                           check=True, stdout=subprocess.DEVNULL)
            ours = {b["rank"]: b["total"] for b in json.load(open(os.path.join(out, "cluster_report.json")))["temporal_breakdown"]}
            analyzer = TraceAnalysis(trace_dir=d)
            tb = analyzer.get_temporal_breakdown(visualize=False)
            overlap = analyzer.get_comm_comp_overlap(visualize=False)
            _, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)
            for _, row in tb.iterrows():
                rank = int(row["rank"])
                o = ours[rank]
                within(o["idle_us"], row["idle_time(us)"], f"{name} rank {rank} idle", failures)
                within(o["compute_us"], row["compute_time(us)"], f"{name} rank {rank} compute", failures)
                within(o["non_compute_us"], row["non_compute_time(us)"], f"{name} rank {rank} non-compute", failures)
                within(o["window_us"], row["kernel_time(us)"], f"{name} rank {rank} device span", failures)
                comm = kernels[(kernels["rank"] == rank) & (kernels["kernel_type"] == "COMMUNICATION")]["sum (us)"].sum()
                # HTA sums kernel durations; portkit's communication time is their union (equal
                # when a rank's collectives do not overlap each other, as here).
                within(o["communication_us"], float(comm), f"{name} rank {rank} communication", failures)
                pct = float(overlap[overlap["rank"] == rank]["comp_comm_overlap_pctg"].iloc[0])
                within(100 * o["comm_comp_overlap_ratio"], pct, f"{name} rank {rank} overlap %", failures, tol=0.01)
    if failures:
        print(f"{len(failures)} quantities differ from HTA by more than 1 %")
        return 1
    print("all quantities agree with HTA within 1 %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
