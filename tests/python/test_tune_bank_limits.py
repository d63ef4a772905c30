"""The SGAT bank (python/portkit/tune/bank.py) caps the strings it reads, as the C++ bank reader
does (--max-string-mb): an entry holding a longer string is never loaded and is left out with
"over the limit"; a parameter raises the cap. No torch needed."""
import json
import os
import sqlite3
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PYTHON_DIR)

from portkit.tune import bank as bank_mod  # noqa: E402

KEY = ("subgraph", "a" * 64, "f32[2,3]", "torch=x;cpu=y")
KNOWN = {"eager"}

pytestmark = pytest.mark.skipif(not hasattr(sqlite3.Connection, "setlimit"),
                                reason="sqlite3 setlimit needs Python 3.11")


def make_bank(folder, detail_bytes):
    """A bank of three entries: KEY, whose detail is a JSON object of about `detail_bytes` bytes, a
    small one, and one whose name is `detail_bytes` long. The big strings are made inside SQLite,
    so this process never holds them."""
    b = bank_mod.Bank(str(folder))
    b.store(*KEY, name="big", strategy="eager", detail={}, eager_us=2.0, best_us=1.0)
    b.store("subgraph", "b" * 64, KEY[2], KEY[3], name="small", strategy="eager", detail={"x": 1},
            eager_us=2.0, best_us=1.0)
    b.store("subgraph", "c" * 64, KEY[2], KEY[3], name="long", strategy="eager", detail={}, eager_us=2.0, best_us=1.0)
    b.close()
    conn = sqlite3.connect(bank_mod.bank_file(str(folder)))
    conn.execute("UPDATE sgat_entries SET detail = '{\"pad\": \"' || replace(hex(zeroblob(?)), '0', 'x') || '\"}' "
                 "WHERE name = 'big'", (detail_bytes // 2,))
    conn.execute("UPDATE sgat_entries SET name = replace(hex(zeroblob(?)), '0', 'n') WHERE name = 'long'",
                 (detail_bytes // 2,))
    conn.commit()
    (length,) = conn.execute("SELECT length(detail) FROM sgat_entries WHERE name = 'big'").fetchone()
    conn.close()
    assert length >= detail_bytes
    return bank_mod.bank_file(str(folder))


READER = r"""
import json, resource, sys
sys.path.insert(0, sys.argv[1])
from portkit.tune import bank as bank_mod
key = json.loads(sys.argv[3])
b = bank_mod.Bank(sys.argv[2], read_only=True, max_string_mb=int(sys.argv[4]))
entry, why = b.lookup(*key, {"eager"})
left_out = []
names = [row[2] for row in b.entries(left_out)]
print(json.dumps({"entry": entry is not None, "why": why, "names": names, "left_out": left_out,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


# Linux carries a process's peak RSS across exec, and a child starts from the pages it was forked
# with: the reader is started by a small intermediate Python, so that its getrusage counts its own
# memory and not the test process's.
SPAWN = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


def read_in_subprocess(path, max_string_mb):
    r = subprocess.run([sys.executable, "-c", SPAWN, sys.executable, "-c", READER, PYTHON_DIR, path,
                        json.dumps(KEY), str(max_string_mb)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_100_mb_config_string_is_not_loaded_and_its_entry_is_left_out(tmp_path):
    path = make_bank(tmp_path / "bank", 100 << 20)
    out = read_in_subprocess(path, 1)
    # Peak RSS of the reading process, measured in it (1.68 GB before the cap).
    assert out["maxrss_mb"] < 300, out
    assert not out["entry"]
    assert out["why"] == ("%s: entry %s left out: over the limit: a string longer than the limit of 1 MiB; "
                          "not read. max_string_mb (Bank) or --max-string-mb raises the limit" % (path, KEY[1][:12]))
    # Listing (the name, strategy and times, not the detail) leaves the entry with the long name
    # out, says why, and lists the others.
    assert out["names"] == ["big", "small"]
    assert out["left_out"] == ["%s: entry 3 left out: over the limit: a string longer than the limit of 1 MiB; "
                               "not read. max_string_mb (Bank) or --max-string-mb raises the limit" % path]


def test_the_parameter_raises_the_cap(tmp_path):
    path = make_bank(tmp_path / "bank", 2 << 20)
    assert read_in_subprocess(path, 1)["why"].endswith("raises the limit")
    out = read_in_subprocess(path, 3)
    assert out["entry"] and out["why"] == "" and out["names"] == ["big", "n" * (2 << 20), "small"], out["why"]


def test_a_bad_cap_is_refused_with_a_message(tmp_path):
    with pytest.raises(bank_mod.BankError, match=r"max_string_mb=-1: give a whole number of MiB"):
        bank_mod.Bank(str(tmp_path / "bank"), max_string_mb=-1)
