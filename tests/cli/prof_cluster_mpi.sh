#!/usr/bin/env bash
# prof cluster under MPI (docs/prof.md, "cluster under MPI"): `mpirun -np 2` and `-np 4` give
# byte-identical reports and timeline to the single-process run over 5 ranks made from the real
# traces (uneven shares), and a duplicate rank fails the same way. Skipped (77) without mpirun or
# when portkit was built without MPI.
source "$(dirname "$0")/harness.sh"
command -v mpirun >/dev/null 2>&1 || { echo "skipped: no mpirun"; exit 77; }
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)

mkdir -p "$tmp/ranks"
$py - "$tmp/ranks" <<'PY'
import gzip, json, sys
k = "tests/data/traces/kineto/"
for f, r in [("timeline_analysis__sampled_rank-0.json.gz", 0), ("trace_filter__sampled_rank-1.json.gz", 1),
             ("trace_diff__test__test.json.gz", 2), ("trace_diff__control__control.json.gz", 3),
             ("trace_filter__sampled_rank-1.json.gz", 4)]:
    d = json.load(gzip.open(k + f))
    d["distributedInfo"]["rank"] = r
    with gzip.open(f"{sys.argv[1]}/rank{r}.json.gz", "wt") as o:
        json.dump(d, o)
PY
"$PORTKIT" prof cluster -dir "$tmp/ranks" -o "$tmp/one" >/dev/null 2>"$tmp/one.err"
check "single process exits 0" "[ $? = 0 ]"
"${mpi[@]}" -np 2 "$PORTKIT" prof cluster -dir "$tmp/ranks" -o "$tmp/np2" >/dev/null 2>"$tmp/np2.err"
rc=$?
if ! grep -q 'with 2 MPI processes' "$tmp/np2.err"; then
  echo "skipped: this portkit was built without MPI (rc $rc)"
  exit 77
fi
check "mpirun -np 2 exits 0" "[ $rc = 0 ]"
"${mpi[@]}" -np 4 "$PORTKIT" prof cluster -dir "$tmp/ranks" -o "$tmp/np4" >/dev/null 2>"$tmp/np4.err"
check "mpirun -np 4 exits 0 with 4 processes" "[ $? = 0 ] && grep -q 'with 4 MPI processes' '$tmp/np4.err'"
for f in cluster_report.txt cluster_report.json cluster_report.html cluster_step_trace_time.csv \
         cluster_communication.json cluster_communication_matrix.json cluster_timeline.json; do
  check "np 2 and np 4 write $f identical to one process" "cmp -s '$tmp/one/$f' '$tmp/np2/$f' && cmp -s '$tmp/one/$f' '$tmp/np4/$f'"
done
check "the report holds 5 ranks" "$py -c 'import json,sys; assert [r[\"rank\"] for r in json.load(open(sys.argv[1]))[\"ranks\"]] == [0,1,2,3,4]' '$tmp/np4/cluster_report.json'"
cp "$tmp/ranks/rank4.json.gz" "$tmp/ranks/copy.json.gz"
"${mpi[@]}" -np 2 "$PORTKIT" prof cluster -dir "$tmp/ranks" -o "$tmp/dup" >/dev/null 2>"$tmp/dup.err"
rc=$?
check "a duplicate rank under mpirun: exit 2, one message from process 0" \
  "[ $rc = 2 ] && [ \$(grep -c 'rank 4 appears twice: copy.json.gz and rank4.json.gz' '$tmp/dup.err') = 1 ]"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
