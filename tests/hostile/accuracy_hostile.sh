#!/usr/bin/env bash
# Hostile input to the accuracy commands (compare, overflow; docs/safety.md "Limits", "Outputs"):
# tensor files whose views claim far more elements than they hold, a dump.json far larger than
# memory should allow, data files contradicting their manifest, empty dumps, and outputs that
# already exist. Every run under `timeout` (124 means it hung); the files are made here with
# python3 (no torch needed). `ACC_HOSTILE_BIG=0` leaves out the 183 MB dump.json.
source "$(dirname "$0")/../cli/harness.sh"
T="timeout 60"
TB="timeout 600"  # the 183 MB dump.json
F=tests/fixtures/accuracy
PY=/usr/bin/python3
BIG=${ACC_HOSTILE_BIG:-1}
a="$tmp/acc"
mkdir -p "$a"

# Writes the files of one msprobe tensor-mode dump (`stepN/rankR` layout): a dump.json of one
# call (Functional.add.0.forward, one input and one output) and its two data files.
#   make_dump DIR INPUT_DTYPE INPUT_FILE_KIND OUTPUT_FILE_KIND
# FILE_KIND: stride0 (2^50 elements from a one-element storage), overlap (65536 x 65536 from
# 131071 elements), expand (a 4096-element stride-0 view: legitimate), f32, f64, c64 (.npy).
make_dump() {
  $PY - "$@" <<'EOF'
import json, os, struct, sys, zipfile

def pickle_tensor(storage, numel, offset, size, stride):
    """data.pkl of torch.save(tensor): _rebuild_tensor_v2(persistent storage, offset, size, stride, False, OrderedDict())."""
    def s(x):
        b = x.encode()
        return b"X" + struct.pack("<I", len(b)) + b
    def i(v):
        if 0 <= v < 2**31:
            return b"J" + struct.pack("<i", v)
        b = v.to_bytes(9, "little", signed=True).rstrip(b"\0") or b"\0"
        if b[-1] & 0x80: b += b"\0"
        return b"\x8a" + bytes([len(b)]) + b
    p = b"\x80\x02" + b"ctorch._utils\n_rebuild_tensor_v2\n" + b"("
    p += b"(" + s("storage") + b"ctorch\n" + storage.encode() + b"\n" + s("0") + s("cpu") + i(numel) + b"tQ"
    p += i(offset) + b"(" + b"".join(i(x) for x in size) + b"t" + b"(" + b"".join(i(x) for x in stride) + b"t"
    p += b"\x89" + b"ccollections\nOrderedDict\n)R" + b"tR."
    return p

def torch_file(path, storage, numel, offset, size, stride, data):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle_tensor(storage, numel, offset, size, stride))
        z.writestr("archive/data/0", data)
        z.writestr("archive/version", "3\n")

def npy(path, descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)

def data_file(folder, name, kind):
    path = os.path.join(folder, name)
    if kind == "stride0":    # 597-byte class of bomb: 2^50 elements of one float
        torch_file(path, "FloatStorage", 1, 0, [2**50], [0], struct.pack("<f", 1.0)); return [2**50]
    if kind == "overlap":    # each row the previous one shifted by one element
        torch_file(path, "FloatStorage", 131071, 0, [65536, 65536], [1, 1], b"\0" * (4 * 131071)); return [65536, 65536]
    if kind == "expand":     # torch.ones(1).expand(4096): a legitimate stride-0 view
        torch_file(path, "FloatStorage", 1, 0, [4096], [0], struct.pack("<f", 1.0)); return [4096]
    if kind == "f32":
        npy(path, "<f4", [4], struct.pack("<4f", 1, 2, 3, 4)); return [4]
    if kind == "f64":
        npy(path, "<f8", [4], struct.pack("<4d", 1, 2, 3, 4)); return [4]
    if kind == "c64":
        npy(path, "<c8", [4], b"\0" * 32); return [4]
    raise SystemExit("unknown kind " + kind)

folder, in_dtype, in_kind, out_kind = sys.argv[1:5]
data = os.path.join(folder, "dump_tensor_data")
os.makedirs(data, exist_ok=True)
ext = lambda k: ".npy" if k in ("f32", "f64", "c64") else ".pt"
in_name = "Functional.add.0.forward.input.0" + ext(in_kind)
out_name = "Functional.add.0.forward.output.0" + ext(out_kind)
in_shape = data_file(data, in_name, in_kind)
out_shape = data_file(data, out_name, out_kind)
def t(dtype, shape, name):
    return {"type": "torch.Tensor", "dtype": dtype, "shape": shape, "Max": 1.0, "Min": 1.0, "Mean": 1.0,
            "Norm": 1.0, "requires_grad": False, "data_name": name}
doc = {"task": "tensor", "level": "L1", "framework": "pytorch", "dump_data_dir": data,
       "data": {"Functional.add.0.forward": {"input_args": [t(in_dtype, in_shape, in_name)], "input_kwargs": {},
                                             "output": [t("torch.float32", out_shape, out_name)]}}}
with open(os.path.join(folder, "dump.json"), "w") as f:
    json.dump(doc, f)
EOF
}

# Peak RSS (KB) and elapsed seconds of a command: `measure NAME CMD...` leaves them in
# $a/NAME.rss, $a/NAME.secs and its exit status in $a/NAME.rc.
measure() {
  local name=$1; shift
  /usr/bin/time -f '%M %e' -o "$a/$name.time" "$@" >"$a/$name.out" 2>&1
  echo $? >"$a/$name.rc"
  tail -1 "$a/$name.time" | cut -d' ' -f1 >"$a/$name.rss"
  tail -1 "$a/$name.time" | cut -d' ' -f2 >"$a/$name.secs"
  echo "     $name: exit $(cat "$a/$name.rc"), peak RSS $(( $(cat "$a/$name.rss") / 1024 )) MB, $(cat "$a/$name.secs") s"
}

# ---------------------------------------------------------------------------------------------
# Views that claim more elements than their storage holds (stride 0, overlapping strides).
make_dump "$a/s0_ref/step0/rank0" torch.float32 stride0 f32
make_dump "$a/s0_tgt/step0/rank0" torch.float32 stride0 f32
check "the stride-0 .pt bomb is a few hundred bytes" \
  "[ \$(stat -c %s '$a/s0_tgt/step0/rank0/dump_tensor_data/Functional.add.0.forward.input.0.pt') -lt 1024 ]"
measure stride0 $T "$PORTKIT" compare "$a/s0_ref/step0/rank0" "$a/s0_tgt/step0/rank0" -o "$a/s0_out"
check "compare of a stride-0 view claiming 2^50 elements ends (exit 2, not a hang)" "[ \$(cat $a/stride0.rc) = 2 ]"
check "  in under 5 s" "$PY -c 'import sys; sys.exit(float(open(\"$a/stride0.secs\").read()) >= 5)'"
check "  saying over the limit, naming the file and the flag" \
  "grep -q 'Functional.add.0.forward.input.0.pt: FloatStorage: over the limit: a view of shape \[1125899906842624\] with strides \[0\] reads 1125899906842624 elements from 1 elements of its storage' '$a/stride0.out' && grep -q 'max-view-elements' '$a/stride0.out'"
check "  and the other pair (the output) is still compared" \
  "grep 'Functional.add.forward.0.output.0' '$a/s0_out/compare_result.csv' | grep -q ',Yes,'"
check "  the row of the bomb is listed as a read error in the reports" \
  "grep 'input.0' '$a/s0_out/compare_result.csv' | grep -q 'over the limit'"

make_dump "$a/ov_ref/step0/rank0" torch.float32 overlap f32
make_dump "$a/ov_tgt/step0/rank0" torch.float32 overlap f32
measure overlap $T "$PORTKIT" compare "$a/ov_ref/step0/rank0" "$a/ov_tgt/step0/rank0" -o "$a/ov_out"
check "compare of an overlapping view (65536 x 65536 from 131071 elements) ends with exit 2" \
  "[ \$(cat $a/overlap.rc) = 2 ] && grep -q 'reads 4294967296 elements from 131071 elements of its storage' '$a/overlap.out'"
check "  in under 5 s" "$PY -c 'import sys; sys.exit(float(open(\"$a/overlap.secs\").read()) >= 5)'"

$T "$PORTKIT" compare "$a/ov_ref/step0/rank0" "$a/ov_tgt/step0/rank0" -o "$a/ov_out2" --max-view-elements 1000 \
  >"$a/ov_small.out" 2>&1
check "--max-view-elements is the limit the message names" \
  "[ $? = 2 ] && grep -q 'more than 1000; not read' '$a/ov_small.out'"

make_dump "$a/ex_ref/step0/rank0" torch.float32 expand f32
make_dump "$a/ex_tgt/step0/rank0" torch.float32 expand f32
$T "$PORTKIT" compare "$a/ex_ref/step0/rank0" "$a/ex_tgt/step0/rank0" -o "$a/ex_out" >"$a/ex.out" 2>&1
check "a small stride-0 view (an expand of 4096 elements) is still compared (exit 0)" \
  "[ $? = 0 ] && grep 'input.0' '$a/ex_out/compare_result.csv' | grep -q ',Yes,'"
$T "$PORTKIT" compare "$a/ex_ref/step0/rank0" "$a/ex_tgt/step0/rank0" -o "$a/ex_out3" --max-view-elements 100 \
  >"$a/ex3.out" 2>&1
check "  and refused under a lower --max-view-elements (exit 2)" "[ $? = 2 ] && grep -q 'over the limit' '$a/ex3.out'"

# ---------------------------------------------------------------------------------------------
# A data file whose element type contradicts dump.json is named, never a silent N/A.
make_dump "$a/dt_ref/step0/rank0" torch.float32 f32 f32
make_dump "$a/dt_tgt/step0/rank0" torch.float32 c64 f64
$T "$PORTKIT" compare "$a/dt_ref/step0/rank0" "$a/dt_tgt/step0/rank0" -o "$a/dt_out" >"$a/dt.out" 2>&1
rc=$?
check "compare with data files contradicting dump.json's dtype exits 0 (the rows say why)" "[ $rc = 0 ]"
check "  a complex .npy where dump.json says float32: a warning naming the file" \
  "grep -qi 'warning.*Functional.add.0.forward.input.0.npy: holds descr .<c8. data, dump.json says F32; not compared' '$a/dt.out'"
check "  and the row's message says so (not a bare N/A)" \
  "grep 'input.0' '$a/dt_out/compare_result.csv' | grep -q ',N/A,\".*input.0.npy: holds descr .<c8. data, dump.json says F32; not compared'"
check "  a float64 .npy where dump.json says float32: compared as float64, with a note and a warning" \
  "grep 'output.0' '$a/dt_out/compare_result.csv' | grep -q 'holds F64 (descr .<f8.) data, dump.json says F32; compared as the file' && grep -qi 'warning.*output.0.npy: holds F64' '$a/dt.out'"

# ---------------------------------------------------------------------------------------------
# An empty dump is no run to judge: exit 2 naming it, for the target as for the reference.
mkdir -p "$a/empty/step0/rank0" "$a/empty_pk"
echo '{"task": "statistics", "level": "L1", "data": {}}' >"$a/empty/step0/rank0/dump.json"
: >"$a/empty_pk/manifest.jsonl"
make_dump "$a/full/step0/rank0" torch.float32 f32 f32
$T "$PORTKIT" compare "$a/full/step0/rank0" "$a/empty/step0/rank0" -o "$a/em_out" >"$a/em.out" 2>&1
rc=$?
check "compare against an empty target dump.json exits 2" "[ $rc = 2 ]"
check "  saying the target dump has no operators" \
  "grep -q 'empty/step0/rank0: the target dump has no operators' '$a/em.out' && ! grep -q 'No diverging' '$a/em.out'"
check "  and writes no report" "[ ! -e '$a/em_out/compare_result.csv' ]"
$T "$PORTKIT" compare "$a/empty/step0/rank0" "$a/full/step0/rank0" -o "$a/em_out2" >"$a/em2.out" 2>&1
check "the same for an empty reference (exit 2, says reference)" \
  "[ $? = 2 ] && grep -q 'the reference dump has no operators' '$a/em2.out'"
$T "$PORTKIT" compare "$F/ref" "$a/empty_pk" -o "$a/em_out3" >"$a/em3.out" 2>&1
check "and for an empty portkit manifest.jsonl (exit 2)" \
  "[ $? = 2 ] && grep -q 'manifest.jsonl holds no operator record' '$a/em3.out'"

# ---------------------------------------------------------------------------------------------
# Outputs: nothing replaced that the command did not write, without --force.
echo 'precious = 1' >"$a/train.py"
$T "$PORTKIT" overflow "$F/overflow" -o "$a/train.py" >"$a/of1.out" 2>&1
check "overflow -o refuses an existing file it did not create (exit 2)" \
  "[ $? = 2 ] && grep -q 'already exists' '$a/of1.out' && grep -q -- '--force' '$a/of1.out'"
check "  and leaves it as it was" "[ \"\$(cat '$a/train.py')\" = 'precious = 1' ]"
$T "$PORTKIT" overflow "$F/overflow" -o "$a/train.py" --force >"$a/of2.out" 2>&1
check "overflow -o --force replaces it" "[ $? = 0 ] && ! grep -q precious '$a/train.py'"
$T "$PORTKIT" overflow "$F/overflow" -o "$a/new_overflow.txt" >/dev/null 2>&1
check "overflow -o writes a new file" "[ $? = 0 ] && [ -s '$a/new_overflow.txt' ]"
$T "$PORTKIT" overflow "$F/overflow" -o "$a/new_overflow.txt" --format json >/dev/null 2>&1
check "  and replaces it on the next run without --force (listed in the folder's .portkit-files)" \
  "[ $? = 0 ] && grep -q '\"operators\"' '$a/new_overflow.txt' && grep -qx new_overflow.txt '$a/.portkit-files'"
cp -r "$F/overflow" "$a/of_dump"
cp "$a/of_dump/manifest.jsonl" "$a/manifest.copy"
$T "$PORTKIT" overflow "$a/of_dump" -o "$a/of_dump/manifest.jsonl" --force >"$a/of3.out" 2>&1
check "overflow -o never replaces the dump's own manifest, even with --force" \
  "[ $? = 2 ] && cmp -s '$a/of_dump/manifest.jsonl' '$a/manifest.copy'"

mkdir -p "$a/cmp_out"
echo 'my own notes' >"$a/cmp_out/compare_result.csv"
$T "$PORTKIT" compare "$F/ref" "$F/tgt" -o "$a/cmp_out" >"$a/co1.out" 2>&1
check "compare refuses to replace a compare_result.csv it did not write (exit 2)" \
  "[ $? = 2 ] && grep -q 'is not a compare report' '$a/co1.out' && grep -q 'my own notes' '$a/cmp_out/compare_result.csv'"
$T "$PORTKIT" compare "$F/ref" "$F/tgt" -o "$a/cmp_out" --force >/dev/null 2>&1
check "compare --force replaces it" "! grep -q 'my own notes' '$a/cmp_out/compare_result.csv'"
$T "$PORTKIT" compare "$F/ref" "$F/tgt" -o "$a/cmp_out" >/dev/null 2>&1
check "compare replaces its own reports on a second run (listed in .compare.complete)" "[ $? != 2 ]"
check "  and lists them in the folder's ledger .portkit-files" \
  "grep -qx compare_result.csv '$a/cmp_out/.portkit-files' && grep -qx compare_report.html '$a/cmp_out/.portkit-files'"
mkdir -p "$a/cmp_out5"
echo '{"mine": 1}' >"$a/cmp_out5/compare_result.json"
$T "$PORTKIT" compare "$F/ref" "$F/tgt" -o "$a/cmp_out5" >"$a/co4.out" 2>&1
check "  a user's compare_result.json (no ledger, no marker, not a report) is refused too" \
  "[ $? = 2 ] && grep -q 'compare_result.json exists' '$a/co4.out' && grep -q mine '$a/cmp_out5/compare_result.json'"
rm -f "$a/cmp_out/.compare.complete" "$a/cmp_out/.portkit-files"
$T "$PORTKIT" compare "$F/ref" "$F/tgt" -o "$a/cmp_out" --format csv,html >/dev/null 2>&1
check "  reports without their marker (a killed run's) are still compare's: replaced" "[ $? != 2 ]"

# ---------------------------------------------------------------------------------------------
# A 183 MB msprobe dump.json of 300k calls is read as a stream: bounded memory.
if [ "$BIG" = 1 ]; then
  mkdir -p "$a/big/step0/rank0"
  $PY - "$a/big/step0/rank0/dump.json" <<'EOF'
import sys
# 300k calls of an msprobe statistics dump, ~610 bytes each (183 MB), written call by call.
t = ('{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [%d, 64], "Max": 3.%d, "Min": -2.5, '
     '"Mean": 0.0123, "Norm": 45.25, "requires_grad": true}')
with open(sys.argv[1], "w") as f:
    f.write('{"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": null, "data": {')
    for i in range(300000):
        name = ("Functional.linear", "Torch.matmul", "Tensor.add")[i % 3]
        call = ('"%s.%d.forward": {"input_args": [%s, %s, {"type": "int", "value": 3}], "input_kwargs": '
                '{"bias": null, "alpha": {"type": "int", "value": 1}}, "output": [%s]}' % (name, i // 3, t % (i % 97 + 1, i % 7), t % (64, i % 5),
                                                   t % (i % 97 + 1, i % 3)))
        f.write(("" if i == 0 else ", ") + call)
    f.write("}}")
EOF
  size=$(stat -c %s "$a/big/step0/rank0/dump.json")
  echo "     dump.json: $((size / 1000000)) MB"
  check "the big dump.json is over 170 MB" "[ $size -gt 170000000 ]"
  cp -r "$a/big" "$a/big_tgt"
  measure big $TB "$PORTKIT" compare "$a/big/step0/rank0" "$a/big_tgt/step0/rank0" -o "$a/big_out" --format csv
  # dump.json is read as a stream (a few MB), and the rows (900k here, 300k for the second) go to
  # an unnamed temporary file in -o a batch at a time, read back by each report (docs/safety.md,
  # Limits): the issue's 300 MB holds for both.
  check "compare of two 183 MB dump.json (300k calls each) exits 0" "[ \$(cat $a/big.rc) = 0 ]"
  check "  with a peak RSS under 300 MB (900k rows)" "rss_ok \$(cat $a/big.rss) 307200"
  check "  and compares every call (900k rows)" "[ \$(wc -l <'$a/big_out/compare_result.csv') -ge 900000 ]"
  measure big_small $TB "$PORTKIT" compare "$a/full/step0/rank0" "$a/big_tgt/step0/rank0" -o "$a/big_out2" --format csv
  check "compare of a 183 MB dump.json against a small one: exit 0, peak RSS under 300 MB (300k rows)" \
    "[ \$(cat $a/big_small.rc) = 0 ] && rss_ok \$(cat $a/big_small.rss) 307200"
  measure big_small_all $TB "$PORTKIT" compare "$a/full/step0/rank0" "$a/big_tgt/step0/rank0" -o "$a/big_out3" \
    --format csv,json,html,msprobe
  check "  and with every report (CSV, JSON, HTML, msprobe CSV): exit 0, peak RSS under 300 MB" \
    "[ \$(cat $a/big_small_all.rc) = 0 ] && rss_ok \$(cat $a/big_small_all.rss) 307200"
  measure big_overflow $TB "$PORTKIT" overflow "$a/big_tgt/step0/rank0" -o "$a/big_overflow.txt"
  check "overflow of the 183 MB dump.json exits 0, peak RSS under 100 MB (read as a stream, once)" "[ \$(cat $a/big_overflow.rc) = 0 ] && rss_ok \$(cat $a/big_overflow.rss) 102400"
fi

# One call larger than --max-call-mb: over the limit, not read.
mkdir -p "$a/huge_call/step0/rank0"
$PY - "$a/huge_call/step0/rank0/dump.json" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write('{"task": "statistics", "data": {"Functional.relu.0.forward": {"input_args": [')
    f.write(", ".join(['{"type": "int", "value": 1}'] * 80000))
    f.write('], "output": []}}}')
EOF
$T "$PORTKIT" compare "$a/huge_call/step0/rank0" "$a/huge_call/step0/rank0" -o "$a/hc_out" --max-call-mb 1 \
  >"$a/hc.out" 2>&1
check "a dump.json call over --max-call-mb: exit 2, over the limit, naming the flag" \
  "[ $? = 2 ] && grep -q 'dump.json: over the limit: the call at byte .* is larger than 1 MiB of JSON; not read. --max-call-mb' '$a/hc.out'"
$T "$PORTKIT" compare "$a/huge_call/step0/rank0" "$a/huge_call/step0/rank0" -o "$a/hc_out2" >"$a/hc2.out" 2>&1
check "  and read under the default limit (exit 0)" "[ $? = 0 ]"
printf '{"task": "statistics", "data": {"Functional.relu.0.forward": {"input_args": [' \
  >"$a/huge_call/step0/rank0/dump.json"
$T "$PORTKIT" compare "$a/huge_call/step0/rank0" "$F/ref" -o "$a/hc_out3" >"$a/hc3.out" 2>&1
check "a dump.json cut short: exit 2, not valid JSON, truncated" \
  "[ $? = 2 ] && grep -q 'dump.json: not valid JSON: ends inside a value at byte .*truncated' '$a/hc3.out'"

# HDF5 datasets whose elements the file does not hold: a chunked dataset of 2^50 elements none of
# whose chunks was written (a 6 KB file) is refused before anything is allocated or read, naming the
# file and the dataset; the other tensors of the file are converted. Data in another file (an
# external raw-data file) is never read.
h5="$tmp/h5"
mkdir -p "$h5"
$PY - "$h5" <<'EOF2'
import sys, h5py, numpy as np
d = sys.argv[1]
with h5py.File(d + "/bomb.h5", "w") as f:
    f.create_dataset("/add/0/input/0", shape=(2**20, 2**20, 2**10), dtype="f4", chunks=(1, 1, 1024))
    f.create_dataset("/add/0/output/0", data=np.arange(6, dtype="f4").reshape(2, 3))
with h5py.File(d + "/fill.h5", "w") as f:
    f.create_dataset("/mul/0/output/0", shape=(64, 64), dtype="f4", chunks=(8, 8), fillvalue=1.5)
with h5py.File(d + "/ext.h5", "w") as f:
    f.create_dataset("/sub/0/output/0", shape=(4,), dtype="u1", external=[("/etc/passwd", 0, 4)])
EOF2
/usr/bin/time -v timeout 30 "$PORTKIT" convert -d "$h5/bomb.h5" -out "$h5/o1" >"$h5/o1.out" 2>"$h5/o1.err"
rc=$?
mb=$(awk -F: '/Maximum resident set size/ {printf "%d", $2 / 1024}' "$h5/o1.err")
secs=$(awk '/Elapsed \(wall clock\)/ {n = split($NF, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; printf "%d", s}' "$h5/o1.err")
echo "     convert of a 2^50-element dataset with no chunk written: exit $rc, ${secs} s, peak RSS ${mb} MB"
check "HDF5 dataset of 2^50 elements, no chunk written: exit 2 in under 5 s (${secs} s), peak RSS under 100 MB (${mb} MB)" \
  "[ $rc = 2 ] && [ '$secs' -lt 5 ] && rss_ok '$mb' 100"
check "  the message names the file and the dataset, says over the limit and names the flag" \
  "grep -q 'bomb.h5: /add/0/input/0: over the limit: a dataset of shape \[1048576, 1048576, 1024\] (1125899906842624 elements of 4 bytes) stored in 0 bytes of the file .*more than 67108864; not read. --max-view-elements raises the limit' '$h5/o1.err'"
check "  the other tensor is converted, nothing of the refused one is left" \
  "[ -s '$h5/o1/add.0.output.0.npy' ] && [ ! -e '$h5/o1/add.0.input.0.npy' ] && [ -z \"\$(find '$h5/o1' -name '*.tmp.*')\" ]"
timeout 30 "$PORTKIT" convert -d "$h5/fill.h5" -out "$h5/o2" >"$h5/o2.out" 2>&1
check "a small dataset read from its fill value is converted (4096 elements, under the default cap)" \
  "[ $? = 0 ] && $PY -c \"import numpy as np, sys; a = np.load(sys.argv[1]); sys.exit(0 if a.shape == (64, 64) and (a == 1.5).all() else 1)\" '$h5/o2/mul.0.output.0.npy'"
timeout 30 "$PORTKIT" convert -d "$h5/fill.h5" -out "$h5/o3" --max-view-elements 1000 >"$h5/o3.out" 2>&1
check "  and refused with --max-view-elements 1000" \
  "[ $? = 2 ] && grep -q 'fill.h5: /mul/0/output/0: over the limit: .*more than 1000; not read' '$h5/o3.out'"
timeout 30 "$PORTKIT" convert -d "$h5/ext.h5" -out "$h5/o4" >"$h5/o4.out" 2>&1
check "a dataset stored in an external file (/etc/passwd) is not read" \
  "[ $? = 2 ] && grep -q 'ext.h5: /sub/0/output/0: its data is stored in an external file; not read' '$h5/o4.out' && [ -z \"\$(ls '$h5/o4' 2>/dev/null | grep npy)\" ]"

echo "accuracy hostile input: $pass passed, $fail failed"
[ "$fail" = 0 ]
