"""SGAT on three models: portkit.tune's artifact against eager and torch's own built-in paths.

For each model (examples/tune/models.py: ResNet-style CNN with BatchNorm, MLP, transformer
encoder block) at realistic shapes: run ``portkit.tune.optimize`` with a fresh bank, load the
artifact with ``portkit.tune.load`` (one call), then time in ONE interleaved run eager (process
default threads), torch.jit.optimize_for_inference, torch.compile (torch 2.x: default, and
max-autotune with freezing), ONNX Runtime (fp32, all graph optimisations, when ``onnxruntime`` is
installed) and ours. The
built-ins (and a second eager, "eager@Nt") run at the thread count our plan chose (the tuner
chose it jointly with the strategy, timing every whole-model candidate at 1, the default and the
core count: those timings are printed too), so the part of the gain that is only the thread count
shows separately. Prints medians with 95 % bootstrap intervals and the paired ratios, and
the geomean of eager/ours. Beside them, the physical limit: the fp32 GEMM peak measured in the
same run (best square product at the core count), each model's FLOPs (torch's profiler) and the
speed-up eager would see if every FLOP ran at that peak.

    PYTHONPATH=python python3 bench/tune_torch_bench.py [--rounds 30] [--only resnet,mlp,encoder]
        [--no-compile] [--opat build/portkit [--opat-max-evals N]]

``--opat BIN`` adds job type opat: the models' Linear shapes are tuned by ``BIN tune --job-type=2``
and routed where they beat torch's linear, and the "opat" subgraph strategy competes (the kernels
are tuned into the same fresh bank, so the tuning time includes compiling them).
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
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import portkit.tune as pt  # noqa: E402
from portkit.tune import candidates as cands  # noqa: E402
from portkit.tune import onednn  # noqa: E402
from portkit.tune import ort  # noqa: E402
from portkit.tune.measure import measure_interleaved, paired_ratio, thread_switcher  # noqa: E402
from examples.tune import models  # noqa: E402

CASES = {
    "resnet": ("ResNet-style CNN, BN (w32, 3 stages)", lambda: models.make_resnet(width=32),
               lambda: (torch.randn(8, 3, 64, 64),)),
    "mlp": ("MLP 256-512x3-10, GELU", lambda: models.make_mlp(256, 512), lambda: (torch.randn(64, 256),)),
    "encoder": ("encoder block d256 h4 ffn1024", lambda: models.make_encoder(256, 4, 1024),
                lambda: (torch.randn(8, 128, 256),)),
}


def model_flops(model, inputs):
    """Floating-point operations of one forward pass as torch's profiler counts them (GEMMs,
    convolutions and elementwise mul/add; torch 1.13 and 2.x alike)."""
    with torch.no_grad(), torch.profiler.profile(with_flops=True) as prof:
        model(*inputs)
    return sum(e.flops or 0 for e in prof.key_averages())


def gemm_peak(threads, sizes=(512, 1024, 2048), reps=10):
    """This machine's fp32 throughput as torch reaches it, in FLOP/s: the best of ``reps`` n x n x n
    products for each n of ``sizes`` at ``threads`` intra-op threads, through torch's matmul (MKL
    or OpenBLAS) and, where torch has it, oneDNN's linear with a reordered weight (the faster of the
    two here). No model's GEMMs run faster than this."""
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    best = 0.0
    try:
        for n in sizes:
            a, w = torch.randn(n, n), torch.randn(n, n)
            paths = [lambda: a @ w]
            if onednn.available():
                packed = torch.ops.mkldnn._reorder_linear_weight(w, n)
                paths.append(lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [], None))
            for path in paths:
                path()
                for _ in range(reps):
                    t0 = time.perf_counter()
                    path()
                    best = max(best, 2.0 * n ** 3 / (time.perf_counter() - t0))
        return best
    finally:
        torch.set_num_threads(saved)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--tune-rounds", type=int, default=15)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--opat", default=None, help="portkit binary: also route tuned GEMM kernels (job type opat)")
    ap.add_argument("--opat-max-evals", type=int, default=None)
    args = ap.parse_args()
    use_compile = cands.torch_compile_available() and not args.no_compile
    default_threads = torch.get_num_threads()
    print("torch %s, %d cores, process default %d intra-op threads, load average %s" % (
        torch.__version__, os.cpu_count(), default_threads, " ".join("%.1f" % x for x in os.getloadavg())))
    rows, speedups, speedups_same, ceilings = [], [], [], []
    peak_threads = os.cpu_count() or 1
    peak = gemm_peak(peak_threads)
    print("fp32 GEMM peak (best square product, n = 512/1024/2048, at %d threads): %.1f GFLOP/s" % (
        peak_threads, peak / 1e9))
    for key in args.only.split(","):
        title, make, make_inputs = CASES[key]
        torch.manual_seed(0)
        model, inputs = make(), make_inputs()
        with torch.no_grad():
            want = model(*inputs)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.time()
            _, report = pt.optimize(model, inputs, bank=os.path.join(tmp, "bank"), output=os.path.join(tmp, "out"),
                                    use_compile=use_compile, rounds=args.tune_rounds, progress=False,
                                    job_types=("sgat", "opat") if args.opat else ("sgat",), portkit=args.opat,
                                    opat_max_evals=args.opat_max_evals)
            tune_s = time.time() - t0
            torch.set_num_threads(default_threads)
            ours = pt.load(os.path.join(tmp, "out", "optimized.pt"))  # sets the plan's threads
        threads = torch.get_num_threads()
        with torch.no_grad():
            assert pt.outputs_match(ours(*inputs), want)[0], "artifact differs from eager"
            runs = {"eager": lambda: model(*inputs), "ours": lambda: ours(*inputs)}
            if threads != default_threads:
                runs["eager@%dt" % threads] = lambda: model(*inputs)
            ofi = torch.jit.optimize_for_inference(torch.jit.script(model))
            if pt.outputs_match(ofi(*inputs), want)[0]:
                runs["optimize_for_inference"] = lambda: ofi(*inputs)
            compile_s = None
            if use_compile:
                t0 = time.time()
                # cpp.threads = the count it runs at: inductor's graph cache does not key on torch's
                # thread count and would hand back kernels generated for another count.
                compiled = cands.compile_module(model, None, threads)
                compiled(*inputs)
                compile_s = time.time() - t0
                if pt.outputs_match(compiled(*inputs), want)[0]:
                    runs["torch.compile"] = lambda: compiled(*inputs)
                # torch.compile with its GEMM/convolution templates autotuned and the weights
                # frozen: the fastest built-in torch.compile setting for inference on CPU.
                tuned = cands.compile_module(model, "max-autotune-freeze", threads)
                tuned(*inputs)
                if pt.outputs_match(tuned(*inputs), want)[0]:
                    runs["torch.compile(max-autotune,freezing)"] = lambda: tuned(*inputs)
            if ort.available():
                # ONNX Runtime as a user would run it: exported once, all graph optimisations, the
                # plan's thread count.
                try:
                    session = ort.OrtModule(ort.export(model, inputs), ort.settings_at(threads)[0])
                    if pt.outputs_match(session(*inputs), want)[0]:
                        runs["onnxruntime"] = lambda: session(*inputs)
                except Exception as e:  # noqa: BLE001 - a model the exporter refuses: no ORT column
                    print("  onnxruntime: not run (%s: %s)" % (type(e).__name__, str(e).splitlines()[0][:120]))
        # As the tuner measures: the candidates of one thread count back to back in each round, and
        # one untimed call after a change of count.
        count = lambda n: default_threads if n == "eager" else threads
        timings = measure_interleaved(runs, rounds=args.rounds, warmup=3, prepare=thread_switcher(runs, count),
                                      group=count)
        eager = timings["eager"]
        builtins = [n for n in timings if n not in ("eager", "ours") and not n.startswith("eager@")]
        best_builtin = min(builtins, key=lambda n: timings[n].median) if builtins else None
        r_eager, ci_eager = paired_ratio(timings["ours"], eager)
        speedups.append(1.0 / r_eager)
        print("\n%s  %s  input %s" % (key, title, "x".join(str(d) for d in inputs[0].shape)))
        print("  plan: %s, %d threads; tuning took %.1f s%s" % (
            report["plan"]["strategy"], report["plan"]["threads"], tune_s,
            "; torch.compile took %.1f s to compile" % compile_s if compile_s is not None else ""))
        for rec in report.get("opat_kernels", []):
            print("  opat %dx%dx%d: tuned %.1f us, torch %.1f us, x%.2f (lower bound %.2f): %s" % (
                rec["m"], rec["k"], rec["n"], rec.get("tuned_us", 0), rec.get("torch_us", 0), rec.get("speedup", 0),
                rec.get("lower_bound", 0), "routed" if rec["routed"] else "not routed"))
        print("  tuner's whole-model candidates (strategy@threads, median ms): " + ", ".join(
            "%s %.3f" % (n, c["median_ms"]) for n, c in sorted(report["candidates"].items(),
                                                              key=lambda kv: kv[1]["median_ms"])))
        if report["plan"].get("subgraphs"):
            print("  subgraphs: " + ", ".join("%s=%s" % kv for kv in sorted(report["plan"]["subgraphs"].items())))
        print("  %-24s %10s %22s %14s" % ("path", "median ms", "95% CI ms", "eager/path"))
        for n, t in timings.items():
            r, _ = paired_ratio(t, eager)
            print("  %-24s %10.3f %10.3f - %-10.3f %13.2fx" % (n, t.median * 1e3, t.ci[0] * 1e3, t.ci[1] * 1e3, 1.0 / r))
        line = "  ours vs eager: %.2fx (95%% CI %.2f-%.2f)" % (1 / r_eager, 1 / ci_eager[1], 1 / ci_eager[0])
        if best_builtin:
            rb, cib = paired_ratio(timings["ours"], timings[best_builtin])
            line += "; vs best built-in (%s): %.2fx (95%% CI %.2f-%.2f)" % (best_builtin, 1 / rb, 1 / cib[1], 1 / cib[0])
        print(line)
        same = "eager@%dt" % threads
        if same in timings:
            rs, cis = paired_ratio(timings["ours"], timings[same])
            print("  ours vs eager at the same %d threads: %.2fx (95%% CI %.2f-%.2f)" % (threads, 1 / rs, 1 / cis[1], 1 / cis[0]))
            speedups_same.append(1.0 / rs)
        else:
            speedups_same.append(1.0 / r_eager)
        # The physical limit: every FLOP at the GEMM peak (elementwise work, memory traffic and
        # the GEMMs' own inefficiency at these shapes ignored), against eager's time.
        flops = model_flops(model, inputs)
        if flops:
            floor_s = flops / peak
            ceilings.append(eager.median / floor_s)
            print("  roofline: %.1f MFLOP per call; eager %.1f GFLOP/s, ours %.1f GFLOP/s (%.0f %% of the peak); "
                  "all of it at the peak would be %.3f ms, eager/that %.2fx" % (
                      flops / 1e6, flops / eager.median / 1e9, flops / timings["ours"].median / 1e9,
                      100.0 * floor_s / timings["ours"].median, floor_s * 1e3, ceilings[-1]))
        rows.append((key, report["plan"]["strategy"]))
        torch.set_num_threads(default_threads)
    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    geo_same = math.exp(sum(math.log(s) for s in speedups_same) / len(speedups_same))
    print("\ngeomean eager/ours over %d models: %.2fx; at the same thread count: %.2fx   (load average now %s)" % (
        len(speedups), geo, geo_same, " ".join("%.1f" % x for x in os.getloadavg())))
    if ceilings and len(ceilings) == len(speedups):
        print("geomean of the physical limits (eager / every FLOP at the GEMM peak): %.2fx" % (
            math.exp(sum(math.log(c) for c in ceilings) / len(ceilings))))

if __name__ == "__main__":
    main()
