"""SGAT for PyTorch models: capture, split, tune each subgraph's strategy, assemble, verify, save.

See docs/tune.md ("PyTorch models") for the user contract; ``optimize`` is the entry point.
"""
import copy
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import torch

from .. import __version__ as PORTKIT_VERSION
from .. import safe_load
from . import blas as blas_mod
from . import candidates as cands
from . import ort
from . import ov
from .bank import Bank, BankError, default_bank_dir
from .capture import capture, input_signature, structural_hash, subgraph_inputs
from .measure import DEFAULT_MARGIN, measure_interleaved, paired_ratio, significantly_faster, thread_switcher
from .result import ResultFile, result_file_name, write_atomic

ARTIFACT = "optimized.pt"
PLAN = "optimized.json"
#: The plan's record of the files load() reads: {name inside the artifact folder: SHA-256 (hex)}.
HASHES = "sha256"
#: The artifact's copies of the OPAT kernels its plan calls.
KERNELS = "kernels"
#: An eager plan's module as torch.save wrote it (what portkit.tune.load returns for that plan).
EAGER_MODULE = "optimized_module.pt"
MODEL_STRATEGIES = ("eager", "script_freeze", "optimize_for_inference", "torch_compile", "torch_compile_autotune",
                    "composite", "composite_ofi", "composite_eager", "blocks", "fx_fused", ort.STRATEGY,
                    ov.STRATEGY)

#: Whole-model strategies assembled from the per-subgraph (or per-block) choices.
COMPOSITES = ("composite", "composite_ofi", "composite_eager", "blocks")

#: Whole-model strategies whose module runs eagerly (no TorchScript): the artifact holds it as
#: torch.save wrote it (EAGER_MODULE), which portkit.tune.load returns; optimized.pt is TorchScript
#: for torch.jit.load.
PICKLED_STRATEGIES = ("eager", "fx_fused", "composite_eager", "blocks") + tuple(cands.LOWP_STRATEGIES)


#: Whole-model paths that are torch's own (eager at the plan's thread count counts as one).
BUILTIN_STRATEGIES = ("eager", "script_freeze", "optimize_for_inference", "torch_compile", "torch_compile_autotune",
                      ort.STRATEGY, ov.STRATEGY)

#: Whole-model strategies that run in a runtime of their own, with its own thread pool (no
#: TorchScript, no BLAS count of torch's): built per thread count, saved in the runtime's format.
RUNTIME_STRATEGIES = (ort.STRATEGY, ov.STRATEGY)

#: Whole-model strategies that are torch.compile, and the compile settings each uses (None: the
#: ``compile_mode`` given to optimize, torch.compile's default when that is None too).
COMPILE_STRATEGIES = {"torch_compile": None, "torch_compile_autotune": "max-autotune-freeze"}


class TuneError(Exception):
    pass


#: How long (seconds) a candidate's threads keep a core busy after a call, measured on the 2-core
#: VM (docs/tune.md, "Spinning thread pools"): an ONNX Runtime session that spins its idle
#: threads (its default) about 45 ms; torch's OpenMP pool (eager, TorchScript, inductor) 6-9 ms;
#: OpenVINO and ONNX Runtime without spinning none. Interleaved timing sleeps this long before
#: the next candidate's sample (measure_interleaved's ``settle``).
ORT_SPIN_SETTLE_S, TORCH_SETTLE_S = 0.05, 0.01


def settle_time(module):
    """The pause owed after a call of ``module`` before another candidate is timed."""
    if isinstance(module, ort.OrtModule):
        return 0.0 if module.options.get("spin") is False else ORT_SPIN_SETTLE_S
    if isinstance(module, ov.OvModule):
        return 0.0
    return TORCH_SETTLE_S


def settle_of_setting(name):
    """settle_time of an ONNX Runtime session known by its setting name (ort.setting_name)."""
    return 0.0 if "nospin" in name.split("/") else ORT_SPIN_SETTLE_S


def _progress(msg):
    sys.stderr.write("[portkit tune] %s\n" % msg)
    sys.stderr.flush()


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _validators(threads, precision="fp32"):
    doc = {"torch": torch.__version__, "cpu": cpu_model(), "cores": os.cpu_count(), "threads": threads,
           "strategies": cands.STRATEGY_SET_VERSION, "portkit": PORTKIT_VERSION}
    if precision != "fp32":
        doc["precision"] = precision  # a lower-precision plan is never found by an fp32 run
    return json.dumps(doc, sort_keys=True)


def _flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in _flatten(out[k])]
    return []


def outputs_match(got, want, rtol=1e-4, atol=1e-5):
    """fp32 tolerance: |got - want| <= atol * max(1, max|want|) + rtol * |want| elementwise."""
    g, w = _flatten(got), _flatten(want)
    if len(g) != len(w):
        return False, "%d outputs instead of %d" % (len(g), len(w))
    for i, (a, b) in enumerate(zip(g, w)):
        if a.shape != b.shape:
            return False, "output %d has shape %s instead of %s" % (i, tuple(a.shape), tuple(b.shape))
        a = a.to_dense() if a.layout != torch.strided else a
        a, b = a.detach().double(), b.detach().double()
        scale = max(1.0, float(b.abs().max())) if b.numel() else 1.0
        diff = (a - b).abs() - rtol * b.abs()
        worst = float(diff.max()) if diff.numel() else 0.0
        if not worst <= atol * scale:
            return False, "output %d differs from eager by %.3g (tolerance %.3g)" % (i, worst, atol * scale)
    return True, ""


#: What the accuracy check of a lower-precision candidate measures (docs/tune.md, "Lower precision").
ACCURACY_METRIC = ("max_rel_err: max|out - fp32| / max|fp32| of each output, the worst output; cosine: cosine "
                   "similarity of each flattened output with fp32's, the worst output; on the example inputs, "
                   "against fp32 eager")


def accuracy(got, want):
    """({"max_rel_err": e, "cosine": c}, "") of ``got`` against the fp32 outputs ``want``, the worst
    output of each; (None, why) when the outputs do not correspond (count, shape) or are not finite."""
    g, w = _flatten(got), _flatten(want)
    if len(g) != len(w):
        return None, "%d outputs instead of %d" % (len(g), len(w))
    worst_rel, worst_cos = 0.0, 1.0
    for i, (a, b) in enumerate(zip(g, w)):
        if a.shape != b.shape:
            return None, "output %d has shape %s instead of %s" % (i, tuple(a.shape), tuple(b.shape))
        a = a.to_dense() if a.layout != torch.strided else a
        a, b = a.detach().double().flatten(), b.detach().double().flatten()
        if not a.numel():
            continue
        if not bool(torch.isfinite(a).all()):
            return None, "output %d has non-finite values" % i
        diff = float((a - b).abs().max())
        scale = float(b.abs().max())
        worst_rel = max(worst_rel, diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf")))
        na, nb = float(a.norm()), float(b.norm())
        cos = 1.0 if na == nb == 0 else (float((a * b).sum()) / (na * nb) if na > 0 and nb > 0 else 0.0)
        worst_cos = min(worst_cos, cos)
    return {"max_rel_err": worst_rel, "cosine": worst_cos}, ""


def accuracy_ok(metrics, thresholds):
    """(ok, why) of accuracy() metrics against {"max_rel_err": at most, "min_cosine": at least}."""
    if metrics["max_rel_err"] > thresholds["max_rel_err"]:
        return False, "max relative error %.4g > %.4g" % (metrics["max_rel_err"], thresholds["max_rel_err"])
    if metrics["cosine"] < thresholds["min_cosine"]:
        return False, "cosine similarity %.6f < %.6f" % (metrics["cosine"], thresholds["min_cosine"])
    return True, ""


class Plan:
    """What the artifact is: the whole-model strategy, per-subgraph strategies, thread count (and
    BLAS thread count where the BLAS library has a pool of its own), precision."""

    def __init__(self, strategy, threads, subgraphs=None, compile_mode=None, ort_options=None, blas_threads=None,
                 accuracy=None, subgraph_options=None):
        self.strategy = strategy
        self.subgraph_options = subgraph_options or {}  # part -> ONNX Runtime options of its session
        self.threads = threads
        self.subgraphs = subgraphs or {}
        self.compile_mode = compile_mode
        self.ort_options = ort_options  # ONNX Runtime's session settings of an onnxruntime plan
        self.blas_threads = blas_threads  # None: no separate BLAS pool (torch's count governs BLAS)
        self.precision = cands.LOWP_STRATEGIES.get(strategy, "fp32")
        self.accuracy = accuracy  # accuracy() of a lower-precision plan on the example inputs

    def to_json(self):
        doc = {"strategy": self.strategy, "threads": self.threads, "subgraphs": self.subgraphs,
               "compile_mode": self.compile_mode}
        if self.ort_options is not None:
            doc["ort_options"] = self.ort_options
        if self.subgraph_options:
            doc["subgraph_options"] = self.subgraph_options
        if self.blas_threads is not None:
            doc["blas_threads"] = self.blas_threads
        if self.precision != "fp32":
            doc["precision"] = self.precision
            doc["accuracy"] = self.accuracy
        return doc


def _build_composite(cap, choices, sub_inputs, inputs):
    """TorchScript (not frozen) of the split model with each subgraph prepared by its chosen
    strategy; the finishing pass (freeze / optimize_for_inference) runs over the whole of it."""
    import torch.fx

    parts = {}
    for name, sub in cap.split.named_children():
        if name not in cap.names:
            continue
        strategy = choices.get(name, "eager")
        if strategy in cands.EAGER_ONLY:
            strategy = "eager"  # not TorchScript: torch's own ops inside a TorchScript composite
        prepare = cands.STRATEGIES[strategy][0]
        sub = copy.deepcopy(sub)
        if strategy in cands.OPAT_STRATEGIES:
            try:
                parts[name] = prepare(sub, sub_inputs[name])
            except ValueError:
                # A bank hit whose kernel this run did not route (it no longer beats torch's op
                # here): the subgraph runs on torch's own ops.
                parts[name] = sub
            continue
        parts[name] = sub if prepare is None else prepare(sub, sub_inputs[name])
    # What the split's own graph reads besides its subgraphs (the parameters of a module whose
    # forward the trace went through, such as a BatchNorm subclass): a dict root names each by
    # its full target.
    _split_extras(cap, parts)
    # A new GraphModule (a new class): TorchScript caches a class's attribute types, so reusing the
    # split's class with other children types fails to compile.
    comp = torch.fx.GraphModule(parts, copy.deepcopy(cap.split.graph))
    try:
        return torch.jit.trace(comp, tuple(inputs), check_trace=False)
    except Exception:  # noqa: BLE001
        return torch.jit.script(comp)


def _split_extras(cap, parts):
    """Adds to `parts` what the split's own graph reads besides its subgraphs, by full target."""
    for node in cap.split.graph.nodes:
        if node.op in ("get_attr", "call_module") and node.target not in parts:
            obj = cap.split
            for attr in node.target.split("."):
                obj = getattr(obj, attr)
            parts[node.target] = copy.deepcopy(obj)
    return parts


def _options_at(options, threads):
    """A part's recorded ONNX Runtime options at the plan's thread count."""
    return None if not options else dict(options, intra_op_num_threads=int(threads or torch.get_num_threads()))


def _build_composite_eager(cap, choices, sub_inputs, options, threads):
    """The split model run eagerly (an fx GraphModule), each subgraph its chosen strategy on its
    own: TorchScript finished per subgraph, fx_fused, or an ONNX Runtime session at ``threads``."""
    import torch.fx

    parts = {}
    for name, sub in cap.split.named_children():
        if name not in cap.names:
            continue
        strategy = choices.get(name, "eager")
        parts[name] = cands.build_part(strategy, copy.deepcopy(sub), sub_inputs[name], threads,
                                       _options_at(options.get(name), threads))
    return torch.fx.GraphModule(_split_extras(cap, parts), copy.deepcopy(cap.split.graph)).eval()


def _build_blocks(model, blocks, choices, options, threads):
    """A copy of a model torch.fx could not trace whole, each tuned block replaced by its chosen
    strategy's module (portkit.tune.blocks.BlockCall: any other call runs the original block)."""
    from .blocks import BlockCall

    out = copy.deepcopy(model)
    replaced = 0
    for b in blocks:
        strategy = choices.get(b.path, "eager")
        if strategy == "eager":
            continue
        tuned = cands.build_part(strategy, copy.deepcopy(b.module), b.inputs, threads,
                                 _options_at(options.get(b.path), threads))
        parent_path, _, leaf = b.path.rpartition(".")
        parent = out.get_submodule(parent_path) if parent_path else out
        original = getattr(parent, leaf) if not leaf.isdigit() else parent[int(leaf)]
        setattr(parent, leaf, BlockCall(tuned, original, b.spec))
        replaced += 1
    if not replaced:
        raise TuneError("no block has a strategy other than eager")
    return out.eval()


def model_variant(strategy, model, cap, choices, sub_inputs, inputs):
    """(TorchScript not yet finished, finish name) of a whole-model strategy; raises when it does
    not apply. "eager" is the model itself, saved as unfrozen TorchScript."""
    if strategy == "eager":
        return cands.script_or_trace(model, inputs), "none"
    if strategy in ("script_freeze", "optimize_for_inference"):
        prepare, finish, _ = cands.STRATEGIES[strategy]
        return prepare(model, inputs), finish
    if strategy in ("composite", "composite_ofi"):
        if not cap.traced:
            raise TuneError("the model was not captured by torch.fx")
        ts = _build_composite(cap, choices, sub_inputs, inputs)
        return ts, "freeze" if strategy == "composite" else "optimize_for_inference"
    if strategy in ("composite_eager", "blocks"):
        raise TuneError("%s runs eagerly (ONNX Runtime sessions, oneDNN weights): no TorchScript" % strategy)
    if strategy in cands.LOWP_STRATEGIES:
        built = cands.build_lowp(strategy, eager_module(model, cap))
        ts = cands.lowp_torchscript(strategy, built, inputs)
        with torch.no_grad():
            ok, why = outputs_match(ts(*inputs), built(*inputs))
        if not ok:
            raise TuneError("its TorchScript does not reproduce the module (%s)" % why)
        return ts, "none"
    raise TuneError("unknown strategy %r" % strategy)


def build_model_strategy(strategy, model, cap, choices, sub_inputs, inputs, compile_mode=None, threads=None,
                         options=None):
    """The runnable module for a whole-model strategy (an exception when it does not apply).
    ``threads``: the intra-op thread count a torch.compile strategy's kernels are generated for
    and ONNX Runtime parts run at (None: torch's count at the first call); TorchScript strategies
    run at any count. ``options``: {part: ONNX Runtime options} of the parts that run on it."""
    if strategy == "composite_eager":
        if cap is None or not cap.traced:
            raise TuneError("the model was not captured by torch.fx")
        return _build_composite_eager(cap, choices, sub_inputs, options or {}, threads)
    if strategy == "blocks":
        if cap is None or not getattr(cap, "blocks", None):
            raise TuneError("no blocks were tuned separately")
        return _build_blocks(model, cap.blocks, choices, options or {}, threads)
    if strategy == "eager":
        return eager_module(model, cap)
    if strategy in cands.LOWP_STRATEGIES:
        return cands.build_lowp(strategy, eager_module(model, cap))
    if strategy == "fx_fused":
        if cap is None or not cap.traced:
            raise TuneError("the model was not captured by torch.fx")
        return cands.build_fx_fused(cap.gm, inputs)
    if strategy in COMPILE_STRATEGIES:
        if not cands.torch_compile_available():
            raise TuneError("torch.compile needs torch 2.x")
        # The model itself: compiling the split graph would make every subgraph a graph break.
        return cands.compile_module(model, COMPILE_STRATEGIES[strategy] or compile_mode, threads)
    ts, finish = model_variant(strategy, model, cap, choices, sub_inputs, inputs)
    return cands.FINISHES[finish](ts)


def eager_module(model, cap):
    """What an eager plan ships and is timed as: the traced GraphModule (self-contained for torch's
    own layers), or the model itself when it was not traced."""
    return cap.gm if cap is not None and cap.traced and cap.gm is not None else model


def _roundtrip_ok(module):
    buf = io.BytesIO()
    try:
        torch.jit.save(module, buf)
        buf.seek(0)
        torch.jit.load(buf)
        return True
    except Exception:  # noqa: BLE001 - e.g. mkldnn constants of optimize_for_inference on torch 1.13
        return False


def save_artifact(output, plan, cap, model, inputs, sub_inputs, opat_kernels=None, ov_ir=None):
    """Writes OUTPUT/optimized.pt (+ optimized.json, the plan); returns the artifact path.

    TorchScript plans load with torch.jit.load. Where torch cannot serialise the finished module
    (optimize_for_inference's mkldnn weights on torch 1.13) the frozen module is saved and the plan
    names ``load_transform: optimize_for_inference``, which portkit.tune.load applies."""
    path = os.path.join(output, ARTIFACT)
    tmp = path + ".tmp%d" % os.getpid()
    load_transform = None
    artifact_note = None
    if plan.strategy == ort.STRATEGY:
        return _save_ort_artifact(output, plan, model, inputs)
    if plan.strategy == ov.STRATEGY:
        return _save_ov_artifact(output, plan, model, inputs, ov_ir)
    if plan.strategy in COMPILE_STRATEGIES:
        # Inductor output is not a file format of torch 2.x; the artifact holds the captured
        # graph and load() compiles it again (compile time on first call).
        torch.save(cap.gm if cap.traced else model, tmp)
        kind = "torch_compile"
    elif plan.strategy == "fx_fused":
        torch.jit.save(cands.portable_fx_fused(cap.gm, inputs), tmp)
        kind = "torchscript"
    else:
        try:
            ts, finish = model_variant(plan.strategy, model, cap, plan.subgraphs, sub_inputs, inputs)
        except Exception as e:  # noqa: BLE001
            if plan.strategy not in PICKLED_STRATEGIES:
                raise
            # An eager plan of a model TorchScript can neither script nor trace (dict outputs,
            # data-dependent Python): the artifact is the pickled module alone.
            ts = finish = None
            if plan.strategy in cands.LOWP_STRATEGIES or plan.strategy in COMPOSITES:
                artifact_note = ("no optimized.pt (TorchScript) for %s: %s; portkit.tune.load returns the pickled "
                                 "module %s" % (plan.strategy, _why(e), EAGER_MODULE))
        if ts is not None:
            finished = cands.FINISHES[finish](ts)
            if finish == "optimize_for_inference" and not _roundtrip_ok(finished):
                finished = cands.finish_freeze(ts)
                load_transform = "optimize_for_inference"
            torch.jit.save(finished, tmp)
        kind = "torchscript"
    artifact = ARTIFACT
    if os.path.exists(tmp):
        os.replace(tmp, path)
    else:
        artifact, kind = None, "module"
        path = os.path.join(output, EAGER_MODULE)
        if os.path.lexists(os.path.join(output, ARTIFACT)):
            os.remove(os.path.join(output, ARTIFACT))  # an earlier run's TorchScript is not this plan
    doc = dict(plan.to_json(), artifact=artifact, kind=kind, load_transform=load_transform,
               torch=torch.__version__, portkit=PORTKIT_VERSION)
    if artifact_note:
        doc["artifact_note"] = artifact_note
    if ort.STRATEGY in plan.subgraphs.values():
        doc["onnxruntime"] = ort.version()  # parts run on ONNX Runtime sessions (plan: subgraph_options)
    if plan.strategy in PICKLED_STRATEGIES:
        # TorchScript runs the model through its interpreter, which is not what was timed (nor
        # always as fast: 4 % slower on the example MLP on torch 2.8), and cannot save oneDNN's
        # reordered weights (fx_fused): portkit.tune.load returns the module that was timed,
        # optimized.pt stays for torch.jit.load.
        module_path = os.path.join(output, EAGER_MODULE)
        module_tmp = module_path + ".tmp%d" % os.getpid()
        torch.save(build_model_strategy(plan.strategy, model, cap, plan.subgraphs, sub_inputs, inputs,
                                        threads=plan.threads, options=plan.subgraph_options), module_tmp)
        os.replace(module_tmp, module_path)
        doc["module"] = EAGER_MODULE
    if any(s in cands.OPAT_STRATEGIES for s in plan.subgraphs.values()):
        # The kernels the artifact calls through torch.ops.portkit.linear: load() registers them
        # from the artifact's own copies.
        doc["opat_kernels"] = [dict({k: r[k] for k in ("m", "n", "k", "bias", "config", "routed")},
                                    so=_copy_kernel(output, r["so"]))
                               for r in (opat_kernels or []) if r.get("routed")]
    names = [artifact, doc.get("module")] + [r["so"] for r in doc.get("opat_kernels", [])]
    doc[HASHES] = {name: safe_load.sha256_of(os.path.join(output, name)) for name in names if name}
    write_atomic(os.path.join(output, PLAN), json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return path


def _save_ort_artifact(output, plan, model, inputs):
    """OUTPUT/optimized.onnx and the plan naming it, ONNX Runtime's options and version."""
    path = os.path.join(output, ort.ONNX_FILE)
    graph = ort.export(model, inputs)
    if (plan.ort_options or {}).get("fusion"):
        graph = ort.fuse(graph, plan.ort_options["fusion"])  # the graph as timed
    write_atomic(path, graph)
    doc = dict(plan.to_json(), artifact=ort.ONNX_FILE, kind=ort.STRATEGY, load_transform=None,
               torch=torch.__version__, portkit=PORTKIT_VERSION, onnxruntime=ort.version())
    doc[HASHES] = {ort.ONNX_FILE: safe_load.sha256_of(path)}
    write_atomic(os.path.join(output, PLAN), json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return path


def _save_ov_artifact(output, plan, model, inputs, ir=None):
    """OUTPUT/optimized.xml + optimized.bin (OpenVINO's IR) and the plan naming them, the compile
    settings and OpenVINO's version. ``ir``: the (graph, weights) the tuning converted and timed
    (None: converted here)."""
    paths = []
    for name, data in zip((ov.XML_FILE, ov.BIN_FILE), ir or ov.convert(model, inputs)):
        paths.append(os.path.join(output, name))
        write_atomic(paths[-1], data)
    doc = dict(plan.to_json(), artifact=ov.XML_FILE, weights=ov.BIN_FILE, kind=ov.STRATEGY, load_transform=None,
               torch=torch.__version__, portkit=PORTKIT_VERSION, openvino=ov.version(),
               ov_options=ov.options_at(plan.threads))
    doc[HASHES] = {name: safe_load.sha256_of(path) for name, path in zip((ov.XML_FILE, ov.BIN_FILE), paths)}
    write_atomic(os.path.join(output, PLAN), json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return paths[0]


def _saved_kernels(output):
    """The opat_kernels records of the plan save_artifact wrote in OUTPUT."""
    with open(os.path.join(output, PLAN), encoding="utf-8") as f:
        return json.load(f).get("opat_kernels", [])


def _copy_kernel(output, so):
    """Copies a bank kernel (and its source) into OUTPUT/kernels/; returns its name in the artifact."""
    name = os.path.join(KERNELS, os.path.basename(so))
    os.makedirs(os.path.join(output, KERNELS), exist_ok=True)
    for src, dst in ((so, name), (os.path.splitext(so)[0] + ".cc", os.path.splitext(name)[0] + ".cc")):
        if os.path.exists(src):
            tmp = os.path.join(output, dst) + ".tmp%d" % os.getpid()
            shutil.copyfile(src, tmp)
            os.chmod(tmp, 0o755 if dst.endswith(".so") else 0o644)  # opat.load_kernel refuses group/other write
            os.replace(tmp, os.path.join(output, dst))
    return name


def load(path):
    """Loads an artifact written by ``optimize`` / ``portkit tune --framework=pytorch`` in one call.

    ``path`` is OUTPUT/optimized.pt or its folder. Sets torch's intra-op thread count to the one the
    plan chose (process-wide, as torch.set_num_threads does), and the BLAS library's own thread
    count where the plan records one (``blas_threads``), and applies the plan's load transform.
    A TorchScript artifact also loads with plain ``torch.jit.load(path)`` (then at the process's
    thread count, and without the load transform when the plan has one).

    **An artifact is code**: loading it unpickles modules in full, runs TorchScript and loads the
    plan's kernels (shared objects). Load only artifacts from a trusted source. What ``load``
    checks: every file it reads is named by the plan (``optimized.json``) inside the artifact's
    folder (no absolute path, no ``..``, no link out of it) and has the SHA-256 the plan recorded
    when the artifact was saved; anything else raises :class:`TuneError` before any of it is read.
    That catches a file replaced or damaged since tuning, not a folder written by someone else
    with a plan to match. Artifacts written before the hashes were recorded are refused: tune
    again."""
    folder, name = (path, ARTIFACT) if os.path.isdir(path) else os.path.split(path)
    try:
        files = _ArtifactFiles(folder or os.curdir)
        plan = files.plan
        main = (plan["module"], "module") if plan.get("module") and plan.get("kind") != "torch_compile" \
            else (name, "artifact")
        if plan.get("kind") == ort.STRATEGY:
            main = (plan.get("artifact") or ort.ONNX_FILE, "artifact")
        if plan.get("kind") == ov.STRATEGY:
            main = (plan.get("artifact") or ov.XML_FILE, "artifact")
            files.verify(plan.get("weights") or ov.BIN_FILE, "artifact")
        # Every file is checked before the first is loaded; each is hashed again as it is loaded.
        for kernel in _routed_kernels(plan):
            files.verify(kernel["so"], "kernel")
        files.verify(*main)
        if plan.get("threads"):
            torch.set_num_threads(int(plan["threads"]))
        if isinstance(plan.get("blas_threads"), int) and plan["blas_threads"] >= 1:
            blas_mod.set_threads(plan["blas_threads"])  # a no-op where torch's count governs BLAS
        _register_kernels(files, plan)
        with files.open(*main) as f:
            if plan.get("kind") == ov.STRATEGY:
                with files.open(plan.get("weights") or ov.BIN_FILE, "artifact") as w:
                    return ov.OvModule(f.read(), w.read(), plan.get("ov_options") or ov.options_at(
                        plan.get("threads") or 1))
            if plan.get("kind") == ort.STRATEGY:
                return ort.OrtModule(f.read(), dict(plan.get("ort_options") or {}, intra_op_num_threads=int(
                    (plan.get("ort_options") or {}).get("intra_op_num_threads") or plan.get("threads") or 1)))
            if main[1] == "module":
                return _load_pickled(f).eval()
            if plan.get("kind") == "torch_compile":
                return cands.compile_module(_load_pickled(f).eval(), plan.get("compile_mode"), plan.get("threads"))
            module = torch.jit.load(f)
    except safe_load.RefusedFile as e:
        raise TuneError(str(e)) from None
    if plan.get("load_transform") == "optimize_for_inference":
        module = torch.jit.optimize_for_inference(module)
    return module


class _ArtifactFiles:
    """The plan of an artifact folder and the files it names: each read only from inside the
    folder and only with the content hash the plan recorded when the artifact was saved."""

    def __init__(self, folder):
        self.folder = folder
        plan_path = os.path.join(folder, PLAN)
        try:
            with open(plan_path, encoding="utf-8") as f:
                self.plan = json.load(f)
        except OSError as e:
            raise TuneError("%s: cannot read the artifact's plan (%s); portkit.tune.load needs the folder "
                            "optimize wrote, plan included" % (plan_path, e.strerror or e)) from None
        except ValueError as e:
            raise TuneError("%s: not valid JSON (%s)" % (plan_path, e)) from None
        if not isinstance(self.plan, dict):
            raise TuneError("%s: not an artifact plan (a JSON object)" % plan_path)
        self.hashes = self.plan.get(HASHES)
        if not isinstance(self.hashes, dict):
            raise TuneError("%s: records no %s of the artifact's files (written by an older portkit); an "
                            "artifact is code, and portkit.tune.load loads only files whose hash matches the one "
                            "recorded when it was saved: tune again to write a new artifact" % (plan_path, HASHES))

    def path(self, name, what):
        """The path of ``name`` inside the folder, refused when it leads out of it or has no hash."""
        path = safe_load.resolve_inside(self.folder, name, what)
        self.sha256(name, what)
        return path

    def sha256(self, name, what):
        digest = self.hashes.get(name)
        if not isinstance(digest, str) or len(digest) != 64:
            raise safe_load.RefusedFile("%s: the plan records no sha256 of its %s %r; not loaded (tune again)"
                                        % (os.path.join(self.folder, PLAN), what, name))
        return digest

    def open(self, name, what):
        """An open handle on ``name`` whose content matches its recorded hash."""
        return safe_load.open_verified(self.path(name, what), self.sha256(name, what))

    def verify(self, name, what):
        self.open(name, what).close()


def register_kernels(folder):
    """Registers the OPAT kernels the artifact in ``folder`` calls (what ``load`` does first), for
    a TorchScript artifact loaded with plain ``torch.jit.load``; the same checks as ``load``."""
    try:
        files = _ArtifactFiles(folder)
        for kernel in _routed_kernels(files.plan):
            files.verify(kernel["so"], "kernel")
        _register_kernels(files, files.plan)
    except safe_load.RefusedFile as e:
        raise TuneError(str(e)) from None


def _routed_kernels(plan):
    records = plan.get("opat_kernels")
    return [r for r in (records if isinstance(records, list) else [])
            if isinstance(r, dict) and r.get("routed") and r.get("so")]


def _register_kernels(files, plan):
    """Registers the routed kernels an artifact's plan lists (its own copies, hash-checked)."""
    from . import opat

    if plan.get("opat_kernels"):
        opat.ensure_registered()  # the TorchScript calls torch.ops.portkit.linear
    for rec in _routed_kernels(plan):
        try:
            fn = opat.load_kernel(files.path(rec["so"], "kernel"), sha256=files.sha256(rec["so"], "kernel"))
        except opat.KernelError as e:
            raise TuneError(str(e)) from None
        opat.register(fn, rec["m"], rec["n"], rec["k"], rec["bias"])


def _load_pickled(f):
    """A module written by torch.save, from an open file whose hash was checked (an artifact this
    tuner wrote: its classes are torch's or the user's own). A full unpickle, which runs whatever
    the file names: the artifact is trusted code (see ``load``)."""
    return torch.load(f, weights_only=False) if safe_load.has_weights_only(torch) else torch.load(f)


def _thread_candidates(default):
    """The intra-op thread counts every whole-model candidate is timed at."""
    cores = os.cpu_count() or 1
    return sorted({1, default, cores})


def _stored_threads(detail):
    """(plan threads, subgraph threads, why) from a model entry's detail; why is non-empty when a
    count is not a positive integer. Entries written before the two counts were separate have
    only "threads", which was then both."""
    def count(v):
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else None

    threads = count(detail.get("threads"))
    sub = count(detail.get("subgraph_threads", detail.get("threads")))
    if threads is None or sub is None:
        return None, None, "model entry: thread count %r is not a positive integer" % (
            detail.get("threads") if threads is None else detail.get("subgraph_threads"))
    return threads, sub, ""


def choose_model_plan(timings, pairs, baseline, preferred_threads, variants=()):
    """The name of the (strategy, threads) pair that replaces the baseline, or None to keep it.

    ``timings``: {name: Timing} from one interleaved run; ``pairs``: {name: (strategy, threads)};
    ``baseline``: eager at the process default. torch's own paths come first: the fastest of them
    (by median, over every thread count) is the incumbent, and a portkit candidate (composite*)
    replaces it only when faster beyond the noise, so the plan is never a noisy pick over a
    built-in. A thread count other than ``preferred_threads`` must earn its place too: when the
    same strategy at ``preferred_threads`` was timed and the pick is not faster than it beyond the
    noise, that one is taken. ``variants``: the names that run at a BLAS thread count other than the
    process's (portkit.tune.blas); such a pick must beat the same (strategy, threads) at the
    process's BLAS count beyond the noise, else that one is taken. The result must then be faster
    than the baseline beyond the noise."""
    others = {n: t for n, t in timings.items() if n != baseline}
    builtin = [t for n, t in others.items() if pairs[n][0] in BUILTIN_STRATEGIES]
    ours = [t for n, t in others.items() if pairs[n][0] not in BUILTIN_STRATEGIES]
    best = min(builtin, key=lambda t: t.median) if builtin else None
    for t in sorted(ours, key=lambda t: t.median):
        if best is None or significantly_faster(t, best):
            best = t
            break
    if best is None:
        return None
    strategy, threads = pairs[best.name]
    if threads != preferred_threads:
        same = [t for n, t in timings.items() if pairs[n] == (strategy, preferred_threads) and n not in variants]
        if same and not significantly_faster(best, same[0]):
            best = same[0]
    if best.name in variants:
        same = [t for n, t in timings.items() if pairs[n] == pairs[best.name] and n not in variants]
        if same and not significantly_faster(best, same[0]):
            best = same[0]
    if best.name == baseline or not significantly_faster(best, timings[baseline]):
        return None
    return best.name


def _why(e):
    """An exception as one line for a report note."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return "%s: %s" % (type(e).__name__, text[:200]) if text else type(e).__name__


#: The default ``time_budget`` (seconds): a ResNet-50-size model tunes within 3 minutes on two
#: cores, building and saving the plan and the final timing included.
DEFAULT_TIME_BUDGET_S = 120.0

#: Shares of the budget: the thread count search ends by THREADS_SHARE of it, the subgraphs by
#: SUBGRAPH_SHARE; no whole-model candidate is built after BUILD_SHARE of it (nor one whose
#: build at another thread count took longer than what is left until then); torch.compile (tens
#: of seconds per thread count) is built at the default thread count while DEFAULT_COMPILE_SHARE
#: of the budget is left, at other counts and with max-autotune only while COMPILE_SHARE is left;
#: ONNX Runtime's option search at one thread count may take ORT_SEARCH_SHARE of what is left
#: until BUILD_SHARE.
THREADS_SHARE, SUBGRAPH_SHARE, COMPILE_SHARE = 0.1, 0.55, 0.5
BUILD_SHARE, DEFAULT_COMPILE_SHARE, ORT_SEARCH_SHARE = 0.8, 0.25, 0.25

#: Whole-model strategies that are peers' own configurations the tuner reproduces at the default
#: thread count and times against the saved plan in the final run (with eager, the baseline,
#: and ONNX Runtime's settings searched at that count, its default among them).
PEER_STRATEGIES = ("optimize_for_inference", "torch_compile", ov.STRATEGY)

#: Bank kind of an OPAT kernel that did not beat torch's linear ("unsatisfied"), with the
#: conditions it was timed under: the next run leaves that shape on torch's op without timing it.
OPAT_UNSATISFIED = "opat_unsatisfied"


class Report(dict):
    """The outcome of ``optimize`` (a dict: plan, timings, accounting, files, notes)."""


def optimize(model, example_inputs, bank=None, job_types=("sgat",), lookup_only=False, repeat_tune=None,
             output=None, use_compile=None, compile_mode=None, rounds=15, warmup=2, min_sample_s=0.002,
             final_rounds=None, progress=True, tuning_name=None, threads=None, portkit=None, opat_max_evals=None,
             time_budget=DEFAULT_TIME_BUDGET_S, max_bank_string_mb=1, precision="fp32", accuracy=None):
    """Tunes ``model`` for ``example_inputs`` on this machine; returns (optimized module, Report).

    ``example_inputs``: the tensors (a tuple, or one tensor) the model is tuned and checked on:
    real inputs where the model needs them (token ids within its vocabulary). The caller's model is
    not changed: a copy is tuned (train/eval mode and requires_grad flags stay as they were).
    ``time_budget``: seconds the tuning may take (None: no bound); see docs/tune.md ("Cost").

    ``bank``: knowledge-base folder (None: $TUNE_BANK_PATH, else ~/.cache/portkit; False: none).
    ``lookup_only``: use bank entries, tune nothing (misses stay eager). ``repeat_tune``: re-tune
    bank hits, replacing an entry only when beaten beyond the noise (None: $REPEAT_TUNE).
    ``output``: folder for optimized.pt, optimized.json and the AOE result file (None: nothing
    written). ``use_compile``: try torch.compile on torch 2.x (None: when torch 2.x). ``threads``:
    the intra-op thread count to use (None: chosen jointly with the whole-model strategy, every
    whole-model candidate being timed at 1, the process default and the core count). Every
    candidate's outputs are compared with eager and a differing one is refused.

    ``job_types`` with "opat" (or 2): the model's Linear shapes are tuned first by ``portkit tune
    --job-type=2`` (``portkit``: the binary; ``opat_max_evals``: its --max-evals) into the same
    bank, each kernel is routed only when it beats torch's linear beyond the noise, and the "opat"
    strategy (Linear layers on the routed kernels) competes per subgraph like any other.

    ``max_bank_string_mb``: a bank entry holding a longer string is never loaded and is ignored
    with "over the limit" (0: no cap).

    ``precision``: "fp32" (the default: every candidate computes eager's fp32 outputs), or opt in
    to lower-precision whole-model candidates that compete with the fp32 ones: "bf16"
    (``bf16_autocast``: the model under torch.autocast("cpu", torch.bfloat16); ``bf16_weights``:
    weights and inputs in bfloat16) or "int8-dynamic" (``int8_dynamic``: quantize_dynamic of the
    Linear, LSTM and GRU layers). Each must pass an accuracy check on ``example_inputs`` against
    fp32 eager (``accuracy``: {"max_rel_err": at most, "min_cosine": at least}; default
    candidates.DEFAULT_ACCURACY[precision]) and be faster beyond the noise than the fastest of
    torch's fp32 paths; the report's ``precision`` records each one's accuracy and speed."""
    job_types = tuple(job_types)
    if not set(job_types) <= {"sgat", 1, "opat", 2}:
        raise TuneError("unknown job type in %r (use 'sgat' and/or 'opat')" % (job_types,))
    use_opat = "opat" in job_types or 2 in job_types
    if use_opat and not portkit:
        raise TuneError("job type opat needs the portkit binary (portkit=PATH) to tune the kernels")
    if use_opat and bank is False:
        raise TuneError("job type opat needs a bank folder: the tuned kernels are cached in it")
    if repeat_tune is None:
        repeat_tune = os.environ.get("REPEAT_TUNE", "").lower() in ("1", "true", "yes")
    if use_compile is None:
        use_compile = cands.torch_compile_available()
    if final_rounds is None:
        final_rounds = max(rounds, 10)
    if time_budget is not None and not time_budget > 0:
        raise TuneError("time_budget must be a positive number of seconds (or None for no bound), not %r"
                        % (time_budget,))
    if precision not in cands.PRECISIONS:
        raise TuneError("precision must be one of %s, not %r" % (", ".join(cands.PRECISIONS), precision))
    thresholds = None
    if precision != "fp32":
        thresholds = dict(cands.DEFAULT_ACCURACY[precision])
        unknown = set(accuracy or {}) - set(thresholds)
        if unknown:
            raise TuneError("accuracy: unknown key(s) %s (max_rel_err, min_cosine)" % ", ".join(sorted(unknown)))
        for k, v in (accuracy or {}).items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v == v:
                raise TuneError("accuracy[%r] must be a number, not %r" % (k, v))
            thresholds[k] = float(v)
    elif accuracy:
        raise TuneError("accuracy thresholds apply to precision='bf16' or 'int8-dynamic' only")
    inputs = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    settings = _Settings(precision=precision, accuracy=thresholds, bank=bank, use_opat=use_opat,
                         lookup_only=lookup_only, repeat_tune=repeat_tune, output=output, use_compile=use_compile, compile_mode=compile_mode, rounds=rounds,
                         warmup=warmup, min_sample_s=min_sample_s, final_rounds=final_rounds,
                         tuning_name=tuning_name, threads=threads, portkit=portkit, opat_max_evals=opat_max_evals,
                         time_budget=time_budget, max_bank_string_mb=max_bank_string_mb)
    with _CallerState(model) as own:
        return _Tuning(own, inputs, settings, _progress if progress else (lambda msg: None)).run()


class _CallerState:
    """The module ``optimize`` tunes: a copy of the caller's in eval mode, so that the caller's
    model keeps its train/eval mode and requires_grad flags. A model that cannot be copied is
    tuned itself and those flags are put back afterwards."""

    def __init__(self, model):
        self.model = model
        self.training = None
        self.requires_grad = None

    def __enter__(self):
        try:
            return copy.deepcopy(self.model).eval()
        except Exception:  # noqa: BLE001 - e.g. a module holding an uncopyable handle
            self.training = [(m, m.training) for m in self.model.modules()]
            self.requires_grad = [(p, p.requires_grad) for p in self.model.parameters()]
            return self.model.eval()

    def __exit__(self, *exc):
        for m, training in self.training or []:
            m.training = training
        for p, flag in self.requires_grad or []:
            p.requires_grad_(flag)
        return False


class _Settings:
    """What one ``optimize`` call was asked (its arguments, defaults resolved)."""

    def __init__(self, **values):
        self.max_bank_string_mb = 1  # optimize()'s default, for callers that build settings themselves
        self.precision, self.accuracy = "fp32", None
        self.__dict__.update(values)


class _Tuning:
    """One ``optimize`` call: the state its passes share. ``run`` goes capture → thread count →
    OPAT kernels → subgraphs → whole-model candidates → choice → artifact → final timing."""

    def __init__(self, model, inputs, settings, say):
        self.model, self.inputs, self.s, self.say = model, inputs, settings, say
        self.default_threads = torch.get_num_threads()
        # The count the peers' own configurations run at: the process's (a user's), or the pinned one.
        self.peer_threads = int(settings.threads) if settings.threads is not None else self.default_threads
        self.started = time.time()
        self.clock0 = time.monotonic()
        self.cost = {"time_budget_s": settings.time_budget, "phases_s": {}, "stopped_early": {},
                     "not_tuned_for_time": []}
        self.result = ResultFile(os.path.join(settings.output, result_file_name()) if settings.output else None,
                                 settings.tuning_name or type(model).__name__)
        if settings.output:
            os.makedirs(settings.output, exist_ok=True)
            self.result.write()
        self.store = None
        self.location = None
        if settings.bank is not False:
            self.location = settings.bank or default_bank_dir()
            try:
                self.store = Bank(self.location, read_only=settings.lookup_only,
                                  max_string_mb=settings.max_bank_string_mb)
            except BankError as e:
                raise TuneError(str(e))
        self.report = Report(notes=[], files=[], candidates={}, builds={}, subgraphs=[])
        self.cap = None
        self.choices = {}
        self.sub_options = {}  # part -> ONNX Runtime options, for parts whose choice is onnxruntime
        self.sub_inputs = {}
        self.parts = {}  # part name -> the module tuned (a split subgraph, or a block)
        self.opat_records = []
        self.onnx_bytes = None
        self.ov_ir = None  # OpenVINO's IR of the model (graph, weights), converted once
        self.run_modules = {}  # whole-model candidate name -> its module (for settle_time)
        self.ort_options = {}  # thread count -> ONNX Runtime settings chosen at that count
        # The peers' own configurations at the peer thread count, kept for the final run:
        # {strategy: module} and ONNX Runtime's searched settings there ({setting name: module}).
        self.peer_modules, self.ort_peers = {}, {}
        self.cost["not_built_for_time"] = []
        # The BLAS library's own thread count where torch.set_num_threads does not set it
        # (portkit.tune.blas; None: torch's count governs BLAS): the process's, and per candidate.
        self.default_blas = blas_mod.get_threads()
        self.blas_threads = self.default_blas
        self.blas_of = {}  # candidate name -> BLAS thread count it runs at
        self.variants = set()  # candidates at a BLAS count other than the process's
        if self.default_blas is not None:
            self.report["blas"] = dict(blas_mod.separate_pool(), process_threads=self.default_blas)
        self.last_accuracy = None
        if settings.precision != "fp32":
            self.report["precision"] = {"mode": settings.precision, "metric": ACCURACY_METRIC,
                                        "thresholds": dict(settings.accuracy), "candidates": {}}

    def by(self, share):
        """The time.monotonic() by which ``share`` of the budget is spent (None: no budget)."""
        return None if self.s.time_budget is None else self.clock0 + share * self.s.time_budget

    def left(self):
        """Seconds of the budget left (infinite without one)."""
        return float("inf") if self.s.time_budget is None else self.by(1.0) - time.monotonic()

    def phase(self, name, t0):
        """Adds the time since ``t0`` (time.monotonic()) to phase ``name`` of the cost report."""
        phases = self.cost["phases_s"]
        phases[name] = round(phases.get(name, 0.0) + time.monotonic() - t0, 3)

    def note(self, msg, progress=None):
        """A finding for the report (and the progress line, ``progress`` when it differs)."""
        self.say(progress or msg)
        self.report["notes"].append(msg)

    def run(self):
        try:
            t0 = time.monotonic()
            with torch.no_grad():
                self.reference = self.model(*self.inputs)
            self._capture()
            self._model_entry()
            self.phase("capture", t0)
            t0 = time.monotonic()
            self._choose_subgraph_threads()
            self.phase("threads", t0)
            if self.s.use_opat:
                t0 = time.monotonic()
                self._tune_opat()
                self.phase("opat", t0)
            if self.cap.traced or self.cap.blocks:
                t0 = time.monotonic()
                self._tune_subgraphs()
                self.phase("subgraphs", t0)
            t0 = time.monotonic()
            if self.reuse_plan:
                self.plan_strategy = self.model_entry["strategy"]
                self.threads = int(self.s.threads) if self.s.threads is not None else self.stored_threads
                if self.default_blas is not None and self.stored_blas is not None and self.s.threads is None:
                    self.blas_threads = self.stored_blas
                if self.plan_strategy == ort.STRATEGY:
                    self.ort_options[self.threads] = self.model_entry["detail"].get("ort_options")
                self.say("bank hit for the model plan: %s at %d threads (no candidate timed)"
                         % (self.plan_strategy, self.threads))
            else:
                self._choose_model_plan(self._time_model_candidates())
            self.phase("model_candidates", t0)
            t0 = time.monotonic()
            chosen, artifact = self._build_and_save()
            self.phase("save", t0)
            return self._final_timing(chosen, artifact)
        except Exception:
            self.result.status = "tuning failed"
            self.result.write()
            torch.set_num_threads(self.default_threads)
            blas_mod.set_threads(self.default_blas)
            raise
        finally:
            if self.store:
                self.store.close()

    # ---- capture: the fx graph, its split and the model's bank key ----
    def _capture(self):
        cap = self.cap = capture(self.model, self.inputs)
        cap.blocks = []
        if not cap.traced:
            self._find_blocks()
        self.model_hash = structural_hash(cap.split if cap.traced else self.model, self.inputs)
        self.model_key = ("model", self.model_hash, input_signature(self.inputs),
                          _validators(None, self.s.precision))
        self.known_sub = set(cands.STRATEGIES) - (set() if self.s.use_opat else set(cands.OPAT_STRATEGIES))

    def _find_blocks(self):
        """A model torch.fx cannot trace whole: its blocks (portkit.tune.blocks), each tuned on its
        own like a subgraph; without any, the whole model is one opaque subgraph."""
        from .blocks import find_blocks

        cap = self.cap
        try:
            found, _ = find_blocks(self.model, self.inputs)
        except Exception as e:  # noqa: BLE001 - recording the calls failed: the model stays opaque
            found = []
            self.note("blocks not looked for: %s" % _why(e))
        if not found:
            self.note("whole model as one subgraph: " + cap.reason,
                      "capture: " + cap.reason + "; the whole model is one subgraph")
            return
        cap.blocks = found
        cap.names = {b.path: b.path for b in found}
        self.note("%s; its blocks are tuned separately: %d blocks (%s), %d of them traced by torch.fx (the fx "
                  "strategies apply to those), the rest of the model runs as written"
                  % (cap.reason, len(found), ", ".join(b.path for b in found), sum(b.traced for b in found)),
                  "capture: %s; tuning %d blocks separately" % (cap.reason, len(found)))
        self.report["blocks"] = [{"path": b.path, "fx_traced": b.traced} for b in found]

    def _model_entry(self):
        """The model-level bank entry: the plan and its thread count (reused unless REPEAT_TUNE)."""
        allowed = set(MODEL_STRATEGIES) | set(self._lowp_strategies())
        entry, why = (self.store.lookup(*self.model_key, allowed) if self.store else (None, ""))
        if why:
            self.note("ignored bank entry: " + why, "bank: ignoring " + why)
        if entry and entry["strategy"] in COMPILE_STRATEGIES and not self.s.use_compile:
            entry = None  # the stored plan needs what this run was told not to use
        self.stored_threads = self.stored_sub_threads = self.stored_blas = None
        if entry is not None:
            self.stored_threads, self.stored_sub_threads, why = _stored_threads(entry["detail"])
            b = entry["detail"].get("blas_threads")
            self.stored_blas = b if isinstance(b, int) and not isinstance(b, bool) and b >= 1 else None
            if why:
                self.note("ignored bank entry: " + why, "bank: ignoring " + why)
                entry = None
        self.model_entry = entry
        self.reuse_plan = entry is not None and not self.s.repeat_tune

    # ---- thread counts ----
    def _choose_subgraph_threads(self):
        """Two thread counts: ``sub_threads`` is what the subgraphs are tuned (and their bank rows
        keyed) at; the plan's own count is chosen later, jointly with the whole-model strategy,
        among ``thread_counts``."""
        s, default = self.s, self.default_threads
        if s.threads is not None:
            self.sub_threads = int(s.threads)
            self.thread_counts = [self.sub_threads]
        elif self.model_entry is not None and (self.reuse_plan or s.lookup_only):
            self.sub_threads = self.stored_sub_threads
            self.thread_counts = [self.stored_threads]
        elif s.lookup_only:
            self.sub_threads = default
            self.thread_counts = [default]
        else:
            self.thread_counts = _thread_candidates(default)
            self.sub_threads = default
            if len(self.thread_counts) > 1:
                # Eager alone picks the count the subgraphs are tuned at (a subgraph's strategies
                # are timed at one count); the plan's count is not decided here.
                self.say("threads: timing eager with %s threads (for the subgraphs)" % self.thread_counts)
                runs = {"threads=%d" % t: (lambda: self.model(*self.inputs)) for t in self.thread_counts}
                count = lambda n: int(n.split("=")[1])
                timings = measure_interleaved(runs, rounds=s.rounds, warmup=s.warmup, min_sample_s=s.min_sample_s,
                                              prepare=thread_switcher(runs, count), deadline=self.by(THREADS_SHARE),
                                              keep=("threads=%d" % default,))
                base = timings["threads=%d" % default]
                best = min(timings.values(), key=lambda t: t.median)
                if best is not base and significantly_faster(best, base):
                    self.sub_threads = int(best.name.split("=")[1])
                self.report["threads_timings"] = {k: v.as_ms() for k, v in timings.items()}
            self.say("threads: subgraphs at %d (process default %d); whole-model candidates at %s"
                     % (self.sub_threads, default, self.thread_counts))
        self.report["subgraph_threads"] = self.sub_threads
        self.report["thread_counts"] = list(self.thread_counts)
        torch.set_num_threads(self.sub_threads)

    # ---- OPAT: the model's Linear shapes as tuned kernels, routed only where they win ----
    def _tune_opat(self):
        from . import opat

        opat.unregister()
        shapes = opat.linear_shapes(self.model, self.inputs)
        work = self.s.output or tempfile.mkdtemp(prefix="portkit_opat_")
        try:
            self.opat_records = opat.tune_kernels(shapes, self.location, self.s.portkit, work,
                                                  max_evals=self.s.opat_max_evals, say=self.say,
                                                  lookup_only=self.s.lookup_only,
                                                  known_unsatisfied=self._known_unsatisfied_kernel)
        except (opat.KernelError, OSError, subprocess.SubprocessError) as e:
            # The kernels are one candidate among many: without them the Linear layers stay on
            # torch's op and the rest of the model is tuned as usual.
            self.note("opat: no tuned kernels (%s); Linear layers stay on torch's op" % _why(e))
            self.opat_records = []
        for rec in self.opat_records:
            self._remember_unsatisfied_kernel(rec)
        self.report["opat_kernels"] = self.opat_records
        if not shapes:
            self.report["notes"].append("opat: the model has no torch.nn.Linear")

    def _opat_key(self, rec):
        """The bank key of a kernel's routing outcome: its shape, its configuration and the
        conditions it was timed under (torch, CPU, cores, thread count, portkit)."""
        shape = "%dx%dx%d%s" % (rec["m"], rec["n"], rec["k"], "+bias" if rec["bias"] else "")
        return (OPAT_UNSATISFIED, shape, rec.get("config", ""), _validators(self.sub_threads))

    def _known_unsatisfied_kernel(self, rec):
        """Why the kernel of ``rec`` is not timed again (an earlier run found it no faster than
        torch's linear under the same conditions), or None; REPEAT_TUNE times it again."""
        if self.store is None or self.s.repeat_tune:
            return None
        entry, _ = self.store.lookup(*self._opat_key(rec), {"torch"})
        if entry is None:
            return None
        return ("unsatisfied in the bank: torch's linear %.1f us vs the tuned kernel %.1f us under the same "
                "conditions; not timed again (REPEAT_TUNE=1 times it again)" % (entry["eager_us"], entry["best_us"]))

    def _remember_unsatisfied_kernel(self, rec):
        if self.store is None or rec.get("routed") or rec.get("unsatisfied") or rec.get("wrong_result") \
                or not rec.get("torch_us") or not rec.get("tuned_us"):
            return
        self.store.store(*self._opat_key(rec), name="linear %s" % self._opat_key(rec)[1], strategy="torch",
                         detail={k: rec[k] for k in ("speedup", "lower_bound", "pairs") if k in rec},
                         eager_us=rec["torch_us"], best_us=rec["tuned_us"])

    # ---- subgraphs: each one's strategy from the bank or timed here ----
    def _tune_subgraphs(self):
        cap = self.cap
        if cap.traced:
            try:
                self.sub_inputs = subgraph_inputs(cap.split, self.inputs)
            except Exception as e:  # noqa: BLE001 - the split form does not run: every part stays eager
                self.note("subgraphs left eager: the split model does not run (%s)" % _why(e))
                return
            # Only the split's subgraphs: split_module also puts modules that hold attributes the
            # graph reads directly (a BatchNorm subclass with its own forward) among its children.
            self.parts = {n: m for n, m in cap.split.named_children() if n in cap.names}
        else:
            self.parts = {b.path: b.module for b in cap.blocks}
            self.sub_inputs = {b.path: b.inputs for b in cap.blocks}
        validators = _validators(self.sub_threads)
        names = list(self.parts)
        for i, name in enumerate(names):
            counter = "[%d/%d]" % (i + 1, len(names))
            # Each subgraph may time until its share of what is left for the subgraphs.
            end = self.by(SUBGRAPH_SHARE)
            self.sub_deadline = None if end is None else time.monotonic() + (end - time.monotonic()) / (len(names) - i)
            try:
                rec = self._tune_one_subgraph(name, counter, validators)
            except Exception as e:  # noqa: BLE001 - one part that cannot be tuned never fails the model
                rec = {"name": cap.names.get(name, name), "submod": name, "hash": "", "repo": ["unsatisfied"],
                       "strategy": "eager", "before_us": None, "after_us": None,
                       "note": "not tuned, left eager: %s" % _why(e)}
                self.note("subgraph %s (%s) left eager: %s" % (name, rec["name"], _why(e)),
                          "%s %s: left eager (%s)" % (counter, name, _why(e)))
            self.choices[name] = rec["strategy"]
            if rec["strategy"] == ort.STRATEGY and rec.get("ort_options"):
                self.sub_options[name] = rec["ort_options"]
            self.report["subgraphs"].append(rec)
            self.result.subgraphs.append(rec)
            self.result.write()

    def _tune_one_subgraph(self, name, counter, validators):
        s, cap = self.s, self.cap
        sub = self.parts[name]
        sin = self.sub_inputs[name]
        h = structural_hash(sub, sin)
        key = ("subgraph", h, input_signature(sin), validators)
        entry, why = self.store.lookup(*key, self.known_sub) if self.store else (None, "")
        if why:
            self.note("ignored bank entry: " + why, "bank: ignoring " + why)
        label = "%s (%s)" % (name, cap.names.get(name, name))
        rec = {"name": cap.names.get(name, name), "submod": name, "hash": h, "repo": [],
               "strategy": "eager", "before_us": None, "after_us": None}
        if entry and not s.repeat_tune:
            rec.update(strategy=entry["strategy"], repo=["hit"], before_us=entry["eager_us"],
                       after_us=entry["best_us"])
            if entry["strategy"] == ort.STRATEGY:
                rec["ort_options"] = entry["detail"].get("ort_options")
            self.say("%s %s: bank hit, %s" % (counter, label, entry["strategy"]))
        elif s.lookup_only:
            rec.update(repo=["unsatisfied"], note="lookup only: not in the bank, left eager")
            self.say("%s %s: not in the bank (lookup only), eager" % (counter, label))
        elif self.reuse_plan and self.model_entry["strategy"] not in COMPOSITES:
            # The model's plan comes from the bank and does not use per-subgraph choices: tuning
            # this subgraph now would not change what is built.
            rec.update(repo=["unsatisfied"], note="not in the bank; the model's plan (from the bank) does not use it")
            self.say("%s %s: not in the bank, not needed by the model's plan from the bank" % (counter, label))
        elif self.sub_deadline is not None and time.monotonic() > self.by(SUBGRAPH_SHARE):
            # Not stored in the bank: the next run tunes it.
            rec.update(repo=["unsatisfied"], note="time budget spent: not tuned, left eager")
            self.cost["not_tuned_for_time"].append(name)
            self.say("%s %s: time budget spent, eager" % (counter, label))
        else:
            stopped = self.cost["stopped_early"]
            rec.update(_tune_subgraph(sub, sin, entry, s.rounds, s.warmup, s.min_sample_s, self.say,
                                      "%s %s" % (counter, label), self.known_sub, deadline=self.sub_deadline))
            for strategy, n in rec.get("stopped_early", {}).items():
                stopped["%s/%s" % (name, strategy)] = n
            if rec["strategy"] == ort.STRATEGY and not rec.get("ort_options") and entry:
                rec["ort_options"] = entry["detail"].get("ort_options")  # REPEAT_TUNE kept the stored one
            if self.store:
                detail = {"candidates": rec.get("candidates", {})}
                if rec.get("ort_options"):
                    detail["ort_options"] = rec["ort_options"]
                self.store.store(*key, name=rec["name"], strategy=rec["strategy"], detail=detail,
                                 eager_us=rec["before_us"], best_us=rec["after_us"])
        return rec

    # ---- the whole model: candidates built, checked and timed interleaved ----
    def build(self, strategy, count):
        if strategy == ort.STRATEGY:
            return self._build_ort(count)
        if strategy == ov.STRATEGY:
            if self.ov_ir is None:
                self.ov_ir = ov.convert(self.model, self.inputs)
            return ov.OvModule(*self.ov_ir, ov.options_at(count))
        return build_model_strategy(strategy, self.model, self.cap, self.choices, self.sub_inputs, self.inputs,
                                    self.s.compile_mode, count, self.sub_options)

    def _build_ort(self, count):
        """ONNX Runtime at ``count`` intra-op threads with the fastest of its settings there
        (searched once per count, interleaved, transformer fusions included where they apply; a
        setting whose outputs differ is refused)."""
        if self.onnx_bytes is None:
            self.onnx_bytes = ort.export(self.model, self.inputs)
        known = self.ort_options.get(count)
        if known:
            return ort.rebuild(self.onnx_bytes, known)
        s = self.s

        deadline = None
        if s.time_budget is not None:
            now = time.monotonic()
            deadline = now + ORT_SEARCH_SHARE * max(0.0, self.by(BUILD_SHARE) - now)

        def time_runs(runs):
            return measure_interleaved(runs, rounds=s.rounds, warmup=s.warmup, min_sample_s=s.min_sample_s,
                                       deadline=deadline, settle=settle_of_setting)
        kept = {}
        try:
            best, ms = ort.search(self.onnx_bytes, self.inputs, self.reference, count, outputs_match, time_runs,
                                  deadline=deadline, built_out=kept)
        except ValueError as e:
            raise TuneError(str(e)) from None
        if count == self.peer_threads:
            self.ort_peers = kept  # every setting that reproduced eager here: the final run's ONNX Runtime peers
        self.report.setdefault("ort_settings_ms", {})[str(count)] = ms
        self.ort_options[count] = best.options
        return best

    def check(self, name, module, lowp=False, record=False):
        """Whether ``module`` reproduces eager's outputs (fp32 tolerance); ``lowp``: whether it passes
        the accuracy check of the run's precision mode instead (``record``: into the report's
        ``precision.candidates``)."""
        if lowp:
            return self._check_accuracy(name, module, record)
        with torch.no_grad():
            got = module(*self.inputs)
            ok, why = outputs_match(got, self.reference)
            if not ok:
                # Like with like: a model whose outputs jump with rounding (top-k and NMS over near
                # ties, as detection heads have) gives other outputs at another thread count, eager
                # included; the candidate is then compared with eager at the count it runs at.
                here = self.model(*self.inputs)
                if not outputs_match(here, self.reference)[0]:
                    ok, why = outputs_match(got, here)
                    if ok:
                        self.note("%s compared with eager at %d threads: eager's own outputs differ between "
                                  "thread counts" % (name, torch.get_num_threads()))
        if not ok:
            self.note("%s refused: %s" % (name, why))
        return ok

    def _check_accuracy(self, name, module, record):
        with torch.no_grad():
            got = module(*self.inputs)
        metrics, why = accuracy(got, self.reference)
        ok = metrics is not None
        if ok:
            ok, why = accuracy_ok(metrics, self.s.accuracy)
        self.last_accuracy = metrics
        if record:
            rec = dict(metrics or {}, accepted=ok, strategy=name.split("@")[0], threads=torch.get_num_threads())
            if self.default_blas is not None:
                rec["blas_threads"] = blas_mod.get_threads()
            if not ok:
                rec["note"] = why
            self.report["precision"]["candidates"][name] = rec
        if not ok:
            self.note("%s refused: accuracy against fp32 eager on the example inputs: %s" % (name, why))
        return ok

    def _model_strategies(self):
        s, traced = self.s, self.cap.traced
        tuned_parts = any(c != "eager" for c in self.choices.values())
        composite_applies = traced and tuned_parts
        composites = ["composite", "composite_ofi", "composite_eager"] if composite_applies else []
        if tuned_parts and not traced:
            composites = ["blocks"]
        if s.lookup_only:
            return composites
        # Built in this order, so that a time budget spent part-way leaves out the last ones: the
        # peers' own configurations (optimize_for_inference, ONNX Runtime, torch.compile as a user
        # calls it) first, the portkit candidates next, torch.compile with max-autotune last.
        strategies = ["script_freeze", "optimize_for_inference"]
        if any(t != self.default_threads for t in self.thread_counts) or \
                self._blas_counts(self.default_threads, "eager") != [self.default_blas]:
            strategies.insert(0, "eager")  # eager at another thread count (or BLAS thread count)
        if ort.available():
            strategies.append(ort.STRATEGY)
        else:
            self.note("onnxruntime not installed: ONNX Runtime not tried")
        if ov.available():
            strategies.append(ov.STRATEGY)
        else:
            self.note("openvino not installed: OpenVINO not tried")
        if s.use_compile and self.left() < DEFAULT_COMPILE_SHARE * (s.time_budget or 0):
            self.note("torch.compile not tried: %.0f s of the %.0f s time budget left" % (self.left(), s.time_budget))
        elif s.use_compile:
            # torch.compile as the user would call it (default mode).
            strategies.append("torch_compile")
        strategies += composites
        if traced:
            strategies.append("fx_fused")
        for strategy in self._lowp_strategies():
            why = cands.lowp_unavailable(strategy)
            if why:
                self.note("%s not tried: %s" % (strategy, why))
                self.report["precision"]["candidates"][strategy] = {"accepted": False, "note": why}
            else:
                strategies.append(strategy)
        if s.use_compile and self.left() >= DEFAULT_COMPILE_SHARE * (s.time_budget or 0):
            # With the GEMM/convolution templates autotuned on this machine and the weights frozen
            # (compiling takes longer: tens of seconds for a small model on 2 cores, paid once per
            # model and thread count and cached by inductor).
            strategies.append("torch_compile_autotune")
        return strategies

    def _no_time_to_build(self, strategy, t, spent):
        """Why ``strategy`` is not built at ``t`` threads for the time budget (None: it is built).
        ``spent``: seconds its build and first call took at an earlier count (0: none yet)."""
        s = self.s
        if s.time_budget is None:
            return None
        now, end = time.monotonic(), self.by(BUILD_SHARE)
        if now > end:
            return "%.0f %% of the time budget spent" % (100 * BUILD_SHARE)
        if spent and now + spent > end:
            return "its build at another thread count took %.1f s, more than the %.1f s left" % (spent, end - now)
        if strategy in COMPILE_STRATEGIES:
            share = DEFAULT_COMPILE_SHARE if (strategy, t) == ("torch_compile", self.peer_threads) else COMPILE_SHARE
            if self.left() < share * s.time_budget:
                return "torch.compile: %.0f s of the %.0f s time budget left" % (self.left(), s.time_budget)
        return None

    def _lowp_strategies(self):
        """The lower-precision whole-model strategies the run's precision mode allows."""
        return [k for k, v in cands.LOWP_STRATEGIES.items() if v == self.s.precision]

    def _blas_counts(self, t, strategy):
        """The BLAS thread counts a candidate at ``t`` torch threads runs at: the process's and ``t``
        where the BLAS library has a pool of its own and the thread count is tuned, else the
        process's (None without a separate pool)."""
        if self.default_blas is None or self.s.threads is not None or strategy in RUNTIME_STRATEGIES:
            return [self.default_blas]
        return sorted({self.default_blas, t})

    def _name(self, strategy, t, b):
        """A candidate's name: ``strategy@Nt``, with ``+Mb`` when it runs at M BLAS threads other
        than the process's."""
        name = "%s@%dt" % (strategy, t)
        return name if b == self.default_blas else "%s+%db" % (name, b)

    def _build_candidates(self, strategy, runs, pairs):
        """Builds ``strategy`` at every thread count (and BLAS thread count) and checks its first
        call there; adds the ones that reproduce eager (or, lower-precision ones, pass the accuracy
        check) to ``runs`` / ``pairs``."""
        # The peers' count first: what a budget spent part-way leaves out is another count.
        combos = [(t, b) for t in sorted(self.thread_counts, key=lambda t: t != self.peer_threads)
                  for b in self._blas_counts(t, strategy) if self._name(strategy, t, b) != self.baseline]
        counts = sorted({t for t, _ in combos})
        # A TorchScript module runs at any count as built. Inductor writes the thread count into
        # its kernels (``#pragma omp parallel num_threads(N)``) and its graph cache does not key
        # on torch's count, so a torch.compile candidate is built per count with inductor's
        # ``cpp.threads`` set to it (compiled on its first call).
        per_count = strategy in COMPILE_STRATEGIES or strategy in RUNTIME_STRATEGIES or (
            strategy in COMPOSITES and bool(self.sub_options))
        if per_count:
            self.say("%s: built per thread count (%s)%s" % (strategy, "/".join(str(t) for t in counts),
                     " (inductor; each count's first call compiles)" if strategy in COMPILE_STRATEGIES else ""))
        lowp = strategy in cands.LOWP_STRATEGIES
        info = self.report["builds"][strategy] = {"build_s": 0.0, "first_call_s": {}}
        m = built_at = None
        spent = 0.0
        for t, b in combos:
            name = self._name(strategy, t, b)
            if m is None or (per_count and built_at != t):
                why = self._no_time_to_build(strategy, t, spent)
                if why:
                    self.cost["not_built_for_time"].append(name)
                    self.say("%s not built: time budget (%s)" % (name, why))
                    continue
            torch.set_num_threads(t)
            blas_mod.set_threads(b)
            if m is None or (per_count and built_at != t):
                t0 = time.time()
                try:
                    m = self.build(strategy, t)
                except Exception as e:  # noqa: BLE001 - a strategy that does not apply is a finding
                    info["error"] = "%s: %s" % (type(e).__name__, str(e)[:200])
                    self.say("%s does not apply: %s" % (strategy, type(e).__name__))
                    if lowp:
                        self.report["precision"]["candidates"][strategy] = {"accepted": False,
                                                                            "note": info["error"]}
                    return
                built_at = t
                info["build_s"] = round(info["build_s"] + time.time() - t0, 3)
            t0 = time.time()
            try:
                ok = self.check(name, m, lowp=lowp, record=True)
            except Exception as e:  # noqa: BLE001 - e.g. inductor failing to compile
                self.note("%s failed: %s: %s" % (name, type(e).__name__, str(e)[:200]),
                          "%s failed: %s" % (name, type(e).__name__))
                ok = False
            if b == self.default_blas:
                info["first_call_s"][str(t)] = round(time.time() - t0, 3)
            else:
                info.setdefault("blas_first_call_s", {})["%d+%db" % (t, b)] = round(time.time() - t0, 3)
            if per_count or not spent:
                spent = info["build_s"] / max(1, len(info["first_call_s"])) + time.time() - t0
            if ok:
                runs[name] = (lambda m=m: m(*self.inputs))
                self.run_modules[name] = m
                pairs[name] = (strategy, t)
                if strategy in PEER_STRATEGIES and t == self.peer_threads and b == self.default_blas:
                    self.peer_modules[strategy] = m
                self.blas_of[name] = b
                if b != self.default_blas:
                    self.variants.add(name)
        blas_mod.set_threads(self.default_blas)

    def _time_model_candidates(self):
        """{name: Timing} of every whole-model (strategy, threads) pair that reproduces eager,
        timed interleaved with the baseline (empty when none does); ``self.pairs`` names them."""
        s = self.s
        # Every (strategy, threads) pair is run once at its count before timing and its outputs
        # checked there; the pairs of a TorchScript strategy share one module.
        runs, self.pairs = {}, {}
        self.baseline = "eager@%dt" % self.default_threads
        for strategy in self._model_strategies():
            self._build_candidates(strategy, runs, self.pairs)
        if not runs:
            return {}
        runs[self.baseline] = lambda: self.model(*self.inputs)
        self.pairs[self.baseline] = ("eager", self.default_threads)
        self.blas_of[self.baseline] = self.default_blas
        self.say("whole model: timing %s interleaved" % ", ".join(sorted(runs)))
        # Grouped by thread count: the count changes once per group and round (a change costs the
        # next call more than a steady count does), never between two samples of one count.
        count = lambda n: self.pairs[n][1]
        stopped = self.cost["stopped_early"]
        timings = measure_interleaved(runs, rounds=s.rounds, warmup=s.warmup, min_sample_s=s.min_sample_s,
                                      prepare=thread_switcher(runs, count, self.blas_of.get),
                                      group=count, deadline=self.by(0.85), keep=(self.baseline,), stopped=stopped,
                                      settle=lambda n: settle_time(self.run_modules.get(n, self.model)))
        for n, t in timings.items():
            self.report["candidates"][n] = dict(t.as_ms(), strategy=self.pairs[n][0], threads=self.pairs[n][1],
                                                baseline=n == self.baseline)
            if self.default_blas is not None:
                self.report["candidates"][n]["blas_threads"] = self.blas_of[n]
        precision = self.report.get("precision")
        base = timings[self.baseline].median
        for n, rec in (precision or {}).get("candidates", {}).items():
            if n in timings:
                rec.update(median_ms=round(timings[n].median * 1e3, 4),
                           speedup_vs_baseline=round(base / timings[n].median, 4) if timings[n].median > 0 else None)
        return timings

    # ---- choose ----
    def _choose_model_plan(self, timings):
        fixed = self.s.threads is not None
        self.plan_strategy = "eager"
        self.threads = self.sub_threads if fixed else self.default_threads
        self.blas_threads = self.default_blas
        if timings:
            best = choose_model_plan(timings, self.pairs, self.baseline,
                                     self.sub_threads if fixed else self.default_threads, self.variants)
            if best is not None:
                self.plan_strategy, self.threads = self.pairs[best]
                self.blas_threads = self.blas_of.get(best, self.default_blas)
        torch.set_num_threads(self.threads)
        blas_mod.set_threads(self.blas_threads)

    def _model_record(self):
        """The model-level plan as a result-file record (for an opaque model, its only one)."""
        mrec = {"name": "(whole model)", "submod": "", "hash": self.model_hash, "strategy": self.plan_strategy,
                "before_us": None, "after_us": None}
        if self.reuse_plan:
            mrec["repo"] = ["hit"]
        elif self.s.lookup_only:
            mrec["repo"] = ["unsatisfied"]
        elif self.model_entry is not None:
            changed = (self.model_entry["strategy"], self.stored_threads) != (self.plan_strategy, self.threads)
            mrec["repo"] = ["hit", "update" if changed else "reserved"]
        else:
            mrec["repo"] = ["add"] if self.plan_strategy != "eager" else ["unsatisfied"]
        self.report["model_repo"] = "/".join(mrec["repo"])
        self.result.subgraphs.append(mrec)
        self.result.write()
        return mrec

    # ---- save: the chosen plan built, checked, written and loaded back ----
    def _build_and_save(self):
        """The chosen plan's module and artifact; a plan that cannot be built, reproduced, saved or
        loaded back gives way to eager (with a note), so one broken path never fails the model."""
        try:
            return self._build_and_save_plan()
        except Exception as e:  # noqa: BLE001
            if self.plan_strategy == "eager":
                raise
            self.note("plan %s could not be built, saved or loaded back (%s); eager instead"
                      % (self.plan_strategy, _why(e)))
            self.plan_strategy = "eager"
            return self._build_and_save_plan()

    def _build_and_save_plan(self):
        s = self.s
        strategy = self.plan_strategy
        self.plan = plan = Plan(strategy, self.threads,
                                dict(self.choices) if strategy in COMPOSITES else {},
                                (COMPILE_STRATEGIES[strategy] or s.compile_mode) if strategy in COMPILE_STRATEGIES
                                else None, self.ort_options.get(self.threads) if strategy == ort.STRATEGY else None,
                                blas_threads=self.blas_threads,
                                subgraph_options={n: o for n, o in self.sub_options.items()
                                                  if strategy in ("composite_eager", "blocks")})
        blas_mod.set_threads(plan.blas_threads)
        lowp = plan.precision != "fp32"
        self.say("plan: %s, %d threads%s%s" % (plan.strategy, plan.threads,
                                               "" if plan.blas_threads is None else ", %d BLAS threads"
                                               % plan.blas_threads, ", %s" % plan.precision if lowp else ""))
        if lowp or not s.output:
            # A lower-precision plan's accuracy cost is measured on the module before it is saved,
            # and recorded in the plan.
            chosen = self.build(plan.strategy, plan.threads)
            if not self.check(plan.strategy, chosen, lowp=lowp):
                raise TuneError("the chosen plan %s does not %s" % (
                    plan.strategy, "pass the accuracy check" if lowp else "reproduce eager's outputs"))
            if lowp:
                plan.accuracy = self.last_accuracy
            if not s.output:
                return chosen, None
        # With an artifact, what is checked (and returned) is the artifact loaded back: building
        # the plan once more beforehand would only repeat the work (a compile, an export).
        artifact = save_artifact(s.output, plan, self.cap, self.model, self.inputs, self.sub_inputs,
                                 self.opat_records, ov_ir=self.ov_ir)
        chosen = load(artifact)
        if not self.check("the saved artifact", chosen, lowp=lowp):
            raise TuneError("the saved artifact %s does not %s" % (
                artifact, "pass the accuracy check" if lowp else "reproduce eager's outputs"))
        if lowp:
            self.report["precision"]["artifact_accuracy"] = self.last_accuracy
        files = self.report["files"]
        files += [artifact, os.path.join(s.output, PLAN)]
        if plan.strategy in PICKLED_STRATEGIES:
            files.append(os.path.join(s.output, EAGER_MODULE))
        files += [os.path.join(s.output, r["so"]) for r in _saved_kernels(s.output)]
        self.say("artifact: %s" % artifact)
        return chosen, artifact

    # ---- the final run: the plan as loaded against the peers' configurations; before / after ----
    def _peers(self):
        """{name: (module, strategy, threads, ONNX Runtime options)} of the peers' own
        configurations this run built at the peers' thread count — optimize_for_inference,
        torch.compile as a user calls it, ONNX Runtime with each setting its search kept there
        (its default, DEFAULT_SETTING, among them) — and eager (the baseline) when the plan is
        not eager at that count. None of them is the plan itself. Empty for a plan from the bank."""
        plan, t = self.plan, self.peer_threads
        if self.reuse_plan or self.s.lookup_only:
            return {}
        out = {}
        if (plan.strategy, plan.threads) != ("eager", t) and t == self.default_threads:
            out["baseline"] = (None, "eager", t, None)
        for strategy in PEER_STRATEGIES:
            if strategy in self.peer_modules and (plan.strategy, plan.threads) != (strategy, t):
                out["peer:" + strategy] = (self.peer_modules[strategy], strategy, t, None)
        for setting, m in sorted(self.ort_peers.items()):
            if (plan.strategy, plan.threads, plan.ort_options) != (ort.STRATEGY, t, m.options):
                out["peer:onnxruntime[%s]" % setting] = (m, ort.STRATEGY, t, dict(m.options))
        return out

    def _time_final(self, chosen, peers, deadline):
        """{name: Timing} of eager (``baseline``), the plan as loaded (``result``) and ``peers``,
        interleaved and grouped by thread count."""
        s, plan = self.s, self.plan
        final = {"baseline": lambda: self.model(*self.inputs), "result": lambda: chosen(*self.inputs)}
        final.update({n: (lambda m=m: m(*self.inputs)) for n, (m, _, _, _) in peers.items() if n != "baseline"})
        count = lambda n: self.default_threads if n == "baseline" else plan.threads if n == "result" \
            else peers[n][2]
        stopped = {}
        timings = measure_interleaved(final, rounds=s.final_rounds, warmup=s.warmup, min_sample_s=s.min_sample_s,
                                      prepare=thread_switcher(final, count, lambda n: plan.blas_threads
                                                              if n == "result" else self.default_blas),
                                      group=count, deadline=deadline, keep=("baseline", "result"), stopped=stopped,
                                      settle=lambda n: settle_time(chosen if n == "result" else self.model
                                                                   if n == "baseline" else peers[n][0]))
        for n, rounds in stopped.items():
            self.cost["stopped_early"]["final:" + n] = rounds
        return timings

    def _beaten_by(self, timings, peers):
        """The peer whose median is lowest, when its median paired ratio to the plan as loaded, or
        the ratio of the two medians, is below 1 - the margin (faster by more than 2 %); else None.
        No confidence interval: the plan must not be slower than a configuration a user gets
        without portkit. (Either ratio: a peer stopped early has few pairs, and pairs across
        thread-count groups are taken at different moments of a round.)"""
        if not peers:
            return None
        best = min(peers, key=lambda n: timings[n].median)
        ratio, _ = paired_ratio(timings[best], timings["result"])
        medians = timings[best].median / timings["result"].median if timings["result"].median > 0 else 1.0
        return best if min(ratio, medians) < 1.0 - DEFAULT_MARGIN else None

    def _final_timing(self, chosen, artifact):
        t0 = time.monotonic()
        # A plan from the bank: a short before/after, the run is a lookup.
        deadline = self.by(0.05 if self.reuse_plan else 1.05)
        peers = self._peers()
        timings = self._time_final(chosen, peers, deadline)
        race = {"peers": {}, "plan": self.plan.to_json(), "plan_ms": round(timings["result"].median * 1e3, 4),
                "switched_to": None}
        for n, (_, strategy, t, options) in peers.items():
            ratio, ci = paired_ratio(timings[n], timings["result"])
            race["peers"][n] = {"strategy": strategy, "threads": t, "median_ms": round(timings[n].median * 1e3, 4),
                                "peer_over_plan": round(ratio, 4), "ci95": [round(ci[0], 4), round(ci[1], 4)],
                                "rounds": len(timings[n].samples)}
            if options:
                race["peers"][n]["ort_options"] = options
        beaten = self._beaten_by(timings, peers)
        self.phase("final_timing", t0)
        if beaten:
            m, strategy, t, options = peers[beaten]
            self.note("final run: %s@%dt (as loaded) %.3f ms, %s %.3f ms: the plan is %s@%dt instead" % (
                self.plan.strategy, self.plan.threads, timings["result"].median * 1e3, beaten,
                timings[beaten].median * 1e3, strategy, t))
            race["switched_to"] = beaten
            self.plan_strategy, self.threads, self.blas_threads = strategy, t, self.default_blas
            if options:
                self.ort_options[t] = options
            t0 = time.monotonic()
            chosen, artifact = self._build_and_save()
            self.phase("save", t0)
            t0 = time.monotonic()
            # The new plan as loaded, before / after: short (the budget's final share is spent).
            timings = self._time_final(chosen, {}, self.by(1.05))
            self.phase("final_timing", t0)
        self.report["final_race"] = race
        return self._report_final(chosen, artifact, timings, self._model_record())

    def _report_final(self, chosen, artifact, timings, mrec):
        s, plan, result, report = self.s, self.plan, self.result, self.report
        self.cost["seconds"] = round(time.monotonic() - self.clock0, 3)
        report["cost"] = self.cost
        torch.set_num_threads(plan.threads)  # the returned module runs at the plan's count
        blas_mod.set_threads(plan.blas_threads)
        result.baseline, result.result = timings["baseline"], timings["result"]
        mrec.update(before_us=timings["baseline"].median * 1e6, after_us=timings["result"].median * 1e6)
        if self.store and not self.reuse_plan and not s.lookup_only:
            self.store.store(*self.model_key, name=result.tuning_name, strategy=plan.strategy,
                             detail=dict({"threads": plan.threads, "subgraph_threads": self.sub_threads,
                                          "compile_mode": plan.compile_mode},
                                         **({"ort_options": plan.ort_options} if plan.ort_options else {}),
                                         **({"blas_threads": plan.blas_threads}
                                            if plan.blas_threads is not None else {})),
                             eager_us=timings["baseline"].median * 1e6, best_us=timings["result"].median * 1e6)
        ratio, ci = paired_ratio(timings["result"], timings["baseline"])
        result.status = "tuning successful"
        result.extra = {"plan": plan.to_json(), "speedup": round(1.0 / ratio, 4) if ratio > 0 else None,
                        "speedup_ci95": [round(1.0 / ci[1], 4), round(1.0 / ci[0], 4)] if ci[0] > 0 else None,
                        "model_bank": report.get("model_repo"), "notes": report["notes"], "tuning_cost": self.cost,
                        "final_race": report.get("final_race"),
                        "model_candidates_ms": {n: round(c["median_ms"], 4) for n, c in report["candidates"].items()}}
        if "precision" in report:
            # The mode asked for, each lower-precision candidate's accuracy and speed, and the plan's
            # precision with its accuracy cost and speed-up.
            report["precision"].update(plan_precision=plan.precision, plan_accuracy=plan.accuracy,
                                       plan_speedup=result.extra["speedup"])
            result.extra["precision"] = report["precision"]
        if plan.blas_threads is not None:
            result.extra["blas"] = dict(report["blas"], plan_threads=plan.blas_threads)
        result.write()
        if result.path:
            report["files"].append(result.path)
        report.update(plan=plan.to_json(), baseline=timings["baseline"].as_ms(), result=timings["result"].as_ms(),
                      speedup=result.extra["speedup"], speedup_ci95=result.extra["speedup_ci95"],
                      repo_summary=result.summary(), tuned=not self.reuse_plan and not s.lookup_only,
                      artifact=artifact, result_file=result.path, seconds=round(time.time() - self.started, 3))
        self.say("model %.3f ms -> %.3f ms (x%.2f); %s" % (timings["baseline"].median * 1e3,
                                                           timings["result"].median * 1e3, report["speedup"] or 0,
                                                           json.dumps(result.summary())))
        return chosen, report


def _tune_subgraph(sub, sin, entry, rounds, warmup, min_sample_s, say, label, allowed=None, deadline=None):
    """Builds, checks and times every strategy (of ``allowed``) for one subgraph; the outcome as a
    record update. ``deadline``: see measure_interleaved (eager is always timed to the end)."""
    with torch.no_grad():
        ref = sub(*sin)
    built = {}
    for name in cands.STRATEGIES:
        if allowed is not None and name not in allowed:
            continue
        if deadline is not None and len(built) > 1 and time.monotonic() > deadline:
            # Strategies are in order of how often they win; the rest are not built.
            say("%s: time budget: %s and later strategies not built" % (label, name))
            break
        try:
            m = cands.build(name, sub, sin, deadline=deadline)
            with torch.no_grad():
                ok, why = outputs_match(m(*sin), ref)
            if ok:
                built[name] = m
            else:
                say("%s: %s refused: %s" % (label, name, why))
        except Exception:  # noqa: BLE001 - strategies that do not apply are skipped
            pass
    runs = {n: (lambda m=m: m(*sin)) for n, m in built.items()}
    stopped = {}
    timings = measure_interleaved(runs, rounds=rounds, warmup=warmup, min_sample_s=min_sample_s,
                                  deadline=deadline, keep=("eager",), stopped=stopped)
    eager = timings["eager"]
    best = min(timings.values(), key=lambda t: t.median)
    incumbent = timings.get(entry["strategy"]) if entry else None
    rec = {"candidates": {n: round(t.median * 1e6, 3) for n, t in timings.items()}}
    if stopped:
        rec["stopped_early"] = stopped
    if entry is not None and incumbent is not None:
        # REPEAT_TUNE: the stored strategy is re-measured here; replaced only when beaten beyond noise.
        if best is not incumbent and significantly_faster(best, incumbent):
            rec.update(strategy=best.name, repo=["hit", "update"], before_us=eager.median * 1e6,
                       after_us=best.median * 1e6)
        else:
            rec.update(strategy=incumbent.name, repo=["hit", "reserved"], before_us=eager.median * 1e6,
                       after_us=incumbent.median * 1e6)
    elif best is not eager and significantly_faster(best, eager):
        rec.update(strategy=best.name, repo=["add"], before_us=eager.median * 1e6, after_us=best.median * 1e6)
    else:
        rec.update(strategy="eager", repo=["unsatisfied"], before_us=eager.median * 1e6, after_us=eager.median * 1e6)
    if rec["strategy"] == ort.STRATEGY and ort.STRATEGY in built:
        rec["ort_options"] = dict(built[ort.STRATEGY].options)  # its session's settings, searched when built
    say("%s: %s  -> %s (%s)" % (label, ", ".join("%s %.1fus" % (n, t.median * 1e6) for n, t in sorted(timings.items())),
                               rec["strategy"], "/".join(rec["repo"])))
    return rec
