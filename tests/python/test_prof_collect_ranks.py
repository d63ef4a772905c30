"""portkit prof collect on multi-process jobs: `-- torchrun --nproc_per_node=2 train.py` and a
script that starts its workers with torch.multiprocessing.spawn each give one trace per rank, with
the rank in its name, the workers' own steps marked, and no tail "step" after the last optimizer
step. Skipped when this sandbox cannot start a gloo process group."""
import glob
import json
import os
import subprocess
import sys

import pytest

from conftest import run

TRAIN = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
dist.destroy_process_group()
"""

SPAWN = """
import os, torch, torch.distributed as dist, torch.multiprocessing as mp

def work(rank, world):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    dist.destroy_process_group()

if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ.get("TEST_PORT", "29531")
    mp.spawn(work, args=(2,), nprocs=2)
"""


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gloo_works(python):
    code = ("import os, torch.distributed as dist; os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='%d');"
            "dist.init_process_group('gloo', rank=0, world_size=1); dist.destroy_process_group()" % free_port())
    return subprocess.run([python, "-c", code], capture_output=True, timeout=60).returncode == 0


def events_of(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def check_rank_traces(prof_dir):
    traces = sorted(os.listdir(prof_dir))
    assert len(traces) == 2, traces
    assert [t.split("_")[1] for t in traces] == ["rank0", "rank1"], traces
    for t in traces:
        steps = sorted({e["name"] for e in events_of(os.path.join(prof_dir, t))
                        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"})
        # Steps 0 (warm-up, before the first optimizer step), 1 and 2; the range after the third
        # optimizer step is a tail, not a step.
        assert steps == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"], (t, steps)
    return traces


def test_torchrun_writes_one_trace_per_rank(tmp_path, portkit, python):
    if not gloo_works(python):
        pytest.skip("gloo process group cannot start here")
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    # torchrun is `python -m torch.distributed.run` (its console script may name another
    # interpreter in a moved virtual environment); collect rewrites both spellings the same way.
    launcher = [python, "-m", "torch.distributed.run"]
    plain = subprocess.run(launcher + ["--nproc_per_node=2", "--master_port", str(free_port()), str(script)],
                           capture_output=True, text=True, timeout=300)
    if plain.returncode != 0:
        pytest.skip("torchrun itself fails with this torch and Python: " + plain.stderr.strip().splitlines()[-1])
    res = run([portkit, "prof", "collect", "--output", str(tmp_path / "out"), "--"] + launcher +
              ["--nproc_per_node=2", "--master_port", str(free_port()), str(script)])
    assert res.returncode == 0, res.stderr
    (prof_dir,) = glob.glob(str(tmp_path / "out" / "PROF_*"))
    check_rank_traces(prof_dir)
    imported = run([portkit, "prof", "import", "-dir", prof_dir])
    assert imported.returncode == 0, imported.stderr


def test_mp_spawn_workers_are_profiled_not_only_the_parent(tmp_path, portkit, python):
    if not gloo_works(python):
        pytest.skip("gloo process group cannot start here")
    script = tmp_path / "spawn_train.py"
    script.write_text(SPAWN)
    env = dict(os.environ, TEST_PORT=str(free_port()))
    res = run([portkit, "prof", "collect", "--output", str(tmp_path / "out"), "--", python, str(script)],
              env=env)
    assert res.returncode == 0, res.stderr
    assert "parent process not written" in res.stderr
    (prof_dir,) = glob.glob(str(tmp_path / "out" / "PROF_*"))
    check_rank_traces(prof_dir)
