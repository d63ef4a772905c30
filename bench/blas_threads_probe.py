"""Does torch.set_num_threads govern the BLAS library's threads? (docs/tune.md, "The BLAS thread count")

    /usr/bin/python3 bench/blas_threads_probe.py          # Debian's torch 1.13 (OpenBLAS)

Prints the BLAS library portkit.tune.blas finds with a pool of its own (None: torch's count
governs BLAS), OpenBLAS's count after each torch.set_num_threads, and the CPU time each OS thread
of the process spends in 15 fp32 1024x1024 matrix products at 1 torch thread, with OpenBLAS at 1
and at 2 threads: work on a thread other than the main one at 1 torch thread is OpenBLAS's own
pool. CPU time per thread is used, not wall time, because on a loaded machine the second core's
share hides a speed-up.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import torch  # noqa: E402

from portkit.tune import blas  # noqa: E402


def ticks():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open("/proc/self/task/%s/stat" % tid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out[int(tid)] = int(fields[11]) + int(fields[12])  # utime + stime, clock ticks
    return out


def main():
    print("torch", torch.__version__, "| separate BLAS pool:", blas.separate_pool())
    if blas.separate_pool() is None:
        return 0
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    for t in (1, 2, 1):
        torch.set_num_threads(t)
        a @ b
        print("torch.set_num_threads(%d): OpenBLAS threads %d" % (t, blas.get_threads()))
    torch.set_num_threads(1)
    main_tid = os.getpid()
    for n in (1, 2):
        blas.set_threads(n)
        a @ b
        t0 = ticks()
        for _ in range(15):
            a @ b
        t1 = ticks()
        per = {("main" if k == main_tid else "thread %d" % k): t1[k] - t0.get(k, 0) for k in t1}
        print("torch 1 thread, OpenBLAS %d: CPU ticks per OS thread %s" % (n, per))
    return 0


if __name__ == "__main__":
    sys.exit(main())
