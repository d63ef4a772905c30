#!/usr/bin/env python3
"""Records the real-trace corpus for bench/prof_import_bench: Kineto traces of real models.

Each model (torchvision resnet50 and vit_b_16, HF transformers BERT and GPT-2 built from a config
with random weights; nothing is downloaded) is profiled for a few training steps with
record_shapes, with_stack, with_modules and profile_memory, so the trace carries what users'
traces carry: long `args`, shapes, stacks, python_function events, flows and memory events.
The recorded events are then repeated (timestamps, ids and correlations shifted so every copy is
distinct and later) until the file reaches --mb megabytes. The traces go to a folder outside the
repository and are never committed.

Usage: /work/peers-venv/bin/python bench/record_real_traces.py [--out /work/real-traces]
           [--mb 110] [--steps 3] [--models resnet50,vit_b_16,bert,gpt2]
"""
import argparse
import json
import os
import sys
import tempfile

import torch


def make_model(name):
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None), lambda: (torch.randn(2, 3, 64, 64),)
    if name == "vit_b_16":
        import torchvision
        m = torchvision.models.vit_b_16(weights=None, image_size=64)
        return m, lambda: (torch.randn(2, 3, 64, 64),)
    if name == "bert":
        from transformers import BertConfig, BertForSequenceClassification
        cfg = BertConfig(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=512)
        return BertForSequenceClassification(cfg), lambda: (torch.randint(0, cfg.vocab_size, (2, 32)),)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=4, n_embd=256, n_head=4)
        return GPT2LMHeadModel(cfg), lambda: (torch.randint(0, cfg.vocab_size, (2, 32)),)
    raise SystemExit(f"unknown model {name}")


def loss_of(out):
    if isinstance(out, torch.Tensor):
        return out.float().mean()
    logits = out.logits if hasattr(out, "logits") else out[0]
    return logits.float().mean()


def record(name, steps, path):
    torch.manual_seed(0)
    model, inputs = make_model(name)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    from torch.profiler import ProfilerActivity, profile, schedule
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])

    def step():
        opt.zero_grad()
        loss_of(model(*inputs())).backward()
        opt.step()

    step()  # warm-up, outside the profile
    with profile(activities=activities, record_shapes=True, with_stack=True, with_modules=True,
                 profile_memory=True, schedule=schedule(wait=0, warmup=0, active=steps, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(steps):
            step()
            prof.step()


def shifted(event, dt, did):
    e = dict(event)
    if "ts" in e:
        e["ts"] = e["ts"] + dt
    if isinstance(e.get("id"), int):
        e["id"] = e["id"] + did
    args = e.get("args")
    if isinstance(args, dict):
        a = dict(args)
        for k in ("External id", "correlation", "Sequence number", "Ev Idx", "Python id", "Python parent id"):
            if isinstance(a.get(k), int):
                a[k] = a[k] + did
        e["args"] = a
    return e


def repeat_to_size(src, dst, mb):
    with open(src) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    meta = [e for e in events if "ts" not in e or e.get("ph") == "M"]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = (t1 - t0) + 1000
    max_id = 0
    for e in timed:
        for v in (e.get("id"), *(e.get("args", {}) or {}).values()):
            if isinstance(v, int) and v > max_id:
                max_id = v
    did_step = max_id + 1
    with open(dst + ".part", "w") as out:
        head = {k: v for k, v in trace.items() if k != "traceEvents"}
        out.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
        written = 0
        first = True
        for e in meta:
            out.write(("" if first else ",\n") + json.dumps(e))
            first = False
        copy = 0
        target = mb * 1e6
        while written < target:
            step = 0
            for e in timed:
                e2 = shifted(e, copy * span, copy * did_step)
                if isinstance(e2.get("name"), str) and e2["name"].startswith("ProfilerStep#"):
                    step = int(e2["name"][13:] or 0)
                    e2["name"] = f"ProfilerStep#{step + copy * 1000}"
                s = json.dumps(e2)
                out.write(("" if first else ",\n") + s)
                first = False
                written += len(s) + 2
            copy += 1
        out.write("\n]}\n")
    os.replace(dst + ".part", dst)
    return copy


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="/work/real-traces")
    p.add_argument("--mb", type=float, default=110)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--models", default="resnet50,vit_b_16,bert,gpt2")
    a = p.parse_args()
    if os.path.realpath(a.out).startswith(os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))):
        sys.exit("--out must be outside the repository: the traces are never committed")
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    for name in a.models.split(","):
        raw = os.path.join(a.out, f"raw_{name}.json")
        if not os.path.exists(raw):
            record(name, a.steps, raw)
        copies = repeat_to_size(raw, os.path.join(a.out, f"{name}_torch{torch.__version__.split('+')[0]}.json"), a.mb)
        print(f"{name}: raw {os.path.getsize(raw) / 1e6:.1f} MB x {copies}", flush=True)


if __name__ == "__main__":
    main()
