#!/usr/bin/env bash
# `make test-recipes`: the documented examples that need torch, run as
# written in a scratch directory: export_model.py on a small model, then
# the recipes Makefile's pattern rules (%.pt2, %.check, %.onnx, %.listing)
# from outside the recipes directory.
#   recipes/checks/test_recipes.sh PYTHON BIN
set -euo pipefail
python=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # not realpath: a venv python is a symlink
bin=$(realpath "$2")/
here=$(cd "$(dirname "$0")/.." && pwd)  # recipes/
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > my_model.py <<'PY'
import torch


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 2))


def example_inputs():
    torch.manual_seed(1)
    return (torch.randn(2, 3, 8, 8),)
PY
# README: python recipes/run/export_model.py my_model.py -o my_model.pt2
"$python" "$here/run/export_model.py" my_model.py -o my_model.pt2
test -s my_model.pt2
# recipes/README.md and the Makefile header: golden files, then the checks
make -s -f "$here/Makefile" golden MODELS=my_model PYTHON="$python" BIN="$bin"
make -s -f "$here/Makefile" my_model.check my_model.onnx my_model.listing BIN="$bin"
test -s my_model.onnx && test -s my_model.listing
echo "test-recipes: export_model.py and the recipes Makefile ran as documented"
