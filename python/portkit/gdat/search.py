"""GDAT's search space and search strategy.

The space is a grid over the DDP knobs (``Space``). Lossy hooks (fp16, PowerSGD) enter it only
when the user allows them, since they change the gradients.

The strategy (``coordinate_search``) starts from DDP's defaults and sweeps groups of knobs
while holding the others: first the two bucket caps together (they interact: the first bucket
decides when the tail's all-reduce can start, the cap how many latencies the rest pays), then
the hook (whose byte reduction moves the best cap), then gradient_as_bucket_view, then
static_graph. It repeats the sweeps from the new best point until a whole round changes
nothing or the evaluation budget is spent. Points already measured are not measured again.

Ordering of results is total and deterministic: lower step time first; on equal times the point
with fewer knobs away from DDP's defaults, then the smaller key. ``exhaustive`` evaluates every
point with the same ordering, which is what the CI tests compare the strategy against.
"""
from .settings import DEFAULT, DDPSettings

DEFAULT_BUCKET_CAPS_MB = (1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0)
DEFAULT_FIRST_BUCKETS_MB = (0.25, 1.0, 4.0, 16.0)
DEFAULT_POWERSGD_RANKS = (1, 4)


class Space(object):
    """The grid. ``hooks`` is a list of (comm_hook, powersgd_rank) pairs."""

    def __init__(self, bucket_caps_mb=DEFAULT_BUCKET_CAPS_MB, first_buckets_mb=DEFAULT_FIRST_BUCKETS_MB,
                 views=(False, True), static_graphs=(False, True), allow_lossy=False,
                 powersgd_ranks=DEFAULT_POWERSGD_RANKS, baseline=DEFAULT):
        self.bucket_caps_mb = tuple(sorted(set(float(v) for v in bucket_caps_mb)))
        self.first_buckets_mb = tuple(sorted(set(float(v) for v in first_buckets_mb)))
        self.views = tuple(sorted(set(bool(v) for v in views)))
        self.static_graphs = tuple(sorted(set(bool(v) for v in static_graphs)))
        hooks = [("none", 0)]
        if allow_lossy:
            hooks.append(("fp16", 0))
            hooks.extend(("powersgd", int(r)) for r in sorted(set(powersgd_ranks)))
        self.hooks = tuple(hooks)
        self.allow_lossy = bool(allow_lossy)
        if not (self.bucket_caps_mb and self.first_buckets_mb and self.views and self.static_graphs):
            raise ValueError("every knob needs at least one value")
        if min(self.bucket_caps_mb + self.first_buckets_mb) <= 0:
            raise ValueError("bucket sizes must be > 0 MiB")
        # The baseline (what the user runs today, DDP's defaults unless told) is always a
        # candidate, even when it is off the grid, so that the result is never worse than it.
        self.baseline = baseline

    def without_hook(self, hook):
        """The same space without one comm hook (``tune_ddp`` drops PowerSGD on gloo)."""
        import copy

        other = copy.copy(self)
        other.hooks = tuple(h for h in self.hooks if h[0] != hook)
        return other

    def size(self):
        return (len(self.bucket_caps_mb) * len(self.first_buckets_mb) * len(self.views)
                * len(self.static_graphs) * len(self.hooks))

    def points(self):
        out = []
        for cap in self.bucket_caps_mb:
            for first in self.first_buckets_mb:
                for view in self.views:
                    for static in self.static_graphs:
                        for hook, rank in self.hooks:
                            out.append(DDPSettings(cap, first, view, static, hook, rank))
        if self.baseline not in out:
            out.append(self.baseline)
        return out

    def sweeps(self, p):
        """The candidate lists of one round of sweeps around point ``p``."""
        return [
            [p.replace(bucket_cap_mb=c, first_bucket_mb=f) for c in self.bucket_caps_mb for f in self.first_buckets_mb],
            [p.replace(comm_hook=h, powersgd_rank=r) for h, r in self.hooks],
            [p.replace(gradient_as_bucket_view=v) for v in self.views],
            [p.replace(static_graph=s) for s in self.static_graphs],
        ]

    def describe(self):
        return {"bucket_cap_mb": list(self.bucket_caps_mb), "first_bucket_mb": list(self.first_buckets_mb),
                "gradient_as_bucket_view": list(self.views), "static_graph": list(self.static_graphs),
                "comm_hook": ["%s(r=%d)" % h if h[0] == "powersgd" else h[0] for h in self.hooks],
                "lossy_allowed": self.allow_lossy, "points": self.size()}


def distance_from_default(p):
    d = DEFAULT
    return ((p.bucket_cap_mb != d.bucket_cap_mb) + (p.first_bucket_mb != d.first_bucket_mb)
            + (p.gradient_as_bucket_view != d.gradient_as_bucket_view) + (p.static_graph != d.static_graph)
            + (p.comm_hook != d.comm_hook))


def order_key(point, time_ms):
    return (time_ms, distance_from_default(point), point.key())


class SearchResult(object):
    def __init__(self, best, best_ms, trials, complete):
        self.best = best
        self.best_ms = best_ms
        self.trials = trials  # [(DDPSettings, time_ms)] in evaluation order
        self.complete = complete  # False when the budget ran out before convergence

    @property
    def evaluations(self):
        return len(self.trials)


def coordinate_search(space, evaluate, max_evals=None, start=None):
    """Searches ``space``; ``evaluate(DDPSettings) -> step time ms`` is called once per point.
    Returns a SearchResult. ``max_evals`` bounds the calls to evaluate (None: until converged)."""
    cache, trials = {}, []

    class Budget(Exception):
        pass

    def ev(p):
        if p not in cache:
            if max_evals is not None and len(trials) >= max_evals:
                raise Budget()
            cache[p] = float(evaluate(p))
            trials.append((p, cache[p]))
        return cache[p]

    current = start or space.baseline
    complete = True
    try:
        ev(current)
        changed = True
        while changed:
            changed = False
            for candidates in space.sweeps(current):
                for c in candidates:
                    ev(c)
                best = min(candidates + [current], key=lambda q: order_key(q, cache[q]))
                if best != current:
                    current, changed = best, True
    except Budget:
        complete = False
    best = min(cache, key=lambda q: order_key(q, cache[q]))
    return SearchResult(best, cache[best], trials, complete)


def exhaustive(space, evaluate):
    """Every point of the grid (and the baseline), in the same order as coordinate_search."""
    trials = [(p, float(evaluate(p))) for p in space.points()]
    best, best_ms = min(trials, key=lambda t: order_key(t[0], t[1]))
    return SearchResult(best, best_ms, trials, True)
