# Two commands for a fresh machine (Python 3.11-3.13, no accelerator):
#   make book   - set up .venv and build the book, executing every notebook, and its live site
#                 (_build/html/lite: JupyterLite, the notebooks and a scaling_lib wheel; tools/build_lite.py)
#   make test   - set up .venv and run the quick test gate (library, solutions, exercises, grader;
#                 under 10 minutes on 2 cores; what CI runs; the chapters are executed by make book)
#   make test-all - everything make test leaves out too (slow tier: conftest.py lists it and why)
# Also: make site-test (the built book: its pages, then headless Chromium if Debian's chromium is
#       installed; builds the book first if _build/html is missing), make lab (JupyterLab on the
#       course), make exercises (regenerate exercises/ from solutions/), make bench (timing
#       budgets), make clean.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BUILD  := _build

.PHONY: install book test test-all site-test browser-test lab exercises bench clean

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	@touch $(STAMP)

install: $(STAMP)

book: $(STAMP)
	rm -rf $(BUILD)
	$(BIN)/jupyter-book build . --toc book/_toc.yml --path-output . -W --keep-going
	$(BIN)/python tools/build_lite.py --html $(BUILD)/html
	@echo "The book is at: $(CURDIR)/$(BUILD)/html/index.html"

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not slow"

test-all: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The built site checked as a reader sees it (tests/browser): its pages read as files, then opened
# one by one in headless Chromium (skipped, with a message, where there is no Chromium);
# screenshots go to $(BUILD)/screenshots. Chromium comes from Debian (apt-get install chromium),
# never from `playwright install`. Builds the book first if it is not built.
CHROMIUM ?= /usr/bin/chromium
site-test: $(STAMP)
	@test -f $(BUILD)/html/index.html || $(MAKE) book
	rm -rf $(BUILD)/screenshots
	CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -p no:xdist -q -rs tests/browser

browser-test: site-test

# Jupyter refuses to run as root unless told; containers and Colab-like boxes often are root.
lab: $(STAMP)
	$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root,)

exercises: $(STAMP)
	$(BIN)/python -m scaling_lib.course.exercises build

bench: $(STAMP)
	$(BIN)/python benchmarks/budgets.py

clean:
	rm -rf $(BUILD) .pytest_cache .hypothesis
