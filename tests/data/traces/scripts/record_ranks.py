"""Records one trace per rank of a small data-parallel CNN (gloo, CPU). Usage:
python record_ranks.py OUT_DIR WORLD [--no-rank-in-name]"""
import os, sys, json
import torch, torch.nn as nn, torch.distributed as dist, torch.multiprocessing as mp

def worker(rank, world, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = os.environ.get("PORT", "29533")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0); torch.set_num_threads(1)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(4, 3, 16, 16); y = torch.randint(0, 10, (4,))
    kineto = torch.autograd.kineto_available()
    steps = 4
    if kineto:
        from torch.profiler import profile, ProfilerActivity, schedule
        path = os.path.join(out, "rank%d.pt.trace.json" % rank)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                     schedule=schedule(wait=0, warmup=1, active=steps),
                     on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
            for _ in range(steps + 1):
                opt.zero_grad(); nn.functional.cross_entropy(ddp(x), y).backward(); opt.step(); prof.step()
    else:
        with torch.autograd.profiler.profile() as prof:
            for i in range(steps):
                with torch.autograd.profiler.record_function("ProfilerStep#%d" % (i + 1)):
                    opt.zero_grad(); nn.functional.cross_entropy(ddp(x), y).backward(); opt.step()
        path = os.path.join(out, "trace_rank%d.json" % rank)
        prof.export_chrome_trace(path)
    dist.destroy_process_group()

if __name__ == "__main__":
    out, world = sys.argv[1], int(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    mp.spawn(worker, args=(world, out), nprocs=world)
