#!/usr/bin/env bash
# Hostile and unlucky conditions for `portkit tune` (docs/safety.md): a kernel cache someone else
# can write is never loaded from; a tuner killed with SIGKILL mid-compile leaves no compiler
# running, and the next run removes what it left in the cache.
source "$(dirname "$0")/../cli/harness.sh"
T="timeout 120"
model=tests/data/tune/small_model.json
pin=(--fix MC=48 --fix NC=768 --fix KC=128 --fix MR=4 --fix NR=16 --fix VW=16 --fix PACK_A=1 --fix ORDER=0 --fix UNROLL=1 --fix THREADS=1)
alive() { kill -0 "$1" 2>/dev/null; }

# ---------------------------------------------------------------------------------------------
# A kernel cache (BANK/kernels) writable by others is refused before anything is built or loaded.
for mode in 0777 0775; do
  b="$tmp/shared_$mode"
  mkdir -p "$b/kernels" && chmod "$mode" "$b/kernels"
  $T "$PORTKIT" tune --model "$model" --tune-bank "$b" --output "$tmp/o_$mode" --max-evals 1 --repeats 5 "${pin[@]}" \
    >"$tmp/shared_$mode.out" 2>&1
  check "a kernel cache of mode $mode is refused (exit 2)" "[ $? = 2 ]"
  who=$([ $mode = 0777 ] && echo everyone || echo 'its group')
  check "  the message names the folder, who can write it and its mode" \
    "grep -q \"the kernel cache $b/kernels is writable by $who (mode $mode)\" '$tmp/shared_$mode.out'"
  check "  and nothing was compiled into it" "[ -z \"\$(ls -A '$b/kernels')\" ]"
done
# A symbolic link as the kernel cache is refused.
b="$tmp/linked"
mkdir -p "$b" "$tmp/elsewhere"
ln -s "$tmp/elsewhere" "$b/kernels"
$T "$PORTKIT" tune --model "$model" --tune-bank "$b" --output "$tmp/o_linked" --max-evals 1 --repeats 5 "${pin[@]}" \
  >"$tmp/linked.out" 2>&1
check "a kernel cache that is a symbolic link is refused (exit 2)" "[ $? = 2 ] && grep -q 'is a symbolic link' '$tmp/linked.out'"

# A cached object someone else could have written is not loaded: it is built again (as root, the
# objects are given to nobody; as another user, made group-writable).
# The first run is into a sticky world-writable cache (as /tmp): accepted, nobody can replace
# another user's file there.
b="$tmp/own"
mkdir -p "$b/kernels" && chmod 1777 "$b/kernels"
$T "$PORTKIT" tune --model "$model" --tune-bank "$b" --output "$tmp/o_own1" --max-evals 1 --repeats 5 "${pin[@]}" \
  >"$tmp/own1.out" 2>&1
check "a sticky world-writable kernel cache is accepted; the first run fills it (exit 0)" "[ $? = 0 ] && ls '$b'/kernels/*.so >/dev/null"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  chown nobody "$b"/kernels/*.so; why="is owned by uid $(id -u nobody)"
else
  chmod g+w "$b"/kernels/*.so; why="is writable by its group"
fi
REPEAT_TUNE=True $T "$PORTKIT" tune --model "$model" --tune-bank "$b" --output "$tmp/o_own2" --max-evals 1 --repeats 5 "${pin[@]}" \
  >"$tmp/own2.out" 2>&1
check "a re-tune with untrusted cached objects exits 0" "[ $? = 0 ]"
check "  says each object $why and is built again" "grep -q \"\\.so $why.*not loaded; building it again\" '$tmp/own2.out'"
check "  and the rebuilt objects are this user's and not writable by others" \
  "[ -z \"\$(find '$b/kernels' -name '*.so' \\( ! -user $(id -u) -o -perm /022 \\))\" ]"

# ---------------------------------------------------------------------------------------------
# A tuner killed with SIGKILL mid-compile: no compiler of it survives; the next run cleans up.
# The "compiler" records its pid and that of a child (as a driver starts cc1plus), writes a partial
# object to its -o file, then waits long before compiling.
k="$tmp/kill"
mkdir -p "$k"
cat >"$k/slowcc" <<EOF
#!/bin/sh
if [ "\$1" = --version ]; then exec c++ --version; fi
out=""; prev=""
for a in "\$@"; do [ "\$prev" = -o ] && out="\$a"; prev="\$a"; done
echo \$\$ >>"$k/pids"
[ -n "\$out" ] && echo partial >"\$out"
sleep 300 &
echo \$! >>"$k/pids"
wait
exec c++ "\$@"
EOF
chmod +x "$k/slowcc"
"$PORTKIT" tune --model "$model" --compiler "$k/slowcc" --tune-bank "$k/bank" --output "$k/o1" --max-evals 2 \
  --parallel-compile 2 --repeats 5 "${pin[@]}" >"$k/run1.out" 2>&1 &
tpid=$!
for _ in $(seq 1 300); do
  [ -f "$k/pids" ] && [ "$(wc -l <"$k/pids")" -ge 2 ] && ls "$k"/bank/kernels/*.so.tmp* >/dev/null 2>&1 && break
  sleep 0.05
done
check "the slow compiler is running under tune" "[ -f '$k/pids' ] && [ \$(wc -l <'$k/pids') -ge 2 ]"
kill -9 $tpid
wait $tpid 2>/dev/null
gone=1
for _ in $(seq 1 100); do  # the guard kills the group at once; allow 5 s on a loaded machine
  gone=1
  while read -r p; do alive "$p" && gone=0; done <"$k/pids"
  [ $gone = 1 ] && break
  sleep 0.05
done
check "after SIGKILL of tune no compiler process of it survives (driver and its child)" "[ $gone = 1 ]"
while read -r p; do alive "$p" && kill -9 "$p"; done <"$k/pids"  # never leave them behind
check "  it left a partial private object (KEY.so.tmpPID_N) in the cache" "ls '$k'/bank/kernels/*.so.tmp${tpid}_* >/dev/null 2>&1"
# Leftovers of another dead run: a source's temporary too.
touch "$k/bank/kernels/0123456789abcdef.cc.tmp.$tpid"
live=$$  # a live process's temporaries are kept
touch "$k/bank/kernels/fedcba9876543210.so.tmp${live}_1"
$T "$PORTKIT" tune --model "$model" --tune-bank "$k/bank" --output "$k/o2" --max-evals 1 --repeats 5 "${pin[@]}" \
  >"$k/run2.out" 2>&1
check "the next run succeeds (exit 0)" "[ $? = 0 ]"
check "  and removes the dead run's temporaries, saying so" \
  "[ -z \"\$(ls '$k'/bank/kernels | grep -E 'tmp\\.?${tpid}')\" ] && grep -q 'left by a tuning run that was killed' '$k/run2.out'"
check "  and keeps a live process's" "[ -f '$k/bank/kernels/fedcba9876543210.so.tmp${live}_1' ]"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
