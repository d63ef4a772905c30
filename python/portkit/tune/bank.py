"""SGAT knowledge base: ``<bank>/sgat_bank.db`` (SQLite, WAL), beside the C++ OPAT bank's
``tune_bank.db`` and never inside it.

One row per (kind, structural hash, input signature, validators): kind ``subgraph`` stores the
strategy chosen for a subgraph, kind ``model`` the whole-model plan (which whole-model path or
the per-subgraph composite won, and the thread count). Validators are the torch version, the CPU
model, the thread count and the strategy-set version; a change in any of them is a miss.
Every entry read is checked (known strategy, finite positive times) before it is trusted; a
malformed row is reported and treated as absent. A string longer than ``max_string_mb`` (1 MiB by
default, as the C++ bank reader's ``--max-string-mb``) is never loaded: its entry is left out with
"over the limit" (SQLite's own length limit on the connection, so a 100 MB string costs no memory).
"""
import json
import math
import os
import sqlite3
import time

SCHEMA_VERSION = 1
FILE_NAME = "sgat_bank.db"
DEFAULT_MAX_STRING_MB = 1


class BankError(Exception):
    pass


def default_bank_dir():
    env = os.environ.get("TUNE_BANK_PATH")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "portkit")


def bank_file(location):
    """The database file for a bank folder (or a path already naming sgat_bank.db)."""
    if location.endswith(".db"):
        return location
    return os.path.join(location, FILE_NAME)


def _too_big(error):
    """Whether a sqlite3 error is SQLite's length limit (SQLITE_TOOBIG)."""
    code = getattr(error, "sqlite_errorcode", None)
    too_big = getattr(sqlite3, "SQLITE_TOOBIG", 18)
    return code == too_big or (code is None and "too big" in str(error))


class Bank:
    def __init__(self, location, read_only=False, max_string_mb=DEFAULT_MAX_STRING_MB):
        """``max_string_mb``: the longest string an entry may hold when read (0: no cap); an entry
        with a longer one is left out with "over the limit"."""
        if not isinstance(max_string_mb, int) or isinstance(max_string_mb, bool) or max_string_mb < 0:
            raise BankError("max_string_mb=%r: give a whole number of MiB, 0 for no cap" % (max_string_mb,))
        self.path = bank_file(location)
        self.read_only = read_only
        self.max_string_mb = max_string_mb
        if read_only:
            if not os.path.exists(self.path):
                self.conn = None
                return
            self.conn = sqlite3.connect("file:%s?mode=ro" % self.path, uri=True, timeout=30)
        else:
            folder = os.path.dirname(self.path) or "."
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as e:
                raise BankError("cannot create the bank folder %s: %s" % (folder, e.strerror))
            try:
                self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            except sqlite3.Error as e:
                raise BankError("cannot open %s: %s" % (self.path, e))
        self._limit_strings()
        self._init()

    def _limit_strings(self):
        # SQLite refuses to load a value over the limit before it allocates it (Python >= 3.11 has
        # setlimit; older ones check each string after it is read, see _check_lengths).
        if self.max_string_mb and hasattr(self.conn, "setlimit"):
            self.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, min(self.max_string_mb << 20, 2**31 - 1))

    def _over_the_limit(self, what):
        return ("%s: %s left out: over the limit: a string longer than the limit of %d MiB; not read. "
                "max_string_mb (Bank) or --max-string-mb raises the limit" % (self.path, what, self.max_string_mb))

    def _check_lengths(self, row, what):
        """Without setlimit: the same limit, checked once the row is read."""
        cap = self.max_string_mb << 20
        if cap and any(isinstance(v, str) and len(v.encode("utf-8", "surrogatepass")) > cap for v in row):
            return self._over_the_limit(what)
        return ""

    def _init(self):
        try:
            version = self.conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0 and not self.read_only:
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("BEGIN IMMEDIATE")
                version = self.conn.execute("PRAGMA user_version").fetchone()[0]
                if version == 0:
                    self.conn.execute(
                        "CREATE TABLE IF NOT EXISTS sgat_entries (kind TEXT NOT NULL, hash TEXT NOT NULL, "
                        "inputs TEXT NOT NULL, validators TEXT NOT NULL, name TEXT NOT NULL, "
                        "strategy TEXT NOT NULL, detail TEXT NOT NULL, eager_us REAL NOT NULL, best_us REAL NOT NULL, "
                        "updated REAL NOT NULL, PRIMARY KEY (kind, hash, inputs, validators))")
                    self.conn.execute("PRAGMA user_version=%d" % SCHEMA_VERSION)
                    version = SCHEMA_VERSION
                self.conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise BankError("%s: not a usable SGAT bank (%s)" % (self.path, e))
        if version != SCHEMA_VERSION:
            raise BankError("%s: schema version %d, this portkit reads version %d; use another --bank folder"
                            % (self.path, version, SCHEMA_VERSION))

    def lookup(self, kind, hash_, inputs, validators, known_strategies):
        """The entry as a dict, or None; (None, why) when a row exists but is not trustworthy."""
        if self.conn is None:
            return None, ""
        try:
            row = self.conn.execute(
                "SELECT name, strategy, detail, eager_us, best_us FROM sgat_entries WHERE kind=? AND hash=? AND "
                "inputs=? AND validators=?", (kind, hash_, inputs, validators)).fetchone()
        except sqlite3.Error as e:
            if _too_big(e):
                return None, self._over_the_limit("entry %s" % hash_[:12])
            raise BankError("%s: %s" % (self.path, e))
        if row is None:
            return None, ""
        too_long = self._check_lengths(row, "entry %s" % hash_[:12])
        if too_long:
            return None, too_long
        name, strategy, detail, eager_us, best_us = row
        try:
            detail = json.loads(detail)
            assert isinstance(detail, dict)
        except Exception:  # noqa: BLE001
            return None, "entry %s: detail is not a JSON object" % hash_[:12]
        if strategy not in known_strategies:
            return None, "entry %s: unknown strategy %r" % (hash_[:12], strategy)
        for v in (eager_us, best_us):
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                return None, "entry %s: time %r is not a positive number" % (hash_[:12], v)
        return {"name": name, "strategy": strategy, "detail": detail, "eager_us": eager_us, "best_us": best_us}, ""

    def store(self, kind, hash_, inputs, validators, name, strategy, detail, eager_us, best_us):
        if self.read_only or self.conn is None:
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(
                "INSERT OR REPLACE INTO sgat_entries VALUES (?,?,?,?,?,?,?,?,?,?)",
                (kind, hash_, inputs, validators, name, strategy, json.dumps(detail, sort_keys=True),
                 float(eager_us), float(best_us), time.time()))
            self.conn.execute("COMMIT")
        except sqlite3.Error as e:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise BankError("cannot write %s: %s" % (self.path, e))

    def entries(self, left_out=None):
        """Every entry as (kind, hash, name, strategy, eager_us, best_us), sorted; an entry holding
        a string over the limit is left out, and why appended to ``left_out`` (a list) when given."""
        if self.conn is None:
            return []
        rows = []
        try:
            rowids = [r for (r,) in self.conn.execute("SELECT rowid FROM sgat_entries ORDER BY rowid")]
            for rowid in rowids:
                try:
                    row = self.conn.execute("SELECT kind, hash, name, strategy, eager_us, best_us FROM sgat_entries "
                                            "WHERE rowid=?", (rowid,)).fetchone()
                except sqlite3.Error as e:
                    if not _too_big(e):
                        raise
                    row, why = None, self._over_the_limit("entry %d" % rowid)
                else:
                    why = self._check_lengths(row, "entry %d" % rowid) if row else ""
                if why:
                    if left_out is not None:
                        left_out.append(why)
                    continue
                if row is not None:
                    rows.append(row)
        except sqlite3.Error as e:
            raise BankError("%s: %s" % (self.path, e))
        return sorted(rows, key=lambda r: (str(r[0]), str(r[2]), str(r[1])))

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None
