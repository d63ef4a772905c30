"""Strategies for one subgraph (or the whole model): each turns an eval-mode module and its
example inputs into a module that computes the same outputs, or raises when it does not apply.

A strategy has two halves: ``prepare`` rewrites the module and returns TorchScript that is not
yet frozen (fx conv-bn folding, channels_last), ``finish`` is what runs on the TorchScript
(nothing, torch.jit.freeze, torch.jit.optimize_for_inference). On its own a strategy is
``finish(prepare(m))``. In the composite model each subgraph keeps its ``prepare`` and the
finishing pass runs once over the whole model, because TorchScript cannot hold a frozen module
inside another module (torch 1.13 and 2.x refuse the attribute's type).

One entry per strategy in STRATEGIES. A strategy never changes parameter values beyond exact
algebra (conv-bn folding); the tuner checks every candidate's outputs against eager and drops
one that differs.
"""
import copy
import io

import torch


def script_or_trace(module, inputs):
    """TorchScript of ``module``: scripted, else traced on ``inputs``."""
    if isinstance(module, torch.jit.ScriptModule):
        return module
    try:
        return torch.jit.script(module)
    except Exception:  # noqa: BLE001 - modules TorchScript cannot compile are traced instead
        return torch.jit.trace(module, tuple(inputs), check_trace=False)


def _has_bn(module):
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in module.modules())


def prepare_plain(module, inputs):
    return script_or_trace(copy.deepcopy(module), inputs)


def prepare_fx_fold(module, inputs):
    """Conv-BN folding on the fx graph (torch.fx.experimental.optimization.fuse)."""
    from torch.fx.experimental.optimization import fuse

    if not _has_bn(module):
        raise ValueError("no BatchNorm to fold")
    return script_or_trace(fuse(copy.deepcopy(module)), inputs)


class ChannelsLast(torch.nn.Module):
    """Runs the wrapped module on channels_last inputs and returns contiguous outputs: the layout
    conversions at the subgraph's boundaries are part of what is timed."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        y = self.inner(x.contiguous(memory_format=torch.channels_last))
        return y.contiguous()


def prepare_channels_last(module, inputs):
    """channels_last weights and activations inside the subgraph (conv blocks), BN folded."""
    from torch.fx.experimental.optimization import fuse

    if len(inputs) != 1 or not isinstance(inputs[0], torch.Tensor) or inputs[0].dim() != 4:
        raise ValueError("needs one 4-D input")
    if not any(isinstance(m, torch.nn.Conv2d) for m in module.modules()):
        raise ValueError("no convolution")
    inner = copy.deepcopy(module)
    if _has_bn(inner):
        try:
            inner = fuse(inner)
        except Exception:  # noqa: BLE001 - not an fx graph: keep the BatchNorm
            pass
    inner = inner.to(memory_format=torch.channels_last)
    return torch.jit.trace(ChannelsLast(inner).eval(), tuple(inputs), check_trace=False)


def _is_call(node, fns, methods=()):
    import torch.fx

    if not isinstance(node, torch.fx.Node):
        return False
    if node.op == "call_function" and node.target in fns:
        return True
    return node.op == "call_method" and node.target in methods


class ScaledDotProductAttention(torch.nn.Module):
    """F.scaled_dot_product_attention as a module: fx keeps a module call as one node when it
    traces a GraphModule's code again (torch.load of a saved GraphModule does), whereas the function
    itself refuses the traced stand-in for its ``scale``."""

    def forward(self, q, k, v, scale: float):
        import torch.nn.functional as F

        return F.scaled_dot_product_attention(q, k, v, scale=scale)


def free_attr_name(gm, base):
    """``base``, with underscores appended until no attribute of ``gm`` has that name."""
    name = base
    while hasattr(gm, name):
        name += "_"
    return name


def rewrite_attention(gm):
    """Replaces softmax(q @ k.transpose(-2, -1) / c, dim=-1) @ v (also ``* c``) in an fx graph by
    F.scaled_dot_product_attention(q, k, v, scale=1/c): one fused kernel (torch >= 2.1) instead
    of materialising the attention matrix. Returns the number of rewrites."""
    import operator

    import torch.nn.functional as F

    matmuls = (operator.matmul, torch.matmul)
    softmaxes = (torch.softmax, F.softmax)
    count = 0
    for node in list(gm.graph.nodes):
        if not _is_call(node, matmuls, ("matmul",)) or len(node.args) != 2:
            continue
        sm, v = node.args
        if not _is_call(sm, softmaxes, ("softmax",)) or len(sm.users) != 1:
            continue
        dim = sm.kwargs.get("dim", sm.args[1] if len(sm.args) > 1 else None)
        if dim != -1:
            continue
        scaled = sm.args[0]
        if not _is_call(scaled, (operator.truediv, operator.mul, torch.div, torch.mul)) or len(scaled.users) != 1:
            continue
        scores, c = scaled.args
        if not _is_call(scores, matmuls, ("matmul",)) or len(scores.users) != 1:
            continue
        q, kt = scores.args
        if not _is_call(kt, (torch.transpose,), ("transpose",)) or len(kt.users) != 1:
            continue
        dims = tuple(kt.args[1:3])
        if dims not in ((-2, -1), (-1, -2)):
            continue
        k = kt.args[0]
        with gm.graph.inserting_before(node):
            if isinstance(c, (int, float)):
                scale = 1.0 / c if scaled.target in (operator.truediv, torch.div) else float(c)
            elif scaled.target in (operator.truediv, torch.div):
                scale = gm.graph.call_function(operator.truediv, (1.0, c))
            else:
                scale = c
            name = free_attr_name(gm, "scaled_dot_product_attention_%d" % count)
            gm.add_submodule(name, ScaledDotProductAttention())
            fused = gm.graph.call_module(name, (q, k, v, scale))
        node.replace_all_uses_with(fused)
        for dead in (node, sm, scaled, scores, kt):
            gm.graph.erase_node(dead)
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


def prepare_sdpa(module, inputs):
    """Attention written out (matmul, scale, softmax, matmul) fused into scaled_dot_product_attention."""
    if not _sdpa_available():
        raise ValueError("needs torch >= 2.1 (scaled_dot_product_attention with scale)")
    gm = _fx_copy(module)
    if rewrite_attention(gm) == 0:
        raise ValueError("no attention pattern")
    return script_or_trace(gm, inputs)


def _sdpa_available():
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    return (major, minor) >= (2, 1)


def _fx_copy(module):
    import torch.fx

    return copy.deepcopy(module) if isinstance(module, torch.fx.GraphModule) else torch.fx.symbolic_trace(
        copy.deepcopy(module))


def build_fx_fused(module, inputs):
    """Whole-model strategy ``fx_fused``: an fx GraphModule, run eagerly, in which written-out
    attention is scaled_dot_product_attention (torch >= 2.1) and every fp32 Linear runs on oneDNN's
    linear with its weight reordered once and the following activation or residual add fused
    (portkit.tune.onednn; torch >= 2.0 with oneDNN). Raises ValueError when neither applies."""
    from . import onednn

    if not _sdpa_available() and not onednn.available():
        raise ValueError("needs torch >= 2.0 with oneDNN")
    gm = _fx_copy(module)
    attention = rewrite_attention(gm) if _sdpa_available() else 0
    linears = onednn.rewrite_linears(gm, inputs) if onednn.available() else 0
    if not attention and not linears:
        raise ValueError("no written-out attention and no fp32 Linear to rewrite")
    return gm


def portable_fx_fused(module, inputs):
    """What ``torch.jit.load`` gets for an fx_fused plan: the sdpa_freeze strategy (the attention
    rewrite, frozen TorchScript), or script_freeze where there is no attention to rewrite (oneDNN's
    reordered weights are opaque tensors that TorchScript cannot save; ``portkit.tune.load``
    returns the module that was timed)."""
    try:
        return build("sdpa_freeze", module, inputs)
    except ValueError:  # no written-out attention, or torch < 2.1
        return build("script_freeze", module, inputs)


def prepare_opat(module, inputs):
    """Linear layers on portkit's tuned GEMM kernels (torch.ops.portkit.linear), for the shapes
    whose kernel was routed (portkit.tune.opat: it beat torch's linear beyond the noise)."""
    from . import opat

    routed = set(opat.registered())
    if not routed or not any(s in routed for s in opat.linear_shapes(module, inputs)):
        raise ValueError("no Linear of this subgraph has a routed OPAT kernel")
    m = copy.deepcopy(module)
    opat.replace_linears(m)
    return script_or_trace(m, inputs)


def prepare_onnxruntime(module, inputs, options=None, threads=None, deadline=None):
    """The subgraph exported to ONNX and run by ONNX Runtime at ``threads`` intra-op threads (None:
    torch's count now): with ``options`` (from a plan or the bank) as given, else the fastest of
    ort.SUBGRAPH_SETTINGS and the transformer fusions that apply, timed here (portkit.tune.ort)."""
    from . import ort
    from .measure import measure_interleaved
    from .sgat import outputs_match

    if not ort.available():
        raise ValueError("onnxruntime is not installed")
    with torch.no_grad():
        ref = module(*inputs)
    if not flat_tensors(ref):
        raise ValueError("the subgraph's output is not a tensor or a flat tuple of tensors")
    graph = ort.export(module, inputs)
    threads = int(threads or torch.get_num_threads())
    if options:
        return ort.rebuild(graph, dict(options, intra_op_num_threads=threads))

    def time_runs(runs):
        return measure_interleaved(runs, rounds=5, warmup=1, min_sample_s=0.001, deadline=deadline)

    best, _ = ort.search(graph, inputs, ref, threads, outputs_match, time_runs, settings=ort.SUBGRAPH_SETTINGS,
                         deadline=deadline)
    return best


def flat_tensors(out):
    """Whether ``out`` is a tensor or a tuple of tensors (what an ONNX Runtime session returns)."""
    if isinstance(out, torch.Tensor):
        return True
    return isinstance(out, tuple) and len(out) > 1 and all(isinstance(o, torch.Tensor) for o in out)


def finish_none(ts):
    return ts


def finish_freeze(ts):
    return torch.jit.freeze(ts.eval())


def finish_ofi(ts):
    return torch.jit.optimize_for_inference(ts.eval())


FINISHES = {"none": finish_none, "freeze": finish_freeze, "optimize_for_inference": finish_ofi}

#: name -> (prepare, finish name, description)
STRATEGIES = {
    "eager": (None, "none", "the model as written (PyTorch's own kernels)"),
    "script_freeze": (prepare_plain, "freeze", "TorchScript + torch.jit.freeze"),
    "optimize_for_inference": (prepare_plain, "optimize_for_inference",
                               "torch.jit.optimize_for_inference (freeze, conv-bn fold, mkldnn layouts)"),
    "fx_fold_freeze": (prepare_fx_fold, "freeze", "fx conv-bn folding + freeze"),
    "channels_last": (prepare_channels_last, "freeze", "channels_last inside the subgraph, conversions at its edges"),
    "channels_last_ofi": (prepare_channels_last, "optimize_for_inference",
                          "channels_last + optimize_for_inference"),
    "sdpa_freeze": (prepare_sdpa, "freeze", "written-out attention fused into scaled_dot_product_attention + freeze"),
    "fx_fused": (build_fx_fused, "none", "oneDNN linear with fused epilogues and the attention rewrite (fx, run "
                                        "eagerly)"),
    "onnxruntime": (prepare_onnxruntime, "none", "the subgraph exported to ONNX and run by ONNX Runtime (its options "
                                                 "searched)"),
    "opat": (prepare_opat, "freeze", "Linear layers on portkit's tuned GEMM kernels where they beat torch's + freeze"),
}

#: Subgraph strategies whose module is not TorchScript (an ONNX Runtime session, oneDNN's opaque
#: weights): they run only in an eagerly run composite (``composite_eager``, ``blocks``); a
#: TorchScript composite runs such a subgraph on torch's own ops.
EAGER_ONLY = ("fx_fused", "onnxruntime")


class Finished(torch.nn.Module):
    """A subgraph's TorchScript with its own finishing pass (freeze, optimize_for_inference), run
    from an eagerly run graph. It pickles as the TorchScript before the pass (torch.jit.save's
    bytes) and runs the pass again when unpickled: torch.save cannot hold TorchScript, and
    optimize_for_inference's mkldnn weights do not serialise on torch 1.13."""

    def __init__(self, prepared, finish, ts_bytes=None):
        super().__init__()
        if ts_bytes is None:
            buf = io.BytesIO()
            torch.jit.save(prepared, buf)
            ts_bytes = buf.getvalue()
        self.ts_bytes = ts_bytes
        self.finish = finish
        self.module = FINISHES[finish](prepared)

    def forward(self, *xs):
        return self.module(*xs)

    def __reduce__(self):
        return (_finished_from_bytes, (self.ts_bytes, self.finish))

    def __deepcopy__(self, memo):
        return _finished_from_bytes(self.ts_bytes, self.finish)


def _finished_from_bytes(ts_bytes, finish):
    return Finished(torch.jit.load(io.BytesIO(ts_bytes)).eval(), finish, ts_bytes)


def build_part(name, module, inputs, threads=None, options=None):
    """The module of subgraph strategy ``name`` as a part of an eagerly run composite: finished on
    its own (a :class:`Finished` TorchScript), an ONNX Runtime session at ``threads`` with the
    recorded ``options``, fx_fused's GraphModule, or ``module`` itself for eager (and for opat
    when no kernel of the part is routed in this run)."""
    prepare, finish, _ = STRATEGIES[name]
    if prepare is None:
        return module
    if name == "onnxruntime":
        return prepare_onnxruntime(module, inputs, options, threads)
    if name in EAGER_ONLY:
        return prepare(module, inputs)
    try:
        prepared = prepare(module, inputs)
    except ValueError:
        if name in OPAT_STRATEGIES:
            return module  # a bank hit whose kernel this run did not route
        raise
    return Finished(prepared, finish)

#: Strategies that need a job type beyond SGAT ("opat": kernels tuned by portkit tune --job-type=2).
OPAT_STRATEGIES = ("opat",)

#: Version of the strategy set; part of every bank key, so a changed set never reuses old entries.
STRATEGY_SET_VERSION = "sgat-10"  # sgat-10: openvino; sgat-9: per-subgraph fx_fused and onnxruntime, composite_eager, blocks


def build(name, module, inputs, deadline=None):
    """The module of strategy ``name`` on its own (prepare, then finish). ``deadline``
    (time.monotonic()): when the search inside a strategy (ONNX Runtime's settings) stops timing."""
    prepare, finish, _ = STRATEGIES[name]
    if prepare is None:
        return module
    if name == "onnxruntime":
        return prepare_onnxruntime(module, inputs, deadline=deadline)
    return FINISHES[finish](prepare(module, inputs))


def torch_compile_available():
    return hasattr(torch, "compile") and int(torch.__version__.split(".")[0]) >= 2


#: torch.compile settings a plan may name besides torch.compile's own modes ("default",
#: "max-autotune", ...): inductor options. "max-autotune-freeze": GEMM and convolution templates
#: benchmarked on this machine (the CPU's too) with the weights frozen into the graph as constants
#: and pre-packed (inference only: applies under torch.no_grad, as the tuner measures; with grad
#: enabled the same compiled code runs without the frozen weights).
COMPILE_SETTINGS = {"max-autotune-freeze": {"max_autotune": True, "freezing": True}}


def compile_module(module, mode=None, threads=None):
    """torch.compile (inductor) of a module; compilation happens on the first call. ``mode``: one
    of torch.compile's modes, a COMPILE_SETTINGS name, or None (torch.compile's default).
    ``threads``: the intra-op thread count inductor generates its C++ kernels for (its
    ``cpp.threads``; None: torch's count when the first call compiles). Inductor writes the count
    into the kernels and its graph cache does not key on torch's count (torch 2.8: a recompile
    after torch.set_num_threads reused kernels generated for the other count), so a module meant
    for a given count says so."""
    if mode in COMPILE_SETTINGS:
        options = dict(COMPILE_SETTINGS[mode])
    elif threads is None:
        return torch.compile(module, mode=mode) if mode else torch.compile(module)
    else:
        from torch._inductor import list_mode_options

        options = dict(list_mode_options(mode or "default"))
    if threads is not None:
        options["cpp.threads"] = int(threads)
    return torch.compile(module, options=options)


# ---- lower precision (opt-in: optimize(precision="bf16" | "int8-dynamic")) ----

#: The precision modes of ``optimize``; "fp32" (the default) tries no lower-precision candidate.
PRECISIONS = ("fp32", "bf16", "int8-dynamic")

#: Whole-model lower-precision strategies -> the precision mode that allows them. Their outputs
#: are not fp32's: each is accepted by the accuracy check (sgat.accuracy) instead of fp32's
#: tolerance.
LOWP_STRATEGIES = {"bf16_autocast": "bf16", "bf16_weights": "bf16", "int8_dynamic": "int8-dynamic"}

#: The accuracy a lower-precision candidate must keep on the example inputs against fp32 eager,
#: per mode: the largest absolute difference over the output's largest magnitude
#: (``max_rel_err``, the worst output) and the cosine similarity of the flattened output with
#: fp32's (``min_cosine``, the worst output).
DEFAULT_ACCURACY = {"bf16": {"max_rel_err": 2e-2, "min_cosine": 0.999},
                    "int8-dynamic": {"max_rel_err": 5e-2, "min_cosine": 0.99}}


def _to_fp32(out):
    """bfloat16 tensors of a (nested) output back to float32; everything else as it is."""
    if isinstance(out, torch.Tensor):
        return out.float() if out.dtype == torch.bfloat16 else out
    if isinstance(out, tuple) and hasattr(out, "_fields"):
        return type(out)(*(_to_fp32(o) for o in out))
    if isinstance(out, (list, tuple)):
        return type(out)(_to_fp32(o) for o in out)
    if isinstance(out, dict):
        return type(out)((k, _to_fp32(v)) for k, v in out.items())
    return out


class Bf16Autocast(torch.nn.Module):
    """The wrapped fp32 module run under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (the ops
    autocast lists run in bfloat16, the others in fp32); bfloat16 outputs are returned as float32."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = self.inner(*args)
        return _to_fp32(out)


class Bf16Weights(torch.nn.Module):
    """The wrapped module with its floating-point parameters and buffers in bfloat16, run on its
    float32 inputs cast to bfloat16; bfloat16 outputs are returned as float32."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        args = [a.bfloat16() if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a for a in args]
        return _to_fp32(self.inner(*args))


def _quantize_dynamic():
    """torch.ao.quantization.quantize_dynamic (torch >= 1.10) or torch.quantization's (older)."""
    ao = getattr(getattr(torch, "ao", None), "quantization", None)
    fn = getattr(ao, "quantize_dynamic", None) or getattr(getattr(torch, "quantization", None), "quantize_dynamic",
                                                          None)
    if fn is None:
        raise ValueError("this torch has no quantize_dynamic")
    return fn


#: The layers int8_dynamic quantizes (weights int8, activations quantized per call).
DYNAMIC_QUANT_LAYERS = (torch.nn.Linear, torch.nn.LSTM, torch.nn.GRU)


def lowp_unavailable(strategy):
    """Why ``strategy`` cannot run on this torch at all, or "" when it can."""
    if strategy in ("bf16_autocast", "bf16_weights"):
        if not hasattr(torch, "autocast") and strategy == "bf16_autocast":
            return "this torch has no torch.autocast"
        return ""
    if strategy == "int8_dynamic":
        try:
            _quantize_dynamic()
        except ValueError as e:
            return str(e)
        engines = [e for e in torch.backends.quantized.supported_engines if e != "none"]
        if not engines:
            return "this torch has no quantized engine"
        return ""
    return "unknown strategy %r" % strategy


def build_lowp(strategy, module):
    """The module of a lower-precision strategy over a copy of ``module`` (eval mode); raises
    ValueError when it does not apply."""
    import warnings

    why = lowp_unavailable(strategy)
    if why:
        raise ValueError(why)
    if strategy == "bf16_autocast":
        return Bf16Autocast(copy.deepcopy(module)).eval()
    if strategy == "bf16_weights":
        return Bf16Weights(copy.deepcopy(module).to(torch.bfloat16)).eval()
    if strategy == "int8_dynamic":
        if not any(isinstance(m, DYNAMIC_QUANT_LAYERS) for m in module.modules()):
            raise ValueError("no Linear, LSTM or GRU layer to quantize")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch 2.8 announces the API's move to torchao
            return _quantize_dynamic()(copy.deepcopy(module), set(DYNAMIC_QUANT_LAYERS), dtype=torch.qint8).eval()
    raise ValueError("unknown strategy %r" % strategy)


def lowp_torchscript(strategy, built, inputs):
    """TorchScript of a lower-precision module for ``torch.jit.load`` users (not frozen); raises
    ValueError where TorchScript cannot hold it (torch.autocast)."""
    if strategy == "bf16_autocast":
        raise ValueError("TorchScript does not keep torch.autocast on the CPU")
    if strategy == "bf16_weights":
        return torch.jit.trace(built, tuple(inputs), check_trace=False)
    return script_or_trace(built, inputs)
