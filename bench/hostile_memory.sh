#!/usr/bin/env bash
# Peak memory on hostile inputs (docs/safety.md, Limits): each case is generated in a temporary
# folder, run under /usr/bin/time -v, and its peak RSS printed beside the 300 MB bound the
# hostile-input issue set. A benchmark, not a test: nothing is asserted; record the figures in
# docs/benchmarks.md with the machine and date. Needs about 4 GB of free disk; the 100k-tensor case
# takes a few minutes to generate (SKIP_100K=1 leaves it out).
#
#   bash bench/hostile_memory.sh build/portkit
set -uo pipefail
PORTKIT=$(realpath "${1:?usage: $0 PATH/TO/portkit}")
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work" "$ROOT" "${SKIP_100K:-0}" <<'PY'
import gzip, json, os, struct, sys, zlib
w, root, skip = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
def bomb(folder, head, filler, mib, tail):
    os.makedirs(folder)
    with gzip.open(folder + "/bomb.json.gz", "wb", 9) as f:
        f.write(head)
        block = filler * ((1 << 20) // len(filler))
        for _ in range(mib): f.write(block)
        f.write(tail)
bomb(w + "/bomb_event", b'{"traceEvents":[{"ph":"X","name":"', b"a", 1024, b'","ts":1,"dur":1}]}')
bomb(w + "/bomb_space", b'{"traceEvents":[', b" ", 1024, b"]}")
ev = b'{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":1,"ts":1,"dur":1},'
bomb(w + "/bomb_events", b'{"traceEvents":[', ev * 1000, 300, b'{"ph":"X","name":"k","pid":1,"tid":1,"ts":1,"dur":1}]}')
rows = open(root + "/tests/data/traces/ascend/kernel_details.csv", "rb").read().split(b"\n")
os.makedirs(w + "/kd")
with open(w + "/kd/kernel_details.csv", "wb") as f:
    f.write(rows[0] + b"\n")
    body = b"\n".join(r for r in rows[1:] if r) + b"\n"
    for _ in range(200 * (1 << 20) // len(body)): f.write(body)
def st(path, n):
    hdr = json.dumps({"t": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
    hdr += b" " * ((8 - len(hdr) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr)
        chunk = struct.pack("<f", 1.5) * (1 << 20)
        for _ in range(n >> 20): f.write(chunk)
st(w + "/t1g.safetensors", 1 << 28)
st(w + "/t128m.safetensors", 1 << 25)
if not skip:
    for d, val in (("ref", 1.0), ("tgt", 1.0001)):
        os.makedirs(w + "/k100/" + d)
        data = struct.pack("<4f", val, val, val, val)
        hdr = json.dumps({"input.0": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                          "output.0": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}).encode()
        hdr += b" " * ((8 - len(hdr) % 8) % 8)
        blob = struct.pack("<Q", len(hdr)) + hdr + data + data
        t = lambda k: {"key": k, "dtype": "F32", "shape": [4], "max": val, "min": val, "mean": val,
                       "norm": 2 * val, "nan": 0, "inf": 0, "crc32": zlib.crc32(data)}
        with open(w + "/k100/" + d + "/manifest.jsonl", "w") as m:
            for i in range(100000):
                fn = "op_%06d.safetensors" % i
                with open(w + "/k100/" + d + "/" + fn, "wb") as f: f.write(blob)
                m.write(json.dumps({"index": i, "name": "aten::add", "kind": "op", "phase": "forward", "module": "M",
                                    "stack": "t.py:1", "overflow": False, "file": fn,
                                    "tensors": [t("input.0"), t("output.0")]}) + "\n")
        with open(w + "/k100/" + d + "/dump_complete.json", "w") as f: f.write('{"records": 100000}\n')
PY

printf '%-48s %6s %12s %10s  %s\n' case exit "peak RSS MB" "seconds" "last line"
last_line() {  # the line that says how the run ended
  grep -m1 'over the limit' "$1" || grep -E '\| +ok +\||Wrote|Comparing' "$1" | tail -1
}
run() {  # name, command...
  local name=$1; shift
  /usr/bin/time -v -o "$work/time" "$@" >"$work/out" 2>&1
  local rc=$?
  local rss secs
  rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2/1024}' "$work/time")
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; printf "%.1f", s}' "$work/time")
  printf '%-48s %6s %12s %10s  %s\n' "$name" "$rc" "$rss" "$secs" "$(last_line "$work/out")"
}
run "prof import: gzip bomb, one 1 GiB event (1 MB)" "$PORTKIT" prof import -dir "$work/bomb_event"
run "prof import: gzip bomb, 1 GiB of spaces (1 MB)" "$PORTKIT" prof import -dir "$work/bomb_space"
run "  same, --max-expansion 0 (streamed through)" "$PORTKIT" prof import -dir "$work/bomb_space" --max-expansion 0
run "prof import: gzip bomb, 4.4 M tiny events" "$PORTKIT" prof import -dir "$work/bomb_events"
run "prof import: 200 MB kernel_details.csv" "$PORTKIT" prof import -dir "$work/kd"
run "convert: 1 GiB fp32 tensor to .npy" "$PORTKIT" convert -d "$work/t1g.safetensors" -out "$work/cv1"
rm -rf "$work/cv1"
run "convert: 128 MiB fp32 tensor to .txt" "$PORTKIT" convert -d "$work/t128m.safetensors" -out "$work/cv2" -t txt
rm -rf "$work/cv2"
if [ "${SKIP_100K:-0}" != 1 ]; then
  run "compare: 100k ops, 200k tiny tensor pairs" "$PORTKIT" compare "$work/k100/ref" "$work/k100/tgt" -o "$work/cmp" -j 2
fi
echo "bound from the hostile-input issue: 300 MB peak RSS for each case"
