"""OpenVINO as a whole-model candidate (optional: tried only when ``openvino`` imports).

The model is converted once with ``openvino.convert_model`` on its example inputs (OpenVINO's own
PyTorch frontend, which traces the model) and kept as OpenVINO's IR (the ``.xml`` graph and the
``.bin`` weights, fp32: weights are not compressed to fp16). At each thread count it is compiled
for the CPU with the latency hint (one inference at a time, as the tuner times it),
``INFERENCE_NUM_THREADS`` = the count and ``INFERENCE_PRECISION_HINT`` f32 (on a CPU with bf16
units OpenVINO would otherwise run in bf16, which is not fp32's result). :class:`OvModule` runs
the compiled model on CPU tensors and returns tensors (one output: a tensor; several: a tuple in
the model's order), so the result keeps a module interface; it pickles as its IR and options.
A plan of this strategy saves ``optimized.xml`` and ``optimized.bin`` and records OpenVINO's
version.
"""
import os
import tempfile

import torch

from .ort import importable

STRATEGY = "openvino"
XML_FILE = "optimized.xml"
BIN_FILE = "optimized.bin"

#: The compile settings of the candidate: OpenVINO's names, the thread count added per count.
SETTINGS = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}


def available():
    return importable("openvino")


def version():
    import openvino

    return openvino.__version__.split("-")[0]


def convert(model, inputs):
    """(graph xml bytes, weights bytes) of ``model`` converted on ``inputs`` (tensors only); raises
    when OpenVINO does not convert it. Every module's train/eval mode is put back afterwards."""
    import warnings

    import openvino as ov

    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise ValueError("OpenVINO conversion needs tensor inputs")
    modes = [(m, m.training) for m in model.modules()]
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings of data-dependent Python
            converted = ov.convert_model(model, example_input=inputs[0] if len(inputs) == 1 else tuple(inputs))
    finally:
        for m, training in modes:
            m.training = training
    with tempfile.TemporaryDirectory(prefix="portkit-ov-") as tmp:
        xml = os.path.join(tmp, "model.xml")
        ov.save_model(converted, xml, compress_to_fp16=False)
        with open(xml, "rb") as f:
            graph = f.read()
        with open(os.path.join(tmp, "model.bin"), "rb") as f:
            weights = f.read()
    return graph, weights


def options_at(threads):
    return dict(SETTINGS, INFERENCE_NUM_THREADS=int(threads))


class OvModule(torch.nn.Module):
    """An OpenVINO model compiled for the CPU, as a module: tensors in, tensors out."""

    def __init__(self, graph, weights, options):
        super().__init__()
        import numpy as np
        import openvino as ov

        self.graph, self.weights, self.options = bytes(graph), bytes(weights), dict(options)
        core = ov.Core()
        model = core.read_model(model=self.graph, weights=ov.Tensor(np.frombuffer(self.weights, dtype=np.uint8).copy()))
        self.compiled = core.compile_model(model, "CPU", dict(self.options))
        self.request = self.compiled.create_infer_request()
        self.outputs = list(self.compiled.outputs)

    def forward(self, *xs):
        res = self.request.infer([x.detach().cpu().contiguous().numpy() for x in xs])
        outs = [torch.from_numpy(res[o].copy()) for o in self.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __reduce__(self):
        # Recompiled from the IR and the options (torch.save, copy).
        return (OvModule, (self.graph, self.weights, self.options))

    def __deepcopy__(self, memo):
        return OvModule(self.graph, self.weights, self.options)
