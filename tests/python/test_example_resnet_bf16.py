"""The README's accuracy example end to end: examples/accuracy/resnet_bf16.py dumps one training
step of a BatchNorm ResNet-style model in fp32 and under bf16 autocast, and `portkit compare`
reads both, matches the operators and, the bf16 run being healthy, blames none of them (its
rounding stays within what bf16 allows), with the casts autocast adds listed as unmatched target
operators."""
import json
import os
import subprocess

from conftest import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_readme_resnet_fp32_vs_bf16(tmp_path, portkit, python):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    res = subprocess.run([python, os.path.join(ROOT, "examples", "accuracy", "resnet_bf16.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    cmp = run([portkit, "compare", str(tmp_path / "ref"), str(tmp_path / "bf16"), "-o", str(tmp_path / "cmp"),
               "--format", "csv,json,html"])
    assert cmp.returncode == 0, cmp.stderr
    with open(tmp_path / "cmp" / "compare_result.json") as f:
        report = json.load(f)
    # A healthy bf16 run: no operator is blamed (no red culprit). Its rounding is either within what
    # bf16 and each operator's conditioning allow ("none": torch 2.8 here) or reported as drift that
    # starts where bf16 first rounds, the stem convolution, with "replay to localise" ("drift":
    # torch 1.13's kernels here).
    state = {k: report.get(k) for k in ("divergence_state", "first_divergence", "drift_start")}
    assert report["first_divergence"] is None, state
    assert report["divergence_state"] in ("none", "drift"), state
    if report["divergence_state"] == "drift":
        assert report["drift_start"]["name"] in ("aten::convolution", "aten::conv2d"), state
        assert report["drift_start"]["module"] == "SmallResNet.stem.0", state
    # Every matched tensor pair was judged.
    assert report["verdicts"].get("Yes", 0) > 100, report["verdicts"]
    # autocast's casts exist only in the bf16 run: unmatched target operators, none on the reference side.
    assert report["unmatched_target_ops"] and not report["unmatched_reference_ops"]
    assert (tmp_path / "cmp" / "compare_report.html").stat().st_size > 0
