"""ONNX Runtime as a whole-model candidate (optional: tried only when ``onnxruntime`` imports).

The model is exported once with ``torch.onnx.export`` (TorchScript-based exporter) on the example
inputs; ONNX Runtime's own options are searched per thread count (graph optimisation level,
execution mode; intra-op threads = the count) and the fastest setting enters the whole-model race
as ``onnxruntime@Nt``. The module returned runs the session on CPU tensors and returns tensors
(one output: a tensor; several: a tuple in the export's order), so ``portkit.tune.load`` keeps a
module interface. The artifact holds ``optimized.onnx`` and its plan records the options and the
ONNX Runtime version it was tuned with.
"""
import io

import torch

STRATEGY = "onnxruntime"
ONNX_FILE = "optimized.onnx"

#: The settings searched at each thread count (ONNX Runtime's names).
SETTINGS = (
    {"graph_optimization_level": "ORT_ENABLE_ALL", "execution_mode": "ORT_SEQUENTIAL"},
    {"graph_optimization_level": "ORT_ENABLE_EXTENDED", "execution_mode": "ORT_SEQUENTIAL"},
    {"graph_optimization_level": "ORT_ENABLE_ALL", "execution_mode": "ORT_PARALLEL"},
)


def available():
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def version():
    import onnxruntime

    return onnxruntime.__version__


def export(model, inputs):
    """The ONNX bytes of ``model`` on ``inputs`` (tensors only); raises when it does not export."""
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise ValueError("ONNX export needs tensor inputs")
    buf = io.BytesIO()
    kwargs = {"do_constant_folding": True}
    major = int(torch.__version__.split(".")[0])
    if major >= 2:
        kwargs["dynamo"] = False  # the TorchScript exporter: needs no onnxscript
    with torch.no_grad():
        torch.onnx.export(model, tuple(inputs), buf, **kwargs)
    return buf.getvalue()


class OrtModule(torch.nn.Module):
    """An ONNX Runtime session as a module: tensors in, tensors out (CPU)."""

    def __init__(self, onnx_bytes, options):
        super().__init__()
        import onnxruntime as ort

        self.options = dict(options)
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, options["graph_optimization_level"])
        so.execution_mode = getattr(ort.ExecutionMode, options["execution_mode"])
        so.intra_op_num_threads = int(options["intra_op_num_threads"])
        so.inter_op_num_threads = 1
        self.session = ort.InferenceSession(onnx_bytes, so, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]

    def forward(self, *xs):
        feeds = {name: x.detach().cpu().contiguous().numpy() for name, x in zip(self.input_names, xs)}
        outs = [torch.from_numpy(o) for o in self.session.run(None, feeds)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __reduce__(self):
        raise TypeError("an ONNX Runtime session is not picklable; the artifact holds %s" % ONNX_FILE)


def settings_at(threads):
    return [dict(s, intra_op_num_threads=int(threads)) for s in SETTINGS]
