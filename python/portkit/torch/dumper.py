"""Operator-level dumps for accuracy comparison (in the manner of torch_npu's `torch.utils.dumper`).

    import portkit.torch
    with portkit.torch.dumper(dump_path="dump_ref"):
        loss = model(x).sum(); loss.backward()

Every aten operator (forward and backward, through torch's dispatch interception) is recorded with
its inputs and/or outputs; `level="module"` records module inputs/outputs instead, `"mix"` both.
Layout of a dump folder:

    manifest.jsonl        one JSON object per recorded operator, appended and flushed after it ran
    op_000042.safetensors its tensors (keys input.0, output.0, ...), exact dtypes (fp64/fp32/fp16/bf16,
                      torch 2.x's fp8 e4m3fn/e5m2 and uint16/32/64, the signed ints, uint8, bool)

so a crash loses at most the operator in flight. Manifest fields: index, name (aten op or module
path), kind (op|module), phase (forward|backward: backward while torch's autograd engine runs a
backward pass, whatever started it), module (innermost module path), stack (first frame in the
user's code), forward (backward operators: the forward operator whose autograd node runs them,
{index, name, node}; their module and stack are that forward operator's), file (or null with stats_only, or when nothing of the op is data), tensors: [{key,
dtype, shape, numel, max, min, mean, norm, nan, inf, crc32 (of the tensor's exact little-endian
bytes), and stride + storage_offset when the tensor is not a plain contiguous one}]; an empty
tensor has numel 0 and null max/min/mean/norm. A tensor of a dtype safetensors has no name for
(complex, fp8 "fnuz") is listed with its torch dtype and a `note`, and no data. overflow: true when
the operator *produced* a non-finite value: an output holds inf/nan while all its floating inputs
and number arguments are finite (so creating or filling with -inf, as attention masks do, and ops
that only pass on an inf they were given are not overflows), or, inside an fp16 autocast region,
an fp32 output goes beyond the fp16 range while its inputs are within it.

Uninitialised memory is never recorded as data: the outputs of the `empty*` creation operators
(`empty`, `empty_like`, `empty_strided`, `new_empty`, ...), the previous contents of `out=`
buffers, and the previous contents of such a fresh buffer when an in-place operator writes into it
(`empty_like(x).bernoulli_(p)` in dropout) are listed under `uninitialised` ([{key, dtype, shape}])
instead of `tensors`: no statistics, no data, never an overflow, never compared.

Inputs are the values an operator was given: each is described (statistics, and its bytes when
they are kept) before the call, so a kernel that changes an input in place, declared in its schema
or not (native_batch_norm's running_mean/var in training), is recorded with what it read.

View operators (outputs that alias an input: `_reshape_alias`, `as_strided`, `split`, ...) carry
`view: true`.

Options (also from a JSON file with CANN's acl.json keys dump_list, dump_path, dump_mode,
dump_op_switch): dump_mode input|output|all, dump_list (names: an op is kept when its name contains
one), check_overflow (print overflowing operators as they happen; keep tensor data only for them),
stats_only (statistics only, computed on the tensor's device: nothing is copied to the host),
checksum (crc32 of each tensor's bytes: by default only when its data is stored; True also with
stats_only, at the cost of a host copy, like msprobe's md5 mode; False never).

Replay (torch_npu's load_file_path + use_load): with use_load=True and load_file_path=REFERENCE_DUMP
(a dump holding inputs, dump_mode "all" or "input"), every recorded operator is run a second time
on this run's device and dtypes with its tensor inputs taken from the reference dump, and those
outputs are kept as `replay.output.N`. The reference operator is the one with the same name and
phase at the same occurrence (the k-th aten::addmm backward here is the k-th there), so extra casts
in one run do not shift the pairing. Each replayed input is rebuilt with the live input's strides
and storage offset (so layout-dependent kernels see what the live op saw); `out=` buffers and
uninitialised inputs are fresh buffers of the live layout. View operators are not replayed (they
compute nothing: their output is their input's memory). The random number generators (CPU, the
initialised accelerators, and any generator passed to the op) are saved before the replay and
restored after it, so the live run is bit-identical with and without replay, and a random operator
replays with the same random numbers as its live run. `portkit compare` uses the replayed outputs
to tell an operator's own (local) error from the error it inherits. When this run holds an input in
another floating type than the reference (bf16/fp16 autocast against fp32), the operator runs a
third time, with autocast off, on the same quantised inputs widened to the reference's types: its
outputs, `replay.baseline.output.N`, are what the quantisation of the inputs alone costs, and
compare blames the operator only for error beyond them. Manifest field `replay`:
{"status": "ok", "reference_index": i} or {"status": "skipped", "reason": ...}.
"""
import json
import math
import os
import sys
import threading
import weakref
import zlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import safetensors_io

_FP16_MAX = 65504.0
_SKIP = {"detach", "t", "view", "_unsafe_view", "expand", "alias"}  # no new values: not recorded
_VIEW_NAMES = {"_unsafe_view"}  # views whose schema does not say so
_FRESH_LIMIT = 4096  # uninitialised storages tracked at most
_FRAME_CACHE_LIMIT = 65536  # code objects whose "is it the user's code" answer is kept
# Opaque workspaces: byte buffers a kernel hands to its backward (intermediate state with padding
# nobody initialises), not values. Outputs by position (the schemas leave returns unnamed); inputs
# by argument name.
_WORKSPACE_OUTPUTS = {"mkldnn_rnn_layer": (3,), "_cudnn_rnn": (3,), "cudnn_batch_norm": (3,)}
_WORKSPACE_ARGS = ("workspace", "reserve", "reserveSpace", "reserve_space")
# Arguments kernels update in place although their schemas do not mark them written (`Tensor?`,
# not `Tensor(a!)?`): batch norm's running statistics. Every input is described before the call
# anyway; this list says which ones need a copy when their bytes are wanted only afterwards.
_RUNNING_STATS = ("running_mean", "running_var")
_UNDECLARED_WRITES = {"native_batch_norm": _RUNNING_STATS, "cudnn_batch_norm": _RUNNING_STATS,
                      "miopen_batch_norm": _RUNNING_STATS, "batch_norm_update_stats": _RUNNING_STATS,
                      "batch_norm_gather_stats": _RUNNING_STATS,
                      "batch_norm_gather_stats_with_counts": _RUNNING_STATS}


def _num(value):
    """A statistic for the manifest: a float, or "nan" / "inf" / "-inf" (JSON has no such numbers)."""
    v = float(value)
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v


_AUTOCAST_DEVICES = None  # device types whose autocast state this torch can be asked about


def _autocast_devices():
    """Device types torch >= 2.4 answers `is_autocast_enabled(device)` for (the accelerator of a
    plug-in such as torch_npu only once it is imported)."""
    global _AUTOCAST_DEVICES
    if _AUTOCAST_DEVICES is None:
        found = []
        for dev in ("cpu", "cuda", "npu", "xpu", "hpu", "mps"):
            try:
                torch.is_autocast_enabled(dev)
                torch.get_autocast_dtype(dev)
                found.append(dev)
            except Exception:  # noqa: BLE001  (an unknown device type: not asked again)
                pass
        _AUTOCAST_DEVICES = found
    return _AUTOCAST_DEVICES


def _computing_in_fp16():
    """True inside an autocast region that computes in fp16 (CPU or accelerator).

    torch >= 2.4 asks per device type (`torch.get_autocast_dtype`; the older per-device queries
    warn there); torch 1.13 to 2.3 have only the CPU and the CUDA ("gpu") queries."""
    try:
        if hasattr(torch, "get_autocast_dtype"):
            return any(torch.is_autocast_enabled(dev) and torch.get_autocast_dtype(dev) == torch.float16
                       for dev in _autocast_devices())
        if torch.is_autocast_enabled() and torch.get_autocast_gpu_dtype() == torch.float16:
            return True
        return torch.is_autocast_cpu_enabled() and torch.get_autocast_cpu_dtype() == torch.float16
    except AttributeError:  # an older torch without these queries
        return False


# -- phase ----------------------------------------------------------------------------------------

def _no_op():
    pass


def _in_backward():
    """True while torch's autograd engine runs a backward pass on this thread.

    Asked of the engine itself, so every way into it counts (`Tensor.backward`,
    `torch.autograd.backward`, `torch.autograd.grad` however it was imported, hooks of other
    libraries): torch >= 2.0 reports the graph task it runs (`_current_graph_task_id`, -1 outside);
    torch 1.13 has no such query, but its engine accepts a final callback only inside a backward
    pass, so a no-op callback is offered (it runs once, when the pass ends)."""
    if _GRAPH_TASK_ID is not None:
        return _GRAPH_TASK_ID() != -1
    # torch 1.13: the engine's probe below costs milliseconds when it fails (a C++ exception with
    # its backtrace), so the Python stack answers first where it can. Below the dispatch machinery
    # is the code that called the operator: torch.autograd's backward/grad (Tensor.backward,
    # torch.autograd.backward and .grad all run the engine from there, however they were imported),
    # or nothing at all on an autograd worker thread (accelerator backward passes): backward. With
    # grad mode on, any other caller is a forward pass (the engine turns grad mode off for a pass
    # unless create_graph, and such passes start in torch.autograd too). Only what is left (grad
    # mode off: no_grad regions, custom Function.backward) asks the engine.
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.endswith(_DISPATCH_FILES):
        f = f.f_back
    if f is None:
        return True
    if f.f_code.co_name in ("backward", "grad") and f.f_code.co_filename.endswith(_AUTOGRAD_INIT):
        return True
    if torch.is_grad_enabled():
        return False
    from torch.autograd.variable import Variable
    try:
        Variable._execution_engine.queue_callback(_no_op)
    except RuntimeError:
        return False
    return True


_GRAPH_TASK_ID = getattr(torch._C, "_current_graph_task_id", None)
_DISPATCH_FILES = (os.path.join("portkit", "torch", "dumper.py"), os.path.join("torch", "utils", "_python_dispatch.py"),
                   os.path.join("torch", "_ops.py"))
_AUTOGRAD_INIT = os.path.join("torch", "autograd", "__init__.py")


def _phase():
    return "backward" if _in_backward() else "forward"


# -- backward operators: the forward operator they derive from ------------------------------------
#
# An operator dispatched during backward runs inside an autograd node, made in the forward pass as
# the grad_fn of a recorded operator's output. The outputs are seen below autograd, before their
# grad_fn is set, so they are looked at again when the next operator is dispatched: their grad_fn
# then gets the forward operator in its `metadata` dict (which torch keeps on the node itself).
# During backward, torch >= 2.0 names the node being run (`_current_autograd_node`); torch 1.13 has
# no such query, so a pre-hook on each such node marks it current when it starts and a hook clears
# it when it ends (the engine runs a graph's nodes one at a time on the thread of the pass).

_CURRENT_NODE = getattr(torch._C, "_current_autograd_node", None)
_FORWARD_KEY = "portkit_forward"


class _BackwardOrigins:
    """Forward operator of the autograd node running now: {index, name, node, module, stack}."""

    def __init__(self):
        self.pending = []  # (forward info, weak references to its outputs) not yet looked at
        self.running = threading.local()  # torch 1.13: the node started last on this thread

    def forward_outputs(self, info, outputs):
        refs = []
        for t in outputs:
            if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()):
                try:
                    refs.append(weakref.ref(t))
                except TypeError:
                    pass
        if refs:
            self.pending.append((info, refs))

    def resolve(self):
        """Gives the grad_fn of the outputs recorded since the last call their forward operator."""
        pending, self.pending = self.pending, []
        for info, refs in pending:
            for ref in refs:
                t = ref()
                node = getattr(t, "grad_fn", None) if t is not None else None
                if node is None:
                    continue
                try:
                    meta = node.metadata
                    if _FORWARD_KEY in meta:  # an earlier operator made it (an in-place chain)
                        continue
                    entry = dict(info, node=node.name())
                    meta[_FORWARD_KEY] = entry
                    if _CURRENT_NODE is None:
                        node.register_prehook(self._starter(entry))
                        node.register_hook(self._stopper())
                except (AttributeError, RuntimeError):  # a node without metadata or hooks
                    continue

    def _starter(self, entry):
        running = self.running

        def start(grad_outputs):
            running.entry = entry
        return start

    def _stopper(self):
        running = self.running

        def stop(grad_inputs, grad_outputs):
            running.entry = None
        return stop

    def current(self):
        """The forward info of the node running on this thread, or None."""
        if _CURRENT_NODE is None:
            return getattr(self.running, "entry", None)
        node = _CURRENT_NODE()
        if node is None:
            return None
        try:
            return node.metadata.get(_FORWARD_KEY)
        except (AttributeError, RuntimeError):
            return None


# -- operators ------------------------------------------------------------------------------------

class _OpInfo:
    """What an operator's schema says about its arguments and results (cached per overload)."""

    def __init__(self, func, name):
        schema = func._schema
        base = name.split("::")[-1]
        self.write_args = []  # (position in the schema, name) of arguments it writes to
        self.out_args = set()  # names of its out= arguments
        self.arg_names = []
        for i, arg in enumerate(schema.arguments):
            self.arg_names.append((i, arg.name, arg.kwarg_only))
            info = arg.alias_info
            if info is not None and getattr(info, "is_write", False):
                self.write_args.append((i, arg.name, arg.kwarg_only))
                if getattr(arg, "is_out", False) or arg.kwarg_only:
                    self.out_args.add(arg.name)
        self.mutates = bool(self.write_args)
        # Arguments the kernel changes although the schema does not mark them written.
        changed = _UNDECLARED_WRITES.get(base, ())
        self.changed_args = [(i, n, k) for i, n, k in self.arg_names if n in changed]
        self.workspace_args = [(i, n, k) for i, n, k in self.arg_names if n in _WORKSPACE_ARGS]
        self.workspace_outputs = _WORKSPACE_OUTPUTS.get(base, ())
        returns_alias = any(r.alias_info is not None and not getattr(r.alias_info, "is_write", False)
                            for r in schema.returns)
        self.view = (returns_alias and not self.mutates) or base in _VIEW_NAMES
        # Creation of uninitialised memory: empty, empty_like, empty_strided, new_empty, empty_permuted, ...
        self.uninitialised = base.startswith(("empty", "new_empty", "_empty"))

    def arguments(self, args, kwargs, which):
        """The tensors passed to the arguments `which` [(position, name, kwarg_only)]."""
        found = []
        for i, arg_name, kwarg_only in which:
            value = args[i] if i < len(args) and not kwarg_only else kwargs.get(arg_name)
            _flatten(value, found)
        return found


def _flatten(value, out):
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _flatten(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _flatten(v, out)
    return out


def _replace(value, tensors):
    """`value` with its tensors (in _flatten's order) taken from the iterator `tensors`."""
    if isinstance(value, torch.Tensor):
        return next(tensors)
    if isinstance(value, (list, tuple)):
        items = [_replace(v, tensors) for v in value]
        return type(value)(items) if isinstance(value, list) or type(value) is tuple else type(value)(*items)
    if isinstance(value, dict):
        return {k: _replace(v, tensors) for k, v in value.items()}
    return value


def _nonfinite_number(value):
    """True when a number argument (a fill value, a scalar operand) is inf or nan."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (float, complex)):
        return not (math.isfinite(value.real) and math.isfinite(value.imag))
    if isinstance(value, (list, tuple)):
        return any(_nonfinite_number(v) for v in value)
    if isinstance(value, dict):
        return any(_nonfinite_number(v) for v in value.values())
    return False


def _peak(t):
    """The largest magnitude of a floating (or complex) tensor as a float (nan when it holds a nan),
    or None for other dtypes and empty tensors."""
    if not (t.is_floating_point() or t.is_complex()) or t.numel() == 0:
        return None
    x = t.detach()
    if x.element_size() == 1:  # fp8: no abs/max kernels; its values fit float32
        x = x.float()
    return float(x.abs().max())  # one reduction: nan and inf propagate into it


def _input_peak(t, captured):
    """_peak(t), from the statistics capture_inputs took when there are some."""
    if captured is not None and t.is_floating_point() and "max" in captured[0]:
        return _Stats.peak(captured[0])
    return _peak(t)


def _finite(peak):
    return peak is None or math.isfinite(peak)


def _storage(t):
    """(data pointer, bytes) of a tensor's storage, or None (no storage: sparse, meta, ...)."""
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        ptr = s.data_ptr()
        return (ptr, s.nbytes()) if ptr else None
    except Exception:  # noqa: BLE001
        return None


def _plain_layout(t):
    return t.layout != torch.strided or (t.is_contiguous() and t.storage_offset() == 0)


def _rebuild(ref, like):
    """The reference values `ref` in a new tensor with the device, dtype, shape, strides and storage
    offset of the live tensor `like` (positions of the storage outside the view are zero)."""
    ref = ref.to(device=like.device, dtype=like.dtype)
    if _plain_layout(like):
        return ref.contiguous()
    size, stride, offset = tuple(like.shape), like.stride(), like.storage_offset()
    extent = offset + (sum((n - 1) * s for n, s in zip(size, stride)) + 1 if like.numel() else 0)
    try:
        base = torch.zeros(extent, dtype=like.dtype, device=like.device)
        view = base.as_strided(size, stride, offset)
        try:
            view.copy_(ref)
        except RuntimeError:  # overlapping layout (expanded, stride 0): one value per storage element
            where = torch.arange(extent, device=like.device).as_strided(size, stride, offset)
            base[where.reshape(-1)] = ref.reshape(-1)
        return view
    except Exception:  # noqa: BLE001  (a dtype without these kernels: the values, contiguous)
        return ref.contiguous()


def _baseline(func, args, kwargs, inputs):
    """The outputs of `func` on `inputs` (replacing the tensors of args and kwargs, in order), with
    autocast off: the reference precision's result on the live run's quantised inputs (replay's
    baseline). None when the op cannot run so."""
    try:
        device = next((t.device.type for t in inputs if isinstance(t, torch.Tensor)), "cpu")
        with _RngGuard(args, kwargs), torch.autocast(device, enabled=False):
            it = iter(inputs)
            out = func(*_replace(args, it), **_replace(kwargs, it))
        return _flatten(out, [])
    except Exception:  # noqa: BLE001  (no baseline for this op: compare judges it without one)
        return None


class _RngGuard:
    """Saves the random number generators an operator may draw from and restores them on exit: the
    CPU generator, those of the initialised accelerators, and torch.Generator arguments."""

    _DEVICE_MODULES = ("cuda", "npu", "xpu", "mps")

    def __init__(self, args, kwargs):
        self.args, self.kwargs = args, kwargs

    def _generators(self, value, out):
        if isinstance(value, torch.Generator):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                self._generators(v, out)
        elif isinstance(value, dict):
            for v in value.values():
                self._generators(v, out)
        return out

    def __enter__(self):
        self.cpu = torch.get_rng_state()
        self.devices = []
        for name in self._DEVICE_MODULES:
            mod = getattr(torch, name, None)
            try:
                if mod is not None and hasattr(mod, "get_rng_state_all") and mod.is_initialized():
                    self.devices.append((mod, mod.get_rng_state_all()))
            except Exception:  # noqa: BLE001  (a module without these queries)
                pass
        self.generators = [(g, g.get_state()) for g in self._generators((self.args, self.kwargs), [])]
        return self

    def __exit__(self, *exc):
        torch.set_rng_state(self.cpu)
        for mod, states in self.devices:
            mod.set_rng_state_all(states)
        for g, state in self.generators:
            g.set_state(state)
        return False


def _min_max(x, no_aminmax):
    """(min, max) of a floating tensor: one aminmax pass where the device has the kernel for the
    dtype (torch 1.13's CPU has none for fp16), two reductions otherwise. Both are exact."""
    where = (x.device.type, x.dtype)
    if x.dtype != torch.float16 and hasattr(torch, "aminmax") and (no_aminmax is None or where not in no_aminmax):
        try:
            return torch.aminmax(x)
        except (RuntimeError, NotImplementedError):
            if no_aminmax is not None:
                no_aminmax.add(where)
    return x.min(), x.max()


class _Stats:
    @staticmethod
    def of(t, no_aminmax=None):
        """numel, nan and inf counts, max/min/mean/norm (null for an empty tensor).

        Computed where the tensor lives (no host copy: only the four numbers travel, as one
        transfer), in its own dtype where that is exact enough: max and min are exact in any dtype
        (one aminmax pass where the device has that kernel for the dtype); sum and norm of
        fp32/fp64 tensors use torch's own reductions in that dtype (cascade / tree summation,
        relative error around 1e-6 for fp32 even for 1e8 elements); 16- and 8-bit floats
        accumulate in float32 (their own 8- or 11-bit mantissas would not do); integers sum in
        int64 and take their norm in float64. The nan/inf counts cost nothing when the sum is finite
        (a nan or inf anywhere makes it non-finite); otherwise they are counted. `no_aminmax`: a
        set of (device type, dtype) found without an aminmax kernel, kept by the caller so that
        each is tried once."""
        x = t.detach()
        n = x.numel()
        if n == 0:
            return {"numel": 0, "nan": 0, "inf": 0, "max": None, "min": None, "mean": None, "norm": None}
        if x.dtype == torch.bool:
            x = x.to(torch.uint8)
        try:
            if x.is_floating_point():
                if x.element_size() == 1:  # fp8: few kernels; its values are exact in float32
                    x = x.float()
                acc = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
                total = x.sum(dtype=acc)
                norm = torch.linalg.vector_norm(x, dtype=acc) if hasattr(torch, "linalg") else x.to(acc).norm()
                mn, mx = _min_max(x, no_aminmax)
                if x.device.type == "cpu":  # nothing to transfer: four reads cost less than a stack
                    vals = [mx.item(), mn.item(), total.item(), norm.item()]
                else:  # one transfer; max/min widened to the accumulation type exactly
                    vals = torch.stack([mx.to(acc), mn.to(acc), total, norm]).tolist()
            else:
                total = x.sum(dtype=torch.int64)
                norm = x.double().norm()
                mx, mn = x.max(), x.min()
                vals = torch.stack([mx.double(), mn.double(), total.double(), norm]).tolist()
        except (RuntimeError, NotImplementedError):  # a dtype without these kernels (uint16/32/64 on CPU)
            x = x.double()  # exact up to 2^53
            vals = torch.stack([x.max(), x.min(), x.sum(), x.norm()]).tolist()
        big_sum = vals[2]
        out = {"numel": n, "nan": 0, "inf": 0}
        if x.is_floating_point() and not (math.isfinite(big_sum) and math.isfinite(vals[3])):
            out["nan"] = int(torch.isnan(x).sum())
            out["inf"] = int(torch.isinf(x).sum())
            if not (out["nan"] or out["inf"]):  # finite values whose sum or squares overflow the dtype
                wide = x.double()
                big_sum, vals[3] = float(wide.sum()), float(wide.norm())
        out.update(max=_num(vals[0]), min=_num(vals[1]), mean=_num(big_sum / n), norm=_num(vals[3]))
        return out

    @staticmethod
    def peak(stats):
        """The largest magnitude from `of`'s statistics, as _peak gives it (nan when a nan is in)."""
        if stats.get("max") is None:
            return None
        if stats["nan"]:
            return float("nan")
        return max(abs(float(stats["max"])), abs(float(stats["min"])))


class _Reference:
    """The reference dump for replay: its operators by (name, phase) in execution order."""

    def __init__(self, path):
        self.path = path
        manifest = os.path.join(path, "manifest.jsonl")
        if not os.path.isfile(manifest):
            raise FileNotFoundError("load_file_path %s: no manifest.jsonl (not a portkit dump)" % path)
        self.ops = {}
        with open(manifest, encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    break  # a crash mid-write: the valid part is used
                self.ops.setdefault((entry["name"], entry["phase"]), []).append(entry)
        self.seen = {}

    def next(self, name, phase):
        k = self.seen.get((name, phase), 0)
        self.seen[(name, phase)] = k + 1
        ops = self.ops.get((name, phase), [])
        return ops[k] if k < len(ops) else None

    def inputs(self, entry):
        """{position: tensor} of the inputs the reference recorded as data, or None when it recorded
        inputs without data (stats_only)."""
        keys = {t["key"] for t in entry.get("tensors", []) if t["key"].startswith("input.")}
        if not keys:
            return {}
        if not entry.get("file"):
            return None
        data = safetensors_io.read_torch(os.path.join(self.path, entry["file"]), keys)
        return {int(k.split(".")[1]): v for k, v in data.items()}


def _skipped(reason, entry=None):
    note = {"status": "skipped", "reason": reason}
    if entry is not None:
        note["reference_index"] = entry["index"]
    return [], note


class _Dumper(TorchDispatchMode):
    def __init__(self, dump_path, dump_mode, check_overflow, dump_list, level, stats_only, reference=None,
                 checksum=None, phases=None, scope=None):
        super().__init__()
        self.path = dump_path
        self.mode = dump_mode
        self.check_overflow = check_overflow
        self.names = list(dump_list or [])
        self.level = level
        self.stats_only = stats_only
        self.index = 0
        self.modules = []
        self.module_inputs_finite = []
        self.module_before = []  # capture_inputs of the modules running, innermost last
        self.busy = threading.local()
        os.makedirs(self.path, exist_ok=True)
        manifest = os.path.join(self.path, "manifest.jsonl")
        if os.path.exists(manifest):
            raise FileExistsError("dump_path %s already holds a dump (manifest.jsonl): give a new or empty folder, "
                                  "its operator indices and files would collide" % self.path)
        self.manifest = open(manifest, "x", encoding="utf-8")
        self.hooks = []
        self.overflows = 0
        self.reference = reference
        self.infos = {}  # op overload -> _OpInfo
        self.module_objs = []
        # Storages created by the empty* operators and not yet written as a whole: their contents
        # are garbage. {data pointer: bytes}. An entry goes when the storage is written as a whole,
        # or when another operator's new output turns up at that address (the memory was freed and
        # reused).
        self.fresh = {}
        self.checksum = checksum  # None: a crc32 when the data is stored; True: always; False: never
        self.phases = set(phases or ())  # msprobe data_mode forward/backward: only those phases
        self.scope = list(scope or [])
        self.scope_state = 0  # 0 before scope[0], 1 inside, 2 after scope[-1]
        self._stat_cache = {}  # id -> (tensor, statistics) of the operator being recorded
        self.origins = _BackwardOrigins()
        self._no_aminmax = set()  # (device type, dtype) without an aminmax kernel
        self._frame_skip = {}  # code object -> True when its frames are not the user's (_stack)

    # -- uninitialised memory --------------------------------------------------------------------
    def _is_fresh(self, t):
        st = _storage(t)
        return st is not None and self.fresh.get(st[0]) == st[1]

    def _track_fresh(self, outputs):
        for t in outputs:
            st = _storage(t)
            if st is not None:
                if len(self.fresh) >= _FRESH_LIMIT:  # never written, never reused: forget the oldest
                    try:
                        del self.fresh[next(iter(self.fresh))]
                    except (RuntimeError, KeyError, StopIteration):  # another thread changed it
                        pass
                self.fresh[st[0]] = st[1]

    def _untrack(self, written, outputs, op):
        """After an operator ran: storages it wrote as a whole, and addresses that its new (not
        aliasing) outputs reuse, hold no garbage any more."""
        for t in written:
            st = _storage(t)
            if st is not None and st[0] in self.fresh and t.numel() * t.element_size() >= st[1]:
                del self.fresh[st[0]]
        if not op.view and not op.mutates:
            for t in outputs:
                st = _storage(t)
                if st is not None:
                    self.fresh.pop(st[0], None)

    # -- statistics ------------------------------------------------------------------------------
    def _stats(self, t):
        """_Stats.of(t), computed once per operator (the overflow check and the record share it)."""
        key = id(t)
        hit = self._stat_cache.get(key)
        if hit is not None and hit[0] is t:
            return hit[1]
        st = _Stats.of(t, self._no_aminmax)
        self._stat_cache[key] = (t, st)
        return st

    def _peak(self, t):
        """_peak(t), from the cached statistics when the dtype is one the dump stores."""
        if (t.is_floating_point() and t.layout == torch.strided and t.numel()
                and safetensors_io.st_dtype(t.dtype) is not None):
            return _Stats.peak(self._stats(t))
        return _peak(t)

    # -- recording -------------------------------------------------------------------------------
    def _wanted(self, name, phase=None):
        if self.phases and phase is not None and phase not in self.phases:
            return False
        if self.scope:  # msprobe's scope: from the first call naming scope[0] to the first naming scope[1]
            here = name + " " + (self.modules[-1] if self.modules else "")
            if self.scope_state == 0:
                if self.scope[0] not in here:
                    return False
                self.scope_state = 1
            elif self.scope_state == 2:
                return False
            if len(self.scope) > 1 and self.scope[-1] in here:
                self.scope_state = 2
        return not self.names or any(n in name for n in self.names)

    def _stack(self):
        """"file:line" of the innermost frame in the user's code (not torch's, not the dumper's, not
        runpy's): the frames are walked from here outwards, and whether a code object is the
        user's is decided once per code object."""
        f = sys._getframe(1)
        skip = self._frame_skip
        while f is not None:
            code = f.f_code
            skipped = skip.get(code)
            if skipped is None:
                name = code.co_filename
                skipped = "/torch/" in name or "portkit/torch" in name or "/runpy" in name
                if len(skip) < _FRAME_CACHE_LIMIT:
                    skip[code] = skipped
            if not skipped:
                return "%s:%d" % (code.co_filename, f.f_lineno)
            f = f.f_back
        return ""

    def replay(self, func, op, args, kwargs, name, phase, inputs, unread, opaque=()):
        """(replayed outputs, manifest note) for one operator, with inputs from the reference."""
        entry = self.reference.next(name, phase)
        if entry is None:
            return _skipped("no such operator in the reference dump")
        if op.view:
            return _skipped("view operator: its output is its input's memory, nothing is computed", entry)
        if op.uninitialised:
            return _skipped("creates uninitialised memory, nothing is computed", entry)
        ref = self.reference.inputs(entry)
        if ref is None:
            return _skipped("the reference dump has no tensor data for it", entry)
        if any(p >= len(inputs) for p in ref):
            return _skipped("the reference operator has other inputs", entry)
        rebuilt = []
        for p, mine in enumerate(inputs):
            if p in opaque:  # implementation state of the live run: passed as it is
                rebuilt.append(mine)
                continue
            if p in unread:  # its previous contents are not an input: a fresh buffer of the live layout
                rebuilt.append(torch.empty_strided(tuple(mine.shape), mine.stride(), dtype=mine.dtype,
                                                   device=mine.device) if mine.layout == torch.strided
                               else torch.empty_like(mine))
                continue
            r = ref.get(p)
            if r is None:
                return _skipped("the reference dump holds no data for input.%d" % p, entry)
            if tuple(mine.shape) != tuple(r.shape):
                return _skipped("input shapes differ from the reference", entry)
            rebuilt.append(_rebuild(r, mine))
        try:
            with _RngGuard(args, kwargs):  # the live op then draws the same random numbers
                it = iter(rebuilt)  # one iterator: args first, then kwargs, as _flatten((args, kwargs)) orders them
                replay_args = _replace(args, it)
                out = func(*replay_args, **_replace(kwargs, it))
        except Exception as e:  # noqa: BLE001  (an op that cannot run on these inputs is reported, not fatal)
            return _skipped("replay failed: %s" % e, entry)
        outs = _flatten(out, [])
        # Inputs held in another precision than the reference's (bf16/fp16 autocast): the op once
        # more on the same quantised inputs, widened to the reference's types, so that compare can
        # tell the quantisation's own effect from the kernel's.
        widened = [t.to(ref[p].dtype) if (p in ref and isinstance(t, torch.Tensor) and t.is_floating_point()
                                          and ref[p].is_floating_point() and ref[p].dtype != t.dtype) else None
                   for p, t in enumerate(rebuilt)]
        if any(w is not None for w in widened):
            base = _baseline(func, args, kwargs, [w if w is not None else t for w, t in zip(widened, rebuilt)])
            if base is not None and len(base) == len(outs):
                outs += [("baseline", t) for t in base]
        return outs, {"status": "ok", "reference_index": entry["index"]}

    def _overflow(self, outputs, input_peaks, numbers_nonfinite):
        """An operator's outputs overflow when they hold inf/nan while its floating inputs and number
        arguments are finite, or (fp16 autocast) when an fp32 output exceeds fp16's range while its
        inputs do not. `input_peaks` is a list or a function computing it (only asked when needed)."""
        peaks = [(t.dtype, self._peak(t)) for t in outputs]
        nonfinite = any(not _finite(p) for _, p in peaks)
        beyond_fp16 = not nonfinite and any(dtype == torch.float32 and p is not None and p > _FP16_MAX
                                            for dtype, p in peaks) and _computing_in_fp16()
        if not (nonfinite or beyond_fp16) or numbers_nonfinite:
            return False
        ins = input_peaks() if callable(input_peaks) else input_peaks
        if not all(_finite(p) for p in ins):
            return False  # the inf/nan came in: not where it started
        return nonfinite or all(p is None or p <= _FP16_MAX for p in ins)

    def _describe(self, key, t, keep_data, snapshot=True):
        """(manifest entry, raw bytes or None) of a tensor of a dtype safetensors stores: layout,
        statistics, and the bytes (and their crc32) when the data is kept or a checksum asked for.
        snapshot=False: the bytes are used before the tensor can change (an output, written out in
        the same record), so a host tensor's own memory is read instead of a copy of it."""
        info = {"key": key, "dtype": safetensors_io.st_dtype(t.dtype), "shape": list(t.shape)}
        if not _plain_layout(t):
            info.update(stride=list(t.stride()), storage_offset=t.storage_offset())
        info.update(self._stats(t))
        raw = None
        want_crc = self.checksum is True or (self.checksum is None and keep_data)
        if keep_data or want_crc:  # the bytes on the host: only when stored or asked for
            raw = safetensors_io.tensor_bytes(t, copy=snapshot)
            if want_crc:
                info["crc32"] = zlib.crc32(raw)  # checksum of the exact bytes
        return info, (raw if keep_data else None)

    def capture_inputs(self, inputs, unread, clone=()):
        """The recorded inputs, described before the operator (or module) runs: {key: (entry, bytes
        or None, tensor to take the bytes from later)}.

        A kernel may change an input whatever its schema says (native_batch_norm updates
        running_mean/var in place, and its schema marks neither as written), so every input is
        described before the call. This costs what describing it afterwards would: its statistics
        (and, when the data is kept, its bytes) are taken once either way, only earlier. When
        whether the data is kept is known only afterwards (check_overflow keeps it for overflowing
        operators only), the bytes are taken later, from a copy for the inputs in `clone`
        (positions of the inputs the operator is known to change) and from the input itself for the
        rest."""
        if self.mode not in ("input", "all"):
            return {}
        keep_now = not self.stats_only and not self.check_overflow
        captured = {}
        for i, t in enumerate(inputs):
            if i in unread or safetensors_io.st_dtype(t.dtype) is None:
                continue
            key = "input.%d" % i
            info, raw = self._describe(key, t, keep_now)
            late = t.detach().clone() if (i in clone and not keep_now and not self.stats_only) else t
            captured[key] = (info, raw, late)
        self._stat_cache.clear()  # the operator may change these tensors: its outputs are measured anew
        return captured

    def record(self, name, kind, phase, inputs, outputs, replayed=None, replay_note=None, unread=(),
               uninitialised_outputs=False, overflow=False, view=False, opaque_outputs=(), before=None):
        """Writes one manifest entry (and its tensor file). `before`: capture_inputs's descriptions
        of the inputs, taken before the call."""
        before = before or {}
        if kind == "module" and not self._wanted(name, phase):  # operators were checked before they ran
            return
        tensors, uninitialised = [], []
        if self.mode in ("input", "all") and not uninitialised_outputs:  # empty* reads no values of its inputs
            for i, t in enumerate(inputs):
                (uninitialised if i in unread else tensors).append(("input.%d" % i, t))
        if self.mode in ("output", "all"):
            for i, t in enumerate(outputs):
                (uninitialised if uninitialised_outputs or i in opaque_outputs else tensors).append(("output.%d" % i, t))
        replayed = list(replayed or [])
        baseline = [t[1] for t in replayed if isinstance(t, tuple)]
        replayed = [t for t in replayed if not isinstance(t, tuple)]
        tensors += [("replay.output.%d" % i, t) for i, t in enumerate(replayed) if i not in opaque_outputs]
        tensors += [("replay.baseline.output.%d" % i, t) for i, t in enumerate(baseline)
                    if i not in opaque_outputs and isinstance(t, torch.Tensor)]
        if overflow:
            self.overflows += 1
            if self.check_overflow:
                sys.stderr.write("portkit dumper: overflow in %s #%d (%s)\n" % (name, self.index, phase))
        origin = self.origins.current() if phase == "backward" and kind == "op" else None
        entry = {"index": self.index, "name": name, "kind": kind, "phase": phase, "module": "", "stack": "",
                 "overflow": overflow, "file": None, "tensors": []}
        if origin is not None:  # where the backward operator comes from
            entry["forward"] = {"index": origin["index"], "name": origin["name"], "node": origin["node"]}
            entry["module"], entry["stack"] = origin["module"], origin["stack"]
        else:
            entry["module"], entry["stack"] = self.modules[-1] if self.modules else "", self._stack()
            if kind == "op" and phase == "forward" and torch.is_grad_enabled():
                self.origins.forward_outputs({"index": self.index, "name": name, "module": entry["module"],
                                              "stack": entry["stack"]}, outputs)
        if view:
            entry["view"] = True
        if uninitialised:
            entry["uninitialised"] = [{"key": key, "dtype": safetensors_io.st_dtype(t.dtype)
                                       or str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}
                                      for key, t in uninitialised]
        if replay_note is not None:
            entry["replay"] = replay_note
        records = []
        keep_data = not self.stats_only and (not self.check_overflow or overflow)
        for key, t in tensors:
            dtype = safetensors_io.st_dtype(t.dtype)
            if dtype is None:  # listed, so compare reports it, but without data (safetensors has no name for it)
                entry["tensors"].append({"key": key, "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                                         "note": "not saved: safetensors has no element type for %s" % t.dtype})
                continue
            captured = before.get(key)
            if captured is not None:  # described before the operator ran (it may have changed since)
                info, raw, late = captured
                if keep_data and raw is None:
                    raw = safetensors_io.tensor_bytes(late, copy=False)
                    if "crc32" not in info and self.checksum is not False:
                        info["crc32"] = zlib.crc32(raw)
            else:
                info, raw = self._describe(key, t, keep_data, snapshot=False)
            if keep_data:
                records.append((key, dtype, tuple(t.shape), raw))
            entry["tensors"].append(info)
        self._stat_cache.clear()
        if keep_data and records:
            name_file = "op_%06d.safetensors" % self.index
            tmp = os.path.join(self.path, name_file + ".tmp")
            safetensors_io.write(tmp, records, {"name": name, "phase": phase})
            os.replace(tmp, os.path.join(self.path, name_file))
            entry["file"] = name_file
        self.manifest.write(json.dumps(entry) + "\n")
        self.manifest.flush()
        self.index += 1

    def _untracked(self, func, name, args, kwargs):
        """An operator that is not recorded (dump_list): only the bookkeeping of uninitialised memory."""
        if not self.fresh and not name.split("::")[-1].startswith(("empty", "new_empty", "_empty")):
            return func(*args, **kwargs)
        self.busy.on = True
        try:
            op = self._info(func, name)
            written = op.arguments(args, kwargs, op.write_args) if op.mutates else []
            out = func(*args, **kwargs)
            outputs = _flatten(out, [])
            self._untrack(written, outputs, op)
            if op.uninitialised:
                self._track_fresh(outputs)
        finally:
            self.busy.on = False
        return out

    def _info(self, func, name):
        op = self.infos.get(func)
        if op is None:
            op = self.infos[func] = _OpInfo(func, name)
        return op

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.level == "module" or getattr(self.busy, "on", False):
            return func(*args, **kwargs)
        if self.origins.pending:
            self.origins.resolve()
        name = str(func.overloadpacket).replace("aten.", "aten::")
        if name.split("::")[-1] in _SKIP:
            return func(*args, **kwargs)
        phase = _phase() if self.phases else None
        if not self._wanted(name, phase):
            return self._untracked(func, name, args, kwargs)
        self.busy.on = True
        self._stat_cache.clear()
        try:
            op = self._info(func, name)
            phase = phase or _phase()
            inputs = _flatten((args, kwargs), [])
            # Inputs whose previous contents the op does not read or that are garbage: out= buffers,
            # and buffers fresh from an empty* operator that it writes into.
            unread = set()
            written = []
            if op.mutates:
                outs = {id(t) for t in op.arguments(args, kwargs, [w for w in op.write_args if w[1] in op.out_args])}
                written = op.arguments(args, kwargs, op.write_args)
                fresh = {id(t) for t in written if self._is_fresh(t)} if self.fresh else set()
                unread = {i for i, t in enumerate(inputs) if id(t) in outs or id(t) in fresh}
            opaque = set()
            if op.workspace_args:  # listed as uninitialised: no values to compare
                ws = {id(t) for t in op.arguments(args, kwargs, op.workspace_args)}
                opaque = {i for i, t in enumerate(inputs) if id(t) in ws}
                unread |= opaque
            replayed, note = None, None
            if self.reference is not None:  # before the op runs: an in-place op changes its inputs
                replayed, note = self.replay(func, op, args, kwargs, name, phase, inputs, unread, opaque)
            numbers_nonfinite = _nonfinite_number((args, kwargs))
            before = {}
            changes = op.mutates or op.changed_args
            if not op.uninitialised:
                changed = set()
                if changes:
                    ids = {id(t) for t in op.arguments(args, kwargs, op.write_args + op.changed_args)}
                    changed = {i for i, t in enumerate(inputs) if id(t) in ids}
                before = self.capture_inputs(inputs, unread, changed)
            read = [(i, t) for i, t in enumerate(inputs) if i not in unread]
            if changes:  # the values the op was given, taken before it changes them
                input_peaks = [_input_peak(t, before.get("input.%d" % i)) for i, t in read]
            else:
                def input_peaks():
                    return [_input_peak(t, before.get("input.%d" % i)) for i, t in read]
            out = func(*args, **kwargs)
            outputs = _flatten(out, [])
            if self.fresh:
                self._untrack(written, outputs, op)
            if op.uninitialised:
                self._track_fresh(outputs)
                overflow = False
            else:
                overflow = self._overflow(outputs, input_peaks, numbers_nonfinite)
            self.record(name, "op", phase, inputs, outputs, replayed, note, unread=unread,
                        uninitialised_outputs=op.uninitialised, overflow=overflow, view=op.view,
                        opaque_outputs=op.workspace_outputs, before=before)
        finally:
            self.busy.on = False
        return out

    # -- modules ---------------------------------------------------------------------------------
    def attach_modules(self):
        def pre(module, inputs):
            # Module path: the root's class name, then attribute names (`Net.encoder.0.attn`).
            path = type(module).__name__
            if self.module_objs:
                parent = self.module_objs[-1]
                child = next((n for n, m in parent._modules.items() if m is module), path)
                path = self.modules[-1] + "." + child
            self.modules.append(path)
            self.module_objs.append(module)
            if self.level in ("module", "mix"):  # before the module runs: in-place modules change their inputs
                self.busy.on = True
                try:
                    flat = _flatten(inputs, [])
                    before = {}
                    if not self.names or any(n in path for n in self.names):
                        before = self.capture_inputs(flat, ())
                    self.module_before.append(before)
                    self.module_inputs_finite.append(all(_finite(_input_peak(t, before.get("input.%d" % i)))
                                                         for i, t in enumerate(flat)))
                finally:
                    self.busy.on = False

        def post(module, inputs, output):
            name = self.modules.pop() if self.modules else type(module).__name__
            if self.module_objs:
                self.module_objs.pop()
            if self.level in ("module", "mix"):
                self.busy.on = True
                try:
                    finite_in = self.module_inputs_finite.pop() if self.module_inputs_finite else True
                    before = self.module_before.pop() if self.module_before else {}
                    outputs = _flatten(output, [])
                    overflow = self._overflow(outputs, [] if finite_in else [float("inf")], False)
                    self.record(name, "module", _phase(), _flatten(inputs, []), outputs, overflow=overflow,
                                before=before)
                finally:
                    self.busy.on = False

        self.hooks.append(torch.nn.modules.module.register_module_forward_pre_hook(pre))
        self.hooks.append(torch.nn.modules.module.register_module_forward_hook(post))

    def close(self):
        for h in self.hooks:
            h.remove()
        self.manifest.close()
        # The end-of-dump marker, written last (atomically): a dump without it was cut short (the
        # process was killed or crashed), and readers say so.
        end = os.path.join(self.path, "dump_complete.json")
        with open(end + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"records": self.index}, f)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(end + ".tmp", end)


def _names_of(dump_list, config):
    """acl.json's dump_list: names, or CANN's [{"model_name": ..., "layer": [names]}] (no layer: all)."""
    if dump_list is None:
        return None
    if not isinstance(dump_list, list):
        raise ValueError("%s: dump_list must be a list" % config)
    names = []
    for item in dump_list:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, dict):
            layers = item.get("layer") or []
            if not layers:
                return None  # a whole model: every operator
            names.extend(str(x) for x in layers)
        else:
            raise ValueError("%s: dump_list entries must be names or objects with a layer list" % config)
    return names


_MSPROBE_LEVELS = {"L0": "module", "L1": "op", "mix": "mix"}
_MSPROBE_TASKS = ("statistics", "tensor", "overflow_check")


def _current_rank():
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:  # noqa: BLE001
        pass
    return int(os.environ.get("RANK", "0") or 0)


def _int_list(cfg, key, config):
    value = cfg.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError("%s: %s must be a list of integers (empty: all)" % (config, key))
    return value


def _msprobe_options(cfg, config, step):
    """Dumper options from msprobe's config.json (task, dump_path, rank, step, level and the task's
    scope, list, data_mode, summary_mode). Returns (options, enabled)."""
    task = cfg.get("task", "statistics")
    if task not in _MSPROBE_TASKS:
        raise ValueError("%s: task %r is not one the dumper runs (%s)" % (config, task, ", ".join(_MSPROBE_TASKS)))
    level = cfg.get("level", "L1")
    if level not in _MSPROBE_LEVELS:
        raise ValueError("%s: level must be L0, L1 or mix, not %r" % (config, level))
    steps, ranks = _int_list(cfg, "step", config), _int_list(cfg, "rank", config)
    sub = cfg.get(task, {})
    if not isinstance(sub, dict):
        raise ValueError("%s: %s must be an object" % (config, task))
    scope, names = sub.get("scope", []), sub.get("list", [])
    for key, value in (("scope", scope), ("list", names)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError("%s: %s.%s must be a list of names" % (config, task, key))
    if len(scope) not in (0, 2):
        raise ValueError("%s: %s.scope takes two names (the first and the last call to dump), not %d" %
                         (config, task, len(scope)))
    data_mode = sub.get("data_mode", ["all"])
    if not isinstance(data_mode, list) or not set(data_mode) <= {"all", "input", "output", "forward", "backward"}:
        raise ValueError("%s: %s.data_mode takes all, input, output, forward, backward" % (config, task))
    io = {m for m in data_mode if m in ("input", "output")}
    phases = {m for m in data_mode if m in ("forward", "backward")}
    rank = _current_rank()
    options = {
        "dump_path": os.path.join(cfg.get("dump_path", "./dump_path"), "step%d" % step, "rank%d" % rank),
        "dump_mode": io.pop() if len(io) == 1 else "all",
        "level": _MSPROBE_LEVELS[level],
        "stats_only": task != "tensor",
        "check_overflow": task == "overflow_check",
        "dump_list": names or None,
        "checksum": True if sub.get("summary_mode") == "md5" else None,
        "phases": phases or None,
        "scope": scope or None,
    }
    enabled = (not steps or step in steps) and (not ranks or rank in ranks)
    return options, enabled


class dumper:  # noqa: N801  (mirrors torch.utils.dumper)
    """`config`: CANN's acl.json (dump_path, dump_mode, dump_list, dump_op_switch, at the top level or
    under "dump"), or msprobe's config.json (recognised by its "task" key: task statistics | tensor |
    overflow_check, dump_path, step, rank, level L0 | L1 | mix, and the task's scope, list, data_mode,
    summary_mode). With msprobe's, the dump goes to dump_path/step{step}/rank{rank}/ as msprobe lays
    it out, and nothing is recorded for a step or rank the config does not list (`step` is this
    block's training step, 0 by default; the rank is torch.distributed's, or $RANK)."""

    def __init__(self, dump_path="portkit_dump", dump_mode="all", check_overflow=False, dump_list=None,
                 level="op", stats_only=False, load_file_path=None, use_load=False, config=None, checksum=None,
                 step=0):
        phases = scope = None
        self.enabled = True
        if config:
            with open(config, encoding="utf-8") as f:
                acl = json.load(f)
            if not isinstance(acl, dict):
                raise ValueError("%s: expected a JSON object with the acl.json dump keys" % config)
            if "task" in acl:  # msprobe's config.json
                options, self.enabled = _msprobe_options(acl, config, step)
                acl = {}
                dump_path, dump_mode, level = options["dump_path"], options["dump_mode"], options["level"]
                stats_only, check_overflow = options["stats_only"], options["check_overflow"]
                dump_list, checksum = options["dump_list"], options["checksum"]
                phases, scope = options["phases"], options["scope"]
            if isinstance(acl.get("dump"), dict):  # CANN's acl.json nests them under "dump"
                acl = acl["dump"]
            if acl:
                dump_path = acl.get("dump_path", dump_path)
                dump_mode = acl.get("dump_mode", dump_mode)
                dump_list = _names_of(acl.get("dump_list", dump_list), config)
                self.enabled = acl.get("dump_op_switch", "on") != "off"
        else:
            self.enabled = True
        if dump_mode not in ("input", "output", "all"):
            raise ValueError("dump_mode must be input, output or all, not %r" % (dump_mode,))
        if level not in ("op", "module", "mix"):
            raise ValueError("level must be op, module or mix, not %r" % (level,))
        reference = None
        if use_load:
            if not load_file_path:
                raise ValueError("use_load=True needs load_file_path, the reference dump to take inputs from")
            reference = _Reference(load_file_path)
        self.args = (dump_path, dump_mode, check_overflow, dump_list, level, stats_only, reference, checksum,
                     phases, scope)
        self.mode = None

    def __enter__(self):
        if not self.enabled:
            return self
        self.mode = _Dumper(*self.args)
        self.mode.attach_modules()
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        if self.mode is None:
            return False
        self.mode.__exit__(*exc)
        self.mode.close()
        return False

    @property
    def overflows(self):
        return self.mode.overflows if self.mode else 0
