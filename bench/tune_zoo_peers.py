"""portkit's SGAT plan against its peers on a zoo of real architectures (random weights, small
configurations written here, nothing downloaded).

For each model: ``portkit.tune.optimize`` with a fresh bank (its wall time is the tuning cost),
the artifact loaded with ``portkit.tune.load``; the peers built as a user would build them, each
with its own cost: ``torch.jit.optimize_for_inference`` (script, else trace), ``torch.compile``
(default mode; compile time = the first call; dynamo's caches are reset first, so the peer does
not reuse what the tuner compiled), ONNX Runtime fp32 with its best options (the same search the
tuner runs: graph optimisation level, execution mode, spinning, transformer fusions where they
apply, all at the default thread count) and, where the ``openvino`` package is installed,
OpenVINO (``openvino.convert_model`` on the example inputs, compiled for the CPU with the LATENCY
hint at the default thread count). Then ONE interleaved run of eager,
the peers (at the process's default thread count) and ours (at its plan's count, which ``load``
sets), grouped by thread count as the tuner measures. Prints a table (medians, eager/path, ours
against the best of eager and the peers) and the checks: every plan at least 0.97x the best of
eager and every peer, the same against {eager, optimize_for_inference, torch.compile, ONNX
Runtime} alone, and the geomean of eager/ours at least 1.3x. (OpenVINO is also one of the
tuner's candidates where it is installed: the plan may be OpenVINO itself.)

    PYTHONPATH=python python bench/tune_zoo_peers.py [--only resnet18,bert] [--rounds 15] [--size 224]
        [--time-budget 120] [--no-compile]

Models: torchvision's resnet18, mobilenet_v3_small, efficientnet_b0, regnet_y_400mf,
shufflenet_v2_x1_0, convnext_tiny, densenet121, vit_b_16 (batch 1, SIZE x SIZE) and
ssdlite320_mobilenet_v3_large (detection); transformers' BERT (encoder), GPT-2 (decoder) and BART
(encoder-decoder), 4 layers (BART 2 + 2) of width 256, 4 heads, FFN 1024, SIZE/2 tokens, returning
the last hidden state.

Needs torchvision and transformers for their models (a model whose package is absent is left
out, and said so), onnxruntime for the ONNX Runtime column and openvino (tested with 2025.3.0)
for the OpenVINO column.
"""
import argparse
import math
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402

import portkit.tune as pt  # noqa: E402
from portkit.tune import candidates as cands  # noqa: E402
from portkit.tune import ort  # noqa: E402
from portkit.tune import sgat  # noqa: E402
from portkit.tune.measure import measure_interleaved, paired_ratio, thread_switcher  # noqa: E402

PEERS = ("optimize_for_inference", "torch.compile", "onnxruntime", "openvino")
CORE_PEERS = PEERS[:3]


def openvino_available():
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


class OpenVinoModel:
    """An OpenVINO compiled model called like the module: tensors in, a tensor (or a tuple) out."""

    def __init__(self, model, inputs, threads):
        import openvino as ov

        example = inputs[0] if len(inputs) == 1 else tuple(inputs)
        converted = ov.convert_model(model, example_input=example)
        self.compiled = ov.Core().compile_model(converted, "CPU", {"INFERENCE_NUM_THREADS": int(threads),
                                                                   "PERFORMANCE_HINT": "LATENCY"})
        self.request = self.compiled.create_infer_request()

    def __call__(self, *xs):
        res = self.request.infer([x.numpy() for x in xs])
        outs = [torch.from_numpy(res[o].copy()) for o in self.compiled.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)


def _tv(name, **kw):
    def make(size):
        import torchvision

        extra = {"image_size": size} if name.startswith("vit") else {}
        return getattr(torchvision.models, name)(weights=None, **kw, **extra), (torch.randn(1, 3, size, size),)
    return make


def _detection(size):
    import torchvision

    model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)
    return model, ([torch.rand(3, size, size)],)  # resized to 320x320 by the model's own transform


class HiddenStates(torch.nn.Module):
    """A ``transformers`` model returning its last hidden state (a tensor), as deployed code
    calls it: no cache, no dict."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        model.config.use_cache = False

    def forward(self, ids):
        return self.model(input_ids=ids).last_hidden_state


def _hf(kind):
    def make(seq):
        import transformers

        seq = max(8, seq // 2)  # --size pixels -> --size/2 tokens
        ids = torch.randint(0, 1000, (1, seq), generator=torch.Generator().manual_seed(0))
        if kind == "bert":
            cfg = transformers.BertConfig(vocab_size=1000, hidden_size=256, num_hidden_layers=4,
                                          num_attention_heads=4, intermediate_size=1024, max_position_embeddings=256)
            return HiddenStates(transformers.BertModel(cfg)), (ids,)
        if kind == "gpt2":
            cfg = transformers.GPT2Config(vocab_size=1000, n_embd=256, n_layer=4, n_head=4, n_positions=256)
            return HiddenStates(transformers.GPT2Model(cfg)), (ids,)
        cfg = transformers.BartConfig(vocab_size=1000, d_model=256, encoder_layers=2, decoder_layers=2,
                                      encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=1024,
                                      decoder_ffn_dim=1024, max_position_embeddings=256)
        return HiddenStates(transformers.BartModel(cfg)), (ids,)
    return make


ZOO = {
    "resnet18": ("torchvision", _tv("resnet18")),
    "mobilenet_v3_small": ("torchvision", _tv("mobilenet_v3_small")),
    "efficientnet_b0": ("torchvision", _tv("efficientnet_b0")),
    "regnet_y_400mf": ("torchvision", _tv("regnet_y_400mf")),
    "shufflenet_v2_x1_0": ("torchvision", _tv("shufflenet_v2_x1_0")),
    "convnext_tiny": ("torchvision", _tv("convnext_tiny")),
    "densenet121": ("torchvision", _tv("densenet121")),
    "vit_b_16": ("torchvision", _tv("vit_b_16")),
    "ssdlite320": ("torchvision", _detection),
    "bert": ("transformers", _hf("bert")),
    "gpt2": ("transformers", _hf("gpt2")),
    "bart": ("transformers", _hf("bart")),
}
#: Not in the default list (bench/tune_resnet50_cost.py measures its tuning cost): --only resnet50.
EXTRA = {"resnet50": ("torchvision", _tv("resnet50"))}


def _randomise_bn(model):
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    return model


def _line(e):
    return "%s: %s" % (type(e).__name__, (str(e).splitlines() or [""])[0][:100])


def build_peers(model, inputs, want, threads, use_compile, say):
    """{peer: module} and {peer: seconds it took to build (first call included)}."""
    peers, cost = {}, {}
    t0 = time.time()
    try:
        ofi = torch.jit.optimize_for_inference(cands.script_or_trace(model, inputs).eval())
        if pt.outputs_match(ofi(*inputs), want)[0]:
            peers["optimize_for_inference"] = ofi
        else:
            say("optimize_for_inference: outputs differ from eager")
    except Exception as e:  # noqa: BLE001 - a model TorchScript cannot hold
        say("optimize_for_inference: " + _line(e))
    cost["optimize_for_inference"] = time.time() - t0
    if use_compile:
        # dynamo keys its cache on the code, not the module: without a reset, the peer would reuse
        # what the tuner compiled for its copy of the model (and its build cost would be hidden).
        torch._dynamo.reset()
        t0 = time.time()
        try:
            compiled = cands.compile_module(model, None, threads)
            if pt.outputs_match(compiled(*inputs), want)[0]:
                peers["torch.compile"] = compiled
            else:
                say("torch.compile: outputs differ from eager")
        except Exception as e:  # noqa: BLE001
            say("torch.compile: " + _line(e))
        cost["torch.compile"] = time.time() - t0
    if ort.available():
        t0 = time.time()
        try:
            def time_runs(runs):
                return measure_interleaved(runs, rounds=7, warmup=2, min_sample_s=0.002, settle=sgat.settle_of_setting)
            session, ms = ort.search(ort.export(model, inputs), inputs, want, threads, pt.outputs_match, time_runs)
            peers["onnxruntime"] = session
            say("onnxruntime options: %s (searched: %s)" % (ort.setting_name(session.options), ms))
        except Exception as e:  # noqa: BLE001 - the exporter refuses the model, or outputs differ
            say("onnxruntime: " + _line(e))
        cost["onnxruntime"] = time.time() - t0
    if openvino_available():
        t0 = time.time()
        try:
            vino = OpenVinoModel(model, inputs, threads)
            ok, why = pt.outputs_match(vino(*inputs), want)
            if ok:
                peers["openvino"] = vino
            else:
                say("openvino: outputs differ from eager (%s)" % why)
        except Exception as e:  # noqa: BLE001 - a model OpenVINO does not convert
            say("openvino: " + _line(e))
        cost["openvino"] = time.time() - t0
    return peers, cost


def run_model(name, make, args, default_threads, use_compile):
    def say(msg):
        print("  %s: %s" % (name, msg), flush=True)
    torch.manual_seed(0)
    model, inputs = make(args.size)
    model = _randomise_bn(model).eval()
    with torch.no_grad():
        want = model(*inputs)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.time()
        _, report = pt.optimize(model, inputs, bank=os.path.join(tmp, "bank"), output=os.path.join(tmp, "out"),
                                use_compile=use_compile, time_budget=args.time_budget or None, progress=args.progress)
        tune_s = time.time() - t0
        torch.set_num_threads(default_threads)
        ours = pt.load(os.path.join(tmp, "out"))  # sets the plan's thread count
        plan_threads = torch.get_num_threads()
        torch.set_num_threads(default_threads)
        with torch.no_grad():
            peers, cost = build_peers(model, inputs, want, default_threads, use_compile, say)
            torch.set_num_threads(plan_threads)
            ok, why = pt.outputs_match(ours(*inputs), want)
            if not ok:
                # Like the tuner's own check: a detection head's top-k and NMS over near ties give
                # other boxes at another thread count, eager's included; compare at the plan's count.
                ok, why = pt.outputs_match(ours(*inputs), model(*inputs))
            torch.set_num_threads(default_threads)
            if not ok:
                say("the artifact differs from eager (%s): not timed" % why)
                return None
            runs = {"eager": lambda: model(*inputs), "ours": lambda: ours(*inputs)}
            runs.update({p: (lambda m=m: m(*inputs)) for p, m in peers.items()})
            if default_threads != 1:
                runs["eager@1t"] = lambda: model(*inputs)  # what the thread count alone does, under this load

            def count(n):
                return plan_threads if n == "ours" else 1 if n == "eager@1t" else default_threads
            # The pause each path's spinning threads are owed before the next one is timed (the
            # tuner's own rule): OpenVINO's pool does not spin.
            modules = dict(peers, ours=ours)

            def settle(n):
                return 0.0 if n == "openvino" else sgat.settle_time(modules.get(n, model))
            timings = measure_interleaved(runs, rounds=args.rounds, warmup=3, min_sample_s=0.002,
                                          prepare=thread_switcher(runs, count), group=count, settle=settle)
        torch.set_num_threads(default_threads)
    eager = timings["eager"]
    row = {"name": name, "plan": report["plan"]["strategy"], "threads": plan_threads, "tune_s": tune_s,
           "cost": cost, "ms": {n: t.median * 1e3 for n, t in timings.items()},
           "notes": [n for n in report["notes"] if "tuned separately" in n or "whole model as one" in n]}
    row["speedup"] = 1.0 / paired_ratio(timings["ours"], eager)[0]
    # The best of eager (at the default count) and every peer, and the same without OpenVINO (the
    # set {eager, optimize_for_inference, torch.compile, ONNX Runtime} the target names).
    for key, names in (("", ("eager",) + PEERS), ("_core", ("eager",) + CORE_PEERS)):
        present = [p for p in names if p in timings]
        best = min(present, key=lambda p: timings[p].median)
        r, ci = paired_ratio(timings[best], timings["ours"])  # >1: ours faster than the best peer
        row.update({"best_peer" + key: best, "vs_best" + key: r, "vs_best_ci" + key: ci})
    if report["plan"].get("subgraphs"):
        kinds = sorted(set(report["plan"]["subgraphs"].values()))
        row["parts"] = "%d parts: %s" % (len(report["plan"]["subgraphs"]), "/".join(kinds))
    say("tuning cost: %.1f s of a %s s budget, phases (s) %s, not built for time %s" % (
        report["cost"]["seconds"], report["cost"]["time_budget_s"], report["cost"]["phases_s"],
        report["cost"].get("not_built_for_time")))
    race = report.get("final_race") or {}
    say("tuner's final run: plan %.3f ms; %s; switched to %s" % (
        race.get("plan_ms", float("nan")), ", ".join("%s %.3f ms" % (n, p["median_ms"])
                                                     for n, p in sorted(race.get("peers", {}).items())),
        race.get("switched_to")))
    say("plan %s@%dt, tuned in %.1f s; %s" % (row["plan"], plan_threads, tune_s, ", ".join(
        "%s %.2f ms" % (n, v) for n, v in sorted(row["ms"].items(), key=lambda kv: kv[1]))))
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(ZOO))
    ap.add_argument("--skip", default="")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--size", type=int, default=224,
                    help="image side (ViT: its image_size); transformers models get size/2 tokens")
    ap.add_argument("--time-budget", type=float, default=sgat.DEFAULT_TIME_BUDGET_S,
                    help="optimize's time_budget per model, seconds (0: none)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--progress", action="store_true", help="the tuner's progress lines")
    args = ap.parse_args()
    use_compile = cands.torch_compile_available() and not args.no_compile
    default_threads = torch.get_num_threads()
    print("torch %s, %d cores, default %d intra-op threads, onnxruntime %s, openvino %s, load average %s" % (
        torch.__version__, os.cpu_count(), default_threads, ort.version() if ort.available() else "absent",
        __import__("openvino").__version__ if openvino_available() else "absent",
        " ".join("%.1f" % x for x in os.getloadavg())), flush=True)
    rows = []
    skip = set(filter(None, args.skip.split(",")))
    for name in args.only.split(","):
        if name in skip:
            continue
        package, make = ZOO[name] if name in ZOO else EXTRA[name]
        try:
            __import__(package)
        except ImportError:
            print("  %s: left out (%s not installed)" % (name, package))
            continue
        row = run_model(name, make, args, default_threads, use_compile)
        if row:
            rows.append(row)
            print("  load average %s" % " ".join("%.1f" % x for x in os.getloadavg()), flush=True)
    report(rows)


def report(rows):
    cols = ("eager",) + PEERS + ("ours", "eager@1t")
    print("\n| model | plan (threads) | " + " | ".join("%s ms" % c for c in cols) +
          " | eager/ours | ours vs best peer (95 % CI) | tuning s | peer cost s (ofi / compile / ORT / OpenVINO) |")
    print("|" + "---|" * (len(cols) + 6))
    for r in rows:
        cells = ["%.2f" % r["ms"][c] if c in r["ms"] else "–" for c in cols]
        vs = "%.2f× %s (%.2f–%.2f)" % (r["vs_best"], r["best_peer"], r["vs_best_ci"][0], r["vs_best_ci"][1])
        cost = " / ".join("%.0f" % r["cost"][p] if p in r["cost"] else "–" for p in PEERS)
        print("| %s | %s%s (%d) | %s | %.2f× | %s | %.0f | %s |" % (
            r["name"], r["plan"], " [%s]" % r["parts"] if "parts" in r else "", r["threads"], " | ".join(cells),
            r["speedup"], vs, r["tune_s"], cost))
    if not rows:
        return
    geo = math.exp(sum(math.log(r["speedup"]) for r in rows) / len(rows))
    for key, what in (("", "eager and every peer"), ("_core", "eager, optimize_for_inference, torch.compile, ONNX Runtime")):
        missing = [r for r in rows if r["vs_best" + key] < 0.97]
        print("%scheck: every plan >= 0.97x the best of %s: %s%s" % (
            "\n" if not key else "", what, "met" if not missing else "MISSED", "" if not missing else " (%s)" % ", ".join(
                "%s %.2fx %s" % (r["name"], r["vs_best" + key], r["best_peer" + key]) for r in missing)))
    print("check: geomean eager/ours >= 1.3x: %.2fx, %s" % (geo, "met" if geo >= 1.3 else "MISSED"))
    print("geomean ours vs best peer: %.2fx; load average now %s" % (
        math.exp(sum(math.log(r["vs_best"]) for r in rows) / len(rows)),
        " ".join("%.1f" % x for x in os.getloadavg())))
    for r in rows:
        for n in r["notes"]:
            print("note %s: %s" % (r["name"], n))


if __name__ == "__main__":
    main()
