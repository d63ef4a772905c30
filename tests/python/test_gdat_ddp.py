"""GDAT on real DDP with two gloo processes: the settings are applied (DDP's buckets are the ones
DDP's rule predicts, bucket view and static graph are on), gradients are bitwise equal to plain
DDP's for every non-lossy setting, tune_ddp decides on rank 0 and every rank continues with the
same DDP, and `portkit tune --job-type=4 --framework=pytorch` runs it end to end. Skips when
the gloo process group cannot start in this sandbox."""
import json
import os
import shutil

import sys

import pytest

from conftest import HERE, run

sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from portkit.gdat import bucket_sizes  # noqa: E402

PYTHON_DIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))
FIXTURE = os.path.join(HERE, "fixtures", "gdat_ddp_check.py")
EXAMPLES = os.path.abspath(os.path.join(HERE, "..", "..", "examples", "gdat"))
MIB = 1024 * 1024
DEFAULTS = {"bucket_cap_mb": 25.0, "first_bucket_mb": 1.0, "gradient_as_bucket_view": False, "static_graph": False,
            "comm_hook": "none", "powersgd_rank": 0}


@pytest.fixture(scope="module")
def ddp_run(python, tmp_path_factory):
    out = tmp_path_factory.mktemp("gdat_ddp")
    res = run([python, FIXTURE, str(out)], env=dict(os.environ, PYTHONPATH=PYTHON_DIR), cwd=str(out))
    if res.returncode == 77:
        pytest.skip("gloo process group cannot start here: " + res.stderr.strip()[-300:])
    assert res.returncode == 0, res.stdout + res.stderr
    ranks = [json.loads((out / ("rank%d.json" % r)).read_text()) for r in range(2)]
    return out, ranks


def test_settings_are_applied_to_ddp(ddp_run):
    _, ranks = ddp_run
    for record in ranks:
        assert record["world"] == 2
        for case in record["cases"]:
            s, rep = case["settings"], case["report"]
            assert rep["bucket_sizes"] == case["expected_bucket_bytes"], s
            assert rep["gradient_as_bucket_view"] == s["gradient_as_bucket_view"]
            assert rep["static_graph"] == s["static_graph"]
            assert rep["bucket_cap_bytes"] == int(s["bucket_cap_mb"] * MIB)
        counts = [len(c["report"]["bucket_sizes"]) for c in record["cases"]]
        assert counts[:4] == [3, 3, 1, 4]  # the settings change the bucketing, as designed


def test_non_lossy_settings_give_plain_ddp_gradients(ddp_run):
    _, ranks = ddp_run
    for record in ranks:
        for case in record["cases"]:
            if case["settings"]["comm_hook"] == "fp16":
                # fp16 compression was applied: gradients differ, but only by rounding.
                assert not case["grads_equal"] and case["grads_close"]
            elif case["settings"]["comm_hook"] == "powersgd":
                # Plain all-reduce for the first 2 steps (start_powerSGD_iter), then rank-1 compression.
                assert case["step_grads_equal"] == [True, True, False]
            else:
                assert case["grads_equal"] and case["params_equal"], case["settings"]


def test_powersgd_with_several_buckets_is_refused_on_gloo(ddp_run):
    _, ranks = ddp_run
    for record in ranks:
        assert record["powersgd_multi_bucket_refused"].startswith("PowerSGD on gloo needs a single bucket")


def test_tune_ddp_decides_on_rank0_and_every_rank_continues_with_it(ddp_run):
    out, ranks = ddp_run
    t0, t1 = ranks[0]["tune"], ranks[1]["tune"]
    assert t0["final"] == t1["final"] and t0["report"] == t1["report"]
    rep = t0["report"]
    assert rep["trials"] == 4 and rep["search_complete"] is False
    assert rep["notes"] == ["PowerSGD not tried: on gloo its hook needs a single bucket (see make_ddp)"]
    # 3 warm-up steps, 4 trials of 1 + 2 steps, and when the winner is not the baseline, one
    # confirmation round of both (steps=21 is exactly that budget).
    confirmed = rep["confirmation"] is not None
    assert confirmed == (rep["search_best"] != DEFAULTS)
    if rep["verdict"] == "tuning successful":
        assert confirmed and t0["final"] == rep["search_best"] and rep["result_ms"] < rep["baseline_ms"]
    else:
        assert t0["final"] == DEFAULTS
    assert rep["tuning_steps"] == 3 + 4 * 3 + (2 * 3 if confirmed else 0)
    if confirmed:
        assert len(rep["confirmation"]["baseline_samples(ms)"]) == len(rep["confirmation"]["best_samples(ms)"]) == 2
    for t in (t0, t1):
        assert t["ddp_module_is_model"]
        assert t["ddp"]["bucket_sizes"] == t["expected_bucket_bytes"]
        assert t["ddp"]["gradient_as_bucket_view"] == t["final"]["gradient_as_bucket_view"]
    tune_dir = out / "tune"
    results = [p for p in os.listdir(tune_dir) if p.startswith("aoe_result_gdat_")]
    assert len(results) == 1
    doc = json.loads((tune_dir / results[0]).read_text())
    g = doc["GDAT"]
    assert doc["basic"]["status"] == "finished" and g["mode"] == "online" and g["world_size"] == 2
    assert g["space"]["comm_hook"] == ["none", "fp16"] and g["space"]["lossy_allowed"] is True
    assert len(g["trials"]) == 4 and all(len(t["samples(ms)"]) == 2 for t in g["trials"])
    assert g["trials"][0]["settings"] == DEFAULTS
    settings = json.loads((tune_dir / "gdat_settings.json").read_text())
    assert settings["settings"] == t0["final"] == g["best_settings"]
    assert settings["verdict"] == rep["verdict"]


def test_tune_ddp_confirms_and_adopts_a_clear_winner(ddp_run):
    _, ranks = ddp_run
    for record in ranks:
        t = record["tune_slow_baseline"]
        rep = t["report"]
        assert rep["verdict"] == "tuning successful", rep
        assert rep["settings"]["bucket_cap_mb"] == 0.01 and t["ddp_bucket_cap"] == int(0.01 * MIB)
        assert rep["trials"] == 2 and rep["search_complete"] is True
        conf = rep["confirmation"]
        assert conf["rounds"] == 2 and conf["rounds_won"] == 2 and len(conf["baseline_samples(ms)"]) == len(conf["best_samples(ms)"]) == 4
        assert min(conf["baseline_samples(ms)"]) >= 200.0  # every baseline step slept
        assert rep["result_ms"] < rep["baseline_ms"] * (1 - rep["threshold"])
        assert rep["tuning_steps"] == 3 + 2 * 3 + 2 * 2 * 3
    assert ranks[0]["tune_slow_baseline"]["report"] == ranks[1]["tune_slow_baseline"]["report"]


def test_a_failing_rank0_ends_the_other_ranks_too(ddp_run):
    _, ranks = ddp_run
    assert ranks[0]["unwritable_output"].startswith(("NotADirectoryError", "FileExistsError"))
    assert ranks[1]["unwritable_output"].startswith("RuntimeError: tune_ddp: rank 0 failed: ")


def test_cli_online_two_processes(portkit, python, tmp_path):
    shutil.copy(os.path.join(EXAMPLES, "tiny_mlp.py"), str(tmp_path / "tiny_mlp.py"))
    out = tmp_path / "out"
    res = run([portkit, "tune", "--job-type=4", "--framework=pytorch", "--model=tiny_mlp:make_model",
               "--input", "16x256", "--nproc", "2", "--output", str(out), "--python", python, "--max-trials", "3",
               "--warmup", "1", "--measure", "2", "--bucket-caps", "0.1,25", "--first-buckets", "0.1,1"],
              cwd=str(tmp_path))
    if res.returncode != 0 and "process group could not start" in res.stderr:
        pytest.skip("gloo process group cannot start here")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Aoe process finished" in res.stdout
    assert res.stdout.count("gdat trial ") == 3
    results = [p for p in os.listdir(out) if p.startswith("aoe_result_gdat_")]
    g = json.loads((out / results[0]).read_text())["GDAT"]
    # tiny_mlp's gradients in ready order (reverse of parameters): each trial used DDP's buckets.
    sizes = [40, 10240] + [1024, 262144] * 4
    for t in g["trials"]:
        s = t["settings"]
        assert s["bucket_cap_mb"] in (0.1, 25.0) and s["first_bucket_mb"] in (0.1, 1.0)
        expected = [sum(sizes[i] for i in b) for b in bucket_sizes(sizes, s["first_bucket_mb"] * MIB, s["bucket_cap_mb"] * MIB)]
        assert t["bucket_bytes"] == expected, s
    res = run([python, "-c", "import sys; from portkit.gdat import load_settings; print(load_settings(sys.argv[1]).label())",
               str(out / "gdat_settings.json")], env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
    assert res.returncode == 0 and res.stdout.startswith("cap="), res.stderr


def test_describe_measures_a_description_that_simulate_accepts(portkit, python, tmp_path, monkeypatch):
    # In this process (torch is imported once per pytest run); the ranks' all-reduce fit is
    # checked in the 2-process fixture.
    from portkit.gdat.__main__ import main

    shutil.copy(os.path.join(EXAMPLES, "tiny_mlp.py"), str(tmp_path / "tiny_mlp.py"))
    monkeypatch.chdir(tmp_path)
    desc = tmp_path / "d" / "tiny.json"
    assert main(["describe", "--model", "tiny_mlp:make_model", "--input", "16x256", "--output", str(desc),
                 "--alpha-ms", "0.05", "--beta-ms-per-mb", "0.5", "--repeats", "3"]) == 0
    doc = json.loads(desc.read_text())
    # tiny_mlp: 5 Linear layers (ReLUs own no parameters), in parameter order, named by module.
    assert [l["name"] for l in doc["layers"]] == ["0", "2", "4", "6", "8"]
    assert [l["params"] for l in doc["layers"]] == [[[256, 256], [256]]] * 4 + [[[10, 256], [10]]]
    assert all(l["backward_ms"] >= 0 for l in doc["layers"]) and doc["forward_ms"] > 0
    assert doc["comm"] == {"alpha_ms": 0.05, "beta_ms_per_mb": 0.5}
    assert os.listdir(str(desc.parent)) == ["tiny.json"]
    res = run([portkit, "tune", "--job-type=4", "--simulate", str(desc), "--output", str(tmp_path / "sim"),
               "--exhaustive", "--python", python])
    assert res.returncode == 0, res.stderr
    assert "exhaustive optimum" in res.stdout and ": found" in res.stdout


def test_allreduce_fit_between_the_ranks(ddp_run):
    _, ranks = ddp_run
    comm = ranks[0]["comm"]
    assert comm == ranks[1]["comm"]  # the slowest rank's times, on both
    assert comm["alpha_ms"] >= 0 and comm["beta_ms_per_mb"] >= 0
    assert sorted(comm["measured_ms"]) == sorted(["0.015625", "0.25", "1"])


def test_cli_online_bad_model_is_a_usage_error(portkit, python, tmp_path):
    res = run([portkit, "tune", "--job-type=4", "--model=no_such_module_xyz:make", "--input", "2x2",
               "--output", str(tmp_path), "--python", python], cwd=str(tmp_path))
    assert res.returncode == 2
    assert "cannot import 'no_such_module_xyz'" in res.stderr
