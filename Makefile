# Everything runs in the project's own virtual environment, .venv, made on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
TITO := $(BIN)/tito

.PHONY: demo test bench clean

$(BIN)/tito: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "TinyTorch needs Python 3.11 or newer; set PYTHON=/path/to/python3.11"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

# The main job: build the student notebooks and the reference package, then grade every stage twice:
# on the reference solutions (full marks expected) and on the untouched student notebooks (0 expected),
# then train the milestone MLP on MNIST with the reference package.
demo: $(BIN)/tito
	$(BIN)/python -m tito.demo

test: $(BIN)/tito
	$(BIN)/python -m pytest tests

# Speed against PyTorch on the CPU, as a ratio measured in one run (installs the optional torch extra).
bench: $(BIN)/tito
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(TITO) export --reference
	PYTHONPATH=build/reference $(BIN)/python benchmarks/mlp.py

clean:
	rm -rf build .tito
	find src/tinytorch -mindepth 1 -maxdepth 1 ! -name __init__.py -exec rm -rf {} +
