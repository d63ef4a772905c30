#!/usr/bin/env bash
# prof analyse on a labelled set of traces recorded from small models (tests/data/traces/advisor,
# made by tests/data/traces/scripts/record_labelled.py with torch 2.8, record_shapes, 4 steps):
# every true finding of dynamic_shapes and non_native_ops is made and no false one. The static
# networks call one operator with many shapes at different layers (the old per-name rule's false
# alarm); the sequence model is fed batches of different lengths (genuinely dynamic).
source "$(dirname "$0")/harness.sh"
a=tests/data/traces/advisor
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3

# trace: the expected findings of the two rules, sorted, space-separated (rule or rule:op).
declare -A expect=(
  [static_resnet_relu]=""
  [static_seq_relu]=""
  [static_resnet_silu]="non_native_ops:SiLU"
  [static_resnet_gelu]="non_native_ops:GELU"
  [static_resnet_hardswish]="non_native_ops:Hardswish"
  [static_resnet_mish]="non_native_ops:Mish"
  [dynamic_seq_len_relu]="dynamic_shapes"
)
findings() {  # analyse JSON → the findings of the two rules, as in `expect`
  $py -c '
import json, sys
out = []
for f in json.load(open(sys.argv[1]))["findings"]:
    if f["rule"] == "dynamic_shapes": out.append("dynamic_shapes")
    elif f["rule"] == "non_native_ops": out.append("non_native_ops:" + f["title"].split(" ")[0])
print(" ".join(sorted(out)))' "$1"
}
for name in "${!expect[@]}"; do
  mkdir -p "$tmp/$name"
  cp "$a/$name.json.gz" "$tmp/$name/"
  "$PORTKIT" prof import -dir "$tmp/$name" >/dev/null 2>&1
  "$PORTKIT" prof analyse -dir "$tmp/$name" --format json -o "$tmp/$name/out" >/dev/null 2>"$tmp/$name.err"
  got=$(findings "$tmp/$name/out/advisor.json")
  check "$name: findings [${expect[$name]}], got [$got]" "[ '$got' = '${expect[$name]}' ]"
done
check "the dynamic finding counts call sites and names the matrix multiply fed varying lengths" \
  "$py -c 'import json,sys; f=[x for x in json.load(open(sys.argv[1]))[\"findings\"] if x[\"rule\"]==\"dynamic_shapes\"][0]; assert \"call site(s)\" in f[\"title\"] and \"aten::mm (\" in f[\"evidence\"], f' '$tmp/dynamic_seq_len_relu/out/advisor.json'"
check "SiLU's advice is the target's replacement with its accuracy note" \
  "$py -c 'import json,sys; f=[x for x in json.load(open(sys.argv[1]))[\"findings\"] if x[\"rule\"]==\"non_native_ops\"][0]; assert \"torch_npu.contrib.module.SiLU\" in f[\"advice\"] and \"accuracy\" in f[\"advice\"], f' '$tmp/static_resnet_silu/out/advisor.json'"
# --target: the cpu target lists no non-native operator, so SiLU is no finding there.
"$PORTKIT" prof analyse -dir "$tmp/static_resnet_silu" --format json -o "$tmp/silu_cpu" --target cpu >/dev/null 2>&1
check "--target cpu: no non-native finding for SiLU" "[ \"\$(findings '$tmp/silu_cpu/advisor.json')\" = '' ]"
"$PORTKIT" prof analyse -dir "$tmp/static_resnet_silu" --target nosuch >/dev/null 2>"$tmp/err"
check "--target with an unknown name exits 2 and lists the targets" "[ $? = 2 ] && grep -q 'npu' '$tmp/err'"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
