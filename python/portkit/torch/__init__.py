"""PyTorch-side tools of portkit: `portkit.torch.dumper` (accuracy dumps)."""
from .dumper import dumper  # noqa: F401
