#!/usr/bin/env python3
"""Precision and recall of `portkit analyse` / `portkit migrate` on real code, against hand labels.

Usage:
  score.py --portkit BIN --checkout DIR --labels FILE [--work DIR] [--check-targets]
  score.py --portkit BIN --corpora DIR --labels-dir DIR [--work DIR] [--check-targets]

The second form scores every `*.tsv` of --labels-dir whose checkout (`DIR/<@checkout>`) exists;
when none exists it prints SKIP and exits 77 (ctest's SKIP_RETURN_CODE).  --corpora may also come
from the environment variable PORTKIT_REALCODE_DIR.

Label files (tab-separated, `#` comments) are described in README.md next to this script.  Standard
library only; runs on any python3 >= 3.7.

Exit status: 0 when scored (targets are printed, not enforced unless --check-targets), 1 when a
target is missed with --check-targets or when a migrated file that compiled before migration no
longer compiles, 2 for bad usage or labels, 77 when no checkout is present.
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

KINDS = ("unsupported", "unknown", "custom_op", "cuda", "full_unsupported", "affinity",
         "migrate_edit")
MODE_OF_KIND = {"unsupported": "torch_apis", "unknown": "torch_apis", "custom_op": "torch_apis",
                "cuda": "torch_apis", "full_unsupported": "third_party",
                "affinity": "affinity_apis"}
# Targets of issue 12 ("Done when"): (kind, metric, minimum).
TARGETS = [("unsupported", "precision", 0.95), ("unknown", "precision", 0.90),
           ("custom_op", "recall", 0.95), ("cuda", "recall", 0.98),
           ("full_unsupported", "precision", 0.95), ("affinity", "precision", 0.95),
           ("migrate_edit", "recall", 0.80)]
METRIC_NAMES = {("unknown", "precision"): "actionable",
                ("full_unsupported", "precision"): "real offender",
                ("migrate_edit", "recall"): "coverage"}


class LabelError(Exception):
    pass


class Label(object):
    __slots__ = ("kind", "file", "line", "match", "expect", "src", "note", "where")

    def __init__(self, kind, file, line, match, expect, src, note, where):
        self.kind, self.file, self.line, self.match = kind, file, line, match
        self.expect, self.src, self.note, self.where = expect, src, note, where


def read_labels(path):
    """Returns (directives dict, [Label])."""
    directives = {}
    labels = []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as err:
        raise LabelError("%s: cannot read: %s" % (path, err))
    for number, raw in enumerate(lines, 1):
        where = "%s:%d" % (path, number)
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        cells = raw.split("\t")
        if cells[0].startswith("@"):
            if len(cells) < 2:
                raise LabelError("%s: directive %s has no value" % (where, cells[0]))
            directives[cells[0][1:]] = cells[1].strip()
            continue
        if cells[0] == "kind":  # header row
            continue
        if len(cells) < 6:
            raise LabelError("%s: expected at least 6 tab-separated cells "
                             "(kind file line match expect src [note]), got %d" % (where, len(cells)))
        kind, file, line, match, expect, src = [c.strip() for c in cells[:6]]
        note = cells[6].strip() if len(cells) > 6 else ""
        if kind not in KINDS:
            raise LabelError("%s: unknown kind %r (one of %s)" % (where, kind, ", ".join(KINDS)))
        if expect not in ("yes", "no", "extra"):
            raise LabelError("%s: expect must be yes, no or extra, got %r" % (where, expect))
        if expect == "extra" and kind != "migrate_edit":
            raise LabelError("%s: expect 'extra' is only for migrate_edit" % where)
        if src not in ("sample", "list"):
            raise LabelError("%s: src must be sample or list, got %r" % (where, src))
        if line == "-":
            line_no = None
        else:
            try:
                line_no = int(line)
            except ValueError:
                raise LabelError("%s: line must be a number or '-', got %r" % (where, line))
        if line_no is None and kind not in ("full_unsupported",):
            raise LabelError("%s: kind %s needs a line number" % (where, kind))
        labels.append(Label(kind, file, line_no, match, expect, src, note, where))
    if "checkout" not in directives:
        raise LabelError("%s: missing '@checkout<TAB>NAME' directive" % path)
    return directives, labels


def strip_root(path):
    """CSV paths are `<basename(input)>/relative`; labels use the relative part."""
    path = path.replace("\\", "/")
    return path.split("/", 1)[1] if "/" in path else path


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def run(cmd, log):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with open(log, "wb") as fh:
        fh.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write("command failed (%d): %s\n%s\n" % (
            proc.returncode, " ".join(cmd), proc.stdout.decode("utf-8", "replace")[-2000:]))
        raise SystemExit(1)


def analyse(portkit, target, work, mode, version):
    out = os.path.join(work, "analyse_" + mode)
    cmd = [portkit, "analyse", "-i", target, "-o", out, "-m", mode, "-j", "2", "--format", "csv,json"]
    if version:
        cmd += ["-v", version]
    run(cmd, os.path.join(work, "analyse_%s.log" % mode))
    return os.path.join(out, os.path.basename(os.path.normpath(target)) + "_analysis")


def rows_of(kind, results):
    """Reported rows of one kind as (file, start, end, name) tuples."""
    rows = []
    if kind in ("unsupported", "unknown"):
        name = "unsupported_api.csv" if kind == "unsupported" else "unknown_api.csv"
        for r in read_csv(os.path.join(results["torch_apis"], name)):
            if r["Start Line"] == "NA":
                continue
            rows.append((strip_root(r["File"]), int(r["Start Line"]), int(r["End Line"]), r["OP"]))
    elif kind in ("custom_op", "cuda"):
        with open(os.path.join(results["torch_apis"], "report.json"), encoding="utf-8") as fh:
            report = json.load(fh)
        for f in report.get("findings", []):
            if f.get("start_line") in (None, "NA"):
                continue
            is_op = f.get("rule") == "custom_cuda_op"
            if (kind == "custom_op" and is_op) or (kind == "cuda" and not is_op
                                                   and f.get("category") == "cuda"):
                rows.append((strip_root(f["file"]), int(f["start_line"]),
                             int(f.get("end_line", f["start_line"])), f.get("name", "")))
    elif kind == "affinity":
        for r in read_csv(os.path.join(results["affinity_apis"], "affinity_api_call.csv")):
            rows.append((strip_root(r["File"]), int(r["Start Line"]), int(r["End Line"]),
                         r["Api Call Name"] + " -> " + r["Affinity Api Name"]))
    elif kind == "full_unsupported":
        for r in read_csv(os.path.join(results["third_party"], "full_unsupported_results.csv")):
            rows.append((strip_root(r["File"]), None, None, r["3rd-party API"]))
    return rows


def label_matches(label, row):
    file, start, end, name = row
    if file != label.file:
        return False
    if label.kind == "full_unsupported":
        # The public spelling of a function may change between analyser versions; the function is
        # the same when its last two dotted components (Class.method or module.function) agree.
        return label.match == name or label.match.split(".")[-2:] == name.split(".")[-2:]
    if not (start <= label.line <= end):
        return False
    return label.match == "*" or label.match.lower() in name.lower()


def ratio(num, den):
    return "%5.1f %% (%d/%d)" % (100.0 * num / den, num, den) if den else "   n/a (0/0)"


def read_names(path):
    """The torch_npu API names an affinity suggestion may name (torch_npu_names.txt)."""
    with open(path, encoding="utf-8") as fh:
        return {line.strip() for line in fh if line.strip() and not line.startswith("#")}


NAMES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_npu_names.txt")


def replacement(row):
    return row[3].rsplit(" -> ", 1)[-1].strip()


def score_kind(kind, labels, rows, out):
    """Prints the figures of one kind; returns {metric: value or None}."""
    labelled_rows = set()
    reported_yes = reported_no = 0
    yes_list = found_list = 0
    misses, false_pos = [], []
    names = read_names(NAMES_FILE) if kind == "affinity" else None
    for lab in labels:
        hit = [i for i, row in enumerate(rows) if label_matches(lab, row)]
        labelled_rows.update(hit)
        if lab.expect == "yes" and names is not None and hit:
            unreal = sorted({replacement(rows[i]) for i in hit} - names)
            if unreal:
                # A right place with a wrong name is a wrong suggestion.
                reported_no += 1
                false_pos.append(Label(lab.kind, lab.file, lab.line, lab.match, "no", lab.src,
                                       "replacement %s is not a torch_npu API" % ", ".join(unreal),
                                       lab.where))
                continue
        if lab.expect == "yes":
            if hit:
                reported_yes += 1
            if lab.src == "list":
                yes_list += 1
                if hit:
                    found_list += 1
                else:
                    misses.append(lab)
        else:
            if hit:
                reported_no += 1
                false_pos.append(lab)
    judged = reported_yes + reported_no
    precision = float(reported_yes) / judged if judged else None
    recall = float(found_list) / yes_list if yes_list else None
    pname = METRIC_NAMES.get((kind, "precision"), "precision")

    out.write("  %-17s reported %5d  labels %4d (judged reported %d, unlabelled rows %d)\n" % (
        kind, len(rows), len(labels), judged, len(rows) - len(labelled_rows)))
    out.write("    %-14s %s\n" % (pname, ratio(reported_yes, judged)))
    if yes_list:
        out.write("    %-14s %s  (over the exhaustive lists)\n" % ("recall", ratio(found_list, yes_list)))
    if names is not None:
        unreal_rows = [row for row in rows if replacement(row) not in names]
        out.write("    rows naming an API not in torch_npu_names.txt: %d of %d (%s)\n" % (
            len(unreal_rows), len(rows), ", ".join(sorted({replacement(r) for r in unreal_rows})) or "-"))
    for lab in false_pos:
        out.write("    FP  %s:%s %s  -- %s\n" % (lab.file, lab.line if lab.line else "", lab.match,
                                                 lab.note))
    for lab in misses:
        out.write("    FN  %s:%s %s  -- %s\n" % (lab.file, lab.line if lab.line else "", lab.match,
                                                 lab.note))
    return {"precision": precision, "recall": recall,
            "counts": {"precision": [reported_yes, judged], "recall": [found_list, yes_list]}}


def compile_ok(path):
    try:
        with open(path, "rb") as fh:
            source = fh.read()
        compile(source, path, "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError):
        return False
    except OSError:
        return False


def migrate_and_check(portkit, target, work, labels, out):
    mig = os.path.join(work, "migrate")
    run([portkit, "migrate", "-i", target, "-o", mig], os.path.join(work, "migrate.log"))
    copy = os.path.join(mig, os.path.basename(os.path.normpath(target)) + "_msft")
    reports = copy + "_report"  # beside the copy
    changes = []
    for r in read_csv(os.path.join(reports, "change_list.csv")):
        changes.append((strip_root(r["File"]), int(r["Start Line"]), int(r["End Line"]),
                        r["Operation Type"] + " " + r["Message"]))
    result = {}
    edits = [lab for lab in labels if lab.kind == "migrate_edit"]
    if edits:
        for expect, title in (("yes", "CUDA-related edits (labels yes)"),
                              ("extra", "other edits of the port (labels extra, not CUDA-specific)")):
            group = [lab for lab in edits if lab.expect == expect]
            if not group:
                continue
            covered = [lab for lab in group if any(label_matches(lab, c) for c in changes)]
            out.write("  migrate coverage, %s: %s\n" % (title, ratio(len(covered), len(group))))
            for lab in group:
                if lab not in covered:
                    out.write("    MISS %s:%d %s  -- %s\n" % (lab.file, lab.line, lab.match, lab.note))
            if expect == "yes":
                result["recall"] = float(len(covered)) / len(group)
                result["counts"] = {"recall": [len(covered), len(group)]}
    # CPython compile check: every migrated .py that compiled before migration must compile after.
    total = broken = before_bad = 0
    broken_files = []
    for dirpath, _dirs, files in os.walk(copy):
        for name in files:
            if not name.endswith(".py"):
                continue
            migrated = os.path.join(dirpath, name)
            rel = os.path.relpath(migrated, copy)
            original = os.path.join(target, rel)
            if not os.path.exists(original):
                continue
            total += 1
            if not compile_ok(original):
                before_bad += 1
                continue
            if not compile_ok(migrated):
                broken += 1
                broken_files.append(rel)
    out.write("  migrate: %d change rows; CPython %d.%d compile of %d migrated .py files: %d broken"
              " (%d did not compile before migration either)\n" % (
                  len(changes), sys.version_info[0], sys.version_info[1], total, broken, before_bad))
    for rel in broken_files:
        out.write("    BROKEN %s\n" % rel)
    result["broken"] = broken
    return result


def score_one(portkit, checkout, labels_path, work, out):
    directives, labels = read_labels(labels_path)
    target = checkout
    if directives.get("subdir"):
        target = os.path.join(checkout, directives["subdir"])
    if not os.path.isdir(target):
        raise LabelError("%s: checkout folder %s does not exist" % (labels_path, target))
    for lab in labels:
        if not os.path.exists(os.path.join(target, lab.file)):
            raise LabelError("%s: file %s is not in the checkout %s (wrong commit?)" % (
                lab.where, lab.file, target))
    out.write("== %s (%s @ %s)\n" % (os.path.basename(labels_path), directives.get("repo", "?"),
                                     directives.get("commit", "?")))
    head = subprocess.run(["git", "-C", checkout, "rev-parse", "--show-toplevel", "HEAD"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines = head.stdout.decode("utf-8", "replace").split()
    # Only a checkout that is itself the top of a git work tree is compared (not a folder that
    # merely lies inside some other repository).
    if (head.returncode == 0 and len(lines) == 2 and directives.get("commit")
            and os.path.realpath(lines[0]) == os.path.realpath(checkout)):
        sha = lines[1]
        if not sha.startswith(directives["commit"]):
            out.write("  WARNING: checkout is at %s, labels are for %s\n" % (sha, directives["commit"]))
    kinds = [k for k in KINDS if any(lab.kind == k for lab in labels)]
    modes = sorted({MODE_OF_KIND[k] for k in kinds if k in MODE_OF_KIND})
    results = {}
    for mode in modes:
        results[mode] = analyse(portkit, target, work, mode, directives.get("version"))
    figures = {}
    for kind in kinds:
        if kind == "migrate_edit":
            continue
        mine = [lab for lab in labels if lab.kind == kind]
        figures[kind] = score_kind(kind, mine, rows_of(kind, results), out)
    if directives.get("migrate", "no") == "yes" or any(lab.kind == "migrate_edit" for lab in labels):
        figures["migrate_edit"] = migrate_and_check(portkit, target, work, labels, out)
    return figures


def merge(total, figures):
    for kind, fig in figures.items():
        slot = total.setdefault(kind, {"precision": [0, 0], "recall": [0, 0], "broken": 0})
        for metric in ("precision", "recall"):
            if metric in fig.get("counts", {}):
                slot[metric][0] += fig["counts"][metric][0]
                slot[metric][1] += fig["counts"][metric][1]
        slot["broken"] += fig.get("broken", 0)


def summary(total, out):
    out.write("== summary over all scored corpora (target of issue 12)\n")
    missed = []
    for kind, metric, minimum in TARGETS:
        if kind not in total:
            continue
        num, den = total[kind][metric]
        name = METRIC_NAMES.get((kind, metric), metric)
        if den == 0:
            out.write("  %-17s %-14s    n/a                target >= %d %%\n" % (kind, name,
                                                                              minimum * 100))
            continue
        ok = float(num) / den >= minimum
        if not ok:
            missed.append(kind)
        out.write("  %-17s %-14s %s  target >= %d %%  %s\n" % (
            kind, name, ratio(num, den), minimum * 100, "met" if ok else "MISSED"))
    broken = sum(v["broken"] for v in total.values())
    out.write("  migrated files that no longer compile: %d\n" % broken)
    return missed, broken


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--portkit", required=True, help="the portkit binary")
    ap.add_argument("--checkout", help="local checkout of the labelled repository at the pinned commit")
    ap.add_argument("--labels", help="one label file")
    ap.add_argument("--corpora", default=os.environ.get("PORTKIT_REALCODE_DIR"),
                    help="folder holding one checkout per label file (default $PORTKIT_REALCODE_DIR)")
    ap.add_argument("--labels-dir", help="folder of label files (*.tsv) scored against --corpora")
    ap.add_argument("--work", help="folder for the analyser's outputs (default: a temporary folder, removed)")
    ap.add_argument("--check-targets", action="store_true",
                    help="exit 1 when a target of issue 12 is missed")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.portkit) or not os.access(args.portkit, os.X_OK):
        sys.stderr.write("score.py: %s is not an executable\n" % args.portkit)
        return 2
    jobs = []
    if args.labels:
        if not args.checkout:
            sys.stderr.write("score.py: --labels needs --checkout\n")
            return 2
        jobs.append((args.checkout, args.labels))
    elif args.labels_dir:
        if not args.corpora or not os.path.isdir(args.corpora):
            print("SKIP: no corpora folder (set PORTKIT_REALCODE_DIR or --corpora)")
            return 77
        for name in sorted(os.listdir(args.labels_dir)):
            if not name.endswith(".tsv"):
                continue
            path = os.path.join(args.labels_dir, name)
            try:
                directives, _ = read_labels(path)
            except LabelError as err:
                sys.stderr.write("score.py: %s\n" % err)
                return 2
            checkout = os.path.join(args.corpora, directives["checkout"])
            if os.path.isdir(checkout):
                jobs.append((checkout, path))
            else:
                print("skipping %s: no checkout %s" % (name, checkout))
        if not jobs:
            print("SKIP: none of the labelled checkouts is under %s" % args.corpora)
            return 77
    else:
        sys.stderr.write("score.py: give --labels FILE --checkout DIR, or --labels-dir DIR\n")
        return 2
    work_root = args.work or tempfile.mkdtemp(prefix="portkit_realcode_")
    total = {}
    try:
        for checkout, labels in jobs:
            work = os.path.join(work_root, os.path.splitext(os.path.basename(labels))[0])
            if os.path.exists(work):
                shutil.rmtree(work)
            os.makedirs(work)
            try:
                figures = score_one(args.portkit, os.path.abspath(checkout), labels, work, sys.stdout)
            except LabelError as err:
                sys.stderr.write("score.py: %s\n" % err)
                return 2
            merge(total, figures)
            sys.stdout.flush()
        missed, broken = summary(total, sys.stdout)
    finally:
        if not args.work:
            shutil.rmtree(work_root, ignore_errors=True)
    if broken:
        return 1
    if args.check_targets and missed:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
