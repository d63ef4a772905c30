"""portkit.torch.dumper + portkit compare with real torch: fp32 reference vs bf16 autocast target."""
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import HERE, run

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from portkit import safetensors_io  # noqa: E402
from portkit.torch import dumper  # noqa: E402


class Mish(torch.nn.Module):
    def forward(self, x):
        return x * torch.tanh(torch.nn.functional.softplus(x))


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), Mish(), torch.nn.Flatten(),
                               torch.nn.Linear(8 * 8 * 8, 10))


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("acc")
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    m = model()
    with dumper(dump_path=str(root / "ref")):
        m(x).sum().backward()
    m = model()
    with dumper(dump_path=str(root / "tgt")):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = m(x)
        y.float().sum().backward()
    return root


def manifest(path):
    with open(os.path.join(path, "manifest.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_dump_has_forward_and_backward_ops_with_exact_tensors(dumps):
    ops = manifest(dumps / "ref")
    assert {o["phase"] for o in ops} == {"forward", "backward"}
    names = [o["name"] for o in ops]
    assert "aten::softplus" in names and "aten::tanh" in names and "aten::convolution" in names
    first = ops[0]
    data = safetensors_io.read(str(dumps / "ref" / first["file"]))
    for t in first["tensors"]:
        assert list(data[t["key"]].shape) == t["shape"]
    bf16 = [t for o in manifest(dumps / "tgt") for t in o["tensors"] if t["dtype"] == "BF16"]
    assert bf16, "autocast target should hold bf16 tensors"


def test_compare_metrics_equal_float64_numpy(dumps, portkit):
    out = dumps / "cmp"
    res = run([portkit, "compare", str(dumps / "ref"), str(dumps / "tgt"), "-o", str(out)])
    assert res.returncode == 0, res.stderr
    with open(out / "compare_result.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0].keys())[:2] == ["NPU Name", "Bench Name"]
    ref_ops = {o["index"]: o for o in manifest(dumps / "ref")}
    tgt_ops = {o["index"]: o for o in manifest(dumps / "tgt")}
    checked = 0
    for r in rows:
        if r["Accuracy Reached or Not"] not in ("Yes", "No"):
            continue
        tname, bname = r["NPU Name"], r["Bench Name"]
        t_index, key = int(tname.split(".")[2]), ".".join(tname.split(".")[3:])
        b_index = int(bname.split(".")[2])
        n = safetensors_io.read(str(dumps / "tgt" / tgt_ops[t_index]["file"]))[key].astype(np.float64).ravel()
        b = safetensors_io.read(str(dumps / "ref" / ref_ops[b_index]["file"]))[key].astype(np.float64).ravel()
        cos = float(n @ b / (np.linalg.norm(n) * np.linalg.norm(b))) if np.linalg.norm(n) and np.linalg.norm(b) else 1.0
        rel = np.abs(n - b) / np.maximum(np.abs(b), 1e-10)
        assert abs(float(r["Cosine"]) - cos) < 1e-6
        assert abs(float(r["MaxAbsErr"]) - float(np.max(np.abs(n - b)))) < 1e-6
        assert abs(float(r["EucDist"]) - float(np.linalg.norm(n - b))) < 1e-6 * max(1.0, float(np.linalg.norm(n - b)))
        assert abs(float(r["One Thousandth Err Ratio"]) - float(np.mean(rel < 0.001))) < 1e-6
        assert abs(float(r["NPU l2norm"]) - float(np.linalg.norm(n))) < 1e-6 * max(1.0, float(np.linalg.norm(n)))
        checked += 1
    assert checked > 10
    html = (out / "compare_report.html").read_text()
    assert "<svg" in html and "First divergence" in html


def test_a_run_killed_midway_leaves_a_readable_dump(tmp_path, portkit):
    script = (
        "import os, signal, sys, torch\n"
        "sys.path.insert(0, %r)\n"
        "import portkit.torch\n"
        "m = torch.nn.Linear(4, 4)\n"
        "with portkit.torch.dumper(dump_path=%r):\n"
        "    y = m(torch.randn(2, 4)).relu()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    ) % (os.path.join(HERE, "..", "..", "python"), str(tmp_path / "dump"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9
    ops = manifest(tmp_path / "dump")
    assert [o["name"] for o in ops] == ["aten::randn", "aten::addmm", "aten::relu"]
    for o in ops:
        safetensors_io.read(str(tmp_path / "dump" / o["file"]))
    res = run([portkit, "compare", str(tmp_path / "dump"), str(tmp_path / "dump"), "-o", str(tmp_path / "cmp")])
    assert res.returncode == 0, res.stderr


def test_overflow_finds_the_first_overflowing_operator(tmp_path, portkit):
    m = model()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        m[3].weight[0, 0] = float("inf")  # the Linear layer now produces inf
    with dumper(dump_path=str(tmp_path / "dump"), check_overflow=True) as d:
        m(x)
    assert d.overflows >= 1
    res = run([portkit, "overflow", str(tmp_path / "dump")])
    assert res.returncode == 0, res.stderr
    first = [l for l in res.stdout.splitlines() if "first" in l]
    assert first and "aten::addmm" in first[0]
    # check_overflow keeps tensor data only for the overflowing operators.
    files = [o["file"] for o in manifest(tmp_path / "dump")]
    assert any(files) and not all(files)


def test_convert_round_trips_fp32_exactly_and_txt(dumps, tmp_path, portkit):
    res = run([portkit, "convert", "-d", str(dumps / "ref"), "-out", str(tmp_path / "npy")])
    assert res.returncode == 0, res.stderr
    ops = manifest(dumps / "ref")
    op = ops[0]
    data = safetensors_io.read(str(dumps / "ref" / op["file"]))
    stem = "%d_%s_%s" % (op["index"], op["name"].replace(":", "_"), op["phase"])
    for key, arr in data.items():
        back = np.load(str(tmp_path / "npy" / ("%s.%s.npy" % (stem, key))))
        assert back.dtype == arr.dtype and np.array_equal(back, arr)
    res = run([portkit, "convert", "-d", str(dumps / "tgt"), "-out", str(tmp_path / "txt"), "-t", "txt"])
    assert res.returncode == 0, res.stderr
    assert "widened to float32" in res.stderr or "txt" in res.stderr
    one = sorted((tmp_path / "txt").iterdir())[0]
    assert all(float(v) == float(v) for v in one.read_text().split())


def test_extract_copies_the_named_operators(dumps, tmp_path, portkit):
    res = run([portkit, "extract", "-i", str(dumps / "ref"), "-o", str(tmp_path / "sub"), "-s", "softplus", "tanh"])
    assert res.returncode == 0, res.stderr
    names = [o["name"] for o in manifest(tmp_path / "sub")]
    assert names and set(names) <= {"aten::softplus", "aten::tanh"} or all(
        n in ("aten::softplus", "aten::tanh", "aten::softplus_backward", "aten::tanh_backward") for n in names)
    for o in manifest(tmp_path / "sub"):
        safetensors_io.read(str(tmp_path / "sub" / o["file"]))
