# Convenience targets for shaped. Everything here is a thin wrapper over CMake and CTest;
# see README.md for the plain CMake commands.
#
#   make demo       install missing Debian packages, build, run the walkthrough examples
#   make test       install missing Debian packages, build and test with g++ and clang++
#   make test-gcc   build and test with g++ only          (build/gcc)
#   make test-clang build and test with clang++ only      (build/clang)
#   make asan       build and test with ASan + UBSan      (build/asan)
#   make fuzz       fuzz the .npy, safetensors, GGUF, GPT-2 and llama2.c tokenizer readers, FUZZ_SECONDS each (build/fuzz)
#   make bench      shaped vs hand-written vs PyTorch, one table (build/gcc/bench/results.json)
#   make compile-times  compile time and peak memory of the contract programs, examples and user programs
#   make fixtures   regenerate the PyTorch parity fixtures (needs python3-torch)
#   make deps       install missing Debian packages (as root)
#   make clean      remove build/

CXX_GCC    ?= g++
CXX_CLANG  ?= clang++-14
JOBS       ?= $(shell nproc)
BUILD_TYPE ?= Release
# The Python with torch and numpy is Debian's, whatever else is first on PATH.
PYTHON     ?= /usr/bin/python3
# Threads for every side of `make bench`, and repetitions of each case (the fastest is reported).
BENCH_THREADS     ?= 1
BENCH_REPETITIONS ?= 5
BENCH_ENV = OPENBLAS_NUM_THREADS=$(BENCH_THREADS) OMP_NUM_THREADS=$(BENCH_THREADS)
# Seconds `make fuzz` runs each fuzzer, and the fuzzers (targets of tests/fuzz, each
# shaped_<name>_fuzz with a seed corpus tests/fuzz/corpus/<name> and a dictionary <name>.dict).
FUZZ_SECONDS ?= 600
FUZZERS := npy safetensors gguf gpt2_tokenizer gpt2_config llama_checkpoint llama_tokenizer

# Walkthrough executables that `make demo` builds and runs, in this order. Each is the name of
# a target in examples/ and of its executable in build/gcc/examples/. Append new sections here.
EXAMPLES := section1_attention section2_unit_variance section3_kv_cache section4_gpt

# Debian packages to build and test shaped.
DEPS_BUILD := g++ clang-14 cmake make pkg-config libxtensor-dev libxsimd-dev \
              xtl-dev libxtensor-blas-dev libopenblas-dev nlohmann-json3-dev catch2 \
              libbenchmark-dev libclang-rt-14-dev libboost-dev libopenmpi-dev openmpi-bin
# Debian packages only the side-by-side PyTorch scripts need (make fixtures, make bench).
DEPS_PYTHON := python3-torch python3-numpy

# Ninja when it is installed, Unix Makefiles otherwise. The generator is only given when a
# build directory is first configured, since CMake refuses to change it afterwards.
GENERATOR := $(if $(shell command -v ninja 2>/dev/null),Ninja,Unix Makefiles)

# $(call configure,<build dir>,<compiler>,<build type>,<extra cmake args>)
define configure
cmake -S . -B $(1) $(if $(wildcard $(1)/CMakeCache.txt),,-G "$(GENERATOR)") \
	-DCMAKE_BUILD_TYPE=$(3) -DCMAKE_CXX_COMPILER=$(2) $(4)
endef

CTEST_FLAGS := --output-on-failure --no-tests=error -j $(JOBS)

# $(call ensure_packages,<packages>): install those not installed yet; nothing when all are.
define ensure_packages
missing=""; \
for pkg in $(1); do \
	status=$$(dpkg-query -W -f='$${Status}' "$$pkg" 2>/dev/null || true); \
	if [ "$$status" != "install ok installed" ]; then missing="$$missing $$pkg"; fi; \
done; \
if [ -n "$$missing" ]; then \
	if [ "$$(id -u)" -ne 0 ]; then \
		echo "shaped: missing Debian packages:$$missing" >&2; \
		echo "shaped: run 'make $@' as root, or install them: apt-get install$$missing" >&2; \
		exit 1; \
	fi; \
	echo "shaped: installing Debian packages:$$missing"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update && apt-get install -y $$missing; \
fi
endef

# The recipes below run CMake builds that are parallel themselves: keep make serial, so that
# `make test` runs g++ first and clang++ second even under make -j.
.NOTPARALLEL:
.PHONY: bench-llama-cpp all deps deps-python build demo test test-gcc test-clang asan fuzz bench compile-times fixtures clean

all: build

deps:
	@$(call ensure_packages,$(DEPS_BUILD))

deps-python:
	@$(call ensure_packages,$(DEPS_PYTHON))

build:
	$(call configure,build/gcc,$(CXX_GCC),$(BUILD_TYPE))
	cmake --build build/gcc -j $(JOBS)

demo: deps
	$(call configure,build/gcc,$(CXX_GCC),$(BUILD_TYPE))
	cmake --build build/gcc -j $(JOBS) --target $(EXAMPLES)
	@set -e; for example in $(EXAMPLES); do \
		echo "==> build/gcc/examples/$$example"; \
		./build/gcc/examples/$$example; \
	done

test: deps test-gcc test-clang

test-gcc: deps build
	ctest --test-dir build/gcc $(CTEST_FLAGS)

test-clang: deps
	$(call configure,build/clang,$(CXX_CLANG),$(BUILD_TYPE),-DSHAPED_BUILD_BENCH=OFF)
	cmake --build build/clang -j $(JOBS)
	ctest --test-dir build/clang $(CTEST_FLAGS)

# Line tables for readable reports, and -O1 as the sanitizers' docs advise, since the tests run
# real kernels: under the sanitizers RelWithDebInfo's -O2 -g compiled tests/unit/train_test.cpp
# in 349 s, -O1 -g1 in 129 s, and a whole build at -O2 -g took longer than a working session.
asan: deps
	$(call configure,build/asan,$(CXX_GCC),RelWithDebInfo,-DSHAPED_SANITIZE=ON "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
	cmake --build build/asan -j $(JOBS)
	ctest --test-dir build/asan $(CTEST_FLAGS)

# Each fuzzer in turn, one process, on a corpus kept between runs in build/fuzz/corpus/<name>,
# which the committed seeds are copied into (never over an existing file); crashing inputs are
# saved in build/fuzz/artifacts/<name>/. libFuzzer prints its final stats (runs, exec/s, ...).
fuzz: deps
	$(call configure,build/fuzz,$(CXX_CLANG),$(BUILD_TYPE),-DSHAPED_BUILD_FUZZ=ON \
		-DSHAPED_BUILD_TESTS=OFF -DSHAPED_BUILD_EXAMPLES=OFF -DSHAPED_BUILD_BENCH=OFF)
	cmake --build build/fuzz -j $(JOBS) --target $(FUZZERS:%=shaped_%_fuzz)
	@set -e; for name in $(FUZZERS); do \
		echo "==> shaped_$${name}_fuzz for $(FUZZ_SECONDS) s"; \
		mkdir -p build/fuzz/corpus/$$name build/fuzz/artifacts/$$name; \
		cp -n tests/fuzz/corpus/$$name/* build/fuzz/corpus/$$name/; \
		./build/fuzz/tests/fuzz/shaped_$${name}_fuzz -max_total_time=$(FUZZ_SECONDS) \
			-print_final_stats=1 -timeout=30 -dict=tests/fuzz/$$name.dict \
			-artifact_prefix=build/fuzz/artifacts/$$name/ \
			build/fuzz/corpus/$$name; \
	done

# shaped, the hand-written baselines and PyTorch eager on the same cases, one table. Every side
# runs with BENCH_THREADS threads (OpenBLAS's, shaped's pool, torch.set_num_threads): 1 by
# default, so that a machine shared with other work disturbs the comparison least (single-
# threaded runs compare process CPU time). Results: build/gcc/bench/results.json.
bench: deps deps-python
	$(call configure,build/gcc,$(CXX_GCC),$(BUILD_TYPE),-DSHAPED_BUILD_BENCH=ON)
	cmake --build build/gcc -j $(JOBS) --target shaped_bench shaped-run shaped-quantize
	$(BENCH_ENV) ./build/gcc/bench/shaped_bench --benchmark_repetitions=$(BENCH_REPETITIONS) \
		--benchmark_display_aggregates_only=true \
		--benchmark_out=build/gcc/bench/shaped.json --benchmark_out_format=json
	$(BENCH_ENV) $(PYTHON) bench/torch_reference.py --threads $(BENCH_THREADS) \
		--repetitions $(BENCH_REPETITIONS) --out build/gcc/bench/torch.json
	$(BENCH_ENV) $(PYTHON) bench/shaped_run_memory.py --shaped-run build/gcc/apps/shaped-run \
		--shaped-quantize build/gcc/apps/shaped-quantize --llama2c $${TMPDIR:-/tmp}/shaped_stories110m_random.bin \
		--workdir build/gcc/bench --out build/gcc/bench/memory.json
	$(PYTHON) bench/report.py --threads $(BENCH_THREADS) --shaped build/gcc/bench/shaped.json \
		--torch build/gcc/bench/torch.json --memory build/gcc/bench/memory.json --out build/gcc/bench/results.json

# The llama.cpp column of the quantized benchmarks (tools/llama_cpp_bench.sh): builds llama.cpp's
# tools first when build/llama.cpp has none (tools/llama_cpp_peer.sh, minutes; its fixtures go to
# the build dir, not over the committed ones), then times both sides, one thread each.
bench-llama-cpp: deps deps-python
	$(call configure,build/gcc,$(CXX_GCC),$(BUILD_TYPE),-DSHAPED_BUILD_BENCH=ON)
	cmake --build build/gcc -j $(JOBS) --target shaped_bench
	test -x build/llama.cpp/cmake/bin/llama-bench || OUT=build/llama.cpp/fixtures tools/llama_cpp_peer.sh
	$(BENCH_ENV) tools/llama_cpp_bench.sh build/gcc/bench/shaped_bench

# Wall time and peak memory of compiling the contract programs and the examples, without and
# with shaped.hpp precompiled, the section 1 program's against the same program on plain
# xtensor + cblas, and the time of building the whole suite (tools/compile_times.sh).
compile-times: deps
	CXX=$(CXX_GCC) tools/compile_times.sh build/compile-times

fixtures: deps-python
	@if [ -f tests/parity/make_fixtures.py ]; then \
		$(PYTHON) tests/parity/make_fixtures.py; \
	else \
		echo "shaped: tests/parity/make_fixtures.py does not exist; nothing to do"; \
	fi

clean:
	rm -rf build
