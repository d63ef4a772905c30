"""Writes the small Kineto traces of tests/cli/prof_diff_gate.sh into tests/data/traces/diff_gate/:

  base/  same/  slow/  — one CPU trace each: ProfilerStep#0 (warm-up) and 30 measured steps of
  three operators (aten::conv2d, aten::relu, aten::linear) on one thread.

Step times are 10 ms with seeded noise of the kind a shared machine adds: ±6 % jitter on every
step and, in about one step in six, a stall of 20–40 % (a preempted step). `same` is `base`'s
model run again (new noise, same seed family); `slow` adds 1.2 ms (+12 %) of aten::conv2d to every
step. Deterministic: `python make_diff_gate_traces.py` rewrites the same bytes.
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "diff_gate")
STEPS = 30
OPS = [("aten::conv2d", 0.55), ("aten::relu", 0.10), ("aten::linear", 0.30)]  # share of a 10 ms step


def trace(seed, extra_conv_us):
    rng = random.Random(seed)
    events, ts = [], 1_000_000
    for step in range(STEPS + 1):
        scale = 1.0 + rng.uniform(-0.06, 0.06)
        if rng.random() < 1 / 6:
            scale *= 1.0 + rng.uniform(0.2, 0.4)
        begin, t = ts, ts + 50
        for name, share in OPS:
            dur = round(10_000 * share * scale) + (extra_conv_us if name == "aten::conv2d" else 0)
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": dur})
            t += dur + 20
        end = t + 100
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                       "ts": begin, "dur": end - begin})
        ts = end + 10
    events.sort(key=lambda e: (e["ts"], -e["dur"]))
    return {"schemaVersion": 1, "deviceProperties": [], "traceEvents": events}


def main():
    for folder, seed, extra in (("base", 1, 0), ("same", 9, 0), ("slow", 3, 1200)):
        os.makedirs(os.path.join(OUT, folder), exist_ok=True)
        with open(os.path.join(OUT, folder, "worker.pt.trace.json"), "w") as f:
            json.dump(trace(seed, extra), f, separators=(",", ":"))
            f.write("\n")


if __name__ == "__main__":
    main()
