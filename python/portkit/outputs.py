"""The overwrite policy of portkit's outputs, the same as the CLI's (src/core/output_policy.h).

A file portkit writes is listed in the ledger ``.portkit-files`` of its folder (one file name a
line). A later run may replace a file the ledger lists; any other existing file (a user's
``train.py``, another tool's report) is refused unless the caller passes ``force=True`` (on the
command line, ``--force``). Links, folders and other non-regular files are never written through.
"""
import os
import stat

LEDGER = ".portkit-files"


class OutputExistsError(FileExistsError):
    """An output path holds a file that portkit did not write."""


def _plain(name):
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def written_files(folder):
    """The names the ledger of ``folder`` lists (plain names only)."""
    path = os.path.join(folder or ".", LEDGER)
    try:
        st = os.lstat(path)
    except OSError:
        return []
    if not stat.S_ISREG(st.st_mode) or st.st_size > (1 << 20):
        return []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [line.rstrip("\n") for line in f if _plain(line.rstrip("\n"))]
    except OSError:
        return []


def check_replaceable(path, force=False, option="output"):
    """Raises OutputExistsError unless ``path`` may be written (missing, listed in its folder's
    ledger, or ``force``); links, folders and FIFOs are refused even with ``force``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    what = "%s %s" % (option, path)
    if stat.S_ISLNK(st.st_mode):
        raise OutputExistsError("%s is a symbolic link; portkit never writes through a link: give another name" % what)
    if stat.S_ISDIR(st.st_mode):
        raise OutputExistsError("%s is a folder; give a file name" % what)
    if not stat.S_ISREG(st.st_mode):
        raise OutputExistsError("%s is not a regular file; give another name" % what)
    if force or os.path.basename(path) in written_files(os.path.dirname(path)):
        return
    raise OutputExistsError("%s already exists and portkit did not write it; give another name, "
                            "or --force to replace it" % what)


def record_written(path):
    """Adds ``path``'s name to the ledger of its folder (atomically)."""
    folder = os.path.dirname(path) or "."
    names = set(written_files(folder))
    name = os.path.basename(path)
    if name in names and os.path.isfile(os.path.join(folder, LEDGER)):
        return
    names.add(name)
    tmp = os.path.join(folder, "%s.tmp.%d" % (LEDGER, os.getpid()))
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(n + "\n" for n in sorted(names)))
    os.replace(tmp, os.path.join(folder, LEDGER))
