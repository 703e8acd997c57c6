#!/usr/bin/env bash
# For a GPU machine with a driver but no Rust toolchain: builds here, with
# the `cuda` feature against CUDA 13.0 from PyPI (a driver JIT-compiles
# candle's PTX only up to its own release: CUDA 13.0 is driver 580), the
# GPU tests (lib/tests/cuda.rs) and ir-run, and packs them with a runner:
#   recipes/cuda/cuda_bundle.sh [DIR]          (default DIR: .cuda-bundle)
# then, on the GPU machine, from a copy of this repository at any path:
#   DIR/run.sh [OUTDIR]
# which runs every fixture and op-conformance case on the GPU against the
# CPU (the tests look for the repository at the path it had here: run.sh
# links it there) and ir-run --device cuda on the models of golden/models
# against the outputs torch recorded. cudarc loads the driver, cuBLAS and
# cuRAND when it runs (dlopen); the binaries link only the CUDA runtime
# (libcudart, for candle's static kernels), which run.sh finds there.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.cuda-bundle}
root=$(CUDA_RELEASE=13.0 recipes/cuda/setup_cuda.sh .venv-cuda130)
export PATH="$root/bin:$PATH" CUDA_ROOT="$root" CUDA_PATH="$root" CUDA_HOME="$root"
# Hopper (sm_90: the H100 and H200); candle-kernels also compiles static
# kernels to machine code for this capability alone.
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90} CUDARC_CUDA_VERSION=13000
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR_CUDA:-target/cuda130}
# candle links the CUDA libraries (cudarc's dynamic-linking): the wheels
# ship them under their versioned names only, and the driver's libcuda not
# at all. Unversioned names beside them, and a stub libcuda.so.1 (every
# driver function cudarc declares, empty: the driver's own is loaded on
# the GPU machine), as the toolkit's lib/stubs would give.
lib="$root/lib"
for l in cublas.so.13 cublasLt.so.13 curand.so.10 nvrtc.so.13 cudart.so.13; do
  ln -sfn "lib$l" "$lib/lib${l%.so.*}.so"
done
if [ ! -f "$lib/libcuda.so" ]; then
  cudarc=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-"$(sed -n '/^name = "cudarc"/{n;s/version = "\(.*\)"/\1/p}' Cargo.lock)" | head -1)
  sed -n 's/^pub unsafe fn \(cu[A-Za-z0-9_]*\)(.*/void \1(void) {}/p' "$cudarc/src/driver/sys/mod.rs" | sort -u > "$lib/cuda-stub.c"
  cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$lib/libcuda.so" "$lib/cuda-stub.c"
fi
cargo test --locked --release -p pt2kit --features cuda --test cuda --no-run
test_bin=$(cargo test --locked --release -p pt2kit --features cuda --test cuda --no-run \
  --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "cuda" and m.get("executable"):
        print(m["executable"])')
cargo build --locked --release -p pt2kit-cli --features cuda --bin ir-run
# pt2ir, ir-decompose and ir-diff run no kernels: the plain build's (a tenth the size)
CARGO_TARGET_DIR=target cargo build --locked --release -p pt2kit-cli --bin pt2ir --bin ir-diff --bin ir-decompose
rm -rf "$out" && mkdir -p "$out"
cp "$test_bin" "$out/cuda-tests"
cp "$CARGO_TARGET_DIR/release/ir-run" target/release/pt2ir target/release/ir-diff target/release/ir-decompose "$out/"
strip "$out"/*
# candle's PTX, text, is most of the CUDA binaries: xz takes them from 58
# to 7 MB (run.sh unpacks them)
xz -T0 -6 "$out/cuda-tests" "$out/ir-run" "$out/pt2ir" "$out/ir-diff" "$out/ir-decompose"
printf '%s\n' "$PWD" > "$out/repo-path"
cp recipes/cuda/cuda_bundle_run.sh "$out/run.sh"
du -sh "$out"
