"""portkit.prof (load, records) and `portkit prof query` against `portkit prof export summary` of the
same imported Kineto trace (HTA's sampled rank 0: two steps, input shapes, NCCL kernels)."""
import csv
import os
import shutil
import sys

import pytest

from conftest import HERE, run

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from portkit import prof  # noqa: E402

TRACE = os.path.join(HERE, "..", "data", "traces", "kineto", "timeline_analysis__sampled_rank-0.json.gz")


def micros(ns):
    return "%d.%03d" % divmod(ns, 1000)


@pytest.fixture(scope="module")
def imported(tmp_path_factory, portkit):
    folder = tmp_path_factory.mktemp("query")
    shutil.copy(TRACE, folder / "rank0.json.gz")
    res = run([portkit, "prof", "import", "-dir", str(folder)])
    assert res.returncode == 0, res.stderr
    res = run([portkit, "prof", "export", "summary", "-dir", str(folder)])
    assert res.returncode == 0, res.stderr
    summary = {}
    for name in ("host_op_summary", "kernel_statistic", "step_trace"):
        with open(folder / "summary" / (name + ".csv"), newline="") as f:
            summary[name] = list(csv.DictReader(f))
    return str(folder), summary


@pytest.fixture(autouse=True)
def binary(monkeypatch, portkit):
    monkeypatch.setenv("PORTKIT_BIN", portkit)


def test_records_agree_with_export_summary(imported):
    folder, summary = imported
    ops = prof.records(folder, "ops")
    host = summary["host_op_summary"]
    assert len(ops) == len(host) > 100
    for op, row in zip(ops[:20], host[:20]):
        assert (op["name"], op["input_dims"], str(op["count"])) == (row["Name"], row["Input Shapes"], row["Count"])
        assert micros(op["self_ns"]) == row["Self Time(us)"]
        assert micros(op["total_ns"]) == row["Total Time(us)"]

    steps = prof.records(folder, "steps")
    assert [(s["number"], s["warmup"]) for s in steps] == [(551, False), (552, False)]
    for s, row in zip(steps, summary["step_trace"]):
        assert micros(s["start_ns"]) == row["Iteration Start(us)"]
        assert micros(s["dur_ns"]) == row["Iteration Time(us)"]
        assert s["trace"] == "rank0.json.gz"


def test_events_filters_and_comm(imported):
    folder, summary = imported
    kernels = {r["Kernel Name"]: int(r["Count"]) for r in summary["kernel_statistic"]}
    nccl = prof.records(folder, "events", kinds=["kernel"], name_regex="^ncclKernel")
    assert len(nccl) == sum(n for k, n in kernels.items() if k.startswith("ncclKernel")) == 10
    assert all(e["kind"] == "kernel" and e["pid"] == 0 for e in nccl)
    # The store's order: device, stream, start.
    assert [(e["tid"], e["ts_ns"]) for e in nccl] == sorted((e["tid"], e["ts_ns"]) for e in nccl)
    comm = prof.records(folder, "comm")
    assert [(c["name"], c["ts_ns"], c["dur_ns"]) for c in comm] == [(e["name"], e["ts_ns"], e["dur_ns"]) for e in nccl]
    assert len(prof.records(folder, "events", limit=3)) == 3


def test_cli_errors(imported, portkit, tmp_path):
    folder, _ = imported
    res = run([portkit, "prof", "query", str(tmp_path), "--table", "ops"])
    assert res.returncode == 2
    assert ("%s is not an imported profile (it holds no portkit.db)" % tmp_path) in res.stderr
    res = run([portkit, "prof", "query", folder, "--table", "events", "--name-regex", "("])
    assert res.returncode == 2 and "is not a regular expression" in res.stderr
    res = run([portkit, "prof", "query", folder, "--table", "kernels"])
    assert res.returncode == 2
    with pytest.raises(FileNotFoundError, match="is not an imported profile"):
        prof.records(str(tmp_path), "ops")


def test_load_without_pandas(imported, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="portkit.prof.load needs pandas"):
        prof.load(imported[0])


def test_frames(imported):
    pytest.importorskip("pandas")
    folder, summary = imported
    p = prof.load(folder)
    ops = p.ops
    assert p.ops is ops  # read once
    host = summary["host_op_summary"]
    assert len(ops) == len(host)
    assert list(ops.columns) == ["name", "input_dims", "count", "self_ns", "total_ns"]
    for i in range(10):
        assert ops["name"][i] == host[i]["Name"] and ops["input_dims"][i] == host[i]["Input Shapes"]
        assert micros(int(ops["self_ns"][i])) == host[i]["Self Time(us)"]
    events = p.events
    kernels = events[events.kind == "kernel"].groupby("name").size()
    assert {k: int(v) for k, v in kernels.items()} == {
        r["Kernel Name"]: int(r["Count"]) for r in summary["kernel_statistic"]}
    assert int(events.ts_ns.min()) > 0 and str(events.dur_ns.dtype) == "int64"
    assert list(p.steps.number) == [551, 552] and not p.steps.warmup.any()
    assert len(p.comm) == 10
    assert len(p.frame("events", kinds=["kernel"], name_regex="^nccl")) == 10
