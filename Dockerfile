# Two images from one file:
#   --target api     the service (API + dashboards) on python:3.11-slim
#   --target worker  a GPU worker on the official vLLM image; draftbench lives in its own venv so
#                    installing it never changes the packages vLLM was built and tested with.
# docker-compose.yml builds both; a plain `docker build .` builds the api (the last stage).

ARG VLLM_VERSION=v0.26.0

# --- worker: vLLM's image, its /usr/bin/python3 runs the cells -------------------------------
FROM vllm/vllm-openai:${VLLM_VERSION} AS worker
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY runners ./runners
COPY dashboards ./dashboards
COPY migrations ./migrations
# --without-pip needs no ensurepip (missing on some Ubuntu pythons); vLLM's pip installs into the venv.
RUN python3 -m venv --without-pip /opt/draftbench \
 && python3 -m pip --python /opt/draftbench/bin/python install --no-cache-dir . \
 && /opt/draftbench/bin/draftbench --help >/dev/null
ARG VLLM_VERSION
# DRAFTBENCH_SERVER and DRAFTBENCH_TOKEN are the worker's --server and --token: set them with -e
# to run this image on another host.
ENV PATH=/opt/draftbench/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    DRAFTBENCH_VLLM_VERSION=${VLLM_VERSION} \
    DRAFTBENCH_SERVER=http://api:8000
WORKDIR /root
# The vLLM image's entrypoint is `vllm serve`; the worker is the process here.
ENTRYPOINT []
# One worker process per visible GPU (--gpus all), as in docker-compose.yml.
CMD ["sh", "-c", "exec draftbench worker --build \"vllm-${DRAFTBENCH_VLLM_VERSION}=/usr/bin/python3\" --gpu-kind auto --gpus all"]

# --- api: the service --------------------------------------------------------------------------
FROM python:3.11-slim AS api
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY runners ./runners
COPY dashboards ./dashboards
COPY migrations ./migrations
RUN pip install --no-cache-dir . \
 && draftbench --help >/dev/null
ENV PYTHONUNBUFFERED=1
WORKDIR /srv
EXPOSE 8000
# `serve` migrates the database (alembic upgrade head) before it listens, or refuses to start.
CMD ["draftbench", "serve", "--host", "0.0.0.0", "--port", "8000"]
