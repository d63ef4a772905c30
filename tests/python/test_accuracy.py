"""portkit.torch.dumper + portkit compare with real torch: fp32 reference vs bf16 autocast target."""
import csv
import json
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest
import torch

from conftest import HERE, run

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from portkit import safetensors_io  # noqa: E402
from portkit.torch import dumper  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


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
    """The manifest's records; a torn last line (a crash mid-write) is left out, as compare does."""
    with open(os.path.join(path, "manifest.jsonl")) as f:
        lines = f.read().splitlines()
    records = []
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line))
        except ValueError:
            assert i == len(lines) - 1, "only the last line may be torn"
    return records


def test_dump_has_forward_and_backward_ops_with_exact_tensors(dumps):
    ops = manifest(dumps / "ref")
    assert {o["phase"] for o in ops} == {"forward", "backward"}
    names = [o["name"] for o in ops]
    assert "aten::softplus" in names and "aten::tanh" in names and "aten::convolution" in names
    first = ops[0]
    data = safetensors_io.read(str(dumps / "ref" / first["file"]))
    for t in first["tensors"]:
        assert list(data[t["key"]].shape) == t["shape"]
        raw = data[t["key"]].tobytes() if t["dtype"] != "BF16" else None
        if raw is not None:
            assert t["crc32"] == zlib.crc32(raw)
    bf16 = [t for o in manifest(dumps / "tgt") for t in o["tensors"] if t["dtype"] == "BF16"]
    assert bf16, "autocast target should hold bf16 tensors"


def check_against_numpy(out, ref_dir, tgt_dir):
    """Every compared row of compare_result.csv against float64 numpy; returns the rows checked."""
    with open(out / "compare_result.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0].keys())[:2] == ["NPU Name", "Bench Name"]
    ref_ops = {o["index"]: o for o in manifest(ref_dir)}
    tgt_ops = {o["index"]: o for o in manifest(tgt_dir)}
    checked = 0
    for r in rows:
        if r["Accuracy Reached or Not"] not in ("Yes", "No"):
            continue
        tname, bname = r["NPU Name"], r["Bench Name"]
        t_index, key = int(tname.split(".")[2]), ".".join(tname.split(".")[3:])
        b_index, bkey = int(bname.split(".")[2]), ".".join(bname.split(".")[3:])
        n = safetensors_io.read(str(tgt_dir / tgt_ops[t_index]["file"]))[key].astype(np.float64).ravel()
        b = safetensors_io.read(str(ref_dir / ref_ops[b_index]["file"]))[bkey].astype(np.float64).ravel()
        cos = float(n @ b / (np.linalg.norm(n) * np.linalg.norm(b))) if np.linalg.norm(n) and np.linalg.norm(b) else 1.0
        d = np.abs(n - b)
        rel = d / np.maximum(np.abs(b), 1e-10)
        scale = lambda v: 1e-6 * max(1.0, abs(v))  # noqa: E731  (the CSV keeps 6 decimals)
        assert abs(float(r["Cosine"]) - cos) < 1e-6
        assert abs(float(r["MaxAbsErr"]) - float(np.max(d))) < 1e-6
        assert abs(float(r["MaxRelativeErr"]) - float(np.max(rel))) < scale(float(np.max(rel)))
        assert abs(float(r["EucDist"]) - float(np.linalg.norm(n - b))) < scale(float(np.linalg.norm(n - b)))
        assert abs(float(r["One Thousandth Err Ratio"]) - float(np.mean(rel < 0.001))) < 1e-6
        assert abs(float(r["Five Thousandths Err Ratio"]) - float(np.mean(rel < 0.005))) < 1e-6
        assert abs(float(r["NPU l2norm"]) - float(np.linalg.norm(n))) < scale(float(np.linalg.norm(n)))
        assert abs(float(r["Bench mean"]) - float(np.mean(b))) < 1e-6
        checked += 1
    with open(out / "compare_result.json") as f:
        extra = {(x["npu_name"], x["bench_name"]): x for x in json.load(f)["rows"]}
    for r in rows[:40]:
        if r["Accuracy Reached or Not"] not in ("Yes", "No"):
            continue
        x = extra[(r["NPU Name"], r["Bench Name"])]
        t_index, key = int(r["NPU Name"].split(".")[2]), ".".join(r["NPU Name"].split(".")[3:])
        b_index, bkey = int(r["Bench Name"].split(".")[2]), ".".join(r["Bench Name"].split(".")[3:])
        n = safetensors_io.read(str(tgt_dir / tgt_ops[t_index]["file"]))[key].astype(np.float64).ravel()
        b = safetensors_io.read(str(ref_dir / ref_ops[b_index]["file"]))[bkey].astype(np.float64).ravel()
        d = np.abs(n - b)
        assert abs(x["RMSE"] - float(np.sqrt(np.mean(d * d)))) < 1e-9
        assert abs(x["MeanAbsErr"] - float(np.mean(d))) < 1e-9
        rel = d / np.maximum(np.abs(b), 1e-10)
        assert abs(x["MeanRelErr"] - float(np.mean(rel))) < 1e-9 * max(1.0, float(np.mean(rel)))
        # ULP in the target type (fp32: 2^(e-23), floor 2^-149; fp16: 2^(e-10), 2^-24; bf16: 2^(e-7), 2^-133).
        mant, floor, small, atol = {"F16": (10, -24, 2.0 ** -10, 2.0 ** -16), "BF16": (7, -133, 2.0 ** -10, 2.0 ** -16)}.get(
            tgt_ops[t_index]["tensors"][[y["key"] for y in tgt_ops[t_index]["tensors"]].index(key)]["dtype"],
            (23, -149, 2.0 ** -20, 2.0 ** -30))
        _, e = np.frexp(b)
        ulp = np.ldexp(1.0, np.maximum(np.where(b == 0, floor + mant + 1, e) - 1 - mant, floor))
        assert abs(x["MaxULPErr"] - float(np.max(d / ulp))) <= 1e-9 * max(1.0, float(np.max(d / ulp)))
        is_small = np.abs(b) < small
        ratio = float(np.sum(is_small & (d > atol)) / np.sum(is_small)) if is_small.any() else 0.0
        assert abs(x["SmallValueErrRatio"] - ratio) < 1e-12
        p, q = np.abs(b), np.abs(n)
        if p.sum() > 0 and q.sum() > 0:
            kl = float(np.sum(p / p.sum() * np.log((p + 1e-10) / (q + 1e-10)))) - np.log(p.sum()) + np.log(q.sum())
            assert abs(x["KLDivergence"] - max(kl, 0.0)) < 1e-6
    return checked


def test_compare_metrics_equal_float64_numpy(dumps, portkit):
    out = dumps / "cmp"
    res = run([portkit, "compare", str(dumps / "ref"), str(dumps / "tgt"), "-o", str(out)])
    assert res.returncode == 0, res.stderr
    assert check_against_numpy(out, dumps / "ref", dumps / "tgt") > 10
    html = (out / "compare_report.html").read_text()
    assert "<svg" in html and any(s in html for s in ("Culprit: ", "Precision drift", "No divergence"))
    # The same results with one thread and with several (ranges merge in a fixed order).
    res = run([portkit, "compare", str(dumps / "ref"), str(dumps / "tgt"), "-o", str(dumps / "cmp1"), "-j", "1"])
    assert res.returncode == 0, res.stderr
    assert (dumps / "cmp1" / "compare_result.csv").read_text() == (out / "compare_result.csv").read_text()


class Block(torch.nn.Module):
    """A pre-norm transformer block: attention + MLP with GELU, dropout off."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                                      activation="gelu", batch_first=True, norm_first=True)

    def forward(self, x):
        return self.layer(x)


def test_transformer_block_fp32_vs_bf16_autocast(tmp_path, portkit):
    x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(3))
    for name, autocast in (("ref", False), ("tgt", True)):
        torch.manual_seed(0)
        block = Block().train()  # train mode: the op-by-op path, not the fused inference kernel
        with dumper(dump_path=str(tmp_path / name)):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                y = block(x)
            y.float().pow(2).mean().backward()
    names = {o["name"] for o in manifest(tmp_path / "ref")}
    assert "aten::native_layer_norm" in names and "aten::gelu" in names
    out = tmp_path / "cmp"
    res = run([portkit, "compare", str(tmp_path / "ref"), str(tmp_path / "tgt"), "-o", str(out)])
    assert res.returncode == 0, res.stderr
    assert check_against_numpy(out, tmp_path / "ref", tmp_path / "tgt") > 20


class Faulty(TorchDispatchMode):
    """A 'device' whose tanh kernel is wrong: half of its outputs are off by 0.5."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.tanh.default:
            out = out.clone()
            out.view(-1)[::2] += 0.5
        return out


def compare_json(portkit, ref, tgt, out, *extra):
    res = run([portkit, "compare", str(ref), str(tgt), "-o", str(out)] + list(extra))
    assert res.returncode == 0, res.stderr
    with open(out / "compare_result.json") as f:
        return json.load(f)


def test_replay_separates_local_from_inherited_error(dumps, tmp_path, portkit):
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    m = model()
    with Faulty():
        with dumper(dump_path=str(tmp_path / "replay"), load_file_path=str(dumps / "ref"), use_load=True):
            m(x).sum().backward()
    ops = manifest(tmp_path / "replay")
    # Every op is replayed but the views (Flatten), which compute nothing.
    assert all(o["replay"]["status"] == "ok" or o.get("view") for o in ops), [o["replay"] for o in ops]
    assert all(o["replay"]["status"] == "ok" for o in ops if o["name"] in ("aten::tanh", "aten::mul"))
    report = compare_json(portkit, dumps / "ref", tmp_path / "replay", tmp_path / "cmp")
    assert report["first_divergence"]["name"] == "aten::tanh"
    assert report["first_divergence_basis"] == "replay"
    rows = {r["npu_name"]: r for r in report["rows"]}
    mul = next(o for o in ops if o["name"] == "aten::mul" and o["phase"] == "forward")
    # The multiply after the bad tanh inherits the error; re-run on the reference inputs it is fine.
    assert rows["aten::mul.forward.%d.output.0" % mul["index"]]["verdict"] == "No"
    assert rows["aten::mul.forward.%d.replay.output.0" % mul["index"]]["verdict"] == "Yes"
    assert rows["aten::mul.forward.%d.replay.output.0" % mul["index"]]["replay"] is True


def test_first_divergence_without_replay_is_judged_from_matching_inputs(dumps, tmp_path, portkit):
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    m = model()
    with Faulty():
        with dumper(dump_path=str(tmp_path / "tgt")):
            m(x).sum().backward()
    report = compare_json(portkit, dumps / "ref", tmp_path / "tgt", tmp_path / "cmp")
    assert report["first_divergence"]["name"] == "aten::tanh"
    assert report["first_divergence_basis"] == "inputs matched"


def write_dump(path, ops):
    """A hand-made dump: ops = [(name, {key: numpy array})]."""
    os.makedirs(path)
    with open(os.path.join(path, "manifest.jsonl"), "w") as f:
        for i, (name, tensors) in enumerate(ops):
            st = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.float16): "F16"}
            entries = [(k, st[a.dtype], a.shape, a.tobytes()) for k, a in tensors.items()]
            file = "op_%06d.safetensors" % i
            safetensors_io.write(os.path.join(path, file), entries)
            f.write(json.dumps({"index": i, "name": name, "kind": "op", "phase": "forward", "module": "", "stack": "",
                                "overflow": False, "file": file,
                                "tensors": [{"key": k, "dtype": st[a.dtype], "shape": list(a.shape)}
                                            for k, a in tensors.items()]}) + "\n")


def test_mapping_file_integer_exactness_and_fp16_tolerances(tmp_path, portkit):
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    idx = np.arange(10, dtype=np.int64)
    write_dump(tmp_path / "ref", [("aten::relu", {"output.0": np.maximum(x, 0)}),
                                  ("aten::argmax", {"output.0": idx})])
    off = idx.copy()
    off[3] += 1
    write_dump(tmp_path / "tgt", [("npu::fast_relu", {"output.0": np.maximum(x, 0).astype(np.float16)}),
                                  ("aten::argmax", {"output.0": off})])
    plain = compare_json(portkit, tmp_path / "ref", tmp_path / "tgt", tmp_path / "plain")
    assert plain["verdicts"]["Unmatched"] == 2  # the renamed op on each side
    mapping = tmp_path / "map.csv"
    mapping.write_text("target,reference\nnpu::fast_relu,aten::relu\n")
    report = compare_json(portkit, tmp_path / "ref", tmp_path / "tgt", tmp_path / "mapped", "--mapping", str(mapping))
    rows = {r["npu_name"]: r for r in report["rows"]}
    relu = rows["npu::fast_relu.forward.0.output.0"]
    assert relu["verdict"] == "Yes" and relu["ulp_threshold"] == 1.0 and relu["ulp_within_threshold"] is True
    argmax = rows["aten::argmax.forward.1.output.0"]
    assert argmax["verdict"] == "No" and argmax["err_message"] == "integer data differ"
    bad = tmp_path / "bad.csv"
    bad.write_text("only-one-column\n")
    res = run([portkit, "compare", str(tmp_path / "ref"), str(tmp_path / "tgt"), "-o", str(tmp_path / "x"),
               "--mapping", str(bad)])
    assert res.returncode == 2 and "bad.csv:1: expected" in res.stderr


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
    # No end-of-dump marker: readers keep what is there and say the dump was cut short.
    assert not (tmp_path / "dump" / "dump_complete.json").exists()
    res = run([portkit, "compare", str(tmp_path / "dump"), str(tmp_path / "dump"), "-o", str(tmp_path / "cmp")])
    assert res.returncode == 0, res.stderr
    assert "no end-of-dump marker (dump_complete.json): the run that wrote it did not finish" in res.stderr
    res = run([portkit, "overflow", str(tmp_path / "dump")])
    assert "no end-of-dump marker" in res.stderr


def test_a_finished_dump_has_its_end_marker(tmp_path, portkit):
    with dumper(dump_path=str(tmp_path / "dump")):
        torch.nn.Linear(4, 4)(torch.randn(2, 4)).relu()
    ops = manifest(tmp_path / "dump")
    with open(tmp_path / "dump" / "dump_complete.json") as f:
        assert json.load(f) == {"records": len(ops)}
    res = run([portkit, "compare", str(tmp_path / "dump"), str(tmp_path / "dump"), "-o", str(tmp_path / "cmp")])
    assert res.returncode == 0, res.stderr
    assert "end-of-dump marker" not in res.stderr


def test_overflow_finds_the_first_overflowing_operator(tmp_path, portkit):
    m = model()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        m[3].weight[0] = 3e38  # finite, but the Linear layer's sums now overflow to inf
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
    # .txt holds every value, flattened, one a line (bf16 widened exactly to float32).
    tgt_ops = manifest(dumps / "tgt")
    checked = 0
    for op in tgt_ops[:6]:
        data = safetensors_io.read(str(dumps / "tgt" / op["file"]))
        stem = "%d_%s_%s" % (op["index"], op["name"].replace(":", "_"), op["phase"])
        for key, arr in data.items():
            values = np.loadtxt(str(tmp_path / "txt" / ("%s.%s.txt" % (stem, key))), ndmin=1)
            assert np.array_equal(values, arr.astype(np.float64).ravel()), (stem, key)
            checked += 1
    assert checked >= 6


def test_extract_copies_the_named_operators(dumps, tmp_path, portkit):
    res = run([portkit, "extract", "-i", str(dumps / "ref"), "-o", str(tmp_path / "sub"), "-s", "softplus", "tanh"])
    assert res.returncode == 0, res.stderr
    names = [o["name"] for o in manifest(tmp_path / "sub")]
    expected = [o["name"] for o in manifest(dumps / "ref") if "softplus" in o["name"] or "tanh" in o["name"]]
    assert names == expected and "aten::softplus" in names and "aten::tanh_backward" in names
    for o in manifest(tmp_path / "sub"):
        safetensors_io.read(str(tmp_path / "sub" / o["file"]))


def test_in_place_operators_record_the_inputs_they_were_given(tmp_path):
    x = torch.tensor([-1.0, 2.0, -3.0])
    with dumper(dump_path=str(tmp_path / "d")):
        x.relu_()
        y = torch.empty(3)
        torch.add(x, 1, out=y)
    ops = manifest(tmp_path / "d")
    relu = next(o for o in ops if o["name"] == "aten::relu_")
    data = safetensors_io.read(str(tmp_path / "d" / relu["file"]))
    assert data["input.0"].tolist() == [-1.0, 2.0, -3.0]
    assert data["output.0"].tolist() == [0.0, 2.0, 0.0]


def test_a_dump_folder_is_never_appended_to(tmp_path):
    with dumper(dump_path=str(tmp_path / "d")):
        torch.ones(2) * 2
    with pytest.raises(FileExistsError, match="already holds a dump"):
        with dumper(dump_path=str(tmp_path / "d")):
            torch.ones(2) * 3


def test_module_paths_and_autograd_grad_phase(tmp_path):
    m = model()
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    with dumper(dump_path=str(tmp_path / "d"), level="mix"):
        y = m(x).sum()
        torch.autograd.grad(y, x)
    ops = manifest(tmp_path / "d")
    conv = next(o for o in ops if o["name"] == "aten::convolution")
    assert conv["module"] == "Sequential.0"
    assert [o["name"] for o in ops if o["kind"] == "module"][:2] == ["Sequential.0", "Sequential.1"]
    assert any(o["phase"] == "backward" and o["name"] == "aten::convolution_backward" for o in ops)


def test_replay_against_another_reference_is_reported(dumps, tmp_path, portkit):
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    with dumper(dump_path=str(tmp_path / "replay"), load_file_path=str(dumps / "ref"), use_load=True):
        model()(x).sum().backward()
    # Compared against a reference that is not the one replayed from: its ops have other indices.
    write_dump(tmp_path / "other", [("aten::relu", {"output.0": np.zeros(3, np.float32)}),
                                    ("aten::convolution", {"output.0": np.zeros((2, 8, 8, 8), np.float32)})])
    report = compare_json(portkit, tmp_path / "other", tmp_path / "replay", tmp_path / "cmp")
    conv = next(r for r in report["rows"] if r["npu_name"].startswith("aten::convolution.forward")
                and ".replay." in r["npu_name"])
    assert conv["verdict"] == "Unmatched" and "another load_file_path" in conv["err_message"]
    assert report["replayed_operators"]["ok"] > 10


def test_torn_last_manifest_line_and_large_tensors_split_across_threads(tmp_path, portkit):
    n = 5 * 1024 * 1024 + 3  # more than one 4 Mi-element range
    b = np.sin(np.arange(n, dtype=np.float32) * np.float32(0.001))
    t = (b * np.float32(1.0001) + np.float32(1e-5)).astype(np.float32)
    write_dump(tmp_path / "ref", [("aten::mul", {"output.0": b}), ("aten::add", {"output.0": b})])
    write_dump(tmp_path / "tgt", [("aten::mul", {"output.0": t}), ("aten::add", {"output.0": t})])
    with open(tmp_path / "tgt" / "manifest.jsonl", "rb+") as f:  # a crash in the middle of the last line
        f.truncate(os.path.getsize(tmp_path / "tgt" / "manifest.jsonl") - 40)
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / ("cmp" + jobs)
        res = run([portkit, "compare", str(tmp_path / "ref"), str(tmp_path / "tgt"), "-o", str(out), "-j", jobs])
        assert res.returncode == 0, res.stderr
        assert "incomplete last record ignored" in res.stderr
        outs.append((out / "compare_result.csv").read_text())
    assert outs[0] == outs[1]
    assert check_against_numpy(tmp_path / "cmp1", tmp_path / "ref", tmp_path / "tgt") == 1


def test_stats_only_and_acl_json_config(tmp_path, portkit):
    x = torch.randn(2, 3, 8, 8)
    m = model()
    with dumper(dump_path=str(tmp_path / "stats"), stats_only=True):
        m(x)
    ops = manifest(tmp_path / "stats")
    assert ops and all(o["file"] is None for o in ops)
    conv = next(o for o in ops if o["name"] == "aten::convolution")
    out = next(t for t in conv["tensors"] if t["key"] == "output.0")
    with torch.no_grad():
        y = m[0](x).double()
    assert abs(out["max"] - float(y.max())) < 1e-5 and abs(out["norm"] - float(y.norm())) < 1e-3
    assert abs(out["mean"] - float(y.mean())) < 1e-5 and out["nan"] == 0 and out["inf"] == 0
    assert "crc32" not in out  # stats_only copies nothing to the host unless checksums are asked for
    assert not list(tmp_path.glob("stats/*.safetensors"))
    with dumper(dump_path=str(tmp_path / "crc"), stats_only=True, checksum=True):
        m(x)
    conv = next(o for o in manifest(tmp_path / "crc") if o["name"] == "aten::convolution")
    assert all(isinstance(t["crc32"], int) for t in conv["tensors"])
    # Statistics of 16-bit floats accumulate in float32; nan/inf counted when present.
    z = torch.tensor([1.0, float("nan"), float("inf"), -2.0, 3.0]).to(torch.bfloat16)
    with dumper(dump_path=str(tmp_path / "bf16"), stats_only=True):
        (z * 2).sum()
    mul = next(o for o in manifest(tmp_path / "bf16") if o["name"] == "aten::mul")
    t = next(t for t in mul["tensors"] if t["key"] == "output.0")
    assert (t["nan"], t["inf"], t["numel"]) == (1, 1, 5)
    w = torch.full((4096,), 1.0 + 2 ** -7, dtype=torch.bfloat16)  # a bf16 sum would lose the 2^-7
    with dumper(dump_path=str(tmp_path / "bf16b"), stats_only=True):
        w * 1
    t = next(t for t in manifest(tmp_path / "bf16b")[0]["tensors"] if t["key"] == "output.0")
    assert t["mean"] == 1.0 + 2 ** -7 and abs(t["norm"] - 64 * (1.0 + 2 ** -7)) < 1e-9
    # The original tool's acl.json keys: only addmm, outputs only, into the configured path.
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps({"dump_path": str(tmp_path / "acl"), "dump_mode": "output",
                               "dump_list": ["addmm"], "dump_op_switch": "on"}))
    with dumper(config=str(acl)):
        m(x)
    ops = manifest(tmp_path / "acl")
    assert [o["name"] for o in ops] == ["aten::addmm"]
    assert [t["key"] for t in ops[0]["tensors"]] == ["output.0"]
    acl.write_text(json.dumps({"dump_path": str(tmp_path / "off"), "dump_op_switch": "off"}))
    with dumper(config=str(acl)):
        m(x)
    assert not (tmp_path / "off").exists()


def test_extract_by_index_and_paths_out_of_the_dump_are_refused(tmp_path, portkit):
    ops = [("aten::op%d" % i, {"output.0": np.full(3, i, np.float32)}) for i in range(12)]
    write_dump(tmp_path / "d", ops)
    res = run([portkit, "extract", "-i", str(tmp_path / "d"), "-o", str(tmp_path / "one"), "-s", "1"])
    assert res.returncode == 0, res.stderr
    assert [o["name"] for o in manifest(tmp_path / "one")] == ["aten::op1"]  # not op10, op11
    text = (tmp_path / "d" / "manifest.jsonl").read_text().replace('"op_000003.safetensors"', '"../../etc/passwd"')
    (tmp_path / "d" / "manifest.jsonl").write_text(text)
    res = run([portkit, "compare", str(tmp_path / "d"), str(tmp_path / "d"), "-o", str(tmp_path / "cmp")])
    assert res.returncode == 2 and "manifest.jsonl:4: not a manifest record" in res.stderr
