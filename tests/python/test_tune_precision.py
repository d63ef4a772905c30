"""portkit.tune's opt-in lower precision (precision="bf16" | "int8-dynamic") and the BLAS thread
count: the default stays fp32; a lower-precision plan records its accuracy cost and speed, and its
artifact reloads with portkit.tune.load and gives the recorded accuracy; the accuracy check refuses
a candidate over its threshold; the BLAS library's own thread count (OpenBLAS pthreads, Debian's
torch 1.13) is searched, recorded in the plan and the bank and restored by load. A tiny MLP,
3 rounds; the winner is forced by a stand-in measurement (these tests check behaviour, never speed)."""
import json
import os
import sqlite3
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, ROOT)

import portkit.tune as pt  # noqa: E402
from portkit.tune import blas  # noqa: E402
from portkit.tune import candidates as cands  # noqa: E402
from portkit.tune import measure  # noqa: E402
from portkit.tune import sgat  # noqa: E402

FAST = dict(rounds=3, warmup=1, min_sample_s=0.0002, use_compile=False, progress=False, threads=1)
_PATTERN = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01]


class TinyMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _model():
    torch.manual_seed(0)
    return TinyMlp().eval(), (torch.randn(4, 16),)


def _eager(model, inputs):
    with torch.no_grad():
        return model(*inputs)


def _fake_measure(table):
    """measure_interleaved's stand-in: each candidate runs once (its counts set by ``prepare``) and
    gets the same +-2 % pattern around table[name] ms (1 ms when absent)."""
    def fake(candidates, rounds=15, warmup=2, min_sample_s=0.002, prepare=None, group=None, **budget):
        out = {}
        with torch.no_grad():
            for name, fn in candidates.items():
                if prepare:
                    prepare(name)
                fn()
                out[name] = measure.Timing(name, [table.get(name, 1.0) * 1e-3 * p for p in _PATTERN])
        return out
    return fake


@pytest.fixture
def counts():
    """Restores torch's and the BLAS library's thread counts after the test."""
    t, b = torch.get_num_threads(), blas.get_threads()
    yield t, b
    torch.set_num_threads(t)
    blas.set_threads(b)


def _skip_unavailable(strategy):
    why = cands.lowp_unavailable(strategy)
    if why:
        pytest.skip("%s on torch %s: %s" % (strategy, torch.__version__, why))


def test_default_is_fp32_and_tries_no_lower_precision(tmp_path, counts):
    model, inputs = _model()
    optimized, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"), **FAST)
    assert "precision" not in report
    assert not any(c["strategy"] in cands.LOWP_STRATEGIES for c in report["candidates"].values())
    assert "precision" not in report["plan"] and "accuracy" not in report["plan"]
    doc = json.loads((tmp_path / "out" / "optimized.json").read_text())
    assert "precision" not in doc
    assert "precision" not in json.loads(open(report["result_file"]).read())["SGAT"]
    with torch.no_grad():
        assert torch.allclose(optimized(*inputs), _eager(model, inputs), rtol=1e-4, atol=1e-5)


def test_bad_precision_arguments_are_refused():
    model, inputs = _model()
    with pytest.raises(pt.TuneError, match="precision must be one of"):
        pt.optimize(model, inputs, bank=False, precision="fp16", **FAST)
    with pytest.raises(pt.TuneError, match="apply to precision"):
        pt.optimize(model, inputs, bank=False, accuracy={"max_rel_err": 0.1}, **FAST)
    with pytest.raises(pt.TuneError, match="unknown key"):
        pt.optimize(model, inputs, bank=False, precision="bf16", accuracy={"rtol": 0.1}, **FAST)


def test_accuracy_metric():
    want = torch.tensor([[1.0, -2.0], [4.0, 0.5]])
    m, why = sgat.accuracy(want.clone(), want)
    assert why == "" and m == {"max_rel_err": 0.0, "cosine": pytest.approx(1.0)}
    m, _ = sgat.accuracy(want + torch.tensor([[0.0, 0.4], [0.0, 0.0]]), want)
    assert m["max_rel_err"] == pytest.approx(0.1)  # 0.4 / max|want| = 0.4 / 4
    assert sgat.accuracy_ok(m, {"max_rel_err": 0.1, "min_cosine": 0.99})[0]
    ok, why = sgat.accuracy_ok(m, {"max_rel_err": 0.05, "min_cosine": 0.99})
    assert not ok and "max relative error" in why
    assert sgat.accuracy(-want, want)[0]["cosine"] == pytest.approx(-1.0)
    assert sgat.accuracy(want[:1], want)[0] is None
    assert sgat.accuracy(want * float("nan"), want)[0] is None


@pytest.mark.parametrize("strategy", sorted(cands.LOWP_STRATEGIES))
def test_a_lower_precision_plan_records_its_accuracy_cost_and_reloads(strategy, tmp_path, monkeypatch, counts):
    _skip_unavailable(strategy)
    mode = cands.LOWP_STRATEGIES[strategy]
    d = torch.get_num_threads()
    monkeypatch.setattr(sgat, "measure_interleaved", _fake_measure({"%s@%dt" % (strategy, 1): 0.5}))
    model, inputs = _model()
    want = _eager(model, inputs)
    out = tmp_path / "out"
    optimized, report = pt.optimize(model, inputs, bank=str(tmp_path / "bank"), output=str(out), precision=mode,
                                    **FAST)
    if "error" in report["builds"].get(strategy, {}):
        pytest.skip("%s does not build on torch %s: %s" % (strategy, torch.__version__,
                                                           report["builds"][strategy]["error"]))
    plan = report["plan"]
    assert plan["strategy"] == strategy and plan["precision"] == mode
    acc = plan["accuracy"]
    limits = cands.DEFAULT_ACCURACY[mode]
    assert 0 < acc["max_rel_err"] <= limits["max_rel_err"] and acc["cosine"] >= limits["min_cosine"]
    prec = report["precision"]
    assert prec["mode"] == mode and prec["thresholds"] == limits and prec["plan_precision"] == mode
    assert prec["plan_accuracy"] == acc and prec["artifact_accuracy"] == acc
    cand = prec["candidates"]["%s@1t" % strategy]
    assert cand["accepted"] and cand["median_ms"] > 0 and cand["speedup_vs_baseline"] > 1
    assert cand["max_rel_err"] == acc["max_rel_err"]
    # The plan file and the result file record the precision, the accuracy cost and the speed.
    doc = json.loads((out / "optimized.json").read_text())
    assert doc["precision"] == mode and doc["accuracy"] == acc and doc["module"] == sgat.EAGER_MODULE
    sg = json.loads(open(report["result_file"]).read())["SGAT"]
    assert sg["plan"]["precision"] == mode and sg["precision"]["plan_accuracy"] == acc
    assert sg["precision"]["plan_speedup"] == sg["speedup"]
    # The artifact reloads (portkit.tune.load) and gives the recorded accuracy and the returned
    # module's output.
    loaded = pt.load(str(out))
    with torch.no_grad():
        got = loaded(*inputs)
        assert got.dtype == want.dtype
        assert torch.equal(got, optimized(*inputs))
        # (want was computed here, at the plan's thread count; the tuner's reference at the
        # process's: fp32 rounding apart, the same figures)
        assert sgat.accuracy(got, want)[0] == pytest.approx(acc, rel=1e-4)
    if strategy == "bf16_autocast":
        assert doc["artifact"] is None and "TorchScript does not keep torch.autocast" in doc["artifact_note"]
    else:
        ts = torch.jit.load(str(out / "optimized.pt"))
        with torch.no_grad():
            assert torch.allclose(ts(*inputs), got, rtol=1e-4, atol=1e-5)
    # The bank keys the model by precision: an fp32 run does not find the lower-precision plan.
    torch.set_num_threads(d)
    _, fp32 = pt.optimize(model, inputs, bank=str(tmp_path / "bank"), output=str(tmp_path / "fp32"), **FAST)
    assert fp32["plan"]["strategy"] not in cands.LOWP_STRATEGIES and fp32["model_repo"] != "hit"
    # The same precision again finds it, and checks its accuracy again.
    torch.set_num_threads(d)
    _, again = pt.optimize(model, inputs, bank=str(tmp_path / "bank"), output=str(tmp_path / "again"),
                           precision=mode, **FAST)
    assert again["plan"]["strategy"] == strategy and again["model_repo"] == "hit"
    assert again["plan"]["accuracy"] == acc


def test_int8_artifact_loads_in_a_fresh_process(tmp_path, monkeypatch, counts):
    _skip_unavailable("int8_dynamic")
    monkeypatch.setattr(sgat, "measure_interleaved", _fake_measure({"int8_dynamic@1t": 0.5}))
    model, inputs = _model()
    out = tmp_path / "out"
    optimized, report = pt.optimize(model, inputs, bank=False, output=str(out), precision="int8-dynamic", **FAST)
    assert report["plan"]["strategy"] == "int8_dynamic"
    torch.save({"x": inputs[0], "y": optimized(*inputs).detach()}, str(tmp_path / "io.pt"))
    code = ("import sys, torch; sys.path.insert(0, %r); sys.path.insert(0, %r); import portkit.tune as pt; "
            "d = torch.load(%r); m = pt.load(%r); "
            "print(torch.equal(m(d['x']), d['y']), type(m).__name__)"
            % (os.path.join(ROOT, "python"), HERE, str(tmp_path / "io.pt"), str(out)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[0] == "True"


class TinyGru(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(8, 16, batch_first=True)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out[:, -1])


def test_int8_dynamic_quantizes_recurrent_layers_too(tmp_path, monkeypatch, counts):
    _skip_unavailable("int8_dynamic")
    torch.manual_seed(0)
    model, inputs = TinyGru().eval(), (torch.randn(2, 5, 8),)
    built = cands.build_lowp("int8_dynamic", model)
    kinds = {type(m).__module__ + "." + type(m).__name__ for m in built.modules()}
    assert any(".dynamic" in k and k.endswith(".GRU") for k in kinds), kinds
    assert any(".dynamic" in k and k.endswith(".Linear") for k in kinds), kinds
    with pytest.raises(ValueError, match="no Linear, LSTM or GRU"):
        cands.build_lowp("int8_dynamic", torch.nn.Conv2d(3, 4, 3))
    monkeypatch.setattr(sgat, "measure_interleaved", _fake_measure({"int8_dynamic@1t": 0.5}))
    optimized, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"),
                                    precision="int8-dynamic", **FAST)
    assert report["plan"]["strategy"] == "int8_dynamic"
    with torch.no_grad():
        got = pt.load(str(tmp_path / "out"))(*inputs)
        assert torch.equal(got, optimized(*inputs))
        assert sgat.accuracy(got, _eager(model, inputs))[0] == pytest.approx(report["plan"]["accuracy"], rel=1e-4)
    assert report["precision"]["artifact_accuracy"] == report["plan"]["accuracy"]


@pytest.mark.parametrize("mode", ["bf16", "int8-dynamic"])
def test_the_accuracy_check_refuses_a_candidate_over_its_threshold(mode, tmp_path, monkeypatch, counts):
    strategies = [s for s, m in cands.LOWP_STRATEGIES.items() if m == mode and not cands.lowp_unavailable(s)]
    if not strategies:
        pytest.skip("no %s strategy on torch %s" % (mode, torch.__version__))
    # Each would win on speed; a threshold of 0 refuses every lower-precision output.
    monkeypatch.setattr(sgat, "measure_interleaved", _fake_measure({"%s@1t" % s: 0.5 for s in strategies}))
    model, inputs = _model()
    _, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"), precision=mode,
                            accuracy={"max_rel_err": 0.0}, **FAST)
    assert report["plan"]["strategy"] not in cands.LOWP_STRATEGIES and "precision" not in report["plan"]
    prec = report["precision"]
    assert prec["thresholds"]["max_rel_err"] == 0.0 and prec["plan_precision"] == "fp32"
    refused = {n: c for n, c in prec["candidates"].items() if "@" in n}
    assert refused, prec
    for name, c in refused.items():
        assert not c["accepted"] and "max relative error" in c["note"] and c["max_rel_err"] > 0
        assert name not in report["candidates"]  # refused candidates are never timed
    assert any("refused: accuracy against fp32 eager" in n for n in report["notes"])
    assert json.loads(open(report["result_file"]).read())["SGAT"]["precision"]["candidates"] == prec["candidates"]


def test_command_line_precision(tmp_path, counts):
    (tmp_path / "tinymodel.py").write_text(
        "import torch\n\ndef make():\n    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    base = [sys.executable, "-m", "portkit.tune", "--model", "tinymodel:make", "--input", "4x16", "--threads", "1",
            "--rounds", "3", "--warmup", "1", "--min-sample-ms", "0.2", "--no-compile", "--bank", str(tmp_path / "b")]
    r = subprocess.run(base + ["--output", str(tmp_path / "o"), "--precision", "int8-dynamic", "--max-rel-err", "0"],
                       capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout)
    prec = summary["precision"]
    assert prec["mode"] == "int8-dynamic" and prec["thresholds"]["max_rel_err"] == 0.0
    if not cands.lowp_unavailable("int8_dynamic"):
        assert prec["candidates"] and not any(c["accepted"] for c in prec["candidates"].values())
    assert summary["plan"]["strategy"] not in cands.LOWP_STRATEGIES
    for bad in (["--precision", "fp16"], ["--max-rel-err", "0.1"], ["--precision", "bf16", "--min-cosine", "2"]):
        r = subprocess.run(base + ["--output", str(tmp_path / "x")] + bad, capture_output=True, text=True,
                           timeout=120, cwd=str(tmp_path), env=env)
        assert r.returncode == 2, (bad, r.stderr[-2000:])


# ---- the BLAS library's own thread count ----

def test_blas_pool_that_torch_set_num_threads_does_not_govern(counts):
    info = blas.separate_pool()
    if info is None:
        pytest.skip("torch %s: no BLAS library with a thread pool of its own is loaded (torch.set_num_threads "
                    "governs its BLAS: MKL, or OpenBLAS's OpenMP variant)" % torch.__version__)
    assert info["library"] == "openblas" and info["threading"] == "pthreads"
    blas.set_threads(1)
    torch.set_num_threads(2)
    assert blas.get_threads() == 1  # torch's count did not move OpenBLAS's
    blas.set_threads(2)
    torch.set_num_threads(1)
    assert blas.get_threads() == 2


class _FakeOpenBlas:
    """A stand-in BLAS pool (for a torch whose BLAS follows torch.set_num_threads)."""

    def __init__(self, n):
        self.n = n

    def openblas_get_num_threads(self):
        return self.n

    def openblas_set_num_threads(self, n):
        self.n = n


@pytest.fixture
def pool(monkeypatch, counts):
    """The real separate BLAS pool where there is one, else a stand-in; its process count set to
    one more than torch's, so that the BLAS count equal to torch's is another candidate."""
    d = torch.get_num_threads()
    if blas.separate_pool() is None:
        fake = _FakeOpenBlas(d + 1)
        monkeypatch.setattr(blas, "_find", lambda: (fake, {"library": "openblas", "threading": "pthreads",
                                                          "path": "(stand-in)", "config": "", "default_threads": 2}))
    blas.set_threads(d + 1)
    return d


def test_blas_thread_count_is_searched_recorded_and_restored(tmp_path, monkeypatch, pool):
    d = pool
    variant = "script_freeze@%dt+%db" % (d, d)
    monkeypatch.setattr(sgat, "measure_interleaved", _fake_measure({variant: 0.5}))
    monkeypatch.setattr(sgat, "_thread_candidates", lambda default: [default])
    model, inputs = _model()
    bank, out = str(tmp_path / "bank"), str(tmp_path / "out")
    _, report = pt.optimize(model, inputs, bank=bank, output=out, **dict(FAST, threads=None))
    # Every strategy timed at torch's count with the process's BLAS count and with the BLAS count
    # equal to torch's.
    assert {"script_freeze@%dt" % d, variant, "eager@%dt+%db" % (d, d)} <= set(report["candidates"])
    assert report["candidates"][variant]["blas_threads"] == d
    assert report["candidates"]["eager@%dt" % d]["blas_threads"] == d + 1
    assert report["plan"] == dict(report["plan"], strategy="script_freeze", threads=d, blas_threads=d)
    assert blas.get_threads() == d  # the returned module runs at the plan's BLAS count
    assert json.loads((tmp_path / "out" / "optimized.json").read_text())["blas_threads"] == d
    conn = sqlite3.connect(os.path.join(bank, "sgat_bank.db"))
    (detail,) = conn.execute("SELECT detail FROM sgat_entries WHERE kind='model'").fetchone()
    conn.close()
    assert json.loads(detail)["blas_threads"] == d
    sg = json.loads(open(report["result_file"]).read())["SGAT"]
    assert sg["blas"]["plan_threads"] == d and sg["blas"]["process_threads"] == d + 1
    # load restores it.
    blas.set_threads(d + 1)
    loaded = pt.load(out)
    assert blas.get_threads() == d
    with torch.no_grad():
        assert torch.allclose(loaded(*inputs), _eager(model, inputs), rtol=1e-4, atol=1e-5)
    # The second run takes it from the bank.
    blas.set_threads(d + 1)
    _, second = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "out2"), **dict(FAST, threads=None))
    assert second["plan"] == report["plan"] and second["candidates"] == {}
    assert blas.get_threads() == d


def test_a_blas_count_no_faster_than_the_process_one_is_not_taken(tmp_path, monkeypatch, pool):
    d = pool
    # 1 % faster at the other BLAS count: within the margin, the process's BLAS count stays.
    monkeypatch.setattr(sgat, "measure_interleaved", _fake_measure({"script_freeze@%dt" % d: 0.5,
                                                                    "script_freeze@%dt+%db" % (d, d): 0.495}))
    monkeypatch.setattr(sgat, "_thread_candidates", lambda default: [default])
    model, inputs = _model()
    _, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"), **dict(FAST, threads=None))
    assert (report["plan"]["strategy"], report["plan"]["blas_threads"]) == ("script_freeze", d + 1)


def test_pinned_threads_leave_the_blas_count_as_it_is(tmp_path, monkeypatch, pool):
    d = pool
    monkeypatch.setattr(sgat, "measure_interleaved", _fake_measure({}))
    model, inputs = _model()
    _, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"), **dict(FAST, threads=d))
    assert not any("+" in n for n in report["candidates"])
    assert report["plan"]["blas_threads"] == d + 1
