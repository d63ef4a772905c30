"""GDAT (AOE's gradient tuning, seed 004): tunes DDP's gradient communication so that the
all-reduce overlaps the backward pass and the tail after the last gradient is short.

- ``cost_model``: a deterministic model of one DDP step (per-layer backward, buckets,
  alpha + beta * bytes all-reduce, overlap) for ``portkit tune --job-type=4 --simulate``;
- ``search``: the space of DDP knobs and the strategy (coordinate sweeps) shared by both modes;
- ``online``: ``tune_ddp`` measures real DDP steps in each rank, decides on rank 0, broadcasts,
  and continues training with the best settings;
- ``settings``: ``DDPSettings``, DDP's bucketing rule and ``make_ddp`` to apply settings
  (``load_settings`` reads the ``gdat_settings.json`` a run wrote).

Only ``settings`` and ``search`` are imported eagerly; none of this imports torch until DDP
is built.
"""
from .settings import DDPSettings, SettingsError, bucket_sizes, ddp_bucket_report, load_settings, make_ddp
from .search import Space, coordinate_search, exhaustive
from .cost_model import DescriptionError, ModelDescription, simulate


def tune_ddp(*args, **kwargs):
    """See ``portkit.gdat.online.tune_ddp``."""
    from .online import tune_ddp as impl

    return impl(*args, **kwargs)


__all__ = ["DDPSettings", "SettingsError", "bucket_sizes", "ddp_bucket_report", "load_settings", "make_ddp",
           "Space", "coordinate_search", "exhaustive", "DescriptionError", "ModelDescription", "simulate",
           "tune_ddp"]
