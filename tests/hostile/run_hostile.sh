#!/usr/bin/env bash
# Hostile and unlucky input (docs/safety.md): each case is an attack, asserting the policy that
# stops it: exit code, message, nothing written outside the output folder, nothing read through
# a link, no hang (every run under `timeout`; 124 means it hung).
source "$(dirname "$0")/../cli/harness.sh"
T="timeout 60"
trace=$(ls tests/data/traces/kineto/*.json.gz | head -1)
F=tests/fixtures/accuracy

# ---------------------------------------------------------------------------------------------
# Links: never followed out of the input, never dereferenced into a copy; a symlinked -i/-o refused.
proj="$tmp/links/proj"
mkdir -p "$proj/pkg" "$tmp/links/outside"
printf 'import torch\nx = torch.randn(3).cuda()\nfor b in loader:\n    pass\n' >"$proj/train.py"
printf 'import torch\n' >"$proj/pkg/__init__.py"
echo 'secret = 1' >"$tmp/links/outside/secret.py"
ln -s /etc "$proj/etc_link"
ln -s "$tmp/links/outside/secret.py" "$proj/secret.py"
ln -s "$tmp/links/outside" "$proj/outside_dir"

$T "$PORTKIT" migrate -i "$proj" -o "$tmp/links/m" >"$tmp/links/m.out" 2>&1
check "migrate with links to /etc and outside exits 0" "[ $? = 0 ]"
msft="$tmp/links/m/proj_msft"
check "migrate copies the /etc link as a link" "[ -L '$msft/etc_link' ] && [ \"\$(readlink '$msft/etc_link')\" = /etc ]"
check "migrate copies a file link as a link (not its content)" "[ -L '$msft/secret.py' ]"
check "migrate copies nothing from /etc (no regular passwd/shadow anywhere)" \
  "[ -z \"\$(find '$msft' -type f \\( -name passwd -o -name shadow -o -name hosts \\))\" ]"
check "migrate never walks into the linked folder" "[ -z \"\$(find '$msft' -type f -path '*outside*')\" ]"

ln -s "$proj" "$tmp/links/proj_alias"
$T "$PORTKIT" migrate -i "$tmp/links/proj_alias" -o "$tmp/links/m2" >"$tmp/links/m2.out" 2>&1
check "migrate refuses a symlinked -i (exit 2)" "[ $? = 2 ]"
check "  and says it is a symbolic link" "grep -q 'is a symbolic link' '$tmp/links/m2.out'"
check "  and writes nothing" "[ ! -e '$tmp/links/m2' ]"
mkdir -p "$tmp/links/real_out" && ln -s "$tmp/links/real_out" "$tmp/links/out_alias"
$T "$PORTKIT" migrate -i "$proj" -o "$tmp/links/out_alias" >"$tmp/links/m3.out" 2>&1
check "migrate refuses a symlinked -o (exit 2)" "[ $? = 2 ] && [ -z \"\$(ls '$tmp/links/real_out')\" ]"
$T "$PORTKIT" analyse -i "$tmp/links/proj_alias" -o "$tmp/links/a0" >"$tmp/links/a0.out" 2>&1
check "analyse refuses a symlinked -i (exit 2)" "[ $? = 2 ] && grep -q 'is a symbolic link' '$tmp/links/a0.out'"

$T "$PORTKIT" analyse -i "$proj" -o "$tmp/links/a" >"$tmp/links/a.out" 2>&1
check "analyse with links exits 0" "[ $? = 0 ]"
check "analyse notes the links it did not follow" "grep -q 'etc_link: symbolic link to /etc; not followed' '$tmp/links/a/proj_analysis/pytorch_analysis.txt'"
check "analyse analysed nothing under /etc or the linked folder" \
  "! grep -q 'outside_dir/\\|etc_link/' '$tmp/links/a/proj_analysis/pytorch_analysis.txt'"

$T "$PORTKIT" analyse -i "$proj" -o "$tmp/links/d" -m dynamic_shape >"$tmp/links/d.out" 2>&1
check "analyse -m dynamic_shape with links exits 0" "[ $? = 0 ]"
dcopy="$tmp/links/d/proj_analysis"
check "the instrumented copy keeps links as links" "[ -L '$dcopy/etc_link' ] && [ -L '$dcopy/secret.py' ]"
check "the instrumented copy holds nothing from /etc" "[ -z \"\$(find '$dcopy' -type f -name passwd)\" ]"

# A tensor file of a dump that is a link to a file outside the dump.
cp -r "$F/ref" "$tmp/links/dump"
cp "$tmp/links/dump/op_000000.safetensors" "$tmp/links/outside/op0.safetensors"
rm "$tmp/links/dump/op_000000.safetensors"
ln -s "$tmp/links/outside/op0.safetensors" "$tmp/links/dump/op_000000.safetensors"
$T "$PORTKIT" extract -i "$tmp/links/dump" -o "$tmp/links/ex" -s 0 >"$tmp/links/ex.out" 2>&1
rc=$?
check "extract refuses a tensor file that is a link (exit 2, not a hang)" "[ $rc = 2 ]"
check "  says so" "grep -q 'is a symbolic link; not followed' '$tmp/links/ex.out'"
check "  and copies no content through it" "[ ! -f '$tmp/links/ex/op_000000.safetensors' ]"
$T "$PORTKIT" convert -d "$tmp/links/dump" -out "$tmp/links/cv" >"$tmp/links/cv.out" 2>&1
check "convert does not read a linked tensor file" "[ $? != 124 ] && grep -q 'is a symbolic link; not followed' '$tmp/links/cv.out' && [ -z \"\$(ls '$tmp/links/cv' | grep '^0\\.')\" ]"
$T "$PORTKIT" compare "$tmp/links/dump" "$F/tgt" -o "$tmp/links/cmp" --format json -j 1 >"$tmp/links/cmp.out" 2>&1
check "compare does not read a linked tensor file" \
  "[ $? != 124 ] && grep -rq 'is a symbolic link; not followed' '$tmp/links/cmp.out' '$tmp/links/cmp'"

# prof import: a link to a trace outside the folder is noted and not imported.
mkdir -p "$tmp/links/prof"
cp "$trace" "$tmp/links/outside/ext_trace.json.gz"
cp "$trace" "$tmp/links/prof/own_trace.json.gz"
ln -s "$tmp/links/outside/ext_trace.json.gz" "$tmp/links/prof/linked_trace.json.gz"
$T "$PORTKIT" prof import -dir "$tmp/links/prof" >"$tmp/links/prof.out" 2>&1
check "prof import with a linked trace exits 0" "[ $? = 0 ]"
check "  notes the link" "grep -q 'linked_trace.json.gz: symbolic link' '$tmp/links/prof.out'"
check "  imports only the real trace" "grep -q 'own_trace' '$tmp/links/prof.out' && ! grep -q 'Import linked_trace' '$tmp/links/prof.out'"

# ---------------------------------------------------------------------------------------------
# Outputs: nothing written outside the output folder; nothing overwritten that portkit did not write.
mkdir -p "$tmp/out/conv/deep/er"
python3 - "$tmp/out/evil.safetensors" <<'PY'
import json, struct, sys
hdr = json.dumps({"/../../../escaped": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                  "..": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hdr)) + hdr + struct.pack("<ff", 1.0, 2.0))
PY
$T "$PORTKIT" convert -d "$tmp/out/evil.safetensors" -out "$tmp/out/conv/deep/er" >"$tmp/out/conv.out" 2>&1
check "convert of a tensor key with ../ exits 0" "[ $? = 0 ]"
check "  writes nothing outside its output folder" \
  "[ -z \"\$(find '$tmp/out' -name '*escaped*' -not -path '$tmp/out/conv/deep/er/*')\" ]"
check "  writes the tensor under a sanitised name inside it" "ls '$tmp/out/conv/deep/er' | grep -q '^evil\\._\\.\\._\\.\\._\\.\\._escaped\\.npy$'"
check "  and no hidden or parent-named file (but convert's ledger)" "[ -z \"\$(ls -A '$tmp/out/conv/deep/er' | grep '^\\.' | grep -vx '.portkit-files')\" ]"

cp -r "$F/ref" "$tmp/out/dump"
before=$(md5sum "$tmp/out/dump/manifest.jsonl")
$T "$PORTKIT" extract -i "$tmp/out/dump" -o "$tmp/out/dump" -s 0 >"$tmp/out/ex1.out" 2>&1
check "extract -o equal to -i is refused (exit 2)" "[ $? = 2 ] && grep -q 'is the input itself' '$tmp/out/ex1.out'"
check "  and the dump is untouched" "[ \"\$(md5sum '$tmp/out/dump/manifest.jsonl')\" = \"$before\" ]"
$T "$PORTKIT" extract -i "$tmp/out/dump/" -o "$tmp/out/dump/sub" -s 0 >"$tmp/out/ex1b.out" 2>&1
check "extract -o inside -i is refused (exit 2)" "[ $? = 2 ] && [ ! -e '$tmp/out/dump/sub' ]"
cp -r "$F/tgt" "$tmp/out/other"
other=$(md5sum "$tmp/out/other/manifest.jsonl")
$T "$PORTKIT" extract -i "$tmp/out/dump" -o "$tmp/out/other" -s 0 >"$tmp/out/ex2.out" 2>&1
check "extract into an existing dump is refused (exit 2)" "[ $? = 2 ] && grep -q 'holds a dump' '$tmp/out/ex2.out'"
check "  and that dump is untouched" "[ \"\$(md5sum '$tmp/out/other/manifest.jsonl')\" = \"$other\" ]"
$T "$PORTKIT" extract -i "$tmp/out/dump" -o "$tmp/out/other" -s 0 --force >"$tmp/out/ex3.out" 2>&1
check "extract --force replaces it" "[ $? = 0 ] && [ \"\$(wc -l <'$tmp/out/other/manifest.jsonl')\" = 1 ]"

# migrate and analyse alternating on one folder: no output nested in another.
alt="$tmp/out/alt"
mkdir -p "$alt" && cp "$proj/train.py" "$alt/"
for round in 1 2 3; do
  $T "$PORTKIT" migrate -i "$alt" -o "$alt" >"$tmp/out/alt_m$round.out" 2>&1 || echo "migrate round $round: $?"
  $T "$PORTKIT" analyse -i "$alt" -o "$alt" >"$tmp/out/alt_a$round.out" 2>&1 || echo "analyse round $round: $?"
done
check "alternating migrate/analyse -i d -o d: one _msft folder" "[ \"\$(find '$alt' -name 'alt_msft' | wc -l)\" = 1 ]"
check "  one _analysis folder" "[ \"\$(find '$alt' -name 'alt_analysis' | wc -l)\" = 1 ]"
check "  neither inside the other" "[ -z \"\$(find '$alt/alt_msft' '$alt/alt_analysis' -mindepth 1 -name 'alt_*')\" ]"

# A re-used migrate output does not keep files deleted from the project.
stale="$tmp/out/stale"
mkdir -p "$stale/p" && cp "$proj/train.py" "$stale/p/" && echo 'x = 1' >"$stale/p/gone.py" && echo data >"$stale/p/gone.txt"
$T "$PORTKIT" migrate -i "$stale/p" -o "$stale/o" >/dev/null 2>&1
rm "$stale/p/gone.py" "$stale/p/gone.txt"
$T "$PORTKIT" migrate -i "$stale/p" -o "$stale/o" >"$stale/m2.out" 2>&1
check "re-used migrate output: exit 0" "[ $? = 0 ]"
check "  files deleted from the project are removed from the copy" "[ ! -e '$stale/o/p_msft/gone.py' ] && [ ! -e '$stale/o/p_msft/gone.txt' ]"
check "  and the removal is reported" "grep -q 'gone.py: removed from the migrated copy' '$stale/m2.out'"
check "  the rest is still there" "[ -f '$stale/o/p_msft/train.py' ]"

# An existing folder migrate did not write is not overwritten without --force.
mkdir -p "$tmp/out/mine/p_msft" && echo precious >"$tmp/out/mine/p_msft/notes.txt"
$T "$PORTKIT" migrate -i "$stale/p" -o "$tmp/out/mine" >"$tmp/out/mine.out" 2>&1
check "migrate into a folder it did not write is refused (exit 2)" "[ $? = 2 ] && grep -q 'was not written by portkit migrate' '$tmp/out/mine.out'"
$T "$PORTKIT" migrate -i "$stale/p" -o "$tmp/out/mine" --force >/dev/null 2>&1
check "  --force writes into it and keeps files it did not write" "[ $? = 0 ] && [ -f '$tmp/out/mine/p_msft/notes.txt' ]"

# ---------------------------------------------------------------------------------------------
# Generated code: a hostile folder name pasted into the dynamic-shape copy's _config.py.
gen="$tmp/gen"
mkdir -p "$gen"
i=0
while IFS= read -r -d '' name; do
  i=$((i + 1))
  d="$gen/$i/$name"
  mkdir -p "$d" && cp "$proj/train.py" "$d/"
  $T "$PORTKIT" analyse -i "$d" -o "$gen/$i/out" -m dynamic_shape >"$gen/$i.out" 2>&1
  check "dynamic_shape with hostile folder name #$i exits 0" "[ $? = 0 ]"
  cfg="$gen/$i/out/${name}_analysis/msft_dynamic_analysis/_config.py"
  check "  _config.py holds the name as data, runs without side effects" \
    "(cd '$gen/$i' && python3 -c 'import runpy,sys; v=runpy.run_path(sys.argv[1])[\"DISPLAY_ROOT\"]; sys.exit(0 if v==sys.argv[2] else 1)' \"\$cfg\" \"\$name\") && [ ! -e '$gen/$i/PWNED' ] && [ ! -e PWNED ]"
done < <(printf '%s\0' \
  'x"; import os; os.system("touch PWNED"); "' \
  "y'; import os; os.system('touch PWNED'); '" \
  $'line\nbreak' \
  'back\slash\' \
  'ünïcödé 日本 "q"')

# ---------------------------------------------------------------------------------------------
# Files that are not regular: FIFOs refused before they are opened (no hang).
fifo="$tmp/fifo"
mkdir -p "$fifo" && cp -r "$F/ref" "$fifo/ref"
rm "$fifo/ref/op_000001.safetensors" && mkfifo "$fifo/ref/op_000001.safetensors"
$T "$PORTKIT" compare "$fifo/ref" "$F/tgt" -o "$fifo/cmp" --format json -j 1 >"$fifo/cmp.out" 2>&1
rc=$?
check "compare with a FIFO tensor file does not hang" "[ $rc != 124 ]"
check "  and names the FIFO" "grep -rq 'not a regular file (a FIFO)' '$fifo/cmp.out' '$fifo/cmp'"
$T "$PORTKIT" convert -d "$fifo/ref" -out "$fifo/cv" >"$fifo/cv.out" 2>&1
rc=$?
check "convert with a FIFO tensor file does not hang" "[ $rc != 124 ] && grep -q 'a FIFO' '$fifo/cv.out'"
mkfifo "$fifo/lone.safetensors"
$T "$PORTKIT" convert -d "$fifo/lone.safetensors" -out "$fifo/cv2" >"$fifo/cv2.out" 2>&1
check "convert -d FIFO is refused (exit 2)" "[ $? = 2 ] && grep -q 'a FIFO' '$fifo/cv2.out'"
mkdir -p "$fifo/mref" && cp "$F/ref"/*.safetensors "$fifo/mref/" && mkfifo "$fifo/mref/manifest.jsonl"
$T "$PORTKIT" extract -i "$fifo/mref" -o "$fifo/ex" -s 0 >"$fifo/ex.out" 2>&1
check "extract with a FIFO manifest: exit 2, no hang" "[ $? = 2 ]"
$T "$PORTKIT" compare "$fifo/mref" "$F/tgt" -o "$fifo/cmp2" >"$fifo/cmp2.out" 2>&1
check "compare with a FIFO manifest: exit 2, no hang" "[ $? = 2 ]"
mkdir -p "$fifo/prof" && cp "$trace" "$fifo/prof/t.json.gz" && mkfifo "$fifo/prof/trace.json"
$T "$PORTKIT" prof import -dir "$fifo/prof" >"$fifo/prof.out" 2>&1
check "prof import of a folder with a FIFO trace: exit 0, no hang, noted" "[ $? = 0 ] && grep -q 'trace.json: not a regular file (a FIFO)' '$fifo/prof.out'"
$T "$PORTKIT" prof import "$fifo/prof/trace.json" >"$fifo/prof2.out" 2>&1
check "prof import of a FIFO: exit 2, no hang" "[ $? = 2 ]"
mkdir -p "$fifo/py" && cp "$proj/train.py" "$fifo/py/" && mkfifo "$fifo/py/hang.py"
$T "$PORTKIT" analyse -i "$fifo/py" -o "$fifo/pyo" >"$fifo/py.out" 2>&1
check "analyse of a project with a FIFO .py: exit 0, no hang" "[ $? = 0 ]"
$T "$PORTKIT" migrate -i "$fifo/py" -o "$fifo/pym" >"$fifo/pym.out" 2>&1
check "migrate of a project with a FIFO .py: exit 0, no hang, FIFO not copied" "[ $? = 0 ] && [ ! -e '$fifo/pym/py_msft/hang.py' ]"

# ---------------------------------------------------------------------------------------------
# migration.patch applies with patch -p1 and git apply when a name has a space or a quote.
pp="$tmp/patch"
mkdir -p "$pp/p/my pkg"
printf 'import torch\nx = torch.randn(3).cuda()\n' >"$pp/p/my pkg/my file.py"
printf 'import torch\ny = torch.cuda.is_available()\n' >"$pp/p/q\"uote.py"
$T "$PORTKIT" migrate -i "$pp/p" -o "$pp/o" >/dev/null 2>&1
check "migrate of names with a space and a quote exits 0" "[ $? = 0 ]"
cp -r "$pp/p" "$pp/by_patch" && cp -r "$pp/p" "$pp/by_git"
(cd "$pp/by_patch" && patch -p1 --quiet <"$pp/o/p_msft_report/migration.patch") >"$pp/patch.out" 2>&1
check "patch -p1 applies migration.patch" "[ $? = 0 ] && cmp -s '$pp/by_patch/my pkg/my file.py' '$pp/o/p_msft/my pkg/my file.py' && cmp -s '$pp/by_patch/q\"uote.py' '$pp/o/p_msft/q\"uote.py'"
(cd "$pp/by_git" && git apply -p1 "$pp/o/p_msft_report/migration.patch") >"$pp/git.out" 2>&1
check "git apply applies migration.patch" "[ $? = 0 ] && cmp -s '$pp/by_git/my pkg/my file.py' '$pp/o/p_msft/my pkg/my file.py'"

# ---------------------------------------------------------------------------------------------
# Numbers from input: out-of-range ts/dur/ids are left out and counted, never wrapped.
nums="$tmp/nums"
mkdir -p "$nums"
cat >"$nums/trace.json" <<'JSON'
{"schemaVersion": 1, "traceEvents": [
 {"ph": "X", "cat": "kernel", "name": "good", "pid": 0, "tid": 7, "ts": 1000, "dur": 5, "args": {"External id": 1}},
 {"ph": "X", "cat": "kernel", "name": "huge_ts", "pid": 0, "tid": 7, "ts": 99999999999999999999999, "dur": 5},
 {"ph": "X", "cat": "kernel", "name": "huge_dur", "pid": 0, "tid": 7, "ts": 1010, "dur": 1e300},
 {"ph": "X", "cat": "kernel", "name": "neg_dur", "pid": 0, "tid": 7, "ts": 1020, "dur": -50},
 {"ph": "X", "cat": "cpu_op", "name": "huge_id", "pid": 1, "tid": 1, "ts": 1030, "dur": 5, "args": {"External id": 1e300}},
 {"ph": "X", "cat": "cpu_op", "name": "good_op", "pid": 1, "tid": 1, "ts": 999, "dur": 20, "args": {"External id": 1}}
]}
JSON
$T "$PORTKIT" prof import -dir "$nums" >"$nums/import.out" 2>&1
check "prof import of out-of-range numbers exits 0" "[ $? = 0 ]"
check "  reports 4 events left out for out-of-range numbers" "grep -q '4 events left out: a timestamp, duration or id out of range' '$nums/import.out'"
check "  stores the 2 good events" "grep -Eq 'trace.json +\\| +kineto +\\| +2 ' '$nums/import.out'"
for sub in "export summary" "export timeline" analyse; do
  $T "$PORTKIT" prof $sub -dir "$nums" >"$nums/${sub// /_}.out" 2>&1
  check "prof $sub after it exits 0" "[ $? = 0 ]"
done
check "  no negative time in the summary" "! grep -rEq '(^|,)-[0-9]' '$nums/summary'"
check "  the timeline holds only the good events" \
  "python3 -c 'import json,sys,glob; ev=[e[\"name\"] for f in glob.glob(sys.argv[1]+\"/timeline/*.json\") for e in json.load(open(f)).get(\"traceEvents\",[]) if e.get(\"ph\")==\"X\"]; sys.exit(0 if sorted(ev)==[\"good\",\"good_op\"] else 1)' '$nums'"

# ---------------------------------------------------------------------------------------------
# Limits: gzip bombs and oversized rows end with "over the limit", never with memory exhausted.
# (Peak RSS is measured by bench/hostile_memory.sh, not asserted here.)
lim="$tmp/limits"
mkdir -p "$lim/space" "$lim/event" "$lim/events" "$lim/csv"
python3 - "$lim" <<'PY'
import gzip, sys
d = sys.argv[1]
mib = b" " * (1 << 20)
with gzip.open(d + "/space/bomb.json.gz", "wb", 9) as f:   # 128 MiB of spaces in ~130 KB
    f.write(b'{"traceEvents":[')
    for _ in range(128): f.write(mib)
    f.write(b"]}")
with gzip.open(d + "/event/bomb.json.gz", "wb", 9) as f:   # one 3 MiB event
    f.write(b'{"traceEvents":[{"ph":"X","name":"' + b"a" * (3 << 20) + b'","ts":1,"dur":1}]}')
ev = b'{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":1,"ts":1,"dur":1},'
with gzip.open(d + "/events/bomb.json.gz", "wb", 9) as f:  # 1.1 M tiny events, ~75 MiB
    f.write(b'{"traceEvents":[')
    block = ev * 10000
    for _ in range(110): f.write(block)
    f.write(b'{"ph":"X","name":"k","pid":1,"tid":1,"ts":1,"dur":1}]}')
with open(d + "/csv/kernel_details.csv", "wb") as f:        # an unterminated quote, then 3 MiB
    f.write(b'Name,Type,Start Time(us),Duration(us)\nk,T,1,2\n"open,T,3,4\n' + b"x" * (3 << 20) + b"\n")
PY
$T "$PORTKIT" prof import -dir "$lim/space" >"$lim/space.out" 2>&1
check "prof import of a gzip bomb (128 MiB of spaces): exit 2" "[ $? = 2 ]"
check "  says it is over the limit and names the flag" "grep -q 'bomb.json.gz: over the limit: .* (over 100 times; a gzip bomb?); not imported. --max-expansion raises the limit' '$lim/space.out'"
# 128 MiB streamed byte by byte: a few seconds, over a minute under ASan; the hang check is 300 s.
timeout 300 "$PORTKIT" prof import -dir "$lim/space" --max-expansion 0 >"$lim/space0.out" 2>&1
check "  --max-expansion 0 streams it (exit 0, no event stored)" "[ $? = 0 ] && grep -Eq 'bomb.json.gz +\\| +kineto +\\| +0 ' '$lim/space0.out'"
$T "$PORTKIT" prof import -dir "$lim/events" >"$lim/events.out" 2>&1
check "prof import of 1.1 M events in a gzip bomb: exit 2, over the limit" "[ $? = 2 ] && grep -q 'over the limit' '$lim/events.out'"
check "  nothing of it is stored" "! grep -Eq 'bomb.json.gz +\\| +kineto +\\| +[1-9]' '$lim/events.out'"
$T "$PORTKIT" prof import -dir "$lim/event" --max-object-mb 1 >"$lim/event.out" 2>&1
check "prof import of a 3 MiB event with --max-object-mb 1: exit 2" "[ $? = 2 ]"
check "  names the limit and the flag" "grep -q 'over the limit: an event or member larger than 1 MiB at byte 16; not imported. --max-object-mb raises the limit' '$lim/event.out'"
$T "$PORTKIT" prof import -dir "$lim/event" >"$lim/event64.out" 2>&1
check "  under the default 64 MiB it is imported (exit 0)" "[ $? = 0 ]"
$T "$PORTKIT" prof import -dir "$lim/csv" --max-object-mb 1 >"$lim/csv.out" 2>&1
check "kernel_details.csv with an unterminated quote over the row cap: exit 2, message" \
  "[ $? = 2 ] && grep -q 'kernel_details.csv:3: a record longer than 1 MiB (an unterminated quote?); not read further' '$lim/csv.out'"

# Event count and store growth: explicit caps that flags set (docs/safety.md, Limits).
mkdir -p "$lim/many"
python3 -c "
import sys
ev = '{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k%d\",\"pid\":1,\"tid\":1,\"ts\":%d,\"dur\":1}'
sys.stdout.write('{\"traceEvents\":[' + ','.join(ev % (i % 97, i) for i in range(100000)) + ']}')
" >"$lim/many/trace.json"
$T "$PORTKIT" prof import -dir "$lim/many" --max-events 50000 >"$lim/many_events.out" 2>&1
check "prof import of 100k events with --max-events 50000: exit 2, names the limit and the flag" \
  "[ $? = 2 ] && grep -q 'over the limit: more than 50000 events in one trace; not imported. --max-events raises the limit' '$lim/many_events.out'"
check "  nothing of it is stored" "! grep -Eq 'trace.json +\\| +kineto +\\| +[1-9]' '$lim/many_events.out'"
$T "$PORTKIT" prof import -dir "$lim/many" --max-store-growth-mb 1 >"$lim/many_growth.out" 2>&1
check "prof import growing the store past --max-store-growth-mb 1: exit 2, names the limit and the flag" \
  "[ $? = 2 ] && grep -q 'over the limit: one trace grew the store by more than 1 MiB (.* events); not imported. --max-store-growth-mb raises the limit' '$lim/many_growth.out'"
$T "$PORTKIT" prof import -dir "$lim/many" >"$lim/many_ok.out" 2>&1
check "  under the default caps all 100000 events are stored (exit 0)" \
  "[ $? = 0 ] && grep -Eq 'trace.json +\\| +kineto +\\| +100000 ' '$lim/many_ok.out'"

# convert goes on after an unreadable tensor file, names it, and exits non-zero.
cvd="$tmp/convert_on"
cp -r "$F/ref" "$cvd" && head -c 100 /dev/urandom >"$cvd/op_000001.safetensors"
$T "$PORTKIT" convert -d "$cvd" -out "$tmp/convert_on_out" >"$tmp/convert_on.out" 2>&1
check "convert with one corrupt tensor file exits 2" "[ $? = 2 ]"
check "  names the file and counts it" "grep -q 'op_000001.safetensors: header length' '$tmp/convert_on.out' && grep -q '1 of 7 input files could not be read' '$tmp/convert_on.out'"
check "  and converts the other files" "[ -f '$tmp/convert_on_out/0_aten__mm_forward.output.0.npy' ] && [ -f '$tmp/convert_on_out/6_aten__masked_fill_forward.output.0.npy' ]"
check "  leaves no temporary file" "[ -z \"\$(find '$tmp/convert_on_out' -name '*.tmp.*')\" ]"
deadpid=$(sh -c 'echo $$')
echo half >"$tmp/convert_on_out/0_aten__mm_forward.input.0.npy.tmp.$deadpid"
$T "$PORTKIT" convert -d "$F/ref" -out "$tmp/convert_on_out" >"$tmp/convert_again.out" 2>&1
check "convert removes a half-written file a killed earlier run left (and says so)" \
  "[ ! -e '$tmp/convert_on_out/0_aten__mm_forward.input.0.npy.tmp.$deadpid' ] && grep -q 'left by an earlier run that was killed' '$tmp/convert_again.out'"

# ---------------------------------------------------------------------------------------------
# Crash markers: a killed prof import leaves its marker; readers say the profile is incomplete.
ci="$tmp/crash_import"
mkdir -p "$ci"
cp "$trace" "$ci/a_first.json.gz"
python3 - "$ci/b_big_kernel_details.csv" "$ci/c_last.json" <<'PY'
import sys
rows = open("tests/data/traces/ascend/kernel_details.csv", "rb").read().split(b"\n")
with open(sys.argv[1], "wb") as f:   # about 60 MB: several seconds to import
    f.write(rows[0] + b"\n")
    body = b"\n".join(r for r in rows[1:] if r) + b"\n"
    for _ in range(60 * (1 << 20) // len(body)): f.write(body)
open(sys.argv[2], "w").write('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1, "ts": 1, "dur": 2}]}')
PY
"$PORTKIT" prof import -dir "$ci" >"$ci/import1.out" 2>&1 &
ipid=$!
# Wait until the first trace is in and the big one is under way, then kill -9.
for _ in $(seq 1 200); do
  m="$ci/.portkit-import.$ipid"
  if [ -f "$m" ] && ! grep -q a_first "$m"; then break; fi
  sleep 0.05
done
kill -9 $ipid; wait $ipid 2>/dev/null
check "a killed prof import leaves its marker naming what was never imported" \
  "[ -f '$ci/.portkit-import.$ipid' ] && grep -q b_big_kernel_details.csv '$ci/.portkit-import.$ipid' && grep -q c_last.json '$ci/.portkit-import.$ipid'"
$T "$PORTKIT" prof export summary -dir "$ci" >"$ci/summary.out" 2>&1
check "  prof export summary after it still works (exit 0)" "[ $? = 0 ]"
check "  and warns that the profile is incomplete, naming the missing traces" \
  "grep -q 'did not finish (killed?); the profile is incomplete; not imported: b_big_kernel_details.csv, c_last.json' '$ci/summary.out'"
$T "$PORTKIT" prof analyse -dir "$ci" >"$ci/analyse.out" 2>&1
check "  prof analyse warns too" "grep -q 'the profile is incomplete' '$ci/analyse.out'"
$T "$PORTKIT" prof import -dir "$ci" >"$ci/import2.out" 2>&1
check "importing again completes (exit 0) and removes the stale marker" \
  "[ $? = 0 ] && [ -z \"\$(ls -A '$ci' | grep '^.portkit-import')\" ]"
$T "$PORTKIT" prof export summary -dir "$ci" >"$ci/summary2.out" 2>&1
check "  then no reader warns" "[ $? = 0 ] && ! grep -q 'incomplete' '$ci/summary2.out'"

# Report sets: compare's files appear with their completion marker, written last; a kill between
# the renames (strace fault injection) leaves no marker, and the next run removes the leftovers.
rs="$tmp/report_set"
$T "$PORTKIT" compare "$F/ref" "$F/tgt" -o "$rs" -j 1 >/dev/null 2>&1
check "compare writes its completion marker listing the three reports" \
  "[ \"\$(cut -d' ' -f1 '$rs/.compare.complete' | tr '\n' ' ')\" = 'compare_result.csv compare_result.json compare_report.html ' ]"
if command -v strace >/dev/null && strace -f -o /dev/null -e trace=getpid -e inject=getpid:retval=1 true 2>/dev/null; then
  (strace -f -o /dev/null -e trace=rename,renameat,renameat2 -e inject=rename,renameat,renameat2:signal=KILL:when=2 \
    "$PORTKIT" compare "$F/ref" "$F/tgt" -o "$rs" -j 1) >/dev/null 2>&1
  check "compare killed at its second rename leaves no completion marker (the set is incomplete)" \
    "[ ! -e '$rs/.compare.complete' ] && [ -n \"\$(ls -A '$rs' | grep '\\.tmp\\.')\" ]"
  $T "$PORTKIT" compare "$F/ref" "$F/tgt" -o "$rs" -j 1 >/dev/null 2>&1
  check "  the next run removes the killed run's temporaries and marks the set complete" \
    "[ -z \"\$(ls -A '$rs' | grep '\\.tmp\\.')\" ] && [ -f '$rs/.compare.complete' ]"
else
  echo "skip compare kill-at-rename cases: strace with fault injection is not available here"
fi

# Crash markers of dumps: a dump without its end marker, or cut after it was written, is reported.
cd_="$tmp/cut_dump"
cp -r "$F/ref" "$cd_" && rm "$cd_/dump_complete.json"
$T "$PORTKIT" compare "$cd_" "$F/tgt" -o "$tmp/cut_cmp" -j 1 >"$tmp/cut_cmp.out" 2>&1
check "compare of a dump without its end marker warns that it may be truncated" \
  "grep -q 'cut_dump: no end-of-dump marker (dump_complete.json): the run that wrote it did not finish (killed or crashed?); it may be truncated' '$tmp/cut_cmp.out'"
$T "$PORTKIT" overflow "$cd_" >"$tmp/cut_ovf.out" 2>&1
check "overflow of it warns too" "grep -q 'no end-of-dump marker' '$tmp/cut_ovf.out'"
cp -r "$F/ref" "$tmp/cut_dump2" && head -5 "$F/ref/manifest.jsonl" >"$tmp/cut_dump2/manifest.jsonl"
$T "$PORTKIT" compare "$tmp/cut_dump2" "$F/tgt" -o "$tmp/cut_cmp2" -j 1 >"$tmp/cut_cmp2.out" 2>&1
check "compare of a manifest shorter than its end marker says: truncated, 7 vs 5" \
  "grep -q 'truncated: its end-of-dump marker counts 7 operators, the manifest holds 5' '$tmp/cut_cmp2.out'"
$T "$PORTKIT" compare "$F/ref" "$F/tgt" -o "$tmp/whole_cmp" -j 1 >"$tmp/whole_cmp.out" 2>&1
check "compare of complete dumps has no such warning" "! grep -q 'end-of-dump marker' '$tmp/whole_cmp.out'"
$T "$PORTKIT" extract -i "$F/ref" -o "$tmp/ex_end" -s 0 >/dev/null 2>&1
check "extract of a complete dump writes the end marker of the new one" "grep -q '\"records\": 1' '$tmp/ex_end/dump_complete.json'"

# ---------------------------------------------------------------------------------------------
# Free space: what a copy writes (apparent sizes) is compared with the free space first; a sparse
# file is never written out in full silently. PORTKIT_TEST_FREE_BYTES fakes the free space (a test
# hook, docs/safety.md): no small file system is needed.
sp="$tmp/sparse"
mkdir -p "$sp/p"
printf 'import torch\nx = torch.randn(3).cuda()\nfor b in loader:\n    pass\n' >"$sp/p/train.py"
truncate -s 2G "$sp/p/huge.py"
PORTKIT_TEST_FREE_BYTES=104857600 $T "$PORTKIT" migrate -i "$sp/p" -o "$sp/m" >"$sp/m.out" 2>&1
check "migrate of a project with a 2 GB sparse .py and 100 MB free is refused (exit 2)" "[ $? = 2 ]"
check "  the message names what the copy writes and the free space, both in bytes" \
  "grep -q 'not enough free space: the migrated copy writes 2147.5 MB (2147483[0-9]* bytes) into .*p_msft, which has 104.9 MB (104857600 bytes) free' '$sp/m.out'"
check "  and warns that huge.py is sparse" "grep -q 'huge.py: a sparse file: 2147.5 MB long' '$sp/m.out'"
check "  and nothing was copied" "[ ! -e '$sp/m/p_msft/huge.py' ] && [ ! -e '$sp/m/p_msft/train.py' ]"
PORTKIT_TEST_FREE_BYTES=104857600 $T "$PORTKIT" analyse -m dynamic_shape -i "$sp/p" -o "$sp/d" >"$sp/d.out" 2>&1
check "the dynamic-shape copy of it is refused too (exit 2), naming both numbers" \
  "[ $? = 2 ] && grep -q 'not enough free space: the instrumented copy writes 2147.5 MB .* which has 104.9 MB (104857600 bytes) free' '$sp/d.out' && [ ! -e '$sp/d/p_analysis/huge.py' ]"
rm "$sp/p/huge.py"
PORTKIT_TEST_FREE_BYTES=104857600 $T "$PORTKIT" migrate -i "$sp/p" -o "$sp/m" >"$sp/m2.out" 2>&1
check "a project that fits is copied (exit 0)" "[ $? = 0 ] && [ -f '$sp/m/p_msft/train.py' ]"

# ---------------------------------------------------------------------------------------------
# Unreadable input is an error, not a verdict: compare with every target tensor file replaced by
# random bytes exits non-zero and says why on the console.
rb="$tmp/random_tgt"
cp -r "$F/tgt" "$rb"
for f in "$rb"/*.safetensors; do head -c "$(stat -c %s "$f")" /dev/urandom >"$f"; done
$T "$PORTKIT" compare "$F/ref" "$rb" -o "$tmp/random_cmp" -j 1 >"$tmp/random_cmp.out" 2>&1
check "compare of random-byte tensor files exits 2, not a pass" "[ $? = 2 ] && ! grep -q 'No diverging operator output' '$tmp/random_cmp.out'"
check "  and names an unreadable file on the console" "grep -q 'random_tgt/op_0000[0-9][0-9].safetensors' '$tmp/random_cmp.out'"

# ---------------------------------------------------------------------------------------------
# Concurrency: two prof import runs into one store at once both succeed, and the store holds what
# one import alone gives (no stale string ids, no transaction left open).
cc="$tmp/concurrent"
mkdir -p "$cc/p" "$cc/alone"
i=0
for t in tests/data/traces/kineto/*.json.gz; do
  i=$((i + 1)); cp "$t" "$cc/p/t$i.json.gz"; cp "$t" "$cc/alone/t$i.json.gz"
  [ $i -ge 3 ] && break
done
$T "$PORTKIT" prof import -dir "$cc/p" >"$cc/a.out" 2>&1 &
pa=$!
$T "$PORTKIT" prof import -dir "$cc/p" >"$cc/b.out" 2>&1 &
pb=$!
wait $pa; ra=$?
wait $pb; rb_=$?
check "two concurrent prof import into one store both exit 0" "[ $ra = 0 ] && [ $rb_ = 0 ]"
$T "$PORTKIT" prof import -dir "$cc/alone" >/dev/null 2>&1
$T "$PORTKIT" prof export summary -dir "$cc/p" >/dev/null 2>&1
$T "$PORTKIT" prof export summary -dir "$cc/alone" >/dev/null 2>&1
check "  the store then gives the same summary as one import alone" \
  "[ -n \"\$(ls '$cc/p/summary')\" ] && diff -r '$cc/p/summary' '$cc/alone/summary' >/dev/null"
check "  and no import marker is left behind" "[ -z \"\$(ls -A '$cc/p' | grep '^.portkit-import')\" ]"

echo "hostile input: $pass passed, $fail failed"
[ "$fail" = 0 ]
