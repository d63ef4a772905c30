"""portkit.outputs: the companion's overwrite policy is the CLI's (docs/safety.md, Outputs)."""
import os

import pytest

from portkit import outputs


def test_missing_file_may_be_written(tmp_path):
    outputs.check_replaceable(str(tmp_path / "ops.json"))


def test_users_file_is_refused_without_force(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("print(1)\n")
    with pytest.raises(outputs.OutputExistsError) as e:
        outputs.check_replaceable(str(path), option="-o")
    assert str(e.value) == ("-o %s already exists and portkit did not write it; give another name, "
                            "or --force to replace it" % path)
    outputs.check_replaceable(str(path), force=True)
    assert path.read_text() == "print(1)\n"


def test_a_recorded_file_is_replaced_without_force(tmp_path):
    path = tmp_path / "ops.json"
    path.write_text("{}")
    outputs.record_written(str(path))
    outputs.record_written(str(path))  # once in the ledger
    assert (tmp_path / ".portkit-files").read_text() == "ops.json\n"
    outputs.check_replaceable(str(path))


def test_ledger_with_paths_or_as_a_link_is_not_trusted(tmp_path):
    (tmp_path / ".portkit-files").write_text("../x.py\n/etc/passwd\nsub/a\nok.json\n")
    assert outputs.written_files(str(tmp_path)) == ["ok.json"]
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "elsewhere").write_text("train.py\n")
    os.symlink(tmp_path / "elsewhere", other / ".portkit-files")
    (other / "train.py").write_text("x")
    assert outputs.written_files(str(other)) == []
    with pytest.raises(outputs.OutputExistsError):
        outputs.check_replaceable(str(other / "train.py"))


def test_links_folders_and_fifos_are_refused_even_with_force(tmp_path):
    (tmp_path / "target").write_text("x")
    os.symlink(tmp_path / "target", tmp_path / "link.json")
    (tmp_path / "folder.json").mkdir()
    os.mkfifo(tmp_path / "fifo.json")
    for name in ("link.json", "folder.json", "fifo.json"):
        with pytest.raises(outputs.OutputExistsError):
            outputs.check_replaceable(str(tmp_path / name), force=True)
