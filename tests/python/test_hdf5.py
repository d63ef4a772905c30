"""portkit convert / extract on HDF5 dumps laid out /op_name/seqid/... (the layout of the PyTorch 1.5
Ascend dumper),
written here with h5py and checked against h5py's own reading."""
import csv
import json
import os

import h5py
import numpy as np
import pytest

from conftest import run

OPS = ("add", "conv2d")
SEQIDS = ("1", "2")


def tensors(op, seq):
    """Inputs fp32, fp16 (with inf/nan/subnormal), bool; outputs int64, fp32 — distinct per op/seqid."""
    k = OPS.index(op) * 10 + int(seq)
    rng = np.random.default_rng(k)
    return {
        "input": [
            rng.standard_normal((2, 3, 4)).astype(np.float32),
            np.array([k, -0.5, np.inf, -np.inf, np.nan, 6e-8, 65504], dtype=np.float16),
            rng.random((3, 2)) > 0.5,
        ],
        "output": [
            np.arange(-3, 3, dtype=np.int64) * k,
            np.float32(k) * np.ones((4,), dtype=np.float32),
        ],
    }


@pytest.fixture()
def dump(tmp_path):
    path = tmp_path / "dump.h5"
    with h5py.File(path, "w") as f:
        for op in OPS:
            for seq in SEQIDS:
                for role, arrays in tensors(op, seq).items():
                    for i, a in enumerate(arrays):
                        f.create_dataset("/%s/%s/%s/%d" % (op, seq, role, i), data=a)
    return path


def load_index(folder):
    with open(os.path.join(folder, "convert_index.csv"), newline="") as f:
        return list(csv.DictReader(f))


def test_convert_writes_every_tensor_exactly(dump, tmp_path, portkit):
    out = tmp_path / "npy"
    res = run([portkit, "convert", "-d", str(dump), "-out", str(out)])
    assert res.returncode == 0, res.stderr
    expected = set()
    for op in OPS:
        for seq in SEQIDS:
            for role, arrays in tensors(op, seq).items():
                for i, a in enumerate(arrays):
                    name = "%s.%s.%s.%d.npy" % (op, seq, role, i)
                    expected.add(name)
                    back = np.load(str(out / name))
                    assert back.dtype == a.dtype, name
                    assert back.shape == a.shape, name
                    assert np.array_equal(back, a, equal_nan=a.dtype.kind == "f"), name
    assert set(os.listdir(out)) == expected | {"convert_index.csv", ".portkit-files"}
    with h5py.File(dump, "r") as f:
        for row in load_index(out):
            data = f[row["HDF5 Path"]][()]
            back = np.load(str(out / row["File"]))
            assert back.dtype == data.dtype and np.array_equal(back, data, equal_nan=data.dtype.kind == "f")


def test_convert_txt_is_the_flattened_values(dump, tmp_path, portkit):
    out = tmp_path / "txt"
    res = run([portkit, "convert", "-d", str(dump), "-out", str(out), "-t", "txt"])
    assert res.returncode == 0, res.stderr
    for role, arrays in tensors("conv2d", "2").items():
        for i, a in enumerate(arrays):
            lines = (out / ("conv2d.2.%s.%d.txt" % (role, i))).read_text().split()
            assert len(lines) == a.size
            np.testing.assert_array_equal(np.array([float(x) for x in lines]), a.astype(np.float64).ravel())


def test_convert_reads_big_tensors_in_pieces(tmp_path, portkit):
    # 20 MiB: more than one read piece (16 MiB), rows of 1000 elements.
    big = np.random.default_rng(7).standard_normal((5000, 1000)).astype(np.float32)
    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("/matmul/0/output/0", data=big, chunks=(64, 1000))
    res = run([portkit, "convert", "-d", str(path), "-out", str(tmp_path / "o")])
    assert res.returncode == 0, res.stderr
    assert np.array_equal(np.load(str(tmp_path / "o" / "matmul.0.output.0.npy")), big)


def test_convert_ascend_dumper_layout(tmp_path, portkit):
    """The Ascend PyTorch 1.5 dumper: datasets named after the arguments, tensor lists as groups of
    `name_i`, bool and uint8 stored as int8 with a DataType attribute, TensorOptions records without
    data (Type 18); plus flat `input.N` datasets and h5py's creation-order groups."""
    path = tmp_path / "ascend.h5"
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((3,), 2.5, dtype=np.float32)
    with h5py.File(path, "w") as f:
        g = f.create_group("/cat/7/input")
        g.create_dataset("tensors/tensors_0", data=x)
        g.create_dataset("tensors/tensors_1", data=x + 1)
        g.create_dataset("dim", data=np.int64(1))
        mask = g.create_dataset("mask", data=np.array([1, 0, 1], dtype=np.int8))
        mask.attrs.create("DataType", 9, dtype=np.int32)
        pix = g.create_dataset("pixels", data=np.array([-56, 100], dtype=np.int8))  # uint8 200, 100
        pix.attrs.create("DataType", 2, dtype=np.int32)
        opts = g.create_dataset("options", shape=(), dtype=np.float32)
        opts.attrs.create("Type", 18, dtype=np.int32)
        f.create_dataset("/cat/7/output/result", data=np.concatenate([x, x + 1], axis=1))
        flat = f.create_group("/mul/0")
        flat.create_dataset("input.1", data=y)
        flat.create_dataset("input.0", data=x)
        flat.create_dataset("output.0", data=x * 2)
        ordered = f.create_group("/sub/3/input", track_order=True)
        ordered.create_dataset("self", data=y)
        ordered.create_dataset("other", data=y * 4)
    out = tmp_path / "o"
    res = run([portkit, "convert", "-d", str(path), "-out", str(out)])
    assert res.returncode == 0, res.stderr
    assert "/cat/7/input/options" in res.stderr and "skipped" in res.stderr
    index = {r["HDF5 Path"]: r["File"] for r in load_index(out)}
    # Natural name order without creation order: dim, mask, options (skipped), pixels, tensors/...
    assert index == {
        "/cat/7/input/dim": "cat.7.input.0.npy",
        "/cat/7/input/mask": "cat.7.input.1.npy",
        "/cat/7/input/pixels": "cat.7.input.2.npy",
        "/cat/7/input/tensors/tensors_0": "cat.7.input.3.npy",
        "/cat/7/input/tensors/tensors_1": "cat.7.input.4.npy",
        "/cat/7/output/result": "cat.7.output.0.npy",
        "/mul/0/input.0": "mul.0.input.0.npy",
        "/mul/0/input.1": "mul.0.input.1.npy",
        "/mul/0/output.0": "mul.0.output.0.npy",
        "/sub/3/input/self": "sub.3.input.0.npy",
        "/sub/3/input/other": "sub.3.input.1.npy",
    }
    mask = np.load(str(out / "cat.7.input.1.npy"))
    assert mask.dtype == np.bool_ and mask.tolist() == [True, False, True]
    pixels = np.load(str(out / "cat.7.input.2.npy"))
    assert pixels.dtype == np.uint8 and pixels.tolist() == [200, 100]
    dim = np.load(str(out / "cat.7.input.0.npy"))
    assert dim.shape == () and dim.dtype == np.int64 and int(dim) == 1
    assert np.array_equal(np.load(str(out / "cat.7.input.4.npy")), x + 1)
    assert np.array_equal(np.load(str(out / "mul.0.input.1.npy")), y)
    assert np.array_equal(np.load(str(out / "sub.3.input.1.npy")), y * 4)


def test_convert_a_folder_goes_past_an_unreadable_file(dump, tmp_path, portkit):
    folder = tmp_path / "dumps"
    (folder / "rank1").mkdir(parents=True)
    (folder / "a.h5").write_bytes(dump.read_bytes())
    (folder / "rank1" / "b.h5").write_bytes(dump.read_bytes())
    (folder / "broken.h5").write_text("this is not HDF5\n")
    out = tmp_path / "o"
    res = run([portkit, "convert", "-d", str(folder), "-out", str(out), "--format", "json"])
    assert res.returncode == 2  # an input that could not be read; the others are converted
    assert "broken.h5" in res.stderr and "not an HDF5 file" in res.stderr
    report = json.loads(res.stdout)  # --format json: what was written and what failed
    assert report["input_files"] == 3 and report["input_files_failed"] == 1
    assert [f["code"] for f in report["failed"]] == ["parse"] and "broken.h5" in report["failed"][0]["message"]
    assert "a/add.1.input.0.npy" in [w["file"] for w in report["written"]]
    assert sorted(report["index_files"]) == ["a/convert_index.csv", "rank1/b/convert_index.csv"]
    a = tensors("add", "1")["input"][0]
    assert np.array_equal(np.load(str(out / "a" / "add.1.input.0.npy")), a)
    assert np.array_equal(np.load(str(out / "rank1" / "b" / "add.1.input.0.npy")), a)


@pytest.mark.parametrize("kind", ["truncated", "text"])
def test_convert_bad_h5_is_a_clear_error(dump, tmp_path, portkit, kind):
    bad = tmp_path / ("bad_%s.h5" % kind)
    if kind == "truncated":
        bad.write_bytes(dump.read_bytes()[: os.path.getsize(dump) // 2])
    else:
        bad.write_text("op,seqid\nadd,1\n")
    res = run([portkit, "convert", "-d", str(bad), "-out", str(tmp_path / "o")])
    assert res.returncode == 2, res.stderr
    assert str(bad) in res.stderr
    assert ("truncated" if kind == "truncated" else "not an HDF5 file") in res.stderr
    assert "HDF5-DIAG" not in res.stderr  # the library's own error stack stays quiet
    res = run([portkit, "extract", "-i", str(bad), "-o", str(tmp_path / "e.h5"), "-s", "/add"])
    assert res.returncode == 2 and str(bad) in res.stderr and "HDF5-DIAG" not in res.stderr
    assert not (tmp_path / "e.h5").exists()


def groups_and_datasets(path):
    names = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: names.__setitem__(name, obj[()] if isinstance(obj, h5py.Dataset) else None))
    return names


def test_extract_copies_exactly_the_selected_groups(dump, tmp_path, portkit):
    out = tmp_path / "sub" / "picked.h5"
    out.parent.mkdir()
    res = run([portkit, "extract", "-i", str(dump), "-o", str(out), "-s", "/add/2/", "conv2d", "/conv2d/1"])
    assert res.returncode == 0, res.stderr
    got = groups_and_datasets(out)
    src = groups_and_datasets(dump)
    want = {n for n in src if n == "add" or n.startswith("add/2") or n.startswith("conv2d")}
    assert set(got) == want
    for name, value in got.items():
        if value is not None:
            assert np.array_equal(value, src[name], equal_nan=value.dtype.kind == "f")
    assert os.listdir(out.parent) == ["picked.h5"]  # no temporary file left beside it


def test_extract_reports_unknown_names(dump, tmp_path, portkit):
    out = tmp_path / "picked.h5"
    res = run([portkit, "extract", "-i", str(dump), "-o", str(out), "-s", "/add/1", "/relu", "/add/9"])
    assert res.returncode == 2  # unknown names are bad input; the others are extracted
    assert "/relu" in res.stderr and "/add/9" in res.stderr
    assert set(groups_and_datasets(out)) == {n for n in groups_and_datasets(dump) if n == "add" or n.startswith("add/1")}
    res = run([portkit, "extract", "-i", str(dump), "-o", str(tmp_path / "none.h5"), "-s", "/relu"])
    assert res.returncode == 2 and "Nothing to extract" in res.stderr
    assert not (tmp_path / "none.h5").exists()


CORRUPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "hdf5", "corrupt_datatype.h5")


def test_a_file_that_crashes_the_hdf5_library_is_an_error_and_the_folder_goes_on(dump, tmp_path, portkit):
    """corrupt_datatype.h5: a dump written with h5py 3.7 / HDF5 1.10.8 with one byte of an object
    header changed (offset 25750, 0x00 -> 0x85), found by flipping bytes; HDF5 1.10.8 segfaults
    opening the dataset. portkit reads each file in a child process, so this is an error."""
    res = run([portkit, "convert", "-d", CORRUPT, "-out", str(tmp_path / "one")])
    assert res.returncode == 2, res.stderr
    assert "corrupt HDF5 file: the HDF5 library crashed reading it" in res.stderr
    assert CORRUPT in res.stderr
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "a_corrupt.h5").write_bytes(open(CORRUPT, "rb").read())
    (folder / "b_good.h5").write_bytes(dump.read_bytes())
    res = run([portkit, "convert", "-d", str(folder), "-out", str(tmp_path / "o")])
    assert res.returncode == 2
    assert "a_corrupt.h5" in res.stderr
    b = tensors("conv2d", "2")["output"][0]
    assert np.array_equal(np.load(str(tmp_path / "o" / "b_good" / "conv2d.2.output.0.npy")), b)
    res = run([portkit, "extract", "-i", CORRUPT, "-o", str(tmp_path / "e.h5"), "-s", "/add", "/conv2d"])
    assert res.returncode == 2 and CORRUPT in res.stderr
    assert not [n for n in os.listdir(tmp_path) if ".tmp." in n]


def test_names_that_become_the_same_file_are_reported_not_overwritten(tmp_path, portkit):
    path = tmp_path / "clash.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("/a.b/0/output/0", data=np.zeros(2, dtype=np.float32))
        f.create_dataset("/a_b/0/output/0", data=np.ones(2, dtype=np.float32))
    res = run([portkit, "convert", "-d", str(path), "-out", str(tmp_path / "o")])
    assert res.returncode == 2
    assert "/a_b/0/output/0" in res.stderr and "already written" in res.stderr
    assert np.array_equal(np.load(str(tmp_path / "o" / "a_b.0.output.0.npy")), np.zeros(2, dtype=np.float32))


def test_extract_appends_to_an_existing_file_like_repeated_h5copy(dump, tmp_path, portkit):
    """The seed's workflow: `h5copy -i dump.h5 -o out.h5 -s /op/seqid/ -d /op/seqid/ -p`, once per
    operator, each run adding to out.h5."""
    out = tmp_path / "picked.h5"
    src = groups_and_datasets(dump)
    res = run([portkit, "extract", "-i", str(dump), "-o", str(out), "-s", "/add/1/", "-d", "/add/1/"])
    assert res.returncode == 0, res.stderr
    res = run([portkit, "extract", "-i", str(dump), "-o", str(out), "-s", "/conv2d/2/", "-d", "/conv2d/2/",
               "--format", "json"])
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["appended"] is True
    got = groups_and_datasets(out)
    want = {n for n in src if n in ("add", "conv2d") or n.startswith(("add/1", "conv2d/2"))}
    assert set(got) == want
    for name, value in got.items():
        if value is not None:
            assert np.array_equal(value, src[name], equal_nan=value.dtype.kind == "f")
    # Another destination path, as h5copy -d allows.
    res = run([portkit, "extract", "-i", str(dump), "-o", str(out), "-s", "/add/2", "-d", "/renamed/7"])
    assert res.returncode == 0, res.stderr
    got = groups_and_datasets(out)
    assert np.array_equal(got["renamed/7/output/0"], src["add/2/output/0"])
    # An object that is already there is refused, and the file is left as it was.
    before = out.read_bytes()
    res = run([portkit, "extract", "-i", str(dump), "-o", str(out), "-s", "/add/1/", "-d", "/add/1/"])
    assert res.returncode == 2 and "/add/1 already exists" in res.stderr
    assert out.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["dump.h5", "picked.h5"]  # no temporary file left
    # Mismatched -s/-d counts, and a file that is not HDF5, are errors; --force replaces.
    res = run([portkit, "extract", "-i", str(dump), "-o", str(out), "-s", "/add/2", "/conv2d/1", "-d", "/x/1"])
    assert res.returncode == 2 and "one destination per -s name" in res.stderr
    text = tmp_path / "notes.h5"
    text.write_text("not hdf5")
    res = run([portkit, "extract", "-i", str(dump), "-o", str(text), "-s", "/add/2"])
    assert res.returncode == 2 and "not an HDF5 file" in res.stderr and text.read_text() == "not hdf5"
    res = run([portkit, "extract", "-i", str(dump), "-o", str(out), "-s", "/conv2d/1", "--force"])
    assert res.returncode == 0, res.stderr
    assert {n.split("/")[0] for n in groups_and_datasets(out)} == {"conv2d"}
