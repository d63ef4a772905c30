"""GDAT's cost model and tuner (no processes, no timing): DDP's bucketing rule, what each knob
does to the simulated step, the search against exhaustive evaluation on several models, and
`portkit tune --job-type=4 --simulate` end to end."""
import json
import os
import random
import sys

import pytest

from conftest import HERE, run

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from portkit.gdat import (DDPSettings, DescriptionError, ModelDescription, Space, bucket_sizes,  # noqa: E402
                          coordinate_search, exhaustive, simulate)
from portkit.gdat.settings import MIB  # noqa: E402

EXAMPLES = os.path.abspath(os.path.join(HERE, "..", "..", "examples", "gdat"))
EXAMPLE_MODELS = ["mlp_comm_bound", "resnet_like", "encoder_unused_params"]


def describe(layers, alpha=0.1, beta=0.5, **extra):
    doc = {"name": "t", "forward_ms": 1.0, "optimizer_ms": 0.5, "comm": {"alpha_ms": alpha, "beta_ms_per_mb": beta},
           "layers": [{"name": "l%d" % i, "backward_ms": ms, "params": params} for i, (ms, params) in enumerate(layers)]}
    doc.update(extra)
    return ModelDescription(doc)


def random_model(seed):
    r = random.Random(seed)
    layers = []
    for _ in range(r.randint(3, 24)):
        rows, cols = r.choice([64, 256, 1024, 4096]), r.choice([64, 256, 1024, 2048])
        layers.append((round(r.uniform(0.05, 3.0), 3), [[rows, cols], [rows]]))
    return describe(layers, alpha=r.choice([0.01, 0.05, 0.2, 1.0]), beta=r.choice([0.05, 0.2, 0.8, 3.0]),
                    copy_ms_per_mb=r.choice([0.0, 0.01, 0.1]), fp16_cast_ms_per_mb=r.choice([0.01, 0.05, 0.3]),
                    powersgd_gflops=r.choice([5.0, 50.0]), find_unused_parameters=r.random() < 0.3,
                    unused_search_ms=0.3)


# --- DDP's bucketing rule -------------------------------------------------------------------

def test_bucket_rule_closes_a_bucket_once_it_reaches_its_limit():
    # 4 tensors of 3 bytes: first limit 5 -> [0,1] (6 >= 5), then limit 7 -> [2,3] (6 < 7, left open).
    assert bucket_sizes([3, 3, 3, 3], 5, 7) == [[0, 1], [2, 3]]
    assert bucket_sizes([3, 3, 3, 3], 3, 3) == [[0], [1], [2], [3]]
    assert bucket_sizes([3, 3, 3, 3], 100, 1) == [[0, 1, 2, 3]]
    assert bucket_sizes([10, 1, 1], 4, 4) == [[0], [1, 2]]


# --- the simulated step ---------------------------------------------------------------------

def test_overlap_hides_communication_behind_a_long_backward():
    # Ten layers of 1 MiB each, 5 ms of backward each; 1 MiB costs 0.1 + 0.5 ms on the link.
    layers = [(5.0, [[256, 1024]])] * 10
    d = describe(layers)
    small = simulate(d, DDPSettings(bucket_cap_mb=1, first_bucket_mb=1))
    assert small["buckets"] == 10
    # Every bucket but the last finishes under the next layer's backward: only the last is exposed.
    assert small["exposed_comm_ms"] == pytest.approx(0.6)
    assert small["step_ms"] == pytest.approx(1.0 + 50.0 + 0.6 + 0.5)
    one = simulate(d, DDPSettings(bucket_cap_mb=100, first_bucket_mb=100))
    assert one["buckets"] == 1
    assert one["exposed_comm_ms"] == pytest.approx(0.1 + 0.5 * 10)  # nothing overlaps


def test_link_is_serial_when_communication_dominates():
    d = describe([(0.1, [[256, 1024]])] * 4, alpha=1.0, beta=2.0)
    r = simulate(d, DDPSettings(bucket_cap_mb=1, first_bucket_mb=1))
    # The first bucket is ready at 0.1 ms, then the link is busy 4 x 3 ms back to back.
    assert r["comm_busy_ms"] == pytest.approx(12.0)
    assert r["exposed_comm_ms"] == pytest.approx(0.1 + 12.0 - 0.4)


def test_first_bucket_lets_the_tail_start_early():
    # The last layer (ready first in backward) is small; a small first bucket sends it alone
    # while the big layers still compute.
    d = describe([(4.0, [[1024, 1024]]), (4.0, [[1024, 1024]]), (0.5, [[64, 256]])], alpha=0.5, beta=1.0)
    big_first = simulate(d, DDPSettings(bucket_cap_mb=4, first_bucket_mb=25))
    small_first = simulate(d, DDPSettings(bucket_cap_mb=4, first_bucket_mb=0.0625))
    assert big_first["buckets"] == 1 and small_first["buckets"] == 3
    assert small_first["step_ms"] < big_first["step_ms"]


def test_bucket_view_removes_the_copies():
    d = describe([(1.0, [[128, 1024]])] * 3, copy_ms_per_mb=0.2)
    copy = simulate(d, DDPSettings(gradient_as_bucket_view=False))
    view = simulate(d, DDPSettings(gradient_as_bucket_view=True))
    # 1.5 MiB copied in (on the backward) and back out (after the all-reduce): 2 x 0.3 ms.
    assert copy["step_ms"] - view["step_ms"] == pytest.approx(0.6)


def test_fp16_halves_the_bytes_and_pays_the_casts():
    d = describe([(0.1, [[1024, 1024]])], alpha=0.0, beta=1.0, fp16_cast_ms_per_mb=0.1)
    plain = simulate(d, DDPSettings(gradient_as_bucket_view=True))
    fp16 = simulate(d, DDPSettings(gradient_as_bucket_view=True, comm_hook="fp16"))
    assert plain["comm_busy_ms"] == pytest.approx(4.0)
    assert fp16["comm_busy_ms"] == pytest.approx(2.0 + 2 * 0.1 * 4.0)


def test_powersgd_compresses_matrices_and_leaves_vectors():
    d = describe([(0.1, [[1024, 1024], [1024]])], alpha=0.0, beta=1.0, powersgd_gflops=1.0)
    r = simulate(d, DDPSettings(gradient_as_bucket_view=True, comm_hook="powersgd", powersgd_rank=2))
    p_q_mb = (1024 * 2 + 1024 * 2) * 4 / MIB
    flops = 4.0 * 1024 * 1024 * 2 + 2.0 * 1024 * 4
    assert r["comm_busy_ms"] == pytest.approx(1024 * 4 / MIB + p_q_mb + flops / 1e6)


def test_static_graph_only_matters_with_unused_parameter_search():
    layers = [(1.0, [[256, 256]])] * 3
    plain = describe(layers)
    unused = describe(layers, find_unused_parameters=True, unused_search_ms=0.7)
    for d, gain in ((plain, 0.0), (unused, 0.7)):
        a = simulate(d, DDPSettings(static_graph=False))["step_ms"]
        b = simulate(d, DDPSettings(static_graph=True))["step_ms"]
        assert a - b == pytest.approx(gain)


def test_simulation_is_deterministic():
    d = random_model(7)
    s = DDPSettings(bucket_cap_mb=5, first_bucket_mb=0.25, comm_hook="powersgd", powersgd_rank=4)
    assert json.dumps(simulate(d, s)) == json.dumps(simulate(d, s))


def test_description_errors_name_the_field(tmp_path):
    with pytest.raises(DescriptionError, match="layers\\[1\\]: parameter shape \\[0, 3\\]"):
        describe([(1.0, [[2, 2]]), (1.0, [[0, 3]])])
    with pytest.raises(DescriptionError, match="'alpha_ms' must be a finite number"):
        describe([(1.0, [[2, 2]])], alpha=-1)
    with pytest.raises(DescriptionError, match="unknown field\\(s\\) bogus"):
        describe([(1.0, [[2, 2]])], bogus=1)
    bad = tmp_path / "m.json"
    bad.write_text("{not json")
    with pytest.raises(DescriptionError, match=str(bad) + ": not valid JSON"):
        ModelDescription.load(str(bad))


# --- the search -----------------------------------------------------------------------------

@pytest.mark.parametrize("lossy", [False, True])
@pytest.mark.parametrize("name", EXAMPLE_MODELS)
def test_search_finds_the_exhaustive_optimum_on_the_example_models(name, lossy):
    d = ModelDescription.load(os.path.join(EXAMPLES, name + ".json"))
    space = Space(allow_lossy=lossy)
    found = coordinate_search(space, lambda p: simulate(d, p)["step_ms"])
    full = exhaustive(space, lambda p: simulate(d, p)["step_ms"])
    assert found.complete
    assert found.best_ms == pytest.approx(full.best_ms, rel=1e-12)
    assert found.best == full.best
    assert found.evaluations < len(full.trials)
    # Every example has something to gain over DDP's defaults.
    assert found.best_ms < simulate(d, DDPSettings())["step_ms"]


@pytest.mark.parametrize("lossy", [False, True])
def test_search_finds_the_exhaustive_optimum_on_random_models(lossy):
    space = Space(allow_lossy=lossy)
    evaluations = []
    for seed in range(40):
        d = random_model(seed)
        found = coordinate_search(space, lambda p: simulate(d, p)["step_ms"])
        full = exhaustive(space, lambda p: simulate(d, p)["step_ms"])
        assert found.best_ms == pytest.approx(full.best_ms, rel=1e-12), (seed, found.best, full.best)
        evaluations.append(found.evaluations)
    assert max(evaluations) < len(space.points())


def test_lossy_hooks_only_when_allowed():
    d = ModelDescription.load(os.path.join(EXAMPLES, "mlp_comm_bound.json"))
    strict = coordinate_search(Space(), lambda p: simulate(d, p)["step_ms"])
    assert all(not p.lossy for p, _ in strict.trials)
    lossy = coordinate_search(Space(allow_lossy=True), lambda p: simulate(d, p)["step_ms"])
    assert lossy.best.lossy  # this model is communication-bound: compression wins
    assert lossy.best_ms < strict.best_ms


def test_budget_bounds_the_evaluations_and_keeps_the_best_so_far():
    d = random_model(3)
    calls = []
    r = coordinate_search(Space(), lambda p: calls.append(p) or simulate(d, p)["step_ms"], max_evals=5)
    assert len(calls) == 5 and not r.complete
    assert r.best_ms == min(simulate(d, p)["step_ms"] for p in calls)
    assert calls[0] == DDPSettings()  # the baseline is measured first


# --- the command line -----------------------------------------------------------------------

def test_cli_simulate_writes_the_result_and_the_settings(portkit, python, tmp_path):
    out = tmp_path / "out"
    res = run([portkit, "tune", "--job-type=4", "--simulate", os.path.join(EXAMPLES, "encoder_unused_params.json"),
               "--output", str(out), "--exhaustive", "--python", python])
    assert res.returncode == 0, res.stderr
    assert "Aoe process finished" in res.stdout
    results = sorted(p for p in os.listdir(out) if p.startswith("aoe_result_gdat_"))
    assert len(results) == 1 and results[0].endswith(".json") and "_pid" in results[0]
    doc = json.loads((out / results[0]).read_text())
    g = doc["GDAT"]
    assert doc["basic"]["status"] == "finished"
    assert g["found_exhaustive_optimum"] is True
    assert g["model_result_performance(ms)"] == pytest.approx(g["exhaustive_best(ms)"])
    assert g["model_result_performance(ms)"] < g["model_baseline_performance(ms)"]
    assert g["trial_count"] == len(g["trials"]) < g["exhaustive_points"]
    settings = json.loads((out / "gdat_settings.json").read_text())
    assert settings["settings"] == g["best_settings"]
    assert settings["lossy"] is False and settings["settings"]["static_graph"] is True
    assert settings["first_bucket_bytes"] == int(settings["settings"]["first_bucket_mb"] * MIB)


def test_cli_simulate_bad_description_names_the_file(portkit, python, tmp_path):
    bad = tmp_path / "model.json"
    bad.write_text(json.dumps({"layers": [], "comm": {"alpha_ms": 1, "beta_ms_per_mb": 1}}))
    res = run([portkit, "tune", "--job-type=4", "--simulate", str(bad), "--output", str(tmp_path / "o"),
               "--python", python])
    assert res.returncode == 2
    assert str(bad) + ": 'layers' must be a non-empty list" in res.stderr
    assert not (tmp_path / "o" / "gdat_settings.json").exists()


@pytest.mark.parametrize("args, message", [
    (["--model", "nocolon", "--input", "2x2"], "--model nocolon: expected pkg.module:callable"),
    (["--model", "m:f"], "--model needs --input"),
    (["--framework", "tensorflow", "--simulate", "x.json"], "GDAT is implemented for pytorch only"),
    (["--exhaustive", "--model", "m:f", "--input", "2"], "--exhaustive applies to --simulate only"),
    ([], "GDAT needs either --model"),
    (["--describe", "d.json"], "--describe needs --model"),
    (["--model", "m:f", "--input", "2", "--describe", "d.json", "--alpha-ms", "1"], "--alpha-ms and --beta-ms-per-mb go together"),
    (["--simulate", "x.json", "--measure-comm"], "apply to --describe only"),
])
def test_cli_usage_errors(portkit, tmp_path, args, message):
    res = run([portkit, "tune", "--job-type=4", "--output", str(tmp_path)] + args)
    assert res.returncode == 2
    assert message in res.stderr


def test_input_specs():
    from portkit.gdat.__main__ import UsageError, parse_input_spec

    assert parse_input_spec("8x3x32x32") == [("float32", [8, 3, 32, 32])]
    assert parse_input_spec("8x3, int64:8X16") == [("float32", [8, 3]), ("int64", [8, 16])]
    for bad, message in (("8x0", "is not a shape"), ("complex:2", "unknown dtype 'complex'"), ("x", "is not a shape")):
        with pytest.raises(UsageError, match=message):
            parse_input_spec(bad)


def _mutations(rng, value, depth=0):
    """A copy of a JSON value with one random part replaced by a value of a random kind."""
    junk = [None, True, -1, 0, 1e308, float("nan"), "x", [], {}, [[0]], [[-2, 3]], [[2 ** 40, 2 ** 40]], {"a": 1}]
    if isinstance(value, dict) and value and rng.random() < 0.8:
        out = dict(value)
        key = rng.choice(sorted(out))
        out[key] = _mutations(rng, out[key], depth + 1) if rng.random() < 0.6 else rng.choice(junk)
        if rng.random() < 0.1:
            del out[key]
        return out
    if isinstance(value, list) and value and rng.random() < 0.8:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = _mutations(rng, out[i], depth + 1) if rng.random() < 0.6 else rng.choice(junk)
        return out
    return rng.choice(junk)


def test_mutated_descriptions_load_or_fail_cleanly():
    """Random damage to a description gives a DescriptionError naming the problem, or a model
    the simulator runs; never another exception."""
    with open(os.path.join(EXAMPLES, "resnet_like.json")) as f:
        base = json.load(f)
    rng = random.Random(5)
    loaded = refused = 0
    for _ in range(400):
        doc = _mutations(rng, base)
        try:
            d = ModelDescription(doc, where="mutant.json")
        except DescriptionError as e:
            assert str(e).startswith("mutant.json: ")
            refused += 1
            continue
        r = simulate(d, DDPSettings(comm_hook="powersgd", powersgd_rank=4))
        assert r["step_ms"] >= 0
        loaded += 1
    assert loaded > 0 and refused > 0
