"""``python -m portkit.gdat``: what ``portkit tune --job-type=4`` runs.

    python -m portkit.gdat simulate MODEL.json --output DIR [--allow-lossy] [--exhaustive] [grid options]
    python -m portkit.gdat describe --model pkg.mod:make_model --input 8x32 --output MODEL.json
                                    [--alpha-ms A --beta-ms-per-mb B | --measure-comm] [--repeats 5]
    python -m portkit.gdat train --model pkg.mod:make_model --input 8x32 [--input int64:8x16] --nproc 2
                                 --output DIR [--backend gloo] [--warmup 2] [--measure 5] [--max-trials N]
                                 [--allow-lossy] [--lr 0.01] [--seed 0] [grid options]

Exit codes: 0 done, 2 bad usage or input (the message names the file or option), 4 the run failed
(a rank raised, the process group could not start).
"""
import argparse
import importlib
import os
import sys

from .cost_model import DescriptionError, ModelDescription, simulate
from .results import SETTINGS_FILE, ResultWriter, settings_document, write_json_atomic
from .search import (DEFAULT_BUCKET_CAPS_MB, DEFAULT_FIRST_BUCKETS_MB, DEFAULT_POWERSGD_RANKS, Space,
                     coordinate_search, exhaustive)

EXIT_USAGE, EXIT_FAILURE = 2, 4


class UsageError(Exception):
    pass


def _floats(text, option):
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError("%s: expected a comma list of numbers, got '%s'" % (option, text))
    if not vals or min(vals) <= 0:
        raise UsageError("%s: expected positive numbers, got '%s'" % (option, text))
    return vals


def _bools(text, option):
    table = {"0": False, "1": True, "false": False, "true": True}
    vals = [table.get(x.strip().lower()) for x in text.split(",") if x.strip()]
    if not vals or None in vals:
        raise UsageError("%s: expected a comma list of 0/1/true/false, got '%s'" % (option, text))
    return vals


def _space(args):
    ranks = [int(r) for r in _floats(args.powersgd_ranks, "--powersgd-ranks")]
    return Space(bucket_caps_mb=_floats(args.bucket_caps, "--bucket-caps"),
                 first_buckets_mb=_floats(args.first_buckets, "--first-buckets"),
                 views=_bools(args.bucket_views, "--bucket-views"),
                 static_graphs=_bools(args.static_graphs, "--static-graphs"),
                 allow_lossy=args.allow_lossy, powersgd_ranks=ranks)


def _add_grid_options(p):
    p.add_argument("--bucket-caps", default=",".join("%g" % v for v in DEFAULT_BUCKET_CAPS_MB),
                   help="bucket_cap_mb values (MiB)")
    p.add_argument("--first-buckets", default=",".join("%g" % v for v in DEFAULT_FIRST_BUCKETS_MB),
                   help="first bucket caps (MiB)")
    p.add_argument("--bucket-views", default="0,1", help="gradient_as_bucket_view values")
    p.add_argument("--static-graphs", default="0,1", help="static_graph values")
    p.add_argument("--allow-lossy", action="store_true",
                   help="also try the fp16 and PowerSGD hooks (they change the gradients)")
    p.add_argument("--powersgd-ranks", default=",".join(str(r) for r in DEFAULT_POWERSGD_RANKS))
    p.add_argument("--max-trials", type=int, default=None, help="points measured at most")
    p.add_argument("--output", required=True, help="folder for the result file and gdat_settings.json")


def _print(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run_simulate(args):
    desc = ModelDescription.load(args.description)
    space = _space(args)
    os.makedirs(args.output, exist_ok=True)
    writer = ResultWriter(args.output, desc.name, "simulate",
                          {"description": os.path.basename(args.description), "space": space.describe()})
    details = {}

    def evaluate(p):
        d = simulate(desc, p)
        details[p] = d
        writer.add_trial(p, d["step_ms"], {"buckets": d["buckets"], "exposed_comm(ms)": round(d["exposed_comm_ms"], 6),
                                           "comm_busy(ms)": round(d["comm_busy_ms"], 6)})
        return d["step_ms"]

    result = coordinate_search(space, evaluate, max_evals=args.max_trials)
    baseline_ms = simulate(desc, space.baseline)["step_ms"]
    if result.best_ms < baseline_ms:
        verdict = "tuning successful"
    else:
        verdict = "no improvement: DDP's defaults are the best point found"
    if args.exhaustive:
        full = exhaustive(space, lambda p: simulate(desc, p)["step_ms"])
        writer.info.update({"exhaustive_points": len(full.trials), "exhaustive_best(ms)": round(full.best_ms, 6),
                            "exhaustive_best_settings": full.best.to_dict(),
                            "found_exhaustive_optimum": abs(full.best_ms - result.best_ms) <= 1e-9 * full.best_ms})
    writer.info["search_complete"] = result.complete
    writer.write("finished", baseline_ms, result.best, result.best_ms, verdict)
    write_json_atomic(os.path.join(args.output, SETTINGS_FILE),
                      settings_document(result.best, baseline_ms, result.best_ms, "simulate", verdict))
    best = simulate(desc, result.best)
    base = simulate(desc, space.baseline)
    _print("GDAT (simulated) %s: %d layers, %.2f MiB of gradients, %d of %d points evaluated" % (
        desc.name, len(desc.layer_names), desc.total_mb, result.evaluations, len(space.points())))
    _print("  baseline %-58s %9.3f ms  %3d buckets  exposed comm %.3f ms" % (
        space.baseline.label(), baseline_ms, base["buckets"], base["exposed_comm_ms"]))
    _print("  best     %-58s %9.3f ms  %3d buckets  exposed comm %.3f ms" % (
        result.best.label(), result.best_ms, best["buckets"], best["exposed_comm_ms"]))
    if args.exhaustive:
        _print("  exhaustive optimum %.3f ms over %d points: %s" % (
            full.best_ms, len(full.trials), "found" if writer.info["found_exhaustive_optimum"] else "NOT found"))
    _print("Aoe process finished, %s: step %.3f ms -> %.3f ms (%s). Result: %s; settings: %s" % (
        verdict, baseline_ms, result.best_ms, settings_document(result.best, baseline_ms, result.best_ms, "", "")[
            "improvement"], writer.path, os.path.join(args.output, SETTINGS_FILE)))
    return 0


INPUT_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32")


def parse_input_spec(text):
    """'8x3x32x32' or 'int64:8x128' (comma list allowed) -> [(dtype, [dims])]."""
    out = []
    for part in text.split(","):
        part = part.strip()
        dtype = "float32"
        if ":" in part:
            dtype, part = part.split(":", 1)
        if dtype not in INPUT_DTYPES:
            raise UsageError("--input: unknown dtype '%s' (one of %s)" % (dtype, ", ".join(INPUT_DTYPES)))
        try:
            dims = [int(d) for d in part.lower().split("x")]
        except ValueError:
            raise UsageError("--input: '%s' is not a shape like 8x3x32x32" % part)
        if not dims or min(dims) < 1:
            raise UsageError("--input: '%s' is not a shape like 8x3x32x32" % part)
        out.append((dtype, dims))
    return out


def _factory(spec):
    if ":" not in spec:
        raise UsageError("--model: expected pkg.module:callable, got '%s'" % spec)
    mod_name, attr = spec.split(":", 1)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:
        raise UsageError("--model: cannot import '%s': %s" % (mod_name, e))
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise UsageError("--model: '%s' has no callable '%s'" % (mod_name, attr))
    return fn


def _default_loss(model, batch):
    out = model(*batch)
    outs = list(out.values()) if isinstance(out, dict) else list(out) if isinstance(out, (tuple, list)) else [out]
    total = None
    for o in outs:
        if hasattr(o, "is_floating_point") and o.is_floating_point():
            term = o.float().pow(2).mean()
            total = term if total is None else total + term
    if total is None:
        raise RuntimeError("the model's output has no floating-point tensor to make a loss from")
    return total


def run_train(args):
    if args.nproc < 1:
        raise UsageError("--nproc must be >= 1")
    if args.warmup < 1 or args.measure < 1:
        raise UsageError("--warmup and --measure must be >= 1")
    inputs = []
    for spec in args.input:
        inputs.extend(parse_input_spec(spec))
    if not inputs:
        raise UsageError("--input: give the shape of the model's inputs, e.g. --input 8x3x32x32")
    factory = _factory(args.model)
    space = _space(args)
    os.makedirs(args.output, exist_ok=True)
    from .launch import LaunchError, run_ranks

    def rank_fn(rank, world):
        import torch

        from .online import tune_ddp

        torch.manual_seed(args.seed)
        module = factory()
        if not isinstance(module, torch.nn.Module):
            raise TypeError("--model %s returned %s, not a torch.nn.Module" % (args.model, type(module).__name__))
        device = torch.device("cpu")
        ddp_kwargs = {}
        if args.device_type:
            # The backend's device, as the target data names it (portkit tune passes it).
            device_module = getattr(torch, args.device_type)
            device = torch.device(args.device_type, rank % max(1, device_module.device_count()))
            device_module.set_device(device)
            ddp_kwargs["device_ids"] = [device.index]
        module = module.to(device)

        def make_batch(step):
            g = torch.Generator().manual_seed(args.seed * 1000003 + rank * 7919 + step)
            batch = []
            for dtype, dims in inputs:
                dt = getattr(torch, dtype)
                if dt.is_floating_point:
                    t = torch.randn(dims, generator=g).to(dt)
                else:
                    t = torch.randint(0, args.int_high, dims, generator=g, dtype=dt)
                batch.append(t.to(device))
            return batch

        log = (lambda m: _print(m)) if rank == 0 else None
        ddp, opt, report = tune_ddp(module, make_batch, _default_loss,
                                    lambda params: torch.optim.SGD(params, lr=args.lr), space=space,
                                    warmup=args.warmup, measure=args.measure, max_trials=args.max_trials,
                                    output_dir=args.output if rank == 0 else None,
                                    tuning_name=args.model, log=log, **ddp_kwargs)
        if rank == 0:
            _print("Aoe process finished, %s: step %.3f ms -> %.3f ms. Result: %s; settings: %s" % (
                report["verdict"], report["baseline_ms"], report["result_ms"], report.get("result_file"),
                os.path.join(args.output, SETTINGS_FILE)))

    try:
        run_ranks(rank_fn, args.nproc, backend=args.backend, timeout_s=args.timeout,
                  device_import=args.device_import)
    except LaunchError as e:
        sys.stderr.write(str(e) + "\n")
        return EXIT_FAILURE
    return 0


def run_describe(args):
    inputs = []
    for spec in args.input:
        inputs.extend(parse_input_spec(spec))
    if not inputs:
        raise UsageError("--input: give the shape of the model's inputs, e.g. --input 8x3x32x32")
    if (args.alpha_ms is None) != (args.beta_ms_per_mb is None):
        raise UsageError("--alpha-ms and --beta-ms-per-mb go together")
    if args.alpha_ms is not None and (args.alpha_ms < 0 or args.beta_ms_per_mb < 0):
        raise UsageError("--alpha-ms and --beta-ms-per-mb must be >= 0")
    if args.repeats < 1:
        raise UsageError("--repeats must be >= 1")
    factory = _factory(args.model)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(out_dir, exist_ok=True)
    comm = None
    if args.alpha_ms is not None:
        comm = {"alpha_ms": args.alpha_ms, "beta_ms_per_mb": args.beta_ms_per_mb}
    elif args.measure_comm:
        # Measured first: the ranks are forked, and this process must not have run an operator yet.
        import json
        import tempfile

        from .describe import measure_allreduce
        from .launch import LaunchError, run_ranks

        fd, tmp = tempfile.mkstemp(prefix=".gdat_comm.", suffix=".tmp", dir=out_dir)
        os.close(fd)

        def rank_fn(rank, world):
            figures = measure_allreduce(world)
            if rank == 0:
                write_json_atomic(tmp, figures)

        try:
            run_ranks(rank_fn, args.nproc, backend=args.backend, timeout_s=300, device_import=args.device_import)
            with open(tmp, encoding="utf-8") as f:
                comm = json.load(f)
        except LaunchError as e:
            sys.stderr.write(str(e) + "\n")
            return EXIT_FAILURE
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    import torch

    from .describe import describe_model

    torch.manual_seed(args.seed)
    module = factory()
    if not isinstance(module, torch.nn.Module):
        raise UsageError("--model %s returned %s, not a torch.nn.Module" % (args.model, type(module).__name__))
    g = torch.Generator().manual_seed(args.seed)
    batch = []
    for dtype, dims in inputs:
        dt = getattr(torch, dtype)
        batch.append(torch.randn(dims, generator=g).to(dt) if dt.is_floating_point
                     else torch.randint(0, args.int_high, dims, generator=g, dtype=dt))
    doc = describe_model(module, batch, lambda out: _default_loss(lambda *a: out, []), name=args.model,
                         repeats=args.repeats, comm=comm)
    ModelDescription(doc, where=args.output)  # what --simulate will accept
    write_json_atomic(args.output, doc)
    _print("GDAT description of %s: %d layers, forward %.3f ms, backward %.3f ms, optimizer %.3f ms, comm alpha %g ms "
           "beta %g ms/MiB%s -> %s" % (args.model, len(doc["layers"]), doc["forward_ms"],
                                         sum(layer["backward_ms"] for layer in doc["layers"]), doc["optimizer_ms"],
                                         doc["comm"]["alpha_ms"], doc["comm"]["beta_ms_per_mb"],
                                         "" if comm else " (not given: set comm before --simulate)", args.output))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m portkit.gdat", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    ps = sub.add_parser("simulate", help="tune on a cost-model description")
    ps.add_argument("description", help="model description JSON (docs/tune.md, GDAT)")
    ps.add_argument("--exhaustive", action="store_true", help="also evaluate every point and say if the search found the optimum")
    _add_grid_options(ps)
    pt = sub.add_parser("train", help="tune real DDP training over its first steps")
    pt.add_argument("--model", required=True, help="pkg.module:callable returning an nn.Module")
    pt.add_argument("--input", action="append", default=[], help="input shape(s), e.g. 8x32 or int64:8x16")
    pt.add_argument("--nproc", type=int, default=2)
    pt.add_argument("--backend", default="gloo", help="process-group backend (portkit tune checks it against the target data)")
    pt.add_argument("--device-type", default="", help="device of the backend's ranks (empty: the CPU)")
    pt.add_argument("--device-import", default="", help="module to import in each rank before the process group starts")
    pt.add_argument("--warmup", type=int, default=2, help="untimed steps after each rebuild")
    pt.add_argument("--measure", type=int, default=5, help="timed steps per point (median)")
    pt.add_argument("--lr", type=float, default=0.01)
    pt.add_argument("--seed", type=int, default=0)
    pt.add_argument("--int-high", type=int, default=16, help="integer inputs are drawn from [0, N)")
    pt.add_argument("--timeout", type=float, default=600.0, help="seconds before a stuck rank is ended")
    _add_grid_options(pt)
    pd = sub.add_parser("describe", help="measure a cost-model description of a model on this machine")
    pd.add_argument("--model", required=True)
    pd.add_argument("--input", action="append", default=[])
    pd.add_argument("--output", required=True, help="description JSON to write")
    pd.add_argument("--alpha-ms", type=float, default=None, help="all-reduce latency of the cluster to simulate")
    pd.add_argument("--beta-ms-per-mb", type=float, default=None, help="all-reduce ms per MiB of that cluster")
    pd.add_argument("--measure-comm", action="store_true", help="measure alpha and beta with --nproc local ranks")
    pd.add_argument("--nproc", type=int, default=2)
    pd.add_argument("--backend", default="gloo", help="process-group backend of --measure-comm")
    pd.add_argument("--device-import", default="", help="module to import in each rank before the process group starts")
    pd.add_argument("--repeats", type=int, default=5)
    pd.add_argument("--seed", type=int, default=0)
    pd.add_argument("--int-high", type=int, default=16)
    args = parser.parse_args(argv)
    try:
        if args.command == "simulate":
            return run_simulate(args)
        if args.command == "train":
            return run_train(args)
        if args.command == "describe":
            return run_describe(args)
        parser.print_help()
        return EXIT_USAGE
    except (UsageError, DescriptionError, ValueError) as e:
        sys.stderr.write("error: %s\n" % e)
        return EXIT_USAGE
    except OSError as e:
        sys.stderr.write("error: %s\n" % e)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
