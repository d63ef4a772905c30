"""Blocks of a model torch.fx cannot trace whole (``transformers`` models, data-dependent Python):
the modules that can be tuned on their own, each run once on the example inputs.

One run of the model records every module's calls (``forward`` wrapped for that run: positional
and keyword arguments, both torches). From the model's children down, a module is a *block* when
it has children of its own, was called exactly once, every argument of that call is a tensor or a
constant (None, bool, int, float, str, or a tuple of those), and its output is a tensor or a
(nested) tuple of tensors and None; otherwise its children are looked at. A block is tuned as a
:class:`FlatCall`: its tensors in, a flat tuple of tensors out, the constants fixed — fx-traced
when torch.fx traces it that way (then fx_fused and the other fx strategies apply), else the
module itself (TorchScript trace and ONNX Runtime still apply). :class:`BlockCall` puts the tuned
module in the model's place and runs the original block for any call that differs from the one
tuned (other constants, shapes or dtypes), so the result stays correct for every call.
"""
import inspect

import torch

CONSTANTS = (type(None), bool, int, float, str)


def _constant(v):
    if isinstance(v, CONSTANTS):
        return True
    return isinstance(v, tuple) and all(_constant(x) for x in v)


def flatten_output(out):
    """(tensors, spec) of a tensor / None / nested tuple output; (None, None) for anything else."""
    if isinstance(out, torch.Tensor):
        return [out], "T"
    if out is None:
        return [], "N"
    if isinstance(out, tuple) and type(out) is tuple:
        tensors, specs = [], []
        for o in out:
            t, sp = flatten_output(o)
            if sp is None:
                return None, None
            tensors += t
            specs.append(sp)
        return tensors, tuple(specs)
    return None, None


def unflatten_output(flat, spec):
    """The output of ``spec`` from the flat tensors ``flat`` (an iterator)."""
    if spec == "T":
        return next(flat)
    if spec == "N":
        return None
    return tuple(unflatten_output(flat, s) for s in spec)


class CallSpec:
    """One recorded call of a module: which parameters were tensors (in signature order), the
    constants, the tensors' shapes and dtypes, and the output's structure."""

    def __init__(self, module, args, kwargs, out):
        sig = inspect.signature(module.forward)
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        self.tensor_params, self.constants = [], {}
        for p in sig.parameters.values():
            v = bound.arguments.get(p.name, p.default)
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                if v:
                    raise ValueError("called with *args / **kwargs")
                continue
            if isinstance(v, torch.Tensor):
                self.tensor_params.append(p.name)
            elif _constant(v):
                self.constants[p.name] = v
            else:
                raise ValueError("argument %s is a %s" % (p.name, type(v).__name__))
        if not self.tensor_params:
            raise ValueError("no tensor argument")
        self.tensors = [bound.arguments[n] for n in self.tensor_params]
        self.shapes = [(tuple(t.shape), t.dtype) for t in self.tensors]
        flat, self.out_spec = flatten_output(out)
        if self.out_spec is None or not flat:
            raise ValueError("output is not a tensor or a tuple of tensors")
        self.n_out = len(flat)

    def tensors_of(self, module, args, kwargs):
        """The call's tensors when it is the call tuned (same constants, shapes, dtypes), else None."""
        try:
            bound = inspect.signature(module.forward).bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        for name, want in self.constants.items():
            got = bound.arguments.get(name, want)
            if type(got) is not type(want) or got != want:
                return None
        tensors = [bound.arguments.get(n) for n in self.tensor_params]
        if any(not isinstance(t, torch.Tensor) for t in tensors):
            return None
        if [(tuple(t.shape), t.dtype) for t in tensors] != self.shapes:
            return None
        return tensors


class FlatCall(torch.nn.Module):
    """A block called the recorded way: its tensor arguments positionally, the constants fixed,
    the output as a flat tuple of tensors (one tensor: the tensor)."""

    def __init__(self, block, spec):
        super().__init__()
        self.block = block
        self.tensor_params = list(spec.tensor_params)
        self.constants = dict(spec.constants)

    def forward(self, *tensors):
        kwargs = dict(self.constants)
        kwargs.update(zip(self.tensor_params, tensors))
        flat, _ = flatten_output(self.block(**kwargs))
        return flat[0] if len(flat) == 1 else tuple(flat)

    def extra_repr(self):
        return "tensors=%s, constants=%r" % (self.tensor_params, sorted(self.constants.items()))


class BlockCall(torch.nn.Module):
    """The tuned module of a block in the model's place; any other call runs the original block."""

    def __init__(self, tuned, original, spec):
        super().__init__()
        self.tuned = tuned
        self.original = original
        self.spec = spec

    def forward(self, *args, **kwargs):
        tensors = self.spec.tensors_of(self.original, args, kwargs)
        if tensors is None:
            return self.original(*args, **kwargs)
        out = self.tuned(*tensors)
        flat = [out] if isinstance(out, torch.Tensor) else list(out)
        return unflatten_output(iter(flat), self.spec.out_spec)


class Block:
    """A block found in the model: its path, the module it is tuned as (fx GraphModule or
    FlatCall), its example tensors, its call spec and whether fx traced it."""

    def __init__(self, path, module, inputs, spec, traced):
        self.path, self.module, self.inputs, self.spec, self.traced = path, module, inputs, spec, traced


def record_calls(model, inputs):
    """{module path: [(args, kwargs, output)]} of every non-root module with children, from one run."""
    calls = {}
    wrapped = []
    for path, mod in model.named_modules():
        if not path or not list(mod.children()):
            continue
        orig = mod.forward

        def forward(*args, _path=path, _orig=orig, **kwargs):
            out = _orig(*args, **kwargs)
            calls.setdefault(_path, []).append((args, kwargs, out))
            return out
        mod.forward = forward
        wrapped.append(mod)
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for mod in wrapped:
            del mod.forward
    return calls


def _detach(v):
    return v.detach() if isinstance(v, torch.Tensor) else v


def find_blocks(model, inputs):
    """(blocks, skipped): the blocks in model order, and {path: why} for the modules looked at and
    not taken (their children were looked at instead)."""
    import torch.fx

    calls = record_calls(model, inputs)
    blocks, skipped = [], {}

    def visit(prefix, module):
        for name, child in module.named_children():
            path = prefix + name
            if not list(child.children()):
                continue
            seen = calls.get(path, [])
            why = ""
            if len(seen) != 1:
                why = "called %d times" % len(seen)
            else:
                args, kwargs, out = seen[0]
                try:
                    spec = CallSpec(child, args, kwargs, out)
                except (ValueError, TypeError) as e:
                    why = str(e)
            if why:
                skipped[path] = why
                visit(path + ".", child)
                continue
            flat = FlatCall(child, spec).eval()
            tensors = tuple(_detach(t) for t in spec.tensors)
            try:
                gm = torch.fx.symbolic_trace(child, concrete_args=dict(spec.constants))
                module, traced = _FlatGraph(gm, spec), True
            except Exception:  # noqa: BLE001 - not traceable: tuned through TorchScript's tracer / ONNX
                module, traced = flat, False
            blocks.append(Block(path, module, tensors, spec, traced))

    visit("", model)
    return blocks, skipped


def _FlatGraph(gm, spec):
    """fx GraphModule of FlatCall(block): the traced block's placeholders are its tensor
    parameters (the constants were concrete); its output is flattened as FlatCall's."""
    import torch.fx

    graph = torch.fx.Graph()
    env = {}
    outputs = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            name = node.target.lstrip("*")
            if name in spec.tensor_params:
                env[node] = graph.placeholder(name)
            continue  # a constant (concrete) argument: fx already used its value
        if node.op == "output":
            outputs = node.args[0]
            continue
        if any(a not in env for a in node.all_input_nodes):
            # fx's checks of a concrete argument (``_assert_is_none``, ``_assert(x == c)``); were
            # such a node's value used, the output below would name it and fail.
            continue
        env[node] = graph.node_copy(node, lambda n: env[n])

    def flat(a):
        if isinstance(a, torch.fx.Node):
            if a not in env:
                raise ValueError("the output depends on a constant argument")
            return [env[a]]
        if isinstance(a, (tuple, list)):
            return [x for y in a for x in flat(y)]
        return []
    outs = flat(outputs)
    graph.output(outs[0] if len(outs) == 1 else tuple(outs))
    order = {n: i for i, n in enumerate(spec.tensor_params)}
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if [p.target for p in placeholders] != sorted((p.target for p in placeholders), key=order.get) or \
            len(placeholders) != len(spec.tensor_params):
        raise ValueError("placeholders do not follow the tensor parameters")
    out = torch.fx.GraphModule(gm, graph)
    return out.eval()
