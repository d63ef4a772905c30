#!/usr/bin/env bash
# report.sarif fit for GitHub code scanning: valid against the SARIF 2.1.0 schema
# (tests/data/sarif/, validated with python3's jsonschema) and GitHub's stricter rules (every
# result has a location with a relative URI and a start line, one rule per ID with descriptions
# and help); UTF-16 columns on non-ASCII lines; non-UTF-8 file names; rule management
# (--explain, --select/--ignore, `# portkit: ignore[RULE]`).
source "$(dirname "$0")/harness.sh"

validate() {  # report.sarif -> checks schema and GitHub's rules; prints what is wrong
  python3 - "$1" tests/data/sarif/sarif-schema-2.1.0.json <<'PY'
import json, re, sys
import jsonschema
log = json.load(open(sys.argv[1], encoding="utf-8"))
schema = json.load(open(sys.argv[2], encoding="utf-8"))
errors = sorted(jsonschema.Draft4Validator(schema).iter_errors(log), key=lambda e: list(e.path))
for e in errors[:5]:
    print("schema:", list(e.path), e.message[:200])
problems = []
for run in log["runs"]:
    rules = run["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    if len(ids) != len(set(ids)):
        problems.append("duplicate rule ids")
    for r in rules:
        for key in ("shortDescription", "fullDescription", "help"):
            if not r.get(key, {}).get("text"):
                problems.append("rule %s has no %s" % (r["id"], key))
    if run.get("columnKind") != "utf16CodeUnits":
        problems.append("columnKind is not utf16CodeUnits")
    for i, res in enumerate(run["results"]):
        if res["ruleId"] not in ids or ids[res["ruleIndex"]] != res["ruleId"]:
            problems.append("result %d: rule %s not in rules at its index" % (i, res["ruleId"]))
        locs = res.get("locations") or []
        if not locs:
            problems.append("result %d has no location" % i)
            continue
        pl = locs[0].get("physicalLocation", {})
        uri = pl.get("artifactLocation", {}).get("uri", "")
        if not uri or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", uri) or uri.startswith("/"):
            problems.append("result %d: uri %r is not relative" % (i, uri))
        if re.search(r"[^A-Za-z0-9\-._~/%]", uri):
            problems.append("result %d: uri %r is not percent-encoded" % (i, uri))
        if pl.get("artifactLocation", {}).get("uriBaseId") not in run.get("originalUriBaseIds", {}):
            problems.append("result %d: uriBaseId not in originalUriBaseIds" % i)
        if pl.get("region", {}).get("startLine", 0) < 1:
            problems.append("result %d has no start line" % i)
for p in problems[:10]:
    print("github:", p)
sys.exit(1 if errors or problems else 0)
PY
}

# The demo project.
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/demo" -v 2.1.0 --format sarif,json >/dev/null 2>&1; rc=$?
sarif="$tmp/demo/cifar_cuda_analysis/report.sarif"
check "analyse of the demo exits 0" "[ $rc = 0 ]"
check "python3 has jsonschema (Debian python3-jsonschema, scripts/setup.sh)" "python3 -c 'import jsonschema'"
check "the demo's SARIF passes the 2.1.0 schema and GitHub's rules" "validate '$sarif'"
check "the demo's SARIF has a result for every finding with a file, the rest as notifications" "python3 -c '
import json, sys
s = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
run = s[\"runs\"][0]
with_file = [f for f in r[\"findings\"] if f[\"file\"] != \"NA\"]
notes = run[\"invocations\"][0].get(\"toolExecutionNotifications\", [])
assert len(run[\"results\"]) == len(with_file) > 0, (len(run[\"results\"]), len(with_file))
assert len(notes) == len(r[\"findings\"]) - len(with_file) > 0, len(notes)
assert not any(res[\"locations\"][0][\"physicalLocation\"][\"artifactLocation\"][\"uri\"].startswith(\"cifar_cuda/\") for res in run[\"results\"])
' '$sarif' '$tmp/demo/cifar_cuda_analysis/report.json'"

# Columns in UTF-16 code units on a line with Chinese text and an emoji; a non-UTF-8 file name.
mkdir -p "$tmp/uni"
printf 'import torch\n\n\ndef f():\n    print("\xe4\xb8\xad\xe6\x96\x87\xf0\x9f\x98\x80", torch.cuda.synchronize())\n' > "$tmp/uni/m.py"
printf 'import torch\n\n\ndef g():\n    torch.cuda.synchronize()\n' > "$tmp/uni/bad$(printf '\xff')name.py"
"$PORTKIT" analyse -i "$tmp/uni" -o "$tmp/uni_out" -v 2.1.0 --format sarif >/dev/null 2>&1; rc=$?
usarif="$tmp/uni_out/uni_analysis/report.sarif"
check "SARIF of non-ASCII code passes the schema and GitHub's rules" "[ $rc = 0 ] && validate '$usarif'"
check "columns count UTF-16 code units (中文 and an emoji before the call)" "python3 -c '
import json, sys
run = json.load(open(sys.argv[1]))[\"runs\"][0]
line = \"    print(\\\"\u4e2d\u6587\U0001F600\\\", torch.cuda.synchronize())\"
want = len(line[:line.index(\"torch.cuda\")].encode(\"utf-16-le\")) // 2 + 1
cols = [r[\"locations\"][0][\"physicalLocation\"][\"region\"].get(\"startColumn\") for r in run[\"results\"]
        if r[\"locations\"][0][\"physicalLocation\"][\"artifactLocation\"][\"uri\"] == \"m.py\" and r[\"ruleId\"] == \"cuda_specific\"]
assert want in cols, (want, cols)
' '$usarif'"
check "a non-UTF-8 file name is percent-encoded in the URI" "python3 -c '
import json, sys
run = json.load(open(sys.argv[1]))[\"runs\"][0]
uris = {r[\"locations\"][0][\"physicalLocation\"][\"artifactLocation\"][\"uri\"] for r in run[\"results\"]}
assert \"bad%FFname.py\" in uris, uris
' '$usarif'"

# Rule management.
mkdir -p "$tmp/sup"
cat > "$tmp/sup/m.py" <<'PY'
import torch


def f(x):
    torch.cuda.synchronize()  # portkit: ignore[cuda_specific]
    torch.cuda.synchronize()
    torch.cuda.synchronize()  # portkit: ignore
    torch.cuda.synchronize()  # portkit: ignore[api_support, unknown_receiver]
    return x
PY
"$PORTKIT" analyse -i "$tmp/sup" -o "$tmp/sup_out" -v 2.1.0 --format json >/dev/null 2>&1
check "# portkit: ignore[RULE] and # portkit: ignore suppress the findings of their line" "python3 -c '
import json, sys
lines = sorted(f[\"start_line\"] for f in json.load(open(sys.argv[1]))[\"findings\"] if f[\"rule\"] == \"cuda_specific\")
assert lines == [6, 8], lines
' '$tmp/sup_out/sup_analysis/report.json'"
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/ign" -v 2.1.0 --format json --ignore cuda_specific,unknown_receiver >/dev/null 2>&1
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/sel" -v 2.1.0 --format json --select api_support >/dev/null 2>&1
check "--ignore drops the rules' findings and --select keeps only its rules'" "python3 -c '
import json, sys
ign = {f[\"rule\"] for f in json.load(open(sys.argv[1]))[\"findings\"]}
sel = {f[\"rule\"] for f in json.load(open(sys.argv[2]))[\"findings\"]}
assert ign and not ign & {\"cuda_specific\", \"unknown_receiver\"}, ign
assert sel == {\"api_support\"}, sel
' '$tmp/ign/cifar_cuda_analysis/report.json' '$tmp/sel/cifar_cuda_analysis/report.json'"
"$PORTKIT" analyse -i examples/cifar_cuda -o "$tmp/bad" --ignore no_such_rule >/dev/null 2>"$tmp/bad.err"; rc=$?
check "an unknown rule in --ignore exits 2 before any file is written" "[ $rc = 2 ] && grep -q \"unknown rule 'no_such_rule'\" '$tmp/bad.err' && [ ! -e '$tmp/bad' ]"
"$PORTKIT" analyse --explain >"$tmp/list.txt" 2>&1; rc=$?
check "--explain lists the rules" "[ $rc = 0 ] && grep -q '^  api_support ' '$tmp/list.txt' && grep -q '^  cuda_specific ' '$tmp/list.txt'"
all=1
for rule in $(awk '/^  [a-z_]+ /{print $1}' "$tmp/list.txt"); do
  "$PORTKIT" analyse --explain "$rule" >"$tmp/one.txt" 2>&1 || all=0
  for section in 'What it finds:' 'Why it matters:' 'Example:' 'Use instead:'; do
    grep -q "^$section" "$tmp/one.txt" || { echo "  $rule: no '$section'"; all=0; }
  done
  grep -qi 'seed\|issue #' "$tmp/one.txt" && { echo "  $rule: internal wording"; all=0; }
done
check "--explain RULE prints every rule's doc, all four sections" "[ $all = 1 ] && [ \$(grep -c '^  [a-z_]* ' '$tmp/list.txt') -ge 15 ]"
"$PORTKIT" analyse --explain nosuch >/dev/null 2>"$tmp/ex.err"; rc=$?
check "--explain of an unknown rule exits 2" "[ $rc = 2 ] && grep -q \"unknown rule 'nosuch'\" '$tmp/ex.err'"
echo "sarif: $pass passed, $fail failed"
[ $fail = 0 ]
