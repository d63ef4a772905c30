"""The profiler launcher's command line (python -m portkit.prof_launch) and `portkit prof collect`
with `python -c CODE`: usage without a traceback, the -c form run as Python runs it, and a
collect that writes no trace leaves no PROF_* folder."""
import os

from conftest import HERE, run

PYTHON_DIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))
USAGE = "usage: python -m portkit.prof_launch SCRIPT.py [ARGS...] | -m MODULE [ARGS...] | -c CODE [ARGS...]\n"


def launcher(python, *args, cwd=None):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    return run([python, "-m", "portkit.prof_launch", *args], env=env, cwd=cwd)


def test_help_prints_usage_and_no_traceback(python):
    for flag in ("--help", "-h"):
        res = launcher(python, flag)
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith(USAGE)
        assert "Traceback" not in res.stderr


def test_usage_errors_name_what_is_missing(tmp_path, python):
    res = launcher(python)
    assert res.returncode == 2 and res.stderr.startswith(USAGE) and "Traceback" not in res.stderr
    res = launcher(python, "-c")
    assert res.returncode == 2 and res.stderr == "portkit prof: -c needs the code to run\n"
    res = launcher(python, "nosuch.py", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == "portkit prof: nosuch.py: no such file (give a Python script, -m MODULE or -c CODE)\n"


def test_collect_runs_python_dash_c(tmp_path, portkit, python):
    out = tmp_path / "out"
    code = "import sys, torch; print('argv', sys.argv[1:]); print((torch.ones(4) * 2).sum().item())"
    res = run([portkit, "prof", "collect", "--output", str(out), "--", python, "-c", code, "a1", "a2"],
              env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
    assert res.returncode == 0, res.stderr
    assert "argv ['a1', 'a2']" in res.stdout and "8.0" in res.stdout
    assert "NameError" not in res.stderr
    folders = [p for p in out.iterdir() if p.name.startswith("PROF_")]
    assert len(folders) == 1 and any(f.name.startswith("trace_") for f in folders[0].iterdir())


def test_a_collect_that_writes_no_trace_leaves_no_prof_folder(tmp_path, portkit, python):
    out = tmp_path / "out"
    res = run([portkit, "prof", "collect", "--output", str(out), "--", python, str(tmp_path / "nosuch.py")],
              env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
    assert res.returncode == 4
    assert "no trace was written (the program exited with status 2); no PROF_* folder was kept" in res.stderr
    assert not out.exists() or not [p for p in out.iterdir() if p.name.startswith("PROF_")]
