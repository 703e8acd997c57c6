#!/usr/bin/env bash
# Installs a CUDA toolkit from PyPI (NVIDIA's wheels: nvcc, the runtime,
# NVRTC, cuBLAS, cuRAND, CCCL headers) into a virtual environment, so that
# `--features cuda` compiles on a machine with no system CUDA and no GPU.
#   recipes/cuda/setup_cuda.sh [DIR]        (default DIR: .venv-cuda)
# Idempotent: a stamp file names the pinned versions; a second run with the
# same pins does nothing. Prints the toolkit root (DIR/.../nvidia/cu13).
set -euo pipefail
dir=${1:-.venv-cuda}
# Pinned: one CUDA toolkit per release, nvcc's own dependencies (nvvm,
# crt) included: left free they come at a newer release whose PTX the
# pinned ptxas refuses. CUDA_RELEASE picks it: 13.4 (default; cudarc 0.19
# knows CUDA versions up to 13.4) or 13.0, for a GPU whose driver is CUDA
# 13.0 (driver 580): a driver JIT-compiles candle's PTX only up to its own
# release's PTX ISA (recipes/cuda/cuda_bundle.sh).
case "${CUDA_RELEASE:-13.4}" in
  # nvcc, nvvm, crt and NVRTC; the runtime; cuBLAS; cuRAND; CCCL
  13.4) read -r tk rt blas rand cccl <<< "13.4.92 13.4.92 13.4.3.11 10.4.4.72 13.3.5.0.6" ;;
  13.0) read -r tk rt blas rand cccl <<< "13.0.88 13.0.96 13.0.2.14 10.4.0.35 13.0.85" ;;
  *) echo "setup_cuda.sh: CUDA_RELEASE must be 13.4 or 13.0, not ${CUDA_RELEASE}" >&2; exit 2 ;;
esac
pins=(
  nvidia-cuda-nvcc==$tk
  nvidia-nvvm==$tk
  nvidia-cuda-crt==$tk
  nvidia-cuda-runtime==$rt
  nvidia-cuda-nvrtc==$tk
  nvidia-cublas==$blas
  nvidia-curand==$rand
  nvidia-cuda-cccl==$cccl
)
stamp="$dir/.cuda-pins"
if [ -f "$stamp" ] && [ -x "$dir/bin/python" ] && [ "$(cat "$stamp")" = "${pins[*]}" ]; then
  :
else
  python3 -m venv --clear "$dir"
  if ! "$dir/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}"; then
    echo "setup_cuda.sh: could not install the CUDA toolkit wheels from PyPI (is the package registry reachable?)" >&2
    exit 1
  fi
  printf '%s' "${pins[*]}" > "$stamp"
fi
root=$("$dir/bin/python" -c 'import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
if [ ! -x "$root/bin/nvcc" ]; then
  echo "setup_cuda.sh: no nvcc under $root" >&2
  exit 1
fi
echo "$root"
