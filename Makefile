# portkit — the two commands of the README:
#   make demo   set-up + build + run the migration analysis on the bundled example
#   make test   set-up + build + every test (the Python tests under torch 1.13 and torch 2.x)
# and: make pytest (only the Python tests), make install PREFIX=DIR (cmake --install)
BUILD ?= build
JOBS ?= $(shell nproc)
EXAMPLE ?= examples/cifar_cuda
DEMO_OUT ?= out/demo
PREFIX ?= /usr/local

.PHONY: all setup build demo test pytest install fuzz bench clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@rm -rf $(DEMO_OUT)
	$(BUILD)/portkit analyse -i $(EXAMPLE) -o $(DEMO_OUT) -v 2.1.0

# After the tests: which torch versions the Python tests ran under (from ctest's log).
PYTEST_RAN = grep -h -e '^pytest under torch' -e '^SKIPPED: no torch' $(BUILD)/Testing/Temporary/LastTest.log || true

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(PYTEST_RAN)

pytest: build
	@cd $(BUILD) && ctest --output-on-failure -R '^pytest_'
	@$(PYTEST_RAN)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

fuzz: setup
	@bash tests/fuzz/run_fuzz.sh

bench: build
	@$(BUILD)/bench/analyse_bench

clean:
	rm -rf $(BUILD) out
