"""Companion of ``portkit tune --framework=pytorch`` (also usable alone)::

    python -m portkit.tune --model pkg.module:make_model --input 8x3x224x224[,int64:8x128] \
        --output DIR [--bank DIR] [--lookup-only] [--repeat-tune] [--job-type 1|2 [--portkit BIN] [--max-evals N]]
        [--no-compile] [--threads N] [--time-budget SECONDS]
        [--precision fp32|bf16|int8-dynamic [--max-rel-err E] [--min-cosine C]]

``--model`` names a callable (``module:attr``, imported with the current folder on sys.path)
returning an ``nn.Module``. ``--input`` lists the example inputs, comma-separated, each
``[DTYPE:]D0xD1x...[:LOW..HIGH]`` (float32 by default). Values are drawn uniformly from
[LOW, HIGH) when a range is given (``int64:8x16:0..50`` for an ``nn.Embedding(50)``); without one,
floating-point inputs are standard normal and integer inputs are drawn from [0, 100).
``--precision`` (default fp32) opts in to lower-precision whole-model candidates, each accepted only
when its outputs on the example inputs keep ``--max-rel-err`` / ``--min-cosine`` against fp32 eager.
Progress goes to stderr; a one-line JSON summary to stdout. Exit 0 done, 1 tuning failed,
2 bad arguments (module not importable, bad --input).
"""
import argparse
import importlib
import json
import os
import sys

DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


class UsageError(Exception):
    pass


def _parse_range(part, dtype, text):
    """'0..50' -> (0, 50) for integer dtypes, (0.0, 50.0) for floating ones; UsageError otherwise."""
    low, sep, high = text.partition("..")
    integer = dtype not in ("float32", "float64", "float16", "bfloat16")
    try:
        if not sep:
            raise ValueError
        low, high = (int(low), int(high)) if integer else (float(low), float(high))
    except ValueError:
        raise UsageError("--input %r: expected a value range LOW..HIGH (%s) after the dimensions, like %s"
                         % (part, "integers" if integer else "numbers", "0..50" if integer else "-1.5..1.5"))
    if dtype == "bool":
        raise UsageError("--input %r: a bool input takes no value range" % part)
    if not low < high:
        raise UsageError("--input %r: the range %s is empty (values are drawn from [LOW, HIGH), LOW < HIGH)"
                         % (part, text))
    return low, high


def parse_inputs(spec):
    """'8x3x32x32,int64:8x16:0..50' -> [(dtype name, shape, (low, high) or None), ...]; UsageError
    naming the bad part."""
    out = []
    if not spec or not spec.strip():
        raise UsageError("--input: empty; give shapes like 8x3x224x224 or int64:8x128")
    for part in spec.split(","):
        part = part.strip()
        fields = part.split(":")
        if len(fields) > 3:
            raise UsageError("--input %r: expected [DTYPE:]D0xD1x...[:LOW..HIGH]" % part)
        value_range = fields.pop() if len(fields) > 1 and ".." in fields[-1] else None
        if len(fields) > 2:
            raise UsageError("--input %r: expected [DTYPE:]D0xD1x...[:LOW..HIGH]" % part)
        dtype, dims = (fields[0], fields[1]) if len(fields) == 2 else ("float32", fields[0])
        if dtype not in DTYPES:
            raise UsageError("--input %r: unknown dtype %r (one of %s)" % (part, dtype, ", ".join(DTYPES)))
        try:
            shape = [int(d) for d in dims.lower().split("x")]
        except ValueError:
            raise UsageError("--input %r: expected dimensions like 8x3x224x224" % part)
        if not shape or any(d <= 0 for d in shape):
            raise UsageError("--input %r: every dimension must be a positive integer" % part)
        n = 1
        for d in shape:
            n *= d
        if n > (1 << 30):
            raise UsageError("--input %r: %d elements is too large" % (part, n))
        out.append((dtype, shape, _parse_range(part, dtype, value_range) if value_range is not None else None))
    return out


def make_inputs(parsed, seed=0):
    """Example tensors for parse_inputs' specs, from a fixed seed (the same inputs every run)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    tensors = []
    for dtype, shape, value_range in parsed:
        dt = getattr(torch, dtype)
        if dt.is_floating_point:
            if value_range is None:
                tensors.append(torch.randn(*shape, generator=g).to(dt))
            else:
                low, high = value_range
                tensors.append((torch.rand(*shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dt))
        elif dt == torch.bool:
            tensors.append(torch.randint(0, 2, shape, generator=g).bool())
        else:
            low, high = value_range if value_range is not None else (0, 100)
            info = torch.iinfo(dt)
            if low < info.min or high - 1 > info.max:
                raise UsageError("the range %d..%d does not fit %s (%d..%d)" % (low, high, dtype, info.min,
                                                                                info.max + 1))
            tensors.append(torch.randint(low, high, shape, generator=g).to(dt))
    return tuple(tensors)


def load_factory(spec):
    import torch

    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise UsageError("--model %r: expected pkg.module:factory" % spec)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(mod_name)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's module
        raise UsageError("--model %s: cannot import %s (%s: %s)" % (spec, mod_name, type(e).__name__, e))
    factory = module
    for part in attr.split("."):
        if not hasattr(factory, part):
            raise UsageError("--model %s: %s has no attribute %r" % (spec, mod_name, attr))
        factory = getattr(factory, part)
    model = factory() if callable(factory) and not isinstance(factory, torch.nn.Module) else factory
    if not isinstance(model, torch.nn.Module):
        raise UsageError("--model %s: returned %s, not a torch.nn.Module" % (spec, type(model).__name__))
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m portkit.tune", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True, action="append",
                    help="example inputs: comma list of [DTYPE:]D0xD1x...[:LOW..HIGH] (repeatable)")
    ap.add_argument("--output", required=True)
    ap.add_argument("--bank", default=None, help="knowledge-base folder (default $TUNE_BANK_PATH, else ~/.cache/portkit)")
    ap.add_argument("--lookup-only", action="store_true")
    ap.add_argument("--max-string-mb", type=int, default=1,
                    help="a bank entry holding a longer string is ignored, never loaded (0: no cap)")
    ap.add_argument("--repeat-tune", action="store_true")
    ap.add_argument("--job-type", type=int, default=1,
                    help="1 = SGAT; 2 = OPAT kernels for the model's Linear layers, then SGAT with them as a candidate")
    ap.add_argument("--portkit", default=None, help="the portkit binary (job type 2 runs portkit tune --job-type=2)")
    ap.add_argument("--max-evals", type=int, default=None, help="job type 2: candidates per kernel (portkit tune's)")
    ap.add_argument("--no-compile", action="store_true", help="do not try torch.compile (torch 2.x)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=None, help="pin the intra-op thread count (default: tuned)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--min-sample-ms", type=float, default=2.0)
    ap.add_argument("--time-budget", type=float, default=None,
                    help="seconds the tuning may take (default: portkit.tune's, 120; 0: no bound)")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "int8-dynamic"),
                    help="fp32 (default): no lower-precision candidate; bf16 or int8-dynamic: try them too")
    ap.add_argument("--max-rel-err", type=float, default=None,
                    help="accuracy check: largest max|out - fp32| / max|fp32| accepted (default per mode)")
    ap.add_argument("--min-cosine", type=float, default=None,
                    help="accuracy check: smallest cosine similarity with fp32's output accepted (default per mode)")
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError as e:
        sys.stderr.write("portkit tune: error: %s cannot import torch (%s); give --python with an interpreter "
                         "that has torch, or set PORTKIT_PYTHON\n" % (sys.executable, e))
        return 2
    try:
        if args.job_type not in (1, 2):
            raise UsageError("--job-type=%d: with --framework=pytorch 1 (SGAT) and 2 (OPAT kernels inside the model, "
                             "with SGAT) are implemented; 4 (GDAT) has its own options" % args.job_type)
        if args.job_type == 2 and not args.portkit:
            raise UsageError("--job-type=2 needs --portkit PATH (the binary that tunes the kernels)")
        if args.max_evals is not None and args.max_evals < 1:
            raise UsageError("--max-evals must be at least 1")
        if args.rounds < 3 or args.warmup < 0:
            raise UsageError("--rounds must be at least 3 and --warmup at least 0")
        if args.max_string_mb < 0:
            raise UsageError("--max-string-mb must be 0 (no cap) or more")
        if args.threads is not None and args.threads < 1:
            raise UsageError("--threads must be at least 1")
        if args.time_budget is not None and not args.time_budget >= 0:
            raise UsageError("--time-budget must be a number of seconds (0: no bound)")
        if args.precision == "fp32" and (args.max_rel_err is not None or args.min_cosine is not None):
            raise UsageError("--max-rel-err and --min-cosine apply to --precision bf16 or int8-dynamic only")
        if args.max_rel_err is not None and not args.max_rel_err >= 0:
            raise UsageError("--max-rel-err must be a number at least 0")
        if args.min_cosine is not None and not -1 <= args.min_cosine <= 1:
            raise UsageError("--min-cosine must be a number between -1 and 1")
        parsed = parse_inputs(",".join(args.input))
        model = load_factory(args.model)
        inputs = make_inputs(parsed)
    except UsageError as e:
        sys.stderr.write("portkit tune: error: %s\n" % e)
        return 2
    import torch

    from . import TuneError, optimize
    from .sgat import DEFAULT_TIME_BUDGET_S

    budget = DEFAULT_TIME_BUDGET_S if args.time_budget is None else (args.time_budget or None)

    try:
        with torch.no_grad():
            model.eval()(*inputs)
    except Exception as e:  # noqa: BLE001 - the inputs do not fit the model: a usage error
        hint = ""
        if any(value_range is None and dtype not in ("float32", "float64", "float16", "bfloat16", "bool")
               for dtype, _, value_range in parsed):
            hint = ("; integer inputs are drawn from [0, 100) unless the input gives a range, "
                    "e.g. int64:8x16:0..50")
        sys.stderr.write("portkit tune: error: --model %s does not run on --input %s: %s: %s%s\n"
                         % (args.model, ",".join(args.input), type(e).__name__,
                            str(e).splitlines()[0] if str(e) else "", hint))
        return 2
    try:
        _, report = optimize(model, inputs, bank=args.bank, lookup_only=args.lookup_only,
                             repeat_tune=True if args.repeat_tune else None, output=args.output,
                             use_compile=False if args.no_compile else None, rounds=args.rounds,
                             warmup=args.warmup, min_sample_s=args.min_sample_ms / 1e3,
                             tuning_name=args.model, threads=args.threads,
                             job_types=("sgat", "opat") if args.job_type == 2 else ("sgat",),
                             portkit=args.portkit, opat_max_evals=args.max_evals, time_budget=budget,
                             max_bank_string_mb=args.max_string_mb, precision=args.precision,
                             accuracy={k: v for k, v in (("max_rel_err", args.max_rel_err),
                                                         ("min_cosine", args.min_cosine)) if v is not None})
    except TuneError as e:
        sys.stderr.write("portkit tune: error: %s\n" % e)
        return 1
    except Exception as e:  # noqa: BLE001 - the model itself failed (wrong input shapes...)
        sys.stderr.write("portkit tune: error: running %s on %s failed: %s: %s\n"
                         % (args.model, ",".join(args.input), type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
        return 1
    summary = {k: report.get(k) for k in ("plan", "baseline", "result", "speedup", "speedup_ci95", "repo_summary",
                                          "tuned", "artifact", "result_file", "seconds", "cost", "final_race")}
    if "opat_kernels" in report:
        summary["opat_kernels"] = report["opat_kernels"]
    if "precision" in report:
        summary["precision"] = report["precision"]
    summary["model_bank"] = report.get("model_repo")
    sys.stdout.write(json.dumps(summary, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
