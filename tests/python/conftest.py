import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def portkit():
    path = os.environ.get("PORTKIT_BIN") or os.path.join(HERE, "..", "..", "build", "portkit")
    assert os.path.exists(path), "portkit binary not found: %s" % path
    return os.path.abspath(path)


@pytest.fixture(scope="session")
def python():
    return os.environ.get("PORTKIT_TEST_PYTHON") or sys.executable


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
