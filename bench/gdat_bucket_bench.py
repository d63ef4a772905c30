"""GDAT on this machine: does the bucket size change a real 2-process gloo DDP step by more than
the noise? Also measures gloo's all-reduce cost (alpha + beta * MiB) on loopback.

    PYTHONPATH=python python3 bench/gdat_bucket_bench.py [--rounds 5] [--layers 8] [--width 1024]

Two ranks (forked, one thread each) train an MLP of LAYERS Linear(WIDTH, WIDTH) layers. Every
round measures every point once, in a shuffled order (interleaved, so slow phases of the shared
machine hit all points alike): rebuild DDP with the point's settings, 2 untimed steps, 7 timed
steps, median (slowest rank per step). The table gives, per point, the median of its round
medians and their min-max; the last lines say how often the per-round ranking of the points
changed and compare the spread between points with the spread within a point."""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", default=None, help="write the rank-0 figures here as JSON")
    args = ap.parse_args()

    import torch

    from portkit.gdat import DDPSettings, ddp_bucket_report, make_ddp
    from portkit.gdat.launch import run_ranks

    points = [DDPSettings(bucket_cap_mb=c) for c in (1.0, 5.0, 25.0, 100.0)]
    points.append(DDPSettings(bucket_cap_mb=25.0, gradient_as_bucket_view=True))

    def rank_fn(rank, world):
        import torch.distributed as dist

        # gloo all-reduce cost on loopback: median of 9 calls per size, slowest rank.
        sizes_mb = [1 / 64, 1 / 4, 1, 4, 16]
        comm = []
        for mb in sizes_mb:
            t = torch.ones(int(mb * 1024 * 1024 / 4))
            samples = []
            for _ in range(11):
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                samples.append((time.perf_counter() - t0) * 1e3)
            v = torch.tensor(samples[2:], dtype=torch.float64)
            dist.all_reduce(v, op=dist.ReduceOp.MAX)
            comm.append(median(v.tolist()))
        # Least-squares line through (MiB, ms).
        n = len(sizes_mb)
        mx, my = sum(sizes_mb) / n, sum(comm) / n
        beta = sum((x - mx) * (y - my) for x, y in zip(sizes_mb, comm)) / sum((x - mx) ** 2 for x in sizes_mb)
        alpha = my - beta * mx

        torch.manual_seed(0)
        layers = []
        for _ in range(args.layers):
            layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
        module = torch.nn.Sequential(*layers)
        opt = torch.optim.SGD(module.parameters(), lr=1e-4)
        rng = random.Random(1)
        per_point = {p: [] for p in points}
        rankings = []
        buckets = {}
        for r in range(args.rounds):
            order = list(points)
            rng.shuffle(order)
            this_round = {}
            for p in order:
                for q in module.parameters():
                    q.grad = None
                ddp = make_ddp(module, p)
                times = []
                for step in range(9):
                    x = torch.randn(args.batch, args.width)
                    t0 = time.perf_counter()
                    opt.zero_grad(set_to_none=True)
                    ddp(x).pow(2).mean().backward()
                    opt.step()
                    if step >= 2:
                        times.append((time.perf_counter() - t0) * 1e3)
                v = torch.tensor(times, dtype=torch.float64)
                dist.all_reduce(v, op=dist.ReduceOp.MAX)
                this_round[p] = median(v.tolist())
                per_point[p].append(this_round[p])
                buckets[p] = len(ddp_bucket_report(ddp)["bucket_sizes"])
                del ddp
            rankings.append(tuple(sorted(points, key=lambda q: this_round[q])))
        if rank != 0:
            return
        grad_mb = sum(q.numel() * 4 for q in module.parameters()) / 2 ** 20
        print("gloo all-reduce on loopback, 2 ranks: " + ", ".join(
            "%.3g MiB %.3f ms" % (mb, ms) for mb, ms in zip(sizes_mb, comm)))
        print("  fit: alpha %.3f ms, beta %.3f ms/MiB" % (alpha, beta))
        print("MLP %d x Linear(%d, %d), %.1f MiB of gradients, batch %d, %d rounds, 7 timed steps per point per round"
              % (args.layers, args.width, args.width, grad_mb, args.batch, args.rounds))
        print("| point | buckets | median of rounds ms | min | max | (max-min)/median |")
        print("|---|---|---|---|---|---|")
        meds = {}
        for p in points:
            v = per_point[p]
            meds[p] = median(v)
            print("| %s | %d | %.2f | %.2f | %.2f | %.0f%% |" % (p.label().replace(" hook=none", ""), buckets[p], meds[p],
                                                            min(v), max(v), 100 * (max(v) - min(v)) / meds[p]))
        best, worst = min(meds.values()), max(meds.values())
        within = median([(max(per_point[p]) - min(per_point[p])) / meds[p] for p in points])
        distinct = len(set(rankings))
        winners = sorted(set(r[0].label() for r in rankings))
        print("between points: (worst - best) / best = %.0f%%; within a point (median of (max-min)/median): %.0f%%"
              % (100 * (worst - best) / best, 100 * within))
        print("per-round ranking: %d distinct orders in %d rounds; round winners: %s" % (distinct, args.rounds,
                                                                                   "; ".join(winners)))
        if args.out:
            import json

            with open(args.out, "w") as f:
                json.dump({"alpha_ms": alpha, "beta_ms_per_mb": beta, "comm_ms": comm,
                           "points": {p.label(): per_point[p] for p in points}}, f, indent=1)

    run_ranks(rank_fn, 2, timeout_s=1200)


if __name__ == "__main__":
    main()
