# Two commands for a fresh machine (Python 3.11-3.13, no accelerator):
#   make book   - set up .venv and build the book, executing every notebook
#   make test   - set up .venv and run the whole test suite
# Also: make lab (JupyterLab on the course), make exercises (regenerate exercises/ from solutions/),
#       make bench (timing budgets), make browser-test (the built book in headless Chromium: builds
#       the book first if _build/html is missing; needs Debian's chromium), make clean.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BUILD  := _build

.PHONY: install book test browser-test lab exercises bench clean

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
	@echo "The book is at: $(CURDIR)/$(BUILD)/html/index.html"

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The built site opened page by page in headless Chromium (tests/browser/test_site.py); screenshots
# go to $(BUILD)/screenshots. Chromium comes from Debian (apt-get install chromium), never from
# `playwright install`.
CHROMIUM ?= /usr/bin/chromium
browser-test: $(STAMP)
	@test -x $(CHROMIUM) || { echo "browser-test: no Chromium at $(CHROMIUM) (Debian: apt-get install chromium)"; exit 1; }
	@test -f $(BUILD)/html/index.html || $(MAKE) book
	rm -rf $(BUILD)/screenshots
	CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -p no:xdist -q tests/browser

# Jupyter refuses to run as root unless told; containers and Colab-like boxes often are root.
lab: $(STAMP)
	$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root,)

exercises: $(STAMP)
	$(BIN)/python -m scaling_lib.exercises build

bench: $(STAMP)
	$(BIN)/python benchmarks/budgets.py

clean:
	rm -rf $(BUILD) .pytest_cache .hypothesis
