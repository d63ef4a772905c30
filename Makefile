# portkit — the two commands of the README:
#   make demo   set-up + build + run the migration analysis on the bundled example
#   make test   set-up + build + every test (the Python tests under torch 1.13 and torch 2.x)
# and: make pytest (only the Python tests), make install PREFIX=DIR (cmake --install),
#      make lint (ruff + clang-format, scripts/lint.sh), make format (scripts/format.sh)
BUILD ?= build
JOBS ?= $(shell nproc)
EXAMPLE ?= examples/cifar_cuda
DEMO_OUT ?= out/demo
PREFIX ?= /usr/local
# ccache, when installed, caches compiles across clones and worktrees (paths taken relative to the
# checkout); without it nothing changes.
CCACHE := $(shell command -v ccache 2>/dev/null)
ifneq ($(CCACHE),)
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1
CMAKE_LAUNCHER = -DCMAKE_CXX_COMPILER_LAUNCHER=$(CCACHE) -DCMAKE_C_COMPILER_LAUNCHER=$(CCACHE)
endif

.PHONY: all setup setup-build build build-cli demo test test-sanitize pytest install fuzz bench lint format clean

all: build

setup:
	@bash scripts/setup.sh

setup-build:
	@bash scripts/setup.sh --build

CONFIGURE = cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_LAUNCHER) >/dev/null

build: setup
	@$(CONFIGURE)
	@cmake --build $(BUILD) -j $(JOBS)

# The demo needs only the binary and Debian's packages: no torch environment, no tests. Its binary
# ($(DEMO_BUILD)/portkit) is a quick build: a unity build (the sources of each library compiled in
# batches of 16, so the headers are parsed once per batch; cmake/unity_skip.cmake lists the few left
# apart) at -O1 without debug information, 5-10 times less compiler time than $(BUILD)'s
# RelWithDebInfo objects. Same sources, same results; `make build` makes the optimised $(BUILD)/portkit.
DEMO_BUILD ?= build-demo
build-cli: setup-build
	@cmake -S . -B $(DEMO_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
	  -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
	  $(CMAKE_LAUNCHER) >/dev/null
	@cmake --build $(DEMO_BUILD) -j $(JOBS) --target portkit

demo: build-cli
	@rm -rf $(DEMO_OUT)
	$(DEMO_BUILD)/portkit analyse -i $(EXAMPLE) -o $(DEMO_OUT) -v 2.1.0

# After the tests: which torch versions the Python tests ran under (from ctest's log).
PYTEST_RAN = grep -h -e '^pytest under torch' -e '^SKIPPED: no torch' $(BUILD)/Testing/Temporary/LastTest.log || true

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(PYTEST_RAN)

# The CLI, golden, hostile-input and fuzz-replay tests under AddressSanitizer + UBSan, in a build
# folder of its own (docs/safety.md). SANITIZE_TESTS picks other ctest entries ('.' for all).
SANITIZE ?= address,undefined
SANITIZE_BUILD ?= build-asan
SANITIZE_TESTS ?= ^(cli_|golden_|hostile_|fuzz_replay_)
SANITIZE_TARGETS ?= portkit fuzz_replays
SANITIZE_NO_LEAK_CHECK ?= ^(cli_prof_cluster_mpi|cli_compare_ranks)$$
# Built like the demo, as a unity build (cmake/unity_skip.cmake), at -O1 -g (ASan's advice: stack
# traces stay exact): a cold build of what the entries need takes minutes on 2 cores, not half an hour.
SANITIZE_FLAGS = -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG"
test-sanitize: setup
	@cmake -S . -B $(SANITIZE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPORTKIT_SANITIZE=$(SANITIZE) \
	  $(SANITIZE_FLAGS) $(CMAKE_LAUNCHER) >/dev/null
	@# Only what the selected entries run: the CLI and the fuzz replay drivers (SANITIZE_TARGETS=all
	@# builds everything, for SANITIZE_TESTS='.').
	@cmake --build $(SANITIZE_BUILD) -j $(JOBS) --target $(SANITIZE_TARGETS)
	@cd $(SANITIZE_BUILD) && PORTKIT_SANITIZED=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -R '$(SANITIZE_TESTS)' -E '$(SANITIZE_NO_LEAK_CHECK)'
	@# OpenMPI's own allocations (libmpi and the MCA components it dlopens) are reported as leaks at
	@# exit by LeakSanitizer; under mpirun the address and UB checks stay on, the leak check is off.
	@cd $(SANITIZE_BUILD) && PORTKIT_SANITIZED=1 ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -R '$(SANITIZE_NO_LEAK_CHECK)'

pytest: build
	@cd $(BUILD) && ctest --output-on-failure -R '^pytest_'
	@$(PYTEST_RAN)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

fuzz: setup
	@bash tests/fuzz/run_fuzz.sh

bench: build
	@$(BUILD)/bench/analyse_bench

lint: setup
	@bash scripts/lint.sh

format:
	@bash scripts/format.sh

clean:
	rm -rf $(BUILD) out
