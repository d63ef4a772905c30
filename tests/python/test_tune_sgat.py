"""SGAT for PyTorch models (portkit.tune): artifacts that load with one call and match eager,
the bank's second run reproducing the plan without timing, the accounting, refusal of a candidate
whose outputs differ, the fx fallback, and the command line. Small shapes and few timing rounds:
these tests check behaviour, never speed (bench/tune_torch_bench.py measures that)."""
import json
import os
import shutil
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
from portkit.tune import bank as bank_mod  # noqa: E402
from portkit.tune import candidates as cands  # noqa: E402
from portkit.tune import capture as cap_mod  # noqa: E402
from portkit.tune import measure  # noqa: E402
from portkit.tune import sgat  # noqa: E402
from examples.tune import models  # noqa: E402

FAST = dict(rounds=3, warmup=1, min_sample_s=0.0002, use_compile=False, progress=False, threads=1)

MODELS = {
    "resnet": (lambda: models.make_resnet(width=8), lambda: (torch.randn(2, 3, 16, 16),)),
    "mlp": (lambda: models.make_mlp(features=32, hidden=64), lambda: (torch.randn(4, 32),)),
    "encoder": (lambda: models.make_encoder(dim=32, heads=2, ffn=64), lambda: (torch.randn(2, 8, 32),)),
}


def _eager(model, inputs):
    with torch.no_grad():
        return model(*inputs)


def _close(a, b):
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_artifact_loads_with_one_call_and_matches_eager(name, tmp_path):
    make, make_inputs = MODELS[name]
    torch.manual_seed(1)
    model, inputs = make(), make_inputs()
    want = _eager(model, inputs)
    tuned_threads = dict(FAST, threads=None)  # this test also runs the thread-count stage
    optimized, report = pt.optimize(model, inputs, bank=str(tmp_path / "bank"), output=str(tmp_path / "out"),
                                    **tuned_threads)
    out, artifact = tmp_path / "out", tmp_path / "out" / "optimized.pt"
    strategy = report["plan"]["strategy"]
    # Which plan wins is a timing; every plan must load with one call. TorchScript plans have
    # optimized.pt; plans whose parts run eagerly (composite_eager, blocks: ONNX Runtime or
    # fx_fused parts) have only the pickled module that portkit.tune.load returns.
    assert strategy in sgat.MODEL_STRATEGIES and os.path.exists(report["artifact"])
    if strategy in ("script_freeze", "optimize_for_inference", "composite", "composite_ofi"):
        assert report["artifact"] == str(artifact) and artifact.exists()
    other = tuple(torch.randn_like(t) for t in inputs)
    with torch.no_grad():
        if artifact.exists():  # plain torch.jit.load, without the plan's load transform
            assert _close(torch.jit.load(str(artifact))(*inputs), want)
            # New inputs of the same shape: the artifact computes the model, not a recording.
            assert _close(torch.jit.load(str(artifact))(*other), model(*other))
        assert _close(pt.load(str(out))(*inputs), want)
        assert _close(pt.load(str(out))(*other), model(*other))
        assert _close(optimized(*inputs), want)
    # The result file: AOE's shape, whole-model figures with intervals, the seed's accounting.
    doc = json.loads(open(report["result_file"]).read())
    assert os.path.basename(report["result_file"]).startswith("aoe_result_sgat_")
    sg = doc["SGAT"]
    assert sg["sgat_tuning_result"] == "tuning successful"
    lo, hi = sg["model_baseline_ci95(ms)"]
    assert lo <= sg["model_baseline_performance(ms)"] <= hi
    lo, hi = sg["model_result_ci95(ms)"]
    assert lo <= sg["model_result_performance(ms)"] <= hi
    s = sg["repo_summary"]
    assert s["repo_hit_num"] == 0 and s["total_num"] == s["repo_add_num"] + s["repo_unsatisfied_num"]
    # One entry per subgraph plus the whole-model plan.
    n_sub = len([c for c in report["subgraphs"]])
    assert s["total_num"] == n_sub + 1
    assert set(doc["basic"]) == {"tuning_name", "tuning_time(s)"}


def test_resnet_is_split_at_blocks():
    model = models.make_resnet(width=8)
    x = torch.randn(1, 3, 16, 16)
    c = cap_mod.capture(model, (x,))
    assert c.traced
    assert list(c.names.values()) == ["stem", "layers.0", "layers.1", "layers.2"]
    with torch.no_grad():
        assert _close(c.split(x), model(x))


def test_second_run_hits_the_bank_and_reproduces_the_artifact_without_timing(tmp_path):
    model, inputs = models.make_resnet(width=8), (torch.randn(2, 3, 16, 16),)
    bank = str(tmp_path / "bank")
    _, first = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "a"), **FAST)
    assert first["tuned"]
    assert any(c for c in first["candidates"].values())  # whole-model candidates were timed
    _, second = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "b"), **FAST)
    assert not second["tuned"]
    s = second["repo_summary"]
    assert s["repo_add_num"] == 0 and s["repo_unsatisfied_num"] == 0
    assert s["repo_hit_num"] == s["total_num"] == first["repo_summary"]["total_num"]
    assert second["plan"] == first["plan"]
    assert second["candidates"] == {}  # no whole-model candidate built or timed
    assert all("candidates" not in rec for rec in second["subgraphs"])  # no subgraph candidate timed
    with torch.no_grad():
        a = pt.load(str(tmp_path / "a"))(*inputs)
        b = pt.load(str(tmp_path / "b"))(*inputs)
    assert _close(a, b) and _close(b, _eager(model, inputs))
    # The bank is its own file beside (never inside) the OPAT bank, with a schema version.
    conn = sqlite3.connect(str(tmp_path / "bank" / "sgat_bank.db"))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == bank_mod.SCHEMA_VERSION
    kinds = sorted(k for (k,) in conn.execute("SELECT kind FROM sgat_entries"))
    assert kinds.count("model") == 1 and kinds.count("subgraph") == len(second["subgraphs"])
    assert not (tmp_path / "bank" / "tune_bank.db").exists()


def test_repeat_tune_counts_hits_as_reserved_or_update(tmp_path):
    model, inputs = models.make_mlp(32, 64), (torch.randn(4, 32),)
    bank = str(tmp_path / "bank")
    pt.optimize(model, inputs, bank=bank, **FAST)
    _, again = pt.optimize(model, inputs, bank=bank, repeat_tune=True, **FAST)
    s = again["repo_summary"]
    assert again["tuned"] and s["repo_add_num"] == 0
    assert s["repo_hit_num"] == s["repo_reserved_num"] + s["repo_update_num"] == s["total_num"]


def test_lookup_only_on_an_empty_bank_tunes_nothing_and_writes_no_bank(tmp_path):
    model, inputs = models.make_mlp(32, 64), (torch.randn(4, 32),)
    _, report = pt.optimize(model, inputs, bank=str(tmp_path / "bank"), lookup_only=True, **FAST)
    assert not report["tuned"] and report["plan"]["strategy"] == "eager"
    assert report["repo_summary"]["repo_add_num"] == 0 and report["repo_summary"]["repo_hit_num"] == 0
    assert not (tmp_path / "bank").exists()


def test_a_candidate_whose_outputs_differ_is_refused(tmp_path, monkeypatch):
    class Off(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x) * 1.001

    def broken(module, inputs):
        return Off(module)  # "fast" (cheap) but wrong

    monkeypatch.setitem(cands.STRATEGIES, "broken", (broken, "none", "test: wrong outputs"))
    model, inputs = models.make_mlp(32, 64), (torch.randn(4, 32),)
    _, report = pt.optimize(model, inputs, bank=False, **FAST)
    assert all(rec["strategy"] != "broken" for rec in report["subgraphs"])
    assert all("broken" not in rec.get("candidates", {}) for rec in report["subgraphs"])


def test_outputs_match_uses_fp32_tolerance():
    a = torch.randn(100)
    assert pt.outputs_match(a + 1e-7, a)[0]
    ok, why = pt.outputs_match(a + 1e-2, a)
    assert not ok and "differs from eager" in why
    assert not pt.outputs_match(a[:50], a)[0]


class Untraceable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        if float(x.sum()) > 1e9:  # data-dependent control flow: torch.fx cannot trace it
            return x
        return torch.relu(self.fc(x))


def test_untraceable_model_is_one_opaque_subgraph(tmp_path):
    model, inputs = Untraceable().eval(), (torch.randn(4, 16),)
    _, report = pt.optimize(model, inputs, bank=str(tmp_path / "bank"), output=str(tmp_path / "o"), **FAST)
    assert any("whole model as one subgraph" in n for n in report["notes"])
    assert report["subgraphs"] == [] and report["repo_summary"]["total_num"] == 1
    with torch.no_grad():
        assert _close(pt.load(str(tmp_path / "o"))(*inputs), model(*inputs))


def test_structural_hash_ignores_values_but_not_shapes():
    x = torch.randn(4, 32)
    a = cap_mod.capture(models.make_mlp(32, 64), (x,)).split
    torch.manual_seed(5)
    b = cap_mod.capture(models.Mlp(32, 64).eval(), (x,)).split
    c = cap_mod.capture(models.make_mlp(32, 48), (x,)).split
    assert cap_mod.structural_hash(a, (x,)) == cap_mod.structural_hash(b, (x,))
    assert cap_mod.structural_hash(a, (x,)) != cap_mod.structural_hash(c, (x,))
    assert cap_mod.structural_hash(a, (x,)) != cap_mod.structural_hash(a, (torch.randn(8, 32),))


def _retune_after_editing_the_bank(tmp_path, *statements):
    """Tunes the small MLP into a fresh bank, runs ``statements`` on the bank's database, and
    tunes again; returns the second run's report."""
    model, inputs = models.make_mlp(32, 64), (torch.randn(4, 32),)
    bank = str(tmp_path / "bank")
    pt.optimize(model, inputs, bank=bank, **FAST)
    conn = sqlite3.connect(os.path.join(bank, "sgat_bank.db"))
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()
    _, report = pt.optimize(model, inputs, bank=bank, **FAST)
    return report


def test_untrusted_bank_rows_are_ignored(tmp_path):
    report = _retune_after_editing_the_bank(
        tmp_path, "UPDATE sgat_entries SET strategy='rm -rf', best_us=0.001 WHERE kind='subgraph'",
        "UPDATE sgat_entries SET best_us=-1 WHERE kind='model'")
    assert report["tuned"]
    assert any("unknown strategy" in n for n in report["notes"])
    assert any("not a positive number" in n for n in report["notes"])
    assert all(rec["strategy"] in cands.STRATEGIES for rec in report["subgraphs"])


def test_significance_rule():
    base = measure.Timing("a", [1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.03, 0.97])
    fast = measure.Timing("b", [0.5, 0.52, 0.49, 0.5, 0.51, 0.5, 0.53, 0.48])
    same = measure.Timing("c", [1.01, 0.99, 1.0, 1.02, 0.98, 1.01, 1.0, 0.99])
    assert measure.significantly_faster(fast, base)
    assert not measure.significantly_faster(base, fast)
    assert not measure.significantly_faster(same, base)
    lo, hi = base.ci
    assert lo <= base.median <= hi


def test_input_spec_parsing():
    from portkit.tune.__main__ import UsageError, make_inputs, parse_inputs

    parsed = parse_inputs("2x3x4x4,int64:2x5")
    assert parsed == [("float32", [2, 3, 4, 4], None), ("int64", [2, 5], None)]
    x, ids = make_inputs(parsed)
    assert x.dtype == torch.float32 and ids.dtype == torch.int64 and tuple(ids.shape) == (2, 5)
    for bad in ("2xa", "complex9:2", "0x3", "", "int64:2x5:5..5", "int64:2x5:0..x", "int64:2x5:0.5..9",
                "bool:2:0..1", "float32:2:1:2"):
        with pytest.raises(UsageError):
            parse_inputs(bad)


def test_input_value_ranges():
    from portkit.tune.__main__ import UsageError, make_inputs, parse_inputs

    parsed = parse_inputs("int64:64x16:0..50,float32:64x16:-0.5..0.25,int32:4:-3..-1,3x2")
    assert [p[2] for p in parsed] == [(0, 50), (-0.5, 0.25), (-3, -1), None]
    ids, x, small, plain = make_inputs(parsed)
    assert ids.dtype == torch.int64 and int(ids.min()) >= 0 and int(ids.max()) <= 49
    assert int(ids.max()) > 40  # the whole range is used, not [0, 100) clipped
    assert x.dtype == torch.float32 and float(x.min()) >= -0.5 and float(x.max()) < 0.25
    assert small.dtype == torch.int32 and set(small.tolist()) <= {-3, -2}
    assert plain.dtype == torch.float32 and tuple(plain.shape) == (3, 2)
    assert torch.equal(make_inputs(parsed)[0], ids)  # the same inputs every run
    with pytest.raises(UsageError, match="does not fit int8"):
        make_inputs(parse_inputs("int8:4:0..300"))


class _EmbeddingModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.proj = torch.nn.Linear(16, 4)

    def forward(self, ids):
        return self.proj(self.embed(ids)).mean(1)


def test_real_example_inputs_and_the_callers_module_state(tmp_path):
    """An nn.Embedding(50) tunes on the caller's own index tensor; the caller's model keeps its
    train mode (and each submodule's) and its requires_grad flags."""
    torch.manual_seed(0)
    model = _EmbeddingModel()
    model.train()
    model.proj.eval()
    model.embed.weight.requires_grad_(False)
    before = [(n, m.training) for n, m in model.named_modules()]
    grads = [(n, p.requires_grad) for n, p in model.named_parameters()]
    ids = torch.tensor([[0, 49, 7, 12], [48, 3, 3, 25]])
    optimized, report = pt.optimize(model, (ids,), bank=False, output=str(tmp_path / "out"), **FAST)
    assert [(n, m.training) for n, m in model.named_modules()] == before
    assert [(n, p.requires_grad) for n, p in model.named_parameters()] == grads
    want = _eager(model.eval(), (ids,))
    assert _close(pt.load(str(tmp_path / "out"))(ids), want)


FACTORY = """
import torch
def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
"""


def test_cli_framework_pytorch(portkit, python, tmp_path):
    (tmp_path / "usermodel.py").write_text(FACTORY)
    base = [portkit, "tune", "--framework=pytorch", "--python", python]
    r = subprocess.run(base + ["--job-type=1", "--model=usermodel:make", "--input", "4x16", "--output", "out",
                               "--bank", "bank", "--rounds", "3", "--no-compile", "--threads", "1"],
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "[portkit tune]" in r.stderr  # progress on stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    # optimized.pt for a TorchScript plan, the pickled module for one whose parts run eagerly.
    assert summary["tuned"] and os.path.exists(os.path.join(str(tmp_path), summary["artifact"]))
    sys.path.insert(0, str(tmp_path))
    try:
        import usermodel
    finally:
        sys.path.pop(0)
    x = torch.randn(4, 16)
    with torch.no_grad():
        assert _close(pt.load(str(tmp_path / "out"))(x), usermodel.make()(x))
    assert any(n.startswith("aoe_result_sgat_") for n in os.listdir(tmp_path / "out"))
    # Second run, lookup only: every entry a hit.
    r = subprocess.run(base + ["--model=usermodel:make", "--input", "4x16", "--output", "out2", "--bank", "bank",
                               "--lookup-only", "--rounds", "3", "--no-compile", "--threads", "1"],
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert not summary["tuned"]
    assert summary["repo_summary"]["repo_hit_num"] == summary["repo_summary"]["total_num"] > 0


@pytest.mark.parametrize("args, message", [
    (["--model=nosuchpkg.mod:make", "--input", "4x16"], "cannot import nosuchpkg.mod"),
    (["--model=usermodel:nothing", "--input", "4x16"], "has no attribute 'nothing'"),
    (["--model=usermodel:make", "--input", "4xq"], "expected positive dimensions"),
    (["--model=usermodel:make", "--input", "4x17"], "does not run on --input 4x17"),
    (["--model=usermodel.py", "--input", "4x16"], "pkg.module:make_model"),
    (["--model=usermodel:make", "--input", "4x16", "--job-type=3"], "1 (SGAT) and 2 (OPAT kernels inside the model"),
    (["--model=usermodel:make", "--input", "4x16", "--threads", "0"], "--threads"),
    (["--model=usermodel:make", "--input", "int64:4x16:5..5"],
     "--input 'int64:4x16:5..5': the range 5..5 is empty (values are drawn from [LOW, HIGH), LOW < HIGH)"),
    (["--model=usermodel:make", "--input", "int64:4x16:0..1.5"],
     "--input 'int64:4x16:0..1.5': expected a value range LOW..HIGH (integers) after the dimensions, like 0..50"),
])
def test_cli_errors_exit_2(portkit, python, tmp_path, args, message):
    (tmp_path / "usermodel.py").write_text(FACTORY)
    r = subprocess.run([portkit, "tune", "--framework=pytorch", "--python", python, "--output", "out"] + args,
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert not (tmp_path / "out" / "optimized.pt").exists()


EMBEDDING_FACTORY = """
import torch
def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Flatten(), torch.nn.Linear(32, 4)).eval()
"""


def test_cli_integer_input_range_fits_an_embedding(portkit, python, tmp_path):
    (tmp_path / "embedmodel.py").write_text(EMBEDDING_FACTORY)
    base = [portkit, "tune", "--framework=pytorch", "--python", python, "--model=embedmodel:make", "--bank", "bank",
            "--rounds", "3", "--no-compile", "--threads", "1"]
    r = subprocess.run(base + ["--input", "int64:2x4", "--output", "bad"], cwd=str(tmp_path), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert ("integer inputs are drawn from [0, 100) unless the input gives a range, e.g. int64:8x16:0..50"
            in r.stderr), r.stderr
    r = subprocess.run(base + ["--input", "int64:2x4:0..50", "--output", "out"], cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["artifact"]


def test_written_out_attention_is_fused_into_sdpa():
    model, x = models.make_encoder(dim=32, heads=2, ffn=64), torch.randn(2, 8, 32)
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 1):
        with pytest.raises(ValueError, match="needs torch >= 2.1"):
            cands.build("sdpa_freeze", model, (x,))
        return
    gm = torch.fx.symbolic_trace(model)
    assert cands.rewrite_attention(gm) == 1
    assert "scaled_dot_product_attention" in gm.code and "softmax" not in gm.code
    fused = cands.build("sdpa_freeze", model, (x,))
    with torch.no_grad():
        assert pt.outputs_match(fused(x), model(x))[0]
    with pytest.raises(ValueError, match="no attention pattern"):
        cands.build("sdpa_freeze", models.make_mlp(32, 64), (torch.randn(4, 32),))


@pytest.mark.skipif(not cands.torch_compile_available(), reason="torch.compile needs torch 2.x")
def test_autotuned_compile_plan_saves_loads_and_matches_eager(tmp_path):
    """The torch_compile_autotune plan (inductor max_autotune + freezing): its module matches eager,
    the artifact records the compile settings, and portkit.tune.load compiles it again with them."""
    from portkit.tune import sgat

    torch.manual_seed(3)
    make, make_inputs = MODELS["mlp"]
    model, inputs = make().eval(), make_inputs()
    want = _eager(model, inputs)
    cap = cap_mod.capture(model, inputs)
    with torch.no_grad():
        built = sgat.build_model_strategy("torch_compile_autotune", model, cap, {}, {}, inputs)
        assert _close(built(*inputs), want)
    plan = sgat.Plan("torch_compile_autotune", 1, {}, sgat.COMPILE_STRATEGIES["torch_compile_autotune"])
    os.makedirs(tmp_path / "out")
    sgat.save_artifact(str(tmp_path / "out"), plan, cap, model, inputs, {})
    doc = json.loads((tmp_path / "out" / "optimized.json").read_text())
    assert doc["strategy"] == "torch_compile_autotune" and doc["kind"] == "torch_compile"
    assert doc["compile_mode"] == "max-autotune-freeze"
    loaded = pt.load(str(tmp_path / "out"))
    with torch.no_grad():
        assert _close(loaded(*inputs), want)


# ---- the whole-model plan: a (strategy, threads) pair chosen jointly ----

_PATTERN = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01]


def _fake_measure(table, seen):
    """Stands in for measure_interleaved: each candidate runs once (so its thread count is set and
    it is exercised) and gets the same +-2 % pattern around table[name] ms (1 ms when absent), so
    every paired ratio is exactly the ratio of the table's values: decisions without timing luck."""
    def fake(candidates, rounds=15, warmup=2, min_sample_s=0.002, prepare=None, group=None, **budget):
        seen.append(sorted(candidates))
        out = {}
        with torch.no_grad():
            for name, fn in candidates.items():
                if prepare:
                    prepare(name)
                fn()
                out[name] = measure.Timing(name, [table.get(name, 1.0) * 1e-3 * p for p in _PATTERN])
        return out
    return fake


def _joint_setup(monkeypatch, table):
    from portkit.tune import sgat

    seen = []
    default = torch.get_num_threads()
    monkeypatch.setattr(sgat, "_thread_candidates", lambda d: sorted({d, d + 1}))
    monkeypatch.setattr(sgat, "measure_interleaved", _fake_measure(table, seen))
    return default, default + 1, seen


def test_plan_is_a_strategy_and_thread_count_chosen_together(tmp_path, monkeypatch):
    """optimize_for_inference at a non-default count wins although the same strategy at the
    default count does not and eager is no faster there: the pair is chosen, stored in the plan and
    the bank, applied by load, and the second run reproduces it from the bank without timing."""
    d, other = torch.get_num_threads(), torch.get_num_threads() + 1
    table = {"optimize_for_inference@%dt" % other: 0.5, "optimize_for_inference@%dt" % d: 1.0,
             "eager@%dt" % other: 1.0}
    d, other, seen = _joint_setup(monkeypatch, table)
    model, inputs = models.make_mlp(32, 64), (torch.randn(4, 32),)
    bank, out = str(tmp_path / "bank"), str(tmp_path / "out")
    try:
        _, report = pt.optimize(model, inputs, bank=bank, output=out, **dict(FAST, threads=None))
        assert report["plan"]["strategy"] == "optimize_for_inference" and report["plan"]["threads"] == other
        assert report["thread_counts"] == [d, other] and report["subgraph_threads"] == d
        assert torch.get_num_threads() == other  # the returned module runs at the plan's count
        # Every built whole-model strategy was timed at every count, in one interleaved run.
        timed = {(c["strategy"], c["threads"]) for c in report["candidates"].values()}
        for s in ("script_freeze", "optimize_for_inference"):
            assert {(s, d), (s, other)} <= timed
        assert {("eager", d), ("eager", other)} <= timed
        assert [n for n, c in report["candidates"].items() if c["baseline"]] == ["eager@%dt" % d]
        assert sorted(report["candidates"]) in seen
        for strat, b in report["builds"].items():  # its first call at each count checked
            if "error" in b:
                continue  # a strategy that does not apply here
            assert set(b["first_call_s"]) == ({str(other)} if strat == "eager" else {str(d), str(other)}), strat
        doc = json.loads((tmp_path / "out" / "optimized.json").read_text())
        assert doc["strategy"] == "optimize_for_inference" and doc["threads"] == other
        result_doc = json.loads(open(report["result_file"]).read())
        assert "optimize_for_inference@%dt" % other in result_doc["SGAT"]["model_candidates_ms"]
        conn = sqlite3.connect(os.path.join(bank, "sgat_bank.db"))
        (detail,) = conn.execute("SELECT detail FROM sgat_entries WHERE kind='model'").fetchone()
        conn.close()
        assert json.loads(detail)["threads"] == other and json.loads(detail)["subgraph_threads"] == d
        torch.set_num_threads(d)
        loaded = pt.load(out)
        assert torch.get_num_threads() == other
        with torch.no_grad():
            assert _close(loaded(*inputs), _eager(model, inputs))
        # Second run: the pair comes from the bank, the subgraph rows (keyed at the subgraph count)
        # hit too, and no whole-model candidate is built or timed.
        torch.set_num_threads(d)
        _, second = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "out2"), **dict(FAST, threads=None))
        assert not second["tuned"] and second["plan"] == report["plan"]
        assert second["candidates"] == {} and second["builds"] == {}
        s = second["repo_summary"]
        assert s["repo_hit_num"] == s["total_num"] == report["repo_summary"]["total_num"]
        assert json.loads((tmp_path / "out2" / "optimized.json").read_text())["threads"] == other
    finally:
        torch.set_num_threads(d)


@pytest.mark.parametrize("table_of, want", [
    # 1 % faster at the other count: within the 2 % margin, so the default setup stays.
    (lambda d, o: {"optimize_for_inference@%dt" % o: 0.99, "script_freeze@%dt" % o: 0.995}, ("eager", "d")),
    # Much faster at both counts, but the other count is no faster than the default beyond the
    # noise: the strategy is taken at the default count.
    (lambda d, o: {"optimize_for_inference@%dt" % o: 0.5, "optimize_for_inference@%dt" % d: 0.505},
     ("optimize_for_inference", "d")),
    # Eager alone at the other count, beyond the noise: eager at that count.
    (lambda d, o: {"eager@%dt" % o: 0.6}, ("eager", "o")),
])
def test_joint_choice_keeps_the_default_count_unless_another_wins(tmp_path, monkeypatch, table_of, want):
    d, other = torch.get_num_threads(), torch.get_num_threads() + 1
    _joint_setup(monkeypatch, table_of(d, other))
    model, inputs = models.make_mlp(32, 64), (torch.randn(4, 32),)
    try:
        _, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"), **dict(FAST, threads=None))
        threads = d if want[1] == "d" else other
        assert (report["plan"]["strategy"], report["plan"]["threads"]) == (want[0], threads)
        assert json.loads((tmp_path / "out" / "optimized.json").read_text())["threads"] == threads
    finally:
        torch.set_num_threads(d)


def test_an_eager_plan_loads_as_the_eager_module_that_was_timed(tmp_path, monkeypatch):
    """Nothing beats eager: portkit.tune.load gives the eager module (the traced GraphModule the
    tuner timed), not TorchScript's interpretation of it; optimized.pt still loads with
    torch.jit.load."""
    d, _, _ = _joint_setup(monkeypatch, {})
    model, inputs = models.make_mlp(32, 64), (torch.randn(4, 32),)
    try:
        _, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"), **dict(FAST, threads=None))
        assert report["plan"]["strategy"] == "eager"
        doc = json.loads((tmp_path / "out" / "optimized.json").read_text())
        assert doc["module"] == "optimized_module.pt" and (tmp_path / "out" / "optimized_module.pt").exists()
        assert str(tmp_path / "out" / "optimized_module.pt") in report["files"]
        loaded = pt.load(str(tmp_path / "out"))
        assert isinstance(loaded, torch.nn.Module) and not isinstance(loaded, torch.jit.ScriptModule)
        other = (torch.randn(4, 32),)
        with torch.no_grad():
            assert _close(loaded(*other), model(*other))
            assert _close(torch.jit.load(str(tmp_path / "out" / "optimized.pt"))(*other), model(*other))
    finally:
        torch.set_num_threads(d)


def test_choose_model_plan_prefers_builtins_and_the_default_count():
    from portkit.tune import sgat

    def t(name, ms):
        return measure.Timing(name, [ms * p for p in _PATTERN])

    def pick(times):
        timings = {n: t(n, ms) for n, ms in times.items()}
        pairs = {n: (n.split("@")[0], int(n.split("@")[1][:-1])) for n in times}
        return sgat.choose_model_plan(timings, pairs, "eager@1t", 1)

    assert pick({"eager@1t": 10, "optimize_for_inference@1t": 9, "optimize_for_inference@2t": 5}) == \
        "optimize_for_inference@2t"
    # A composite must beat the best built-in beyond the noise, at whatever count.
    assert pick({"eager@1t": 10, "optimize_for_inference@2t": 5, "composite@2t": 4.95}) == "optimize_for_inference@2t"
    assert pick({"eager@1t": 10, "optimize_for_inference@2t": 5, "composite@1t": 4}) == "composite@1t"
    # Nothing beats eager at the default beyond the noise (eager@2t only 1 % faster).
    assert pick({"eager@1t": 10, "eager@2t": 9.9, "script_freeze@2t": 9.95}) is None
    assert pick({"eager@1t": 10}) is None


def test_thread_count_groups_are_measured_back_to_back():
    calls = []
    runs = {n: (lambda n=n: calls.append((n, torch.get_num_threads()))) for n in ("a@1", "b@2", "c@1", "d@2")}
    count = lambda n: int(n[-1])
    d = torch.get_num_threads()
    try:
        timings = measure.measure_interleaved(runs, rounds=4, warmup=1, min_sample_s=0.0,
                                              prepare=measure.thread_switcher(runs, count), group=count)
    finally:
        torch.set_num_threads(d)
    assert sorted(timings) == sorted(runs) and all(len(t.samples) == 4 for t in timings.values())
    assert all(threads == count(n) for n, threads in calls)  # every call at its candidate's count
    for r in range(5):
        order = measure._round_order(list(runs), r, count)
        assert sorted(order) == sorted(runs)
        counts = [count(n) for n in order]
        assert counts in ([1, 1, 2, 2], [2, 2, 1, 1])  # one switch per round at most


def test_model_entry_with_a_bad_thread_count_is_ignored(tmp_path):
    report = _retune_after_editing_the_bank(
        tmp_path, "UPDATE sgat_entries SET detail='{\"threads\": 0}' WHERE kind='model'")
    assert report["tuned"]
    assert any("thread count 0 is not a positive integer" in n for n in report["notes"])


@pytest.mark.skipif(not cands.torch_compile_available(), reason="torch.compile needs torch 2.x")
def test_compile_candidates_are_generated_for_their_thread_count(tmp_path, monkeypatch):
    """Inductor writes the thread count into its kernels and its graph cache does not key on
    torch's count, so a torch.compile candidate (and a loaded torch_compile plan) names its count
    as inductor's cpp.threads, merged with the mode's own options."""
    from portkit.tune import sgat

    calls = []
    monkeypatch.setattr(torch, "compile", lambda m, **kw: calls.append(kw) or m)
    model = models.make_mlp(32, 64)
    cands.compile_module(model, None, 3)
    cands.compile_module(model, "max-autotune-no-cudagraphs", 2)
    cands.compile_module(model, "max-autotune-freeze", 1)
    cands.compile_module(model, None)
    assert calls == [{"options": {"cpp.threads": 3}},
                     {"options": {"max_autotune": True, "coordinate_descent_tuning": True, "cpp.threads": 2}},
                     {"options": {"max_autotune": True, "freezing": True, "cpp.threads": 1}},
                     {}]
    # load() compiles a torch_compile plan for the plan's count.
    inputs = (torch.randn(4, 32),)
    cap = cap_mod.capture(model, inputs)
    os.makedirs(tmp_path / "out")
    sgat.save_artifact(str(tmp_path / "out"), sgat.Plan("torch_compile", 2, {}, None), cap, model, inputs, {})
    d = torch.get_num_threads()
    try:
        calls.clear()
        pt.load(str(tmp_path / "out"))
        assert torch.get_num_threads() == 2 and calls == [{"options": {"cpp.threads": 2}}]
    finally:
        torch.set_num_threads(d)


def test_a_composite_ofi_plan_keeps_its_subgraph_choices_in_the_artifact(tmp_path, monkeypatch):
    """composite_ofi is the composite model finished by optimize_for_inference: the artifact is
    built from the same per-subgraph choices that were timed (they were once dropped from the
    plan, so the saved model had every subgraph eager)."""
    d = torch.get_num_threads()
    _joint_setup(monkeypatch, {"script_freeze": 0.5, "composite_ofi@%dt" % d: 0.3})
    model, inputs = models.make_resnet(width=8), (torch.randn(2, 3, 16, 16),)
    try:
        _, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"), **dict(FAST, threads=None))
        chosen = {r["submod"]: r["strategy"] for r in report["subgraphs"]}
        assert report["plan"]["strategy"] == "composite_ofi"
        assert set(chosen.values()) == {"script_freeze"} and report["plan"]["subgraphs"] == chosen
        doc = json.loads((tmp_path / "out" / "optimized.json").read_text())
        assert doc["strategy"] == "composite_ofi" and doc["subgraphs"] == chosen
        with torch.no_grad():
            assert _close(pt.load(str(tmp_path / "out"))(*inputs), _eager(model, inputs))
    finally:
        torch.set_num_threads(d)


def test_a_candidate_that_cannot_win_stops_early_and_a_deadline_ends_the_rounds():
    import time

    calls = {"base": 0, "fast": 0, "slow": 0}

    def sleeper(name, seconds):
        def run():
            calls[name] += 1
            time.sleep(seconds)
        return run

    runs = {"base": sleeper("base", 0.002), "fast": sleeper("fast", 0.0005), "slow": sleeper("slow", 0.02)}
    stopped = {}
    timings = measure.measure_interleaved(runs, rounds=8, warmup=1, min_sample_s=0.0, deadline=time.monotonic() + 600,
                                          keep=("base",), stopped=stopped)
    # 20 ms against 0.5 ms: after the minimum rounds the slow one cannot win and is no longer timed;
    # the baseline (kept) and the fastest run every round.
    assert stopped == {"slow": measure.MIN_ROUNDS}
    assert len(timings["slow"].samples) == measure.MIN_ROUNDS
    assert len(timings["base"].samples) == len(timings["fast"].samples) == 8
    # A deadline already past: every candidate gets the minimum rounds, then timing ends; of the
    # warm-up rounds only the first runs.
    for name in calls:
        calls[name] = 0
    timings = measure.measure_interleaved(runs, rounds=8, warmup=4, min_sample_s=0.0, deadline=time.monotonic())
    assert {n: len(t.samples) for n, t in timings.items()} == {n: measure.MIN_ROUNDS for n in runs}
    # first call + calibration + 1 warm-up round + the minimum rounds
    assert calls == {n: 3 + measure.MIN_ROUNDS for n in runs}
    assert measure.cannot_win([2.0] * 5, [1.0] * 5) and not measure.cannot_win([1.0] * 5, [1.0] * 5)


def test_a_spinning_candidate_gets_its_pause_before_another_is_timed(monkeypatch):
    """settle: after a sample of a candidate whose threads keep spinning, the next sample of
    another candidate waits that long first (never between two samples of the same one, nor after
    a candidate that owes no pause); the pause is outside the timed region."""
    pauses = []
    monkeypatch.setattr(measure.time, "sleep", lambda s: pauses.append(s))
    order = []
    runs = {"spin": lambda: order.append("spin"), "quiet": lambda: order.append("quiet")}
    owed = {"spin": 0.05, "quiet": 0.0}
    timings = measure.measure_interleaved(runs, rounds=4, warmup=1, min_sample_s=0.0, settle=owed.get)
    assert all(len(t.samples) == 4 for t in timings.values())
    sampled = order[4:]  # after each candidate's first call and calibration call
    spin_then_other = sum(1 for a, b in zip(sampled, sampled[1:]) if a == "spin" and b != "spin")
    assert pauses == [0.05] * spin_then_other and spin_then_other >= 2
    # The tuner's rule: ONNX Runtime sessions that spin owe the longest pause, torch's pool a short one.
    assert sgat.settle_of_setting("ALL/sequential") == sgat.ORT_SPIN_SETTLE_S > sgat.TORCH_SETTLE_S > 0
    assert sgat.settle_of_setting("ALL/sequential/nospin") == 0.0
    assert sgat.settle_time(torch.nn.Linear(2, 2)) == sgat.TORCH_SETTLE_S


def test_a_spent_time_budget_leaves_subgraphs_eager_and_reports_the_cost(tmp_path):
    model, inputs = models.make_resnet(width=8), (torch.randn(2, 3, 16, 16),)
    bank = str(tmp_path / "bank")
    _, report = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "out"),
                            **dict(FAST, time_budget=1e-6))
    cost = report["cost"]
    assert cost["time_budget_s"] == 1e-6 and cost["seconds"] > 0
    assert set(cost["phases_s"]) >= {"capture", "subgraphs", "model_candidates", "save", "final_timing"}
    # No whole-model candidate was built after the budget's build share.
    assert cost["not_built_for_time"] and report["plan"]["strategy"] == "eager"
    assert report["candidates"] == {}
    # Every subgraph was left eager for the budget, said so, and none was stored in the bank.
    assert cost["not_tuned_for_time"] == [r["submod"] for r in report["subgraphs"]] != []
    assert all(r["strategy"] == "eager" and r["note"].startswith("time budget spent") for r in report["subgraphs"])
    conn = sqlite3.connect(os.path.join(bank, "sgat_bank.db"))
    assert conn.execute("SELECT COUNT(*) FROM sgat_entries WHERE kind='subgraph'").fetchone() == (0,)
    conn.close()
    assert json.loads(open(report["result_file"]).read())["SGAT"]["tuning_cost"]["time_budget_s"] == 1e-6
    with torch.no_grad():
        assert _close(pt.load(str(tmp_path / "out"))(*inputs), model.eval()(*inputs))
    with pytest.raises(pt.TuneError, match="time_budget must be a positive number of seconds"):
        pt.optimize(model, inputs, bank=False, **dict(FAST, time_budget=0))


def test_a_broken_subgraph_is_left_eager_with_a_note(tmp_path, monkeypatch):
    """One part that cannot be tuned (here: every strategy build raises something unexpected)
    never fails the model: that subgraph stays eager and the report says why."""
    from portkit.tune import sgat

    model, inputs = models.make_resnet(width=8), (torch.randn(2, 3, 16, 16),)
    real = sgat._tune_subgraph

    def flaky(sub, sin, *args, **kw):
        if "layers.1" in args[5]:  # the label names the block
            raise KeyError("boom")
        return real(sub, sin, *args, **kw)

    monkeypatch.setattr(sgat, "_tune_subgraph", flaky)
    _, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"), **FAST)
    broken = [r for r in report["subgraphs"] if r["name"] == "layers.1"]
    assert broken and all(r["strategy"] == "eager" and "KeyError" in r["note"] for r in broken)
    assert any("left eager: KeyError: 'boom'" in n for n in report["notes"])
    with torch.no_grad():
        assert _close(pt.load(str(tmp_path / "out"))(*inputs), model.eval()(*inputs))


def test_an_onnxruntime_plan_keeps_a_module_interface_and_records_its_version(tmp_path, monkeypatch):
    """ONNX Runtime (when installed) is a whole-model candidate with its own settings searched;
    chosen (here: the measurement replaced by given timings), its artifact is optimized.onnx with
    the settings and ONNX Runtime's version in the plan, loads as a module returning tensors, and the
    second run rebuilds it from the bank."""
    ort = pytest.importorskip("onnxruntime")
    from portkit.tune import sgat

    d, _, _ = _joint_setup(monkeypatch, {"onnxruntime@%dt" % (torch.get_num_threads() + 1): 0.3})
    model, inputs = models.make_resnet(width=8), (torch.randn(2, 3, 16, 16),)
    bank, out = str(tmp_path / "bank"), str(tmp_path / "out")
    try:
        _, report = pt.optimize(model, inputs, bank=bank, output=out, **dict(FAST, threads=None))
        assert report["plan"]["strategy"] == "onnxruntime"
        options = report["plan"]["ort_options"]
        assert options["intra_op_num_threads"] == report["plan"]["threads"] == d + 1
        assert {options["graph_optimization_level"], options["execution_mode"]} <= {
            "ORT_ENABLE_ALL", "ORT_ENABLE_EXTENDED", "ORT_SEQUENTIAL", "ORT_PARALLEL"}
        doc = json.loads((tmp_path / "out" / "optimized.json").read_text())
        assert doc["artifact"] == "optimized.onnx" and doc["onnxruntime"] == ort.__version__
        assert doc["ort_options"] == options
        loaded = pt.load(out)
        assert isinstance(loaded, torch.nn.Module)
        other = (torch.randn(2, 3, 16, 16),)
        with torch.no_grad():
            assert _close(loaded(*other), model.eval()(*other))
        _, second = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "out2"), **dict(FAST, threads=None))
        assert not second["tuned"] and second["plan"] == report["plan"]
    finally:
        torch.set_num_threads(d)
    assert sgat.ort.STRATEGY in sgat.MODEL_STRATEGIES


def test_an_openvino_plan_is_self_contained_and_refuses_changed_weights(tmp_path, monkeypatch):
    """OpenVINO (when installed) is a whole-model candidate built per thread count; chosen (the
    measurement replaced by given timings), its artifact is OpenVINO's IR (optimized.xml +
    optimized.bin, fp32) with the compile settings and OpenVINO's version in the plan. Moved to
    another folder with the bank deleted it loads as a module that equals eager on other inputs;
    changed weights are refused before anything is compiled; the second run rebuilds it from the
    bank."""
    openvino = pytest.importorskip("openvino")
    from portkit.tune import sgat

    d, _, _ = _joint_setup(monkeypatch, {"openvino@%dt" % (torch.get_num_threads() + 1): 0.3})
    model, inputs = models.make_resnet(width=8), (torch.randn(2, 3, 16, 16),)
    bank, out = tmp_path / "bank", tmp_path / "out"
    try:
        _, report = pt.optimize(model, inputs, bank=str(bank), output=str(out), **dict(FAST, threads=None))
        assert (report["plan"]["strategy"], report["plan"]["threads"]) == ("openvino", d + 1)
        assert "openvino" in report["builds"] and "error" not in report["builds"]["openvino"]
        doc = json.loads((out / "optimized.json").read_text())
        assert (doc["artifact"], doc["weights"], doc["kind"]) == ("optimized.xml", "optimized.bin", "openvino")
        assert openvino.__version__.startswith(doc["openvino"])
        assert doc["ov_options"] == {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32",
                                     "INFERENCE_NUM_THREADS": d + 1}
        assert set(doc["sha256"]) == {"optimized.xml", "optimized.bin"}
        _, second = pt.optimize(model, inputs, bank=str(bank), output=str(tmp_path / "out2"),
                                **dict(FAST, threads=None))
        assert not second["tuned"] and second["plan"]["strategy"] == "openvino"
        moved = tmp_path / "moved"
        shutil.move(str(out), str(moved))
        shutil.rmtree(str(bank))
        loaded = pt.load(str(moved))
        assert isinstance(loaded, torch.nn.Module) and torch.get_num_threads() == d + 1
        other = (torch.randn(2, 3, 16, 16),)
        with torch.no_grad():
            assert _close(loaded(*other), model.eval()(*other))
        weights = moved / "optimized.bin"
        data = bytearray(weights.read_bytes())
        data[len(data) // 2] ^= 0xFF
        weights.write_bytes(bytes(data))
        with pytest.raises(pt.TuneError, match="optimized.bin"):
            pt.load(str(moved))
    finally:
        torch.set_num_threads(d)
    assert sgat.ov.STRATEGY in sgat.MODEL_STRATEGIES and sgat.ov.STRATEGY in sgat.PEER_STRATEGIES


def test_openvino_is_a_peer_of_the_final_run(tmp_path, monkeypatch):
    """OpenVINO built at the default thread count is one of the final run's peers: faster than the
    plan as loaded by more than the margin, it becomes the plan (saved as OpenVINO's IR)."""
    pytest.importorskip("openvino")
    d = torch.get_num_threads()
    model, inputs = models.make_mlp(32, 64), (torch.randn(4, 32),)
    try:
        _joint_setup(monkeypatch, {"script_freeze@%dt" % d: 0.5, "openvino@%dt" % d: 0.9, "peer:openvino": 0.4})
        _, report = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "out"), **dict(FAST, threads=None))
        race = report["final_race"]
        assert race["plan"]["strategy"] == "script_freeze" and race["switched_to"] == "peer:openvino"
        assert race["peers"]["peer:openvino"]["strategy"] == "openvino"
        assert (report["plan"]["strategy"], report["plan"]["threads"]) == ("openvino", d)
        assert (tmp_path / "out" / "optimized.bin").is_file()
        with torch.no_grad():
            assert _close(pt.load(str(tmp_path / "out"))(*inputs), _eager(model, inputs))
    finally:
        torch.set_num_threads(d)


def test_the_plan_as_loaded_gives_way_to_a_faster_peer_configuration(tmp_path, monkeypatch):
    """The final run times the saved plan as loaded against the peers' own configurations at the
    default thread count (here optimize_for_inference; eager is the baseline): a peer faster by
    more than the 2 % margin (median paired ratio) replaces the plan, which is saved, loaded back,
    timed again and stored in the bank. A tie keeps the plan. Timings given by a table."""
    d = torch.get_num_threads()
    model, inputs = models.make_mlp(32, 64), (torch.randn(4, 32),)
    try:
        # script_freeze wins the whole-model race; in the final run the peer ties with the plan.
        _joint_setup(monkeypatch, {"script_freeze@%dt" % d: 0.5, "peer:optimize_for_inference": 1.0})
        _, kept = pt.optimize(model, inputs, bank=False, output=str(tmp_path / "tie"), **dict(FAST, threads=None))
        race = kept["final_race"]
        assert kept["plan"]["strategy"] == "script_freeze" and race["switched_to"] is None
        assert "peer:optimize_for_inference" in race["peers"] and "baseline" in race["peers"]
        assert race["peers"]["peer:optimize_for_inference"]["threads"] == d
        # The same race where the peer is 40 % faster than the plan as loaded.
        _joint_setup(monkeypatch, {"script_freeze@%dt" % d: 0.5, "peer:optimize_for_inference": 0.6})
        bank = str(tmp_path / "bank")
        _, report = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "out"), **dict(FAST, threads=None))
        assert report["final_race"]["switched_to"] == "peer:optimize_for_inference"
        assert report["final_race"]["plan"]["strategy"] == "script_freeze"
        assert (report["plan"]["strategy"], report["plan"]["threads"]) == ("optimize_for_inference", d)
        assert any(n.startswith("final run: script_freeze@%dt" % d) for n in report["notes"])
        doc = json.loads((tmp_path / "out" / "optimized.json").read_text())
        assert doc["strategy"] == "optimize_for_inference"
        result_doc = json.loads(open(report["result_file"]).read())["SGAT"]
        assert result_doc["plan"]["strategy"] == "optimize_for_inference"
        assert result_doc["final_race"]["switched_to"] == "peer:optimize_for_inference"
        conn = sqlite3.connect(os.path.join(bank, "sgat_bank.db"))
        (stored,) = conn.execute("SELECT strategy FROM sgat_entries WHERE kind='model'").fetchone()
        conn.close()
        assert stored == "optimize_for_inference"
        with torch.no_grad():
            assert _close(pt.load(str(tmp_path / "out"))(*inputs), _eager(model, inputs))
        # A plan from the bank has no peers to race (a lookup stays short).
        _, second = pt.optimize(model, inputs, bank=bank, output=str(tmp_path / "out2"), **dict(FAST, threads=None))
        assert not second["tuned"] and second["final_race"]["peers"] == {}
        assert second["plan"]["strategy"] == "optimize_for_inference"
    finally:
        torch.set_num_threads(d)


def test_an_ort_search_cut_short_by_its_deadline_stops_before_the_next_variant():
    """ort._until: once the projected cost of one more variant would end past the deadline, the
    variants' generator is not advanced (a transformer fusion that would not be timed is never
    computed); without a deadline, or with time to spare, every variant comes."""
    import time

    from portkit.tune import ort

    made = []

    def gen():
        for i in range(4):
            made.append(i)
            yield i

    assert list(ort._until(gen(), None, lambda: 1e9)) == [0, 1, 2, 3]
    made.clear()
    assert list(ort._until(gen(), time.monotonic() + 600, lambda: 1.0)) == [0, 1, 2, 3]
    made.clear()
    assert list(ort._until(gen(), time.monotonic() + 600, lambda: 1e9)) == [0] and made == [0]
    # None: nothing built yet, so the first variant that reproduces eager is still looked for.
    made.clear()
    state = iter([None, None, 1e9])
    assert list(ort._until(gen(), time.monotonic(), lambda: next(state))) == [0, 1, 2] and made == [0, 1, 2]
    assert ort.setting_name(ort.settings_at(2)[0]) == ort.DEFAULT_SETTING


def test_a_peer_replaces_the_plan_when_either_ratio_says_it_is_faster_by_more_than_the_margin():
    t = measure.Timing
    result = t("result", [1.0, 1.0, 1.0, 0.5, 0.5])
    peers = {"peer:x": (None, "optimize_for_inference", 1, None)}
    # Paired ratios 0.5, 1, 1, 1, 1 (median 1) but medians 0.5 against 1.0: replaced.
    timings = {"result": result, "peer:x": t("peer:x", [0.5, 1.0, 1.0, 0.5, 0.5])}
    assert sgat._Tuning._beaten_by(None, timings, peers) == "peer:x"
    # 1 % faster by both: within the margin, the plan stays; no peers, nothing to replace it.
    timings = {"result": result, "peer:x": t("peer:x", [x * 0.99 for x in result.samples])}
    assert sgat._Tuning._beaten_by(None, timings, peers) is None
    assert sgat._Tuning._beaten_by(None, {"result": result}, {}) is None
