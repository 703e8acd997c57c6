#!/usr/bin/env bash
# nvcc for `make check-cuda` only: recipes/cuda/check_cuda.sh installs it as
# NVCC (cudaforge, candle-kernels' builder, reads it) in a shim toolkit root
# whose include/ and lib64/ are the real toolkit's. It runs NVCC_REAL with
# the same arguments, except for object files (`-c`: the static library of
# llama.cpp's mmq/moe kernels, which nothing links or runs in a check):
#   - they are compiled to PTX only (`code=compute_NN` for `code=sm_NN`),
#     so ptxas does not assemble them;
#   - the mmq instances are compiled with -G (no device optimization). The
#     others use __dp4a, which nvcc does not compile unoptimized.
# Measured on 2 cores: that library took 12 minutes as candle builds it,
# 1.5 minutes this way. The PTX that candle loads at run time (`--ptx`
# calls) is compiled as candle asks.
set -euo pipefail
object=0
mmq=0
for a in "$@"; do
  case $a in
    -c) object=1 ;;
    *mmq_instance_*.cu) mmq=1 ;;
  esac
done
if [ $object = 0 ]; then
  exec "$NVCC_REAL" "$@"
fi
args=()
for a in "$@"; do
  case $a in
    -gencode=arch=compute_*,code=sm_*)
      arch=${a#-gencode=arch=}
      arch=${arch%%,*}
      a="-gencode=arch=$arch,code=$arch"
      ;;
  esac
  args+=("$a")
done
[ $mmq = 1 ] && args+=(-G)
exec "$NVCC_REAL" "${args[@]}"
