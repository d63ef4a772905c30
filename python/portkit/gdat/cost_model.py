"""GDAT's cost model of one DDP training step: backward compute per layer, gradient buckets,
all-reduce cost alpha + beta * bytes per bucket, and their overlap.

A model description (JSON, see docs/tune.md "GDAT") gives the layers in forward order, each with
its backward time and its parameter shapes, and the costs of the machine::

    {"name": "mlp", "forward_ms": 4.0, "optimizer_ms": 1.0,
     "layers": [{"name": "fc1", "backward_ms": 2.0, "params": [[4096, 1024], [4096]]}, ...],
     "comm": {"alpha_ms": 0.05, "beta_ms_per_mb": 0.4},
     "copy_ms_per_mb": 0.02, "fp16_cast_ms_per_mb": 0.03, "powersgd_gflops": 50.0,
     "find_unused_parameters": false, "unused_search_ms": 0.0}

``simulate(desc, settings)`` returns the step time and its parts; it is deterministic (the same
description and settings give the same floats). What it models, in order:

- Backward runs the layers in reverse; a layer's gradients are ready when its backward ends.
  Without ``gradient_as_bucket_view`` each gradient is copied into its bucket on the backward
  thread (``copy_ms_per_mb``) and copied back after the last all-reduce.
- Buckets follow DDP's rule (``settings.bucket_sizes``): gradients in ready order, the first
  bucket closed at ``first_bucket_mb``, later ones at ``bucket_cap_mb``.
- A bucket's all-reduce starts when its last gradient is ready and the link is free (DDP launches
  buckets in order, one link): start = max(ready, end of the previous bucket).
- Hooks: fp16 halves the bytes and adds a cast each way (``fp16_cast_ms_per_mb`` per MiB of
  fp32 gradient, both on the communication path). PowerSGD of rank r all-reduces, per bucket, the
  uncompressed tensors (vectors and matrices too small to gain, DDP's min_compression_rate 2),
  then P (rows x r) and Q (cols x r) in two more all-reduces; its matrix products
  (4 * rows * cols * r + 2 * rows * r^2 flops) run at ``powersgd_gflops`` on the communication path.
- With ``find_unused_parameters`` DDP searches the autograd graph every step (``unused_search_ms``);
  ``static_graph`` removes that search. Without it static_graph changes nothing here.
- step = forward + [search] + max(backward end, last all-reduce end) + [copy back] + optimizer.
"""
import json
import math

from .settings import MIB, SettingsError, bucket_sizes

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


class DescriptionError(ValueError):
    """A model description that cannot be used; the message names the file and the field."""


class Tensor(object):
    __slots__ = ("layer", "shape", "nbytes")

    def __init__(self, layer, shape, nbytes):
        self.layer, self.shape, self.nbytes = layer, shape, nbytes


class ModelDescription(object):
    """A validated description. ``tensors`` are in gradient-ready order (reverse of forward)."""

    def __init__(self, doc, where="description"):
        def fail(msg):
            raise DescriptionError("%s: %s" % (where, msg))

        def number(obj, key, default=None, minimum=0.0):
            v = obj.get(key, default)
            if v is None:
                fail("missing '%s'" % key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < minimum:
                fail("'%s' must be a finite number >= %g (got %r)" % (key, minimum, v))
            return float(v)

        if not isinstance(doc, dict):
            fail("expected a JSON object")
        known = {"name", "world_size", "forward_ms", "optimizer_ms", "layers", "comm", "copy_ms_per_mb",
                 "fp16_cast_ms_per_mb", "powersgd_gflops", "find_unused_parameters", "unused_search_ms",
                 "dtype", "note"}
        unknown = sorted(set(doc) - known)
        if unknown:
            fail("unknown field(s) %s" % ", ".join(unknown))
        self.name = str(doc.get("name", "model"))
        self.world_size = int(number(doc, "world_size", 2, 2))
        self.forward_ms = number(doc, "forward_ms", 0.0)
        self.optimizer_ms = number(doc, "optimizer_ms", 0.0)
        self.copy_ms_per_mb = number(doc, "copy_ms_per_mb", 0.0)
        self.fp16_cast_ms_per_mb = number(doc, "fp16_cast_ms_per_mb", 0.0)
        self.powersgd_gflops = number(doc, "powersgd_gflops", 50.0, 1e-9)
        self.find_unused_parameters = bool(doc.get("find_unused_parameters", False))
        self.unused_search_ms = number(doc, "unused_search_ms", 0.0)
        dtype = doc.get("dtype", "float32")
        if dtype not in DTYPE_BYTES:
            fail("'dtype' must be one of %s (got %r)" % (", ".join(sorted(DTYPE_BYTES)), dtype))
        elem = self.elem_bytes = DTYPE_BYTES[dtype]
        comm = doc.get("comm")
        if not isinstance(comm, dict):
            fail("missing 'comm' object with alpha_ms and beta_ms_per_mb")
        self.alpha_ms = number(comm, "alpha_ms")
        self.beta_ms_per_mb = number(comm, "beta_ms_per_mb")
        layers = doc.get("layers")
        if not isinstance(layers, list) or not layers:
            fail("'layers' must be a non-empty list (forward order)")
        self.layer_names, self.backward_ms, self.layer_bytes = [], [], []
        forward_tensors = []
        for i, layer in enumerate(layers):
            lw = "layers[%d]" % i
            if not isinstance(layer, dict):
                fail("%s must be an object" % lw)
            self.layer_names.append(str(layer.get("name", "layer%d" % i)))
            try:
                self.backward_ms.append(number(layer, "backward_ms"))
            except DescriptionError as e:
                raise DescriptionError(str(e).replace(where + ": ", where + ": " + lw + ": ", 1))
            params = layer.get("params")
            if not isinstance(params, list) or not params:
                fail("%s: 'params' must be a non-empty list of shapes, e.g. [[512, 256], [512]]" % lw)
            total = 0
            for shape in params:
                if (not isinstance(shape, list) or not shape
                        or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape)):
                    fail("%s: parameter shape %r must be a list of positive integers" % (lw, shape))
                nbytes = elem
                for d in shape:
                    nbytes *= d
                if nbytes > 1 << 50:
                    fail("%s: parameter shape %r is over 1 PiB" % (lw, shape))
                total += nbytes
                forward_tensors.append(Tensor(i, list(shape), nbytes))
            self.layer_bytes.append(total)
        # DDP assumes gradients arrive in reverse order of model.parameters().
        self.tensors = list(reversed(forward_tensors))

    @classmethod
    def load(cls, path):
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except OSError as e:
            raise DescriptionError("%s: cannot read: %s" % (path, e.strerror or e))
        except ValueError as e:
            raise DescriptionError("%s: not valid JSON: %s" % (path, e))
        return cls(doc, where=str(path))

    @property
    def total_mb(self):
        return sum(self.layer_bytes) / MIB


def _comm_ms(desc, settings, tensors):
    """Time the link is busy for one bucket (including hook compute charged to it)."""
    mb = sum(t.nbytes for t in tensors) / MIB
    a, b = desc.alpha_ms, desc.beta_ms_per_mb
    if settings.comm_hook == "none":
        return a + b * mb
    if settings.comm_hook == "fp16":
        return 2.0 * desc.fp16_cast_ms_per_mb * mb + a + b * mb / 2.0
    r = settings.powersgd_rank
    plain_mb, p_mb, q_mb, flops = 0.0, 0.0, 0.0, 0.0
    for t in tensors:
        rows = t.shape[0]
        cols = 1
        for d in t.shape[1:]:
            cols *= d
        if len(t.shape) > 1 and rows * cols > 2 * (rows + cols) * r:
            p_mb += rows * r * desc.elem_bytes / MIB
            q_mb += cols * r * desc.elem_bytes / MIB
            flops += 4.0 * rows * cols * r + 2.0 * rows * r * r
        else:
            plain_mb += t.nbytes / MIB
    ms = flops / (desc.powersgd_gflops * 1e6)
    if plain_mb > 0:
        ms += a + b * plain_mb
    if p_mb > 0:
        ms += 2 * a + b * (p_mb + q_mb)
    return ms


def simulate(desc, settings):
    """Step time of ``desc`` under ``settings`` (DDPSettings) and its parts, in ms."""
    copy = 0.0 if settings.gradient_as_bucket_view else desc.copy_ms_per_mb
    ready_of_layer = [0.0] * len(desc.backward_ms)
    t = 0.0
    for i in reversed(range(len(desc.backward_ms))):
        t += desc.backward_ms[i] + copy * desc.layer_bytes[i] / MIB
        ready_of_layer[i] = t
    backward_end = t
    groups = bucket_sizes([x.nbytes for x in desc.tensors], settings.first_bucket_mb * MIB,
                          settings.bucket_cap_mb * MIB)
    link_free, comm_busy = 0.0, 0.0
    for g in groups:
        tensors = [desc.tensors[i] for i in g]
        ready = max(ready_of_layer[x.layer] for x in tensors)
        ms = _comm_ms(desc, settings, tensors)
        link_free = max(ready, link_free) + ms
        comm_busy += ms
    comm_end = link_free
    search = desc.unused_search_ms if desc.find_unused_parameters and not settings.static_graph else 0.0
    copy_back = copy * desc.total_mb
    step = desc.forward_ms + search + max(backward_end, comm_end) + copy_back + desc.optimizer_ms
    return {"step_ms": step, "backward_ms": backward_end, "comm_busy_ms": comm_busy,
            "exposed_comm_ms": max(0.0, comm_end - backward_end), "buckets": len(groups),
            "bucket_mb": [sum(desc.tensors[i].nbytes for i in g) / MIB for g in groups]}


__all__ = ["DescriptionError", "ModelDescription", "SettingsError", "simulate"]
