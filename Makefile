# gpuctl: thin front end over CMake (docs/ARCHITECTURE.md, "Build").
#   make          build into build/ (bin/gpuctl, bin/nvsim, lib/libgpuctl.so, sim/libnvidia-ml.so.1)
#   make demo     build, then run gpuctl list, topo, info, select, run, ps, watch and top on a simulated DGX A100
#   make test     clang-format check, then the whole suite twice (normal, ASan+UBSan; both
#                 -Werror), then a short bounded fuzz run of every fuzz target
#   make bench    benchmarks; results table in bench/RESULTS.md
#   make fuzz     longer fuzz runs (FUZZ_SECONDS per target, default 60)
#   make install  honours PREFIX (default /usr/local) and DESTDIR
#   make package-check  builds the Debian packages (debian/), checks them with lintian, installs
#                 them, tries them and purges them (tests/cli/test_debian_packages.py; as root;
#                 not part of `make test`: it changes /usr)
#   make fresh-check    make demo, make test and make package-check in a fresh Debian 12 root
#                 (debootstrap + chroot; as root; scripts/fresh-check.sh)
# Missing Debian packages are installed by scripts/deps.sh (apt-get as root, else it prints
# the exact command and stops).

BUILD        ?= build
ASAN_BUILD   ?= build-asan
FUZZ_BUILD   ?= build-fuzz
PREFIX       ?= /usr/local
JOBS         ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 60
SMOKE_SECONDS ?= 10
CTEST_FLAGS  ?= --output-on-failure
# Debian's python3, never one that comes earlier on PATH
PYTHON       ?= /usr/bin/python3

CMAKE_COMMON = -DGPUCTL_WERROR=ON -DCMAKE_INSTALL_PREFIX=$(PREFIX)
# no "make[3]: Entering directory" lines from the build tool's own make
MAKEFLAGS += --no-print-directory

.PHONY: all build demo test test-normal test-asan fuzz fuzz-smoke bench install format \
	format-check deps deps-build package-check fresh-check clean

all: build

deps-build:
	@scripts/deps.sh build

deps:
	@scripts/deps.sh all

build: deps-build
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_COMMON) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# The demo shows gpuctl's output, not the build's: the build goes to $(BUILD)/build.log, shown
# only when it fails.
demo: deps-build
	@echo "building gpuctl (output in $(BUILD)/build.log) ..."
	@mkdir -p $(BUILD)
	@{ cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_COMMON) && \
	   cmake --build $(BUILD) -j$(JOBS); } >$(BUILD)/build.log 2>&1 || \
	   { tail -n 40 $(BUILD)/build.log; echo "gpuctl: the build failed: $(BUILD)/build.log"; exit 1; }
	@scripts/demo.sh $(BUILD)

test: deps format-check test-normal test-asan fuzz-smoke

test-normal: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUCTL_TESTS=ON $(CMAKE_COMMON) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)
	ctest --test-dir $(BUILD) -j$(JOBS) $(CTEST_FLAGS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUCTL_SANITIZE=ON -DGPUCTL_TESTS=ON $(CMAKE_COMMON) >/dev/null
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --test-dir $(ASAN_BUILD) -j$(JOBS) $(CTEST_FLAGS)

$(FUZZ_BUILD)/.configured: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUCTL_FUZZ=ON \
		-DGPUCTL_TESTS=OFF $(CMAKE_COMMON) >/dev/null
	@touch $@

fuzz-smoke: $(FUZZ_BUILD)/.configured
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz-all
	@scripts/fuzz.sh $(FUZZ_BUILD) $(SMOKE_SECONDS)

fuzz: $(FUZZ_BUILD)/.configured
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz-all
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: build
	@scripts/deps.sh bench
	@$(PYTHON) bench/bench.py --build $(BUILD) --out bench/RESULTS.md

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

package-check: build
	@scripts/deps.sh pkg
	cd tests/cli && GPUCTL_BUILD_DIR=$(abspath $(BUILD)) GPUCTL_SOURCE_DIR=$(CURDIR) \
		PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m unittest -v test_debian_packages

fresh-check:
	@scripts/deps.sh pkg
	@scripts/fresh-check.sh

format:
	@git ls-files '*.c' '*.h' | xargs clang-format -i

format-check:
	@scripts/format-check.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
