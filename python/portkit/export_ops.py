"""Operator list of a PyTorch model for ``portkit tune --job-type=2 --model=FILE``.

Runs the model once on example inputs with forward hooks on every leaf module and writes one
entry per distinct (module, input shapes): ``nn.Linear`` becomes ``MatMul`` (A[M,K] x B[K,N],
with ``attrs.bias``), ``nn.Conv2d`` becomes ``Conv2D`` (NCHW input, OIHW weight, stride, padding,
groups); every other leaf module is listed under its class name, which ``portkit tune`` reports
as untuned. ``count`` is how often the entry ran in the forward pass.

Command line::

    python -m portkit.export_ops --model mypkg.models:make_model --input 8x3x224x224 -o ops.json

``--model`` names a callable (``module:attr``) that returns an ``nn.Module``; ``--input`` gives
each positional input as ``[DTYPE:]D0xD1x...`` (float32 by default, e.g. ``int64:8x128`` for token
ids; repeatable or comma-separated), as ``portkit tune --framework=pytorch`` reads it. From Python::

    from portkit.export_ops import export_ops
    ops = export_ops(model, (torch.randn(8, 3, 224, 224),), name="resnet")
"""
import argparse
import importlib
import json
import os
import sys
import tempfile

DTYPES = {"torch.float32": "float32", "torch.float16": "float16", "torch.bfloat16": "bfloat16",
          "torch.float64": "float64"}


def _dtype(t):
    return DTYPES.get(str(t.dtype), str(t.dtype).replace("torch.", ""))


def _pair(v):
    return [int(v[0]), int(v[1])] if isinstance(v, (tuple, list)) else [int(v), int(v)]


def _describe(module, inputs):
    """(op_type, inputs, attrs, dtype) of one call of a leaf module."""
    import torch.nn as nn

    tensors = [t for t in inputs if hasattr(t, "shape")]
    dtype = _dtype(tensors[0]) if tensors else "float32"
    if isinstance(module, nn.Linear) and tensors:
        x = tensors[0]
        m = 1
        for d in x.shape[:-1]:
            m *= int(d)
        k, n = int(module.in_features), int(module.out_features)
        return "MatMul", [[m, k], [k, n]], {"bias": module.bias is not None}, dtype
    if isinstance(module, nn.Conv2d) and tensors:
        x = tensors[0]
        shape = [int(d) for d in x.shape]
        if len(shape) == 3:  # unbatched input
            shape = [1] + shape
        weight = [int(d) for d in module.weight.shape]
        padding = module.padding
        op_type = "Conv2D"
        if isinstance(padding, str):  # 'valid' or 'same' (stride 1)
            total = [int(module.dilation[i]) * (int(module.kernel_size[i]) - 1) for i in range(2)]
            padding = [0, 0] if padding == "valid" else [t // 2 for t in total]
            if module.padding == "same" and any(t % 2 for t in total):
                # PyTorch pads an odd total asymmetrically (the extra row/column at the bottom/right);
                # portkit's Conv2D pads symmetrically: listed as its own type, which is not tuned.
                op_type = "Conv2D_asymmetric_same_padding"
        attrs = {"stride": _pair(module.stride), "padding": _pair(padding), "groups": int(module.groups),
                 "bias": module.bias is not None}
        if _pair(module.dilation) != [1, 1]:
            attrs["dilation"] = _pair(module.dilation)
        if module.padding_mode != "zeros":
            op_type = "Conv2D_padding_mode_" + module.padding_mode
        return op_type, [shape, weight], attrs, dtype
    return type(module).__name__, [[int(d) for d in t.shape] for t in tensors], {}, dtype


def export_ops(model, example_inputs, name="model"):
    """Runs ``model(*example_inputs)`` once (eval mode, no grad) and returns the op list dict."""
    import torch

    entries = {}
    order = []
    handles = []

    def hook_for(qualname):
        def hook(module, inputs, output):
            op_type, shapes, attrs, dtype = _describe(module, inputs)
            key = (qualname, op_type, json.dumps(shapes), json.dumps(attrs, sort_keys=True), dtype)
            if key not in entries:
                same_name = sum(1 for k in order if k[0] == qualname)
                op_name = qualname if same_name == 0 else "%s#%d" % (qualname, same_name + 1)
                entries[key] = {"op_name": op_name, "op_type": op_type, "inputs": shapes, "attrs": attrs,
                                "dtype": dtype, "count": 0}
                order.append(key)
            entries[key]["count"] += 1
        return hook

    for qualname, module in model.named_modules():
        if len(list(module.children())) == 0:
            handles.append(module.register_forward_hook(hook_for(qualname or type(module).__name__)))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(*example_inputs)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return {"name": name, "ops": [entries[k] for k in order]}


def write_op_list(path, ops):
    """Writes the op list atomically (temp file + rename)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".export_ops.")
    try:
        with os.fdopen(fd, "w") as f:
            # One operator per line: readable and diff-friendly.
            f.write('{"name": %s, "ops": [\n' % json.dumps(ops["name"]))
            f.write(",\n".join("  " + json.dumps(op) for op in ops["ops"]))
            f.write("\n]}\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _parse_inputs(text):
    """One --input value: ``[DTYPE:]D0xD1x...``, or several comma-separated (tune's syntax)."""
    from .tune.__main__ import UsageError, parse_inputs

    try:
        return parse_inputs(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m portkit.export_ops",
                                description="Write the operator list of a PyTorch model for portkit tune.")
    p.add_argument("--model", required=True, help="module:callable returning an nn.Module")
    p.add_argument("--input", action="append", type=_parse_inputs, required=True,
                   help="a positional input [DTYPE:]D0xD1x..., float32 by default, e.g. 8x3x224x224 or "
                        "int64:8x128 (repeatable, or comma-separated)")
    p.add_argument("--name", help="model name in the list (default: the module's name)")
    p.add_argument("-o", "--output", required=True, help="op list JSON to write")
    p.add_argument("--force", action="store_true",
                   help="replace --output even when portkit did not write it (refused otherwise)")
    args = p.parse_args(argv)
    from .outputs import OutputExistsError, check_replaceable, record_written
    try:  # before the model is built: a user's file is never replaced (docs/safety.md, Outputs)
        check_replaceable(args.output, force=args.force, option="--output")
    except OutputExistsError as e:
        p.exit(2, "%s\n" % e)
    if ":" not in args.model:
        p.error("--model %r: expected module:callable" % args.model)
    mod_name, attr = args.model.split(":", 1)
    sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as e:
        p.error("--model %s: %s" % (args.model, e))
    import torch

    torch.manual_seed(0)
    model = factory()
    if not isinstance(model, torch.nn.Module):
        p.error("--model %s: returned %s, not a torch.nn.Module" % (args.model, type(model).__name__))
    from .tune.__main__ import make_inputs

    inputs = make_inputs([spec for value in args.input for spec in value])
    ops = export_ops(model, inputs, name=args.name or mod_name.rsplit(".", 1)[-1])
    write_op_list(args.output, ops)
    record_written(args.output)
    tunable = sum(1 for o in ops["ops"] if o["op_type"] in ("MatMul", "Conv2D"))
    print("wrote %s: %d operators (%d MatMul/Conv2D)" % (args.output, len(ops["ops"]), tunable), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
