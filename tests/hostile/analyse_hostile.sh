#!/usr/bin/env bash
# Hostile input for `analyse` and `migrate` (docs/safety.md, issue 27): a Python file bomb under
# the old 64 MB cap, files whose bytes must survive a copy or a rewrite exactly (BOM, CRLF, lone CR,
# Latin-1 with a coding line, form feeds, tabs), runs killed mid-copy, and absurd bracket
# nesting. Every run is under `timeout` (124 means it hung).
source "$(dirname "$0")/../cli/harness.sh"
T="timeout 120"
PY=python3
# ANALYSE_HOSTILE_ONLY="memory faithful markers nesting" picks sections (default: all).
want() { [ -z "${ANALYSE_HOSTILE_ONLY:-}" ] || [[ " $ANALYSE_HOSTILE_ONLY " == *" $1 "* ]]; }

rss_mb() {  # the peak RSS in MB that /usr/bin/time -v wrote to $1
  awk -F: '/Maximum resident set size/ {printf "%d", $2 / 1024}' "$1"
}

if want memory; then
# ---------------------------------------------------------------------------------------------
# Memory: a 58 MB Python file (under the old 64 MB cap) peaked at 3.85 GB in analyse. Python
# files over --max-file-mb (default 2) are skipped with a note; peak RSS stays under 300 MB.
bomb="$tmp/bomb"
mkdir -p "$bomb/lines" "$bomb/expr"
$PY - "$bomb" <<'EOF'
import sys, os
root = sys.argv[1]
size = 58 * 2**20
line = b"x = torch.cuda.current_device() + torch.randn(3).cuda().sum()\n"
with open(os.path.join(root, "lines", "big.py"), "wb") as f:
    f.write(b"import torch\n" + line * (size // len(line) + 1))
item = b"torch.ones(1).cuda(), "
with open(os.path.join(root, "expr", "big.py"), "wb") as f:
    f.write(b"import torch\nx = [" + item * (size // len(item)) + b"]\n")
for d in ("lines", "expr"):
    with open(os.path.join(root, d, "small.py"), "wb") as f:
        f.write(b"import torch\ny = torch.randn(2).cuda()\n")
EOF
for kind in lines expr; do
  /usr/bin/time -v $T "$PORTKIT" analyse -i "$bomb/$kind" -o "$bomb/out_$kind" -j 2 \
    >"$bomb/$kind.out" 2>"$bomb/$kind.err"
  rc=$?
  mb=$(rss_mb "$bomb/$kind.err")
  echo "     analyse of a 58 MB file ($kind): exit $rc, peak RSS ${mb} MB"
  check "analyse of a 58 MB .py ($kind) exits 0 (not a hang)" "[ $rc = 0 ]"
  check "  peak RSS under 300 MB (${mb} MB)" "rss_ok '$mb' 300"
  check "  says the file is over the limit and names the flag" \
    "grep -q 'big.py: over the limit: 58.0 MiB, more than the 2 MiB a Python file may have; not analysed. --max-file-mb raises the limit' '$bomb/out_$kind/${kind}_analysis/pytorch_analysis.txt'"
  check "  and analyses the other file" "grep -q 'small.py' '$bomb/out_$kind/${kind}_analysis/cuda_op_list.csv'"
done
/usr/bin/time -v $T "$PORTKIT" migrate -i "$bomb/lines" -o "$bomb/m" -j 2 >"$bomb/m.out" 2>"$bomb/m.err"
rc=$?
mb=$(rss_mb "$bomb/m.err")
echo "     migrate of the 58 MB file: exit $rc, peak RSS ${mb} MB"
check "migrate of a 58 MB .py exits 0, the file copied unchanged, peak RSS under 300 MB (${mb} MB)" \
  "[ $rc = 0 ] && cmp -s '$bomb/lines/big.py' '$bomb/m/lines_msft/big.py' && rss_ok '$mb' 300"
/usr/bin/time -v $T "$PORTKIT" analyse -m dynamic_shape -i "$bomb/expr" -o "$bomb/d" -j 2 >"$bomb/d.out" 2>"$bomb/d.err"
rc=$?
mb=$(rss_mb "$bomb/d.err")
echo "     dynamic_shape copy of the 58 MB file: exit $rc, peak RSS ${mb} MB"
check "dynamic_shape of a 58 MB .py exits 0, the file copied unchanged, peak RSS under 300 MB (${mb} MB)" \
  "[ $rc = 0 ] && cmp -s '$bomb/expr/big.py' '$bomb/d/expr_analysis/big.py' && rss_ok '$mb' 300"
# Under the cap, a file is analysed; raising the cap analyses a bigger one.
$PY -c "
import sys
line = b'x = compute(a, b[1]) + other.attr * 3\n'
open(sys.argv[1], 'wb').write(b'import torch\ny = torch.randn(2).cuda()\n' + line * (5 * 2**19 // len(line)))" "$bomb/five.py"
mkdir -p "$bomb/five" && mv "$bomb/five.py" "$bomb/five/"
/usr/bin/time -v $T "$PORTKIT" analyse -i "$bomb/five" -o "$bomb/n1" -j 2 >/dev/null 2>"$bomb/n1.err"
check "a 2.5 MiB file is skipped by default" "[ $? = 0 ] && grep -q 'five.py: over the limit: 2.5 MiB, more than the 2 MiB' '$bomb/n1/five_analysis/pytorch_analysis.txt'"
/usr/bin/time -v $T "$PORTKIT" analyse -i "$bomb/five" -o "$bomb/n2" -j 2 --max-file-mb 3 >/dev/null 2>"$bomb/n2.err"
rc=$?
mb=$(rss_mb "$bomb/n2.err")
echo "     analyse of a 2.5 MiB file with --max-file-mb 3: exit $rc, peak RSS ${mb} MB"
check "  and analysed with --max-file-mb 3 (peak RSS ${mb} MB, under 400 MB)" "[ $rc = 0 ] && grep -q '^five/five.py,' '$bomb/n2/five_analysis/cuda_op_list.csv' && rss_ok '$mb' 400"
rm -rf "$bomb"
fi

if want faithful; then
# ---------------------------------------------------------------------------------------------
# Byte-faithful copies: every copied or rewritten Python file keeps its bytes outside the edits
# (BOM, CRLF, lone CR, Latin-1 with a coding line, form feeds, tabs) and compiles.
fp="$tmp/faithful"
mkdir -p "$fp/proj/pkg"
$PY - "$fp/proj" <<'EOF'
import sys, os
root = sys.argv[1]
BOM = b"\xef\xbb\xbf"
files = {
    "bom_top.py": BOM + b"import torch\nx = torch.randn(3).cuda()\ntorch.cuda.synchronize()\n",
    "bom_noimport.py": BOM + b"def f(t):\n    return t.cuda()\n",
    "bom_comment.py": BOM + b"# header comment\nimport torch\n\nfor b in train_loader:\n    b.cuda()\n",
    "bom_blank_loop.py": BOM + b"\nfor b in train_loader:\n    b.cuda()\n",
    "bom_main.py": BOM + b"if __name__ == '__main__':\n    print('cuda')\n",
    "bom_crlf_main.py": BOM + b"import torch\r\nif __name__ == '__main__':\r\n    print(torch.randn(2).cuda())\r\n",
    "crlf.py": b"import torch\r\n\r\ndef main(loader):\r\n    for b in loader:\r\n        b = b.cuda()\r\n"
               b"    torch.cuda.synchronize()\r\n\r\nif __name__ == \"__main__\":\r\n    main([])\r\n",
    "crlf_noimport.py": b"def f(t):\r\n    return t.cuda()\r\n",
    "cr.py": b"import torch\rx = torch.randn(3).cuda()\rfor b in loader:\r    pass\r",
    "mixed.py": b"import torch\nx = 1\r\ny = torch.randn(2).cuda()\rz = 3\r\nfor b in loader:\n    pass\n",
    "latin1.py": b"# -*- coding: latin-1 -*-\nimport torch\nname = '\xe9t\xe9'\nx = torch.randn(3).cuda()\n"
                 b"for b in loader:\n    pass\n",
    "ff_tabs.py": b"import torch\n\x0c\ndef f(a, loader):\n\tfor b in loader:\n\t\tb.cuda()\n"
                  b"\treturn torch.randn(3).cuda()\n\x0c\nclass A:\n\tdef g(self):\n\t\treturn 'cuda:0'  # \x0c\t\n",
    "pkg/__init__.py": BOM + b"# -*- coding: utf-8 -*-\r\nimport torch\r\nDEV = torch.device('cuda')\r\n",
    "cp1252.py": b"# -*- coding: cp1252 -*-\nimport torch\nname = '\x80 \x93quoted\x94 \xe9'\nx = torch.randn(3).cuda()\n"
                 b"for b in loader:\n    pass\n",
    "latin1_cr.py": b"# coding: iso-8859-1\rimport torch\rs = '\xe9\xff'\rx = torch.randn(3).cuda()\r"
                    b"for b in loader:\r    pass\r",
    "cr_main.py": b"import torch\rif __name__ == '__main__':\r    print(torch.randn(2).cuda())\r",
    "latin1_main.py": b"# -*- coding: latin-1 -*-\nimport torch\nif __name__ == '__main__':\n"
                      b"    print('\xe0', torch.randn(2).cuda())\n",
    "shift_jis.py": b"# -*- coding: shift_jis -*-\nimport torch\ns = '\x82\xa0'\nx = torch.randn(3).cuda()\n",
}
for name, data in files.items():
    with open(os.path.join(root, name), "wb") as f:
        f.write(data)
EOF
cat >"$tmp/faithful.py" <<'EOF'
# faithful.py ORIG COPY: every .py of ORIG has a copy in COPY that is byte-identical, or differs
# only in spans that remove or add no BOM, CR, form feed, tab or non-ASCII byte (a line end added
# has the file's own form), and starts with a BOM exactly when the original does. Prints the files
# that differ ("changed NAME") and every failure ("FAIL ...").
import difflib, os, sys
orig_root, copy_root = sys.argv[1], sys.argv[2]
BOM = b"\xef\xbb\xbf"
bad = 0
def special(span):
    return BOM in span or any(c in span for c in b"\r\x0c\t") or any(c >= 0x80 for c in span)
for dirpath, _, names in os.walk(orig_root):
    for n in sorted(names):
        if not n.endswith(".py"):
            continue
        a_path = os.path.join(dirpath, n)
        rel = os.path.relpath(a_path, orig_root)
        b_path = os.path.join(copy_root, rel)
        a = open(a_path, "rb").read()
        try:
            b = open(b_path, "rb").read()
        except OSError as e:
            print("FAIL %s: no copy (%s)" % (rel, e)); bad += 1; continue
        if a == b:
            continue
        print("changed " + rel)
        if a.startswith(BOM) != b.startswith(BOM):
            print("FAIL %s: the BOM was %s" % (rel, "lost" if a.startswith(BOM) else "added")); bad += 1
        crlf = a.count(b"\r\n") > 0 and a.count(b"\r\n") == a.count(b"\n")
        cr_only = b"\r" in a and b"\n" not in a
        sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                continue
            removed, added = a[i1:i2], b[j1:j2]
            if special(removed):
                print("FAIL %s: an edit removed %r (byte %d)" % (rel, removed, i1)); bad += 1
            body = added.replace(b"\r\n", b"\n") if crlf else added.replace(b"\r", b"\n") if cr_only else added
            if special(body):
                print("FAIL %s: an edit added %r (byte %d)" % (rel, added, j1)); bad += 1
            if b"\n" in added and not crlf and b"\n" not in a:
                print("FAIL %s: an edit added a line end the file does not use: %r" % (rel, added)); bad += 1
sys.exit(1 if bad else 0)
EOF
faithful() {  # description orig copy
  $PY "$tmp/faithful.py" "$2" "$3" >"$3.faithful" 2>&1
  check "$1: bytes kept outside the edits (BOM, CRLF, CR, Latin-1, form feeds, tabs)" "[ $? = 0 ]"
  grep FAIL "$3.faithful" | head -5
  local pyc="$tmp/pycache"
  mkdir -p "$pyc"
  PYTHONPYCACHEPREFIX="$pyc" $PY -m py_compile $(find "$3" -name '*.py' ! -path '*/msft_dynamic_analysis/*' | sort) \
    >"$3.pycompile" 2>&1
  check "$1: python3 -m py_compile accepts every copied file" "[ $? = 0 ]"
  head -5 "$3.pycompile"
}
changed() {  # copy file: the copy of file was edited
  grep -qx "changed $2" "$1.faithful"
}

$T "$PORTKIT" migrate -i "$fp/proj" -o "$fp/m" --format csv,json >"$fp/m.out" 2>&1
check "migrate of the encoding fixture exits 0" "[ $? = 0 ]"
mc="$fp/m/proj_msft"
faithful "migrate" "$fp/proj" "$mc"
for f in bom_top.py bom_noimport.py bom_crlf_main.py crlf.py crlf_noimport.py ff_tabs.py pkg/__init__.py; do
  check "  migrate rewrote $f" "changed '$mc' $f"
done
for f in cr.py mixed.py latin1.py cp1252.py latin1_cr.py; do
  check "  migrate rewrote $f" "changed '$mc' $f && grep -q 'torch_npu' '$mc/$f'"
done
# Latin-1 and cp1252 files are rewritten in their own encoding (their non-ASCII bytes kept, never
# UTF-8); a lone-CR file keeps its CRs and gets CR line ends; another encoding is copied as it is.
check "  the Latin-1 and cp1252 files keep their own bytes for non-ASCII text" \
  "LC_ALL=C grep -q \$'\\xe9t\\xe9' '$mc/latin1.py' && LC_ALL=C grep -q \$'\\x80 \\x93quoted\\x94 \\xe9' '$mc/cp1252.py' && ! LC_ALL=C grep -q \$'\\xc3' '$mc/latin1.py' '$mc/cp1252.py'"
check "  the lone-CR files keep CR line ends only, one more for the import line" \
  "$PY -c \"import sys; a, b = (open(f, 'rb').read() for f in sys.argv[1:3]); sys.exit(0 if b'\\\\n' not in b + open(sys.argv[3], 'rb').read() and b.count(b'\\\\r') == a.count(b'\\\\r') + 1 else 1)\" '$fp/proj/cr.py' '$mc/cr.py' '$mc/latin1_cr.py'"
check "  a file in another declared encoding is copied unchanged, and the log says why" \
  "cmp -s '$fp/proj/shift_jis.py' '$mc/shift_jis.py' && grep -q 'shift_jis.py:3:.*its coding line declares shift-jis, which portkit does not read (UTF-8, Latin-1 and cp1252 only)' '$fp/m.out'"
check "  no file reported as not migrated or not compiling" \
  "! grep -q 'not_migrated\\|not_compiled' '${mc}_report/change_list.json' && ! grep -q 'cannot compile the original' '$fp/m.out'"
check "  the BOM file's import goes after the BOM" "head -c 20 '$mc/bom_noimport.py' | grep -q \$'^\\xef\\xbb\\xbfimport torch_npu'"
cp -r "$fp/proj" "$fp/patched"
(cd "$fp/patched" && patch -s -p1 --binary <"${mc}_report/migration.patch") >"$fp/patch.out" 2>&1
check "  migration.patch applied to the original gives the copy, byte for byte" \
  "diff -r -x .portkit-output '$fp/patched' '$mc'"

$T "$PORTKIT" migrate -i "$fp/proj" -o "$fp/t" --transfer-only >"$fp/t.out" 2>&1
check "migrate --transfer-only of the encoding fixture exits 0" "[ $? = 0 ]"
faithful "migrate --transfer-only" "$fp/proj" "$fp/t/proj_msft"
for f in bom_crlf_main.py crlf.py cr_main.py latin1_main.py; do
  check "  --transfer-only rewrote $f" "changed '$fp/t/proj_msft' $f"
done
# bom_main.py imports no torch: not an entry script for the transfer, unless --entry names it;
# then the two lines go right after the BOM.
check "  --transfer-only left bom_main.py (no torch import)" "cmp -s '$fp/proj/bom_main.py' '$fp/t/proj_msft/bom_main.py'"
$T "$PORTKIT" migrate -i "$fp/proj" -o "$fp/te" --transfer-only --entry bom_main.py >"$fp/te.out" 2>&1
check "migrate --transfer-only --entry bom_main.py exits 0" "[ $? = 0 ]"
faithful "migrate --transfer-only --entry" "$fp/proj" "$fp/te/proj_msft"
check "  --entry: bom_main.py gets both lines after the BOM" "changed '$fp/te/proj_msft' bom_main.py && head -c 60 '$fp/te/proj_msft/bom_main.py' | grep -q \$'^\\xef\\xbb\\xbfimport torch_npu'"

$T "$PORTKIT" migrate -i "$fp/proj" -o "$fp/u" --unsafe >"$fp/u.out" 2>&1
check "migrate --unsafe of the encoding fixture exits 0" "[ $? = 0 ]"
faithful "migrate --unsafe" "$fp/proj" "$fp/u/proj_msft"

$T "$PORTKIT" analyse -m dynamic_shape -i "$fp/proj" -o "$fp/d" >"$fp/d.out" 2>&1
check "analyse -m dynamic_shape of the encoding fixture exits 0" "[ $? = 0 ]"
dc="$fp/d/proj_analysis"
faithful "dynamic_shape" "$fp/proj" "$dc"
for f in bom_comment.py bom_blank_loop.py crlf.py ff_tabs.py cr.py mixed.py latin1.py cp1252.py latin1_cr.py; do
  check "  dynamic_shape instrumented $f" "changed '$dc' $f && grep -q 'DETECTOR.start(' '$dc/$f'"
done
check "  dynamic_shape writes the Latin-1 and cp1252 files in their own encoding" \
  "LC_ALL=C grep -q \$'\\xe9t\\xe9' '$dc/latin1.py' && LC_ALL=C grep -q \$'\\x80 \\x93quoted\\x94' '$dc/cp1252.py' && ! LC_ALL=C grep -q \$'\\xc3' '$dc/latin1.py' '$dc/cp1252.py'"
check "  dynamic_shape copies the file in another declared encoding unchanged" "cmp -s '$fp/proj/shift_jis.py' '$dc/shift_jis.py'"

# The compile check names the original only when it does not compile either (tree-sitter accepts a
# `from __future__` import after other code; CPython does not).
mkdir -p "$fp/broken"
printf '\xef\xbb\xbfimport torch\nfrom __future__ import annotations\nx = torch.randn(3).cuda()\n' >"$fp/broken/bad.py"
$T "$PORTKIT" migrate -i "$fp/broken" -o "$fp/b" >"$fp/b.out" 2>&1
check "migrate of a BOM file whose original does not compile: exit 0, the original named as not compiling" \
  "[ $? = 0 ] && grep -q 'bad.py:[0-9]*: python3 cannot compile the original either' '$fp/b.out'"
check "  its edits kept after the BOM" "head -c 3 '$fp/b/broken_msft/bad.py' | cmp -s - <(printf '\xef\xbb\xbf') && grep -q 'npu()' '$fp/b/broken_msft/bad.py'"
fi

if want markers; then
# ---------------------------------------------------------------------------------------------
# Crash markers: migrate and the dynamic_shape copy mark their folder before the first file; a
# killed run is recognised by the next one, which replaces its output without --force.
km="$tmp/kill"
mkdir -p "$km/proj/sub"
$PY - "$km/proj" <<'EOF'
import sys, os
root = sys.argv[1]
body = "".join("x%d = torch.randn(3).cuda()\nfor b in loader:\n    pass\n" % i for i in range(40))
for i in range(400):
    with open(os.path.join(root, "sub" if i % 2 else "", "m%04d.py" % i), "w") as f:
        f.write("import torch\n" + body)
EOF
# The state a kill leaves: a marker of a run that is gone, a file cut short and a temporary.
sleep 0 & dead=$!
wait $dead
mkdir -p "$km/state/proj_msft/sub"
printf 'portkit migrate\tin progress: pid %d\nm0000.py\n' "$dead" >"$km/state/proj_msft/.portkit-output"
head -c 100 "$km/proj/m0000.py" >"$km/state/proj_msft/m0000.py"
echo partial >"$km/state/proj_msft/sub/m0001.py.tmp.$dead"
$T "$PORTKIT" migrate -i "$km/proj" -o "$km/state" -j 2 >"$km/state.out" 2>&1
check "migrate into the folder of a killed migrate run: exit 0 without --force" "[ $? = 0 ]"
check "  says the earlier run did not finish" "grep -q 'an earlier portkit migrate (pid $dead) .* did not finish (killed?); its output is replaced' '$km/state.out'"
check "  removes the killed run's temporaries" "[ -z \"\$(find '$km/state' -name '*.tmp.*')\" ]"
check "  and the marker says the run finished" "[ \"\$(head -1 '$km/state/proj_msft/.portkit-output')\" = 'portkit migrate' ]"
$T "$PORTKIT" migrate -i "$km/proj" -o "$km/fresh" -j 2 >/dev/null 2>&1
check "  the copy equals a fresh run's" "diff -r -x .portkit-output '$km/fresh/proj_msft' '$km/state/proj_msft' | head -5; [ \${PIPESTATUS[0]} = 0 ]"
# A folder marked by a run that is still going is not written into (without --force).
mkdir -p "$km/live/proj_msft"
printf 'portkit migrate\tin progress: pid %d\n' "$$" >"$km/live/proj_msft/.portkit-output"
# A marker naming a live process that is not portkit (this script's shell) is a stale one: its
# pid was reused after the run was killed.
$T "$PORTKIT" migrate -i "$km/proj" -o "$km/live" -j 2 >"$km/live.out" 2>&1
check "  a marker naming a live process that is not portkit is taken as a killed run" \
  "[ $? = 0 ] && grep -q 'did not finish' '$km/live.out'"

kill_mid_copy() {  # name dest command...: start it (not under timeout: the kill must reach portkit
                  # itself), SIGKILL it once its copy has a first .py file (or after 60 s)
  local name=$1 dest=$2
  shift 2
  "$@" >"$km/$name.out" 2>&1 &
  local pid=$! waited=0
  while kill -0 $pid 2>/dev/null && [ -z "$(find "$dest" -name 'm0*.py' 2>/dev/null | head -1)" ] && [ $waited -lt 3000 ]; do
    sleep 0.02; waited=$((waited + 1))
  done
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  echo $?
}
rc=$(kill_mid_copy mkill "$km/mk/proj_msft" "$PORTKIT" migrate -i "$km/proj" -o "$km/mk" -j 2)
if [ "$rc" = 137 ]; then
  check "migrate killed mid-copy leaves a marker saying it did not finish" \
    "head -1 '$km/mk/proj_msft/.portkit-output' | grep -q \$'^portkit migrate\\tin progress: pid '"
  $T "$PORTKIT" migrate -i "$km/proj" -o "$km/mk" -j 2 >"$km/mk2.out" 2>&1
  check "  the next run replaces it without --force (exit 0)" "[ $? = 0 ] && grep -q 'did not finish (killed?)' '$km/mk2.out'"
  check "  and its copy equals a fresh run's" "diff -r -x .portkit-output '$km/fresh/proj_msft' '$km/mk/proj_msft' | head -5; [ \${PIPESTATUS[0]} = 0 ]"
else
  echo "skip migrate kill mid-copy: the run ended (exit $rc) before it could be killed"
fi
$T "$PORTKIT" analyse -m dynamic_shape -i "$km/proj" -o "$km/dfresh" -j 2 >/dev/null 2>&1
rc=$(kill_mid_copy dkill "$km/dk/proj_analysis" "$PORTKIT" analyse -m dynamic_shape -i "$km/proj" -o "$km/dk" -j 2)
if [ "$rc" = 137 ]; then
  check "dynamic_shape killed mid-copy leaves a marker saying it did not finish" \
    "head -1 '$km/dk/proj_analysis/.portkit-output' | grep -q \$'^portkit analyse\\tin progress: pid '"
  $T "$PORTKIT" analyse -m dynamic_shape -i "$km/proj" -o "$km/dk" -j 2 >"$km/dk2.out" 2>&1
  check "  the next run replaces it without --force (exit 0)" "[ $? = 0 ] && grep -q 'did not finish (killed?)' '$km/dk2.out'"
  check "  and its copy equals a fresh run's" \
    "diff -r -x pytorch_analysis.txt -x .portkit-output '$km/dfresh/proj_analysis' '$km/dk/proj_analysis' | head -5; [ \${PIPESTATUS[0]} = 0 ]"
else
  echo "skip dynamic_shape kill mid-copy: the run ended (exit $rc) before it could be killed"
fi
rm -rf "$km"
fi

if want nesting; then
# ---------------------------------------------------------------------------------------------
# Absurd nesting: 80 k nested brackets (an ASan invalid free inside tree-sitter) are refused
# before parsing, with a note; the rest of the project is analysed.
nest="$tmp/nest"
mkdir -p "$nest/proj"
$PY -c "open('$nest/proj/parens.py', 'w').write('(' * 80000 + '\n' * 20000)"
$PY -c "open('$nest/proj/mixed.py', 'w').write('import torch\nx = ' + '([{' * 100 + '1' + '}])' * 100 + '\n')"
$PY -c "open('$nest/proj/indent.py', 'w').write(''.join(' ' * i + 'if x:\n' for i in range(120)) + ' ' * 120 + 'pass\n')"
$PY -c "open('$nest/proj/ok200.py', 'w').write('x = ' + '(' * 200 + '1' + ')' * 200 + '\n')"
printf 'import torch\ny = torch.randn(2).cuda()\n' >"$nest/proj/fine.py"
$T "$PORTKIT" analyse -i "$nest/proj" -o "$nest/a" -j 2 >"$nest/a.out" 2>"$nest/a.err"
check "analyse of 80 k nested brackets exits 0 (no crash, no hang)" "[ $? = 0 ]"
log="$nest/a/proj_analysis/pytorch_analysis.txt"
check "  names the file, line and column, and skips it" \
  "grep -q 'proj/parens.py:1:201: brackets nested more than 200 deep (CPython refuses this too); not analysed' '$log'"
check "  refuses brackets of every kind" "grep -q 'proj/mixed.py:2:205: brackets nested more than 200 deep' '$log'"
check "  refuses more than 100 levels of indentation" \
  "grep -q 'proj/indent.py:102:102: more than 100 levels of indentation (CPython refuses this too); not analysed' '$log'"
check "  accepts 200 levels (valid Python)" "! grep -q 'ok200.py.*nested' '$log' && PYTHONPYCACHEPREFIX='$tmp/pycache' $PY -m py_compile '$nest/proj/ok200.py'"
check "  and analyses the rest" "grep -q '^proj/fine.py,' '$nest/a/proj_analysis/cuda_op_list.csv'"
$T "$PORTKIT" migrate -i "$nest/proj" -o "$nest/m" -j 2 >"$nest/m.out" 2>&1
check "migrate copies the deeply nested file unchanged" "[ $? = 0 ] && cmp -s '$nest/proj/parens.py' '$nest/m/proj_msft/parens.py'"

# Deep nesting without brackets (unary chains, not, ~, await, lambda, conditional expressions, **,
# star unpacking): the forms of the regression seeds in tests/fuzz/crashes/deep_*.py, 20 times as
# deep, each alone in a project beside a file that is fine: refused before parsing, in linear time,
# each run bounded in time and memory.
ops="$tmp/ops"
$PY - "$ops" <<'EOF'
import os, sys
root = sys.argv[1]
forms = {
    "unary_minus": "x = " + "-" * 1000000 + "x\n",
    "tilde": "x = " + "~" * 1000000 + "x\n",
    "not": "x = " + "not " * 400000 + "x\n",
    "await": "async def f():\n    return " + "await " * 300000 + "x\n",
    "lambda": "f = " + "lambda: " * 200000 + "x\n",
    "conditional": "x = " + "a if b else " * 160000 + "c\n",
    "power": "x = " + "a ** " * 300000 + "b\n",
    "star_unpack": "f(" + "*-" * 600000 + "x)\n",
}
for name, text in forms.items():
    os.makedirs(os.path.join(root, name))
    with open(os.path.join(root, name, "deep.py"), "w") as f:
        f.write("import torch\n" + text)
    with open(os.path.join(root, name, "fine.py"), "w") as f:
        f.write("import torch\ny = torch.randn(2).cuda()\n")
ok = ["x = " + "- " * 200 + "a", "x = " + "not " * 200 + "a", "x = " + "~" * 200 + "a",
      "f = " + "lambda: " * 200 + "a", "x = " + "a if b else " * 200 + "c", "x = " + "a ** " * 200 + "b"]
os.makedirs(os.path.join(root, "ok"))
with open(os.path.join(root, "ok", "ok200.py"), "w") as f:
    f.write("".join(line + "\n" for line in ok))
EOF
for name in unary_minus tilde not await lambda conditional power star_unpack; do
  /usr/bin/time -v $T "$PORTKIT" analyse -i "$ops/$name" -o "$ops/$name.out" -j 2 --max-file-mb 8 \
    >"$ops/$name.log" 2>"$ops/$name.time"
  rc=$?
  mb=$(rss_mb "$ops/$name.time")
  secs=$(awk '/Elapsed \(wall clock\)/ {n = split($NF, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; printf "%d", s}' "$ops/$name.time")
  check "deep $name without brackets: exit 0 in ${secs} s (under 30), peak RSS ${mb} MB (under 200)" \
    "[ $rc = 0 ] && [ '$secs' -lt 30 ] && rss_ok '$mb' 200"
  check "  refused before parsing, the file and position named" \
    "grep -q '$name/deep.py:[0-9]*:[0-9]*: operators nested more than 200 deep without brackets (unary -, +, ~, not, await, lambda, \*\* or conditional expressions; no real code comes near); not analysed' '$ops/$name.out/${name}_analysis/pytorch_analysis.txt'"
  check "  and the other file analysed" "grep -q '^$name/fine.py,' '$ops/$name.out/${name}_analysis/cuda_op_list.csv'"
done
$T "$PORTKIT" analyse -i "$ops/ok" -o "$ops/ok.out" -j 2 >"$ops/ok.log" 2>&1
check "200 nested operators of each form are accepted (CPython compiles them)" \
  "[ $? = 0 ] && ! grep -q 'nested more than' '$ops/ok.out/ok_analysis/pytorch_analysis.txt' && PYTHONPYCACHEPREFIX='$tmp/pycache' $PY -m py_compile '$ops/ok/ok200.py'"
$T "$PORTKIT" migrate -i "$ops/not" -o "$ops/m" -j 2 --max-file-mb 8 >"$ops/m.log" 2>&1
check "migrate copies the refused file unchanged" "[ $? = 0 ] && cmp -s '$ops/not/deep.py' '$ops/m/not_msft/deep.py'"
fi

echo "analyse_hostile: $pass passed, $fail failed"
[ "$fail" = 0 ]
