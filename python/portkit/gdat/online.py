"""Online GDAT for real DDP training: ``tune_ddp`` runs inside every rank of an initialised
process group (gloo here; nccl / hccl where present).

For each point the search proposes, rank 0 broadcasts it, every rank rebuilds DDP around the
same module with those settings (DDP cannot change its buckets in place), runs ``warmup``
steps that are not timed (a new DDP runs with one bucket until it has rebuilt its buckets in
gradient order, after its first step, after its second with static_graph; at least 2 are run
for static_graph), then ``measure`` timed steps. A step's time is the slowest rank's; a point's time is
the median of its steps. Rank 0 feeds the times to the search, writes the result file after
every trial, decides, and broadcasts the decision; all ranks then continue with the chosen DDP.
Every step is a real training step: the tuning steps are the first steps of the training run.

Before the first point, max(3, 2 * warmup) untimed steps warm the process up (its first steps
are slow: allocator, thread pools, first connections), so the baseline, measured first, does not
pay for them. The search sees each point once, at its own moment of a shared machine, so its
winner is confirmed: baseline and winner are measured again, alternately, ``confirm_rounds``
times (default 3), and the decision uses those samples only. The winner replaces DDP's defaults
only when it is faster in every round (its median of the round below the baseline's) and its
pooled median beats the baseline's by more than ``min_gain`` (default 2 %) and by more than twice
the standard error of the difference of the medians (1.253 * sqrt(s_a^2/n_a + s_b^2/n_b), s =
1.4826 * MAD). Otherwise the defaults are kept and the result says "no significant improvement".
"""
import os
import time

from .results import SETTINGS_FILE, ResultWriter, settings_document, write_json_atomic
from .search import Space, coordinate_search
from .settings import DDPSettings, ddp_bucket_report, make_ddp


def _median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def median_standard_error(a, b):
    """Standard error of the difference of two medians, from robust spreads:
    1.253 * sqrt(s_a^2 / n_a + s_b^2 / n_b) with s = 1.4826 * MAD."""
    def part(v):
        m = _median(v)
        s = 1.4826 * _median([abs(x - m) for x in v])
        return s * s / len(v)

    return 1.253 * (part(a) + part(b)) ** 0.5


def relative_spread(samples):
    """1.4826 * median absolute deviation / median: a robust relative noise figure."""
    m = _median(samples)
    if m <= 0:
        return 0.0
    return 1.4826 * _median([abs(x - m) for x in samples]) / m


class _Trainer(object):
    def __init__(self, module, make_batch, loss_fn, optimizer, process_group, ddp_kwargs, powersgd_start_iter):
        self.module, self.make_batch, self.loss_fn, self.optimizer = module, make_batch, loss_fn, optimizer
        self.group, self.ddp_kwargs, self.powersgd_start_iter = process_group, ddp_kwargs, powersgd_start_iter
        self.step_index = 0
        self.ddp = None
        self.ddp_settings = None

    def build(self, settings):
        self.ddp = None  # the old reducer goes before the new one is made
        for p in self.module.parameters():
            p.grad = None
        self.ddp = make_ddp(self.module, settings, process_group=self.group,
                            powersgd_start_iter=self.powersgd_start_iter, **self.ddp_kwargs)
        self.ddp_settings = settings

    def step(self):
        batch = self.make_batch(self.step_index)
        t0 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.ddp, batch)
        loss.backward()
        self.optimizer.step()
        elapsed = time.perf_counter() - t0
        self.step_index += 1
        return elapsed * 1e3

    def warm_process(self, settings, warmup):
        self.build(settings)
        for _ in range(process_warmup_steps(warmup)):
            self.step()

    def trial(self, settings, warmup, measure):
        import torch
        import torch.distributed as dist

        self.build(settings)
        # A new DDP reduces everything in one bucket until it rebuilds its buckets in gradient
        # order: after its first step, after its second with static_graph.
        for _ in range(max(warmup, 2) if settings.static_graph else warmup):
            self.step()
        times = torch.tensor([self.step() for _ in range(measure)], dtype=torch.float64)
        dist.all_reduce(times, op=dist.ReduceOp.MAX, group=self.group)
        return [float(x) for x in times.tolist()]


def process_warmup_steps(warmup):
    """Untimed steps before the first point."""
    return max(3, 2 * warmup)


def _broadcast(obj, group):
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=0, group=group)
    return box[0]


def _lead(space, trainer, warmup, measure, max_trials, confirm_rounds, min_gain, output_dir, tuning_name, notes,
          world, process_group, powersgd_start_iter, say):
    """Rank 0's part of tune_ddp: search, confirm, decide, write; returns (settings, report)."""
    import torch.distributed as dist

    writer = None
    if output_dir:
        os.makedirs(output_dir, exist_ok=True)
        writer = ResultWriter(output_dir, tuning_name, "online",
                              {"world_size": world, "backend": str(dist.get_backend(process_group)),
                               "warmup_steps": warmup, "measured_steps": measure, "space": space.describe(),
                               "notes": notes})
    samples_of = {}

    def evaluate(settings):
        _broadcast(("trial", settings.to_dict()), process_group)
        samples = trainer.trial(settings, warmup, measure)
        samples_of[settings] = samples
        ms = _median(samples)
        buckets = ddp_bucket_report(trainer.ddp)["bucket_sizes"]
        say("gdat trial %d: %s  %.3f ms (steps %s)  %d buckets" % (
            len(samples_of) - 1, settings.label(), ms, " ".join("%.2f" % s for s in samples), len(buckets)))
        if writer:
            writer.add_trial(settings, ms, {"samples(ms)": [round(s, 4) for s in samples],
                                            "buckets": len(buckets), "bucket_bytes": buckets,
                                            "spread": round(relative_spread(samples), 4)})
        return ms

    # The process's first steps are slow (allocator, thread pools, gloo's first connections): run
    # some untimed steps before the first point so that the baseline, measured first, does not pay
    # for them.
    _broadcast(("warmup", space.baseline.to_dict()), process_group)
    trainer.warm_process(space.baseline, warmup)
    result = coordinate_search(space, evaluate, max_evals=max_trials)
    baseline = space.baseline
    confirmation = None
    if result.best != baseline and confirm_rounds > 0:
        # The search saw each point once, at its own moment of a shared machine. Baseline and
        # winner are measured again, alternately, and the decision is made on those samples only.
        pools = {baseline: [], result.best: []}
        round_wins = 0
        for _ in range(confirm_rounds):
            this_round = {}
            for p in (baseline, result.best):
                _broadcast(("trial", p.to_dict()), process_group)
                this_round[p] = trainer.trial(p, warmup, measure)
                pools[p].extend(this_round[p])
            round_wins += _median(this_round[result.best]) < _median(this_round[baseline])
        confirmation = {"rounds": confirm_rounds, "rounds_won": round_wins,
                        "baseline_samples(ms)": [round(x, 4) for x in pools[baseline]],
                        "best_samples(ms)": [round(x, 4) for x in pools[result.best]]}
        baseline_ms, best_ms = _median(pools[baseline]), _median(pools[result.best])
        noise = max(min_gain, 2.0 * median_standard_error(pools[baseline], pools[result.best]) / baseline_ms)
        significant = round_wins == confirm_rounds and best_ms < baseline_ms * (1.0 - noise)
        say("gdat confirm: baseline %.3f ms, %s %.3f ms (%d interleaved rounds, %d won)" % (
            baseline_ms, result.best.label(), best_ms, confirm_rounds, round_wins))
    else:
        baseline_ms = best_ms = _median(samples_of[baseline])
        noise = max(min_gain, 2.0 * median_standard_error(samples_of[baseline], samples_of[baseline]) / baseline_ms)
        significant = False
    if significant:
        final, final_ms, verdict = result.best, best_ms, "tuning successful"
    else:
        final, final_ms = baseline, baseline_ms
        verdict = ("no significant improvement: DDP's defaults are the best point found" if result.best == baseline
                   else "no significant improvement (best %s at %.3f ms vs baseline %.3f ms, threshold %.1f%%)" % (
                       result.best.label(), best_ms, baseline_ms, 100 * noise))
    report = {"verdict": verdict, "settings": final.to_dict(), "baseline_ms": baseline_ms, "result_ms": final_ms,
              "search_best": result.best.to_dict(), "search_best_ms": result.best_ms, "threshold": noise,
              "trials": len(result.trials), "search_complete": result.complete,
              "tuning_steps": trainer.step_index, "notes": notes, "confirmation": confirmation}
    if writer:
        writer.info.update({"threshold": round(noise, 4), "search_complete": result.complete,
                            "tuning_steps": trainer.step_index, "notes": notes, "confirmation": confirmation,
                            "search_best_settings": result.best.to_dict(), "search_best(ms)": round(result.best_ms, 6)})
        writer.write("finished", baseline_ms, final, final_ms, verdict)
        write_json_atomic(os.path.join(output_dir, SETTINGS_FILE),
                          settings_document(final, baseline_ms, final_ms, "online", verdict,
                                            powersgd_start_iter if final.comm_hook == "powersgd" else None))
        report["result_file"] = writer.path
    return final, report


def tune_ddp(module, make_batch, loss_fn, optimizer_factory, space=None, warmup=2, measure=5, max_trials=None,
             steps=None, output_dir=None, process_group=None, min_gain=0.02, confirm_rounds=3, powersgd_start_iter=2,
             tuning_name="gdat", log=None, **ddp_kwargs):
    """Tunes DDP's communication settings over the first steps of training and returns
    ``(ddp, optimizer, report)``: DDP built with the chosen settings (continue training with it),
    the optimizer (made once by ``optimizer_factory(module.parameters())`` and kept across trials),
    and a dict with the decision, baseline and best times and every trial.

    Call it in every rank after ``init_process_group``. ``make_batch(step) -> batch`` gives the
    batch of a global step; ``loss_fn(ddp_model, batch) -> loss``. ``space`` is a ``Space``
    (default: the non-lossy grid). ``max_trials`` bounds the points measured (each costs
    ``warmup + measure`` steps); ``steps`` bounds all the tuning steps instead (the first
    warm-up of max(3, 2 * warmup) steps and the ``confirm_rounds`` rounds of baseline and winner
    are set aside, the rest is divided into trials; the smaller bound wins). Rank 0 writes the
    result file and ``gdat_settings.json`` into ``output_dir`` when given. If rank 0 fails (an
    output it cannot write), it tells the other ranks, which raise too instead of waiting.
    Extra keyword arguments go to DDP (device_ids, ...)."""
    import torch.distributed as dist

    if warmup < 1 or measure < 1:
        raise ValueError("tune_ddp needs warmup >= 1 (a new DDP rebuilds its buckets in its first step) and measure >= 1")
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("tune_ddp: torch.distributed is not initialised (call init_process_group first)")
    space = space or Space()
    if steps is not None:
        per_trial = (max(warmup, 2) if True in space.static_graphs else warmup) + measure
        reserved = process_warmup_steps(warmup) + 2 * confirm_rounds * per_trial
        by_steps = (int(steps) - reserved) // per_trial
        if by_steps < 1:
            raise ValueError("tune_ddp: steps=%d leaves no trial: %d go to the first warm-up and the confirmation, "
                             "%d to each trial" % (steps, reserved, per_trial))
        max_trials = by_steps if max_trials is None else min(max_trials, by_steps)
    notes = []
    if any(h[0] == "powersgd" for h in space.hooks) and dist.get_backend(process_group) == "gloo":
        # PowerSGD's hook with several buckets makes gloo abort (make_ddp refuses it); with one
        # bucket it would not overlap anything, so it is not tried at all on gloo.
        space = space.without_hook("powersgd")
        notes.append("PowerSGD not tried: on gloo its hook needs a single bucket (see make_ddp)")
    rank = dist.get_rank(process_group)
    world = dist.get_world_size(process_group)
    optimizer = optimizer_factory(module.parameters())
    trainer = _Trainer(module, make_batch, loss_fn, optimizer, process_group, ddp_kwargs, powersgd_start_iter)
    say = log or (lambda msg: None)

    if rank != 0:
        while True:
            command = _broadcast(None, process_group)
            if command[0] == "trial":
                trainer.trial(DDPSettings.from_dict(command[1]), warmup, measure)
                continue
            if command[0] == "warmup":
                trainer.warm_process(DDPSettings.from_dict(command[1]), warmup)
                continue
            if command[0] == "abort":
                raise RuntimeError("tune_ddp: rank 0 failed: %s" % command[1])
            final, report = DDPSettings.from_dict(command[1]), command[2]
            if trainer.ddp_settings != final:
                trainer.build(final)
            return trainer.ddp, optimizer, report

    try:
        final, report = _lead(space, trainer, warmup, measure, max_trials, confirm_rounds, min_gain, output_dir,
                              tuning_name, notes, world, process_group, powersgd_start_iter, say)
    except Exception as e:
        _broadcast(("abort", "%s: %s" % (type(e).__name__, e)), process_group)
        raise
    say("gdat: %s -> %s" % (report["verdict"], final.label()))
    _broadcast(("done", final.to_dict(), report), process_group)
    if trainer.ddp_settings != final:
        trainer.build(final)
    return trainer.ddp, optimizer, report
