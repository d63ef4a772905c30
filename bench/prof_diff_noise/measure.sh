#!/usr/bin/env bash
# The false-alarm measurement of docs/prof.md ("Noise-aware gate") on a folder recorded by
# record_resnet.py: every identical pair a_i/b_i and every slowed pair a_i/s_i through
# `prof diff --fail-above 5` with the interval gate and with the old point rule (--gate point).
# usage: measure.sh PORTKIT NOISE_DIR   (prints one line per pair, then the trip counts)
set -uo pipefail
portkit=$1; dir=$2; out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for d in "$dir"/*/; do [ -e "$d/portkit.db" ] || "$portkit" prof import -dir "$d" >/dev/null 2>&1; done
cat >"$out/row.py" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["step_change"]
gate = lambda rc: "TRIP" if rc == "3" else "ok"
print("%-7s mean %+7.2f%%  median %+7.2f%% [%+7.2f%%, %+7.2f%%]  interval-gate %-4s  point-gate %s" % (
    sys.argv[2], d["step_change_percent"], c["percent"], c["low"], c["high"], gate(sys.argv[3]), gate(sys.argv[4])))
PY
row() {  # label base compare [more diff options: --base-run / --compare-run]
  local rc_i rc_p label=$1 base=$2 cmp=$3
  shift 3
  "$portkit" prof diff "$base" "$cmp" "$@" --fail-above 5 --format json -o "$out/$label" >/dev/null 2>&1; rc_i=$?
  "$portkit" prof diff "$base" "$cmp" "$@" --fail-above 5 --gate point -o "$out/${label}p" >/dev/null 2>&1; rc_p=$?
  python3 "$out/row.py" "$out/$label/diff.json" "$label" "$rc_i" "$rc_p"
}
for a in "$dir"/a_*; do i=${a##*_}; row "same$i" "$a" "$dir/b_$i"; done
for s in "$dir"/s_*; do i=${s##*_}; row "slow$i" "$dir/a_$i" "$s"; done
# Three runs a side: a_3k..a_3k+2 against b_3k..b_3k+2 (identical) and, where there are, s_3k..s_3k+2.
k=0
while [ -e "$dir/a_$((3 * k + 2))" ] && [ -e "$dir/b_$((3 * k + 2))" ]; do
  i=$((3 * k))
  row "same3x$k" "$dir/a_$i" "$dir/b_$i" --base-run "$dir/a_$((i + 1))" --base-run "$dir/a_$((i + 2))" \
    --compare-run "$dir/b_$((i + 1))" --compare-run "$dir/b_$((i + 2))"
  if [ -e "$dir/s_$((i + 2))" ]; then
    row "slow3x$k" "$dir/a_$i" "$dir/s_$i" --base-run "$dir/a_$((i + 1))" --base-run "$dir/a_$((i + 2))" \
      --compare-run "$dir/s_$((i + 1))" --compare-run "$dir/s_$((i + 2))"
  fi
  k=$((k + 1))
done
