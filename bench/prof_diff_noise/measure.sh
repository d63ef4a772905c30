#!/usr/bin/env bash
# The false-alarm and detection measurement of docs/prof.md ("Noise-aware gate") on a folder
# recorded by record_resnet.py: every identical pair a_i/b_i and every slowed pair a_i/s<P>_i
# through `prof diff --fail-above 5` with each gate (significant, the default; interval; point, the
# rule without a noise model), then the same with three runs a side.
# usage: measure.sh PORTKIT NOISE_DIR [LIMIT]
#   prints one line per pair (change of the mean step, of the median step, of the step work time
#   with its 95 % interval, each gate's verdict), then the counts per set and gate.
set -uo pipefail
portkit=$1; dir=$2; limit=${3:-5}; out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for d in "$dir"/*/; do [ -e "$d/portkit.db" ] || "$portkit" prof import -dir "$d" >/dev/null 2>&1; done
cat >"$out/row.py" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
verdict = {"0": "pass", "3": "TRIP", "5": "inconcl"}
w, m = d["work_change"], d["step_change"]
print("%-9s mean %+8.2f%%  median %+8.2f%%  work %+7.2f%% [%+7.2f%%, %+7.2f%%]  significant %-7s interval %-7s point %s" % (
    sys.argv[2], d["step_change_percent"], m["percent"], w["percent"], w["low"], w["high"],
    *(verdict.get(rc, "rc" + rc) for rc in sys.argv[3:6])))
PY
row() {  # label base compare [more diff options: --base-run / --compare-run]
  local label=$1 base=$2 cmp=$3 rcs=()
  shift 3
  for gate in significant interval point; do
    "$portkit" prof diff "$base" "$cmp" "$@" --fail-above "$limit" --gate $gate --format json --force \
      -o "$out/$label-$gate" >/dev/null 2>&1
    rcs+=($?)
  done
  python3 "$out/row.py" "$out/$label-significant/diff.json" "$label" "${rcs[@]}" | tee -a "$out/rows"
}
num() { local p=${1##*/}; echo "${p##*_}"; }
for a in $(ls -d "$dir"/a_* | sort -t_ -k2 -n); do i=$(num "$a"); row "same$i" "$a" "$dir/b_$i"; done
for s in $(ls -d "$dir"/s*_* | sort -t_ -k2 -n); do
  n=${s##*/}; row "$n" "$dir/a_$(num "$s")" "$s"
done
# Three runs a side: a_3k..a_3k+2 against b_3k..b_3k+2 (identical) and s<P>_3k..s<P>_3k+2.
k=0
while [ -e "$dir/a_$((3 * k + 2))" ] && [ -e "$dir/b_$((3 * k + 2))" ]; do
  i=$((3 * k))
  more=(--base-run "$dir/a_$((i + 1))" --base-run "$dir/a_$((i + 2))")
  row "same3x$k" "$dir/a_$i" "$dir/b_$i" "${more[@]}" --compare-run "$dir/b_$((i + 1))" --compare-run "$dir/b_$((i + 2))"
  for s in "$dir"/s*_"$((i + 2))"; do
    [ -e "$s" ] || continue
    p=${s##*/}; p=${p%_*}
    row "${p}_3x$k" "$dir/a_$i" "$dir/${p}_$i" "${more[@]}" --compare-run "$dir/${p}_$((i + 1))" \
      --compare-run "$dir/${p}_$((i + 2))"
  done
  k=$((k + 1))
done
echo
python3 - "$out/rows" <<'PY'
import collections, re, sys
sets = collections.OrderedDict()
for line in open(sys.argv[1]):
    label = line.split()[0]
    name = re.sub(r"\d+$", "", label)
    v = re.findall(r"(significant|interval|point) (\S+)", line)
    s = sets.setdefault(name, collections.Counter())
    s["pairs"] += 1
    for gate, verdict in v:
        s[gate, verdict] += 1
for name, c in sets.items():
    print("%-9s %2d pairs  " % (name, c["pairs"]) + "  ".join(
        "%s: %d trip, %d inconcl" % (g, c[g, "TRIP"], c[g, "inconcl"]) for g in ("significant", "interval", "point")))
PY
