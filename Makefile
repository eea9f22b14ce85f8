# The C engine as a plain library, its unit tests under ASan+UBSan, and the
# one command that runs every test: `make test`.
CC      ?= cc
CFLAGS  ?= -std=c11 -O1 -g -Wall -Wextra -Werror
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
INC     := -Iinclude -Iengine
ENGINE  := $(sort $(wildcard engine/*.c))
CTESTS  := $(sort $(wildcard tests/c/test_*.c))
BUILD   := build/c
PYTHON  ?= python3

.PHONY: all lib ctest pytest lint test install bench bench-dpor clean

all: lib

lib: $(BUILD)/libchaossloth.a

$(BUILD)/libchaossloth.a: $(ENGINE) include/chaossloth.h engine/internal.h
	@mkdir -p $(BUILD)/obj
	@for f in $(ENGINE); do $(CC) $(CFLAGS) $(INC) -c $$f -o $(BUILD)/obj/$$(basename $$f .c).o || exit 1; done
	ar rcs $@ $(BUILD)/obj/*.o

# Each tests/c/test_*.c is a program linked with the engine built with
# sanitizers; it prints "N passed, N failed" and exits non-zero on failure.
$(BUILD)/san/%: tests/c/%.c $(ENGINE) tests/c/ctest.h include/chaossloth.h engine/internal.h
	@mkdir -p $(BUILD)/san
	@$(CC) $(CFLAGS) $(SAN) $(INC) -Itests/c $< $(ENGINE) -lm -o $@

ctest: $(patsubst tests/c/%.c,$(BUILD)/san/%,$(CTESTS))
	@set -e; for t in $^; do echo "== $$t"; ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $$t; done

install:
	$(PYTHON) -m pip install -q -e '.[test]'

pytest:
	$(PYTHON) -m pytest -q

# Python style: ruff, pinned so that a new release cannot turn CI red.
lint:
	$(PYTHON) -m pip install -q ruff==0.17.6
	$(PYTHON) -m ruff check src tests bench
	$(PYTHON) -m ruff format --check src tests bench

# The contract: installs what it needs, then runs every test (C and Python).
test: install lint ctest pytest

bench: $(BUILD)/bench_recording_overhead
	$(PYTHON) -m pip install -q -e '.[bench]'
	$(PYTHON) bench/loop_overhead.py
	$(PYTHON) bench/capture_overhead.py
	$(BUILD)/bench_recording_overhead
	$(MAKE) -s bench-dpor
	$(PYTHON) bench/pipeline.py

$(BUILD)/bench_recording_overhead: bench/recording_overhead.c $(ENGINE)
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -O2 -Wall -Wextra $(INC) $< $(ENGINE) -lm -o $@

# the C classics (readers, lastzero, indexer, filesystem), then the seed workload through the
# asyncio path; bench/dpor_classic.py --help for options (--quick, --row-seconds S)
bench-dpor: $(BUILD)/bench_dpor_classic
	$(PYTHON) bench/dpor_classic.py $(BENCH_ARGS)

$(BUILD)/bench_dpor_classic: bench/dpor_classic.c $(ENGINE)
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -O2 -Wall -Wextra $(INC) $< $(ENGINE) -lm -o $@

clean:
	rm -rf build *.egg-info src/*.egg-info src/chaossloth/*.so
