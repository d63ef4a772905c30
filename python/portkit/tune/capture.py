"""Capture a model with torch.fx and split it into subgraphs at block boundaries.

A subgraph is a *block*: a direct child of the model, or an element of a top-level container
(``nn.Sequential`` / ``nn.ModuleList`` / ``nn.ModuleDict``) whose elements are themselves modules
with children (ResNet stages' blocks, transformer layers). Leaf modules called directly by the
model (a pooling layer, the classifier) and functional code between blocks join the neighbouring
run of such code, so the model's own seams (residual blocks, layers) are the boundaries where
activations leave one fused region and enter the next. A model made only of leaves (a written-out
transformer block) is one subgraph. When torch.fx cannot trace the model the whole model is one
opaque subgraph (reported as such).
"""
import hashlib
import json

CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")


class Capture:
    """The traced model, its split form and per-subgraph facts."""

    def __init__(self, model, split, names, traced, reason="", gm=None):
        self.model = model
        self.gm = gm  # the whole traced GraphModule (before the split)
        self.split = split  # GraphModule whose children submod_i are the subgraphs (None: not traced)
        self.names = names  # submod name -> readable name (owner path)
        self.traced = traced
        self.reason = reason


def _is_leaf(m):
    return len(list(m.children())) == 0


def _owner(root, target):
    """The block owning module path ``target`` (see the module docstring); '' = root-level code."""
    parts = target.split(".")
    children = dict(root.named_children())
    if all(_is_leaf(c) for c in children.values()):
        return ""
    first = children.get(parts[0])
    if first is None:
        return ""
    if type(first).__name__ in CONTAINERS and len(parts) > 1 and not all(_is_leaf(c) for c in first.children()):
        return parts[0] + "." + parts[1]
    if _is_leaf(first):
        return ""  # a leaf called by the model itself joins the code around it
    return parts[0]


def capture(model, example_inputs):
    """Traces ``model`` and splits it; falls back to one opaque subgraph when tracing fails."""
    import torch
    import torch.fx

    try:
        traced = torch.fx.symbolic_trace(model)
    except Exception as e:  # noqa: BLE001 - any tracing failure means "opaque"
        return Capture(model, None, {}, False, "torch.fx could not trace the model (%s: %s)" %
                       (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    # Segments in node order: a new one starts when the owning block changes; root-level code
    # stays with the segment before it (or the first one).
    seg_of = {}
    owners = []
    current = None
    for node in traced.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        owner = None
        if node.op == "call_module":
            owner = _owner(model, node.target)
        elif node.op == "get_attr":
            owner = _owner(model, node.target)
        if owner is not None and owner != "" and owner != current:
            current = owner
            owners.append(owner)
        elif current is None:
            current = owner if owner else "(model)"
            owners.append(current)
        seg_of[node] = len(owners) - 1
    if not owners:
        return Capture(model, None, {}, False, "the model has no operations")
    # Root-level code before the first block forms its own segment only if it has a module call;
    # otherwise it is merged (cheap reshapes are not worth a boundary).
    from torch.fx.passes.split_module import split_module

    node_seg = {n.name: s for n, s in seg_of.items()}
    try:
        split = split_module(traced, model, lambda n: node_seg[n.name])
    except Exception as e:  # noqa: BLE001 - a graph split_module cannot cut: tuned as one subgraph
        return Capture(model, None, {}, False, "torch.fx could not split the traced model at its blocks (%s: %s)" %
                       (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    names = {}
    for i, owner in enumerate(owners):
        names["submod_%d" % i] = owner if owner else "(model)"
    return Capture(model, split, names, True, gm=traced)


def subgraph_inputs(split, example_inputs):
    """Runs the split model once and returns {submod name: tuple of its inputs} (detached)."""
    import torch

    seen = {}
    hooks = []
    for name, sub in split.named_children():
        def pre(mod, args, _name=name):
            seen[_name] = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
        hooks.append(sub.register_forward_pre_hook(pre))
    try:
        with torch.no_grad():
            split(*example_inputs)
    finally:
        for h in hooks:
            h.remove()
    return seen


def _value_sig(v):
    import torch

    if isinstance(v, torch.Tensor):
        return ["T", list(v.shape), str(v.dtype), list(v.stride()) if v.dim() else []]
    if isinstance(v, (list, tuple)):
        return [type(v).__name__] + [_value_sig(x) for x in v]
    if isinstance(v, (int, float, bool, str)) or v is None:
        return [type(v).__name__, v]
    return [type(v).__name__]


def input_signature(inputs):
    return json.dumps(_value_sig(tuple(inputs)), sort_keys=True)


def _arg_sig(a, index):
    import torch.fx

    if isinstance(a, torch.fx.Node):
        return ["%", index.get(a.name, a.name)]
    if isinstance(a, (list, tuple)):
        return [type(a).__name__] + [_arg_sig(x, index) for x in a]
    if isinstance(a, dict):
        return {str(k): _arg_sig(v, index) for k, v in sorted(a.items())}
    if isinstance(a, (int, float, bool, str)) or a is None:
        return a
    return repr(a) if not hasattr(a, "__name__") else getattr(a, "__module__", "") + "." + a.__name__


def _module_sig(m):
    """Class, attributes (extra_repr) and parameter/buffer shapes and dtypes; never values."""
    tensors = [[n, list(t.shape), str(t.dtype)] for n, t in list(m.named_parameters()) + list(m.named_buffers())]
    return [type(m).__module__ + "." + type(m).__qualname__, m.extra_repr(), m.training, tensors]


def structural_hash(module, inputs=None):
    """sha256 of a module's structure: for a GraphModule its nodes (op, target, argument wiring,
    called modules' class/attributes/shapes), otherwise its module tree; plus input shapes."""
    import torch.fx

    items = []
    if isinstance(module, torch.fx.GraphModule):
        index = {}
        mods = dict(module.named_modules())
        for i, node in enumerate(module.graph.nodes):
            index[node.name] = i
            if node.op == "call_module":
                target = _module_sig(mods[node.target])
            elif node.op == "get_attr":
                obj = module
                for p in node.target.split("."):
                    obj = getattr(obj, p)
                target = ["attr", _value_sig(obj)]
            elif node.op in ("call_function",):
                target = _arg_sig(node.target, index)
            else:
                target = str(node.target) if node.op != "placeholder" else "in"
            items.append([node.op, target, _arg_sig(node.args, index), _arg_sig(node.kwargs, index)])
    else:
        for name, m in module.named_modules():
            items.append([name, _module_sig(m) if _is_leaf(m) else type(m).__qualname__])
    if inputs is not None:
        items.append(["inputs", input_signature(inputs)])
    return hashlib.sha256(json.dumps(items, sort_keys=True, default=str).encode()).hexdigest()
