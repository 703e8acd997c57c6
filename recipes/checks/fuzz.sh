#!/usr/bin/env bash
# Coverage-guided fuzzing of the readers of untrusted files (fuzz/): every
# target runs SECONDS seconds (libFuzzer through cargo-fuzz, sanitizer
# none, on the stable toolchain), seeded from golden/. A crash leaves its
# input in fuzz/artifacts/TARGET/ and fails the run; turn it into a
# regression (golden/bad/ or a unit test) and fix it.
#   recipes/checks/fuzz.sh SECONDS [TARGET...]     (default: every target)
# Prints a table of runs (target, seconds, executions, coverage, result).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-600}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(zip_reader pt2_import torch_save_pickle torchscript_import ir_stream tensor_files load_and_check run_program)
fi
if ! command -v cargo-fuzz >/dev/null 2>&1 && ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz from crates.io" >&2
  cargo install cargo-fuzz --locked >&2
fi
# libFuzzer's instrumentation through cargo-fuzz needs -Z flags only for
# sanitizers; with none, the stable toolchain builds it (the bootstrap
# switch covers cargo-fuzz's own use of unstable cargo options).
export RUSTC_BOOTSTRAP=1
corpus=fuzz/corpus
mkdir -p "$corpus"

seed_into() { local t=$1; shift; mkdir -p "$corpus/$t"; for f in "$@"; do [ -f "$f" ] && cp -f "$f" "$corpus/$t/$(basename "$f")"; done; }
small_pt2=(golden/models/mlp.pt2 golden/models/dynamic.pt2 golden/models/multiout.pt2 golden/models/cond.pt2 golden/models/embedding.pt2 golden/legacy/*.pt2 golden/bad/*.pt2)
seed_into zip_reader "${small_pt2[@]}" golden/models/mlp.inputs.npz
seed_into pt2_import "${small_pt2[@]}"
seed_into torch_save_pickle golden/bad/pickled_weight.pt2 golden/legacy/legacy_pickled_mlp.pt2
seed_into torchscript_import golden/ts/*.pt
seed_into tensor_files golden/models/*.inputs.npz golden/fallback/fb_bags.inputs.npz
bin=target/release
[ -x "$bin/pt2ir" ] || cargo build --release --locked -p pt2kit-cli
for m in mlp dynamic multiout cond whileloop embedding; do
  for t in ir_stream load_and_check; do
    mkdir -p "$corpus/$t"
    "$bin/pt2ir" "golden/models/$m.pt2" --weights inline -o "$corpus/$t/$m.ir"
  done
done
printf '%-18s %8s %12s %8s %s\n' target seconds executions coverage result
status=0
for t in "${targets[@]}"; do
  # a target without seeds (run_program makes its programs from bytes) starts from an empty corpus
  mkdir -p "$corpus/$t"
  log=$(mktemp)
  if (cd fuzz && cargo fuzz run --release -s none "$t" "corpus/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=4096 -timeout=20 -print_final_stats=1) >"$log" 2>&1; then
    result=ok
  else
    result="CRASH (fuzz/artifacts/$t/)"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
  printf '%-18s %8s %12s %8s %s\n' "$t" "$secs" "${execs:-?}" "${cov:-?}" "$result"
  if [ "$result" != ok ]; then
    grep -E "panicked|ERROR:|SUMMARY|Test unit written|Reproduce with|cargo fuzz run" "$log" | head -12 >&2 || true
  fi
  rm -f "$log"
done
exit $status
