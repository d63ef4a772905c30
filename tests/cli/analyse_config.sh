#!/usr/bin/env bash
# analyse's configuration file: [tool.portkit] in the analysed project's pyproject.toml (or
# --config FILE), flags on the command line winning over it, --exclude, unknown keys warned about
# with file, line and key, and a malformed file refused with its file and line.
source "$(dirname "$0")/harness.sh"

# A project with a CUDA call in the code, in its tests and in a vendored folder.
p="$tmp/proj"
mkdir -p "$p/tests" "$p/vendor/lib"
printf 'import torch\ntorch.cuda.synchronize()\n' >"$p/train.py"
printf 'import torch\ntorch.cuda.synchronize()\n' >"$p/tests/test_train.py"
printf 'import torch\ntorch.cuda.synchronize()\n' >"$p/vendor/lib/ext.py"
printf 'import torch\ntorch.cuda.synchronize()\n' >"$p/gen_pb2.py"
files() {  # the .py files report.json lists findings for, sorted, one line
  python3 -c 'import json, sys; print(" ".join(sorted({f["file"] for f in json.load(open(sys.argv[1]))["findings"] if f["file"].endswith(".py")})))' "$1"
}

"$PORTKIT" analyse -i "$p" -o "$tmp/none" --format json >/dev/null 2>&1
check "without a configuration every file is analysed" \
  "[ \"\$(files '$tmp/none/proj_analysis/report.json')\" = 'proj/gen_pb2.py proj/tests/test_train.py proj/train.py proj/vendor/lib/ext.py' ]"

"$PORTKIT" analyse -i "$p" -o "$tmp/ex" --format json --exclude tests --exclude 'vendor/*' --exclude '*_pb2.py' >/dev/null 2>"$tmp/ex.err"; rc=$?
check "--exclude (repeatable): a folder, a folder glob and a file-name glob" \
  "[ $rc = 0 ] && [ \"\$(files '$tmp/ex/proj_analysis/report.json')\" = 'proj/train.py' ] && grep -q '3 file(s) left out by --exclude.' '$tmp/ex.err'"

cat >"$p/pyproject.toml" <<'TOML'
[project]
name = "proj"

[tool.portkit]
exclude = ["tests", "vendor"]
format = ["json", "sarif"]
fail-on = "cuda"
TOML
"$PORTKIT" analyse -i "$p" -o "$tmp/cfg" >/dev/null 2>"$tmp/cfg.err"; rc=$?
check "pyproject.toml's [tool.portkit] is read: exclude, format, fail-on" \
  "[ $rc = 1 ] && [ \"\$(files '$tmp/cfg/proj_analysis/report.json')\" = 'proj/gen_pb2.py proj/train.py' ] && [ -f '$tmp/cfg/proj_analysis/report.sarif' ] && [ ! -e '$tmp/cfg/proj_analysis/unsupported_api.csv' ] && grep -q 'findings gate: 2 findings of --fail-on cuda' '$tmp/cfg.err'"
"$PORTKIT" analyse -i "$p" -o "$tmp/cli" --exclude '*_pb2.py' --format csv --fail-on unsupported >/dev/null 2>&1; rc=$?
check "flags win over the file: --exclude replaces its exclude, --format and --fail-on its own" \
  "[ $rc = 0 ] && [ -f '$tmp/cli/proj_analysis/cuda_op_list.csv' ] && [ ! -e '$tmp/cli/proj_analysis/report.sarif' ] && ! grep -q gen_pb2 '$tmp/cli/proj_analysis/cuda_op_list.csv' && grep -q 'proj/tests/test_train.py' '$tmp/cli/proj_analysis/cuda_op_list.csv'"
"$PORTKIT" analyse -i "$p" -o "$tmp/nocfg" --no-config --format json >/dev/null 2>&1; rc=$?
check "--no-config ignores the file" "[ $rc = 0 ] && [ \"\$(files '$tmp/nocfg/proj_analysis/report.json')\" = 'proj/gen_pb2.py proj/tests/test_train.py proj/train.py proj/vendor/lib/ext.py' ]"

# select / ignore from the file, and the command line's --select over it.
cat >"$p/pyproject.toml" <<'TOML'
[tool.portkit]
ignore = ["cuda_specific"]
exclude = ["tests", "vendor", "*_pb2.py"]
TOML
"$PORTKIT" analyse -i "$p" -o "$tmp/ign" --format json >/dev/null 2>&1; rc=$?
check "ignore from the file drops the rule's findings" "[ $rc = 0 ] && [ -z \"\$(files '$tmp/ign/proj_analysis/report.json')\" ]"
"$PORTKIT" analyse -i "$p" -o "$tmp/ign2" --format json --ignore fp64_usage >/dev/null 2>&1; rc=$?
check "--ignore on the command line replaces the file's ignore" "[ $rc = 0 ] && [ \"\$(files '$tmp/ign2/proj_analysis/report.json')\" = 'proj/train.py' ]"

# Unknown keys: warned with file, line and column, the run goes on.
cat >"$p/pyproject.toml" <<'TOML'
[tool.portkit]
exclude = ["tests", "vendor", "*_pb2.py"]
line-length = 100
selct = ["cuda_specific"]
TOML
"$PORTKIT" analyse -i "$p" -o "$tmp/unk" --format json >/dev/null 2>"$tmp/unk.err"; rc=$?
check "unknown keys are warned about with file:line:col and key" \
  "[ $rc = 0 ] && grep -qF \"$p/pyproject.toml:3:15: unknown key 'tool.portkit.line-length', ignored (known keys: select, ignore, exclude, target, version, mode, format, fail-on, env-path, max-file-mb)\" '$tmp/unk.err' && grep -qF \"$p/pyproject.toml:4:9: unknown key 'tool.portkit.selct'\" '$tmp/unk.err'"

# Bad values and malformed files: exit 2 naming the file and the line, nothing written.
printf '[tool.portkit]\nexclude = ["tests"\nformat = "json"\n' >"$p/pyproject.toml"
"$PORTKIT" analyse -i "$p" -o "$tmp/bad1" >/dev/null 2>"$tmp/bad1.err"; rc=$?
check "malformed TOML: exit 2, file:line:col: not valid TOML" \
  "[ $rc = 2 ] && grep -q \"^.*\\[ERROR\\] *$p/pyproject.toml:3:1: not valid TOML: \" '$tmp/bad1.err' && [ ! -e '$tmp/bad1' ]"
printf '[tool.portkit]\n\nformat = "xml"\n' >"$p/pyproject.toml"
"$PORTKIT" analyse -i "$p" -o "$tmp/bad2" >/dev/null 2>"$tmp/bad2.err"; rc=$?
check "an unknown format in the file: exit 2 naming file, line and key" \
  "[ $rc = 2 ] && grep -qF \"$p/pyproject.toml:3:10: tool.portkit.format: unknown format 'xml'; use csv, json, sarif or a comma list\" '$tmp/bad2.err'"
printf '[tool.portkit]\nselect = ["no_such_rule"]\n' >"$p/pyproject.toml"
"$PORTKIT" analyse -i "$p" -o "$tmp/bad3" >/dev/null 2>"$tmp/bad3.err"; rc=$?
check "an unknown rule in the file: exit 2 naming file, line and key" \
  "[ $rc = 2 ] && grep -qF \"$p/pyproject.toml:2:10: tool.portkit.select: unknown rule 'no_such_rule'\" '$tmp/bad3.err'"
printf '[tool.portkit]\nexclude = "tests"\nmax-file-mb = "big"\n' >"$p/pyproject.toml"
"$PORTKIT" analyse -i "$p" -o "$tmp/bad4" >/dev/null 2>"$tmp/bad4.err"; rc=$?
check "a value of the wrong type: exit 2 naming file, line and key" \
  "[ $rc = 2 ] && grep -qF \"$p/pyproject.toml:3:15: tool.portkit.max-file-mb: expected a whole number of MiB from 1 to 1048576\" '$tmp/bad4.err'"
printf '[tool]\nportkit = 3\n' >"$p/pyproject.toml"
"$PORTKIT" analyse -i "$p" -o "$tmp/bad5" >/dev/null 2>"$tmp/bad5.err"; rc=$?
check "tool.portkit that is not a table: exit 2" "[ $rc = 2 ] && grep -qF \"$p/pyproject.toml:2:11: tool.portkit: expected a table ([tool.portkit])\" '$tmp/bad5.err'"

# --config FILE: another file, paths in it relative to its folder; a missing one is an error.
rm -f "$p/pyproject.toml"
mkdir -p "$tmp/conf"
printf '[tool.portkit]\nexclude = ["tests", "vendor", "*_pb2.py"]\nformat = "json"\n' >"$tmp/conf/portkit.toml"
"$PORTKIT" analyse -i "$p" -o "$tmp/cf" --config "$tmp/conf/portkit.toml" >/dev/null 2>&1; rc=$?
check "--config FILE is read instead" "[ $rc = 0 ] && [ \"\$(files '$tmp/cf/proj_analysis/report.json')\" = 'proj/train.py' ]"
"$PORTKIT" analyse -i "$p" -o "$tmp/cf2" --config "$tmp/conf/missing.toml" >/dev/null 2>"$tmp/cf2.err"; rc=$?
check "a missing --config: exit 2 naming it" "[ $rc = 2 ] && grep -qF -- \"--config $tmp/conf/missing.toml does not exist\" '$tmp/cf2.err'"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
