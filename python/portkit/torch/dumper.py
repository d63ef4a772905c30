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
path), kind (op|module), phase (forward|backward), module (innermost module path), stack (first
frame in the user's code), file (or null with stats_only), tensors: [{key, dtype, shape, max, min,
mean, norm, nan, inf, crc32 (of the tensor's exact little-endian bytes)}; a tensor of a dtype
safetensors has no name for (complex, fp8 "fnuz") is listed with its torch dtype and a `note`, and
no data], overflow (true when an output has inf/nan, or exceeds the fp16 range when
computed in fp16).

Options (also from a JSON file with CANN's acl.json keys dump_list, dump_path, dump_mode,
dump_op_switch): dump_mode input|output|all, dump_list (names: an op is kept when its name contains
one), check_overflow (print overflowing operators as they happen; keep tensor data only for them),
stats_only.

Replay (torch_npu's load_file_path + use_load): with use_load=True and load_file_path=REFERENCE_DUMP
(a dump holding inputs, dump_mode "all" or "input"), every recorded operator is run a second time
on this run's device and dtypes with its tensor inputs taken from the reference dump, and those
outputs are kept as `replay.output.N`. The reference operator is the one with the same name and
phase at the same occurrence (the k-th aten::addmm backward here is the k-th there), so extra casts
in one run do not shift the pairing. The live computation is untouched. `portkit compare` uses the
replayed outputs to tell an operator's own (local) error from the error it inherits. Manifest
field `replay`: {"status": "ok", "reference_index": i} or {"status": "skipped", "reason": ...}.
Random operators (dropout) replay with other random numbers and so always look different.
"""
import json
import os
import sys
import threading
import traceback
import zlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import safetensors_io

_FP16_MAX = 65504.0
_SKIP = {"detach", "t", "view", "_unsafe_view", "expand", "alias"}  # no new values


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


def _mutates(func):
    """True for in-place and out= operators (they write to one of their arguments)."""
    for arg in func._schema.arguments:
        info = arg.alias_info
        if info is not None and getattr(info, "is_write", False):
            return True
    return False


class _Stats:
    @staticmethod
    def of(t):
        x = t.detach()
        if x.dtype == torch.bool:
            x = x.to(torch.uint8)
        xf = x.double() if x.numel() else x.double().reshape(1).zero_()
        out = {"nan": int(torch.isnan(xf).sum()), "inf": int(torch.isinf(xf).sum())}
        if x.numel() == 0:
            out.update(max=None, min=None, mean=None, norm=None)
            return out
        out.update(max=_num(xf.max()), min=_num(xf.min()), mean=_num(xf.mean()), norm=_num(xf.norm()))
        return out


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
        keys = sorted((t["key"] for t in entry["tensors"] if t["key"].startswith("input.")),
                      key=lambda k: int(k.split(".")[1]))
        if not entry.get("file") or not keys:
            return None
        data = safetensors_io.read_torch(os.path.join(self.path, entry["file"]), set(keys))
        return [data[k] for k in keys]


class _Dumper(TorchDispatchMode):
    def __init__(self, dump_path, dump_mode, check_overflow, dump_list, level, stats_only, reference=None):
        super().__init__()
        self.path = dump_path
        self.mode = dump_mode
        self.check_overflow = check_overflow
        self.names = list(dump_list or [])
        self.level = level
        self.stats_only = stats_only
        self.index = 0
        self.phase = "forward"
        self.modules = []
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
        self.mutating = {}  # op overload -> writes to an argument
        self.module_objs = []

    # -- recording -------------------------------------------------------------------------------
    def _wanted(self, name):
        return not self.names or any(n in name for n in self.names)

    def _stack(self):
        for frame in reversed(traceback.extract_stack()[:-3]):
            f = frame.filename
            if "/torch/" not in f and "portkit/torch" not in f and "/runpy" not in f:
                return "%s:%d" % (f, frame.lineno)
        return ""

    def replay(self, func, args, kwargs, name, inputs):
        """(replayed outputs, manifest note) for one operator, with inputs from the reference."""
        entry = self.reference.next(name, self.phase)
        if entry is None:
            return [], {"status": "skipped", "reason": "no such operator in the reference dump"}
        ref_inputs = self.reference.inputs(entry)
        if ref_inputs is None or len(ref_inputs) != len(inputs):
            return [], {"status": "skipped", "reason": "the reference dump has no matching inputs for it",
                        "reference_index": entry["index"]}
        moved = []
        for mine, ref in zip(inputs, ref_inputs):
            if tuple(mine.shape) != tuple(ref.shape):
                return [], {"status": "skipped", "reason": "input shapes differ from the reference",
                            "reference_index": entry["index"]}
            moved.append(ref.to(device=mine.device, dtype=mine.dtype))
        try:
            it = iter(moved)  # one iterator: args first, then kwargs, as _flatten((args, kwargs)) orders them
            replay_args = _replace(args, it)
            out = func(*replay_args, **_replace(kwargs, it))
        except Exception as e:  # noqa: BLE001  (an op that cannot run on these inputs is reported, not fatal)
            return [], {"status": "skipped", "reason": "replay failed: %s" % e, "reference_index": entry["index"]}
        return _flatten(out, []), {"status": "ok", "reference_index": entry["index"]}

    def record(self, name, kind, inputs, outputs, replayed=None, replay_note=None):
        if not self._wanted(name):
            return
        tensors = []
        if self.mode in ("input", "all"):
            tensors += [("input.%d" % i, t) for i, t in enumerate(inputs)]
        if self.mode in ("output", "all"):
            tensors += [("output.%d" % i, t) for i, t in enumerate(outputs)]
        tensors += [("replay.output.%d" % i, t) for i, t in enumerate(replayed or [])]
        # Overflow: inf/nan in an output; inside an fp16 autocast region also an fp32 output (the ops
        # autocast keeps in fp32) beyond fp16's range, which overflows once it is cast back to fp16.
        overflow = False
        fp16 = _computing_in_fp16()
        for t in outputs:
            if (t.is_floating_point() or t.is_complex()) and t.numel():
                x = t.detach()
                if x.element_size() == 1:  # fp8: no abs/max kernels; its values fit float32
                    x = x.float()
                peak = float(x.abs().max())  # one reduction: nan and inf propagate into it
                if peak != peak or peak == float("inf") or (fp16 and t.dtype == torch.float32 and peak > _FP16_MAX):
                    overflow = True
        if overflow:
            self.overflows += 1
            if self.check_overflow:
                sys.stderr.write("portkit dumper: overflow in %s #%d (%s)\n" % (name, self.index, self.phase))
        entry = {"index": self.index, "name": name, "kind": kind, "phase": self.phase,
                 "module": self.modules[-1] if self.modules else "", "stack": self._stack(),
                 "overflow": overflow, "file": None, "tensors": []}
        if replay_note is not None:
            entry["replay"] = replay_note
        records = []
        for key, t in tensors:
            dtype = safetensors_io.st_dtype(t.dtype)
            if dtype is None:  # listed, so compare reports it, but without data (safetensors has no name for it)
                entry["tensors"].append({"key": key, "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                                         "note": "not saved: safetensors has no element type for %s" % t.dtype})
                continue
            info = {"key": key, "dtype": dtype, "shape": list(t.shape)}
            info.update(_Stats.of(t))
            raw = safetensors_io.tensor_bytes(t)
            info["crc32"] = zlib.crc32(raw)  # checksum of the exact bytes, also with stats_only
            entry["tensors"].append(info)
            records.append((key, dtype, tuple(t.shape), raw))
        keep_data = not self.stats_only and (not self.check_overflow or overflow)
        if keep_data and records:
            name_file = "op_%06d.safetensors" % self.index
            tmp = os.path.join(self.path, name_file + ".tmp")
            safetensors_io.write(tmp, records, {"name": name, "phase": self.phase})
            os.replace(tmp, os.path.join(self.path, name_file))
            entry["file"] = name_file
        self.manifest.write(json.dumps(entry) + "\n")
        self.manifest.flush()
        self.index += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.level == "module" or getattr(self.busy, "on", False):
            return func(*args, **kwargs)
        name = str(func.overloadpacket).replace("aten.", "aten::")
        if name.split("::")[-1] in _SKIP or not self._wanted(name):
            return func(*args, **kwargs)
        self.busy.on = True
        try:
            inputs = _flatten((args, kwargs), [])
            mutates = self.mutating.get(func)
            if mutates is None:
                mutates = self.mutating[func] = _mutates(func)
            replayed, note = None, None
            if self.reference is not None:  # before the op runs: an in-place op changes its inputs
                replayed, note = self.replay(func, args, kwargs, name, inputs)
            if mutates and self.mode in ("input", "all"):
                inputs = [t.detach().clone() for t in inputs]  # the values the op was given
            out = func(*args, **kwargs)
            self.record(name, "op", inputs, _flatten(out, []), replayed, note)
        finally:
            self.busy.on = False
        return out

    # -- modules and phases ----------------------------------------------------------------------
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

        def post(module, inputs, output):
            name = self.modules.pop() if self.modules else type(module).__name__
            if self.module_objs:
                self.module_objs.pop()
            if self.level in ("module", "mix"):
                self.busy.on = True
                try:
                    self.record(name, "module", _flatten(inputs, []), _flatten(output, []))
                finally:
                    self.busy.on = False

        self.hooks.append(torch.nn.modules.module.register_module_forward_pre_hook(pre))
        self.hooks.append(torch.nn.modules.module.register_module_forward_hook(post))

    def close(self):
        for h in self.hooks:
            h.remove()
        self.manifest.close()


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


class dumper:  # noqa: N801  (mirrors torch.utils.dumper)
    def __init__(self, dump_path="portkit_dump", dump_mode="all", check_overflow=False, dump_list=None,
                 level="op", stats_only=False, load_file_path=None, use_load=False, config=None):
        if config:
            with open(config, encoding="utf-8") as f:
                acl = json.load(f)
            if not isinstance(acl, dict):
                raise ValueError("%s: expected a JSON object with the acl.json dump keys" % config)
            if isinstance(acl.get("dump"), dict):  # CANN's acl.json nests them under "dump"
                acl = acl["dump"]
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
        self.args = (dump_path, dump_mode, check_overflow, dump_list, level, stats_only, reference)
        self.mode = None
        self._originals = None

    def __enter__(self):
        if not self.enabled:
            return self
        self.mode = _Dumper(*self.args)
        self.mode.attach_modules()
        mode = self.mode

        def in_backward(original):
            def run(*a, **k):
                previous, mode.phase = mode.phase, "backward"
                try:
                    return original(*a, **k)
                finally:
                    mode.phase = previous
            return run

        # Tensor.backward() goes through torch.autograd.backward; torch.autograd.grad is the other door.
        self._originals = (torch.autograd.backward, torch.autograd.grad)
        torch.autograd.backward = in_backward(self._originals[0])
        torch.autograd.grad = in_backward(self._originals[1])
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        if self.mode is None:
            return False
        self.mode.__exit__(*exc)
        torch.autograd.backward, torch.autograd.grad = self._originals
        self.mode.close()
        return False

    @property
    def overflows(self):
        return self.mode.overflows if self.mode else 0
