"""Linear layers on oneDNN's linear with the weight reordered once and the epilogue fused.

torch's ``F.linear`` on the CPU calls MKL's (or OpenBLAS's) GEMM on the plain weight every time
and runs the activation after it as a separate pass. oneDNN's linear
(``torch.ops.mkldnn._linear_pointwise``, in torch >= 2.0 CPU builds with oneDNN: what inductor's
freezing pass uses) takes the weight already reordered into its blocked layout and applies the
activation, or a residual add, inside the GEMM's epilogue. On the example MLP and encoder at fp32
this is 1.1-1.3x per layer on this 2-core machine (docs/tune.md).

``rewrite_linears`` replaces every fp32 ``torch.nn.Linear`` of an fx graph, with the activation
that follows it (when the Linear's only user) or else the residual add that follows it, by a
``PackedLinear``. The result computes the same function to fp32 rounding; the tuner still checks
its outputs against eager like every candidate's.
"""
import operator

import torch
import torch.fx
import torch.nn.functional as F


def available():
    """True when this torch has oneDNN's linear (torch >= 2.0 with oneDNN)."""
    try:
        return bool(torch.backends.mkldnn.is_available()) and hasattr(torch.ops.mkldnn, "_linear_pointwise") \
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    except (AttributeError, RuntimeError):
        return False


def _gelu(y, algorithm):
    return F.gelu(y, approximate=algorithm or "none")


#: oneDNN epilogue name -> what torch runs for it (the fallback path and the reference).
EPILOGUES = {
    "none": lambda y, algorithm: y,
    "relu": lambda y, algorithm: F.relu(y),
    "gelu": _gelu,
    "swish": lambda y, algorithm: F.silu(y),
    "sigmoid": lambda y, algorithm: torch.sigmoid(y),
    "tanh": lambda y, algorithm: torch.tanh(y),
}


class PackedLinear(torch.nn.Module):
    """``epilogue(linear(x, weight, bias))`` (``+ other`` for the residual form) on oneDNN's linear
    with ``weight`` reordered into oneDNN's layout once.

    Inference: oneDNN's op has no backward, so where autograd needs one (grad enabled and the input,
    or the residual, requires grad) the module runs torch's linear and activation instead, as it
    does for inputs that are not fp32 on the CPU and in a torch without oneDNN's linear. The plain
    weight is kept beside the reordered one (twice the layer's weight memory). The
    reordered weight is an opaque oneDNN tensor that torch.save cannot write: the module pickles the
    plain weight and reorders it again when loaded, and again whenever the plain weight was changed
    in place (its version counter moved)."""

    def __init__(self, weight, bias, epilogue="none", algorithm="", residual=False, batch=1):
        super().__init__()
        if epilogue not in EPILOGUES:
            raise ValueError("unsupported epilogue %r" % epilogue)
        self.weight = torch.nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach().clone(), requires_grad=False)
        self.epilogue = epilogue
        self.algorithm = algorithm
        self.residual = residual
        self.batch = max(1, int(batch))
        self._pack()

    def _pack(self):
        # Loaded into a torch without oneDNN's linear: torch's own ops from then on.
        self._packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), self.batch) \
            if available() else None
        self._packed_version = self.weight._version

    def extra_repr(self):
        return "in=%d, out=%d, epilogue=%s%s" % (self.weight.shape[1], self.weight.shape[0], self.epilogue,
                                                "+add" if self.residual else "")

    def forward(self, x, other=None):
        needs_grad = torch.is_grad_enabled() and (
            x.requires_grad or self.weight.requires_grad or (other is not None and other.requires_grad))
        if needs_grad or self._packed is None or x.dtype != torch.float32 or x.device.type != "cpu":
            y = EPILOGUES[self.epilogue](F.linear(x, self.weight, self.bias), self.algorithm)
            return y + other if self.residual else y
        if self.weight._version != self._packed_version:
            self._pack()
        if self.residual:
            return torch.ops.mkldnn._linear_pointwise.binary(x, other, self._packed, self.bias, "add")
        return torch.ops.mkldnn._linear_pointwise(x, self._packed, self.bias, self.epilogue, [],
                                                  self.algorithm or None)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_packed", None)
        state.pop("_packed_version", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._pack()


def _activation(gm, node):
    """(epilogue, algorithm) when ``node`` is an activation oneDNN can fuse, else None."""
    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        if isinstance(mod, torch.nn.GELU):
            return "gelu", mod.approximate
        simple = {torch.nn.ReLU: "relu", torch.nn.SiLU: "swish", torch.nn.Sigmoid: "sigmoid", torch.nn.Tanh: "tanh"}
        for cls, name in simple.items():
            if type(mod) is cls:
                return name, ""
        return None
    if node.op == "call_function":
        if node.target in (F.gelu, torch._C._nn.gelu) and len(node.args) == 1:
            approximate = node.kwargs.get("approximate", "none")
            return ("gelu", approximate) if set(node.kwargs) <= {"approximate"} and approximate in ("none", "tanh") \
                else None
        if node.kwargs or len(node.args) != 1:
            return None  # e.g. relu(x, inplace=True)
        table = {F.relu: "relu", torch.relu: "relu", F.silu: "swish", torch.sigmoid: "sigmoid",
                 torch.tanh: "tanh"}
        return (table[node.target], "") if node.target in table else None
    if node.op == "call_method" and len(node.args) == 1 and not node.kwargs:
        table = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh"}
        return (table[node.target], "") if node.target in table else None
    return None


def _meta(node):
    return node.meta.get("tensor_meta") if hasattr(node, "meta") else None


def _residual(node, linear):
    """The other operand when ``node`` is ``linear + other`` (either order) and ``other`` is a tensor
    of the Linear output's own shape and dtype (no broadcasting), else None."""
    if node.op != "call_function" or node.target not in (operator.add, torch.add) or node.kwargs or \
            len(node.args) != 2:
        return None
    other = node.args[1] if node.args[0] is linear else node.args[0]
    if other is linear:
        return None  # linear + linear
    mine, theirs = _meta(linear), _meta(other) if isinstance(other, torch.fx.Node) else None
    if mine is None or theirs is None or not hasattr(theirs, "shape") or \
            tuple(theirs.shape) != tuple(mine.shape) or theirs.dtype != mine.dtype:
        return None
    return other


def rewrite_linears(gm, example_inputs):
    """Replaces the fp32 Linear layers of fx GraphModule ``gm`` (in place) by PackedLinear, fusing
    the activation or residual add that follows each when the Linear's output has no other user.
    Shapes come from running ``example_inputs`` through the graph (fx's ShapeProp): the first
    dimensions of each Linear's input give oneDNN's batch hint. Returns the number of Linears
    replaced."""
    from torch.fx.passes.shape_prop import ShapeProp

    from .candidates import free_attr_name

    if not available():
        raise ValueError("needs torch >= 2.0 with oneDNN (torch.ops.mkldnn._linear_pointwise)")
    with torch.no_grad():
        ShapeProp(gm).propagate(*example_inputs)
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
            continue
        mod = gm.get_submodule(node.target)
        if type(mod) is not torch.nn.Linear or mod.weight.dtype != torch.float32 or mod.weight.device.type != "cpu":
            continue
        in_meta = _meta(node.args[0])
        if in_meta is None or in_meta.dtype != torch.float32 or len(in_meta.shape) < 2:
            continue
        batch = 1
        for d in in_meta.shape[:-1]:
            batch *= int(d)
        epilogue, algorithm, fused, other = "none", "", None, None
        if len(node.users) == 1:
            user = next(iter(node.users))
            act = _activation(gm, user)
            if act is not None:
                (epilogue, algorithm), fused = act, user
            else:
                other = _residual(user, node)
                fused = user if other is not None else None
        name = free_attr_name(gm, "%s_onednn" % node.target.replace(".", "_"))
        gm.add_submodule(name, PackedLinear(mod.weight, mod.bias, epilogue, algorithm, other is not None, batch))
        anchor = fused if fused is not None else node
        with gm.graph.inserting_after(anchor):
            args = (node.args[0],) if other is None else (node.args[0], other)
            new = gm.graph.call_module(name, args)
        new.meta = dict(anchor.meta)  # its output is the anchor's: the next Linear reads its shape
        anchor.replace_all_uses_with(new)
        if fused is not None:
            gm.graph.erase_node(fused)
        gm.graph.erase_node(node)
        count += 1
    if count:
        gm.graph.eliminate_dead_code()
        gm.delete_all_unused_submodules()
        gm.graph.lint()
        gm.recompile()
    return count
