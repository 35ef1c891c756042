# Thin front end over CMake/CTest. `make check` and `make demo` work on a fresh Debian
# machine: they install what is missing first (scripts/install-deps).
BUILD      ?= build
TSAN_BUILD ?= build-tsan
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc)

.PHONY: all deps configure build check check-tsan demo bench-overhead install clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Every test: unit, end-to-end under mpirun, coordinator with its own redis-servers,
# examples and the emulator. Serial: the MPI tests already oversubscribe the 2 cores.
check: build
	@ctest --test-dir $(BUILD) --output-on-failure --timeout 900

# The runtime's and the coordinator's tests again, built with ThreadSanitizer.
check-tsan: deps
	@cmake -S . -B $(TSAN_BUILD) -G Ninja -DPPIOS_SANITIZE=thread -DPPIOS_RUNTIME_ONLY=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS)
	@TSAN_OPTIONS="die_after_fork=0 $(TSAN_OPTIONS)" ctest --test-dir $(TSAN_BUILD) \
	  --output-on-failure --timeout 900 -R '^(runtime\.|e2e\.|coordinator\.conformance|coordinator\.redis_failures)'

demo: build
	@scripts/demo $(BUILD)

bench-overhead: build
	@bench/runtime-overhead/run $(BUILD)

install: build
	@cmake --install $(BUILD)

clean:
	@rm -rf $(BUILD) $(TSAN_BUILD)
