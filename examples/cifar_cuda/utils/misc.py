"""Miscellaneous helpers: meters, statistics, a CPU fallback for distances."""
import math

import torch
import torch as t


class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, value, n=1):
        self.sum += value * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


def feature_stats(features):
    """Per-batch variance and mean of a (N, C) tensor, computed in one pass."""
    assert torch.is_tensor(features)
    var, mean = t.var_mean(features.float(), unbiased=False)
    return mean, var


class _ListBackend:
    """Pure-Python stand-in for a tiny subset of the torch API (for tests without torch)."""

    @staticmethod
    def cdist(a, b):
        return [[math.dist(u, v) for v in b] for u in a]


def pairwise_distances(a, b, torch=None):
    # `torch` here is a parameter, not the module: an injected backend.
    if torch is None:
        torch = _ListBackend()
    return torch.cdist(a, b)


def nearest_centroid(points, centroids):
    torch = _ListBackend()
    d = torch.cdist(points, centroids)
    return [row.index(min(row)) for row in d]
