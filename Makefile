# portkit — the two commands of the README:
#   make demo   set-up + build + run the migration analysis on the bundled example
#   make test   set-up + build + every test
BUILD ?= build
JOBS ?= $(shell nproc)
EXAMPLE ?= examples/cifar_cuda
DEMO_OUT ?= out/demo

.PHONY: all setup build demo test unit golden pytest fuzz bench clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@rm -rf $(DEMO_OUT)
	$(BUILD)/portkit analyse -i $(EXAMPLE) -o $(DEMO_OUT) -v 2.1.0

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

fuzz: setup
	@bash tests/fuzz/run_fuzz.sh

bench: build
	@$(BUILD)/bench/analyse_bench

clean:
	rm -rf $(BUILD) out
