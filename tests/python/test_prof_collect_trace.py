"""portkit prof collect under the torch that runs the tests: torch 2.x records a Kineto trace (CPU
activities; `*.pt.trace.json`), torch builds without Kineto (Debian's 1.13) the legacy profiler's
JSON. Either way `portkit prof import` stores every complete event of it, exactly."""
import csv
import glob
import json
import os
import sqlite3
import subprocess
from decimal import Decimal

from conftest import run

SCRIPT = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 16)
for _ in range(4):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
"""


def interpreter_facts(python):
    out = subprocess.run([python, "-c", "import torch, json; print(json.dumps([torch.__version__, "
                          "torch.autograd.kineto_available()]))"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_collect_writes_the_trace_of_this_torch_and_import_reads_all_of_it(tmp_path, portkit, python):
    version, kineto = interpreter_facts(python)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    res = run([portkit, "prof", "collect", "--output", str(tmp_path / "out"), "--steps", "2", "--record-shapes",
               "--", python, str(script)])
    assert res.returncode == 0, res.stderr
    (prof_dir,) = glob.glob(str(tmp_path / "out" / "PROF_*"))
    traces = sorted(os.listdir(prof_dir))
    assert len(traces) == 1, traces
    name = traces[0]
    if version.startswith("2."):
        assert kineto, "torch %s from PyPI should have Kineto" % version
    assert name.endswith(".pt.trace.json") == kineto, (version, name)
    with open(os.path.join(prof_dir, name), encoding="utf-8") as f:
        data = json.load(f, parse_float=Decimal)
    events = data["traceEvents"] if isinstance(data, dict) else data
    complete = [e for e in events if e.get("ph") == "X" and "ts" in e]
    assert complete
    if kineto:
        # A Kineto trace: its CPU operators are categorised as such, with shapes when recorded.
        cpu_ops = [e for e in complete if e.get("cat") == "cpu_op"]
        assert any(e["name"] == "aten::addmm" for e in cpu_ops)
        assert any("Input Dims" in e.get("args", {}) for e in cpu_ops)
    steps = sorted(e["name"] for e in complete if e["name"].startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#1", "ProfilerStep#2"], steps  # the window of 2 steps after warm-up

    res = run([portkit, "prof", "import", "-dir", prof_dir])
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(os.path.join(prof_dir, "portkit.db"))
    try:
        (trace,) = db.execute("SELECT id FROM traces WHERE path = ?", (name,)).fetchone()
        rows = db.execute("SELECT s.value, e.ts, e.dur FROM events e JOIN strings s ON s.id = e.name "
                          "WHERE e.trace = ?", (trace,)).fetchall()
    finally:
        db.close()
    assert len(rows) == len(complete)
    ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731  (exact integer nanoseconds)
    assert sorted((r[0], r[1], r[2]) for r in rows) == sorted(
        (e["name"], ns(e["ts"]), ns(e.get("dur", 0))) for e in complete)
    res = run([portkit, "prof", "export", "summary", "-dir", prof_dir])
    assert res.returncode == 0, res.stderr
    with open(os.path.join(prof_dir, "summary", "step_trace.csv"), newline="") as f:
        assert [s["Iteration ID"] for s in csv.DictReader(f)] == ["1", "2"]
