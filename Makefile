# The two commands of the README: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup docker chromium images demo evaluate test lint docs unit bench bench-engine bench-diff proto gc clean

$(STAMP): pyproject.toml sdk/pyproject.toml compat/pyproject.toml orchestrator/images/sdk-layer.lock orchestrator/images/agent-mcp.lock
	$(PYTHON) -m venv $(VENV)
	# The SDK layer's lock as constraints: the venv runs the NumPy, protobuf, grpcio and gymnasium the images run
	# (and, with agent-base's MCP lock, the mcp SDK of epg-session-mcp).
	$(BIN)/pip install --quiet --disable-pip-version-check -c orchestrator/images/sdk-layer.lock -e './sdk[gym,runner]'
	$(BIN)/pip install --quiet --disable-pip-version-check -c orchestrator/images/sdk-layer.lock -c orchestrator/images/agent-mcp.lock -e '.[dev]'
	# Our implementation of EvoPolicyGym 0.3's `evopolicygym` (compat/), for the tests of their packages and Programs.
	$(BIN)/pip install --quiet --disable-pip-version-check -e ./compat
	# highway-env's metadata asks for pygame; pygame-ce (in the dev extra) stands in for it.
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps 'highway-env==1.11'
	# gymnasium-robotics' metadata also asks for Jinja2, which the Fetch tasks never import.
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps 'gymnasium-robotics==1.4.2'
	touch $(STAMP)

setup: $(STAMP)
	# Bytecode for the editable packages, so a command imports them compiled even where PYTHONDONTWRITEBYTECODE is set
	# (about 0.3 s of every command; compileall skips what is up to date).
	$(BIN)/python -m compileall -q orchestrator sdk/epg_sdk compat/evopolicygym bench

docker:
	bash scripts/ensure-docker.sh

chromium:
	bash scripts/ensure-chromium.sh

images: setup docker
	$(BIN)/epg-orchestrate images build

demo: setup docker
	$(BIN)/epg-orchestrate run examples/cartpole.yaml

evaluate: setup docker
	$(BIN)/epg-orchestrate evaluate environments/cartpole/baseline --benchmark CartPole-v1 --episodes 10

# One pytest run over JOBS processes; the images build while the tests that need no engine run (scripts/run-tests.sh).
test: lint docs docker chromium
	BIN=$(BIN) bash scripts/run-tests.sh

# ruff, then mypy in strict mode on orchestrator/ and sdk/epg_sdk ([tool.mypy] in pyproject.toml; ARCHITECTURE.md, "Type checking").
lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

# The docs site (mkdocs.yml): --strict, so a broken link or a stale reference fails `make test`.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir .site

unit: setup
	$(BIN)/python -m pytest -m 'not docker and not slow' -n $${JOBS:-2}

bench: setup docker
	$(BIN)/python bench/bench.py

bench-engine: setup docker
	$(BIN)/python bench/engine_starts.py

bench-diff: setup
	$(BIN)/python bench/diff_bound.py

proto: setup
	$(BIN)/python scripts/gen-proto.py sdk

gc: setup docker
	$(BIN)/epg-orchestrate gc

clean:
	rm -rf $(VENV) .pytest_cache .site
