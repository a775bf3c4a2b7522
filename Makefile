# Two commands do all set-up on a fresh machine:
#   make run    creates .venv, installs stencil with MPI, runs the main job under mpirun
#   make test   creates .venv if needed, runs every test (MPI tests under a real mpirun)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RANKS  ?= 8
CASE   ?= cases/heat_4096.yaml

.PHONY: run test bench venv clean

$(BIN)/stencil: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[mpi,vtk,dev]'
	touch $@

venv: $(BIN)/stencil

run: venv
	PATH=$(CURDIR)/$(BIN):$$PATH mpirun -n $(RANKS) stencil run $(CASE) --overwrite

test: venv
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -q

bench: venv
	$(BIN)/stencil bench --size 4096 --dtype float64 --repeats 7

clean:
	rm -rf $(VENV) .pytest_cache
