"""The companion as a package: `pip install ./python` and `pip install -e ./python` work (offline,
with the setuptools the interpreter already has), and `portkit.__version__` is the binary's version."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import HERE, run

PYTHON_DIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, PYTHON_DIR)
import portkit as companion  # noqa: E402


def base_python(python):
    """The interpreter a virtual environment is made from (a venv's own base when python is one)."""
    out = subprocess.run([python, "-c", "import sys; print(getattr(sys, '_base_executable', sys.executable))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_version_is_the_binarys(portkit):
    res = run([portkit, "--version"])
    assert res.returncode == 0
    assert re.search(r"(^|\s)%s(\s|$)" % re.escape(companion.__version__), res.stdout), (res.stdout, companion.__version__)


@pytest.fixture(scope="module")
def venv(tmp_path_factory, python):
    """A fresh virtual environment that sees the system's packages (setuptools, wheel, numpy)."""
    path = tmp_path_factory.mktemp("venv") / "env"
    res = run([base_python(python), "-m", "venv", "--system-site-packages", str(path)])
    if res.returncode != 0:
        pytest.skip("no venv module: %s" % res.stderr.strip())
    return str(path / "bin" / "python")


def pip_install(venv, *args):
    return run([venv, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", "--quiet",
                "--disable-pip-version-check", *args])


def companion_files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
                  if f.endswith(".py") or f == "VERSION")


def installed(venv, cwd):
    res = run([venv, "-c", "import portkit, portkit.torch, portkit.dynamic_shape, portkit.prof_launch, "
               "portkit.export_ops, portkit.safetensors_io; print(portkit.__version__); print(portkit.__file__)"],
              cwd=cwd)
    assert res.returncode == 0, res.stderr
    return res.stdout.split("\n")[:2]


@pytest.mark.parametrize("editable", [False, True], ids=["regular", "editable"])
def test_pip_install_of_the_python_folder(venv, tmp_path, editable):
    # A copy of python/: building writes egg-info and build/ next to the sources, and the test
    # runs under two torch versions at once.
    src = tmp_path / "python"
    shutil.copytree(PYTHON_DIR, str(src), ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = pip_install(venv, *(["-e"] if editable else []), str(src))
    assert res.returncode == 0, res.stdout + res.stderr
    try:
        version, where = installed(venv, elsewhere)
        assert version == companion.__version__
        if editable:
            assert where == str(src / "portkit" / "__init__.py")
            (src / "portkit" / "VERSION").write_text("9.9.9\n")  # an edit is seen without reinstalling
            assert installed(venv, elsewhere)[0] == "9.9.9"
        else:
            assert "site-packages" in where
            assert companion_files(os.path.dirname(where)) == companion_files(os.path.join(PYTHON_DIR, "portkit"))
        res = run([venv, "-m", "portkit.export_ops", "--help"], cwd=elsewhere)
        assert res.returncode == 0 and "--model" in res.stdout, res.stderr
    finally:
        run([venv, "-m", "pip", "uninstall", "--yes", "--quiet", "portkit"])
