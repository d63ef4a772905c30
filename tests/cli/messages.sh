#!/usr/bin/env bash
# The messages and help texts a new user meets first, matched to their exact text: the top-level
# help lists every command and mode, every command's --version prints the version, a mistyped
# subcommand is named with the valid ones, tune says what a job type needs, report.json stays
# valid JSON for a file name that is not UTF-8, and a bank on a full disk says the disk is full.
source "$(dirname "$0")/harness.sh"
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
version=$(head -1 python/portkit/VERSION)

"$PORTKIT" --help >"$tmp/help" 2>&1; rc=$?
check "--help exits 0" "[ $rc = 0 ]"
check "--help lists prof cluster" \
  "grep -qF '  prof       profiles: collect, import, export summary|timeline, analyse (advisor), diff, query (tables for notebooks), cluster (multi-rank)' '$tmp/help'"
check "--help lists tune's OPAT, SGAT and GDAT modes" \
  "grep -qF -- '--job-type=2 (OPAT): MatMul/Conv2D kernels of an operator list, compiled and measured;' '$tmp/help' &&
   grep -qF -- '--job-type=1 --framework=pytorch (SGAT): how each subgraph of a PyTorch model runs;' '$tmp/help' &&
   grep -qF -- '--job-type=4 (GDAT): DDP gradient buckets and communication of a PyTorch model;' '$tmp/help'"

for cmd in analyse migrate compare overflow convert extract prof tune "prof collect" "prof export" "tune bank"; do
  # shellcheck disable=SC2086
  out=$("$PORTKIT" $cmd --version 2>&1); rc=$?
  check "portkit $cmd --version prints the version" "[ $rc = 0 ] && [ \"\$out\" = 'portkit $version' ]"
done
# analyse's -v/--version VALUE is still the torch version of the analysed code.
mkdir -p "$tmp/proj"
printf 'import torch\ntorch.cuda.synchronize()\n' >"$tmp/proj/train.py"
"$PORTKIT" analyse -i "$tmp/proj" -o "$tmp/v1" --version 2.1.0 >"$tmp/v1.out" 2>&1; rc=$?
check "analyse --version 2.1.0 still names the torch version" "[ $rc = 0 ] && [ -f '$tmp/v1/proj_analysis/report.json' ]"

"$PORTKIT" prof nosuch >"$tmp/p" 2>&1; rc=$?
check "prof nosuch: exit 2, names the unknown subcommand and the valid ones" \
  "[ $rc = 2 ] && [ \"\$(cat '$tmp/p')\" = \"portkit prof: unknown subcommand 'nosuch'; use one of collect, import, export, analyse, diff, query, cluster (portkit prof --help)\" ]"
"$PORTKIT" prof export nosuch -dir x >"$tmp/pe" 2>&1; rc=$?
check "prof export nosuch: names the valid ones" \
  "[ $rc = 2 ] && [ \"\$(cat '$tmp/pe')\" = \"portkit prof export: unknown subcommand 'nosuch'; use one of summary, timeline (portkit prof export --help)\" ]"
"$PORTKIT" prof >"$tmp/p0" 2>&1; rc=$?
check "prof without a subcommand still says one is required" "[ $rc = 2 ] && grep -q 'A subcommand is required' '$tmp/p0'"

"$PORTKIT" tune --job-type=1 >"$tmp/t1" 2>&1; rc=$?
check "tune --job-type=1 without --framework says what is missing" \
  "[ $rc = 2 ] && grep -qF -- '--job-type=1 (subgraph tuning, SGAT) tunes a PyTorch model: give --framework=pytorch with --model=pkg.module:make_model and --input SHAPE (portkit tune --framework=pytorch --help)' '$tmp/t1' && ! grep -q 'not supported' '$tmp/t1'"
"$PORTKIT" tune --job_type 1 --model x.json >"$tmp/t2" 2>&1; rc=$?
check "tune --job_type 1 (the original spelling) says the same" \
  "[ $rc = 2 ] && grep -qF -- '--job-type=1 (subgraph tuning, SGAT) tunes a PyTorch model' '$tmp/t2'"

# SGAT's lower-precision mode: the limits belong to bf16/int8-dynamic; an unknown precision names the choices.
"$PORTKIT" tune --framework=pytorch --model=m:make --input 2x3 --output "$tmp/tp" --max-rel-err 0.1 >"$tmp/t3" 2>&1; rc=$?
check "tune --max-rel-err without --precision says it belongs to bf16/int8-dynamic" \
  "[ $rc = 2 ] && grep -qF -- '--max-rel-err and --min-cosine apply to --precision bf16 or int8-dynamic only' '$tmp/t3'"
"$PORTKIT" tune --framework=pytorch --model=m:make --input 2x3 --output "$tmp/tp" --precision fp16 >"$tmp/t4" 2>&1; rc=$?
check "tune --precision fp16 names the choices" "[ $rc = 2 ] && grep -q 'fp32' '$tmp/t4' && grep -q 'int8-dynamic' '$tmp/t4'"

# report.json for a project with a Latin-1 file name: valid UTF-8 JSON, the name's bytes
# recoverable (each byte outside UTF-8 as \udcXX, Python's surrogateescape).
mkdir -p "$tmp/l1"
printf 'import torch\ntorch.cuda.synchronize()\n' >"$tmp/l1/caf$(printf '\xe9').py"
"$PORTKIT" analyse -i "$tmp/l1" -o "$tmp/l1out" --format json,sarif >/dev/null 2>&1; rc=$?
check "a non-UTF-8 file name: report.json is valid JSON and the raw name is recoverable" "[ $rc = 0 ] && $py -c '
import json, os, sys
raw = open(sys.argv[1], \"rb\").read()
raw.decode(\"utf-8\")  # strict: valid UTF-8
assert b\"caf\\\\udce9.py\" in raw, raw[:400]
files = [f[\"file\"] for f in json.loads(raw)[\"findings\"] if f[\"file\"].endswith(\".py\")]
assert os.fsencode(files[0]) == b\"l1/caf\\xe9.py\", files
assert os.path.exists(os.path.join(sys.argv[2], os.path.basename(files[0])))
' '$tmp/l1out/l1_analysis/report.json' '$tmp/l1'"
check "and report.sarif too" "$py -c 'import json, sys; json.loads(open(sys.argv[1], \"rb\").read().decode(\"utf-8\"))' '$tmp/l1out/l1_analysis/report.sarif'"

# A tune bank written on a full disk says the disk is full (SQLite reports the write it cannot do
# as an I/O error): a 1 MiB tmpfs in a mount namespace of our own, filled; skipped without one.
if unshare -m true 2>/dev/null; then
  mnt="$tmp/full"
  mkdir -p "$mnt"
  abs_portkit=$(cd "$(dirname "$PORTKIT")" && pwd)/$(basename "$PORTKIT")
  unshare -m bash -c "
    mount -t tmpfs -o size=1m portkit-full '$mnt' || exit 77
    mkdir -p '$mnt/bank'
    # 8 KiB left: room for the database's first page, none for its WAL index (an I/O error to SQLite).
    head -c \$(( \$(df -k --output=avail '$mnt' | tail -1) * 1024 - 8192 )) /dev/zero >'$mnt/filler'
    '$abs_portkit' tune bank import tests/data/tune/bank_entries.json --tune-bank '$mnt/bank' >'$tmp/full1.out' 2>&1; echo \$? >'$tmp/full1.rc'
    '$abs_portkit' tune bank list --tune-bank '$mnt/bank' >'$tmp/full2.out' 2>&1; echo \$? >'$tmp/full2.rc'
  "
  if [ $? = 77 ]; then
    echo "skip full disk (no tmpfs mount here)"
  else
    check "tune bank import onto a full disk: exit 2, says the disk is full" \
      "[ \"\$(cat '$tmp/full1.rc')\" = 2 ] && grep -qF 'tune_bank.db: statement failed: the disk is full (no room for the database or its journal; free some space and run again)' '$tmp/full1.out' && ! grep -q 'damaged\|input/output error' '$tmp/full1.out'"
    check "  and reading the bank left there says the same, not 'damaged'" \
      "[ \"\$(cat '$tmp/full2.rc')\" = 2 ] && grep -qF 'tune_bank.db: the disk is full (no room' '$tmp/full2.out' && ! grep -q 'damaged\|not a SQLite\|input/output error' '$tmp/full2.out'"
  fi
else
  echo "skip full disk (no mount namespace here)"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
