"""An imported profile as pandas DataFrames, for notebooks and scripts.

    import portkit.prof
    p = portkit.prof.load("PROF_DIR")      # a folder `portkit prof import -dir PROF_DIR` imported
    p.ops.head(10)                          # host operators: count, self and total time (ns)
    p.events[p.events.kind == "kernel"]     # every event; also p.steps, p.comm

Each table is read on first use by running ``portkit prof query --format csv`` (the binary reads
the store; this module never opens it): $PORTKIT_BIN when set, else ``portkit`` on PATH. The
columns are those of ``portkit prof query`` (docs/prof.md, "Query"): times in integer
nanoseconds. ``records(dir, table)`` gives the same rows as dicts without pandas.
"""
import io
import json
import os
import shutil
import subprocess

TABLES = ("events", "ops", "steps", "comm")

# The text columns of each table (the others are integers, and steps.warmup a boolean): read as
# text whatever they hold ("0" stays "0", an empty cell stays "").
_TEXT_COLUMNS = {
    "events": ("trace", "kind", "name", "category", "input_dims", "input_types"),
    "ops": ("name", "input_dims"),
    "steps": ("trace", "name"),
    "comm": ("trace", "name", "collective", "group", "dtype"),
}


class QueryError(RuntimeError):
    """``portkit prof query`` failed; the message is what it said."""


def find_portkit(portkit=None):
    """The portkit binary: `portkit`, else $PORTKIT_BIN, else ``portkit`` on PATH."""
    path = portkit or os.environ.get("PORTKIT_BIN") or shutil.which("portkit")
    if not path or not os.path.isfile(path):
        raise FileNotFoundError(
            "portkit binary not found%s: set PORTKIT_BIN to its path or put it on PATH"
            % (" at %s" % path if path else ""))
    return path


def _check_profile(folder):
    if not os.path.isdir(folder):
        raise FileNotFoundError("%s does not exist or is not a folder" % folder)
    if not os.path.isfile(os.path.join(folder, "portkit.db")):
        raise FileNotFoundError("%s is not an imported profile (it holds no portkit.db); run "
                                "`portkit prof import -dir %s` first" % (folder, folder))


def query(folder, table, fmt="csv", limit=None, name_regex=None, kinds=None, target=None, portkit=None):
    """The text of ``portkit prof query`` for one table (CSV or JSON)."""
    if table not in TABLES:
        raise ValueError("unknown table %r; the tables are %s" % (table, ", ".join(TABLES)))
    cmd = [find_portkit(portkit), "prof", "query", "--dir", str(folder), "--table", table, "--format", fmt]
    if limit is not None:
        cmd += ["--limit", str(int(limit))]
    if name_regex:
        cmd += ["--name-regex", name_regex]
    if kinds:
        cmd += ["--kind", ",".join(kinds)]
    if target:
        cmd += ["--target", target]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise QueryError(res.stderr.strip() or "portkit prof query exited with %d" % res.returncode)
    return res.stdout


def records(folder, table, **kwargs):
    """The rows of `table` as a list of dicts (typed as the JSON of ``prof query``); no pandas needed.
    Keyword arguments: limit, name_regex, kinds, target, portkit (as `query`)."""
    _check_profile(str(folder))
    return json.loads(query(folder, table, fmt="json", **kwargs))


def _pandas():
    try:
        import pandas
    except ImportError as e:
        raise ImportError("portkit.prof.load needs pandas, which is not installed (pip install pandas, or "
                          "apt install python3-pandas); portkit.prof.records gives the rows without it") from e
    return pandas


class Profile:
    """An imported profile; each table is read into a DataFrame on first use and kept."""

    def __init__(self, folder, target=None, portkit=None):
        self.folder = str(folder)
        _check_profile(self.folder)
        self._portkit = find_portkit(portkit)
        self._target = target
        self._frames = {}

    def frame(self, table, limit=None, name_regex=None, kinds=None):
        """`table` as a DataFrame; with a filter it is read again (and not kept)."""
        filtered = limit is not None or name_regex or kinds
        if not filtered and table in self._frames:
            return self._frames[table]
        pandas = _pandas()
        text = query(self.folder, table, limit=limit, name_regex=name_regex, kinds=kinds, target=self._target,
                     portkit=self._portkit)
        df = pandas.read_csv(io.StringIO(text), keep_default_na=False, na_values=[],
                             dtype={c: str for c in _TEXT_COLUMNS[table]})
        if not filtered:
            self._frames[table] = df
        return df

    @property
    def events(self):
        """Every timed event: trace, kind, name, category, pid, tid, ts_ns, dur_ns, correlation,
        external_id, input_dims, input_types."""
        return self.frame("events")

    @property
    def ops(self):
        """Host operators per name and input shapes: count, self_ns, total_ns."""
        return self.frame("ops")

    @property
    def steps(self):
        """ProfilerStep#N spans: trace, name, number, start_ns, end_ns, dur_ns, warmup."""
        return self.frame("steps")

    @property
    def comm(self):
        """Communication kernels with their collective arguments."""
        return self.frame("comm")

    def __repr__(self):
        return "portkit.prof.Profile(%r)" % self.folder


def load(folder, target=None, portkit=None):
    """The imported profile in `folder` (tables read lazily). ImportError without pandas;
    FileNotFoundError when `folder` is not an imported profile or the binary is not found."""
    _pandas()
    return Profile(folder, target=target, portkit=portkit)
