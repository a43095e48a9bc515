# Everything runs in the project's own virtual environment, .venv, made on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
TITO := $(BIN)/tito

.PHONY: demo test test-fast test-stage lint mutants bench bench-grading bench-loop clean

$(BIN)/tito: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "TinyTorch needs Python 3.11 or newer; set PYTHON=/path/to/python3.11"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,cluster]'
	@touch $@

# The main job: build the student notebooks and the reference package, then grade every stage twice:
# on the reference solutions (full marks expected) and on the untouched student notebooks (0 expected),
# then train the milestone MLP on MNIST with the reference package.
demo: $(BIN)/tito
	$(BIN)/python -m tito.demo

# Three pytest-xdist workers on the two cores: many slow tests wait (a kernel or a box starting, a sleeper,
# a deadline), and the third keeps the cores busy meanwhile (tests/conftest.py says how the tests are shared
# out; docs/maintainers.md has the measurement); --durations lists the slowest, to keep the 15-minute
# budget in view.
test: lint
	$(BIN)/python -m pytest tests -n 3 --durations=30

# The in-process layer: no kernel, no sandbox, no nbgrader, no test that waits out a budget; on the same two
# workers as `make test`: about a minute (54 s on two shared cores; docs/maintainers.md).
test-fast: $(BIN)/tito
	$(BIN)/python -m pytest tests -n 2 -m "not slow"

# One stage's tests, those parametrised by it (the course's and the class's fixtures are still built whole):
# make test-stage N=12
test-stage: $(BIN)/tito
	@test -n "$(N)" || { echo "say which stage: make test-stage N=12"; exit 2; }
	$(BIN)/python -m pytest tests -n 2 --stage $(N)

lint: $(BIN)/tito
	$(BIN)/ruff check tito tests milestones benchmarks
	$(BIN)/mypy

# Suite strength: grade 80 single-point mutants of each stage's reference with its hidden suite; a stage
# fails below a 90% kill rate. Every stage runs; the survivors are printed for a maintainer to judge.
mutants: $(BIN)/tito
	@status=0; for stage in $$(ls solutions | cut -c1-2); do $(TITO) mutants $$stage || status=1; done; exit $$status

# Speed against PyTorch on the CPU, as a ratio measured in one run (installs the optional torch extra).
bench: $(BIN)/tito
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(TITO) export --reference
	PYTHONPATH=build/reference $(BIN)/python benchmarks/bench.py

# Throughput of official grading: a class of 40 graded with -j 1, -j 2 and on a local Dask cluster of 1 and 2
# workers, the coordinator's overhead per job, and the estimate for a course (benchmarks/grading.py)
bench-grading: $(BIN)/tito
	$(BIN)/python benchmarks/grading.py

# How long a student waits for `tito test NN`, every stage, untouched and complete (benchmarks/student_loop.py)
bench-loop: $(BIN)/tito
	$(BIN)/python benchmarks/student_loop.py

clean:
	rm -rf build .tito
	find src/tinytorch -mindepth 1 -maxdepth 1 ! -name __init__.py -exec rm -rf {} +
