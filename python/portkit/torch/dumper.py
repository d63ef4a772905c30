"""Operator-level dumps for accuracy comparison (seed 002's `torch.utils.dumper`).

    import portkit.torch
    with portkit.torch.dumper(dump_path="dump_ref"):
        loss = model(x).sum(); loss.backward()

Every aten operator (forward and backward, through torch's dispatch interception) is recorded with
its inputs and/or outputs; `level="module"` records module inputs/outputs instead, `"mix"` both.
Layout of a dump folder:

    manifest.jsonl        one JSON object per recorded operator, appended and flushed after it ran
    op_000042.safetensors its tensors (keys input.0, output.0, ...), exact dtypes (fp32/fp16/bf16/ints/bool)

so a crash loses at most the operator in flight. Manifest fields: index, name (aten op or module
path), kind (op|module), phase (forward|backward), module (innermost module path), stack (first
frame in the user's code), file (or null with stats_only), tensors: [{key, dtype, shape, max, min,
mean, norm, nan, inf}], overflow (true when an output has inf/nan, or exceeds the fp16 range when
computed in fp16).

Options (also from a JSON file with the seed's acl.json keys dump_list, dump_path, dump_mode,
dump_op_switch): dump_mode input|output|all, dump_list (names: an op is kept when its name contains
one), check_overflow (print overflowing operators as they happen; keep tensor data only for them),
stats_only. load_file_path/use_load (replay) are accepted and not implemented yet.
"""
import json
import os
import sys
import threading
import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import safetensors_io

_FP16_MAX = 65504.0
_SKIP = {"detach", "t", "view", "_unsafe_view", "expand", "alias"}  # no new values


class _Stats:
    @staticmethod
    def of(t):
        x = t.detach()
        if x.dtype == torch.bool:
            x = x.to(torch.uint8)
        xf = x.double() if x.numel() else x.double().reshape(1).zero_()
        finite = torch.isfinite(xf)
        out = {"nan": int(torch.isnan(xf).sum()), "inf": int(torch.isinf(xf).sum())}
        if x.numel() == 0:
            out.update(max=None, min=None, mean=None, norm=None)
            return out
        out.update(max=float(xf.max()), min=float(xf.min()), mean=float(xf.mean()), norm=float(xf.norm()))
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


class _Dumper(TorchDispatchMode):
    def __init__(self, dump_path, dump_mode, check_overflow, dump_list, level, stats_only):
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
        self.manifest = open(os.path.join(self.path, "manifest.jsonl"), "a", encoding="utf-8")
        self.hooks = []
        self.overflows = 0

    # -- recording -------------------------------------------------------------------------------
    def _wanted(self, name):
        return not self.names or any(n in name for n in self.names)

    def _stack(self):
        for frame in reversed(traceback.extract_stack()[:-3]):
            f = frame.filename
            if "/torch/" not in f and "portkit/torch" not in f and "/runpy" not in f:
                return "%s:%d" % (f, frame.lineno)
        return ""

    def record(self, name, kind, inputs, outputs):
        if not self._wanted(name):
            return
        tensors = []
        if self.mode in ("input", "all"):
            tensors += [("input.%d" % i, t) for i, t in enumerate(inputs)]
        if self.mode in ("output", "all"):
            tensors += [("output.%d" % i, t) for i, t in enumerate(outputs)]
        overflow = False
        for _, t in (("", t) for t in outputs):
            if t.is_floating_point() or t.is_complex():
                finite = torch.isfinite(t.detach()).all()
                big = t.dtype == torch.float16 and bool((t.detach().abs() > _FP16_MAX).any())
                if not bool(finite) or big:
                    overflow = True
        if overflow:
            self.overflows += 1
            if self.check_overflow:
                sys.stderr.write("portkit dumper: overflow in %s #%d (%s)\n" % (name, self.index, self.phase))
        entry = {"index": self.index, "name": name, "kind": kind, "phase": self.phase,
                 "module": self.modules[-1] if self.modules else "", "stack": self._stack(),
                 "overflow": overflow, "file": None, "tensors": []}
        records = []
        for key, t in tensors:
            dtype = safetensors_io.st_dtype(t.dtype)
            if dtype is None:
                continue
            info = {"key": key, "dtype": dtype, "shape": list(t.shape)}
            info.update(_Stats.of(t))
            entry["tensors"].append(info)
            records.append((key, dtype, tuple(t.shape), safetensors_io.tensor_bytes(t)))
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
        out = func(*args, **kwargs)
        if self.level == "module" or getattr(self.busy, "on", False):
            return out
        name = str(func.overloadpacket).replace("aten.", "aten::")
        if name.split("::")[-1] in _SKIP:
            return out
        self.busy.on = True
        try:
            self.record(name, "op", _flatten((args, kwargs), []), _flatten(out, []))
        finally:
            self.busy.on = False
        return out

    # -- modules and phases ----------------------------------------------------------------------
    def attach_modules(self):
        def pre(module, inputs):
            self.modules.append(getattr(module, "_portkit_name", type(module).__name__))

        def post(module, inputs, output):
            name = self.modules.pop() if self.modules else type(module).__name__
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


class dumper:  # noqa: N801  (mirrors torch.utils.dumper)
    def __init__(self, dump_path="portkit_dump", dump_mode="all", check_overflow=False, dump_list=None,
                 level="op", stats_only=False, load_file_path=None, use_load=False, config=None):
        if config:
            with open(config, encoding="utf-8") as f:
                acl = json.load(f)
            dump_path = acl.get("dump_path", dump_path)
            dump_mode = acl.get("dump_mode", dump_mode)
            dump_list = acl.get("dump_list", dump_list)
            self.enabled = acl.get("dump_op_switch", "on") != "off"
        else:
            self.enabled = True
        if dump_mode not in ("input", "output", "all"):
            raise ValueError("dump_mode must be input, output or all, not %r" % (dump_mode,))
        if level not in ("op", "module", "mix"):
            raise ValueError("level must be op, module or mix, not %r" % (level,))
        if use_load:
            raise NotImplementedError("replay (use_load / load_file_path) is not implemented yet")
        self.args = (dump_path, dump_mode, check_overflow, dump_list, level, stats_only)
        self.mode = None
        self._backward = None

    def __enter__(self):
        if not self.enabled:
            return self
        self.mode = _Dumper(*self.args)
        self.mode.attach_modules()
        original = torch.autograd.backward
        mode = self.mode

        def backward(*a, **k):
            previous, mode.phase = mode.phase, "backward"
            try:
                return original(*a, **k)
            finally:
                mode.phase = previous

        self._backward = original
        torch.autograd.backward = backward
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        if self.mode is None:
            return False
        self.mode.__exit__(*exc)
        torch.autograd.backward = self._backward
        self.mode.close()
        return False

    @property
    def overflows(self):
        return self.mode.overflows if self.mode else 0
