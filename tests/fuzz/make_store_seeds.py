#!/usr/bin/env python3
"""Writes the seeds of store_reader_fuzz (tests/fuzz/corpus/store/): small profile stores and tuning
banks with portkit's own schema (512-byte pages, no WAL), and hostile ones: a recursive view, a
trigger, numbers out of range, a string over the fuzz target's 4 KiB limit. Run it again when the
store's or the bank's schema changes (src/prof/store.cc, src/tune/knowledge_base.cc)."""
import os
import sqlite3
import sys

STORE = """
CREATE TABLE strings (id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);
CREATE TABLE traces (
  id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, format TEXT NOT NULL,
  events INTEGER, skipped INTEGER, warning TEXT, marks INTEGER);
CREATE TABLE devices (
  trace INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, properties TEXT);
CREATE TABLE events (
  trace INTEGER NOT NULL, kind TEXT NOT NULL, name INTEGER NOT NULL, category INTEGER,
  ts INTEGER NOT NULL, dur INTEGER NOT NULL, pid INTEGER, tid INTEGER,
  correlation INTEGER, external_id INTEGER,
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER,
  registers INTEGER, shared_memory INTEGER, occupancy REAL, bytes INTEGER,
  input_dims TEXT, input_types TEXT,
  parent INTEGER, args TEXT, launch INTEGER);
CREATE TABLE marks (trace INTEGER NOT NULL, ph TEXT NOT NULL, ts INTEGER, pid INTEGER, tid INTEGER, event TEXT NOT NULL);
CREATE VIEW kernels AS
  SELECT e.*, s.value AS name_text FROM events e JOIN strings s ON s.id = e.name WHERE e.kind = 'kernel';

CREATE VIEW kernel_launches AS
  SELECT k.trace, k.rowid AS kernel, k.launch AS launch, r.parent AS cpu_op
  FROM events k LEFT JOIN events r ON r.rowid = k.launch
  WHERE k.kind IN ('kernel', 'gpu_memcpy', 'gpu_memset');
"""

BANK = """
CREATE TABLE entries (
  op_key TEXT NOT NULL,
  validators TEXT NOT NULL,
  op_type TEXT NOT NULL,
  op_name TEXT NOT NULL,
  config TEXT NOT NULL,
  time_us REAL NOT NULL,
  default_us REAL NOT NULL,
  updated TEXT NOT NULL,
  measured_here INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (op_key, validators)
);
"""


def fresh(path, schema, version):
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA page_size = 512")
    db.executescript(schema)
    db.execute(f"PRAGMA user_version = {version}")
    return db


def store(path, extra=""):
    db = fresh(path, STORE, 3)
    names = ["ProfilerStep#1", "aten::mm", "cudaLaunchKernel", "gemm_kernel", "cpu_op", "kernel", "[1, 2], [2, 3]"]
    db.executemany("INSERT INTO strings (id, value) VALUES (?, ?)", enumerate(names, 1))
    db.execute("INSERT INTO traces VALUES (1, 'trace.json', 'kineto', 4, 0, NULL, 1)")
    db.execute("INSERT INTO devices VALUES (1, 0, 'GPU 0', '{}')")
    rows = [
        (1, "step", 1, 5, 1000, 9000, 1, 1, None, None, None, None),
        (1, "cpu_op", 2, 5, 2000, 3000, 1, 1, None, 7, "[[1,2],[2,3]]", None),
        (1, "runtime", 3, 5, 2500, 100, 1, 1, 42, 7, None, 2),
        (1, "kernel", 4, 6, 4000, 700, 0, 7, 42, 7, None, None),
    ]
    db.executemany("INSERT INTO events (trace, kind, name, category, ts, dur, pid, tid, correlation, external_id,"
                   " input_dims, parent) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    db.execute("UPDATE events SET launch = 3 WHERE rowid = 4")
    db.execute("INSERT INTO marks VALUES (1, 'M', NULL, 1, 1, '{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,"
               "\"tid\":1,\"args\":{\"name\":\"main\"}}')")
    db.executescript(extra)
    db.commit()
    db.close()


def bank(path, extra=""):
    db = fresh(path, BANK, 2)
    db.execute("INSERT INTO entries VALUES (?,?,?,?,?,?,?,?,1)", (
        "MatMul|float32|ND|[64,128],[128,96]|bias=1",
        "cpu=Example CPU;flags=avx2 fma;cores=2;compiler=c++ 12.2.0;cxxflags=-O3;template=0000000000000000",
        "MatMul", "fc1", "MC=48,NC=768,KC=128,MR=8,NR=48,VW=16,PACK_A=1,ORDER=1,UNROLL=4,THREADS=1",
        8.88, 42.4, "2026-01-01T00:00:00Z"))
    db.executescript(extra)
    db.commit()
    db.close()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "store")
    os.makedirs(out, exist_ok=True)
    recursive = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
    store(os.path.join(out, "store_ok.db"))
    store(os.path.join(out, "store_recursive_view.db"), f"""DROP VIEW kernel_launches;
        CREATE VIEW kernel_launches AS {recursive} SELECT 1 AS trace, i AS kernel, i AS launch, i AS cpu_op FROM n;""")
    store(os.path.join(out, "store_trigger.db"),
          "CREATE TRIGGER spy AFTER INSERT ON events BEGIN UPDATE traces SET path = 'x'; END;")
    store(os.path.join(out, "store_numbers.db"), """
        UPDATE events SET ts = -9200000000000000000 WHERE kind = 'step';
        UPDATE events SET dur = 9200000000000000000 WHERE kind = 'cpu_op';
        UPDATE events SET ts = 'soon' WHERE kind = 'kernel';
        UPDATE marks SET ts = -9000000000000000000;""")
    store(os.path.join(out, "store_long_string.db"), "UPDATE strings SET value = value || hex(zeroblob(4096)) WHERE id = 2;")
    bank(os.path.join(out, "bank_ok.db"))
    bank(os.path.join(out, "bank_recursive_view.db"), f"""ALTER TABLE entries RENAME TO real_entries;
        CREATE VIEW entries AS {recursive} SELECT 'k' || i AS op_key, 'v' AS validators, 'MatMul' AS op_type,
          'x' AS op_name, 'c' AS config, 1.0 AS time_us, 2.0 AS default_us, 'u' AS updated, 1 AS measured_here FROM n;""")
    bank(os.path.join(out, "bank_trigger.db"),
         "CREATE TRIGGER zap AFTER INSERT ON entries BEGIN UPDATE entries SET config = 'x'; END;")
    bank(os.path.join(out, "bank_numbers.db"), "UPDATE entries SET default_us = 1e308, time_us = -5;")
    bank(os.path.join(out, "bank_long_string.db"), "UPDATE entries SET config = config || hex(zeroblob(4096));")


if __name__ == "__main__":
    main()
