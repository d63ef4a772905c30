"""msprobe interop: portkit compare reads msprobe dumps (statistics mode from dump.json, tensor mode
from its dump_tensor_data/ .pt and .npy files, natively, and through `python -m portkit.msprobe`),
writes msprobe's compare layout (`--format msprobe`), and portkit's dumper takes msprobe's config.json.

Two sources of msprobe dumps: a writer of our own (always: dump.json, stack.json and
dump_tensor_data/*.pt or *.npy in msprobe's layout), and msprobe itself when mindstudio-probe can be
imported (by this interpreter, or with PYTHONPATH=$PORTKIT_MSPROBE_PYTHONPATH: `pip install --target
DIR mindstudio-probe==26.2.0`); then its own compare runs on the same dump pair and the verdicts are
set side by side (differences explained in docs/accuracy.md, "msprobe dumps")."""
import csv
import glob
import json
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

from conftest import HERE, run

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from portkit.torch import dumper  # noqa: E402

PYTHON_DIR = os.path.join(HERE, "..", "..", "python")
# msprobe 26's compare columns (msprobe/core/common/const.py: BASIC_INFO + compare index + SUMMARY_INFO
# + EXTRACT_INDEX + stack + Data_name), as its own compare wrote them in the run recorded in docs.
MSPROBE_COLUMNS = [
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
    "NPU Requires_grad", "Bench Requires_grad", "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr",
    "One Thousandth Err Ratio", "Five Thousandths Err Ratio", "NPU max", "NPU min", "NPU mean", "NPU l2norm",
    "Bench max", "Bench min", "Bench mean", "Bench l2norm", "Requires_grad Consistent", "Result", "Err_message",
    "NPU_Stack_Info", "Data_name"]


# -- a writer of msprobe's layout -------------------------------------------------------------------------

def _record(t, data_name=None):
    x = t.detach().double()
    rec = {"type": "torch.Tensor", "dtype": str(t.dtype), "shape": list(t.shape), "Max": float(x.max()),
           "Min": float(x.min()), "Mean": float(x.mean()), "Norm": float(x.norm()),
           "requires_grad": bool(t.requires_grad)}
    if data_name:
        rec["data_name"] = data_name
    return rec


def write_msprobe_dump(folder, calls, tensors=True, fmt="pt"):
    """calls: [(call name, {"input_args": [tensors], "output": [tensors]})] -> folder/dump.json (+ data files).

    fmt "pt": torch.save of each tensor as it is (a view keeps its whole storage, its offset and strides,
    as torch.save writes it); "npy": numpy.save of tensor.numpy() (msprobe's numpy flavour; a transposed
    view is written in Fortran order; bf16, which numpy lacks, as float32)."""
    data_dir = os.path.join(folder, "dump_tensor_data")
    os.makedirs(data_dir, exist_ok=True)
    data = {}
    for call, parts in calls:
        entry = {}
        for part, values in parts.items():
            role = "input" if part.startswith("input") else "output"
            recs = []
            for i, t in enumerate(values):
                name = "%s.%s.%d.%s" % (call, role, i, fmt) if tensors else None
                if name and fmt == "pt":
                    torch.save(t.detach(), os.path.join(data_dir, name))
                elif name:
                    x = t.detach()
                    np.save(os.path.join(data_dir, name), (x.float() if x.dtype == torch.bfloat16 else x).numpy())
                recs.append(_record(t, name))
            entry[part] = recs
        entry.setdefault("input_kwargs", {})
        data[call] = entry
    doc = {"task": "tensor" if tensors else "statistics", "level": "L1", "framework": "pytorch",
           "dump_data_dir": data_dir if tensors else None, "data": data}
    with open(os.path.join(folder, "dump.json"), "w") as f:
        json.dump(doc, f)
    with open(os.path.join(folder, "stack.json"), "w") as f:
        json.dump({"0": [[c for c, _ in calls], ["File model.py, line 7, in forward"]]}, f)


def tiny_run(fault):
    """x -> linear -> relu -> linear -> tanh as msprobe names the calls; `fault` adds 1e-2 noise to relu."""
    torch.manual_seed(0)
    w1, b1 = torch.randn(16, 8, requires_grad=True), torch.randn(16, requires_grad=True)
    w2, b2 = torch.randn(4, 16, requires_grad=True), torch.randn(4, requires_grad=True)
    x = torch.randn(10, 8)
    h = torch.nn.functional.linear(x, w1, b1)
    r = torch.relu(h)
    if fault:
        r = r + 1e-2 * r.detach().abs().mean() * torch.randn(r.shape, generator=torch.Generator().manual_seed(3))
    y = torch.nn.functional.linear(r, w2, b2)
    z = torch.tanh(y)
    return [("Functional.linear.0.forward", {"input_args": [x, w1, b1], "output": [h]}),
            ("Functional.relu.0.forward", {"input_args": [h], "output": [r]}),
            ("Functional.linear.1.forward", {"input_args": [r, w2, b2], "output": [y]}),
            ("Torch.tanh.0.forward", {"input_args": [y], "output": [z]})]


def compare(portkit, ref, tgt, out, *extra):
    res = run([portkit, "compare", str(ref), str(tgt), "-o", str(out)] + list(extra))
    assert res.returncode == 0, res.stdout + res.stderr
    return res, json.loads((out / "compare_result.json").read_text())


def convert(src, out, python=None):
    res = subprocess.run([python or sys.executable, "-m", "portkit.msprobe", str(src), str(out)], cwd=PYTHON_DIR,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def test_statistics_and_tensor_mode_dumps_of_our_writer(tmp_path, portkit):
    for side, fault in (("ref", False), ("tgt", True)):
        write_msprobe_dump(str(tmp_path / "tensor" / side), tiny_run(fault))
        write_msprobe_dump(str(tmp_path / "stats" / side), tiny_run(fault), tensors=False)
    # Statistics mode: judged from dump.json's Max/Min/Mean/Norm.
    _, report = compare(portkit, tmp_path / "stats" / "ref", tmp_path / "stats" / "tgt", tmp_path / "c1")
    rows = report["rows"]
    assert rows and all("statistics" in r for r in rows if r["verdict"] in ("Yes", "No"))
    # Tensor mode read natively: the tensors of dump_tensor_data/*.pt; the culprit is the relu.
    res, native = compare(portkit, tmp_path / "tensor" / "ref", tmp_path / "tensor" / "tgt", tmp_path / "c2")
    assert "not read" not in res.stderr and "compared by the statistics" not in res.stderr
    assert native["first_divergence"]["name"] == "Functional.relu", native["first_divergence_evidence"]
    assert native["rows"] and all("statistics" not in r for r in native["rows"])
    # Tensor mode converted: the same tensors; the culprit is the relu.
    for side in ("ref", "tgt"):
        convert(tmp_path / "tensor" / side, tmp_path / ("conv_" + side))
    _, report = compare(portkit, tmp_path / "conv_ref", tmp_path / "conv_tgt", tmp_path / "c3", "--format",
                        "csv,json,msprobe")
    assert report["first_divergence"]["name"] == "Functional.relu", report["first_divergence_evidence"]
    assert all("statistics" not in r for r in report["rows"])
    assert [r["verdict"] for r in report["rows"]] == [r["verdict"] for r in native["rows"]]
    with open(tmp_path / "c3" / "compare_result_msprobe.csv") as f:
        table = list(csv.reader(f))
    assert table[0] == MSPROBE_COLUMNS
    by_name = {r[0]: dict(zip(table[0], r)) for r in table[1:]}
    relu = by_name["Functional.relu.0.forward.output.0"]
    assert relu["Data_name"] == "['Functional.relu.0.forward.output.0.pt', 'Functional.relu.0.forward.output.0.pt']"
    assert by_name["Functional.linear.0.forward.input.1"]["NPU Requires_grad"] == "True"
    assert by_name["Functional.linear.0.forward.input.0"]["NPU Requires_grad"] == "False"
    assert by_name["Functional.linear.0.forward.input.0"]["Result"] == "pass"
    # The call's stack (stack.json) on its first row, as msprobe writes it: a Python list of the lines.
    assert by_name["Functional.linear.0.forward.input.0"]["NPU_Stack_Info"] == "['File model.py, line 7, in forward']"
    assert by_name["Functional.linear.0.forward.input.1"]["NPU_Stack_Info"] == "N/A"
    assert by_name["Functional.linear.0.forward.input.0"]["NPU Dtype"] == "torch.float32"


# -- tensor mode read natively (.pt written by torch.save, .npy by numpy.save) --------------------------------

def mixed_run(fault):
    """Calls whose saved tensors cover what torch.save writes: a transposed view at an offset and a slice at an
    offset of larger storages (saved as views: the file keeps the whole storage), fp16, bf16, int64, bool and a
    0-d tensor. `fault` adds noise to the bf16 matmul's output."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 8, generator=g)
    view_t = base[1:5].t()  # (8, 4), strides (1, 8), storage offset 8: not C-contiguous (Fortran order in .npy)
    flat = base.view(-1)[5:29]  # contiguous, storage offset 5 of 48
    w = torch.randn(3, 4, generator=g)
    h = torch.nn.functional.linear(view_t, w)
    h16 = h.half()
    wb = torch.randn(3, 5, generator=g).bfloat16()
    mb = h.bfloat16() @ wb
    if fault:
        mb = (mb.float() + 0.05 * torch.randn(mb.shape, generator=torch.Generator().manual_seed(3))).bfloat16()
    idx = mb.float().argmax(dim=1)
    return [("Functional.linear.0.forward", {"input_args": [view_t, w], "output": [h]}),
            ("Tensor.half.0.forward", {"input_args": [h], "output": [h16]}),
            ("Torch.matmul.0.forward", {"input_args": [h.bfloat16(), wb], "output": [mb]}),
            ("Tensor.argmax.0.forward", {"input_args": [mb.float()], "output": [idx]}),
            ("Tensor.gt.0.forward", {"input_args": [flat], "output": [flat > 0]}),
            ("Tensor.sum.0.forward", {"input_args": [flat], "output": [flat.sum()]})]


def _metric_rows(out_dir):
    """({NPU Name: row of compare_result_msprobe.csv}, {npu_name: row of compare_result.json}, the JSON report)."""
    rows = {r["NPU Name"]: r for r in _read_csv(out_dir / "compare_result_msprobe.csv")}
    report = json.loads((out_dir / "compare_result.json").read_text())
    return rows, {j["npu_name"]: j for j in report["rows"]}, report


METRIC_COLUMNS = ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                  "Five Thousandths Err Ratio", "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max",
                  "Bench min", "Bench mean", "Bench l2norm", "Result", "Err_message", "RMSE", "MeanAbsErr",
                  "MeanRelErr", "KLDivergence", "MaxULPErr", "SmallValueErrRatio", "verdict", "err_message"]


# The msprobe layout's columns that depend on the tensor data only (its statistics columns print the
# dump's own statistics, which a conversion recomputes).
MSPROBE_DATA_COLUMNS = ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                        "Five Thousandths Err Ratio", "Result", "Err_message"]


def _same_msprobe_rows(native, other, what):
    """The tensor rows of two msprobe-layout CSVs agree on every data column; the native one may also
    list non-tensor arguments, which a converted dump does not keep."""
    assert set(other) <= set(native), (what, sorted(set(other) - set(native)))
    for name in other:
        for col in MSPROBE_DATA_COLUMNS:
            assert native[name][col] == other[name][col], (what, name, col, native[name][col], other[name][col])


def _same_metrics(a, b, what):
    assert set(a) == set(b), (what, sorted(set(a) ^ set(b)))
    for name in a:
        for col in METRIC_COLUMNS:
            x, y = a[name].get(col), b[name].get(col)
            try:
                fx, fy = float(x), float(y)
            except (TypeError, ValueError):
                assert x == y, (what, name, col, x, y)
                continue
            assert fx == fy or (np.isnan(fx) and np.isnan(fy)), (what, name, col, x, y)  # the same bits


@pytest.mark.parametrize("fmt", ["pt", "npy"])
def test_tensor_mode_is_read_natively_as_either_side(tmp_path, portkit, fmt):
    for side, fault in (("ref", False), ("tgt", True)):
        write_msprobe_dump(str(tmp_path / side), mixed_run(fault), fmt=fmt)
        convert(tmp_path / side, tmp_path / ("conv_" + side))
    if fmt == "pt":
        # The fixture is what it claims: the view's file holds the whole 6x8 storage, not the 4x6 view.
        with zipfile.ZipFile(tmp_path / "ref" / "dump_tensor_data" / "Functional.linear.0.forward.input.0.pt") as z:
            (record,) = [i for i in z.infolist() if i.filename.endswith("/data/0")]
            assert record.file_size == 48 * 4 and record.compress_type == zipfile.ZIP_STORED
    else:
        header = (tmp_path / "ref" / "dump_tensor_data" / "Functional.linear.0.forward.input.0.npy").read_bytes()[:128]
        assert b"'fortran_order': True" in header
    runs = {}
    for label, ref, tgt in (("native", "ref", "tgt"), ("converted", "conv_ref", "conv_tgt"),
                            ("msprobe ref, portkit tgt", "ref", "conv_tgt"),
                            ("portkit ref, msprobe tgt", "conv_ref", "tgt")):
        out = tmp_path / ("cmp_" + label.replace(" ", "_").replace(",", ""))
        res, _ = compare(portkit, tmp_path / ref, tmp_path / tgt, out, "--format", "json,msprobe")
        assert "not read" not in res.stderr and "compared by the statistics" not in res.stderr, res.stderr
        runs[label] = _metric_rows(out)
    rows, json_rows, report = runs["native"]
    assert all("statistics" not in r for r in report["rows"])
    assert "Unmatched" not in report["verdicts"], report["verdicts"]
    for label in ("converted", "msprobe ref, portkit tgt", "portkit ref, msprobe tgt"):
        _same_msprobe_rows(rows, runs[label][0], label)
        _same_metrics(json_rows, runs[label][1], label)
    # Every tensor is compared from its data, the 0-d loss, the int64 and bool outputs included.
    for name in ("Functional.linear.0.forward.input.0", "Tensor.sum.0.forward.output.0",
                 "Tensor.argmax.0.forward.output.0", "Tensor.gt.0.forward.output.0", "Torch.matmul.0.forward.output.0"):
        assert rows[name]["Cosine"] not in ("", "N/A"), (name, rows[name])
    assert float(rows["Torch.matmul.0.forward.output.0"]["MaxAbsErr"]) > 0  # the planted fault
    assert rows["Functional.linear.0.forward.input.0"]["Result"] == "pass"
    # Against numpy in float64 on the same tensors: the gathered view and the bf16 output.
    ref, tgt = mixed_run(False), mixed_run(True)
    for call, part, i in (("Functional.linear.0.forward", "input_args", 0), ("Torch.matmul.0.forward", "output", 0)):
        a = tgt[[c for c, _ in tgt].index(call)][1][part][i].double().numpy().ravel()
        b = ref[[c for c, _ in ref].index(call)][1][part][i].double().numpy().ravel()
        row = rows["%s.%s.%d" % (call, "input" if part.startswith("input") else "output", i)]
        cos = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
        assert abs(float(row["Cosine"]) - cos) <= 1e-6, (call, row["Cosine"], cos)  # msprobe's rounding
        assert abs(float(row["MaxAbsErr"]) - float(np.max(np.abs(a - b)))) <= 1e-12, call
        for col, v in (("NPU max", a.max()), ("NPU min", a.min()), ("NPU mean", a.mean()), ("NPU l2norm", np.linalg.norm(a)),
                       ("Bench max", b.max()), ("Bench l2norm", np.linalg.norm(b))):
            assert abs(float(row[col]) - v) <= 1e-9 * max(1.0, abs(v)), (call, col, row[col], v)


def _evil_pickle(marker):
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(marker),))
    return pickle.dumps(Evil(), protocol=2)


def _rezip(src, dst, change):
    """Copies the torch.save archive `src` to `dst` (stored entries), `change(name, bytes)` giving each new entry."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = change(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)


def test_hostile_and_broken_tensor_files_are_read_errors(tmp_path, portkit):
    for side in ("ref", "tgt"):
        write_msprobe_dump(str(tmp_path / side), tiny_run(False))
    data = tmp_path / "tgt" / "dump_tensor_data"
    marker = tmp_path / "PWNED"
    payload = _evil_pickle(marker)
    victims = {
        # data.pkl replaced by a pickle that calls os.system when unpickled.
        "Functional.linear.0.forward.input.0.pt": lambda p: _rezip(
            str(p) + ".orig", p, lambda n, b: payload if n.endswith("data.pkl") else b),
        # Cut in half.
        "Functional.relu.0.forward.output.0.pt": lambda p: p.write_bytes(open(str(p) + ".orig", "rb").read()[:300]),
        # The storage record shorter than the sizes data.pkl gives.
        "Functional.linear.1.forward.input.1.pt": lambda p: _rezip(
            str(p) + ".orig", p, lambda n, b: b[:8] if "/data/" in n else b),
    }
    for name, damage in victims.items():
        path = data / name
        os.rename(path, str(path) + ".orig")
        damage(path)
    (data / "Torch.tanh.0.forward.output.0.pt").unlink()  # a missing data file
    out = tmp_path / "out"
    res = run([portkit, "compare", str(tmp_path / "ref"), str(tmp_path / "tgt"), "-o", str(out)])
    assert res.returncode == 2, res.stdout + res.stderr
    assert not marker.exists(), "the pickle was run"
    report = json.loads((out / "compare_result.json").read_text())
    messages = {r["npu_name"]: r["err_message"] for r in report["rows"] if r["verdict"] == "Unmatched"}
    text = "\n".join(messages.values())
    assert "Functional.linear.0.forward.input.0.pt: " in text and "refers to posix.system, which a saved tensor does " \
        "not use: refused, nothing in the file was run" in text, text
    assert "Functional.relu.0.forward.output.0.pt: no zip end-of-directory record: truncated" in text, text
    assert "Functional.linear.1.forward.input.1.pt: " in text and "the header lies, or the file is truncated" in text, text
    assert "Torch.tanh.0.forward.output.0.pt" in text, text
    # The other tensors are still compared from their data.
    assert sum(1 for r in report["rows"] if r["verdict"] == "Yes") >= 8
    # The payload is live: Python's own unpickler would have run it.
    pickle.loads(payload)
    assert marker.exists()


def test_the_dumper_takes_msprobe_config_json(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"task": "statistics", "dump_path": str(tmp_path / "d"), "rank": [], "step": [1],
                               "level": "L1", "statistics": {"scope": [], "list": ["addmm", "relu"],
                                                             "data_mode": ["forward"], "summary_mode": "md5"}}))
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    for step in range(3):
        with dumper(config=str(cfg), step=step):
            net(torch.randn(3, 4)).sum().backward()
    assert sorted(os.listdir(tmp_path / "d")) == ["step1"]  # only the listed step, in msprobe's layout
    ops = [json.loads(line) for line in open(tmp_path / "d" / "step1" / "rank0" / "manifest.jsonl")]
    assert {o["name"] for o in ops} == {"aten::addmm", "aten::relu"} and {o["phase"] for o in ops} == {"forward"}
    assert all(o["file"] is None and all("crc32" in t for t in o["tensors"]) for o in ops)  # statistics + md5
    # scope: from the first call naming its first entry to the first naming its second.
    cfg.write_text(json.dumps({"task": "tensor", "dump_path": str(tmp_path / "s"), "level": "L1",
                               "tensor": {"scope": ["aten::relu", "aten::addmm"], "list": []}}))
    with dumper(config=str(cfg)):
        net(torch.randn(3, 4))
    ops = [json.loads(line) for line in open(tmp_path / "s" / "step0" / "rank0" / "manifest.jsonl")]
    assert [o["name"] for o in ops] == ["aten::relu", "aten::addmm"] and ops[0]["file"]
    cfg.write_text(json.dumps({"task": "statistics", "level": "L7"}))
    with pytest.raises(ValueError, match="level"):
        dumper(config=str(cfg))


# -- against msprobe itself -------------------------------------------------------------------------------

MSPROBE_RUN = r"""
import sys, torch
from msprobe.pytorch import PrecisionDebugger, seed_all
cfg, scale = sys.argv[1], float(sys.argv[2])
seed_all(1234)
debugger = PrecisionDebugger(config_path=cfg)
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4), torch.nn.Tanh())
with torch.no_grad():
    m[2].weight.mul_(scale)
x = torch.randn(10, 8)
debugger.start(model=m)
m(x).sum().backward()
debugger.stop()
debugger.step()
"""

MSPROBE_COMPARE = r"""
import sys
from msprobe.pytorch.compare.pt_compare import pt_compare
tgt, ref, out = sys.argv[1:4]
pt_compare({"npu_path": tgt + "/dump.json", "bench_path": ref + "/dump.json", "stack_path": tgt + "/stack.json",
            "is_print_compare_log": True}, out)
"""


def _msprobe_python():
    """(interpreter, environment) that can import msprobe, or None."""
    env = dict(os.environ)
    extra = os.environ.get("PORTKIT_MSPROBE_PYTHONPATH")
    if extra:
        env["PYTHONPATH"] = extra + os.pathsep + env.get("PYTHONPATH", "")
    try:
        ok = subprocess.run([sys.executable, "-c", "import msprobe.pytorch"], env=env, capture_output=True,
                            timeout=300).returncode == 0
    except subprocess.TimeoutExpired:
        ok = False
    return (sys.executable, env) if ok else None


def _read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


FIXTURES = os.path.join(HERE, "fixtures", "msprobe_26_2_0")
# Columns whose values come from portkit's own judgement, not msprobe's rules (docs/accuracy.md,
# "msprobe's compare layout"): Result and Err_message.
JUDGEMENT_COLUMNS = ("Result", "Err_message")


def assert_reads_like_msprobe(mine_csv, theirs_csv):
    """portkit's compare_result_msprobe.csv against msprobe's own compare CSV of the same dumps: the same
    header, the same rows in the same order, and every cell the same text, except the judgement
    columns and, in tensor mode, MaxRelativeErr (portkit guards |N - B| / |B| with 1e-10 where msprobe
    adds float64's epsilon only where B is 0: equal to 1e-6 relative)."""
    with open(mine_csv) as f:
        mine = list(csv.reader(f))
    with open(theirs_csv) as f:
        theirs = list(csv.reader(f))
    assert mine[0] == theirs[0], (mine[0], theirs[0])
    header = theirs[0]
    assert [r[0] for r in mine[1:]] == [r[0] for r in theirs[1:]]
    tensor_mode = "Cosine" in header
    checked = 0
    for m, t in zip(mine[1:], theirs[1:]):
        for col, a, b in zip(header, m, t):
            if col in JUDGEMENT_COLUMNS:
                continue
            if col == "MaxRelativeErr" and tensor_mode and a != b:
                assert abs(float(a) - float(b)) <= 1e-6 * max(1e-12, abs(float(b))), (m[0], col, a, b)
            else:
                assert a == b, (m[0], col, a, b)
            checked += 1
    return checked


@pytest.mark.parametrize("mode", ["statistics", "tensor"])
def test_msprobe_layout_reads_like_msprobes_own_csv(tmp_path, portkit, mode):
    """Committed dumps msprobe 26.2.0 wrote, and the CSV its own compare wrote for them
    (fixtures/msprobe_26_2_0/README.md): portkit's --format msprobe reads the same, value by value —
    torch dtype names, percent strings, stacks, rows for the non-tensor arguments (relu's inplace
    flag, the 0.0 of `* 0.0`, pow's exponent) and None gradients, the target-only Tensor.pow under
    its own name with N/A bench columns, `unsupported` for 0-d tensors."""
    base = os.path.join(FIXTURES, mode)
    compare(portkit, os.path.join(base, "ref"), os.path.join(base, "tgt"), tmp_path / "out", "--format", "json,msprobe")
    theirs = os.path.join(base, "msprobe_compare_result.csv")
    checked = assert_reads_like_msprobe(tmp_path / "out" / "compare_result_msprobe.csv", theirs)
    with open(theirs) as f:
        rows = list(csv.DictReader(f))
    assert checked == len(rows) * (len(rows[0]) - len(JUDGEMENT_COLUMNS))
    names = {r["NPU Name"]: r for r in rows}
    # What the rows cover, so the fixture keeps exercising each case.
    assert names["Functional.relu.0.forward.input.inplace"]["NPU Dtype"] == "<class 'bool'>"
    assert names["Tensor.pow.0.forward.input.0"]["Bench Name"] == "N/A"
    assert names["Functional.linear.0.backward.output.1"]["NPU max"] == "None"
    if mode == "statistics":
        assert names["Functional.linear.0.forward.input.1"]["MaxRelativeErr"].endswith("%")


@pytest.mark.skipif(int(torch.__version__.split(".")[0]) < 2, reason="msprobe 26 needs torch 2")
def test_against_msprobe_itself(tmp_path, portkit):
    found = _msprobe_python()
    if found is None:
        pytest.skip("msprobe (mindstudio-probe) is not importable; set PORTKIT_MSPROBE_PYTHONPATH")
    python, env = found
    script, cmp_script = tmp_path / "run.py", tmp_path / "cmp.py"
    script.write_text(MSPROBE_RUN)
    cmp_script.write_text(MSPROBE_COMPARE)
    folders = {}
    for mode in ("tensor", "statistics"):
        for side, scale in (("ref", 1.0), ("tgt", 1.05)):
            cfg = tmp_path / ("%s_%s.json" % (mode, side))
            cfg.write_text(json.dumps({"task": mode, "dump_path": str(tmp_path / mode / side), "rank": [], "step": [],
                                       "level": "L1", mode: {"scope": [], "list": [], "data_mode": ["all"]}}))
            res = subprocess.run([python, str(script), str(cfg), str(scale)], env=env, capture_output=True, text=True,
                                 timeout=600, cwd=str(tmp_path))
            assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
            found_dirs = glob.glob(str(tmp_path / mode / side / "step0" / "*" / "dump.json"))
            assert len(found_dirs) == 1, found_dirs
            folders[mode, side] = os.path.dirname(found_dirs[0])
    summary = {}
    for mode in ("tensor", "statistics"):
        out = tmp_path / ("msprobe_cmp_" + mode)
        out.mkdir()
        res = subprocess.run([python, str(cmp_script), folders[mode, "tgt"], folders[mode, "ref"], str(out)], env=env,
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        theirs = {r["NPU Name"]: r for r in _read_csv(glob.glob(str(out / "compare_result_*.csv"))[0])}
        # Both modes read natively (tensor mode: msprobe's own .pt files); tensor mode also converted by
        # the companion, which must give the very same numbers.
        ref, tgt = folders[mode, "ref"], folders[mode, "tgt"]
        mine_dir = tmp_path / ("portkit_cmp_" + mode)
        res, _ = compare(portkit, ref, tgt, mine_dir, "--format", "json,msprobe")
        assert "compared by the statistics" not in res.stderr, res.stderr
        mine = {r["NPU Name"]: r for r in _read_csv(mine_dir / "compare_result_msprobe.csv")}
        if mode == "tensor":
            conv_dir = tmp_path / "portkit_cmp_converted"
            compare(portkit, convert(ref, tmp_path / "conv_ref"), convert(tgt, tmp_path / "conv_tgt"), conv_dir,
                    "--format", "json,msprobe")
            converted = {r["NPU Name"]: r for r in _read_csv(conv_dir / "compare_result_msprobe.csv")}
            # The conversion keeps the tensors (not the non-tensor arguments, nor msprobe's own statistics).
            assert set(converted) <= set(mine), sorted(set(converted) - set(mine))
            for name, row in converted.items():
                for col in ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                            "Five Thousandths Err Ratio"):
                    assert row[col] == mine[name][col], ("natively and converted", name, col, row[col], mine[name][col])
        # Value by value, as msprobe's own compare wrote them (its rows, its order, its spelling).
        assert_reads_like_msprobe(mine_dir / "compare_result_msprobe.csv", glob.glob(str(out / "compare_result_*.csv"))[0])
        pairs = {}
        for name, m in mine.items():
            t = theirs[name]
            pairs.setdefault((t["Result"], m["Result"]), []).append(name)
        summary[mode] = {"%s/%s" % k: sorted(v) for k, v in pairs.items()}
        # The only disagreements allowed are the ones docs/accuracy.md explains: msprobe marks a whole
        # call by its indicator rules and passes tensors whose values differ; portkit judges each tensor
        # (a 0-d loss by relative error, which msprobe leaves "unsupported").
        for (theirs_result, mine_result), names in pairs.items():
            if theirs_result != mine_result:
                assert (theirs_result, mine_result) in (("pass", "error"), ("pass", "warning"), ("", "pass")), \
                    (theirs_result, mine_result, names)
    report = os.environ.get("PORTKIT_MSPROBE_REPORT")
    if report:
        with open(report, "w") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
