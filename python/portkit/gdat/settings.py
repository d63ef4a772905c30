"""The DDP settings GDAT tunes, DDP's bucketing rule, and building a DDP object with them.

A ``DDPSettings`` is one point of the search: ``bucket_cap_mb``, ``first_bucket_mb`` (the cap
of the bucket that holds the last parameters of the model, whose gradients are ready last),
``gradient_as_bucket_view``, ``static_graph`` and ``comm_hook`` (``none``, ``fp16`` or
``powersgd`` with ``powersgd_rank``). ``make_ddp`` applies a point on torch 1.13 and 2.x alike;
``bucket_sizes`` is DDP's own assignment rule, which the cost model uses and the 2-process test
checks against the buckets DDP reports.

Sizes are in MiB (2**20 bytes), as DDP's ``bucket_cap_mb`` is.
"""
import contextlib
import json

MIB = 1024 * 1024
HOOKS = ("none", "fp16", "powersgd")
LOSSY_HOOKS = ("fp16", "powersgd")


class SettingsError(ValueError):
    """A settings file or value that cannot be used; the message names what is wrong."""


class DDPSettings(object):
    """One DDP configuration. Immutable by convention; ``key()`` orders and identifies it."""

    __slots__ = ("bucket_cap_mb", "first_bucket_mb", "gradient_as_bucket_view", "static_graph",
                 "comm_hook", "powersgd_rank")

    def __init__(self, bucket_cap_mb=25.0, first_bucket_mb=1.0, gradient_as_bucket_view=False,
                 static_graph=False, comm_hook="none", powersgd_rank=0):
        if not (bucket_cap_mb > 0 and first_bucket_mb > 0):
            raise SettingsError("bucket_cap_mb and first_bucket_mb must be > 0 (got %r, %r)"
                                % (bucket_cap_mb, first_bucket_mb))
        if comm_hook not in HOOKS:
            raise SettingsError("comm_hook must be one of %s (got %r)" % (", ".join(HOOKS), comm_hook))
        if comm_hook == "powersgd" and int(powersgd_rank) < 1:
            raise SettingsError("comm_hook powersgd needs powersgd_rank >= 1")
        self.bucket_cap_mb = float(bucket_cap_mb)
        self.first_bucket_mb = float(first_bucket_mb)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.static_graph = bool(static_graph)
        self.comm_hook = comm_hook
        self.powersgd_rank = int(powersgd_rank) if comm_hook == "powersgd" else 0

    @property
    def lossy(self):
        """True when the hook changes the gradients (fp16 rounding, low-rank approximation)."""
        return self.comm_hook in LOSSY_HOOKS

    def key(self):
        return (self.bucket_cap_mb, self.first_bucket_mb, self.gradient_as_bucket_view, self.static_graph,
                HOOKS.index(self.comm_hook), self.powersgd_rank)

    def replace(self, **changes):
        d = self.to_dict()
        d.update(changes)
        if d.get("comm_hook") != "powersgd":
            d["powersgd_rank"] = 0
        return DDPSettings(**d)

    def to_dict(self):
        return {"bucket_cap_mb": self.bucket_cap_mb, "first_bucket_mb": self.first_bucket_mb,
                "gradient_as_bucket_view": self.gradient_as_bucket_view, "static_graph": self.static_graph,
                "comm_hook": self.comm_hook, "powersgd_rank": self.powersgd_rank}

    @classmethod
    def from_dict(cls, d, where="settings"):
        if not isinstance(d, dict):
            raise SettingsError("%s: expected a JSON object of DDP settings" % where)
        known = set(cls.__slots__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise SettingsError("%s: unknown setting(s) %s (known: %s)" % (where, ", ".join(unknown),
                                                                          ", ".join(sorted(known))))
        try:
            return cls(**d)
        except (TypeError, ValueError) as e:
            raise SettingsError("%s: %s" % (where, e))

    def label(self):
        hook = self.comm_hook if self.comm_hook != "powersgd" else "powersgd(r=%d)" % self.powersgd_rank
        return "cap=%gMB first=%gMB view=%s static=%s hook=%s" % (
            self.bucket_cap_mb, self.first_bucket_mb, int(self.gradient_as_bucket_view), int(self.static_graph),
            hook)

    def __eq__(self, other):
        return isinstance(other, DDPSettings) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return "DDPSettings(%s)" % self.label()


DEFAULT = DDPSettings()


def bucket_sizes(grad_bytes_in_ready_order, first_cap_bytes, cap_bytes):
    """DDP's assignment of gradients to buckets (``_compute_bucket_assignment_by_size``, and the
    rebuild after the first iteration): tensors are taken in the order their gradients become
    ready; a tensor is added to the open bucket, and the bucket closes once it holds at least its
    limit. The first bucket's limit is ``first_cap_bytes``, every later one ``cap_bytes``.
    Returns a list of lists of tensor indices (into the given list), in launch order."""
    buckets, current, size = [], [], 0
    limit = first_cap_bytes
    for i, nbytes in enumerate(grad_bytes_in_ready_order):
        current.append(i)
        size += nbytes
        if size >= limit:
            buckets.append(current)
            current, size, limit = [], 0, cap_bytes
    if current:
        buckets.append(current)
    return buckets


@contextlib.contextmanager
def _first_bucket_bytes(nbytes):
    # DDP reads the first bucket's cap from this module attribute when it builds its reducer
    # (torch's documented way to tune it); it is put back as soon as the reducer exists.
    import torch.distributed as dist

    if not hasattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES"):
        if int(nbytes) != MIB:
            raise SettingsError("this torch has no torch.distributed._DEFAULT_FIRST_BUCKET_BYTES: the first bucket's "
                                "cap cannot be set (use first_bucket_mb=1)")
        yield
        return
    old = dist._DEFAULT_FIRST_BUCKET_BYTES
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(nbytes)
    try:
        yield
    finally:
        dist._DEFAULT_FIRST_BUCKET_BYTES = old


_DDP_CLASS = []


def _ddp_class():
    """DistributedDataParallel with the first bucket's own cap kept when ``bucket_cap_mb`` is
    given: torch 2.x uses ``bucket_cap_mb`` for the first bucket too unless the cap was left at
    its default (``bucket_bytes_cap_default``), so the subclass says it was. On torch 1.13 the
    attribute is unused and the first bucket always has its own cap."""
    if _DDP_CLASS:
        return _DDP_CLASS[0]
    from torch.nn.parallel import DistributedDataParallel

    class FirstBucketDDP(DistributedDataParallel):
        def _ddp_init_helper(self, *args, **kwargs):
            self.bucket_bytes_cap_default = True
            return super(FirstBucketDDP, self)._ddp_init_helper(*args, **kwargs)

    cls = FirstBucketDDP if hasattr(DistributedDataParallel, "_ddp_init_helper") else DistributedDataParallel
    _DDP_CLASS.append(cls)
    return cls


def make_ddp(module, settings, process_group=None, powersgd_start_iter=2, **ddp_kwargs):
    """Wraps ``module`` in DistributedDataParallel with ``settings`` applied (bucket caps, bucket
    view, static graph, comm hook). Other DDP arguments (device_ids, find_unused_parameters, ...)
    pass through. PowerSGD starts compressing after ``powersgd_start_iter`` steps (torch requires
    at least 2 with error feedback)."""
    s = settings
    if s.comm_hook == "powersgd":
        import torch.distributed as dist

        if dist.get_backend(process_group) == "gloo":
            sizes = [p.numel() * p.element_size() for p in reversed(list(module.parameters())) if p.requires_grad]
            if len(bucket_sizes(sizes, s.first_bucket_mb * MIB, s.bucket_cap_mb * MIB)) > 1:
                raise SettingsError(
                    "PowerSGD on gloo needs a single bucket (%s gives more): the hook's all-reduces, started from "
                    "completion callbacks, are not ordered alike on every rank and gloo aborts (seen on torch 1.13 "
                    "and 2.8); raise bucket_cap_mb and first_bucket_mb above the model's gradient size" % s.label())
    with _first_bucket_bytes(s.first_bucket_mb * MIB):
        ddp = _ddp_class()(module, process_group=process_group, bucket_cap_mb=s.bucket_cap_mb,
                           gradient_as_bucket_view=s.gradient_as_bucket_view, static_graph=s.static_graph,
                           **ddp_kwargs)
    if s.comm_hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp.register_comm_hook(process_group, default_hooks.fp16_compress_hook)
    elif s.comm_hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

        state = powerSGD_hook.PowerSGDState(process_group=process_group,
                                            matrix_approximation_rank=s.powersgd_rank,
                                            start_powerSGD_iter=max(2, int(powersgd_start_iter)))
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    return ddp


def ddp_bucket_report(ddp):
    """The buckets DDP uses now and its settings: {"bucket_sizes": [bytes...] in launch order,
    "gradient_as_bucket_view", "static_graph", "bucket_cap_bytes"}. A new DDP starts with one
    bucket and rebuilds them in gradient-ready order after its first step (after its second with
    static_graph), so call this after those steps to see the buckets the settings give."""
    data = ddp._get_ddp_logging_data()
    reducer = getattr(ddp, "reducer", None)
    if reducer is not None and hasattr(reducer, "_get_zeros_like_grad_buckets"):
        sizes = [b.buffer().numel() * b.buffer().element_size() for b in reducer._get_zeros_like_grad_buckets()]
    else:
        text = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
        sizes = [int(x) for x in str(text).replace(" ", "").split(",") if x]
    return {"bucket_sizes": sizes,
            "gradient_as_bucket_view": bool(data.get("gradient_as_bucket_view", 0)),
            "static_graph": bool(getattr(ddp, "static_graph", False)),
            "bucket_cap_bytes": int(data.get("bucket_cap_bytes", 0))}


def load_settings(path):
    """The ``settings`` object of a ``gdat_settings.json`` file as DDPSettings."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise SettingsError("%s: cannot read GDAT settings: %s" % (path, e))
    return DDPSettings.from_dict(doc.get("settings") if isinstance(doc, dict) else None, where=path)
