#!/usr/bin/env bash
# Builds the libFuzzer targets (Python front end, trace importers, tensor files, tune inputs, CSV
# inputs, HDF5 dumps, msprobe dumps, msprobe's .pt / .npy tensor files, prof cluster folders,
# torch_npu folder joins) with clang, ASan and UBSan, and runs each of them.
#
#   tests/fuzz/run_fuzz.sh                 # 30 s
#   FUZZ_SECONDS=600 tests/fuzz/run_fuzz.sh
#
# Environment: FUZZ_SECONDS (default 30), FUZZ_BUILD (default build-fuzz), FUZZ_JOBS (build
# parallelism, default nproc), FUZZ_ARGS (extra libFuzzer flags), CC/CXX (default clang/clang++).
# FUZZ_TARGETS (default: all) picks some, e.g. FUZZ_TARGETS="trace_import_fuzz table_input_fuzz".
# Each target's seed corpus tests/fuzz/corpus/<seeds>/ is copied to $FUZZ_BUILD/fuzz-corpus/ (new
# inputs go there, the checked-in seeds stay untouched). Keep a crash as a regression input by
# copying it into the target's corpus folder (tests/fuzz/crashes/ for the Python front end): the
# ctest entries fuzz_replay_<target> replay them on every `make test`. A crash is saved as $FUZZ_BUILD/fuzz-artifacts/
# crash-<sha1> (or leak-/timeout-/oom-) and the script exits non-zero.
# Reproduce one: $FUZZ_BUILD/tests/fuzz/python_frontend_fuzz <file>
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BUILD="${FUZZ_BUILD:-build-fuzz}"
SECONDS_TO_RUN="${FUZZ_SECONDS:-30}"
JOBS="${FUZZ_JOBS:-$(nproc)}"
export CC="${CC:-clang}" CXX="${CXX:-clang++}"

if ! command -v "$CXX" >/dev/null; then
  echo "run_fuzz.sh: $CXX not found; libFuzzer needs clang (apt-get install clang libclang-rt-dev)" >&2
  exit 2
fi

ALL_SPECS="python_frontend_fuzz:python trace_import_fuzz:traces tensor_reader_fuzz:tensors tune_input_fuzz:tune
table_input_fuzz:tables hdf5_reader_fuzz:hdf5 msprobe_dump_fuzz:msprobe tensor_data_file_fuzz:tensor_data
cluster_trace_fuzz:cluster ascend_join_fuzz:ascend_join store_reader_fuzz:store"
specs=()
targets=()
for spec in $ALL_SPECS; do
  target=${spec%%:*}
  if [[ -z "${FUZZ_TARGETS:-}" || " $FUZZ_TARGETS " == *" $target "* ]]; then
    specs+=("$spec")
    targets+=("$target")
  fi
done
if [[ ${#targets[@]} -eq 0 ]]; then
  echo "run_fuzz.sh: FUZZ_TARGETS names no known target ($ALL_SPECS)" >&2
  exit 2
fi

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# A unity build (as `make demo` and `make test-sanitize`; cmake/unity_skip.cmake): the instrumented
# tree compiles in minutes on 2 cores.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
  -DPORTKIT_FUZZ=ON -DPORTKIT_BUILD_TESTS=OFF -DPORTKIT_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" --target "${targets[@]}" -j "$JOBS"

# Each target fuzzes for FUZZ_SECONDS on its own corpus (seeds copied, the checked-in ones untouched).
status=0
for spec in "${specs[@]}"; do
  target=${spec%%:*}
  seeds=${spec##*:}
  FUZZER="$BUILD/tests/fuzz/$target"
  CORPUS="$BUILD/fuzz-corpus/$seeds"
  ARTIFACTS="$BUILD/fuzz-artifacts/$target"
  mkdir -p "$CORPUS" "$ARTIFACTS"
  cp -n tests/fuzz/corpus/"$seeds"/* "$CORPUS/" 2>/dev/null || true
  if [[ $seeds == python ]]; then cp -n tests/fuzz/crashes/*.py tests/fuzz/crashes/crash-* "$CORPUS/" 2>/dev/null || true; fi
  echo "run_fuzz.sh: $target for ${SECONDS_TO_RUN}s (corpus $CORPUS, artifacts $ARTIFACTS)"
  set +e
  # shellcheck disable=SC2086
  # Inputs up to 64 KiB, but 1 MiB for the Python front end: absurd nesting (80 k brackets) and
  # big files only show past 64 KiB.
  max_len=65536
  if [[ $target == python_frontend_fuzz ]]; then max_len=1048576; fi
  "$FUZZER" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=4096 -max_len="$max_len" \
    -print_final_stats=1 -artifact_prefix="$ARTIFACTS/" ${FUZZ_ARGS:-} "$CORPUS"
  rc=$?
  set -e
  if [[ $rc -ne 0 ]]; then
    echo "run_fuzz.sh: $target stopped with exit code $rc; inputs saved in $ARTIFACTS:" >&2
    ls -l "$ARTIFACTS" >&2
    status=$rc
  else
    echo "run_fuzz.sh: $target: no crash in ${SECONDS_TO_RUN}s"
  fi
done
exit "$status"
