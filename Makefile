# Two commands do all set-up on a fresh machine:
#   make run    creates .venv, installs stencil with MPI (and compiles numba's kernels for the shipped cases:
#               tools/warm_cache.py, so that their first runs load them instead), runs the main job under mpirun
#               (8 ranks where there are at least 8 cores, else one per core)
#   make test   creates .venv if needed, runs every test (MPI tests under a real mpirun) in two workers, a file each
#               at a time (pytest-xdist: module fixtures stay in one process), and lists the 25 slowest
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CORES  := $(shell nproc 2>/dev/null || echo 1)
RANKS  ?= $(shell [ $(CORES) -ge 8 ] && echo 8 || echo $(CORES))
CASE   ?= cases/heat_4096.yaml

.PHONY: run test bench docs venv clean

$(BIN)/stencil: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip 'setuptools>=77'
	$(BIN)/python -m pip install -q -e '.[mpi,vtk,dev]'
	$(BIN)/python tools/warm_cache.py --quiet
	touch $@

venv: $(BIN)/stencil

run:
	@echo "make run: $(RANKS) MPI ranks ($(CORES) cores here; 8 where there are at least 8; RANKS=N to choose): $(CASE)"
	@$(MAKE) --no-print-directory venv
	PATH=$(CURDIR)/$(BIN):$$PATH mpirun -n $(RANKS) stencil run $(CASE) --overwrite

test: venv
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=25

docs: venv   # docs/case_file.md and docs/command_line.md from the code (tests/test_docs.py checks them)
	$(BIN)/stencil docs

bench: venv
	$(BIN)/stencil bench --size 4096 --dtype float64 --repeats 7

clean:
	rm -rf $(VENV) .pytest_cache
