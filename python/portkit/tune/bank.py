"""SGAT knowledge base: ``<bank>/sgat_bank.db`` (SQLite, WAL), beside the C++ OPAT bank's
``tune_bank.db`` and never inside it.

One row per (kind, structural hash, input signature, validators): kind ``subgraph`` stores the
strategy chosen for a subgraph, kind ``model`` the whole-model plan (which whole-model path or
the per-subgraph composite won, and the thread count). Validators are the torch version, the CPU
model, the thread count and the strategy-set version; a change in any of them is a miss.
Every entry read is checked (known strategy, finite positive times) before it is trusted; a
malformed row is reported and treated as absent.
"""
import json
import math
import os
import sqlite3
import time

SCHEMA_VERSION = 1
FILE_NAME = "sgat_bank.db"


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


class Bank:
    def __init__(self, location, read_only=False):
        self.path = bank_file(location)
        self.read_only = read_only
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
        self._init()

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
            raise BankError("%s: %s" % (self.path, e))
        if row is None:
            return None, ""
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

    def entries(self):
        if self.conn is None:
            return []
        return self.conn.execute("SELECT kind, hash, name, strategy, eager_us, best_us FROM sgat_entries "
                                 "ORDER BY kind, name, hash").fetchall()

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None
