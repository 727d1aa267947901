# bert_fin — the two commands: `make demo` (the main job end to end) and `make test` (the suite).
# Both install what is missing first (make install: .venv/ with Python 3.11; a second run is a no-op).
#   GPU=1 make install   -> tensorflow[and-cuda] and Horovod with NCCL on a GPU host.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
GPU ?= 0
export GPU VENV

.PHONY: install test test-fast demo doctor bench clean

install:
	@bash tools/install.sh

test: install
	@echo "[test] running the test suite (tiny configs; mpirun tests included)"
	$(PY) -m pytest tests -q -ra --durations=15

test-fast: install
	$(PY) -m pytest tests -q -ra -m "not mpi and not slow"

demo: install
	@bash tools/demo.sh

doctor: install
	$(PY) -m bert_fin.doctor

bench: install
	@for b in bench/*.py; do echo "=== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf demo_out .pytest_cache
