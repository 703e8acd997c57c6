#!/usr/bin/env bash
# Makes a Python virtual environment for the recipes, from PyPI.
#   recipes/run/setup_venv.sh [--torch] [DIR]   (default DIR: .venv)
# Without --torch: numpy, onnx, onnxruntime (what the ONNX checks need).
# With --torch: also torch, torchvision, transformers, onnxscript and torchao
# (to regenerate fixtures; torchao holds the PT2E quantizers of golden/quant),
# and timm and diffusers (families of the wide zoo, `make zoo`).
set -euo pipefail
torch=0
if [ "${1:-}" = "--torch" ]; then torch=1; shift; fi
dir=${1:-.venv}
python3 -m venv "$dir"
"$dir/bin/python" -m pip install -q --upgrade pip
"$dir/bin/python" -m pip install -q numpy onnx onnxruntime
if [ "$torch" = 1 ]; then
  "$dir/bin/python" -m pip install -q torch torchvision transformers onnxscript ml_dtypes torchao timm diffusers
fi
