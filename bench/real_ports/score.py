#!/usr/bin/env python3
"""Port-reproduction benchmark: does `portkit migrate` make the edits Ascend's engineers made?

For each port in ports.json (a ModelZoo-PyTorch folder and the upstream commit it started from,
both read from bare git directories that the user fetched, never from this repository) the script
extracts the upstream .py files, runs `portkit migrate` on them, and compares, file by file and
line by line, two diffs against the same upstream text:

    port diff     upstream -> Ascend's port
    migrate diff  upstream -> portkit's migrated copy

Edits. A diff is cut into edits with difflib (opcodes of SequenceMatcher over lines). A `replace`
block with as many lines on both sides is split into one edit per line (a rewritten line is the
common case); any other block is one edit. Edits whose two sides differ only in whitespace are
dropped. An edit is CUDA/NPU-related when one of its removed or added lines matches RELATED (below).

Scoring each related port edit against the migrate diff:
    identical   migrate's text over the same upstream span equals the port's (whitespace-insensitive);
                for a pure insertion: every added line is also added by migrate somewhere in the file
    touched     migrate changes an overlapping upstream span (an insertion: within NEAR lines) but
                differently
    missed      migrate leaves the span alone
`reproduced` = identical / related port edits.

Scoring each migrate edit that no related port edit accounts for (an "extra" edit):
    reversed    the port keeps every upstream line migrate changed (they are in an `equal` block of
                the port diff) in a file where the port made CUDA/NPU-related edits -- the port's
                authors kept what migrate would change
    unported    the same, in a file where the port made no CUDA/NPU-related edit other than adding
                the torch_npu import (a script the port did not need: inference, export, other
                tasks; an `import torch_npu` alone moves no CUDA call to the NPU)
    extra       anything else (the port changed the span in another way, or migrate inserted lines
                the port does not have)

Files: .py files present in both the port and the upstream commit. Files the port adds or drops
are counted, not scored. Every migrated .py file is compiled with CPython's compile(); a file
that did not compile upstream either (Python 2 code) is reported apart.

Standard library only.

    python3 bench/real_ports/score.py --mirror-root /work/.mirror --portkit build/portkit
    python3 bench/real_ports/score.py --self-test        # synthetic pair in tests/fixtures/real_ports
"""
import argparse
import datetime
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# ---------------------------------------------------------------------------------------------
# The classifier. RELATED decides whether an edit is CUDA/NPU-related at all; CLASSES (first
# match wins, checked against the removed and added lines together) decides its class. An edit
# that is related but matches no class is "other".
# ---------------------------------------------------------------------------------------------
RELATED = re.compile(
    r"cuda|\bnpu|_npu|npu_|nccl|hccl|\bamp\b|apex|autocast|GradScaler|torch_npu|device|"
    r"set_device|pin_memory|non_blocking|CUDA_VISIBLE_DEVICES|ASCEND|cudnn|\bgpu|local_rank|"
    r"init_process_group|\bfused|Fused|\bhalf\(\)|float16|\.cu\b|cpp_extension",
    re.IGNORECASE)

CLASSES = [
    ("torch_npu import",
     re.compile(r"^\s*(import\s+torch_npu|from\s+torch_npu\b|import\s+apex_npu)|transfer_to_npu",
                re.MULTILINE)),
    ("amp",
     re.compile(r"\bamp\b|autocast|GradScaler|scale_loss|loss_scale|master_params|\bhalf\(\)|"
                r"float16|opt_level", re.IGNORECASE)),
    ("apex/fused kernels",
     re.compile(r"apex|\bfused|Fused|NpuFused|npu_fused|FusedLayerNorm|fast_gelu|npu_gelu|"
                r"npu_layer_norm|npu_dropout|npu_rotary|npu_fusion_attention", re.IGNORECASE)),
    ("DDP backend",
     re.compile(r"nccl|hccl|init_process_group|DistributedDataParallel|\bbackend\b|dist_backend|"
                r"dist_url", re.IGNORECASE)),
    ("set_device/local rank",
     re.compile(r"set_device|local_rank|LOCAL_RANK|device_count|current_device|device_ids|"
                r"output_device", re.IGNORECASE)),
    ("pin_memory/non_blocking",
     re.compile(r"pin_memory|non_blocking", re.IGNORECASE)),
    ("env vars",  # case-sensitive: `NPU_` must not catch torch_npu.npu_format_cast
     re.compile(r"os\.environ|getenv|\b(CUDA_VISIBLE_DEVICES|ASCEND_\w+|MASTER_ADDR|MASTER_PORT|"
                r"RANK_SIZE|WORLD_SIZE|RANK_ID|LOCAL_RANK|HCCL_\w+|NPU_\w+|CUDA_HOME|"
                r"CUDA_LAUNCH_BLOCKING)\b")),
    ("custom ops",
     re.compile(r"torch_npu\.npu_\w+|torch\.npu_\w+|\.npu_\w+\(|torch\.ops\.|cpp_extension|"
                r"\.cu\b|_C\.\w+|_ext\b|load_inline", re.IGNORECASE)),
    ("device strings/calls",
     re.compile(r"cuda|\bnpu\b|\.npu\(|torch\.npu|device|cudnn|\bgpu", re.IGNORECASE)),
]
RENAMES = "gpu->npu renames"
IMPORT_CLASS = CLASSES[0][0]
CLASS_NAMES = [RENAMES] + [name for name, _ in CLASSES] + ["other"]
IDENT = re.compile(r"[A-Za-z_]\w*$")


def is_rename(removed, added):
    """True when the edit only renames identifiers that say gpu into ones that say npu
    (`n_gpu` -> `n_npu`, `gpu_count` -> `npu_count`): cosmetic, nothing for the target."""
    a, b = TOKEN.findall("\n".join(removed)), TOKEN.findall("\n".join(added))
    if len(a) != len(b):
        return False
    pairs = [(x, y) for x, y in zip(a, b) if x != y]
    return bool(pairs) and all(IDENT.match(x) and "gpu" in x.lower() and
                               y == re.sub("gpu", "npu", re.sub("GPU", "NPU", x)) for x, y in pairs)

NEAR = 2  # an insertion counts as touched when migrate edits within this many lines of it


TOKEN = re.compile(r"\w+|[^\w\s]")
CONTEXT = 2  # tokens either side of a changed token that take part in the relatedness test


def changed_text(removed, added):
    """The tokens that differ between the two sides, each with CONTEXT tokens around it, so that
    an edit of a line that merely mentions `device` (a print, a renamed variable next to it) is
    not related while `cuda` -> `npu` or `non_blocking=True` -> `False` is."""
    a, b = TOKEN.findall("\n".join(removed)), TOKEN.findall("\n".join(added))
    keep = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            keep += a[max(0, i1 - CONTEXT):i2 + CONTEXT] + ["\n"] + b[max(0, j1 - CONTEXT):j2 + CONTEXT] + ["\n"]
    return " ".join(keep)


def classify(removed, added):
    """None for an edit that is not CUDA/NPU-related, else its class. Relatedness is tested on
    the changed tokens (changed_text), the class on the whole lines of both sides."""
    text = "\n".join(removed + added)
    if not RELATED.search(changed_text(removed, added)):
        return None
    if is_rename(removed, added):
        return RENAMES
    for name, pattern in CLASSES:
        if pattern.search(text):
            return name
    return "other"


ALIAS = re.compile(r"\btorch_npu\.npu\.")


def alias_norm(lines):
    """norm() with `torch_npu.npu.` spelled `torch.npu.` (the same module once torch_npu is
    imported): a touched edit equal under it differs from the port in spelling only."""
    return [ALIAS.sub("torch.npu.", line) for line in norm(lines)]


def norm(lines):
    """Whitespace-insensitive form of a block: stripped lines, blank lines dropped, inner runs of
    blanks collapsed."""
    return [re.sub(r"\s+", " ", line.strip()) for line in lines if line.strip()]


class Edit:
    __slots__ = ("i1", "i2", "old", "new", "cls")

    def __init__(self, i1, i2, old, new):
        self.i1, self.i2, self.old, self.new = i1, i2, old, new
        self.cls = classify(old, new)

    def overlaps(self, other):
        if self.i1 == self.i2 or other.i1 == other.i2:  # an insertion: near the anchor
            a1, a2 = self.i1 - (NEAR if self.i1 == self.i2 else 0), self.i2 + (NEAR if self.i1 == self.i2 else 0)
            b1, b2 = other.i1 - (NEAR if other.i1 == other.i2 else 0), other.i2 + (NEAR if other.i1 == other.i2 else 0)
            return a1 <= b2 and b1 <= a2
        return self.i1 < other.i2 and other.i1 < self.i2


def edits_of(a, b):
    """Line edits turning a into b (see the module comment for the cut)."""
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for k in range(i2 - i1):
                if norm([a[i1 + k]]) != norm([b[j1 + k]]):
                    out.append(Edit(i1 + k, i1 + k + 1, [a[i1 + k]], [b[j1 + k]]))
        elif norm(a[i1:i2]) != norm(b[j1:j2]):
            out.append(Edit(i1, i2, a[i1:i2], b[j1:j2]))
    return out


def equal_lines(a, b):
    """Indices of the lines of a that sit in an `equal` block of the a -> b diff."""
    kept = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            kept.update(range(i1, i2))
    return kept


def score_file(up, port, mig):
    """Returns (port rows, migrate rows): [(verdict, class, edit)]."""
    port_edits = [e for e in edits_of(up, port) if e.cls]
    mig_edits = edits_of(up, mig)
    mig_added = {line for e in mig_edits for line in norm(e.new)}
    port_rows, explained, aliased = [], set(), []
    for pe in port_edits:
        near = [k for k, me in enumerate(mig_edits) if pe.overlaps(me)]
        verdict = "missed"
        if pe.i1 == pe.i2 and not pe.old:  # pure insertion: compared by content
            same = [k for k, me in enumerate(mig_edits) if set(norm(me.new)) & set(norm(pe.new))]
            if norm(pe.new) and all(line in mig_added for line in norm(pe.new)):
                verdict = "identical"
            elif near or same:  # near the anchor, or some of the same lines added elsewhere
                verdict = "touched"
            explained.update(same)
        elif near:
            lo = min([pe.i1] + [mig_edits[k].i1 for k in near])
            hi = max([pe.i2] + [mig_edits[k].i2 for k in near])
            # the migrated text over [lo, hi) against the port's text over the same span
            mig_text, port_text, cursor = [], list(up[lo:pe.i1]) + pe.new + list(up[pe.i2:hi]), lo
            for k in sorted(near, key=lambda k: mig_edits[k].i1):
                me = mig_edits[k]
                mig_text += up[cursor:me.i1] + me.new
                cursor = max(cursor, me.i2)
            mig_text += up[cursor:hi]
            verdict = "identical" if norm(mig_text) == norm(port_text) else "touched"
            if verdict == "touched" and alias_norm(mig_text) == alias_norm(port_text):
                verdict = "touched"  # still counted as touched; the spelling is reported apart
                aliased.append(pe)
        explained.update(near)
        port_rows.append((verdict, pe.cls, pe))
    kept = equal_lines(up, port)
    # A file whose only related port edits add the torch_npu import was not ported: the import
    # alone moves no CUDA call (ports add it to every script by rote).
    ported = any(pe.cls != IMPORT_CLASS for pe in port_edits)
    mig_rows = []
    for k, me in enumerate(mig_edits):
        if k in explained:
            continue
        cls = me.cls or "other"
        span = range(me.i1, me.i2)
        if me.i1 < me.i2 and all(i in kept for i in span):
            # the port keeps the upstream lines: a choice where it ported this file, else a file
            # the port never touched for the NPU
            mig_rows.append(("reversed" if ported else "unported", cls, me))
        else:
            mig_rows.append(("extra", cls, me))
    return port_rows, mig_rows, aliased


# ---------------------------------------------------------------------------------------------
# Corpus handling
# ---------------------------------------------------------------------------------------------
def read_lines(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace").splitlines()


def py_files(root):
    out = set()
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n.endswith(".py"):
                out.add(os.path.relpath(os.path.join(dirpath, n), root))
    return out


def compiles(path):
    try:
        with open(path, "rb") as f, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning of upstream code is not our concern
            compile(f.read(), path, "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError):
        return False


def extract(git_dir, commit, subdir, dest):
    """The .py files of commit:subdir into dest (git archive; no work tree)."""
    tree = commit + (":" + subdir if subdir else "")
    # only the .py blobs: a fetched snapshot may lack its largest (non-source) files
    proc = subprocess.run(["git", "--git-dir=" + git_dir, "archive", "--format=tar", tree, "--", "*.py"],
                          capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError("%s: cannot read %s: %s" % (git_dir, tree, proc.stderr.decode(errors="replace").strip()))
    data = proc.stdout
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".py")
                   and not m.name.startswith("/") and ".." not in m.name.split("/")]
        for m in members:
            target = os.path.join(dest, m.name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(tar.extractfile(m).read())


def run_migrate(portkit, target, up_dir, out_dir, log, extra=()):
    cmd = [portkit, "migrate", "-i", up_dir, "-o", out_dir, "-j", "2"] + list(extra)
    if target:
        cmd += ["--target", target]
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
    copy = os.path.join(out_dir, os.path.basename(os.path.normpath(up_dir)) + "_msft")
    if rc != 0 or not os.path.isdir(copy):
        raise RuntimeError("portkit migrate failed (exit %d); see %s" % (rc, log))
    return copy


def read_reviews(change_list):
    """The Review rows of migrate's change_list.csv: {path below the project: [(start, end)]}.
    Rows about the target's import line are left out (they say where the import went)."""
    import csv
    reviews = {}
    if not change_list or not os.path.exists(change_list):
        return reviews
    with open(change_list, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["Operation Type"] != "Review" or row["Message"].startswith("import "):
                continue
            rel = row["File"].split("/", 1)[1] if "/" in row["File"] else row["File"]
            reviews.setdefault(rel, []).append((int(row["Start Line"]), int(row["End Line"])))
    return reviews


def score_trees(up_dir, port_dir, mig_dir, reviews=None):
    """Scores one port: the three trees hold the upstream, the port and the migrated copy;
    `reviews` (read_reviews) marks the missed port edits migrate lists for review."""
    up_files, port_files = py_files(up_dir), py_files(port_dir)
    shared = sorted(up_files & port_files)
    result = {"files_shared": len(shared), "files_port_only": len(port_files - up_files),
              "files_upstream_only": len(up_files - port_files), "port": [], "migrate": [],
              "compile_fail": [], "compile_fail_upstream_too": 0, "files_migrated": 0,
              "touched_alias_only": 0, "missed_reviewed": 0,
              "transfer_to_npu_files": sum(1 for rel in port_files if "transfer_to_npu" in
                                           "\n".join(read_lines(os.path.join(port_dir, rel))))}
    for rel in shared:
        up, port = read_lines(os.path.join(up_dir, rel)), read_lines(os.path.join(port_dir, rel))
        mig_path = os.path.join(mig_dir, rel)
        mig = read_lines(mig_path) if os.path.exists(mig_path) else up
        if up == port and up == mig:
            continue
        prow, mrow, aliased = score_file(up, port, mig)
        result["touched_alias_only"] += len(aliased)
        for verdict, cls, e in prow:
            # a missed edit whose upstream lines carry a Review row of change_list.csv: migrate
            # names the place and leaves the change to the user (still counted as missed)
            first, last = e.i1 + 1, max(e.i2, e.i1 + 1)
            if verdict == "missed" and any(a <= last and first <= b for a, b in (reviews or {}).get(rel, [])):
                result["missed_reviewed"] += 1
            result["port"].append((rel, verdict, cls, e.i1 + 1, e.old, e.new))
        for verdict, cls, e in mrow:
            result["migrate"].append((rel, verdict, cls, e.i1 + 1, e.old, e.new))
    for rel in sorted(up_files):
        mig_path = os.path.join(mig_dir, rel)
        if not os.path.exists(mig_path):
            continue
        result["files_migrated"] += 1
        if not compiles(mig_path):
            if compiles(os.path.join(up_dir, rel)):
                result["compile_fail"].append(rel)
            else:
                result["compile_fail_upstream_too"] += 1
    return result


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------
def tally(results):
    t = {c: {"edits": 0, "identical": 0, "touched": 0, "missed": 0, "extra": 0, "reversed": 0, "unported": 0}
         for c in CLASS_NAMES}
    for r in results:
        for _, verdict, cls, *_ in r["port"]:
            t[cls]["edits"] += 1
            t[cls][verdict] += 1
        for _, verdict, cls, *_ in r["migrate"]:
            t[cls][verdict] += 1
    return t


def pct(a, b):
    return "%.0f %%" % (100.0 * a / b) if b else "–"


def table(t, out):
    out.write("| class | port edits | identical | touched | missed | reproduced | migrate-only edits | "
              "port reverses | in files the port did not port |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    tot = {k: 0 for k in ("edits", "identical", "touched", "missed", "extra", "reversed", "unported")}
    for c in CLASS_NAMES:
        row = t[c]
        for k in tot:
            tot[k] += row[k]
        out.write("| %s | %d | %d | %d | %d | %s | %d | %d | %d |\n" % (
            c, row["edits"], row["identical"], row["touched"], row["missed"],
            pct(row["identical"], row["edits"]), row["extra"] + row["reversed"] + row["unported"],
            row["reversed"], row["unported"]))
    out.write("| **total** | %d | %d | %d | %d | **%s** | %d | %d | %d |\n" % (
        tot["edits"], tot["identical"], tot["touched"], tot["missed"],
        pct(tot["identical"], tot["edits"]), tot["extra"] + tot["reversed"] + tot["unported"],
        tot["reversed"], tot["unported"]))
    return tot


def one_line(s, width=70):
    s = " / ".join(x.strip() for x in s if x.strip())
    return s if len(s) <= width else s[:width - 1] + "…"


def report(named_results, out, details):
    for name, r in named_results:
        tot = {k: 0 for k in ("edits", "identical")}
        for _, v, *_ in r["port"]:
            tot["edits"] += 1
            tot["identical"] += v == "identical"
        rev = sum(1 for m in r["migrate"] if m[1] == "reversed")
        unported = sum(1 for m in r["migrate"] if m[1] == "unported")
        out.write("%s: %d shared .py files (%d port-only, not scored); related port edits %d, "
                  "identical %d (%s); migrate-only edits %d, reversed by the port %d (+%d in files "
                  "it did not port); "
                  "migrated files %d, compile failures %d (+%d that fail upstream too)\n" % (
                      name, r["files_shared"], r["files_port_only"], tot["edits"], tot["identical"],
                      pct(tot["identical"], tot["edits"]), len(r["migrate"]), rev, unported,
                      r["files_migrated"], len(r["compile_fail"]), r["compile_fail_upstream_too"]))
        if r.get("migrate_args"):
            out.write("  %s: scored against `portkit migrate %s`\n" % (name, " ".join(r["migrate_args"])))
        if r["transfer_to_npu_files"]:
            out.write("  %s: %d port files import transfer_to_npu (CUDA calls kept on purpose, rerouted at "
                      "run time)\n" % (name, r["transfer_to_npu_files"]))
    out.write("\n")
    tot = table(tally([r for _, r in named_results]), out)
    fails = sum(len(r["compile_fail"]) for _, r in named_results)
    files = sum(r["files_migrated"] for _, r in named_results)
    out.write("\nevery migrated file compiles with CPython: %s (%d of %d fail that compiled upstream)\n"
              % ("yes" if not fails else "no", fails, files))
    if details:
        for name, r in named_results:
            for rel, verdict, cls, line, old, new in r["port"]:
                if verdict != "identical":
                    details.write("%s\tport\t%s\t%s\t%s:%d\t-%s\t+%s\n" % (
                        name, verdict, cls, rel, line, one_line(old, 200), one_line(new, 200)))
            for rel, verdict, cls, line, old, new in r["migrate"]:
                details.write("%s\tmigrate\t%s\t%s\t%s:%d\t-%s\t+%s\n" % (
                    name, verdict, cls, rel, line, one_line(old, 200), one_line(new, 200)))
    out.write("touched edits equal to the port's up to torch_npu.npu. = torch.npu.: %d\n" %
              sum(r["touched_alias_only"] for _, r in named_results))
    out.write("missed edits at lines migrate lists for review (change_list.csv Review rows): %d\n" %
              sum(r.get("missed_reviewed", 0) for _, r in named_results))
    out.write("migrate-only edits %d, reversed by a port %d (+%d in files the port did not port)\n" % (
        tot["extra"] + tot["reversed"] + tot["unported"], tot["reversed"], tot["unported"]))
    out.write("reproduced %d of %d (%s)\n" % (tot["identical"], tot["edits"],
                                               pct(tot["identical"], tot["edits"])))
    return tot


# ---------------------------------------------------------------------------------------------
def self_test():
    """Scores tests/fixtures/real_ports (upstream/, port/, migrated/) and checks every verdict
    against expected.json. Needs neither portkit nor a fetched corpus."""
    fx = os.path.join(REPO, "tests", "fixtures", "real_ports")
    r = score_trees(os.path.join(fx, "upstream"), os.path.join(fx, "port"), os.path.join(fx, "migrated"))
    got = sorted(["port", v, c, "%s:%d" % (rel, line)] for rel, v, c, line, _, _ in r["port"])
    got += sorted(["migrate", v, c, "%s:%d" % (rel, line)] for rel, v, c, line, _, _ in r["migrate"])
    expected = json.load(open(os.path.join(fx, "expected.json")))
    ok = True
    if got != expected["rows"]:
        ok = False
        sys.stderr.write("self-test: rows differ\n  got:      %s\n  expected: %s\n" % (
            json.dumps(got), json.dumps(expected["rows"])))
    if r["compile_fail"] != expected["compile_fail"]:
        ok = False
        sys.stderr.write("self-test: compile failures %s, expected %s\n" % (
            r["compile_fail"], expected["compile_fail"]))
    if r["touched_alias_only"] != expected["touched_alias_only"]:
        ok = False
        sys.stderr.write("self-test: %d touched edits equal up to the torch_npu.npu alias, expected %d\n" % (
            r["touched_alias_only"], expected["touched_alias_only"]))
    out = io.StringIO()
    report([("fixture", r)], out, None)
    last = out.getvalue().strip().splitlines()[-1]
    if last != expected["summary"]:
        ok = False
        sys.stderr.write("self-test: summary %r, expected %r\n" % (last, expected["summary"]))
    print("self-test: %s" % ("ok" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description="port-reproduction benchmark for portkit migrate")
    ap.add_argument("--mirror-root", help="folder holding <owner>+<name>/repo bare git dirs (the fetch tool's)")
    ap.add_argument("--portkit", help="the portkit binary")
    ap.add_argument("--ports", default=os.path.join(HERE, "ports.json"))
    ap.add_argument("--only", action="append", help="score only this port (repeatable)")
    ap.add_argument("--target", default=os.path.join(REPO, "data", "targets", "npu"),
                    help="--target for migrate (default: data/targets/npu)")
    ap.add_argument("--work", help="keep the extracted trees and migrate's outputs here")
    ap.add_argument("--details", help="write every non-identical port edit and every migrate-only edit (TSV)")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.mirror_root or not args.portkit:
        ap.error("--mirror-root and --portkit are required (or --self-test)")
    spec = json.load(open(args.ports))
    mz = spec["modelzoo"]
    mz_git = os.path.join(args.mirror_root, mz["repo"].replace("/", "+"), "repo")
    work = args.work or tempfile.mkdtemp(prefix="real_ports.")
    portkit = os.path.abspath(args.portkit)
    named = []
    for p in spec["ports"]:
        if args.only and p["name"] not in args.only:
            continue
        up_git = os.path.join(args.mirror_root, p["upstream_repo"].replace("/", "+"), "repo")
        base = os.path.join(work, p["name"])
        shutil.rmtree(base, ignore_errors=True)
        up_dir, port_dir = os.path.join(base, "upstream"), os.path.join(base, "port")
        extract(up_git, p["commit"], p.get("upstream_subdir", ""), up_dir)
        extract(mz_git, mz["commit"], p["port_path"], port_dir)
        # a port that imports transfer_to_npu keeps its CUDA calls on purpose: it is compared
        # with `migrate --transfer-only` (ports.json "migrate_args")
        extra = p.get("migrate_args", [])
        mig_dir = run_migrate(portkit, args.target, up_dir, os.path.join(base, "migrated"),
                              os.path.join(base, "migrate.log"), extra)
        result = score_trees(up_dir, port_dir, mig_dir,
                             read_reviews(os.path.join(mig_dir + "_report", "change_list.csv")))
        result["migrate_args"] = extra
        named.append((p["name"], result, bool(p.get("holdout"))))
    details = open(args.details, "w") if args.details else None
    print("real_ports %s, portkit %s" % (datetime.date.today().isoformat(), args.portkit))
    # held-out ports (ports.json "holdout": true) were not looked at while migrate was developed:
    # their figures are reported apart from the development ports'
    dev = [(n, r) for n, r, held in named if not held]
    held = [(n, r) for n, r, held in named if held]
    if dev:
        if held:
            print("## development ports\n")
        report(dev, sys.stdout, details)
    if held:
        print("\n## held-out ports\n")
        report(held, sys.stdout, details)
    if details:
        details.close()
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
