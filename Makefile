# The README's two commands:
#   make demo   set up .venv and run the main job on the embedded default (no GPU, no API key)
#   make test   set up .venv and run the whole test suite
#   make bench  set up .venv and run every benchmark's quick mode; writes runs/bench/table.md
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test bootstrap lint bench

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	$(PY) -m astra_verl.demo

test: bootstrap
	$(PY) -m pytest tests -q

bench: bootstrap
	$(PY) bench/run_all.py --out runs/bench

lint: bootstrap
	$(PY) -m ruff check . && $(PY) -m ruff format --check .
