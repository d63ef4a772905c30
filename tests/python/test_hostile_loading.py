"""Hostile data files through every path of the Python companion that loads one: no payload runs.

Payloads (each writes a marker file when it runs): pickles calling os.system (pickled as
posix.system), subprocess.check_call and builtins.exec, as a bare pickle and as the data.pkl of a
torch.save archive; the restricted-unpickler trick (a BUILD whose state tensor.set_() rejects with
a TypeError, before a posix.system call: code that retried torch.load without weights_only on a
TypeError ran it on torch 1.13); a TorchScript archive whose __setstate__ creates a file at load;
an object .npy; a shared object whose constructor runs a command. Paths: portkit.safe_load,
portkit.msprobe.convert and `python -m portkit.msprobe`, portkit.tune.load (plans naming files
outside their folder, by absolute path, `..` or a link; tampered files; missing hashes) and
portkit.tune.sgat.register_kernels. Each test asserts that the marker does not exist and that the
message names the file; a control shows that each payload is live."""
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from typing import Tuple

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import HERE, run  # noqa: E402

PYTHON_DIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, PYTHON_DIR)

from portkit import msprobe, safe_load  # noqa: E402
from portkit.tune import sgat  # noqa: E402
from portkit.tune.capture import capture, subgraph_inputs  # noqa: E402


# -- payloads ------------------------------------------------------------------------------------------

class _Call:
    """Pickles as a call of fn(*args)."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def pickle_payloads(marker):
    """{name: pickle bytes} that create `marker` when unpickled."""
    m = str(marker)
    return {
        "os_system": pickle.dumps(_Call(os.system, "touch '%s'" % m), protocol=2),
        # Protocol 3 names subprocess.check_call and builtins.exec (2 says commands, __builtin__).
        "subprocess": pickle.dumps(_Call(subprocess.check_call, ["touch", m]), protocol=3),
        "builtins_exec": pickle.dumps(_Call(exec, "open(%r, 'w').close()" % m), protocol=3),
    }


def _tensor_archive():
    buf = io.BytesIO()
    torch.save(torch.arange(4.0), buf)
    return buf.getvalue()


def _rezip(archive, change):
    """The torch.save archive `archive` (bytes) with each data.pkl replaced by change(data.pkl)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            zout.writestr(info.filename, change(data) if info.filename.endswith("data.pkl") else data)
    return out.getvalue()


def typeerror_then_system(marker):
    """A torch.save archive of a tensor whose data.pkl, after rebuilding the tensor, BUILDs it with
    the state (True, None, OrderedDict()) -- which Tensor.__setstate__ accepts and the restricted
    unpickler's tensor.set_(*state) rejects with TypeError -- then calls posix.system and returns the
    tensor as if nothing happened."""
    command = ("touch '%s'" % marker).encode()
    state = b"\x88N" + b"ccollections\nOrderedDict\n)R" + b"\x87"  # (True, None, OrderedDict())
    call = b"cposix\nsystem\nX" + len(command).to_bytes(4, "little") + command + b"\x85R0"
    return _rezip(_tensor_archive(), lambda pkl: pkl[:-1] + state + b"b" + call + b".")


class _ScriptPayload(torch.nn.Module):
    """TorchScript whose __setstate__ (run by torch.jit.load) creates the file named in its state."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker = marker
        self.t = torch.zeros(1)

    @torch.jit.export
    def __getstate__(self) -> Tuple[str, bool]:
        return (self.marker, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[str, bool]) -> None:
        self.marker = state[0]
        self.training = state[1]
        self.t = torch.from_file(self.marker, True, 1)  # creates the file

    def forward(self, x):
        return x + self.t


def torchscript_payload(marker, path):
    torch.jit.save(torch.jit.script(_ScriptPayload(str(marker))), str(path))


def hostile_tensor_files(folder, marker):
    """{file name: why it is hostile} written into `folder`."""
    files = {}
    for name, payload in pickle_payloads(marker).items():
        (folder / ("bare_%s.pt" % name)).write_bytes(payload)
        files["bare_%s.pt" % name] = "a bare pickle calling " + name
        (folder / ("zip_%s.pt" % name)).write_bytes(_rezip(_tensor_archive(), lambda _: payload))
        files["zip_%s.pt" % name] = "a torch.save archive whose data.pkl calls " + name
    (folder / "typeerror_then_system.pt").write_bytes(typeerror_then_system(marker))
    files["typeerror_then_system.pt"] = "TypeError in the restricted unpickler, then posix.system"
    torchscript_payload(marker, folder / "torchscript.pt")
    files["torchscript.pt"] = "a TorchScript archive"
    np.save(str(folder / "objects.npy"), np.array([_Call(os.system, "touch '%s'" % marker)], dtype=object),
            allow_pickle=True)
    files["objects.npy"] = "an object array"
    return files


def build_shared_object(path, source):
    res = run(["cc", "-shared", "-fPIC", "-O1", "-o", str(path), "-x", "c", "-"], input=source)
    assert res.returncode == 0, res.stderr
    os.chmod(str(path), 0o755)


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "PWNED"
    yield path
    assert not path.exists(), "a payload ran"


# -- the payloads are live -----------------------------------------------------------------------------

def test_the_payloads_run_when_loaded_without_the_policy(tmp_path):
    for name, payload in pickle_payloads(tmp_path / "m").items():
        pickle.loads(payload)
        assert (tmp_path / "m").exists(), name
        (tmp_path / "m").unlink()
    (tmp_path / "t.pt").write_bytes(typeerror_then_system(tmp_path / "m"))
    with pytest.raises(Exception):
        torch.load(str(tmp_path / "t.pt"), weights_only=True)  # the restricted unpickler stops first
    assert not (tmp_path / "m").exists()
    t = torch.load(str(tmp_path / "t.pt"), weights_only=False)  # the old fallback
    assert (tmp_path / "m").exists() and torch.equal(t.detach(), torch.arange(4.0))
    (tmp_path / "m").unlink()
    torchscript_payload(tmp_path / "m", tmp_path / "ts.pt")
    torch.jit.load(str(tmp_path / "ts.pt"))
    assert (tmp_path / "m").exists()


# -- portkit.safe_load and portkit.msprobe ---------------------------------------------------------------

def test_every_hostile_tensor_file_is_refused_by_the_loader(tmp_path, marker):
    files = hostile_tensor_files(tmp_path, marker)
    for name, why in files.items():
        path = str(tmp_path / name)
        with pytest.raises(safe_load.RefusedFile) as e:
            safe_load.load_tensor(path)
        msg = str(e.value)
        assert msg.startswith(path + ": "), (why, msg)
        assert "nothing in it ran" in msg or "TorchScript archive" in msg, (why, msg)
        # torch 2.x's advice to retry with weights_only=False or to allow-list the global is left out.
        assert "set to `False`" not in msg and "add_safe_globals" not in msg, msg
        assert not marker.exists(), why
    msg = str(pytest.raises(safe_load.RefusedFile, safe_load.load_tensor, str(tmp_path / "torchscript.pt")).value)
    assert "loading it runs the code inside it, so it is refused" in msg and "--trust-torchscript" in msg
    ok = tmp_path / "ok.pt"
    torch.save(torch.arange(3.0), str(ok))
    assert torch.equal(safe_load.load_tensor(str(ok)), torch.arange(3.0))


def test_torch_without_weights_only_is_refused_not_unpickled(tmp_path, marker, monkeypatch):
    """A torch.load without weights_only (torch < 1.13) is never called: the file is refused."""
    path = tmp_path / "zip_os_system.pt"
    path.write_bytes(_rezip(_tensor_archive(), lambda _: pickle_payloads(marker)["os_system"]))
    calls = []
    monkeypatch.setattr(torch, "load", lambda f, map_location=None, pickle_module=None, **kw: calls.append(f))
    with pytest.raises(safe_load.RefusedFile, match="has no torch.load\\(weights_only=True\\)"):
        safe_load.load_tensor(str(path))
    assert calls == []


def test_trusted_torchscript_is_loaded_only_when_asked(tmp_path, marker):
    torchscript_payload(marker, tmp_path / "ts.pt")
    module = safe_load.load_torch_file(str(tmp_path / "ts.pt"), trust_torchscript=True)
    assert isinstance(module, torch.jit.ScriptModule) and marker.exists()
    marker.unlink()


def _hostile_msprobe_dump(folder, marker):
    """An msprobe step/rank folder whose every data file is hostile (plus one good tensor, and
    data_name values leading out of the folder)."""
    data = folder / "dump_tensor_data"
    data.mkdir(parents=True)
    files = hostile_tensor_files(data, marker)
    outside = folder / "outside.pt"
    outside.write_bytes(typeerror_then_system(marker))
    torch.save(torch.ones(2), str(data / "good.pt"))
    names = sorted(files) + ["good.pt", "../outside.pt", str(outside)]
    rec = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "requires_grad": False}
    calls = {"Functional.relu.%d.forward" % i: {"input_args": [dict(rec, data_name=n)], "output": []}
             for i, n in enumerate(names)}
    (folder / "dump.json").write_text(json.dumps({"task": "tensor", "level": "L1", "data": calls}))
    return names


def test_msprobe_convert_refuses_every_hostile_file(tmp_path, marker):
    src = tmp_path / "step0" / "rank0"
    names = _hostile_msprobe_dump(src, marker)
    ops, tensors, problems = msprobe.convert(str(src), str(tmp_path / "out"))
    assert ops == len(names) and tensors == 1  # good.pt only
    text = "\n".join(problems)
    for name in names:
        if name != "good.pt":
            assert "%s: cannot be read (" % name in text, (name, text)
    assert "'../outside.pt' goes up with '..'" in text and "is an absolute path" in text, text


@pytest.mark.parametrize("trust", [False, True])
def test_msprobe_cli_refuses_every_hostile_file(tmp_path, python, trust):
    marker = tmp_path / "PWNED"
    src = tmp_path / "step0" / "rank0"
    names = _hostile_msprobe_dump(src, marker)
    res = run([python, "-m", "portkit.msprobe"] + (["--trust-torchscript"] if trust else []) +
              [str(src), str(tmp_path / "out")], cwd=PYTHON_DIR)
    assert res.returncode == 2, res.stdout + res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == len(names) - 1, res.stderr
    assert "Converted %d calls, 1 tensors" % len(names) in res.stdout, res.stdout
    ts = [w for w in warnings if w.startswith("warning: torchscript.pt: ")]
    if trust:
        # Loaded as the user asked (its code ran), and still not a tensor.
        assert marker.exists() and "holds a RecursiveScriptModule, not a tensor" in ts[0], ts
    else:
        assert not marker.exists(), res.stderr
        assert "a TorchScript archive; loading it runs the code inside it, so it is refused" in ts[0], ts
    marker.unlink() if marker.exists() else None
    assert not marker.exists()


def test_msprobe_cli_usage_names_the_trust_flag(python, tmp_path):
    res = run([python, "-m", "portkit.msprobe", "--bogus", "a", "b"], cwd=PYTHON_DIR)
    assert res.returncode == 2 and "--trust-torchscript" in res.stderr, res.stderr


# -- portkit.tune.load ---------------------------------------------------------------------------------

def _artifact(folder, strategy="eager"):
    """A real artifact (save_artifact of a small model's `strategy` plan) in `folder`; returns the
    model, its input and the plan."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    x = torch.randn(3, 4)
    cap = capture(model, (x,))
    folder.mkdir(parents=True, exist_ok=True)
    sgat.save_artifact(str(folder), sgat.Plan(strategy, 1, {}), cap, model, (x,), subgraph_inputs(cap.split, (x,)))
    return model, x, json.loads((folder / sgat.PLAN).read_text())


def _write_plan(folder, plan):
    (folder / sgat.PLAN).write_text(json.dumps(plan))


def _refused(folder, *needles, load=sgat.load):
    with pytest.raises(sgat.TuneError) as e:
        load(str(folder))
    for needle in needles:
        assert needle in str(e.value), str(e.value)
    return str(e.value)


@pytest.mark.parametrize("strategy", ["eager", "script_freeze"])
def test_artifact_records_hashes_and_loads(tmp_path, strategy):
    model, x, plan = _artifact(tmp_path / "a", strategy)
    names = [sgat.ARTIFACT] + ([sgat.EAGER_MODULE] if strategy == "eager" else [])
    assert sorted(plan["sha256"]) == sorted(names)
    for name in names:
        assert plan["sha256"][name] == safe_load.sha256_of(str(tmp_path / "a" / name))
    with torch.no_grad():
        assert torch.allclose(sgat.load(str(tmp_path / "a"))(x), model(x), atol=1e-5)
        assert torch.allclose(sgat.load(str(tmp_path / "a" / sgat.ARTIFACT))(x), model(x), atol=1e-5)


def test_tampered_module_is_refused(tmp_path, marker):
    _artifact(tmp_path / "a")
    (tmp_path / "a" / sgat.EAGER_MODULE).write_bytes(pickle_payloads(marker)["os_system"])
    _refused(tmp_path / "a", os.path.join(str(tmp_path / "a"), sgat.EAGER_MODULE) + ": its content changed "
             "since it was written (sha256 ")


@pytest.mark.parametrize("how", ["absolute", "dotdot", "link", "dir_link"])
def test_plan_module_outside_the_folder_is_refused(tmp_path, marker, how):
    _, _, plan = _artifact(tmp_path / "a")
    evil = tmp_path / "evil.pt"
    evil.write_bytes(typeerror_then_system(marker))
    digest = safe_load.sha256_of(str(evil))
    name = {"absolute": str(evil), "dotdot": "../evil.pt", "link": "link.pt", "dir_link": "sub/evil.pt"}[how]
    if how == "link":
        os.symlink(str(evil), str(tmp_path / "a" / "link.pt"))
    if how == "dir_link":
        os.symlink(str(tmp_path), str(tmp_path / "a" / "sub"))
    plan["module"] = name
    plan["sha256"][name] = digest  # the hash matches: the path alone is refused
    _write_plan(tmp_path / "a", plan)
    want = {"absolute": "is an absolute path", "dotdot": "goes up with '..'", "link": "outside the folder",
            "dir_link": "outside the folder"}[how]
    _refused(tmp_path / "a", "module %r" % name, want, "only files inside")


def test_artifact_without_hashes_or_plan_is_refused(tmp_path, marker):
    _, _, plan = _artifact(tmp_path / "a")
    (tmp_path / "a" / sgat.EAGER_MODULE).write_bytes(pickle_payloads(marker)["subprocess"])
    del plan["sha256"]
    _write_plan(tmp_path / "a", plan)
    _refused(tmp_path / "a", "records no sha256 of the artifact's files", "tune again")
    plan["sha256"] = {sgat.ARTIFACT: "0" * 64}  # the module has no hash of its own
    _write_plan(tmp_path / "a", plan)
    _refused(tmp_path / "a", "records no sha256 of its module 'optimized_module.pt'")
    (tmp_path / "a" / sgat.PLAN).unlink()
    _refused(tmp_path / "a", "cannot read the artifact's plan")
    (tmp_path / "a" / sgat.PLAN).write_text("[1, 2]")
    _refused(tmp_path / "a", "not an artifact plan")


def test_torch_compile_kind_with_a_swapped_graph_is_refused(tmp_path, marker):
    """A torch_compile plan unpickles optimized.pt: a payload swapped in must not be unpickled."""
    _, _, plan = _artifact(tmp_path / "a", "script_freeze")
    plan["kind"] = "torch_compile"
    _write_plan(tmp_path / "a", plan)
    (tmp_path / "a" / sgat.ARTIFACT).write_bytes(pickle_payloads(marker)["builtins_exec"])
    _refused(tmp_path / "a", "optimized.pt: its content changed")


def test_torchscript_artifact_swapped_is_refused(tmp_path, marker):
    _artifact(tmp_path / "a", "script_freeze")
    torchscript_payload(marker, tmp_path / "a" / sgat.ARTIFACT)
    _refused(tmp_path / "a", "optimized.pt: its content changed")


KERNEL_SOURCE = """
#include <stdlib.h>
__attribute__((constructor)) static void payload(void) { system("touch '%s'"); }
void portkit_kernel(void **in, float *out, long *dims) { (void)in; (void)dims; out[0] = %s; }
"""


@pytest.mark.parametrize("how", ["absolute", "dotdot", "tampered", "no_hash"])
def test_plan_kernels_outside_the_folder_or_tampered_are_refused(tmp_path, marker, how):
    _, _, plan = _artifact(tmp_path / "a", "script_freeze")
    evil = tmp_path / "evil.so"
    build_shared_object(evil, KERNEL_SOURCE % (marker, "1.0f"))
    digest = safe_load.sha256_of(str(evil))
    (tmp_path / "a" / "kernels").mkdir()
    shutil.copy(str(evil), str(tmp_path / "a" / "kernels" / "k.so"))
    name = {"absolute": str(evil), "dotdot": "../evil.so", "tampered": "kernels/k.so", "no_hash": "kernels/k.so"}[how]
    plan["opat_kernels"] = [{"m": 1, "n": 1, "k": 1, "bias": False, "config": "", "routed": True, "so": name}]
    if how != "no_hash":
        plan["sha256"][name] = "f" * 64 if how == "tampered" else digest
    _write_plan(tmp_path / "a", plan)
    want = {"absolute": "kernel %r is an absolute path" % name, "dotdot": "kernel '../evil.so' goes up with '..'",
            "tampered": "kernels/k.so: its content changed since it was written",
            "no_hash": "records no sha256 of its kernel 'kernels/k.so'"}[how]
    _refused(tmp_path / "a", want)
    _refused(tmp_path / "a", want, load=sgat.register_kernels)


def test_two_kernels_loaded_in_one_process_are_each_their_own(tmp_path):
    """Kernels are loaded through /proc/self/fd/N; the dynamic loader knows a loaded object by its
    name, so a reused N must not hand the second file the first one's code."""
    import ctypes

    from portkit.tune import opat

    out = (ctypes.c_float * 1)()
    dims = (ctypes.c_long * 3)(1, 1, 1)
    got = []
    for value in ("11.0f", "22.0f"):
        so = tmp_path / ("k%s.so" % value[:2])
        build_shared_object(so, KERNEL_SOURCE % (tmp_path / "constructor_ran", value))
        opat.load_kernel(str(so))(None, out, dims)
        got.append(out[0])
    assert got == [11.0, 22.0]


def test_every_file_is_checked_before_the_first_is_loaded(tmp_path, marker):
    """A kernel inside the folder with its right hash (its constructor would run on load) is not
    loaded when the module the plan names next was swapped."""
    _, _, plan = _artifact(tmp_path / "a")
    (tmp_path / "a" / "kernels").mkdir()
    build_shared_object(tmp_path / "a" / "kernels" / "k.so", KERNEL_SOURCE % (marker, "1.0f"))
    plan["opat_kernels"] = [{"m": 1, "n": 1, "k": 1, "bias": False, "config": "", "routed": True,
                             "so": "kernels/k.so"}]
    plan["sha256"]["kernels/k.so"] = safe_load.sha256_of(str(tmp_path / "a" / "kernels" / "k.so"))
    _write_plan(tmp_path / "a", plan)
    (tmp_path / "a" / sgat.EAGER_MODULE).write_bytes(typeerror_then_system(marker))
    _refused(tmp_path / "a", "optimized_module.pt: its content changed")
