"""portkit prof import against an independent reading of the same traces with Python's json."""
import gzip
import json
import os
import shutil
import sqlite3
from decimal import Decimal

import pytest

from conftest import HERE, run

TRACES = os.path.join(HERE, "..", "data", "traces")
KINETO = sorted(f for f in os.listdir(os.path.join(TRACES, "kineto")) if f.endswith(".json.gz"))


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f, parse_float=Decimal)
    return data["traceEvents"] if isinstance(data, dict) else data


def ns(v):
    return int(Decimal(str(v)) * 1000)


@pytest.fixture(scope="module")
def imported(tmp_path_factory, portkit):
    folder = tmp_path_factory.mktemp("prof")
    for name in KINETO:
        shutil.copy(os.path.join(TRACES, "kineto", name), folder / name)
    shutil.copy(os.path.join(TRACES, "ascend", "trace_view.json"), folder / "trace_view.json")
    res = run([portkit, "prof", "import", "-dir", str(folder)])
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(str(folder / "portkit.db"))
    yield folder, db
    db.close()


@pytest.mark.parametrize("name", KINETO + ["trace_view.json"])
def test_every_complete_event_is_stored_with_exact_times(imported, name):
    folder, db = imported
    events = [e for e in load(str(folder / name)) if e.get("ph") == "X" and "ts" in e]
    (trace,) = db.execute("SELECT id FROM traces WHERE path = ?", (name,)).fetchone()
    rows = db.execute("SELECT ts, dur FROM events WHERE trace = ?", (trace,)).fetchall()
    assert len(rows) == len(events)
    # Exact integer nanoseconds (sums in Python: epoch-ns sums overflow SQLite's integers).
    assert sorted(r[0] for r in rows) == sorted(ns(e["ts"]) for e in events)
    assert sum(r[1] for r in rows) == sum(ns(e.get("dur", 0)) for e in events)


@pytest.mark.parametrize("name", KINETO)
def test_kernel_time_per_name_matches_an_independent_sum(imported, name):
    folder, db = imported
    expected = {}
    for e in load(str(folder / name)):
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            expected[e["name"]] = expected.get(e["name"], 0) + ns(e.get("dur", 0))
    (trace,) = db.execute("SELECT id FROM traces WHERE path = ?", (name,)).fetchone()
    got = dict(db.execute("SELECT name_text, SUM(dur) FROM kernels WHERE trace = ? GROUP BY name_text", (trace,)))
    assert got == expected


@pytest.mark.parametrize("name", ["trace_diff__control__control.json.gz",
                                  "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"])
def test_kernels_link_to_their_launch_and_cpu_op(imported, name):
    folder, db = imported
    (trace,) = db.execute("SELECT id FROM traces WHERE path = ?", (name,)).fetchone()
    total, launched, with_op = db.execute(
        "SELECT COUNT(*), COUNT(launch), COUNT(cpu_op) FROM kernel_launches WHERE trace = ?", (trace,)).fetchone()
    assert total > 0 and launched == total
    # By External id where the trace has it (ROCm sample), else by the enclosing op (HTA's CUDA ones).
    assert with_op >= 0.95 * total
    # Every linked op encloses its launch on the same thread, or shares its External id.
    bad = db.execute(
        "SELECT COUNT(*) FROM kernel_launches l JOIN events r ON r.rowid = l.launch JOIN events c ON c.rowid = l.cpu_op "
        "WHERE l.trace = ? AND NOT ((c.pid = r.pid AND c.tid = r.tid AND c.ts <= r.ts AND r.ts < c.ts + c.dur) "
        "OR c.external_id = r.external_id)", (trace,)).fetchone()[0]
    assert bad == 0


def test_truncated_trace_keeps_what_is_valid(tmp_path, portkit):
    src = os.path.join(TRACES, "kineto", "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz")
    with gzip.open(src, "rb") as f:
        raw = f.read()
    cut = raw[: len(raw) // 2]
    (tmp_path / "cut.json").write_bytes(cut)
    res = run([portkit, "prof", "import", "-dir", str(tmp_path)])
    assert res.returncode == 0, res.stderr
    assert "truncated or corrupt" in res.stderr and "kept the" in res.stderr
    db = sqlite3.connect(str(tmp_path / "portkit.db"))
    (count,) = db.execute("SELECT COUNT(*) FROM events").fetchone()
    (warning,) = db.execute("SELECT warning FROM traces").fetchone()
    db.close()
    assert count > 0 and "truncated" in warning


def test_missing_folder_and_no_trace_exit_2(tmp_path, portkit):
    res = run([portkit, "prof", "import", "-dir", str(tmp_path / "nope")])
    assert res.returncode == 2 and "does not exist" in res.stderr
    (tmp_path / "notes.txt").write_text("hello")
    res = run([portkit, "prof", "import", "-dir", str(tmp_path)])
    assert res.returncode == 2 and "no trace found" in res.stderr


def test_export_summary_kernel_statistic_matches_raw_json(imported, portkit):
    import csv
    folder, _ = imported
    res = run([portkit, "prof", "export", "summary", "-dir", str(folder)])
    assert res.returncode == 0, res.stderr
    for stem in ("op_summary", "op_statistic", "api_statistic", "kernel_statistic", "step_trace"):
        assert (folder / "summary" / (stem + ".csv")).exists(), stem
    expected = {}
    steps = set()
    for name in KINETO + ["trace_view.json"]:
        events = load(str(folder / name))
        # torch_npu names its device processes in metadata; their cat-less events are device tasks.
        device_pids = {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
                       and e.get("args", {}).get("name") in ("Ascend Hardware", "HCCL")}
        for e in events:
            if e.get("ph") != "X" or "ts" not in e:
                continue
            if e.get("cat") == "kernel" or ("cat" not in e and e.get("pid") in device_pids):
                n = e["name"]
                count, total = expected.get(n, (0, 0))
                expected[n] = (count + 1, total + ns(e.get("dur", 0)))
            if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") in ("cpu_op", "user_annotation"):
                steps.add((name, e["name"]))
    with open(folder / "summary" / "kernel_statistic.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    got = {r["Kernel Name"]: (int(r["Count"]), int(Decimal(r["Total Time(us)"]) * 1000)) for r in rows}
    assert got == expected
    with open(folder / "summary" / "step_trace.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == len(steps)
    res = run([portkit, "prof", "export", "summary", "-dir", str(folder), "--format", "json"])
    assert res.returncode == 0
    with open(folder / "summary" / "kernel_statistic.json") as f:
        assert len(json.load(f)) == len(expected)


def test_export_summary_needs_an_import_first(tmp_path, portkit):
    res = run([portkit, "prof", "export", "summary", "-dir", str(tmp_path)])
    assert res.returncode == 2 and "run `portkit prof import" in res.stderr


def test_export_timeline_keeps_every_event_nests_every_track_and_never_clips(imported, portkit):
    folder, db = imported
    res = run([portkit, "prof", "export", "timeline", "-dir", str(folder)])
    assert res.returncode == 0, res.stderr
    with open(folder / "timeline" / "timeline.json") as f:
        trace = json.load(f, parse_float=Decimal)
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    (stored,) = db.execute("SELECT COUNT(*) FROM events").fetchone()
    assert len(complete) == stored
    # Durations as stored, none clipped (ns sums in Python).
    assert sorted(ns(e["dur"]) for e in complete) == sorted(r[0] for r in db.execute("SELECT dur FROM events"))
    # Every flow, counter, instant and metadata event of the files is written again; portkit adds
    # launch flows only for traces without flows of their own (the torch_npu trace here).
    source = {}
    for name in KINETO + ["trace_view.json"]:
        for e in load(str(folder / name)):
            if e.get("ph") not in (None, "X"):
                source[e["ph"]] = source.get(e["ph"], 0) + 1
    added = int(res.stderr.split(" launch flows added")[0].split()[-1])
    for ph in ("s", "f"):
        assert sum(1 for e in events if e["ph"] == ph) == source.get(ph, 0) + added
    for ph in ("i", "C"):
        assert sum(1 for e in events if e["ph"] == ph) == source.get(ph, 0)
    assert sum(1 for e in events if e["ph"] == "M") >= source["M"]
    tracks = {}
    for e in complete:
        assert e["ts"] >= 0 and e["dur"] >= 0
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for start, end in spans:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1], "events overlap without nesting"
            open_ends.append(end)
    assert "moved to sibling tracks" in res.stderr


def test_diff_of_the_reference_pair(tmp_path, portkit):
    base, cmp = tmp_path / "base", tmp_path / "cmp"
    base.mkdir()
    cmp.mkdir()
    pair = {"base": "trace_diff__control__control.json.gz", "cmp": "trace_diff__test__test.json.gz"}
    for side, name in pair.items():
        shutil.copy(os.path.join(TRACES, "kineto", name), tmp_path / side / name)
    means = {}
    for side, name in pair.items():
        steps = {}
        for e in load(str(tmp_path / side / name)):
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"):
                start, end = ns(e["ts"]), ns(e["ts"]) + ns(e.get("dur", 0))
                lo, hi = steps.get(e["name"], (start, end))
                steps[e["name"]] = (min(lo, start), max(hi, end))
        means[side] = sum(hi - lo for lo, hi in steps.values()) / len(steps) / 1e6
    res = run([portkit, "prof", "diff", str(base), str(cmp), "--fail-above", "10"])
    assert res.returncode == 3, res.stderr
    assert "step time: %.3f ms (6 steps) -> %.3f ms (6 steps)" % (means["base"], means["cmp"]) in res.stdout
    # The noise-aware gate: device traces are judged on the median step; the slowdown is above the
    # threshold and its whole 95 % interval above 0 (the significant gate, the default).
    assert "regressed: median step time changed by +" in res.stderr, res.stderr
    assert "above --fail-above 10.00%, and the interval is all above 0" in res.stderr, res.stderr
    assert (cmp / "diff" / "diff_operators.csv").exists() and (cmp / "diff" / "diff_kernels.csv").exists()
    res = run([portkit, "prof", "diff", str(base), str(cmp), "--fail-above", "100"])
    assert res.returncode == 0, res.stderr
    res = run([portkit, "prof", "diff", str(cmp), str(base), "--fail-above", "0"])
    assert res.returncode == 0  # an improvement never fails the gate


def test_analyse_reference_traces(imported, portkit):
    folder, _ = imported
    res = run([portkit, "prof", "analyse", "-dir", str(folder)])
    assert res.returncode == 0, res.stderr
    assert "time split" in res.stdout and "top device tasks" in res.stdout
    assert "[high] the device is idle" in res.stdout  # HTA's samples are mostly idle GPUs
    text = (folder / "analysis" / "advisor.txt").read_text()
    assert text == res.stdout
    assert "<svg" in (folder / "analysis" / "advisor.html").read_text()


def test_kernel_details_csv_of_torch_npu(tmp_path, portkit):
    import csv
    src = os.path.join(TRACES, "ascend", "kernel_details.csv")
    shutil.copy(src, tmp_path / "kernel_details.csv")
    res = run([portkit, "prof", "import", "-dir", str(tmp_path)])
    assert res.returncode == 0, res.stderr
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    db = sqlite3.connect(str(tmp_path / "portkit.db"))
    got = db.execute("SELECT COUNT(*), SUM(dur) FROM events WHERE kind = 'kernel'").fetchone()
    db.close()
    assert got[0] == len(rows)
    assert got[1] == sum(ns(r["Duration(us)"]) for r in rows)
