# Distributed RL with Ray: every workshop command. `make help` lists them.
# Everything runs in .venv, created on first use; re-installs when pyproject.toml changes.

PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
# Two installs: what attendees need (the notebooks; RLLIB=1 adds RLlib for notebook 07) and
# everything (tests, decks, benchmarks). Each stamp is renewed when pyproject.toml or the lock
# changes. Every install takes its versions from requirements/lock.txt (`make lock`), the
# tested environment, as pip constraints.
comma := ,
LAB_EXTRAS := attendee$(if $(RLLIB),$(comma)rllib,)
LAB_STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(LAB_EXTRAS))
STAMP      := $(VENV)/.installed-all
LOCK       := requirements/lock.txt
# Extra pip arguments, e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu on a Linux laptop
# without a GPU (the CPU build of torch is ~200 MB instead of several GB).
TORCH_INDEX ?=
PIP_ARGS := -c $(LOCK) $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX),)
# Jupyter refuses to run as root unless told; containers often run as root.
LAB_ARGS := $(if $(filter 0,$(shell id -u)),--allow-root,)

# Offline install: make lab WHEELHOUSE=wheelhouse installs from that folder with no network.
WHEELHOUSE ?=
PIP_ARGS += $(if $(WHEELHOUSE),--no-index --find-links $(WHEELHOUSE),)

.PHONY: help install lab lab-setup test unit nbval lint notebooks student slides wheelhouse chromium bench fresh refresh clean lock

help:
	@echo "make lab        set up (first time) and open your workshop/ folder (RLLIB=1: with RLlib)"
	@echo "make workshop-refresh  a fresh workshop/ (the old one is kept as workshop.backup-<time>)"
	@echo "make test       set up everything (first time) and run every test"
	@echo "make notebooks  re-execute every notebook in full mode, in place (refreshes outputs)"
	@echo "make lint       ruff on the code and the notebooks"
	@echo "make student    the attendee edition (solutions collapsed, not run) in build/student"
	@echo "make slides     instructor decks: build/slides/*.html (offline) and *.pdf"
	@echo "make wheelhouse every wheel the workshop needs in wheelhouse/ (USB stick install)"
	@echo "make chromium   install Debian's chromium if missing (decks' PDFs, browser tests; may sudo)"
	@echo "make lock       requirements/lock.txt from .venv (after the tests passed in it)"
	@echo "make bench      every benchmark, then bench/RESULTS.md (QUICK=1: a smoke run)"
	@echo "make fresh      list the notebooks, results and figures whose code changed since they ran"
	@echo "make refresh    every benchmark, then every notebook in full mode (~90 min, quiet machine)"

# Python 3.11, 3.12 or 3.13 (requires-python in pyproject.toml).
PYTHON_OK := import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 13) else \
	"Python 3.11, 3.12 or 3.13 is required: run make PYTHON=python3.12 ...")

$(BIN)/python:
	@$(PYTHON) -c '$(PYTHON_OK)'
	$(PYTHON) -m venv $(VENV)

$(LAB_STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_ARGS) -e ".[$(LAB_EXTRAS)]"
	touch $(LAB_STAMP)

# test: every extra (attendee, rllib, instructor, bench) and the test tools
$(STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_ARGS) -e ".[test]"
	touch $(STAMP) $(LAB_STAMP)

install: $(STAMP)

# workshop/ is the attendee edition (no solutions to run by accident), made on the first
# `make lab` and never overwritten: your edits stay. notebooks/ is the instructor edition.
# `make lab-setup` does all but open JupyterLab (the devcontainer's set-up step).
lab-setup: $(LAB_STAMP)
	$(BIN)/python scripts/notebooks.py workshop --dir workshop

lab: lab-setup
	$(BIN)/jupyter lab $(LAB_ARGS) workshop/

.PHONY: workshop-refresh
workshop-refresh: $(LAB_STAMP)
	$(BIN)/python scripts/notebooks.py workshop --dir workshop --refresh

# The test command: quick mode, each pytest run with its own Ray temp dir (see conftest.py).
# The browser tests (decks, JupyterLab) need Chromium and skip without it: `make chromium`
# installs it (through sudo if need be), a step of its own so that `make test` never asks for
# a password; .ci/run does both.
test: $(STAMP)
	$(BIN)/ruff check .
	COURSE_QUICK=1 $(BIN)/python -m pytest
	COURSE_QUICK=1 $(BIN)/python -m pytest --nbval notebooks/

unit: $(STAMP)
	COURSE_QUICK=1 $(BIN)/python -m pytest

nbval: $(STAMP)
	COURSE_QUICK=1 $(BIN)/python -m pytest --nbval notebooks/

lint: $(STAMP)
	$(BIN)/ruff check .

notebooks: $(STAMP)
	$(BIN)/python scripts/notebooks.py execute
	$(BIN)/python scripts/figures.py fill

student: $(STAMP)
	$(BIN)/python scripts/notebooks.py student --out build/student

# The PDFs need Chromium: `make chromium` first (the build says so when it is missing).
slides: $(STAMP)
	$(BIN)/python scripts/figures.py fill
	$(BIN)/python scripts/slides.py build --out build/slides

# Debian/Ubuntu: apt-get install chromium, as root or through sudo, only when it is missing.
# Elsewhere: install Chromium or Chrome yourself (CHROMIUM=/path if it is not on the PATH).
chromium:
	@if [ -n "$$CHROMIUM" ] || command -v chromium >/dev/null 2>&1 \
	    || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then \
	  true; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; \
	else \
	  echo "no Chromium and no apt-get: install Chromium or Chrome (browser tests skip without it)"; \
	fi

# The lock: every package of the environment the tests passed in, at its exact version (run it
# after `make test` passed with new pins). tests/test_lock.py checks it against pyproject.toml.
lock: $(STAMP)
	$(BIN)/python scripts/lock.py

# Every wheel the attendee's set needs, RLlib included (an attendee may opt in offline), at the
# lock's versions, the build backend, and the workshop itself, for
# `make lab WHEELHOUSE=wheelhouse`. For the Python version it is built with: build one per
# Python the attendees bring. Wheels are per platform: build it on the OS/CPU the attendees
# use (torch: pass TORCH_INDEX=https://download.pytorch.org/whl/cpu for the CPU build).
WHEEL_EXTRAS ?= attendee,rllib
wheelhouse: | $(BIN)/python
	mkdir -p wheelhouse
	$(BIN)/python -m pip download $(PIP_ARGS) --dest wheelhouse ".[$(WHEEL_EXTRAS)]" \
	    "setuptools>=68" wheel pip
	$(BIN)/python -m pip wheel --no-deps --wheel-dir wheelhouse .
	@echo "wheelhouse/: $$(ls wheelhouse | wc -l) files, $$(du -sh wheelhouse | cut -f1)"

# Every benchmark against its reference, then bench/RESULTS.md and bench/figures/ (long: run it
# on a quiet machine). QUICK=1 runs each benchmark's smoke version.
bench: $(STAMP)
	$(BIN)/python -m bench.run_all $(if $(QUICK),--quick,)
	$(BIN)/python scripts/figures.py fill

# Outputs whose code changed since the commit they record (comments and docstrings ignored);
# fails when one is stale or records no commit. REPORT=1 lists without failing (CI).
fresh: $(STAMP)
	$(BIN)/python scripts/fresh.py $(if $(REPORT),--report,)

# Everything that goes stale, re-run from committed code (about 90 minutes on a quiet 2-core
# machine; the budget is in CONTRIBUTING.md): every benchmark, the RLlib profile notebook 07
# prints, then every notebook in full mode (after the benchmarks: they print their results),
# then the numbers of the decks and guides. It ends with `make fresh`, which must list nothing.
refresh: $(STAMP)
	$(BIN)/python -m bench.run_all
	$(BIN)/python -m bench.rllib_profile
	$(BIN)/python scripts/notebooks.py execute
	$(BIN)/python scripts/figures.py fill
	$(BIN)/python scripts/fresh.py

clean:
	rm -rf build .pytest_cache
