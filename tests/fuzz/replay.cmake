# The fuzz targets as plain programs (tests/fuzz/replay_main.cc drives them), built with the
# project's own compiler, so every `make test` / ctest exercises every reader of outside input
# without clang: each replays its seed corpus and the regression inputs found by fuzzing, then
# runs deterministic mutants of each (a fixed seed: the same inputs every run). Included from
# tests/CMakeLists.txt. Under -DPORTKIT_SANITIZE=address,undefined they run with ASan + UBSan.
set(FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)
add_library(portkit_fuzz_replay_main STATIC ${FUZZ_DIR}/replay_main.cc)
# Every replay driver, so that `make test-sanitize` builds only what its ctest entries run
# (the portkit binary and these), not the unit-test binaries and benchmarks.
add_custom_target(fuzz_replays)

# target | libraries | mutants per input | seed folders (comma separated, under tests/fuzz/)
set(PORTKIT_FUZZ_REPLAYS
  "python_frontend_fuzz|portkit_analyse|200|corpus/python,crashes"
  "trace_import_fuzz|portkit_prof|250|corpus/traces"
  "tensor_reader_fuzz|portkit_accuracy|400|corpus/tensors"
  "tune_input_fuzz|portkit_tune|3000|corpus/tune"
  "table_input_fuzz|portkit_analyse|1000|corpus/tables,corpus/traces"
  "hdf5_reader_fuzz|portkit_accuracy|300|corpus/hdf5"
  "msprobe_dump_fuzz|portkit_accuracy|400|corpus/msprobe"
  "tensor_data_file_fuzz|portkit_accuracy|400|corpus/tensor_data"
  "cluster_trace_fuzz|portkit_prof|150|corpus/cluster"
  "ascend_join_fuzz|portkit_prof|150|corpus/ascend_join"
  "store_reader_fuzz|portkit_tune|60|corpus/store")
foreach(spec IN LISTS PORTKIT_FUZZ_REPLAYS)
  string(REPLACE "|" ";" parts "${spec}")
  list(GET parts 0 name)
  list(GET parts 1 libs)
  list(GET parts 2 mutants)
  list(GET parts 3 seeds)
  string(REPLACE "," ";" seeds "${seeds}")
  list(TRANSFORM seeds PREPEND ${FUZZ_DIR}/)
  add_executable(${name}_replay ${FUZZ_DIR}/${name}.cc)
  target_include_directories(${name}_replay PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(${name}_replay PRIVATE portkit_fuzz_replay_main ${libs})
  add_dependencies(fuzz_replays ${name}_replay)
  add_test(NAME fuzz_replay_${name}
    COMMAND $<TARGET_FILE:${name}_replay> --mutations ${mutants} ${seeds})
  set_tests_properties(fuzz_replay_${name} PROPERTIES TIMEOUT 600)
endforeach()

# Optionally, a short libFuzzer run of every target (5 s each) as a ctest entry: it builds the
# clang + ASan + UBSan tree under <build>/fuzz first (minutes the first time, ccache after), so
# it is off unless asked for: -DPORTKIT_FUZZ_SHORT=ON. `make fuzz` runs the targets for longer.
option(PORTKIT_FUZZ_SHORT "ctest entry fuzz_libfuzzer_short: 5 s of libFuzzer per target (needs clang)" OFF)
if(PORTKIT_FUZZ_SHORT)
  find_program(PORTKIT_CLANGXX clang++)
  if(PORTKIT_CLANGXX)
    add_test(NAME fuzz_libfuzzer_short
      COMMAND ${CMAKE_COMMAND} -E env FUZZ_SECONDS=5 FUZZ_BUILD=${CMAKE_BINARY_DIR}/fuzz
              bash ${FUZZ_DIR}/run_fuzz.sh
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(fuzz_libfuzzer_short PROPERTIES TIMEOUT 3600 RUN_SERIAL TRUE)
  else()
    message(STATUS "PORTKIT_FUZZ_SHORT: clang++ not found; only the fuzz_replay_* entries run")
  endif()
endif()
