# spigap: `make demo` and `make test` set up everything they need on a fresh
# Debian bookworm machine (a venv with the Python deps; gcc, sigrok-cli and
# PulseView via apt when running as root, else a clear message), then run.
# `make test` tests what users install: it builds the sdist and from it the
# wheel, installs the wheel into a fresh venv and runs the suite against that
# installed package from outside the checkout.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.spigap-installed
# the venv the test suite runs in: the built wheel, installed as a user would
TVENV ?= .venv-wheel
# the venv of other tools' writers that cannot share the test venv (tests/oracles/requirements.txt)
OVENV ?= .venv-oracles
OSTAMP := $(OVENV)/.spigap-oracles
# pytest workers (pytest-xdist): one per core, at most 4 (each holds its own imports and caches)
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
# what every suite run prints: the skips and failures (-ra) and the 20 slowest tests
PYTEST_REPORT := -ra --durations=20
DEMO ?= captures/mcp3008-rpi3-k4.4-b10.sr
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get
# pip as the venvs use it: quiet, and without byte-compiling every installed module (numpy,
# matplotlib, dask, mypy, ...: about a third of an install's CPU); Python compiles what it
# imports on first use. The venv's own pip (23.2 on bookworm) is recent enough: not upgraded.
PIP_INSTALL = -m pip install -q --no-compile --disable-pip-version-check
# apt-get update + install of $(1), quietly: apt's and debconf's output goes to $(APT_LOG),
# printed only when it fails
APT_LOG := build/apt.log
APT_INSTALL = mkdir -p build && { $(APT_GET) update -qq && $(APT_GET) install -y -qq $(1); } >$(APT_LOG) 2>&1 || \
  { tail -n 40 $(APT_LOG); echo "apt-get install $(1) failed (its whole output: $(CURDIR)/$(APT_LOG))"; false; }
# the other tools the tests run (Debian bookworm packages), as command:package: sigrok-cli and
# PulseView (our oracles), trace-cmd (spigap trace reads trace.dat through it), xvfb, xdotool and
# imagemagick (the PulseView screenshot test), chromium (the HTML report in a headless browser)
TEST_TOOLS := sigrok-cli:sigrok-cli pulseview:pulseview trace-cmd:trace-cmd xvfb-run:xvfb xdotool:xdotool \
  import:imagemagick chromium:chromium
# what the tests write besides their temporary files: the cache of sigrok-cli's runs on the big
# real captures (tests/conftest.py) and other tools' caches (matplotlib's font list, ...), all under
# build/ (ignored by git, removed by make clean), never in ~/.cache
TEST_CACHE := $(CURDIR)/build/test-cache

.PHONY: setup demo test test-all test-dev fuzz lint wheel bench captures tools sigrok-cli compiler oracles clean

setup: $(STAMP)

$(STAMP): setup.py setup.cfg pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || \
	  { echo "spigap needs Python >= 3.11 ('$(PYTHON)' is missing or older; Debian bookworm: apt-get install python3)"; exit 1; }
	@if [ ! -x $(BIN)/python ] || ! $(BIN)/python -m pip --version >/dev/null 2>&1; then \
	  rm -rf $(VENV); \
	  if ! $(PYTHON) -m venv $(VENV) >/dev/null 2>&1; then \
	    rm -rf $(VENV); \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      echo "setup: installing python3-venv with apt-get"; \
	      $(call APT_INSTALL,python3-venv) && $(PYTHON) -m venv $(VENV) || exit 1; \
	    else \
	      echo "setup: cannot create a venv: install python3-venv (sudo apt-get install python3-venv) and run again"; exit 1; \
	    fi; \
	  fi; \
	fi
	@$(MAKE) --no-print-directory compiler
	$(BIN)/python $(PIP_INSTALL) -e '.[test,dev]'
	$(BIN)/python -m spigap.native
	@touch $@

# gcc builds the compiled core at install time (without it spigap uses its numpy engine)
compiler:
	@command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "setup: installing gcc with apt-get (for the compiled core)"; \
	    $(call APT_INSTALL,gcc libc6-dev) || true; \
	  else \
	    echo "setup: no C compiler: spigap will use its slower numpy engine (install gcc for the compiled core)"; \
	  fi; }

## the other tools the tests run (TEST_TOOLS), with apt-get when running as root: one line per
## package installed, apt's output in build/apt.log (shown when it fails)
tools:
	@missing=; for t in $(TEST_TOOLS); do command -v $${t%%:*} >/dev/null 2>&1 || missing="$${missing:+$$missing }$${t#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "setup: apt-get install $$missing (tools the tests run; apt's output: $(APT_LOG))"; \
	    $(call APT_INSTALL,$$missing) || exit 1; \
	    for p in $$missing; do echo "setup: installed $$p $$(dpkg-query -W -f='$${Version}' $$p) (apt-get)"; done; \
	  else \
	    echo "the tests run tools missing here: run 'sudo apt-get install $$missing' (make test installs them as root)"; exit 1; \
	  fi; \
	fi

# the target's name before chromium and the screenshot tools joined it
sigrok-cli: tools

## other tools' file writers, the oracles of some reader tests, in a venv of their own
## (tests/oracles/requirements.txt says why they cannot share the test venv); the tests find
## its interpreter through SPIGAP_ORACLE_PYTHON
oracles: $(OSTAMP)

$(OSTAMP): tests/oracles/requirements.txt
	rm -rf $(OVENV)
	$(PYTHON) -m venv $(OVENV)
	$(OVENV)/bin/python $(PIP_INSTALL) -r tests/oracles/requirements.txt
	@touch $@

## the main job on a bundled capture
demo: setup
	$(BIN)/spigap analyze $(DEMO)

## the sdist, and the wheel built from it (so a file missing from the sdist fails here)
wheel: setup
	rm -rf dist
	$(BIN)/python -m build -o dist . >dist.log 2>&1 || { tail -40 dist.log; exit 1; }
	@ls dist

## ruff, mypy, the layers (lint-imports) and dead code (vulture): configured in pyproject.toml (ruff, vulture),
## setup.cfg (mypy, import-linter)
## and .ci/vulture_whitelist.py (docs/architecture.md says why)
lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/vulture analyzer decoders .ci/vulture_whitelist.py --min-confidence 60 --exclude analyzer/spigap/sigrok/decoders

## the test suite against the installed wheel (needs sigrok-cli and PulseView: our oracles; the
## other TEST_TOOLS); PYTEST_ARGS replaces the default arguments (the whole tests/ directory). It runs
## in a fresh temporary directory outside the checkout (so nothing imports the source tree), which
## also holds every temporary file of the run (TMPDIR, pytest's basetemp) and is removed at the end;
## after a failure it is kept (pytest keeps the failed tests' tmp_path) and its path printed.
## TEST_MARKERS picks the tests: all but the long fuzz runs and the `slow` ones (make test-all, CI)
TEST_MARKERS ?= not fuzz and not slow
test: wheel tools oracles
	rm -rf $(TVENV)
	$(PYTHON) -m venv $(TVENV)
	$(TVENV)/bin/python $(PIP_INSTALL) "$$(ls dist/spigap-*.whl)[test]"
	@d=$$(mktemp -d -t spigap-test.XXXXXX) || exit 1; \
	  echo "cd $$d && pytest -n $(TEST_WORKERS) -m '$(TEST_MARKERS)' ... (the installed wheel, from outside the checkout)"; \
	  cd "$$d" && TMPDIR="$$d" SPIGAP_TEST_INSTALLED=1 SPIGAP_SDIST="$$(ls $(CURDIR)/dist/spigap-*.tar.gz)" \
	  SPIGAP_ORACLE_PYTHON=$(CURDIR)/$(OVENV)/bin/python XDG_CACHE_HOME=$(TEST_CACHE) \
	  $(CURDIR)/$(TVENV)/bin/python -m pytest -c $(CURDIR)/pyproject.toml --rootdir $(CURDIR) \
	  -p no:cacheprovider --no-header --basetemp "$$d/pytest" -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_REPORT) \
	  -m "$(TEST_MARKERS)" $(or $(PYTEST_ARGS),$(CURDIR)/tests); rc=$$?; cd /; \
	  if [ $$rc = 0 ]; then rm -rf "$$d"; else echo "make test: the failed tests' files are in $$d (rm -rf it when done)"; fi; \
	  exit $$rc

## make test with the `slow` tests too (what CI runs): the full-size cases (README, "Development")
test-all:
	@$(MAKE) --no-print-directory test TEST_MARKERS='not fuzz'

## the long fuzz runs (random examples, SPIGAP_FUZZ_EXAMPLES per reader, default 10000)
fuzz: setup
	SPIGAP_HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q -m fuzz $(PYTEST_ARGS)

## the tests on the editable checkout (quicker while developing; CI runs `make test-all`);
## serial by default (PYTEST_ARGS='-n 2' for workers)
test-dev: setup tools oracles
	SPIGAP_ORACLE_PYTHON=$(CURDIR)/$(OVENV)/bin/python XDG_CACHE_HOME=$(TEST_CACHE) \
	  $(BIN)/python -m pytest -q $(PYTEST_REPORT) -m "$(TEST_MARKERS)" $(PYTEST_ARGS)

## spigap vs sigrok-cli, side by side (writes nothing; see BENCHMARKS.md)
bench: setup sigrok-cli
	$(BIN)/spigap bench --real captures/real/spi__enc28j60__enc28j60-init-and-ping.sr --sigrok-big --repeat 5 --format markdown

## rebuild captures/*.sr from their TOML recipes
captures: setup
	@for t in captures/*.toml; do $(BIN)/spigap synth --config $$t -o $${t%.toml}.sr || exit 1; done

clean:
	rm -rf $(VENV) $(TVENV) $(OVENV) .pytest_cache build dist dist.log *.egg-info analyzer/spigap/native/_spigap_core*
