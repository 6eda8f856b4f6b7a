#!/usr/bin/env bash
# The checks of patchscope.torch that need a CUDA device: the `gpu`-marked
# tests and the attention example. Meant for a machine with a GPU; fails when
# none is visible. Reuses a CUDA torch installed system-wide when there is
# one. Finishes in under 3 minutes once the virtual environment exists.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${PATCHSCOPE_GPU_VENV:-.venv-gpu}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -m pip install -q -e '.[test,torch]'

"$venv/bin/python" - <<'PY'
import sys

import torch

if torch.cuda.device_count() == 0:
    sys.exit(f"gpu_check: torch {torch.__version__} sees no CUDA device")
print(f"gpu_check: torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
PY

timeout 150 "$venv/bin/python" -m pytest -q -p no:cacheprovider -m gpu tests/torch_layer
timeout 60 "$venv/bin/python" examples/device_agnostic_attention.py
