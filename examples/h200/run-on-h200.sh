#!/usr/bin/env bash
# On a lent H200 machine, from the repository's root, once vLLM's wheels are in /tmp/ship
# (the developers' GPU recipe packs them) and the service's own wheels in .gpu/extras.tar: installs both (once per
# machine), then runs or resumes benchmarks/h200_proof.py for at most BUDGET seconds, copying the
# database and logs to $OUT. Call it again on the same warm machine to wait for the rest.
set -euo pipefail
export PYTHONPATH=/tmp/site
if [ ! -d /tmp/site/vllm ]; then bash .gpu/install.sh; fi
if [ ! -d /tmp/site/alembic ]; then
  mkdir -p /tmp/extras && tar xf .gpu/extras.tar -C /tmp/extras
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/extras/wheels/*.whl
fi
# FRESH=1: stop what an earlier run started and begin again with an empty database (the models stay).
if [ -n "${FRESH:-}" ] && [ -f /tmp/h200/service.pid ]; then kill $(cat /tmp/h200/service.pid /tmp/h200/worker.pid) 2>/dev/null || true; sleep 3; rm -f /tmp/h200/draftbench.db* /tmp/h200/*.pid; fi
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
python3 benchmarks/h200_proof.py --work /tmp/h200 --out "$OUT" --python "$(command -v python3)" --service-python python3 \
  --patch examples/h200/flashinfer-claims-full-graphs.diff --budget-s "${BUDGET:-480}" \
  examples/h200/calibration.yaml examples/h200/calibration-t1.yaml examples/h200/matrix.yaml \
  examples/h200/capture-bug.yaml examples/h200/shape-8b.yaml examples/h200/serving.yaml examples/h200/repeats.yaml
cp -r /tmp/h200/models "$OUT/models" 2>/dev/null || true
