#!/usr/bin/env bash
# compare on dumps of many ranks (docs/accuracy.md, "Dumps of many ranks"): one process compares
# each rank pair into -o/<rank>/ and sums them up in compare_ranks.csv; `mpirun -np 2` and `-np 3`
# split the ranks over processes and write the same files, byte for byte. Ranks missing on one side
# fail the same way in both. The MPI part is skipped without mpirun or an MPI build of portkit.
source "$(dirname "$0")/harness.sh"
fix=tests/python/fixtures/msprobe_26_2_0
# Four ranks of msprobe's layout (step0/rankN), tensor and statistics mode, one with the sides swapped.
for side in ref tgt; do
  other=$([ $side = ref ] && echo tgt || echo ref)
  mkdir -p "$tmp/$side/step0"
  cp -r "$fix/tensor/$side" "$tmp/$side/step0/rank0"
  cp -r "$fix/statistics/$side" "$tmp/$side/step0/rank1"
  cp -r "$fix/tensor/$other" "$tmp/$side/step0/rank2"
  cp -r "$fix/statistics/$other" "$tmp/$side/step0/rank10"
done
files() {  # every report file under $1, relative, sorted
  (cd "$1" && find . -type f ! -name '.*' | sort)
}
"$PORTKIT" compare "$tmp/ref/step0" "$tmp/tgt/step0" -o "$tmp/one" --format csv,json,html,msprobe \
  >"$tmp/one.out" 2>"$tmp/one.err"
check "one process: exit 0" "[ $? = 0 ]"
check "one process: a report folder per rank" \
  "[ -f '$tmp/one/rank0/compare_result.csv' ] && [ -f '$tmp/one/rank10/compare_result_msprobe.csv' ]"
check "one process: the summary lists the ranks in rank order" \
  "[ \"\$(cut -d, -f1 '$tmp/one/compare_ranks.csv' | tr '\n' ' ')\" = 'Rank rank0 rank1 rank2 rank10 ' ]"
# Each rank's reports are those of a compare of that pair alone.
"$PORTKIT" compare "$tmp/ref/step0/rank2" "$tmp/tgt/step0/rank2" -o "$tmp/alone" --format csv,json,html,msprobe \
  >/dev/null 2>&1
check "a rank's reports are those of its pair compared alone" \
  "for f in compare_result.csv compare_result.json compare_report.html compare_result_msprobe.csv; do cmp -s '$tmp/alone/'\$f '$tmp/one/rank2/'\$f || exit 1; done"
check "stdout has every rank's table, in rank order" \
  "[ \"\$(grep '^== ' '$tmp/one.out' | tr '\n' ' ')\" = '== rank0 == == rank1 == == rank2 == == rank10 == ' ]"
mkdir -p "$tmp/short/step0" && cp -r "$tmp/tgt/step0/rank0" "$tmp/tgt/step0/rank1" "$tmp/short/step0/"
"$PORTKIT" compare "$tmp/ref/step0" "$tmp/short/step0" -o "$tmp/bad" >/dev/null 2>"$tmp/bad.err"
check "ranks missing on one side: exit 2, named, nothing written" \
  "[ $? = 2 ] && grep -q 'alone has rank2, rank10' '$tmp/bad.err' && [ ! -e '$tmp/bad' ]"

if ! command -v mpirun >/dev/null 2>&1; then
  echo "$pass passed, $fail failed (MPI part skipped: no mpirun)"
  [ "$fail" = 0 ]
  exit
fi
mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
"${mpi[@]}" -np 2 "$PORTKIT" compare "$tmp/ref/step0" "$tmp/tgt/step0" -o "$tmp/np2" --format csv,json,html,msprobe \
  >"$tmp/np2.out" 2>"$tmp/np2.err"
rc=$?
if ! grep -q 'with 2 MPI processes' "$tmp/np2.err"; then
  echo "$pass passed, $fail failed (MPI part skipped: this portkit was built without MPI, rc $rc)"
  [ "$fail" = 0 ]
  exit
fi
check "mpirun -np 2: exit 0" "[ $rc = 0 ]"
"${mpi[@]}" -np 3 "$PORTKIT" compare "$tmp/ref/step0" "$tmp/tgt/step0" -o "$tmp/np3" --format csv,json,html,msprobe \
  >"$tmp/np3.out" 2>"$tmp/np3.err"
check "mpirun -np 3: exit 0" "[ $? = 0 ] && grep -q 'with 3 MPI processes' '$tmp/np3.err'"
check "np 1, 2 and 3 write the same files" "[ \"\$(files '$tmp/one')\" = \"\$(files '$tmp/np2')\" ] && [ \"\$(files '$tmp/one')\" = \"\$(files '$tmp/np3')\" ]"
check "np 2 and np 3 write every file identical to one process" \
  "for f in \$(files '$tmp/one'); do cmp -s '$tmp/one/'\$f '$tmp/np2/'\$f && cmp -s '$tmp/one/'\$f '$tmp/np3/'\$f || exit 1; done"
check "np 2 prints the same tables as one process" "cmp -s '$tmp/one.out' '$tmp/np2.out'"
"${mpi[@]}" -np 2 "$PORTKIT" compare "$tmp/ref/step0" "$tmp/short/step0" -o "$tmp/bad2" >/dev/null 2>"$tmp/bad2.err"
check "ranks missing under mpirun: exit 2, one message from process 0" \
  "[ $? = 2 ] && [ \$(grep -c 'alone has rank2, rank10' '$tmp/bad2.err') = 1 ]"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
