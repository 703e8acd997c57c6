#!/usr/bin/env bash
# On a GPU machine, from the root of a copy of this repository: runs what
# recipes/cuda/cuda_bundle.sh packed (it is copied into the bundle as run.sh).
#   BUNDLE/run.sh [OUTDIR]
# 1. The GPU tests (lib/tests/cuda.rs): every fixture and op-conformance
#    case on the GPU against the CPU.
# 2. `pt2ir | ir-run --device cuda` on each fixture of golden/models,
#    composite and fallback against the outputs torch recorded (ir-diff,
#    1e-3, 2e-2 with bfloat16 inside: cuBLAS sums in its own order); where
#    one differs, the first node where the GPU and the CPU part.
# 3. With MODELS=1: recipes/cuda/cuda_models.py, the bench models on the GPU
#    (MODELS=only: that alone).
# Exits non-zero when any fails; the log goes to OUTDIR/cuda.log too.
set -uo pipefail
packed=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/cuda-out}
mkdir -p "$out"
exec > >(tee "$out/cuda.log") 2>&1
# the binaries, unpacked beside nothing of the repository's
bundle=$(mktemp -d)
cp "$packed"/* "$bundle/"
for f in "$bundle"/*.xz; do
  xz -d "$f" 2>/dev/null || python3 -c 'import lzma, sys; open(sys.argv[1][:-3], "wb").write(lzma.open(sys.argv[1]).read())' "$f"
  chmod +x "${f%.xz}"
done
# The tests find the repository at the path it had where they were built.
built_at=$(cat "$bundle/repo-path")
if [ "$(cd "$built_at" 2>/dev/null && pwd -P)" != "$(pwd -P)" ]; then
  mkdir -p "$(dirname "$built_at")" && ln -sfn "$(pwd -P)" "$built_at"
fi
# cudarc opens the driver, cuBLAS and cuRAND by name when it runs.
libs=""
for name in libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13; do
  found=$(find /usr /opt /lib /lib64 -name "$name" 2>/dev/null | head -1)
  [ -n "$found" ] || { echo "run.sh: $name not found on this machine" >&2; continue; }
  echo "$name: $found"
  libs="$libs:$(dirname "$found")"
done
export LD_LIBRARY_PATH="${libs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
status=0
if [ "${MODELS:-}" = only ]; then
  python3 recipes/cuda/cuda_models.py "$bundle" "$out/models"
  exit
fi
echo "== GPU tests (lib/tests/cuda.rs)"
(cd "$built_at/lib" && "$bundle/cuda-tests" --ignored --skip no_gpu_is_a_clear_error --test-threads 1) || status=1
echo "== ir-run --device cuda against torch's outputs"
pass=0 fail=0 refused=0
for pt2 in golden/models/*.pt2 golden/composite/*.pt2 golden/fallback/*.pt2; do
  m=${pt2%.pt2}
  m=${m%.decomp}
  [ -f "$m.inputs.npz" ] && [ -f "$m.expected.npz" ] || continue
  name=$(basename "${pt2%.pt2}")
  # bfloat16 inside: cuBLAS rounds its sums to bfloat16 in its own order
  tol=1e-3
  "$bundle/pt2ir" "$pt2" --emit text 2>/dev/null | grep -q 'bf16\[' && tol=2e-2
  if "$bundle/pt2ir" "$pt2" | "$bundle/ir-run" --device cuda --stats --inputs "$m.inputs.npz" -o "$out/$name.npz" 2> "$out/$name.err" &&
     "$bundle/ir-diff" --by-position --atol $tol --rtol $tol "$out/$name.npz" "$m.expected.npz" > "$out/$name.diff" 2>&1; then
    pass=$((pass + 1))
  elif ! "$bundle/pt2ir" "$pt2" | "$bundle/ir-run" --inputs "$m.inputs.npz" -o /dev/null 2>/dev/null; then
    # what the CPU refuses too (complex values) is the CPU suites' business
    refused=$((refused + 1))
    echo "refused on both devices: $name: $(grep -m1 error "$out/$name.err")"
  else
    fail=$((fail + 1)); status=1
    echo "FAIL $name: $(head -c 600 "$out/$name.err" "$out/$name.diff" 2>/dev/null)"
    # the first node where the GPU and the CPU part
    "$bundle/pt2ir" "$pt2" | "$bundle/ir-run" --device cuda --inputs "$m.inputs.npz" -o /dev/null --intermediates "$out/$name.gpu.npz" 2>/dev/null &&
      "$bundle/pt2ir" "$pt2" | "$bundle/ir-run" --inputs "$m.inputs.npz" -o /dev/null --intermediates "$out/$name.cpu.npz" 2>/dev/null &&
      "$bundle/ir-diff" --first --atol $tol --rtol $tol "$out/$name.cpu.npz" "$out/$name.gpu.npz" 2>&1 | head -5 | sed "s/^/  first: /"
    rm -f "$out/$name.gpu.npz" "$out/$name.cpu.npz"
  fi
  # what ran on the host (--stats counts the copies per op)
  grep -i "host" "$out/$name.err" | grep -v "(none)" | sed "s/^/  $name: /"
  rm -f "$out/$name.npz" "$out/$name.diff"
  [ -s "$out/$name.err" ] && grep -q "error" "$out/$name.err" || rm -f "$out/$name.err"
done
echo "ir-run --device cuda: $pass fixtures agree with torch, $fail do not, $refused refused on both devices"
# 3. With MODELS=1 (torch, torchvision and transformers there): the bench
#    models at full size on the GPU against torch (recipes/cuda/cuda_models.py).
if [ -n "${MODELS:-}" ]; then
  echo "== the bench models: ir-run --device cuda against torch on the same GPU"
  python3 recipes/cuda/cuda_models.py "$bundle" "$out/models" || status=1
fi
exit $status
