#!/usr/bin/env bash
# `make check-cuda` (and `make test-cuda`, with `test`): type-checks the
# whole workspace with the `cuda`
# feature (candle's CUDA backend, its PTX kernels compiled by nvcc, cudarc,
# and every test, the GPU tests of lib/tests/cuda.rs included) with clippy,
# warnings as errors, against a CUDA toolkit installed from PyPI
# (recipes/cuda/setup_cuda.sh). Linking needs the driver's libcuda.so, which no
# wheel ships, so nothing is linked or run: that takes a GPU machine
# (`make test-cuda`, or `make cuda-bundle` for one without Rust). It never
# skips: no toolkit, no pass.
#   recipes/cuda/check_cuda.sh [check|test] [VENV]   (default: check .venv-cuda)
# `test`, on a machine with a GPU and its driver: builds with the feature
# and runs the GPU tests (lib/tests/cuda.rs: every fixture and conformance
# case on the GPU against the CPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-check}
root=$(recipes/cuda/setup_cuda.sh "${2:-.venv-cuda}")
export PATH="$root/bin:$PATH"
export CUDA_ROOT="$root" CUDA_PATH="$root" CUDA_HOME="$root"
# Kernels for Ampere (sm_80) and later; candle-kernels reads this instead of
# asking a GPU (there is none here).
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-80}
# candle-kernels' nvcc runs (cudaforge) on every core, not half of them
# (its default): on 2 cores one file at a time took 17 of CI's 31 minutes.
export CUDAFORGE_THREADS=${CUDAFORGE_THREADS:-$(nproc)}
# cudarc 0.19's build script knows CUDA versions up to 13.4.
export CUDARC_CUDA_VERSION=${CUDARC_CUDA_VERSION:-13040}
# Its own target directory: the cuda build shares no artefacts with the
# release build.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR_CUDA:-target/cuda}
echo "check-cuda: nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), compute capability $CUDA_COMPUTE_CAP"
if [ "$mode" = test ]; then
  # On a GPU the kernels run: nvcc optimizes them as candle asks.
  exec cargo test --locked --release -p pt2kit --features cuda --test cuda -- --ignored \
    --skip no_gpu_is_a_clear_error
fi
# A check links and runs nothing: candle-kernels' static library is
# compiled to PTX only, its largest files unoptimized (recipes/cuda/nvcc_check.sh).
mkdir -p "$CARGO_TARGET_DIR/nvcc-check/bin"
shim=$(cd "$CARGO_TARGET_DIR/nvcc-check" && pwd)
for d in include lib lib64; do
  if [ -e "$root/$d" ]; then ln -sfn "$root/$d" "$shim/$d"; fi
done
cp -f recipes/cuda/nvcc_check.sh "$shim/bin/nvcc"
export NVCC_REAL="$root/bin/nvcc" NVCC="$shim/bin/nvcc"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo clippy --locked --workspace --all-targets --features cuda -- -D warnings 2>&1 | tee "$log"
# The proof that candle's CUDA kernels were built (cached builds say so in
# the fingerprint directory instead of the log).
if grep -q "Compiling candle-kernels" "$log" || ls "$CARGO_TARGET_DIR"/debug/build/candle-kernels-*/output >/dev/null 2>&1; then
  echo "check-cuda: candle's CUDA kernels compiled (candle-kernels), workspace type-checked with --features cuda"
else
  echo "check-cuda: candle-kernels was not built: the cuda feature did not reach candle" >&2
  exit 1
fi
