# Top-level targets. `make test` is the test command (CI runs it).
CARGO ?= cargo
PYTHON ?= python3
VENV ?= .venv
ONNX_VENV ?= .venv-onnx

.PHONY: build test zoo-ts ts-cases fuzz-kernels dtypes-onnx onnx-types test-big huge bench-huge test-recipes demo big bench install fixtures dtype-cases golden clean check-cuda test-cuda cuda-bundle zoo fuzz-graphs random-golden fuzz fuzz-smoke bench-compare bench-int8 bench-bf16 bench-convs bench-ort-exports bench-pipe

build:
	$(CARGO) build --release --locked --workspace

# Everything CI checks: the Rust suite (in release, against the one build
# above), the recipe demo, and every fixture through ir2onnx into ONNX's
# checker and ONNX Runtime (numpy, onnx, onnxruntime from PyPI into .venv-onnx).
test: build $(ONNX_VENV)/.ready
	$(CARGO) test --release --locked --workspace
	# Every fixture against torch again on the AVX2 kernels (as on a CPU without AVX-512; where this CPU
	# has no AVX2, the baseline), then on the baseline ones (the gemm crate and candle's loops).
	PT2KIT_NO_AVX512=1 $(CARGO) test --release --locked --workspace --test exec -- every_fixture_matches_torch numerics_fixtures_match_torch quant_fixtures_match_torch complex_fixtures_match_torch
	PT2KIT_NO_AVX512=1 $(CARGO) test --release --locked -p pt2kit --features exec --lib -- exec:: kernels::
	PT2KIT_NO_AVX2=1 $(CARGO) test --release --locked --workspace --test exec -- every_fixture_matches_torch numerics_fixtures_match_torch quant_fixtures_match_torch complex_fixtures_match_torch
	# Every fast kernel against its plain reference on random shapes (lib/tests/kernels.rs), on each
	# instruction set's kernels.
	PT2KIT_NO_AVX512=1 $(CARGO) test --release --locked -p pt2kit --features exec --test kernels
	PT2KIT_NO_AVX2=1 $(CARGO) test --release --locked -p pt2kit --features exec --test kernels
	# No kernel calls an intrinsic out of line (a closure compiled without its kernel's instruction set).
	python3 recipes/checks/check_inlined.py --bin target/release/ir-run
	$(MAKE) -C recipes demo
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/models --opset 17 --opset 18 --opset 21
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/composite --opset 17 --opset 18 --opset 21
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/hop --opset 17 --opset 18 --opset 21
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/moe --opset 17 --opset 18 --opset 21
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/tail --opset 17 --opset 18 --opset 21
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/fallback --opset 17 --opset 18 --opset 21
	# TorchScript (golden/ts) through ts2ir | ir-decompose | ir2onnx and ONNX Runtime.
	$(ONNX_VENV)/bin/python recipes/checks/check_ts_onnx.py --bin target/release --cases golden/ts --opset 17 --opset 18 --opset 21
	# torchvision's detection ops (golden/vision): deform_conv2d becomes ONNX DeformConv, from opset 19 (below, ir2onnx
	# refuses it by name); tv_ps_roi_pool (no ONNX op averages RoI bins) and tv_float64 (ONNX Runtime has no float64
	# MaxRoiPool or NonMaxSuppression) are refused by name (docs/coverage.md).
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/vision --opset 17 --opset 18 --opset 21 --skip tv_deform_conv tv_ps_roi_pool tv_float64
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/vision --opset 19 --opset 21 --only tv_deform_conv
	# Numerics (golden/numerics): integers past 2^53, int8 wrap-around, NaN's order, float16 and
	# bfloat16 CNNs, fully masked attention rows, 3-D convolutions. From opset 18: integer bitwise
	# ops need it (at 17 ir2onnx refuses them by name; bins/tests/onnx.rs holds the refusal).
	# num_f64_conv is refused by design (ONNX Runtime has no float64 Conv; bins/tests/onnx.rs holds it).
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/numerics --opset 18 --opset 21 --skip num_f64_conv
	# PT2E int8 (golden/quant): QuantizeLinear/DequantizeLinear, which ONNX Runtime fuses into its int8
	# kernels; a float output a dequantize makes within one step of its quantization (check_onnx.py).
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/quant --opset 17 --opset 18 --opset 21
	# Complex values (golden/complex) as real pairs, FFTs as ONNX DFT (from opset 17). cx_io's inputs and
	# outputs are complex, which ONNX Runtime takes none of: ir2onnx refuses it (bins/tests/onnx.rs holds the refusal).
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/complex --opset 17 --opset 18 --opset 21 --skip cx_io
	# Program state (golden/state, recipes/fixtures/state_cases.py): KV caches, running statistics, a training batch
	# norm, an updated input, in-place writes through views: user outputs first in torch's order, then the
	# state; then step by step through ir-run --state, ir-decompose and ONNX Runtime with --state-inputs.
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/state --opset 17 --opset 18 --opset 21
	$(ONNX_VENV)/bin/python recipes/checks/check_state.py --bin target/release --models golden/state --opset 17 --opset 21
	# Dynamic dims (golden/dynamic): each model at three sizes, dims kept as dim_params.
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/dynamic --opset 17 --opset 18 --opset 21
	# Symbolic ints (golden/symint): 0-d int64 SymInt inputs, derived dims, symbolic tril diagonals, causal attention.
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/symint --opset 17 --opset 18 --opset 21
	# Node by node: every intermediate value of ir-run against ONNX Runtime's (ir2onnx --intermediates,
	# ir-diff --first), and a control that a node made wrong in the ONNX is the one named.
	for d in models composite dynamic; do $(ONNX_VENV)/bin/python recipes/checks/check_intermediates.py --bin target/release --models golden/$$d || exit 1; done
	$(ONNX_VENV)/bin/python recipes/checks/check_intermediates.py --bin target/release --models golden/numerics --skip num_f64_conv
	# fb_fft computes with complex values, which both back ends lower to real pairs at load: their
	# --intermediates are those of two lowerings, whose names do not meet (docs/tools.md, ir-diff).
	$(ONNX_VENV)/bin/python recipes/checks/check_intermediates.py --bin target/release --models golden/fallback --skip fb_fft
	# PT2E int8: a quantization where the two part on a rounding tie (float32 ulps apart) is fed through.
	$(ONNX_VENV)/bin/python recipes/checks/check_intermediates.py --bin target/release --models golden/quant --explain-ties
	$(ONNX_VENV)/bin/python recipes/checks/check_intermediates.py --bin target/release --models golden/complex --skip cx_io
	# The random programs of golden/random (recipes/checks/fuzz_graphs.py): ir-run, ir-decompose + ir-run, ir2onnx + ONNX Runtime.
	$(ONNX_VENV)/bin/python recipes/checks/check_random.py --bin target/release --dir golden/random
	# The dtype conformance suite (golden/dtypes) through ir2onnx and ONNX Runtime: none wrong.
	$(ONNX_VENV)/bin/python recipes/checks/check_dtypes_onnx.py --bin target/release --opset 18

$(ONNX_VENV)/.ready:
	recipes/run/setup_venv.sh $(ONNX_VENV)
	touch $@

# The same checks on the large models (needs golden/big: make big).
test-big: build $(ONNX_VENV)/.ready
	$(CARGO) test --release --locked --workspace -- --ignored
	$(ONNX_VENV)/bin/python recipes/checks/check_onnx.py --bin target/release --models golden/big --opset 18

# The cuda feature, type-checked with clippy against a CUDA toolkit from
# PyPI (recipes/cuda/setup_cuda.sh into .venv-cuda; no GPU needed); CI runs it.
check-cuda:
	recipes/cuda/check_cuda.sh check

# The GPU tests (lib/tests/cuda.rs), on a machine with a GPU and its driver.
test-cuda:
	recipes/cuda/check_cuda.sh test

# For a GPU machine with no Rust toolchain: the GPU tests, ir-run, pt2ir and
# ir-diff built here against CUDA 13.0 (driver 580) for sm_90, packed into
# .cuda-bundle with a runner; there, from the repository's root:
# .cuda-bundle/run.sh OUTDIR (recipes/cuda/cuda_bundle_run.sh).
cuda-bundle:
	recipes/cuda/cuda_bundle.sh

# The documented examples that need torch (export_model.py, the recipes
# Makefile from another directory); the others run in make test.
test-recipes: build $(VENV)/.torch
	recipes/checks/test_recipes.sh $(VENV)/bin/python target/release

# Python environments for the recipes (torch from PyPI, a few minutes).
$(VENV)/.torch:
	recipes/run/setup_venv.sh --torch $(VENV)
	touch $@

# Regenerates the committed fixtures and expected outputs with torch.
fixtures: $(VENV)/.torch
	$(VENV)/bin/python recipes/fixtures/zoo.py --out golden/models
	$(VENV)/bin/python recipes/fixtures/make_bad.py --models golden/models --out golden/bad
	$(VENV)/bin/python recipes/fixtures/make_legacy.py --models golden/models --out golden/legacy
	$(VENV)/bin/python recipes/fixtures/ts_cases.py golden/ts

# The kernel property tests (lib/tests/kernels.rs) with many more random shapes, on every
# instruction set's kernels: `make fuzz-kernels CASES=5000`.
CASES ?= 2000
fuzz-kernels: build
	PT2KIT_KERNEL_CASES=$(CASES) $(CARGO) test --release --locked -p pt2kit --features exec --test kernels
	PT2KIT_KERNEL_CASES=$(CASES) PT2KIT_NO_AVX512=1 $(CARGO) test --release --locked -p pt2kit --features exec --test kernels
	PT2KIT_KERNEL_CASES=$(CASES) PT2KIT_NO_AVX2=1 $(CARGO) test --release --locked -p pt2kit --features exec --test kernels

# Regenerates the dtype conformance suite with torch (recipes/fixtures/dtype_cases.py): every core
# ATen overload x every dtype torch supports for it, on plain, extremal and empty inputs:
# golden/dtypes. A few minutes on 2 cores. `make dtype-cases DTYPE_CASES_ARGS="--only
# aten.add.Tensor --dtypes int64"` regenerates a part.
dtype-cases: $(VENV)/.torch
	$(VENV)/bin/python recipes/fixtures/dtype_cases.py --out golden/dtypes $(DTYPE_CASES_ARGS)

# The dtype conformance suite (golden/dtypes) through ir2onnx and ONNX Runtime, counted: cases that
# agree, that ir2onnx or ONNX Runtime refuse, and any ONNX Runtime computes wrong (exit 1 then).
dtypes-onnx: build $(ONNX_VENV)/.ready
	$(ONNX_VENV)/bin/python recipes/checks/check_dtypes_onnx.py --bin target/release --opset 18

# Rewrites lib/data/onnx_types.txt (the types each ONNX op takes at opsets 17-21 and ONNX
# Runtime's CPU kernels, which ir2onnx checks every node against) from the installed onnx and
# onnxruntime.
onnx-types: $(ONNX_VENV)/.ready
	$(ONNX_VENV)/bin/python recipes/fixtures/gen_onnx_types.py --out lib/data/onnx_types.txt

# The large models, not committed (golden/big).
big: $(VENV)/.torch
	$(VENV)/bin/python recipes/fixtures/zoo.py --out golden/models --only resnet18 resnet50 mobilenet_v3_small efficientnet_b0 convnext_tiny

# A Llama-7B-shaped model (bfloat16, about 13.5 GB) and a 4-layer cut of it
# (about 1.9 GB), with torch's logits for the cut (recipes/fixtures/huge.py; never
# committed; about 15 GiB of memory and 16 GB of disk): golden/huge.
huge: $(VENV)/.torch
	$(VENV)/bin/python recipes/fixtures/huge.py --out golden/huge

# Every tool on the huge archives: wall time, throughput against cat, peak
# RSS and peak RssAnon of each process; ONNX Runtime and ir-run against
# torch on the cut (recipes/bench/bench_huge.py, needs make huge): bench/huge.json.
bench-huge: build $(ONNX_VENV)/.ready
	$(ONNX_VENV)/bin/python recipes/bench/bench_huge.py --bin target/release --dir golden/huge --scratch bench-scratch/huge

# Weights through a pipeline by reference: a 3.2 GB IR file (12 x
# Linear(8192, 8192)) through `ir-decompose < big.ir | ir2onnx
# --external-data` and through pipes of inline weights (one spool per
# pipeline), with GB/s and each tool's peak RssAnon (recipes/bench/bench_pipe.py;
# about 13 GB of disk in bench-scratch/pipe): bench/pipe.json.
bench-pipe: build $(VENV)/.torch
	$(VENV)/bin/python recipes/bench/bench_pipe.py --bin target/release --scratch bench-scratch/pipe --json bench/pipe.json

# The wide zoo (not part of `make test`): ~380 torchvision, transformers,
# timm, diffusers, torch.nn and ExportDB models, stateful modules and export
# variants, built with random weights, exported by torch, through pt2ir,
# ir-run, ir-decompose and ir2onnx + ONNX Runtime against torch eager. Writes
# golden/zoo/REPORT.md and golden/zoo/results.json; models and logs go to
# zoo-scratch/ (git-ignored). About 7 minutes on 2 cores.
# `make zoo ZOO_ARGS="--family nn"` or ZOO_ARGS="--only bert_sdpa_b2" reruns a part.
# TorchScript through ts2ir: the small committed cases (golden/ts, tested by
# bins/tests/ts2ir.rs), and the bigger ones (torchvision, nn layers, HF
# traced with torchscript=True) written to zoo-scratch/ts and each run
# through ts2ir | ir-run and ts2ir | ir-decompose | ir-run against torch.
ts-cases: $(VENV)/.torch
	$(VENV)/bin/python recipes/fixtures/ts_cases.py golden/ts

zoo-ts: build $(VENV)/.torch
	$(VENV)/bin/python recipes/fixtures/ts_cases.py --zoo zoo-scratch/ts
	PYTHON=$(VENV)/bin/python recipes/checks/check_ts_zoo.sh target/release zoo-scratch/ts

zoo: build $(VENV)/.torch $(ONNX_VENV)/.ready
	$(VENV)/bin/python recipes/checks/zoo_wide.py --bin target/release --onnx-python $(ONNX_VENV)/bin/python \
		--out golden/zoo --scratch zoo-scratch $(ZOO_ARGS)

# ir-run (the graph as exported and lowered) against ONNX Runtime,
# OpenVINO and torch eager, side by side (the seven full-size models at
# batch 1 and 8; about 45 minutes; wants a quiet machine): bench/compare.json
# and its table in docs/performance.md (python3 recipes/bench/update_readme.py).
bench-compare: build $(VENV)/.torch $(ONNX_VENV)/.openvino
	$(VENV)/bin/python recipes/bench/bench_compare.py --onnx-python $(ONNX_VENV)/bin/python $(BENCH_ARGS)

# PT2E int8 ResNet-18 and BERT-base (X86InductorQuantizer, static) on
# ir-run's int8 kernels against ONNX Runtime on ir2onnx's QDQ ONNX, the
# graph as written and the float32 model (recipes/bench/bench_int8.py;
# bench/int8.json).
bench-int8: build $(VENV)/.torch $(ONNX_VENV)/.ready
	$(VENV)/bin/python recipes/bench/bench_int8.py --onnx-python $(ONNX_VENV)/bin/python $(BENCH_ARGS)

# ir-run --precision bf16 against OpenVINO at bf16 on ResNet-50 and
# BERT-base, each one's error against torch eager (recipes/bench/bench_bf16.py;
# bench/bf16.json; about 10 minutes).
bench-bf16: build $(VENV)/.torch $(ONNX_VENV)/.openvino
	$(VENV)/bin/python recipes/bench/bench_bf16.py --onnx-python $(ONNX_VENV)/bin/python $(BENCH_ARGS)

# OpenVINO (from PyPI) beside ONNX Runtime, for bench-compare.
$(ONNX_VENV)/.openvino: $(ONNX_VENV)/.ready
	$(ONNX_VENV)/bin/python -m pip install -q openvino
	touch $@

# ONNX Runtime on ir2onnx's ONNX against ONNX Runtime on torch's own
# export of the same archive, interleaved (recipes/bench/bench_ort_exports.py;
# after bench-compare, whose artifacts it reads; bench/ort_exports.json).
bench-ort-exports: build $(VENV)/.torch $(ONNX_VENV)/.ready
	$(VENV)/bin/python recipes/bench/bench_ort_exports.py --onnx-python $(ONNX_VENV)/bin/python $(BENCH_ARGS)

# Single convolutions (the layers the model profiles put behind) in
# ir-run against ONNX Runtime, interleaved (recipes/bench/bench_convs.py; a few
# minutes, bench/convs.json).
bench-convs: build $(VENV)/.torch $(ONNX_VENV)/.ready
	$(VENV)/bin/python recipes/bench/bench_convs.py --onnx-python $(ONNX_VENV)/bin/python $(BENCH_ARGS)

# Random-program differential testing (recipes/checks/fuzz_graphs.py, needs the
# torch venv): N fresh programs of seed SEED through ir-run, ir-decompose +
# ir-run and ir2onnx + ONNX Runtime against torch eager; each failure's
# shrunk reproducer goes to $(FUZZ_OUT)/failures (git-ignored), the summary
# by stage and error to $(FUZZ_OUT)/summary.txt. Exits 1 when one fails.
N ?= 1000
SEED ?= 1
FUZZ_OUT ?= fuzz-out
fuzz-graphs: build $(VENV)/.torch
	$(VENV)/bin/python recipes/checks/fuzz_graphs.py --bin target/release -n $(N) --seed $(SEED) --out $(FUZZ_OUT) $(FUZZ_ARGS)

# Coverage-guided fuzzing of the readers of untrusted files (fuzz/,
# libFuzzer through cargo-fuzz on the stable toolchain; installs cargo-fuzz
# when missing): every target FUZZ_SECONDS seconds, seeded from golden/.
# A crash leaves its input in fuzz/artifacts/TARGET/ and fails the run;
# commit it under golden/fuzz/TARGET/ (lib/tests/fuzz.rs replays it).
FUZZ_SECONDS ?= 600
fuzz:
	recipes/checks/fuzz.sh $(FUZZ_SECONDS)

# The short run CI makes of every target.
fuzz-smoke:
	recipes/checks/fuzz.sh 10

# Regenerates golden/random, the seed set make test checks (the first 360
# programs torch keeps from seed 0, less the known failures, plus
# golden/random/fixtures).
random-golden: build $(VENV)/.torch
	$(VENV)/bin/python recipes/checks/fuzz_graphs.py --bin target/release --golden golden/random --count 360 --seed 0

# Rewrites golden listings, error messages and man pages from this build.
golden: build
	UPDATE_GOLDEN=1 $(CARGO) test --release --locked --workspace

# Benchmarks (need `make big` and, for ir-run against torch, the torch venv).
bench: build $(VENV)/.torch
	$(PYTHON) recipes/bench/bench_pt2ir.py golden/big/resnet50.pt2 golden/big/resnet18.pt2 golden/big/convnext_tiny.pt2
	$(VENV)/bin/python recipes/bench/bench_run.py mlp resnet18 bert
	$(VENV)/bin/python recipes/bench/bench_decompose.py bert resnet50
	$(PYTHON) recipes/bench/update_readme.py

install:
	./install.sh

demo: build
	$(MAKE) -C recipes demo

clean:
	$(CARGO) clean
	$(MAKE) -C recipes clean
