"""SGAT for PyTorch models (``portkit tune --framework=pytorch``): tunes how each subgraph of a
model runs on this machine and writes an artifact that loads with one call.

    import portkit.tune
    optimized, report = portkit.tune.optimize(model, (x,), output="out")
    model2 = portkit.tune.load("out/optimized.pt")      # or torch.jit.load for TorchScript plans
"""
from .sgat import TuneError, load, optimize, outputs_match  # noqa: F401
