"""ONNX Runtime as a whole-model candidate and as a per-subgraph strategy (optional: tried only
when ``onnxruntime`` imports).

The model (or one subgraph, or one block of a model torch.fx cannot trace whole) is exported with
``torch.onnx.export`` (TorchScript-based exporter) on its example inputs; ONNX Runtime's own options
are searched at the thread count it will run at: graph optimisation level, execution mode,
whether its idle intra-op threads spin, and — when ``onnxruntime.transformers`` and ``onnx`` import
and the graph has a transformer's operators (Softmax, LayerNormalization, Erf, Pow) — its
transformer fusions (``onnxruntime.transformers.optimizer.optimize_model`` with ``model_type``
``bert`` or ``gpt2``). A setting whose outputs differ from eager is refused; the fastest, timed
interleaved, is kept. :class:`OrtModule` runs a session on CPU tensors and returns tensors (one
output: a tensor; several: a tuple in the export's order), so the result keeps a module
interface; it pickles as its ONNX bytes and options (the session is rebuilt when unpickled), so a
composite model holding ONNX Runtime parts is saved with ``torch.save``. A whole-model artifact
holds ``optimized.onnx``; every plan records the options and the ONNX Runtime version.
"""
import importlib
import io
import time

import torch

STRATEGY = "onnxruntime"
ONNX_FILE = "optimized.onnx"

#: The settings searched for a whole model at each thread count (ONNX Runtime's names; ``spin``:
#: ``session.intra_op.allow_spinning``), in the order they are tried when a time budget cuts the
#: search short: the first is ONNX Runtime's default (DEFAULT_SETTING).
SETTINGS = (
    {"graph_optimization_level": "ORT_ENABLE_ALL", "execution_mode": "ORT_SEQUENTIAL"},
    {"graph_optimization_level": "ORT_ENABLE_ALL", "execution_mode": "ORT_SEQUENTIAL", "spin": False},
    {"graph_optimization_level": "ORT_ENABLE_EXTENDED", "execution_mode": "ORT_SEQUENTIAL"},
    {"graph_optimization_level": "ORT_ENABLE_ALL", "execution_mode": "ORT_PARALLEL"},
)
#: The name (setting_name) of ONNX Runtime's default session options: what a user gets without
#: setting any (all graph optimisations, sequential, spinning idle threads).
DEFAULT_SETTING = "ALL/sequential"

#: Calls one variant costs in a search besides its build: the check, the untimed first call, the
#: calibration, up to 2 warm-up rounds and measure.MIN_ROUNDS samples (a sample is one call when a
#: call is slow). Used to stop building variants that could not be timed before the deadline.
CALLS_PER_VARIANT = 8

#: The settings searched for a subgraph (it runs between torch's own operators: idle ONNX Runtime
#: threads that spin take cores from torch, so both are tried).
SUBGRAPH_SETTINGS = (
    {"graph_optimization_level": "ORT_ENABLE_ALL", "execution_mode": "ORT_SEQUENTIAL", "spin": False},
    {"graph_optimization_level": "ORT_ENABLE_ALL", "execution_mode": "ORT_SEQUENTIAL"},
    {"graph_optimization_level": "ORT_ENABLE_EXTENDED", "execution_mode": "ORT_SEQUENTIAL", "spin": False},
)

#: ONNX operators whose presence makes the transformer fusions worth trying.
TRANSFORMER_OPS = ("Softmax", "LayerNormalization", "Erf", "Pow", "ReduceMean")
FUSIONS = ("bert", "gpt2")


def importable(name):
    """Whether the optional package ``name`` imports (a runtime a candidate needs)."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def available():
    return importable("onnxruntime")


def version():
    import onnxruntime

    return onnxruntime.__version__


def fusion_available():
    """Whether ONNX Runtime's transformer optimizer (and the ``onnx`` package it needs) import."""
    try:
        import onnx  # noqa: F401
        from onnxruntime.transformers import optimizer  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure: the fusions are not tried
        return False
    return True


def export(model, inputs):
    """The ONNX bytes of ``model`` on ``inputs`` (tensors only); raises when it does not export."""
    import warnings

    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise ValueError("ONNX export needs tensor inputs")
    buf = io.BytesIO()
    kwargs = {"do_constant_folding": True}
    major = int(torch.__version__.split(".")[0])
    if major >= 2:
        kwargs["dynamo"] = False  # the TorchScript exporter: needs no onnxscript
    # The exporter puts the module in eval mode and back into the mode of its root, recursively:
    # a GraphModule of split_module (a training-mode root over eval-mode layers) would come back
    # with its BatchNorm layers in training mode. Every module's own mode is put back.
    modes = [(m, m.training) for m in model.modules()]
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings of data-dependent Python
            torch.onnx.export(model, tuple(inputs), buf, **kwargs)
    finally:
        for m, training in modes:
            m.training = training
    return buf.getvalue()


def op_types(onnx_bytes):
    """The operator types of an ONNX graph (empty when ``onnx`` is not installed)."""
    try:
        import onnx
    except ImportError:
        return set()
    return {n.op_type for n in onnx.load_from_string(onnx_bytes).graph.node}


def fuse(onnx_bytes, kind):
    """``onnx_bytes`` after ONNX Runtime's transformer fusions for ``model_type=kind`` (its
    optimizer's own graph optimisations off: the session applies the level searched). Raises
    ValueError when nothing was fused."""
    import logging

    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    opt = optimize_model(onnx.load_from_string(onnx_bytes), model_type=kind, num_heads=0, hidden_size=0,
                         opt_level=0)
    stats = opt.get_fused_operator_statistics() or {}
    if not any(v for v in stats.values() if isinstance(v, int)):
        raise ValueError("no %s fusion applies" % kind)
    return opt.model.SerializeToString()


def _session(onnx_bytes, options):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, options["graph_optimization_level"])
    so.execution_mode = getattr(ort.ExecutionMode, options["execution_mode"])
    so.intra_op_num_threads = int(options["intra_op_num_threads"])
    so.inter_op_num_threads = 1
    if options.get("spin") is False:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(onnx_bytes, so, providers=["CPUExecutionProvider"])


class OrtModule(torch.nn.Module):
    """An ONNX Runtime session as a module: tensors in, tensors out (CPU). ``onnx_bytes`` is the
    graph as run (transformer fusions, when ``options["fusion"]`` names one, already applied)."""

    def __init__(self, onnx_bytes, options):
        super().__init__()
        self.onnx_bytes = onnx_bytes
        self.options = dict(options)
        self.session = _session(onnx_bytes, self.options)
        self.input_names = [i.name for i in self.session.get_inputs()]

    def forward(self, *xs):
        feeds = {name: x.detach().cpu().contiguous().numpy() for name, x in zip(self.input_names, xs)}
        outs = [torch.from_numpy(o) for o in self.session.run(None, feeds)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __reduce__(self):
        # The session is rebuilt from the graph and the options (torch.save of a composite).
        return (OrtModule, (self.onnx_bytes, self.options))

    def __deepcopy__(self, memo):
        return OrtModule(self.onnx_bytes, self.options)


def settings_at(threads, settings=SETTINGS):
    return [dict(s, intra_op_num_threads=int(threads)) for s in settings]


def setting_name(options):
    parts = [options["graph_optimization_level"].replace("ORT_ENABLE_", ""),
             options["execution_mode"].replace("ORT_", "").lower()]
    if options.get("spin") is False:
        parts.append("nospin")
    if options.get("fusion"):
        parts.append("fused-" + options["fusion"])
    return "/".join(parts)


def variants(onnx_bytes, threads, settings=SETTINGS, fusions=True):
    """The (options, graph bytes) to try at ``threads``, generated lazily (a fusion costs seconds on
    a large graph): the first two settings on the exported graph, then, where the transformer
    fusions apply, the first setting on each fused graph, then the other settings."""
    at = settings_at(threads, settings)
    for o in at[:2]:
        yield o, onnx_bytes
    if fusions and fusion_available() and op_types(onnx_bytes) & set(TRANSFORMER_OPS):
        for kind in FUSIONS:
            try:
                fused = fuse(onnx_bytes, kind)
            except Exception:  # noqa: BLE001 - the fusion does not apply to this graph
                continue
            yield dict(at[0], fusion=kind), fused
    for o in at[2:]:
        yield o, onnx_bytes


def search(onnx_bytes, inputs, reference, threads, match, time_runs, settings=SETTINGS, fusions=True,
           deadline=None, built_out=None):
    """(best OrtModule, {setting name: median ms}): every variant built at ``threads``, checked
    with ``match(outputs, reference) -> (ok, why)`` and timed with ``time_runs({name: fn}) ->
    {name: Timing}``. Raises ValueError when no variant reproduces ``reference``.

    ``deadline`` (a time.monotonic() value): once one variant reproduces ``reference``, no further
    variant is built when building it and timing every variant kept (CALLS_PER_VARIANT calls each,
    at the slowest call seen) would end after it; the search is then among those built.
    ``built_out``, a dict, receives {setting name: module} of every variant kept."""
    built = {}
    cost = {"build_s": 0.0, "call_s": 0.0}  # builds so far, the slowest call seen

    def projected():
        if not built:
            return None
        return cost["build_s"] / len(built) + (len(built) + 1) * CALLS_PER_VARIANT * cost["call_s"]

    for options, graph in _until(variants(onnx_bytes, threads, settings, fusions), deadline, projected):
        t0 = time.monotonic()
        try:
            m = OrtModule(graph, options)
            t1 = time.monotonic()
            with torch.no_grad():
                ok, _ = match(m(*inputs), reference)
            cost["call_s"] = max(cost["call_s"], time.monotonic() - t1)
        except Exception:  # noqa: BLE001 - a session that does not build or run is not a candidate
            continue
        cost["build_s"] += t1 - t0
        if ok:
            built[setting_name(options)] = m
    if not built:
        raise ValueError("no ONNX Runtime setting reproduces eager's outputs")
    if built_out is not None:
        built_out.update(built)
    if len(built) == 1:
        name = next(iter(built))
        return built[name], {}
    timings = time_runs({n: (lambda m=m: m(*inputs)) for n, m in built.items()})
    best = min(timings.values(), key=lambda t: t.median).name
    return built[best], {n: round(t.median * 1e3, 4) for n, t in timings.items()}


def _until(items, deadline, projected):
    """``items`` until ``projected()`` (seconds the next item and the timing would still take;
    None: go on) would end after ``deadline``. The generator is not advanced past that point, so
    a fusion that would not be timed is not computed."""
    for item in items:
        yield item
        if deadline is not None:
            more = projected()
            if more is not None and time.monotonic() + more > deadline:
                return


def rebuild(onnx_bytes, options):
    """The module of stored ``options`` (from a plan or the bank) on a freshly exported graph:
    the recorded fusion is applied again."""
    graph = fuse(onnx_bytes, options["fusion"]) if options.get("fusion") else onnx_bytes
    return OrtModule(graph, options)
