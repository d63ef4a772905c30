"""Records the real traces of tests/cli/prof_diff_gate.sh into tests/data/traces/diff_gate/:

  base/  same/  again/  busy/  slow/  slow2/  — one CPU profile each (torch.profiler, Kineto JSON, gzipped) of a
  small CNN inference step: ProfilerStep#0 (warm-up) and 60 measured steps, one thread.

`same` and `again` are `base` run again; `busy` is `base` run again while a second process spins on the same
CPU (both pinned to one core: the profiled process is preempted, as on a loaded machine); `slow`
and `slow2` do real extra work: one more 3×3 convolution, repeated until it costs about 12 % of the step's
thread CPU time. The traces are recorded, not generated: running this again gives other timings
(the test asserts the figures of the committed files). Nothing is downloaded.

    python record_diff_gate_traces.py [OUT_DIR]
"""
import gzip
import glob
import multiprocessing
import os
import shutil
import sys
import tempfile
import time

import torch
from torch import nn

STEPS = 60


def spin(stop):
    os.sched_setaffinity(0, {0})
    while not stop.is_set():
        pass


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                              "diff_gate")
    os.sched_setaffinity(0, {0})
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, 10)).eval()
    extra = nn.Conv2d(3, 8, 3, padding=1).eval()
    x, extra_x = torch.randn(1, 3, 64, 64), torch.randn(1, 3, 32, 32)

    def step(reps):
        with torch.no_grad():
            model(x)
            for _ in range(reps):
                extra(extra_x)

    def cpu(fn, n=50):
        t0 = time.thread_time()
        for _ in range(n):
            fn()
        return (time.thread_time() - t0) / n

    for _ in range(10):
        step(1)
    step_s = min(cpu(lambda: step(0)) for _ in range(5))
    extra_s = min(cpu(lambda: extra(extra_x)) for _ in range(5))
    reps = max(1, round(0.12 * step_s / extra_s))
    print(f"step {step_s * 1e3:.3f} ms CPU, extra conv {extra_s * 1e3:.3f} ms CPU: {reps} a step")

    def record(name, reps):
        tmp = tempfile.mkdtemp()
        sched = torch.profiler.schedule(wait=0, warmup=1, active=STEPS + 1, repeat=1)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                    on_trace_ready=torch.profiler.tensorboard_trace_handler(tmp)) as prof:
            for _ in range(STEPS + 2):
                step(reps)
                prof.step()
        (trace,) = glob.glob(os.path.join(tmp, "*.pt.trace.json"))
        os.makedirs(os.path.join(out, name), exist_ok=True)
        with open(trace, "rb") as src, gzip.GzipFile(os.path.join(out, name, "worker.pt.trace.json.gz"), "wb",
                                                     mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        shutil.rmtree(tmp)

    record("base", 0)
    record("same", 0)
    record("again", 0)
    stop = multiprocessing.Event()
    burner = multiprocessing.Process(target=spin, args=(stop,))
    burner.start()
    time.sleep(0.5)
    record("busy", 0)
    stop.set()
    burner.join()
    record("slow", reps)
    record("slow2", reps)


if __name__ == "__main__":
    main()
