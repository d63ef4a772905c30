#!/usr/bin/env python3
"""Find the upstream commit a ModelZoo port started from.

For every upstream commit that touched the upstream folder, count the port's .py files whose
blob is byte-identical to the upstream file at the same relative path (git blob ids, no checkout).
The best few commits by that count are then compared line by line (difflib) over all .py files
the port and the commit share; the commit with the fewest differing lines wins. Standard library
only; reads the two bare git directories the `fetch` tool leaves under --mirror-root.

    python3 bench/real_ports/match_commit.py --mirror-root /work/.mirror --port dlrm
"""
import argparse
import difflib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir=" + git_dir, *args], check=True,
                          capture_output=True).stdout


def py_blobs(git_dir, rev, folder):
    """{relative path: blob id} of the .py files under folder at rev."""
    out = git(git_dir, "ls-tree", "-r", rev, "--", folder + "/" if folder else ".")
    prefix = folder + "/" if folder else ""
    blobs = {}
    for line in out.decode("utf-8", "replace").splitlines():
        meta, path = line.split("\t", 1)
        if meta.split()[1] == "blob" and path.endswith(".py"):
            blobs[path[len(prefix):]] = meta.split()[2]
    return blobs


def blob_lines(git_dir, blob):
    return git(git_dir, "cat-file", "blob", blob).decode("utf-8", "replace").splitlines()


def differing_lines(port_git, port_blobs, up_git, up_blobs):
    total = 0
    for path in sorted(set(port_blobs) & set(up_blobs)):
        if port_blobs[path] == up_blobs[path]:
            continue
        a, b = blob_lines(up_git, up_blobs[path]), blob_lines(port_git, port_blobs[path])
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag != "equal":
                total += max(i2 - i1, j2 - j1)
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror-root", required=True)
    ap.add_argument("--ports", default=os.path.join(HERE, "ports.json"))
    ap.add_argument("--port", required=True, help="name of a port in ports.json")
    ap.add_argument("--top", type=int, default=3, help="commits compared line by line")
    args = ap.parse_args()
    spec = json.load(open(args.ports))
    port = next(p for p in spec["ports"] if p["name"] == args.port)
    port_git = os.path.join(args.mirror_root, spec["modelzoo"]["repo"].replace("/", "+"), "repo")
    up_git = os.path.join(args.mirror_root, port["upstream_repo"].replace("/", "+"), "repo")
    port_blobs = py_blobs(port_git, spec["modelzoo"]["commit"], port["port_path"])
    sub = port.get("upstream_subdir", "")
    commits = git(up_git, "rev-list", "--all", "--", sub or ".").decode().split()
    scored = []
    for c in commits:
        up = py_blobs(up_git, c, sub)
        same = sum(1 for p, b in port_blobs.items() if up.get(p) == b)
        scored.append((same, c))
    scored.sort(key=lambda t: -t[0])
    best = []
    candidates = [c for _, c in scored[:args.top]]
    if port["commit"] not in candidates:
        candidates.append(port["commit"])  # the commit ports.json names (the port's README)
    for c in candidates:
        same = next(s for s, sc in scored if sc == c) if c in commits else 0
        up = py_blobs(up_git, c, sub)
        shared = len(set(up) & set(port_blobs))
        diff = differing_lines(port_git, port_blobs, up_git, up)
        best.append((diff, c, same, shared))
        print(f"{c}  identical .py files {same} of {shared} shared  differing lines {diff}")
    # ties go to the commit the port's README names
    diff, c, same, shared = min(best, key=lambda t: (t[0], t[1] != port["commit"], t[1]))
    print(f"closest: {c} ({same} of {shared} shared .py files identical, {diff} differing lines; "
          f"{len(commits)} commits scanned)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
