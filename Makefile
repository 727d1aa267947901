# bert_fin — the two commands: `make demo` (the main job end to end) and `make test` (the suite).
# Both install what is missing first (make install: .venv/ with Python 3.11; a second run is a no-op).
#   GPU=1 make install   -> tensorflow[and-cuda] and Horovod with NCCL on a GPU host.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
GPU ?= 0
export GPU VENV

.PHONY: install test test-slow test-fast demo doctor bench bench-quick clean

install:
	@bash tools/install.sh

# The suite runs on TEST_WORKERS processes (pytest-xdist; one more than the cores here, at most 4):
# its tests set TensorFlow to one thread each and wait a fair share of their time on the programs
# they start, so a worker more than the cores keeps them busy (2 cores: 2 workers kept 1.67 busy).
# TEST_WORKERS=0 runs it in this one process. make test-slow (mpirun jobs, kill -9 timing) runs on
# SLOW_TEST_WORKERS, the cores (at most 4).
CORES := $(shell nproc 2>/dev/null || echo 1)
TEST_WORKERS ?= $(shell n=$$(( $(CORES) + 1 )); [ $$n -gt 4 ] && n=4; echo $$n)
SLOW_TEST_WORKERS ?= $(shell n=$(CORES); [ $$n -gt 4 ] && n=4; echo $$n)

test: install
	@echo "[test] the suite without the slow end-to-end cases on $(TEST_WORKERS) worker(s) (make test-slow: those)"
	$(PY) -m pytest tests -q -ra -n $(TEST_WORKERS) --durations=15 -m "not slow"

# The slow end-to-end cases (pytest.ini: kill -9 resume, mpirun jobs, the fake two hosts, most
# benches' --quick); CI runs them after `make test`.
test-slow: install
	@echo "[test-slow] the slow end-to-end cases on $(SLOW_TEST_WORKERS) worker(s)"
	$(PY) -m pytest tests -q -ra -n $(SLOW_TEST_WORKERS) --durations=15 -m slow

test-fast: install
	$(PY) -m pytest tests -q -ra -n $(TEST_WORKERS) -m "not mpi and not slow"

demo: install
	@bash tools/demo.sh

doctor: install
	$(PY) -m bert_fin.doctor

# Every bench script (bench/_*.py are helpers), one after the other; the first failure stops the
# run and is named. compare_export_hf checks an export rather than timing anything and needs a
# checkpoint of yours: here it checks a tiny random one (its --quick). bench-quick: every script's
# --quick (tiny sizes, synthetic inputs: seconds each, figures meaningless), as the suite runs them.
BENCH_SCRIPTS := $(sort $(filter-out bench/_%,$(wildcard bench/*.py)))
define run_benches
	@for b in $(BENCH_SCRIPTS); do \
	  flags="$(1)"; [ "$$b" = bench/compare_export_hf.py ] && flags="--quick"; \
	  echo "=== $$b $$flags"; start=$$(date +%s); \
	  $(PY) $$b $$flags || { rc=$$?; echo "[bench] FAILED: $$b $$flags (exit $$rc)" >&2; exit 1; }; \
	  echo "=== $$b: $$(( $$(date +%s) - start )) s"; \
	done
endef

bench: install
	$(call run_benches,)

bench-quick: install
	$(call run_benches,--quick)

clean:
	rm -rf demo_out .pytest_cache
