"""The profiling workflow end to end with real torch on CPU: collect a CNN with Mish and with LeakyReLU, import,
summarise, and diff: the step time drops."""
import csv
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
    for d in (mish, leaky):
        res = run([portkit, "prof", "import", "-dir", d])
        assert res.returncode == 0, res.stderr
        res = run([portkit, "prof", "export", "summary", "-dir", d])
        assert res.returncode == 0, res.stderr
        with open(os.path.join(d, "summary", "step_trace.csv"), newline="") as f:
            steps = list(csv.DictReader(f))
        assert [s["Iteration ID"] for s in steps] == ["1", "2", "3", "4", "5"]  # warm-up step 0 left out
    # The advisor flags the decomposed Mish, and only in the Mish profile.
    res = run([portkit, "prof", "analyse", "-dir", mish])
    assert res.returncode == 0, res.stderr
    assert "Mish (decomposed)" in res.stdout and "softplus-tanh-mul" in res.stdout
    with open(os.path.join(mish, "analysis", "advisor.html")) as f:
        html = f.read()
    assert "<svg" in html and "Mish (decomposed)" in html
    res = run([portkit, "prof", "analyse", "-dir", leaky])
    assert res.returncode == 0 and "Mish (decomposed)" not in res.stdout
    res = run([portkit, "prof", "diff", mish, leaky, "--fail-above", "0"])
    assert res.returncode == 0, res.stdout + res.stderr
    line = [l for l in res.stdout.splitlines() if l.startswith("step time:")][0]
    before = float(line.split("step time: ")[1].split(" ms")[0])
    after = float(line.split("-> ")[1].split(" ms")[0])
    assert after < before, line
    with open(os.path.join(leaky, "diff", "diff_operators.csv"), newline="") as f:
        names = {r["Name"].split(" ")[0] for r in csv.DictReader(f)}
    assert "aten::softplus" in names and "aten::leaky_relu" in names


def test_collect_rejects_a_non_python_command(tmp_path, portkit):
    res = run([portkit, "prof", "collect", "--output", str(tmp_path), "--", "bash", "-c", "true"])
    assert res.returncode == 2 and "must start with a Python interpreter" in res.stderr
    res = run([portkit, "prof", "collect", "--output", str(tmp_path)])
    assert res.returncode == 2 and "no program to profile" in res.stderr
