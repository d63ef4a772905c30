"""Records the noise set of `portkit prof diff` (docs/prof.md, "Noise-aware gate"): CPU profiles
(Kineto JSON via torch.profiler) of a small torchvision ResNet-18 inference step.

    python record_resnet.py OUT_DIR [--pairs 20] [--slow-runs 5] [--steps 60] [--slow 10]

For i < pairs it writes OUT_DIR/a_i and OUT_DIR/b_i (identical runs, one profiler session and one
`*.pt.trace.json` each, back to back in this process), and for i < slow-runs OUT_DIR/s_i: the same
step with a real slowdown of `--slow` % (one more 3×3 convolution, of a 64×64 image, repeated until it
costs that share of the step, calibrated on un-profiled steps). Each trace has ProfilerStep#0
(the warm-up, left out by `prof diff`) and `--steps` measured steps. Nothing is downloaded: the
model is built from its config with random weights, seed 0, one thread.
"""
import argparse
import os
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--slow-runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--slow", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=32)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torchvision.models.resnet18(num_classes=10).eval()
    extra = torch.nn.Conv2d(3, 32, 3, padding=1).eval()
    extra_x = torch.randn(1, 3, 64, 64)
    x = torch.randn(1, 3, a.size, a.size)

    def run_step(reps):
        with torch.no_grad():
            model(x)
            for _ in range(reps):
                extra(extra_x)

    def seconds(fn, n):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n

    for _ in range(5):
        run_step(0)
    step_s = min(seconds(lambda: run_step(0), 10) for _ in range(3))
    def extra_only():
        with torch.no_grad():
            extra(extra_x)

    extra_s = min(seconds(extra_only, 50) for _ in range(3))
    reps = max(1, round(step_s * a.slow / 100.0 / max(extra_s, 1e-6)))
    print(f"step {step_s * 1e3:.2f} ms, extra pass {extra_s * 1e3:.3f} ms, {reps} extra pass(es) for --slow {a.slow}")

    def record(folder, reps):
        sched = torch.profiler.schedule(wait=0, warmup=1, active=a.steps + 1, repeat=1)
        out = os.path.join(a.out, folder)
        os.makedirs(out, exist_ok=True)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                    on_trace_ready=torch.profiler.tensorboard_trace_handler(out)) as prof:
            for _ in range(a.steps + 2):
                run_step(reps)
                prof.step()

    for i in range(a.pairs):
        record(f"a_{i}", 0)
        record(f"b_{i}", 0)
        if i < a.slow_runs:
            record(f"s_{i}", reps)


if __name__ == "__main__":
    main()
