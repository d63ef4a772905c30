"""The profiling workflow end to end with real torch on CPU: collect a CNN with torch.nn.Mish and with
LeakyReLU, import, summarise, let the advisor name Mish and the fix, and diff: the step time drops and
passes the gate."""
import csv
import json
import glob
import os
import sys

from conftest import HERE, run

SCRIPT = os.path.join(HERE, "fixtures", "prof_story", "train.py")


def collect(portkit, python, out, act):
    res = run([portkit, "prof", "collect", "--output", str(out), "--steps", "5", "--record-shapes", "--",
               python, SCRIPT, "--act", act])
    assert res.returncode == 0, res.stderr
    dirs = glob.glob(os.path.join(str(out), "PROF_*"))
    assert len(dirs) == 1, dirs
    assert res.stdout.strip().endswith(dirs[0])
    return dirs[0]


def test_collect_import_summary_and_diff(tmp_path, portkit, python):
    mish = collect(portkit, python, tmp_path / "mish", "mish")
    leaky = collect(portkit, python, tmp_path / "leaky", "leaky")
    decomposed = collect(portkit, python, tmp_path / "decomposed", "mish-decomposed")
    for d in (mish, leaky, decomposed):
        res = run([portkit, "prof", "import", "-dir", d])
        assert res.returncode == 0, res.stderr
        res = run([portkit, "prof", "export", "summary", "-dir", d, "--format", "csv,json"])
        assert res.returncode == 0, res.stderr
        with open(os.path.join(d, "summary", "step_trace.csv"), newline="") as f:
            steps = list(csv.DictReader(f))
        assert [s["Iteration ID"] for s in steps] == ["1", "2", "3", "4", "5"]  # warm-up step 0 left out
    # The advisor names nn.Mish (one aten::mish and its backward), its share of step time and the
    # target's fix, LeakyReLU with the accuracy caveat; the old advice (use nn.Mish) is gone.
    res = run([portkit, "prof", "analyse", "-dir", mish, "--format", "text,html,json"])
    assert res.returncode == 0, res.stderr
    finding = [l for l in res.stdout.splitlines() if "(non_native_ops)" in l]
    assert finding and "Mish does not run natively on the target" in finding[0], res.stdout
    assert "aten::mish " in res.stdout and "aten::mish_backward" in res.stdout
    assert "torch.nn.Mish" in res.stdout and "torch.nn.LeakyReLU" in res.stdout
    assert "check the accuracy" in res.stdout
    assert "one fused kernel" not in res.stdout
    with open(os.path.join(mish, "analysis", "advisor.json")) as f:
        report = json.load(f)
    rule = [x for x in report["findings"] if x["rule"] == "non_native_ops"][0]
    share = float(rule["title"].rsplit(": ", 1)[1].split("%")[0])
    assert 0 < share < 100 and rule["severity"] in ("high", "medium"), rule
    # The host-operator table: self and total time per operator, numbers in JSON.
    assert "self time" in res.stdout and report["host_operators"]
    assert all(0 <= op["self_ns"] <= op["total_ns"] and op["count"] > 0 for op in report["host_operators"])
    with open(os.path.join(mish, "summary", "host_op_summary.json")) as f:
        rows = json.load(f)
    assert any(r["Name"] == "aten::mish_backward" and isinstance(r["Self Time(us)"], float) and r["Count"] >= 5
               for r in rows), rows[:5]
    with open(os.path.join(mish, "summary", "host_op_summary.csv"), newline="") as f:
        ops = {(r["Name"], r["Input Shapes"]): r for r in csv.DictReader(f)}
    mish_rows = [r for (n, _), r in ops.items() if n == "aten::mish"]
    assert mish_rows and all(int(r["Count"]) >= 5 for r in mish_rows)
    assert all(float(r["Self Time(us)"]) <= float(r["Total Time(us)"]) for r in ops.values())
    with open(os.path.join(mish, "analysis", "advisor.html")) as f:
        html = f.read()
    assert "<svg" in html and "Mish does not run natively" in html and "LeakyReLU" in html
    res = run([portkit, "prof", "analyse", "-dir", leaky])
    assert res.returncode == 0 and "non_native_ops" not in res.stdout
    # The decomposed form is named too, with its backward.
    res = run([portkit, "prof", "analyse", "-dir", decomposed])
    assert res.returncode == 0, res.stderr
    assert "Mish does not run natively" in res.stdout and "decomposed form softplus-tanh-mul" in res.stdout
    assert "aten::softplus_backward" in res.stdout
    # The diff reads both step times and gates on them. Times on a shared CPU are noisy, so the test
    # checks the mechanics (both times read, a generous gate passes) and not that the drop shows up
    # in this one run; the measured drop is recorded in docs/prof.md (seed 003's story).
    res = run([portkit, "prof", "diff", mish, leaky, "--fail-above", "1000"])
    assert res.returncode == 0, res.stdout + res.stderr
    line = [l for l in res.stdout.splitlines() if l.startswith("step time:")][0]
    before = float(line.split("step time: ")[1].split(" ms")[0])
    after = float(line.split("-> ")[1].split(" ms")[0])
    assert before > 0 and after > 0, line  # the gate's exit 3 is tested on fixed traces (tests/cli/prof.sh)
    with open(os.path.join(leaky, "diff", "diff_operators.csv"), newline="") as f:
        names = {r["Name"].split(" ")[0] for r in csv.DictReader(f)}
    assert "aten::mish" in names and "aten::leaky_relu" in names


def test_collect_rejects_a_non_python_command(tmp_path, portkit):
    res = run([portkit, "prof", "collect", "--output", str(tmp_path), "--", "bash", "-c", "true"])
    assert res.returncode == 2 and "must start with a Python interpreter" in res.stderr
    res = run([portkit, "prof", "collect", "--output", str(tmp_path)])
    assert res.returncode == 2 and "no program to profile" in res.stderr
