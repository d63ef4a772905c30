#!/usr/bin/env python3
"""Draws the rows to label by hand: a seeded random sample of one kind of finding, each printed
with its source line, as label-file lines with an empty verdict to fill in.

  sample.py --portkit BIN --checkout DIR --kind KIND [--n N] [--seed S] [--subdir D]

KIND is one of the row kinds of score.py (unsupported, unknown, custom_op, cuda, full_unsupported,
affinity).  The sample is random.Random(seed).sample over the rows sorted as the tool wrote them,
so it can be drawn again.  Standard library only.
"""
import argparse
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import score  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--portkit", required=True)
    ap.add_argument("--checkout", required=True)
    ap.add_argument("--kind", required=True, choices=[k for k in score.KINDS if k != "migrate_edit"])
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--subdir", default="")
    args = ap.parse_args()
    target = os.path.join(args.checkout, args.subdir) if args.subdir else args.checkout
    work = tempfile.mkdtemp(prefix="portkit_sample_")
    mode = score.MODE_OF_KIND[args.kind]
    results = {mode: score.analyse(args.portkit, target, work, mode, None)}
    rows = score.rows_of(args.kind, results)
    picked = rows if len(rows) <= args.n else random.Random(args.seed).sample(rows, args.n)
    print("# %s: %d rows, %d drawn with seed %d" % (args.kind, len(rows), len(picked), args.seed))
    for file, start, _end, name in picked:
        text = ""
        if start:
            try:
                with open(os.path.join(target, file), encoding="utf-8", errors="replace") as fh:
                    text = fh.read().splitlines()[start - 1].strip()
            except (OSError, IndexError):
                text = "?"
        match = name if args.kind == "full_unsupported" else (name.split("|")[0] or "*")
        if args.kind == "full_unsupported":
            # The witness to judge: the Message of the row (offending API and call path).
            for r in score.read_csv(os.path.join(results[mode], "full_unsupported_results.csv")):
                if r["3rd-party API"] == name:
                    print("# witness: " + r["Message"].replace("\n", " | ")[:400])
                    break
        print("%s\t%s\t%s\t%s\t?\tsample\t%s" % (args.kind, file, start if start else "-", match,
                                                  text[:160]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
