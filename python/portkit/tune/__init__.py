"""SGAT for PyTorch models (``portkit tune --framework=pytorch``): tunes how each subgraph of a
model runs on this machine and writes an artifact that loads with one call.

    import portkit.tune
    optimized, report = portkit.tune.optimize(model, (x,), output="out")
    model2 = portkit.tune.load("out/optimized.pt")      # or torch.jit.load for TorchScript plans

An artifact is code (it holds pickled modules, TorchScript and kernels): load only artifacts from a
trusted source. ``load`` reads only the files its plan names inside the artifact's folder, each
with the SHA-256 recorded when it was saved (docs/tune.md, "An artifact is code").

torch is imported on first use, so that ``python -m portkit.tune`` can say clearly when the
interpreter has none.
"""
_PUBLIC = ("optimize", "load", "TuneError", "outputs_match")


def __getattr__(name):
    if name in _PUBLIC:
        from . import sgat

        return getattr(sgat, name)
    raise AttributeError("module 'portkit.tune' has no attribute %r" % name)


def __dir__():
    return sorted(list(globals()) + list(_PUBLIC))
