"""portkit analyse -m dynamic_shape: the instrumented copy, the runtime detector and its report,
with real torch."""
import csv
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import HERE, run

FIXTURE = os.path.join(HERE, "fixtures", "dyn_project")
HEADER = ["Function Name", "File Path", "Line Number", "Call Stack",
          "Input Shape Range", "Output Shape Range"]


@pytest.fixture()
def instrumented(tmp_path, portkit):
    res = run([portkit, "analyse", "-i", FIXTURE, "-o", str(tmp_path), "-m", "dynamic_shape"])
    assert res.returncode == 0, res.stderr
    copy = tmp_path / "dyn_project_analysis"
    return copy, res


def read_report(copy, name="msft_dynamic_shape_analysis_report.csv"):
    with open(copy / name, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == HEADER
    return [dict(zip(HEADER, r)) for r in rows[1:]]


def test_copy_keeps_every_line_and_wraps_the_loop(instrumented):
    copy, res = instrumented
    assert (copy / "msft_dynamic_analysis" / "__init__.py").exists()
    assert (copy / "msft_dynamic_analysis" / "hook.py").exists()
    assert (copy / "data" / "notes.csv").read_text() == "a,b\n"
    for name in ("train.py", "model.py"):
        original = open(os.path.join(FIXTURE, name)).read().split("\n")
        copied = (copy / name).read_text().split("\n")
        assert len(copied) == len(original), name
    train = (copy / "train.py").read_text().split("\n")
    assert train[46] == "    for step, (tokens, images, labels) in DETECTOR.start(enumerate(train_loader)):"
    assert "Wrapped the data loop at dyn_project/train.py:47" in res.stderr
    assert "python train.py" in res.stderr  # how to run it
    log = (copy / "pytorch_analysis.txt").read_text()
    assert "dyn_project/train.py:47" in log


def test_report_lists_dynamic_sites_with_ranges_and_no_static_ones(instrumented, python, tmp_path):
    copy, _ = instrumented
    losses_plain = tmp_path / "plain.txt"
    losses_instr = tmp_path / "instr.txt"
    res = run([python, "train.py", "--steps", "6", "--losses", str(losses_instr)], cwd=copy)
    assert res.returncode == 0, res.stderr
    res = run([python, "train.py", "--steps", "6", "--losses", str(losses_plain)], cwd=FIXTURE)
    assert res.returncode == 0, res.stderr
    # The detector does not change results.
    assert losses_instr.read_text() == losses_plain.read_text()
    rows = read_report(copy)
    by_site = {(r["Function Name"], r["File Path"], r["Line Number"]): r for r in rows}
    emb = by_site[("embedding", "dyn_project/model.py", "13")]
    assert emb["Input Shape Range"] == "[(4, 5-12), (50, 8)]"
    assert emb["Output Shape Range"] == "[(4, 5-12, 8)]"
    assert emb["Call Stack"].startswith("dyn_project/model.py:13(forward) <- dyn_project/train.py:51(main)")
    # collate_fn's stack (train.py:32) and Dataset.__getitem__ run on the host while a batch is
    # fetched: they are in the data-pipeline report, not among the device ops.
    assert ("stack", "dyn_project/train.py", "32") not in by_site
    pipeline = read_report(copy, "msft_dynamic_shape_data_pipeline.csv")
    pipeline_sites = {(r["Function Name"], r["File Path"], r["Line Number"]) for r in pipeline}
    assert ("stack", "dyn_project/train.py", "32") in pipeline_sites
    assert all(r["Line Number"] not in ("13",) for r in pipeline), pipeline
    # Image path: fixed sizes → never reported.
    for r in rows:
        assert r["Function Name"] not in ("conv2d", "relu", "linear", "cross_entropy"), r
        assert r["Line Number"] != "14", r


def interrupt_when_ready(copy, python, sig, sleep_after):
    """Runs the instrumented training until it prints READY, sends `sig`, returns the process."""
    proc = subprocess.Popen([python, "train.py", "--steps", "6", "--sleep-after", str(sleep_after)],
                            cwd=copy, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        line = ""
        while time.time() < deadline:
            line = proc.stdout.readline()
            if "READY" in line or not line:
                break
        assert "READY" in line, proc.stderr.read()
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc


def test_sigterm_still_leaves_a_valid_report(instrumented, python):
    copy, _ = instrumented
    proc = interrupt_when_ready(copy, python, signal.SIGTERM, 3)
    assert proc.returncode == -signal.SIGTERM
    rows = read_report(copy)
    names = {r["Function Name"] for r in rows}
    assert "embedding" in names
    assert not list(copy.glob("*.tmp.*"))  # no half-written report left behind


def test_sigint_and_exceptions_still_leave_a_report(instrumented, python):
    copy, _ = instrumented
    proc = interrupt_when_ready(copy, python, signal.SIGINT, 2)  # KeyboardInterrupt, report at exit
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in proc.stderr.read()
    rows = read_report(copy)
    assert "embedding" in {r["Function Name"] for r in rows}


def test_no_loop_found_is_said(tmp_path, portkit):
    proj = tmp_path / "noloop"
    proj.mkdir()
    (proj / "a.py").write_text("import torch\nx = torch.zeros(2)\n")
    res = run([portkit, "analyse", "-i", str(proj), "-o", str(tmp_path / "out"), "-m", "dynamic_shape"])
    assert res.returncode == 0, res.stderr
    assert "No training data loop was recognised" in res.stderr
    assert (tmp_path / "out" / "noloop_analysis" / "a.py").read_text() == "import torch\nx = torch.zeros(2)\n"


STYLES = os.path.join(HERE, "..", "fixtures", "dynamic_shape", "styles")
STYLE_SCRIPTS = sorted(n for n in os.listdir(STYLES) if n.endswith(".py"))


@pytest.fixture(scope="module")
def styles_copy(tmp_path_factory, portkit):
    out = tmp_path_factory.mktemp("styles")
    res = run([portkit, "analyse", "-i", STYLES, "-o", str(out), "-m", "dynamic_shape"])
    assert res.returncode == 0, res.stderr
    return out / "styles_analysis", res


@pytest.mark.parametrize("script", STYLE_SCRIPTS)
def test_training_loop_of_each_style_is_wrapped_and_no_dataset_loop(styles_copy, script):
    copy, res = styles_copy
    original = open(os.path.join(STYLES, script)).read().split("\n")
    copied = (copy / script).read_text().split("\n")
    assert len(copied) == len(original)
    marked = [i for i, line in enumerate(original) if line.endswith("# training loop")]
    assert marked, "the fixture marks its training loop"
    for i, (before, after) in enumerate(zip(original, copied)):
        if i in marked:
            assert "DETECTOR.start(" in after, (script, i + 1, after)
            assert "styles/%s:%d" % (script, i + 1) in res.stderr
        elif i > 0:  # line 1 carries the import
            assert after == before, (script, i + 1, after)


@pytest.mark.parametrize("script", ["progress_bar.py", "trainer_next.py"])
def test_detector_sees_the_steps_of_the_wrapped_loop(styles_copy, python, script):
    # Both scripts change input shapes from step to step, so only a detector that is active
    # around the training steps reports sites.
    copy, _ = styles_copy
    res = run([python, script, "--steps", "4"], cwd=copy)
    assert res.returncode == 0, res.stderr
    rows = read_report(copy)
    assert any(r["File Path"].endswith(script) for r in rows), rows
    os.remove(copy / "msft_dynamic_shape_analysis_report.csv")


def test_no_loop_found_names_the_rejected_candidates(tmp_path, portkit):
    proj = tmp_path / "pipeline"
    proj.mkdir()
    (proj / "data.py").write_text(
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Stats(Dataset):\n"
        "    def mean(self):\n"
        "        for x in DataLoader(self):\n"
        "            pass\n"
        "def show(batches):\n"
        "    for b in batches:\n"
        "        pass\n")
    res = run([portkit, "analyse", "-i", str(proj), "-o", str(tmp_path / "out"), "-m", "dynamic_shape"])
    assert res.returncode == 0, res.stderr
    assert "No training data loop was recognised" in res.stderr
    assert "pipeline/data.py:4: `DataLoader(self)`: inside the data-pipeline class Stats" in res.stderr
    assert "pipeline/data.py:7: `batches`: `batches` is not bound in its function" in res.stderr
