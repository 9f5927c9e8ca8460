# Everything goes through a local virtual environment; only python3 and make are assumed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: run test test-llm bench lint docs clean

$(STAMP): pyproject.toml requirements.lock
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

$(DEVSTAMP): $(STAMP) requirements-dev.lock
	$(BIN)/python -m pip install -q -r requirements-dev.lock
	touch $(DEVSTAMP)

## make run: set up and run `ctxtool stats` on the embedded sample (offline, no key)
run: $(STAMP)
	$(BIN)/ctxtool stats samples/claude_code_session.jsonl

## make test: set up with dev tools and run the whole suite
test: $(DEVSTAMP)
	$(BIN)/python -m pytest -n 2 -p no:cacheprovider

bench: $(DEVSTAMP)
	$(BIN)/python -m bench.run

lint: $(DEVSTAMP)
	$(BIN)/ruff check ctxtool tests

docs: $(STAMP)
	$(BIN)/python -m ctxtool.cli.docgen > docs/cli.md

clean:
	rm -rf $(VENV) build *.egg-info
