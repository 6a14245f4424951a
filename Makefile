# Distributed RL with Ray: every workshop command. `make help` lists them.
# Everything runs in .venv, created on first use; re-installs when pyproject.toml or the lock
# changes. VENV=... puts it elsewhere (the conda route: VENV="$CONDA_PREFIX").

PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
# Two installs: what attendees need (the notebooks; RLLIB=1 adds RLlib for notebook 07) and
# everything (tests, decks, benchmarks). Each stamp is renewed when pyproject.toml or the lock
# changes. Every install is uv's, with requirements/lock.txt (`make lock`: one version of each
# package for every supported platform, with hashes) as constraints, so every route gets the
# same versions and every file is checked against its hash. uv itself is pinned and hashed in
# requirements/uv.txt and installed into the venv first.
comma := ,
LAB_EXTRAS := attendee$(if $(RLLIB),$(comma)rllib,)
LAB_STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(LAB_EXTRAS))
STAMP      := $(VENV)/.installed-all
LOCK       := requirements/lock.txt
UV_LOCK    := requirements/uv.txt
UV         := $(BIN)/uv

# Offline install: make lab WHEELHOUSE=wheelhouse installs from that folder with no network.
WHEELHOUSE ?=
FROM_WHEELHOUSE := $(if $(WHEELHOUSE),--no-index --find-links $(WHEELHOUSE),)

# torch. TORCH=auto (the default): the CPU build on Linux without an NVIDIA GPU (no
# nvidia-smi), 755 MiB installed instead of PyPI's CUDA build (1.1 GiB of torch and 2.7 GiB of
# NVIDIA libraries); elsewhere PyPI's build (macOS: the only one; Linux with a GPU: CUDA).
# TORCH=cpu or TORCH=pypi chooses. The CPU build comes from TORCH_INDEX (an index URL, or a
# folder of wheels), installed first and alone; the lock's hashes are PyPI's files, so uv then
# takes it as the lock's torch==2.13.0 (the CPU index serves each file's sha256 itself).
TORCH       ?= auto
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
NO_GPU      := $(if $(filter Linux,$(shell uname -s)),$(if $(shell command -v nvidia-smi),,yes),)
TORCH_BUILD := $(if $(filter auto,$(TORCH)),$(if $(NO_GPU),cpu,pypi),$(TORCH))
TORCH_FROM  := $(if $(wildcard $(TORCH_INDEX)/.),--no-index --find-links $(TORCH_INDEX),--index-url $(TORCH_INDEX))
TORCH_PIN   := $$(grep -m1 '^torch==' $(LOCK) | cut -d' ' -f1)
# The torch step (CPU build, or whatever build the wheelhouse holds), then the package.
INSTALL_TORCH = $(if $(or $(WHEELHOUSE),$(filter cpu,$(TORCH_BUILD))),\
	$(UV) pip install --python $(BIN)/python --compile-bytecode --no-deps --reinstall-package torch \
	    $(or $(FROM_WHEELHOUSE),$(TORCH_FROM)) "$(TORCH_PIN)" || { echo "torch's CPU build \
	    is not in $(or $(WHEELHOUSE),$(TORCH_INDEX)): give TORCH_INDEX=<an index or a folder \
	    of wheels that has it> or TORCH=pypi (PyPI's CUDA build)"; exit 1; },@true)
# --compile-bytecode: as pip does. Without the .pyc files, the first `ray.init` compiles Ray's
# modules in its agents, slowly enough on 2 busy cores that the raylet gives up waiting.
UV_INSTALL = $(UV) pip install --python $(BIN)/python --compile-bytecode -c $(LOCK) \
	$(FROM_WHEELHOUSE)

# Jupyter refuses to run as root unless told; containers often run as root.
LAB_ARGS := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: help install lab-install lab lab-setup test unit nbval lint notebooks student slides wheelhouse chromium bench fresh refresh clean lock

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
	@echo "make lock       requirements/lock.txt: uv's resolution for every platform (needs PyPI)"
	@echo "make bench      every benchmark, then bench/RESULTS.md (QUICK=1: a smoke run)"
	@echo "make fresh      list the notebooks, results and figures whose code changed since they ran"
	@echo "make refresh    every benchmark, then every notebook in full mode (~90 min, quiet machine)"

# Python 3.11.5 to 3.13 (requires-python in pyproject.toml). Outside it, one line says so and
# gives the command that gets one: UV_PYTHON=3.12 makes the venv with uv, which uses a Python
# 3.12 of this machine or downloads its own CPython 3.12 (uv from the PATH, else bootstrapped
# from requirements/uv.txt into build/uv).
PYTHON_OK := import sys; v = sys.version_info[:3]; sys.exit(0 if (3, 11, 5) <= v < (3, 14) else \
	"Python %d.%d.%d (%s) is outside 3.11.5-3.13, which the workshop needs: run \
	make $(or $(MAKECMDGOALS),lab) UV_PYTHON=3.12    (uv gets CPython 3.12 for .venv)" % (*v, sys.executable))
UV_PYTHON ?=
BOOT_UV   := $(or $(shell command -v uv),build/uv/bin/uv)

$(BIN)/python:
ifeq ($(UV_PYTHON),)
	@command -v $(PYTHON) >/dev/null || { echo "no $(PYTHON) on the PATH: install uv \
	(https://docs.astral.sh/uv/getting-started/installation/), then make $(or $(MAKECMDGOALS),lab) UV_PYTHON=3.12"; exit 1; }
	@$(PYTHON) -c '$(PYTHON_OK)'
	$(PYTHON) -m venv $(VENV)
else
	@test -x $(BOOT_UV) || { $(PYTHON) -m venv build/uv && \
	  build/uv/bin/python -m pip install -q --require-hashes --no-deps -r $(UV_LOCK); }
	$(BOOT_UV) venv --seed --python $(UV_PYTHON) $(VENV)
	@$(BIN)/python -c '$(PYTHON_OK)'
endif

# uv, pinned and hashed (requirements/uv.txt), inside the venv: every install below is its.
$(UV): $(UV_LOCK) | $(BIN)/python
	$(BIN)/python -m pip install -q --require-hashes --no-deps $(FROM_WHEELHOUSE) -r $(UV_LOCK)
	touch $(UV)

$(LAB_STAMP): pyproject.toml $(LOCK) | $(UV)
	$(INSTALL_TORCH)
	$(UV_INSTALL) -e ".[$(LAB_EXTRAS)]"
	touch $(LAB_STAMP)

# test: every extra (attendee, rllib, instructor, bench, cluster) and the test tools
$(STAMP): pyproject.toml $(LOCK) | $(UV)
	$(INSTALL_TORCH)
	$(UV_INSTALL) -e ".[test]"
	touch $(STAMP) $(LAB_STAMP)

install: $(STAMP)

# The attendee's set into the venv and nothing else (no workshop/): CI's other Pythons.
lab-install: $(LAB_STAMP)

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
#
# The two pytest commands run side by side, in two streams: the unit tests but SECOND_STREAM's;
# SECOND_STREAM's tests (the attendee edition's Run All first), then every notebook under nbval.
# One stream alone leaves the cores idle part of the time (it waits on Ray and on kernels), so
# side by side they take far less than one after the other; SECOND_STREAM evens their lengths
# (CI's log gives each test file's time). The second stream's output is kept in
# build/test-logs/ and printed when it ends.
SECOND_STREAM = tests/test_attendee.py tests/test_faults.py
NOTEBOOK_STREAM = COURSE_QUICK=1 $(BIN)/python -m pytest $(SECOND_STREAM); a=$$?; \
	COURSE_QUICK=1 $(BIN)/python -m pytest --nbval notebooks/; n=$$?; exit $$((a || n))
test: $(STAMP)
	$(BIN)/ruff check .
	@mkdir -p build/test-logs
	@( $(NOTEBOOK_STREAM) ) > build/test-logs/notebooks.log 2>&1 & notebooks=$$!; \
	COURSE_QUICK=1 $(BIN)/python -m pytest $(SECOND_STREAM:%=--ignore=%); unit=$$?; \
	wait $$notebooks; nb=$$?; \
	echo "== $(SECOND_STREAM), then nbval (build/test-logs/notebooks.log):"; \
	cat build/test-logs/notebooks.log; \
	echo "== unit tests: exit $$unit; the second stream (its tests, then nbval): exit $$nb"; \
	test $$unit = 0 && test $$nb = 0

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

# The lock: uv's universal resolution of pyproject.toml (every extra) for every supported
# platform and Python, with hashes, then each platform resolved again with wheels only
# (scripts/lock.py; needs PyPI). tests/test_lock.py checks it against pyproject.toml and the
# environment the tests run in.
lock: $(STAMP)
	$(BIN)/python scripts/lock.py

# Every wheel the attendee's set needs, RLlib included (an attendee may opt in offline), at the
# lock's versions and hashes, uv, the build backend and the workshop itself, for
# `make lab WHEELHOUSE=wheelhouse`. For this machine's OS, CPU and Python: build one per kind
# of machine the attendees bring. torch: the build TORCH chooses (the CPU build on Linux
# without a GPU, from TORCH_INDEX). The list is what uv would install into a fresh venv that
# has that torch (so the CPU build brings no CUDA libraries), with the lock's hashes.
WHEEL_EXTRAS ?= attendee,rllib
WHEEL_VENV   := build/wheelhouse-venv
wheelhouse: | $(UV)
	mkdir -p wheelhouse
	rm -rf $(WHEEL_VENV) && $(UV) venv -q --python $(BIN)/python $(WHEEL_VENV)
	$(if $(filter cpu,$(TORCH_BUILD)),$(UV) pip install -q --python $(WHEEL_VENV)/bin/python \
	    --no-deps $(TORCH_FROM) "$(TORCH_PIN)",@true)
	$(UV) pip install --python $(WHEEL_VENV)/bin/python --dry-run -c $(LOCK) \
	    -e ".[$(WHEEL_EXTRAS)]" "setuptools>=68" > $(WHEEL_VENV)/dry-run.txt 2>&1
	sed -n 's/^ + //p' $(WHEEL_VENV)/dry-run.txt | grep -v '^course-lib' > wheelhouse/wanted.txt
	$(UV) pip compile --quiet wheelhouse/wanted.txt --no-deps -c $(LOCK) --generate-hashes \
	    --python $(WHEEL_VENV)/bin/python --no-header -o wheelhouse/requirements.txt
	$(BIN)/python -m pip download -q --require-hashes --no-deps --dest wheelhouse \
	    -r wheelhouse/requirements.txt -r $(UV_LOCK)
	$(if $(filter cpu,$(TORCH_BUILD)),$(BIN)/python -m pip download -q --no-deps \
	    --dest wheelhouse $(TORCH_FROM) "$(TORCH_PIN)",@true)
	$(BIN)/python -m pip wheel -q --no-deps --wheel-dir wheelhouse .
	rm -rf $(WHEEL_VENV)
	@echo "wheelhouse/: $$(ls wheelhouse/*.whl | wc -l) wheels, $$(du -sh wheelhouse | cut -f1)"

# Every benchmark against its reference, then bench/RESULTS.md and bench/figures/ (long: run it
# on a quiet machine). QUICK=1 runs each benchmark's smoke version.
bench: $(STAMP)
	$(BIN)/python -m bench.run_all $(if $(QUICK),--quick,)
	$(BIN)/python scripts/figures.py fill

# Outputs whose code changed since the commit they record (comments and docstrings ignored);
# fails when one is stale or records no commit. REPORT=1 lists without failing (CI).
fresh: $(STAMP)
	$(BIN)/python scripts/fresh.py $(if $(REPORT),--report,)

# Everything that goes stale, re-run from committed code (89.8 minutes when last timed whole, on a
# quiet 2-core machine; the budget is in CONTRIBUTING.md): every benchmark, the RLlib profile
# notebook 07 prints, then every notebook in full mode (after the benchmarks: they print their
# results), then the numbers of the decks and guides. It ends with `make fresh`, which must list nothing.
refresh: $(STAMP)
	$(BIN)/python -m bench.run_all
	$(BIN)/python -m bench.rllib_profile
	$(BIN)/python scripts/notebooks.py execute
	$(BIN)/python scripts/figures.py fill
	$(BIN)/python scripts/fresh.py

clean:
	rm -rf build .pytest_cache
