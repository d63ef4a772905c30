"""Element types beyond torch 1.13's: fp8 (e4m3fn, e5m2; torch 2.1+) and uint16/32/64 (torch 2.3+).
The dumper keeps them bit for bit, `portkit compare` compares them and `portkit convert` writes
their values; a dtype safetensors cannot hold is listed with a note and reported, never dropped.
The safetensors-level test runs on every torch (numpy writes the files)."""
import csv
import json
import os
import sys
import warnings

import numpy as np
import pytest
import torch

from conftest import HERE, run

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from portkit import safetensors_io  # noqa: E402
from portkit.torch import dumper  # noqa: E402
dumper_module = sys.modules["portkit.torch.dumper"]  # the module (portkit.torch.dumper is the class)

HAS_FP8 = hasattr(torch, "float8_e4m3fn") and hasattr(torch, "float8_e5m2")
HAS_UINT = all(hasattr(torch, n) for n in ("uint16", "uint32", "uint64"))
needs_torch2 = pytest.mark.skipif(not (HAS_FP8 and HAS_UINT), reason="torch %s has no fp8 / uint16-64" % torch.__version__)

VALUES = [0.0, 0.5, -3.0, 448.0, 1e-3, -240.0, 2.0 ** -9, 100.0, float("nan")]
U64 = [2 ** 64 - 1, 5, 0, 2 ** 40 + 3]


def manifest(path):
    with open(os.path.join(path, "manifest.jsonl")) as f:
        return [json.loads(line) for line in f]


def program(scale):
    """fp8 and unsigned tensors made by aten operators (recorded by the dumper)."""
    x = torch.tensor(VALUES) * scale
    big = torch.tensor([-1, 5, 0, 2 ** 40 + 3], dtype=torch.int64)
    return {
        "F8_E4M3": lambda: x.to(torch.float8_e4m3fn),
        "F8_E5M2": lambda: x.to(torch.float8_e5m2),
        "U16": lambda: (big & 0xFFFF).to(torch.uint16),
        "U32": lambda: (big & 0xFFFFFFFF).to(torch.uint32),
        "U64": lambda: big.view(torch.uint64).clone(),
        "complex64": lambda: torch.complex(x, x) * 2,
    }


def dump(path, scale=1.0):
    made = {}
    with dumper(dump_path=str(path), dump_mode="output"):
        for name, make in program(scale).items():
            made[name] = make()
    return made


def outputs_by_dtype(path):
    found = {}
    for op in manifest(path):
        for t in op["tensors"]:
            found.setdefault(t["dtype"], (op, t))
    return found


def bits(t):
    """The exact bytes of a tensor, as a numpy array of same-size signed integers."""
    view = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(view).numpy()


@needs_torch2
def test_dumper_keeps_fp8_and_unsigned_tensors_bit_for_bit(tmp_path):
    made = dump(tmp_path / "d")
    found = outputs_by_dtype(tmp_path / "d")
    for st in ("F8_E4M3", "F8_E5M2", "U16", "U32", "U64"):
        assert st in found, (st, sorted(found))
        op, info = found[st]
        back = safetensors_io.read_torch(str(tmp_path / "d" / op["file"]), {info["key"]})[info["key"]]
        assert back.dtype == made[st].dtype
        assert np.array_equal(bits(back), bits(made[st])), st
        # Statistics from the exact values (fp8 has a NaN here: max/min/mean then say so).
        expected = made[st].double()
        if st.startswith("U"):
            assert info["max"] == float(expected.max()) and info["min"] == float(expected.min())
        else:
            assert info["nan"] == int(torch.isnan(expected).sum()) == 1
    assert found["U64"][1]["max"] == float(2 ** 64 - 1)
    # The reader without torch (numpy): unsigned exact, fp8 widened exactly to float32.
    op, info = found["U64"]
    assert safetensors_io.read(str(tmp_path / "d" / op["file"]))[info["key"]].tolist() == U64
    for st in ("F8_E4M3", "F8_E5M2"):
        op, info = found[st]
        widened = safetensors_io.read(str(tmp_path / "d" / op["file"]))[info["key"]]
        np.testing.assert_array_equal(widened, made[st].float().numpy())


@needs_torch2
def test_a_dtype_safetensors_cannot_hold_is_listed_with_a_note(tmp_path):
    dump(tmp_path / "d")
    op, info = outputs_by_dtype(tmp_path / "d")["complex64"]
    assert info["shape"] == [len(VALUES)] and "complex64" in info["note"]


@needs_torch2
def test_compare_and_convert_handle_fp8_and_unsigned(tmp_path, portkit):
    ref = dump(tmp_path / "ref")
    dump(tmp_path / "tgt", scale=1.01)
    res = run([portkit, "compare", str(tmp_path / "ref"), str(tmp_path / "tgt"), "-o", str(tmp_path / "cmp")])
    assert res.returncode in (0, 1), res.stderr
    with open(tmp_path / "cmp" / "compare_result.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    by_dtype = {}
    for r in rows:
        by_dtype.setdefault(r["NPU Dtype"], []).append(r)
    for st in ("F8_E4M3", "F8_E5M2", "U16", "U32", "U64"):
        assert st in by_dtype, (st, sorted(by_dtype))
        for r in by_dtype[st]:
            assert r["Accuracy Reached or Not"] in ("Yes", "No"), r  # compared, not skipped
    # Unsigned values are scale-independent here: identical in both runs.
    for st in ("U16", "U32", "U64"):
        assert all(float(r["MaxAbsErr"]) == 0.0 for r in by_dtype[st]), st
    # The complex tensors have no data: their rows are there, uncompared, with a reason.
    complex_rows = [r for r in by_dtype["complex64"] if ".output." in r["NPU Name"]]
    assert len(complex_rows) == 2
    assert all(r["Accuracy Reached or Not"] not in ("Yes", "No") and r["Err_message"] for r in complex_rows)

    res = run([portkit, "convert", "-d", str(tmp_path / "ref"), "-out", str(tmp_path / "npy")])
    assert res.returncode == 0, res.stderr
    found = outputs_by_dtype(tmp_path / "ref")
    for st, np_dtype in (("U16", np.uint16), ("U32", np.uint32), ("U64", np.uint64), ("F8_E4M3", np.float32),
                         ("F8_E5M2", np.float32)):
        op, info = found[st]
        stem = "%d_%s_%s" % (op["index"], op["name"].replace(":", "_"), op["phase"])
        back = np.load(str(tmp_path / "npy" / ("%s.%s.npy" % (stem, info["key"]))))
        assert back.dtype == np_dtype, st
        expected = ref[st].float().numpy() if st.startswith("F8") else bits(ref[st]).view(np_dtype)
        np.testing.assert_array_equal(back, expected)


def test_convert_reads_fp8_and_unsigned_safetensors_on_any_torch(tmp_path, portkit):
    """Dump files with these dtypes written by numpy alone: the C++ reader decodes them exactly."""
    d = tmp_path / "dump"
    d.mkdir()
    e4m3 = np.array([0x00, 0x38, 0xC4, 0x7E, 0x7F, 0x01], dtype=np.uint8)  # 0, 1, -3, 448, nan, 2^-9
    e5m2 = np.array([0x00, 0x3C, 0xC2, 0x7B, 0x7C, 0x01], dtype=np.uint8)  # 0, 1, -3, 57344, inf, 2^-16
    tensors = {"output.0": ("U16", np.array([0, 1, 65535], dtype=np.uint16)),
               "output.1": ("U32", np.array([0, 4294967295, 7], dtype=np.uint32)),
               "output.2": ("U64", np.array(U64, dtype=np.uint64)),
               "output.3": ("F8_E4M3", e4m3), "output.4": ("F8_E5M2", e5m2)}
    safetensors_io.write(str(d / "op_000000.safetensors"),
                         [(k, st, a.shape, a.tobytes()) for k, (st, a) in tensors.items()])
    entry = {"index": 0, "name": "aten::demo", "kind": "op", "phase": "forward", "module": "", "stack": "",
             "overflow": False, "file": "op_000000.safetensors",
             "tensors": [{"key": k, "dtype": st, "shape": list(a.shape)} for k, (st, a) in tensors.items()]}
    (d / "manifest.jsonl").write_text(json.dumps(entry) + "\n")
    for kind in ("npy", "txt"):
        res = run([portkit, "convert", "-d", str(d), "-out", str(tmp_path / kind), "-t", kind])
        assert res.returncode == 0, res.stderr
    expected = {"output.0": [0, 1, 65535], "output.1": [0, 4294967295, 7], "output.2": U64,
                "output.3": [0.0, 1.0, -3.0, 448.0, float("nan"), 2.0 ** -9],
                "output.4": [0.0, 1.0, -3.0, 57344.0, float("inf"), 2.0 ** -16]}
    for key, values in expected.items():
        back = np.load(str(tmp_path / "npy" / ("0_aten__demo_forward.%s.npy" % key)))
        np.testing.assert_array_equal(back, np.array(values, dtype=back.dtype))
        if key in ("output.0", "output.1", "output.2"):
            assert back.dtype == tensors[key][1].dtype  # exact unsigned types, not widened
    np.testing.assert_array_equal(safetensors_io.read(str(d / "op_000000.safetensors"))["output.3"],
                                  np.array(expected["output.3"], dtype=np.float32))
    txt = np.loadtxt(str(tmp_path / "txt" / "0_aten__demo_forward.output.1.txt"))
    assert txt.tolist() == [0.0, 4294967295.0, 7.0]
    # compare of the dump against itself: every tensor compared, all equal.
    res = run([portkit, "compare", str(d), str(d), "-o", str(tmp_path / "cmp")])
    assert res.returncode == 0, res.stderr
    with open(tmp_path / "cmp" / "compare_result.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["NPU Dtype"] for r in rows) == ["F8_E4M3", "F8_E5M2", "U16", "U32", "U64"]
    assert all(r["Accuracy Reached or Not"] == "Yes" for r in rows), rows


def test_autocast_queries_work_without_deprecation_warnings(tmp_path):
    """fp16 autocast detection (the dumper's overflow rule) through the API of the running torch."""
    assert not dumper_module._computing_in_fp16()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert not dumper_module._computing_in_fp16()
        with dumper(dump_path=str(tmp_path / "d")):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                torch.ones(2, 2) @ torch.ones(2, 2)
    assert not [w for w in caught if "autocast" in str(w.message)], [str(w.message) for w in caught]
    if torch.__version__.startswith("2.") and hasattr(torch, "get_autocast_dtype"):
        with torch.autocast("cpu", dtype=torch.float16):
            assert dumper_module._computing_in_fp16()
