"""A cost-model description (``cost_model.ModelDescription``) measured from a real model on this
machine, for ``portkit tune --job-type=4 --simulate``: time one training step of the model in
this process (no DDP) and record when each layer's gradients become ready.

- Layers are the modules that own parameters, in the order of ``model.parameters()`` (the order
  DDP buckets in). A hook on every parameter stamps the time its gradient is computed; a layer is
  ready when its last parameter is; ``backward_ms`` of a layer is its ready time minus the ready
  time of the layer after it (the one whose backward ran before it). Medians over ``repeats``
  steps, after 2 untimed ones.
- ``forward_ms`` (forward and loss), ``optimizer_ms`` (an SGD step) are medians too.
- Machine figures: ``copy_ms_per_mb`` (a 16 MiB copy), ``fp16_cast_ms_per_mb`` (16 MiB of fp32 to
  fp16), ``powersgd_gflops`` (a 1024 x 1024 by 1024 x 4 product, PowerSGD's shape).
- ``comm`` is given (``alpha_ms``, ``beta_ms_per_mb`` of the cluster to simulate) or measured:
  ``measure_allreduce`` fits alpha + beta * MiB to gloo all-reduces between local ranks.

Everything here is measured on whatever runs it: on a shared machine the figures carry its noise
(docs/tune.md, GDAT).
"""
import time


def _median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def _time_ms(fn, repeats=7):
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return _median(samples)


def layers_of(module):
    """[(layer name, [parameters])] in model.parameters() order, grouped by owning module."""
    out, index = [], {}
    for name, p in module.named_parameters():
        if not p.requires_grad:
            continue
        owner = name.rsplit(".", 1)[0] if "." in name else "(root)"
        if owner not in index:
            index[owner] = len(out)
            out.append((owner, []))
        out[index[owner]][1].append(p)
    return out


def describe_model(module, inputs, loss_fn, name="model", repeats=5, comm=None):
    """The description dict. ``inputs`` is a list of tensors, ``loss_fn(output) -> loss``;
    ``comm`` a dict with alpha_ms and beta_ms_per_mb (default: zero cost, to be filled in)."""
    import torch

    layers = layers_of(module)
    if not layers:
        raise ValueError("the model has no parameter that requires a gradient")
    stamps = {}
    handles = []
    for li, (_, params) in enumerate(layers):
        for p in params:
            handles.append(p.register_hook(lambda g, li=li: stamps.__setitem__(li, time.perf_counter())))
    opt = torch.optim.SGD(module.parameters(), lr=1e-6)
    forward, optimizer, ready = [], [], [[] for _ in layers]
    try:
        for step in range(2 + repeats):
            opt.zero_grad(set_to_none=True)
            stamps.clear()
            t0 = time.perf_counter()
            loss = loss_fn(module(*inputs))
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
            if step < 2:
                continue
            forward.append((t1 - t0) * 1e3)
            optimizer.append((t3 - t2) * 1e3)
            for li in range(len(layers)):
                ready[li].append((stamps.get(li, t2) - t1) * 1e3)
    finally:
        for h in handles:
            h.remove()
    ready_ms = [_median(r) for r in ready]
    out_of_order = 0
    described = []
    for li, (lname, params) in enumerate(layers):
        after = ready_ms[li + 1] if li + 1 < len(layers) else 0.0
        ms = ready_ms[li] - after
        if ms < 0:
            out_of_order += 1
            ms = 0.0
        described.append({"name": lname, "backward_ms": round(ms, 4),
                          "params": [[int(d) for d in p.shape] or [1] for p in params]})

    big = torch.ones(4 * 1024 * 1024)  # 16 MiB of fp32
    dst = torch.empty_like(big)
    m, q = torch.randn(1024, 1024), torch.randn(1024, 4)
    mm_ms = _time_ms(lambda: torch.mm(m, q))
    doc = {"name": name, "forward_ms": round(_median(forward), 4), "optimizer_ms": round(_median(optimizer), 4),
           "layers": described,
           "comm": dict(comm or {"alpha_ms": 0.0, "beta_ms_per_mb": 0.0}),
           "copy_ms_per_mb": round(_time_ms(lambda: dst.copy_(big)) / 16.0, 5),
           "fp16_cast_ms_per_mb": round(_time_ms(lambda: big.half()) / 16.0, 5),
           "powersgd_gflops": round(2.0 * 1024 * 1024 * 4 / (max(mm_ms, 1e-6) * 1e6), 3),
           "note": "measured by portkit.gdat.describe: %d layers, %d steps%s" % (
               len(layers), repeats, ", %d layers out of parameter order (backward_ms 0)" % out_of_order
               if out_of_order else "")}
    return doc


def measure_allreduce(world, sizes_mb=(1 / 64, 1 / 4, 1, 4, 16), calls=9):
    """In every rank of an initialised group: median all-reduce time per size (slowest rank) and
    the least-squares alpha (ms) and beta (ms per MiB)."""
    import torch
    import torch.distributed as dist

    comm = []
    for mb in sizes_mb:
        t = torch.ones(max(1, int(mb * 1024 * 1024 / 4)))
        samples = []
        for _ in range(calls + 2):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            samples.append((time.perf_counter() - t0) * 1e3)
        v = torch.tensor(samples[2:], dtype=torch.float64)
        dist.all_reduce(v, op=dist.ReduceOp.MAX)
        comm.append(_median(v.tolist()))
    n = len(sizes_mb)
    mx, my = sum(sizes_mb) / n, sum(comm) / n
    beta = sum((x - mx) * (y - my) for x, y in zip(sizes_mb, comm)) / sum((x - mx) ** 2 for x in sizes_mb)
    alpha = my - beta * mx
    # A fit on noisy figures can go negative; the cost model needs costs >= 0.
    return {"alpha_ms": round(max(alpha, 0.0), 4), "beta_ms_per_mb": round(max(beta, 0.0), 4),
            "measured_ms": {"%g" % mb: round(ms, 4) for mb, ms in zip(sizes_mb, comm)}}
