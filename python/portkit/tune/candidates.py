"""Strategies for one subgraph (or the whole model): each turns an eval-mode module and its
example inputs into a module that computes the same outputs, or raises when it does not apply.

One entry per strategy in STRATEGIES: name -> (build function, one-line description). A strategy
never changes parameter values beyond exact algebra (conv-bn folding); the tuner checks every
candidate's outputs against eager and drops one that differs.
"""
import copy

import torch


def _script_or_trace(module, inputs):
    import torch

    try:
        return torch.jit.script(module)
    except Exception:  # noqa: BLE001 - modules TorchScript cannot compile are traced instead
        return torch.jit.trace(module, tuple(inputs), check_trace=False)


def eager(module, inputs):
    return module


def script_freeze(module, inputs):
    """TorchScript (script, else trace) then torch.jit.freeze: constants inlined, fused."""
    import torch

    return torch.jit.freeze(_script_or_trace(module, inputs).eval())


def optimize_for_inference(module, inputs):
    """torch.jit.optimize_for_inference: freeze + conv/bn folding + mkldnn layouts where useful."""
    import torch

    return torch.jit.optimize_for_inference(_script_or_trace(module, inputs).eval())


def fx_fold_freeze(module, inputs):
    """Conv-BN folding on the fx graph (torch.fx.experimental.optimization.fuse), then freeze."""
    import torch
    from torch.fx.experimental.optimization import fuse

    if not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in module.modules()):
        raise ValueError("no BatchNorm to fold")
    folded = fuse(copy.deepcopy(module))
    return torch.jit.freeze(_script_or_trace(folded, inputs).eval())


class _ChannelsLast(torch.nn.Module):
    """Runs the wrapped module on channels_last inputs and returns contiguous outputs: the layout
    conversions at the subgraph's boundaries are part of what is timed."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        y = self.inner(x.contiguous(memory_format=torch.channels_last))
        return y.contiguous()


def channels_last(module, inputs):
    """channels_last weights and activations inside the subgraph (conv-heavy blocks), frozen."""
    import torch
    from torch.fx.experimental.optimization import fuse

    if len(inputs) != 1 or not isinstance(inputs[0], torch.Tensor) or inputs[0].dim() != 4:
        raise ValueError("needs one 4-D input")
    if not any(isinstance(m, torch.nn.Conv2d) for m in module.modules()):
        raise ValueError("no convolution")
    inner = copy.deepcopy(module)
    if any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in inner.modules()):
        try:
            inner = fuse(inner)
        except Exception:  # noqa: BLE001 - not an fx graph: keep the BatchNorm
            pass
    inner = inner.to(memory_format=torch.channels_last)
    wrapped = _ChannelsLast(inner).eval()
    traced = torch.jit.trace(wrapped, tuple(inputs), check_trace=False)
    return torch.jit.freeze(traced.eval())


STRATEGIES = {
    "eager": (eager, "the model as written (PyTorch's own kernels)"),
    "script_freeze": (script_freeze, "TorchScript + torch.jit.freeze"),
    "optimize_for_inference": (optimize_for_inference, "torch.jit.optimize_for_inference (mkldnn, conv-bn fold)"),
    "fx_fold_freeze": (fx_fold_freeze, "fx conv-bn folding + freeze"),
    "channels_last": (channels_last, "channels_last layout inside the subgraph, conversions at its edges"),
}

#: Version of the strategy set; part of every bank key, so a changed set never reuses old entries.
STRATEGY_SET_VERSION = "sgat-1"


def torch_compile_available():
    import torch

    return hasattr(torch, "compile") and int(torch.__version__.split(".")[0]) >= 2


def compile_module(module, mode=None):
    """torch.compile (inductor) of a module; compilation happens on the first call."""
    import torch

    return torch.compile(module, mode=mode) if mode else torch.compile(module)
