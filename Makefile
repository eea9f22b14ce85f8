# The C engine as a plain library, its unit tests under ASan+UBSan, and the
# one command that runs every test: `make test` (what CI runs: .ci/run).
#
# make test = the browser of the HTML report's tests (make browser) + lint (once) + C unit
# tests (once) + the Python suite on every
# interpreter of PYVERSIONS, each in its own virtualenv .venv-X.Y made with
# pyenv's newest X.Y.* (a missing one is an error, not a skip; the `slow` tests on
# SLOW_PY's interpreters only) + the extension
# built with ASan+UBSan running the loop, capture, runner and shared-DPOR tests.
CC      ?= cc
CFLAGS  ?= -std=c11 -O1 -g -Wall -Wextra -Werror
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
INC     := -Iinclude -Iengine
ENGINE  := $(sort $(wildcard engine/*.c))
CTESTS  := $(sort $(wildcard tests/c/test_*.c))
BUILD   := build/c
PYTHON  ?= python3
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# Interpreters of the Python suite; pyenv's root from `pyenv root`, else
# $PYENV_ROOT, else ~/.pyenv (CI runs without a login shell).
PYVERSIONS ?= 3.11 3.12 3.13
PYENV_ROOT ?= $(or $(shell pyenv root 2>/dev/null),$(HOME)/.pyenv)
LINT_PY    := $(firstword $(PYVERSIONS))
SAN_PY     ?= 3.12
# Interpreters that also run the tests marked `slow` (the heavier grammar sample, the repair
# suites, a real pip install); the others run everything else.  3.11 (the interpreter of
# DESIGN.md) and 3.13 (the most different bytecode and asyncio) are the two ends.
SLOW_PY    ?= 3.11 3.13
# pytest-xdist workers per suite: one per CPU (the suite is CPU-bound; tests share no files)
TEST_WORKERS ?= auto
SAN_DIR    := build/san-$(SAN_PY)
SAN_TESTS  := $(sort $(wildcard tests/test_loop_*.py tests/test_capture_*.py)) tests/test_runner.py \
	tests/test_share.py
VENVS      := $(foreach v,$(PYVERSIONS),.venv-$(v)/.installed)

.PHONY: all lib ctest pytest lint test install browser bench bench-dpor clean ext-sanitize \
	$(addprefix pytest-,$(PYVERSIONS)) $(addprefix ext-,$(PYVERSIONS)) \
	$(addprefix real-libraries-,$(PYVERSIONS))

all: lib

lib: $(BUILD)/libchaossloth.a

$(BUILD)/libchaossloth.a: $(ENGINE) include/chaossloth.h engine/internal.h
	@mkdir -p $(BUILD)/obj
	@for f in $(ENGINE); do $(CC) $(CFLAGS) $(INC) -c $$f -o $(BUILD)/obj/$$(basename $$f .c).o || exit 1; done
	ar rcs $@ $(BUILD)/obj/*.o

# Each tests/c/test_*.c is a program linked with the engine built with
# sanitizers; it prints "N passed, N failed" and exits non-zero on failure.
# The engine's objects are compiled once with sanitizers and linked into each.
SAN_OBJ := $(patsubst engine/%.c,$(BUILD)/san/obj/%.o,$(ENGINE))
.SECONDARY: $(SAN_OBJ)

$(BUILD)/san/obj/%.o: engine/%.c include/chaossloth.h engine/internal.h
	@mkdir -p $(BUILD)/san/obj
	@$(CC) $(CFLAGS) $(SAN) $(INC) -c $< -o $@

$(BUILD)/san/%: tests/c/%.c $(SAN_OBJ) tests/c/ctest.h include/chaossloth.h engine/internal.h
	@$(CC) $(CFLAGS) $(SAN) $(INC) -Itests/c $< $(SAN_OBJ) -lm -o $@

ctest: $(patsubst tests/c/%.c,$(BUILD)/san/%,$(CTESTS))
	@set -e; for t in $^; do echo "== $$t"; ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $$t; done

# .venv-X.Y: a virtualenv of pyenv's newest CPython X.Y.* with the test tools (.tools) and the
# package installed as a user installs it: a regular, non-editable install into site-packages
# (.installed), redone whenever a source of the package changes, so that the suites test what
# ships, never the tree (an installed layout once differed from the tested one: issue 35).
PKG_SOURCES := $(sort $(shell find src/chaossloth ext engine include -type f \( -name '*.py' \
	-o -name '*.c' -o -name '*.h' -o -name '*.pyi' -o -name py.typed \) 2>/dev/null)) \
	pyproject.toml setup.py MANIFEST.in

.venv-%/.tools: pyproject.toml
	@py=$$(ls -d $(PYENV_ROOT)/versions/$*.*/bin/python$* 2>/dev/null | sort -V | tail -n 1); \
	if [ -z "$$py" ]; then \
		echo "make: no CPython $* under $(PYENV_ROOT)/versions (pyenv install $*)" >&2; exit 1; \
	fi; \
	echo "== .venv-$* from $$py"; \
	rm -rf .venv-$* && "$$py" -m venv .venv-$* && \
	.venv-$*/bin/python -m pip install -q setuptools wheel && \
	.venv-$*/bin/python -m pip install -q --no-build-isolation '.[test]' ruff==0.17.6 && \
	touch $@

# (pip's and setuptools' chatter goes to a log, shown only when the build fails)
.venv-%/.installed: .venv-%/.tools $(PKG_SOURCES)
	@mkdir -p build && .venv-$*/bin/python -m pip install --no-build-isolation --no-deps \
		--force-reinstall . >build/install-$*.log 2>&1 || { cat build/install-$*.log >&2; exit 1; }
	@.venv-$*/bin/python -c "import chaossloth._core as c, sys; \
		sys.exit(0 if 'site-packages' in c.__file__ else 'not the installed package: ' + c.__file__)"
	@touch $@

$(addprefix ext-,$(PYVERSIONS)): ext-%: .venv-%/.installed

# (stamps of a pattern chain: never deleted as intermediates)
.PRECIOUS: .venv-%/.tools .venv-%/.installed

install: $(addprefix ext-,$(PYVERSIONS))

$(addprefix pytest-,$(PYVERSIONS)): pytest-%: ext-%
	@echo "== Python suite on $$(.venv-$*/bin/python -c 'import sys; print(sys.version.split()[0])')"
	@CHAOSSLOTH_EXPECT_INSTALLED=1 .venv-$*/bin/python -m pytest -q -n $(TEST_WORKERS) \
		-m "not real_libraries$(if $(filter $*,$(SLOW_PY)),, and not slow)"

# The real-library tier (tests/test_real_libraries.py): published asyncio libraries installed
# from PyPI at pinned releases (cached in build/real-libs), on REAL_PY's interpreters.
REAL_PY ?= 3.11 3.13
$(addprefix real-libraries-,$(PYVERSIONS)): real-libraries-%: ext-%
	@echo "== real-library tier on $$(.venv-$*/bin/python -c 'import sys; print(sys.version.split()[0])')"
	@rm -f build/real-libs/results-$*.jsonl
	@CHAOSSLOTH_EXPECT_INSTALLED=1 .venv-$*/bin/python -m pytest -q -n $(TEST_WORKERS) \
		-m real_libraries tests/test_real_libraries.py tests/test_real_suites.py

# One interpreter, given by PYTHON (which must have the package installed).
pytest:
	$(PYTHON) -m pytest -q

# Python style: ruff, pinned so that a new release cannot turn CI red.
lint: .venv-$(LINT_PY)/.tools
	.venv-$(LINT_PY)/bin/ruff check src tests bench
	.venv-$(LINT_PY)/bin/ruff format --check src tests bench

# _core built with ASan+UBSan (into $(SAN_DIR), beside a copy of the package),
# running the loop, capture, runner and shared-DPOR tests.  The interpreter is not
# instrumented, so the ASan runtime is preloaded; CPython's own allocations
# are not leak-checked; PYTHONMALLOC=malloc lets ASan see the PyMem/PyObject
# allocations pymalloc would otherwise serve.  Any report aborts the run (halt_on_error, and
# -fno-sanitize-recover for UBSan), which fails the target and prints the
# report (kept in $(SAN_DIR)/report.*: pytest would swallow a dying test's stderr).
ext-sanitize: .venv-$(SAN_PY)/.installed
	@mkdir -p $(SAN_DIR) && rm -rf $(SAN_DIR)/chaossloth && cp -R src/chaossloth $(SAN_DIR)/ && \
		rm -f $(SAN_DIR)/chaossloth/*.so
	@CFLAGS="$(SAN)" LDFLAGS="-fsanitize=address,undefined" .venv-$(SAN_PY)/bin/python setup.py -q \
		build_ext --build-lib $(SAN_DIR) --build-temp $(SAN_DIR)/obj >$(SAN_DIR)/build.log 2>&1 \
		|| { cat $(SAN_DIR)/build.log >&2; exit 1; }
	@echo "== loop, capture, runner and shared-DPOR tests under ASan+UBSan ($(SAN_PY))"
	@rm -f $(SAN_DIR)/report.*; \
	export LD_PRELOAD="$$($(CC) -print-file-name=libasan.so)" PYTHONPATH="$(SAN_DIR)" \
		ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:quarantine_size_mb=0:log_path=$(SAN_DIR)/report PYTHONMALLOC=malloc \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$(SAN_DIR)/report; \
	.venv-$(SAN_PY)/bin/python -c "import chaossloth._core as c, sys; \
		sys.exit(0 if '/$(SAN_DIR)/' in c.__file__ else 'not the sanitized _core: ' + c.__file__)" && \
	.venv-$(SAN_PY)/bin/python -m pytest -q -n $(TEST_WORKERS) -p no:cacheprovider $(SAN_TESTS); rc=$$?; \
	if ls $(SAN_DIR)/report.* >/dev/null 2>&1; then cat $(SAN_DIR)/report.* >&2; exit 1; fi; \
	exit $$rc

# The browser of the HTML report's tests (tests/test_html_report.py): Debian's chromium, run
# headless.  Installed with apt-get when it is absent and we are root; otherwise (or when
# apt-get fails) said here, and those tests skip with the reason.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "== installing chromium (apt-get) for the HTML report's browser tests"; \
		mkdir -p build; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q chromium >build/browser.log 2>&1 || \
			{ apt-get update -q >>build/browser.log 2>&1 && \
			  apt-get install -y -q chromium >>build/browser.log 2>&1; } || \
			{ tail -n 5 build/browser.log >&2; \
			  echo "make: chromium could not be installed: the browser tests will skip" >&2; }; \
	else \
		echo "make: no chromium and not root: the HTML report's browser tests will skip" \
			"(apt-get install chromium)" >&2; \
	fi

# The contract: installs what it needs, then runs every test (C and Python).
test: install browser lint ctest $(addprefix pytest-,$(PYVERSIONS)) \
	$(addprefix real-libraries-,$(REAL_PY)) ext-sanitize

bench: $(BUILD)/bench_recording_overhead
	$(PYTHON) -m pip install -q -e '.[bench]'
	$(PYTHON) bench/loop_overhead.py
	$(PYTHON) bench/capture_overhead.py
	$(BUILD)/bench_recording_overhead
	$(MAKE) -s bench-dpor
	$(PYTHON) bench/pipeline.py
	$(PYTHON) bench/jobs.py
	$(PYTHON) bench/patch_cost.py

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
	rm -rf build *.egg-info src/*.egg-info src/chaossloth/*.so .venv-*
