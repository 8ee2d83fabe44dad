#!/usr/bin/env bash
# On a lent H200 machine, from the repository's root, once vLLM's wheels are in /tmp/ship (the
# developers' GPU recipe packs them) and the service's and vLLM server's other wheels in
# .gpu/extras.tar (examples/h200/pack-extras.sh): installs both (once per machine), then
#   PHASE=sweeps (default): runs or resumes benchmarks/h200_proof.py for at most BUDGET seconds, with the
#     patched builds PATCHES names ("LABEL=examples/h200/FILE.diff ...");
#   PHASE=peer: waits at most BUDGET seconds for the sweeps, stops the worker, and runs
#     benchmarks/peer_check.py (vllm bench throughput on both GPUs at once, then vllm bench serve).
# Everything it keeps goes to $OUT: the database, the service's and worker's logs, peer.tar.
# IMPORTS: exported sweep folders stored first (an earlier session's history, which the noise model reads);
# CI_CHECK="SWEEP:BASE:HEAD:MINUTES": `draftbench ci` on examples/h200/SWEEP.yaml beside the sweeps.
# GPUS: the worker's --gpus (default all: one worker per GPU); GPUS= (empty) starts one worker holding every GPU, which
# tensor-parallel cells need (examples/h200/tp2-8b-*.yaml).
# Call it again on the same warm machine to wait for the rest; SWEEPS it names that this service has not had are submitted then.
set -euo pipefail
# BUDGET counts from here, the install included: a call that runs past the device's 600 s limit loses the machine.
STARTED=$(date +%s)
export PYTHONPATH=/tmp/site:$PWD NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ ! -d /tmp/site/vllm ]; then bash .gpu/install.sh; fi
if [ ! -d /tmp/site/alembic ]; then
  mkdir -p /tmp/extras && tar xf .gpu/extras.tar -C /tmp/extras
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/extras/wheels/*.whl
  python3 -c "import vllm.entrypoints.openai.api_server" 2>&1 | tail -3 && echo "vLLM's server imports"
fi
# FRESH=1: stop what an earlier run started and begin again with an empty database (the models stay).
# Each was started in its own session (pid = process group): the whole group goes, and the database only once none is
# left, since a service still holding the deleted file answers the next run's submissions into it (2026-12-04).
if [ -n "${FRESH:-}" ] && [ -f /tmp/h200/service.pid ]; then
  pids=$(cat /tmp/h200/*.pid)
  for p in $pids; do kill -- "-$p" 2>/dev/null || true; done
  for _ in $(seq 30); do alive=; for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done; [ -z "$alive" ] && break; sleep 1; done
  for p in $pids; do kill -9 -- "-$p" 2>/dev/null || true; done
  rm -f /tmp/h200/draftbench.db* /tmp/h200/*.pid /tmp/h200/submitted.json
fi
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
SWEEPS=${SWEEPS:-"peer shape-8b serving matrix-rest repeats"}
python3 -m benchmarks.h200_proof --work /tmp/h200 --out "$OUT" --python "$(command -v python3)" --service-python python3 \
  --budget-s "$(( ${BUDGET:-480} - ($(date +%s) - STARTED) ))" ${GPUS+--gpus=$GPUS} $(for p in ${PATCHES:-}; do echo --patch "$p"; done) \
  $(for f in ${IMPORTS:-}; do echo --import "$f"; done) ${CI_CHECK:+--ci "examples/h200/${CI_CHECK%%:*}.yaml:${CI_CHECK#*:}"} \
  $(for s in $SWEEPS; do echo examples/h200/$s.yaml; done)
if [ "${PHASE:-sweeps}" = peer ]; then
  kill $(cat /tmp/h200/worker.pid) 2>/dev/null || true
  sleep 5
  peer="python3 -m benchmarks.peer_check --models /tmp/h200/models"
  # One GPU each, so the two tools never share one; the server check follows on GPU 0.
  ($peer throughput examples/h200/peer.yaml --backend FLASH_ATTN --gpu 0 --out /tmp/peer/throughput-flash-attn --runs 6 || true
   $peer serve examples/h200/serving.yaml --backend FLASH_ATTN --concurrency 1 --gpu 0 --out /tmp/peer/serve-flash-attn-c1 || true) &
  $peer throughput examples/h200/peer.yaml --backend FLASHINFER --gpu 1 --out /tmp/peer/throughput-flashinfer --runs 6 || true
  wait
  tar cf "$OUT/peer.tar" -C /tmp peer
fi
tar cf "$OUT/models.tar" -C /tmp/h200 models 2>/dev/null || true
