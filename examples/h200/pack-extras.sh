#!/usr/bin/env bash
# Packs, as FOLDER/extras.tar, the wheels for Python 3.12 that the H200 machine needs beside vLLM's
# own ship list: draftbench's service and worker, and what vLLM's OpenAI server imports. Run it from
# the project's root after the GPU recipe's prepare-vllm-wheels.sh:
#     bash examples/h200/pack-extras.sh SHIP_LIST [FOLDER]      (FOLDER defaults to .gpu)
# SHIP_LIST is the recipe's pinned list (vllm-0.26.0-py312.txt). The image's packages (the device
# notes' list, IMAGE below) and the ship list's are left out: pip resolves the whole set once
# (--dry-run --report) and only the rest is downloaded.
set -euo pipefail
ship=${1:?usage: pack-extras.sh SHIP_LIST [FOLDER]}
dest=${2:-.gpu}
IMAGE="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
build certifi charset-normalizer click cloudpickle colorama contourpy cycler filelock fonttools
frozenlist fsspec h11 hf-xet httpcore httpx huggingface-hub idna jinja2 kiwisolver markdown
markdown-it-py markupsafe matplotlib mdurl ml-dtypes mpmath msgpack multidict networkx ninja numpy
nvidia-ml-py packaging pandas pathspec pillow pip pluggy prometheus-client propcache protobuf psutil
py-cpuinfo pygments pyparsing python-dateutil pyyaml regex requests rich safetensors sentencepiece
setuptools shellingham six sympy tiktoken tokenizers torch tqdm transformers triton typer
typing-extensions typing-inspect urllib3 uvloop wheel wrapt yarl zipp"
norm() { tr 'A-Z_.' 'a-z--'; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
plats=""
for p in manylinux_2_35_x86_64 manylinux_2_34_x86_64 manylinux_2_31_x86_64 manylinux_2_28_x86_64 \
         manylinux_2_27_x86_64 manylinux_2_26_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
         manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64; do plats="$plats --platform $p"; done
# The server's imports that vLLM's ship list leaves out, and the service's own requirements.
python3 -m pip install -q --dry-run --ignore-installed --report "$work/report.json" \
    --only-binary=:all: --python-version 3.12 --implementation cp $plats --target "$work/t" \
    -c "$ship" "uvicorn[standard]" anthropic mcp model-hosting-container-standards \
    python-multipart "sqlalchemy>=2.0.30" "alembic>=1.13" "pydantic>=2.11" "pydantic-settings>=2.3" \
    "fastapi-offline>=1.7"
python3 - "$work/report.json" > "$work/all.txt" <<'EOF'
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    print(item["metadata"]["name"], item["metadata"]["version"])
EOF
skip=$( (echo "$IMAGE" | tr ' ' '\n'; grep -v '^#' "$ship" | cut -d= -f1) | norm | sort -u)
while read -r name version; do
  grep -qxF "$(echo "$name" | norm)" <<<"$skip" || echo "$name==$version"
done < "$work/all.txt" > "$work/extras.txt"
mkdir -p "$work/wheels"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $plats -d "$work/wheels" -r "$work/extras.txt"
tar cf "$dest/extras.tar" -C "$work" wheels
echo "$(wc -l < "$work/extras.txt") wheels, $(du -h "$dest/extras.tar" | cut -f1): $dest/extras.tar"
