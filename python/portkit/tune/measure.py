"""Interleaved timing with a confidence interval and the rule that decides "faster".

Every candidate runs once per round, in a rotated order (A,B,C / B,C,A / ...), so slow drifts of
the machine's load hit all candidates alike; the first rounds are warm-up and dropped. A sample is
``inner`` back-to-back calls (chosen so one sample lasts at least ``min_sample_s``) divided by
``inner``. Comparisons use the *paired* ratio of two candidates within the same round, so load
that changes between rounds cancels; the median ratio gets a bootstrap confidence interval.

Significance rule (docs/tune.md): a challenger replaces an incumbent only when the upper bound
of the 95 % bootstrap interval of the median paired ratio challenger/incumbent is below
``1 - margin`` (margin 2 %): faster beyond the noise, not merely faster.
"""
import random
import time

DEFAULT_MARGIN = 0.02


def _median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def bootstrap_median_ci(xs, level=0.95, resamples=1000, seed=0):
    """(low, high) bootstrap interval of the median of ``xs``; deterministic (fixed seed)."""
    if not xs:
        return (float("nan"), float("nan"))
    if len(xs) == 1:
        return (xs[0], xs[0])
    rng = random.Random(seed)
    n = len(xs)
    meds = sorted(_median([xs[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    lo = meds[int((1 - level) / 2 * resamples)]
    hi = meds[min(resamples - 1, int((1 + level) / 2 * resamples))]
    return (lo, hi)


class Timing:
    """Samples (seconds per call) of one candidate and their median with its interval."""

    def __init__(self, name, samples):
        self.name = name
        self.samples = list(samples)
        self.median = _median(self.samples)
        self.ci = bootstrap_median_ci(self.samples)

    def as_ms(self):
        return {"median_ms": self.median * 1e3, "ci_ms": [self.ci[0] * 1e3, self.ci[1] * 1e3],
                "samples": len(self.samples)}


def paired_ratio(challenger, incumbent):
    """(median, (low, high)) of challenger/incumbent computed round by round."""
    ratios = [a / b for a, b in zip(challenger.samples, incumbent.samples) if b > 0]
    return _median(ratios), bootstrap_median_ci(ratios)


def significantly_faster(challenger, incumbent, margin=DEFAULT_MARGIN):
    """The rule: the whole 95 % interval of the paired ratio lies below 1 - margin."""
    med, (lo, hi) = paired_ratio(challenger, incumbent)
    return hi < 1.0 - margin


def _calibrate(fn, min_sample_s):
    start = time.perf_counter()
    fn()
    one = max(time.perf_counter() - start, 1e-7)
    return max(1, min(1000, int(min_sample_s / one) + 1))


def _round_order(names, r, group):
    """The order of round ``r``: rotated by one each round; with ``group``, the candidates of one
    group run back to back (the groups' order and the order inside each group both rotated)."""
    if group is None:
        k = r % len(names)
        return names[k:] + names[:k]
    groups = {}
    for name in names:
        groups.setdefault(group(name), []).append(name)
    keys = list(groups)
    k = r % len(keys)
    order = []
    for key in keys[k:] + keys[:k]:
        g = groups[key]
        j = r % len(g)
        order += g[j:] + g[:j]
    return order


#: Rounds every candidate gets before a deadline or the early stop may end its timing.
MIN_ROUNDS = 3


def cannot_win(challenger, best, margin=DEFAULT_MARGIN, resamples=1000):
    """The early-stop rule on two lists of paired samples (seconds per call, round by round): the
    whole 95 % interval of the median ratio challenger/best lies above 1 + margin, so more rounds
    would not make the challenger the faster one."""
    ratios = [a / b for a, b in zip(challenger, best) if b > 0]
    lo, _ = bootstrap_median_ci(ratios, resamples=resamples)
    return bool(ratios) and lo > 1.0 + margin


def measure_interleaved(candidates, rounds=15, warmup=2, min_sample_s=0.002, prepare=None, group=None,
                        deadline=None, keep=(), stopped=None, settle=None):
    """Times ``candidates`` ({name: zero-argument callable}) interleaved.

    Returns {name: Timing}. ``prepare(name)`` runs before each sample outside the timed region
    (it sets the thread count a candidate runs with). ``group(name)``, when given, keeps the
    candidates of one group (e.g. one thread count) back to back within each round, so that what
    ``prepare`` changes changes only once per group and round.

    A cost bound: with ``deadline`` (a time.monotonic() value) no new round starts after it once
    every candidate has MIN_ROUNDS samples (past it, warm-up ends after its first round), and from
    then on a candidate that cannot win (:func:`cannot_win` against the fastest median so far) is
    no longer timed, except those named in ``keep`` (the baseline). ``stopped``, a dict, receives {name: rounds timed} of the
    candidates stopped early.

    ``settle(name)``, when given, is how long (seconds) the threads of ``name`` keep a core busy
    after its last call: before the next sample of another candidate the run sleeps that long.
    A runtime whose idle threads spin (ONNX Runtime's default spins a worker for about 45 ms after
    a call; torch's OpenMP pool for a few ms) would otherwise take a core from whichever candidate
    comes next — in a fixed rotation, always the same one — and make it look slower than it is."""
    import torch

    names = list(candidates)
    inner = {}
    active = list(names)
    with torch.no_grad():
        for name in names:
            if prepare:
                prepare(name)
            candidates[name]()  # first call: lazy initialisation, never timed
            inner[name] = _calibrate(candidates[name], min_sample_s)
        samples = {name: [] for name in names}
        r = 0
        last = None
        while r < warmup + rounds:
            if deadline is not None and 0 < r < warmup and time.monotonic() > deadline:
                warmup = r  # past the deadline: one warm-up round, then the samples
            timed = r - warmup
            if deadline is not None and timed >= MIN_ROUNDS:
                if time.monotonic() > deadline:
                    break
                active = _still_in_race(active, samples, keep, stopped)
            for name in _round_order(active, r, group):
                if settle is not None and last is not None and last != name:
                    pause = settle(last)
                    if pause > 0:
                        time.sleep(pause)
                last = name
                if prepare:
                    prepare(name)
                fn, k = candidates[name], inner[name]
                start = time.perf_counter()
                for _ in range(k):
                    fn()
                elapsed = (time.perf_counter() - start) / k
                if r >= warmup:
                    samples[name].append(elapsed)
            r += 1
    # Rotation shifted which round each candidate's sample came from; pairing is by round index.
    return {name: Timing(name, samples[name]) for name in names}


def _still_in_race(active, samples, keep, stopped):
    """The candidates of ``active`` worth another round (see measure_interleaved)."""
    best = min(active, key=lambda name: _median(samples[name]))
    out = []
    for name in active:
        # 200 resamples: decided every round, where 1000 would cost more than a sample.
        if name in keep or name == best or not cannot_win(samples[name], samples[best], resamples=200):
            out.append(name)
        elif stopped is not None:
            stopped[name] = len(samples[name])
    return out


def thread_switcher(candidates, threads_of, blas_of=None):
    """A ``prepare`` for measure_interleaved that runs each candidate at its intra-op thread count
    (``threads_of(name)``) and, with ``blas_of``, at its BLAS thread count (``blas_of(name)``;
    None: left as it is) where the BLAS library has a pool of its own (portkit.tune.blas). When a
    count changes, the candidate runs once untimed first: the first call after
    torch.set_num_threads is slower than the following ones (the new count's worker threads wake
    up, oneDNN primitives for that count), which a model that keeps one count never pays."""
    import torch

    from . import blas

    def prepare(name):
        t = threads_of(name)
        b = blas_of(name) if blas_of is not None else None
        changed = False
        if torch.get_num_threads() != t:
            torch.set_num_threads(t)
            changed = True
        if b is not None and blas.get_threads() not in (None, b):
            blas.set_threads(b)
            changed = True
        if changed:
            candidates[name]()
    return prepare
