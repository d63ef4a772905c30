#!/usr/bin/env bash
# compare / overflow / convert / extract from the command line: --format json output loads with
# python3 and says what the run found or wrote; --format picks the files; options are checked
# before anything is created.
source "$(dirname "$0")/harness.sh"
F=tests/fixtures/accuracy
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# compare: JSON only, nothing else in the output folder; the JSON names the first divergence.
"$PORTKIT" compare $F/ref $F/tgt -o "$tmp/cmp" --format json -j 1 >"$tmp/cmp.stdout" 2>"$tmp/cmp.stderr"
check "compare --format json exits 0" "[ $? = 0 ]"
check "compare --format json writes only compare_result.json" "[ \"\$(ls $tmp/cmp)\" = compare_result.json ]"
check "compare JSON loads: first divergence aten::tanh, 7 rows No" \
  "$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[\"first_divergence\"][\"name\"]==\"aten::tanh\" and r[\"first_divergence_basis\"]==\"inputs matched\" and r[\"verdicts\"][\"No\"]==7 and r[\"first_divergence_evidence\"] and r[\"shape_changes\"][0][\"name\"]==\"aten::view\", r' $tmp/cmp/compare_result.json"
check "compare prints the verdict table" "grep -q 'Accuracy Reached or Not' $tmp/cmp.stdout"
"$PORTKIT" compare $F/ref $F/tgt -o "$tmp/cmp2" --format csv,html >/dev/null 2>&1
check "compare --format csv,html writes those two" "[ \"\$(ls $tmp/cmp2 | tr '\n' ' ')\" = 'compare_report.html compare_result.csv ' ]"

# Options are checked before any work: nothing is created for a bad value.
"$PORTKIT" compare $F/ref $F/tgt -o "$tmp/never1" --match nope >/dev/null 2>&1
check "compare --match nope creates nothing" "[ ! -e $tmp/never1 ]"
"$PORTKIT" compare $F/ref $F/tgt -o "$tmp/never2" -j -3 >/dev/null 2>&1
check "compare -j -3 exits 2 and creates nothing" "[ $? = 2 ] && [ ! -e $tmp/never2 ]"
"$PORTKIT" compare $F/ref $F/tgt -o "$tmp/never3" --mapping "$tmp/missing.csv" >/dev/null 2>&1
check "compare with a missing mapping creates nothing" "[ ! -e $tmp/never3 ]"
"$PORTKIT" convert -d $F/ref -out "$tmp/never4" -t csv >/dev/null 2>&1
check "convert -t csv creates nothing" "[ ! -e $tmp/never4 ]"
"$PORTKIT" extract -i $F/ref -o "$tmp/never5" -s nosuchop >/dev/null 2>&1
check "extract of nothing exits 2 and creates nothing" "[ $? = 2 ] && [ ! -e $tmp/never5 ]"

# overflow: JSON on stdout and in a file; the first overflowing operator and why.
"$PORTKIT" overflow $F/overflow --format json >"$tmp/ov.json" 2>/dev/null
check "overflow --format json exits 0" "[ $? = 0 ]"
check "overflow JSON loads: first aten::mul beyond fp16, 2 operators" \
  "$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[\"first\"][\"name\"]==\"aten::mul\" and \"fp16\" in r[\"first\"][\"reason\"] and [o[\"index\"] for o in r[\"overflowing\"]]==[1,2] and r[\"operators\"]==3, r' $tmp/ov.json"
"$PORTKIT" overflow $F/overflow --format json -o "$tmp/ov2.json" >"$tmp/ov2.stdout" 2>/dev/null
check "overflow -o writes the file, nothing on stdout" "cmp -s $tmp/ov.json $tmp/ov2.json && [ ! -s $tmp/ov2.stdout ]"
"$PORTKIT" overflow $F/tgt --format json >"$tmp/ov3.json" 2>/dev/null
check "overflow JSON names the origin: tanh turns finite inputs into nan" \
  "$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[\"origin\"][\"name\"]==\"aten::tanh\" and r[\"origin_basis\"]==\"finite inputs\", r' $tmp/ov3.json"
"$PORTKIT" overflow $F/ref --format json >"$tmp/ov4.json" 2>/dev/null
check "overflow JSON: an attention mask is listed but is not the origin" \
  "$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[\"origin\"] is None and [o[\"name\"] for o in r[\"overflowing\"]]==[\"aten::masked_fill\"], r' $tmp/ov4.json"
"$PORTKIT" overflow $F/overflow >"$tmp/ov.txt" 2>/dev/null
check "overflow text marks the first" "grep -q '| first |   1   | aten::mul' $tmp/ov.txt"

# convert: JSON list of the files written, which exist.
"$PORTKIT" convert -d $F/ref -out "$tmp/npy" --format json >"$tmp/conv.json" 2>/dev/null
check "convert --format json exits 0" "[ $? = 0 ]"
check "convert JSON loads and lists the files written" \
  "$PY -c 'import json,sys,os; r=json.load(open(sys.argv[1])); assert len(r[\"written\"])==16 and r[\"failed\"]==[] and all(os.path.isfile(os.path.join(sys.argv[2], w[\"file\"])) for w in r[\"written\"]), r' $tmp/conv.json $tmp/npy"
"$PORTKIT" convert -d $F/corrupt_tensor -out "$tmp/npy2" --format json >"$tmp/conv2.json" 2>/dev/null
check "convert of a cut tensor file exits 2" "[ $? = 2 ]"
check "convert JSON lists the failure" \
  "$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[\"input_files_failed\"]==1 and r[\"failed\"][0][\"code\"]==\"parse\", r' $tmp/conv2.json"

# extract: JSON summary; an unknown name is reported and exits 2, the rest is extracted.
"$PORTKIT" extract -i $F/ref -o "$tmp/sub" -s tanh 0 --format json >"$tmp/ex.json" 2>/dev/null
check "extract --format json exits 0" "[ $? = 0 ]"
check "extract JSON loads: ops and files" \
  "$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[\"extracted\"]==[\"aten::mm.forward.0\",\"aten::tanh.forward.1\",\"aten::tanh_backward.backward.5\"] and \"manifest.jsonl\" in r[\"files\"] and r[\"missing\"]==[], r' $tmp/ex.json"
"$PORTKIT" extract -i $F/ref -o "$tmp/sub2" -s tanh nosuch --format json >"$tmp/ex2.json" 2>"$tmp/ex2.err"
check "extract with an unknown name exits 2" "[ $? = 2 ] && grep -q 'no operator matches nosuch' $tmp/ex2.err"
check "extract JSON lists the unknown name" \
  "$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[\"missing\"]==[\"nosuch\"] and len(r[\"extracted\"])==2, r' $tmp/ex2.json"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
