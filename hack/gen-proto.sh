#!/usr/bin/env bash
# Regenerate the Python code for every .proto under proto/.
# Usage: hack/gen-proto.sh [OUT_DIR]   (default: the repository root, i.e. in place)
# Runs from the repository root so generated modules import each other as `proto.<pkg>...`.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.}"
python="${PYTHON:-.venv/bin/python}"
mapfile -t protos < <(find proto -name '*.proto' | sort)
"$python" -m grpc_tools.protoc -I . \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" "${protos[@]}"
