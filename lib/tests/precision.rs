//! `--precision bf16` end to end: fixtures whose products (linear layers,
//! attention's projections, a classifier) and convolutions run with both
//! operands rounded to bfloat16 (`exec::lowp`) match torch's float32
//! outputs (`golden/models/*.expected.npz`) within a bound for bfloat16,
//! and differ from the float32 run (the reduced-precision path was
//! taken). Without a bfloat16 kernel (`PT2KIT_NO_AVX512=1`, or a CPU
//! without AVX512-BF16) the run is the float32 run, bit for bit.

#![cfg(feature = "exec")]

mod common;

use common::*;
use pt2kit::exec::{self, lowp, DeviceKind, ExecOptions, Executor};
use pt2kit::tensorfile::HostTensor;

/// Each model and the largest error allowed against torch, relative to
/// its largest output magnitude (at least 1). bfloat16 keeps 8 bits: one
/// rounding is 2^-9 (0.002) relative, and a product over `k` terms of
/// either sign errs about 2^-9 of its magnitudes' sum, less where the
/// errors cancel; a deep network adds the layers' errors up. The bounds
/// are about four times what was measured (in the comment), so a
/// rounding that went wrong (float32 left in, a truncation, a weight read
/// wrongly) fails them. (`vit_small` is left out: torchvision zeroes its
/// classifier, so its output is the bias whatever the products give.)
const MODELS: &[(&str, f64)] = &[
    ("mlp", 0.006),              // measured 1.46e-3
    ("linear_epilogues", 0.005), // measured 1.06e-3
    ("transformer", 0.003),      // measured 7.4e-4
    ("bert", 0.001),             // measured 1.75e-4
    ("gpt2", 0.005),             // measured 1.17e-3
];

fn run(
    program: &pt2kit::ir::Program,
    precision: lowp::Precision,
    inputs: &[(String, HostTensor)],
) -> Vec<(String, HostTensor)> {
    let opts = ExecOptions {
        precision,
        ..Default::default()
    };
    let executor =
        Executor::with_options(program, exec::device(DeviceKind::Cpu).unwrap(), opts).unwrap();
    if precision == lowp::Precision::Bf16 {
        assert_eq!(executor.bf16_kernel(), lowp::kernel());
        assert!(executor.precision_note().is_some());
    }
    executor.run(inputs).unwrap()
}

/// The largest absolute difference over every floating output, and the
/// largest magnitude of `want`'s.
fn max_error(got: &[(String, HostTensor)], want: &[(String, HostTensor)]) -> (f64, f64) {
    assert_eq!(got.len(), want.len());
    let (mut err, mut mag) = (0f64, 0f64);
    for ((_, g), (_, w)) in got.iter().zip(want) {
        if !w.dtype.is_floating() {
            continue;
        }
        for (a, b) in g.to_f64().iter().zip(w.to_f64()) {
            assert!(a.is_nan() == b.is_nan(), "NaN where the other has none");
            if !a.is_nan() {
                err = err.max((a - b).abs());
                mag = mag.max(b.abs());
            }
        }
    }
    (err, mag)
}

#[test]
fn bf16_runs_match_torch_within_bfloat16() {
    let kernel = lowp::kernel();
    let mut failures = Vec::new();
    for &(model, tol) in MODELS {
        let pt2 = repo().join(format!("golden/models/{model}.pt2"));
        let program = read(&pt2);
        for (set, inputs, expected) in input_sets(&pt2) {
            let inputs = pt2kit::tensorfile::read_npz(&inputs).unwrap();
            let expected = pt2kit::tensorfile::read_npz(&expected).unwrap();
            let f32_run = run(&program, lowp::Precision::F32, &inputs);
            let bf16_run = run(&program, lowp::Precision::Bf16, &inputs);
            let (err, mag) = max_error(&bf16_run, &expected);
            let (moved, _) = max_error(&bf16_run, &f32_run);
            let rel = err / mag.max(1.0);
            eprintln!("{model}{set}: bf16 against torch {err:.3e} (relative {rel:.2e}), against f32 {moved:.3e}");
            match kernel {
                Some(_) => {
                    if rel > tol {
                        failures.push(format!(
                            "{model}{set}: bf16 differs from torch by {err:e} ({rel:.2e} of its largest output, {mag:e}), over {tol}"
                        ));
                    }
                    if moved == 0.0 {
                        failures.push(format!(
                            "{model}{set}: the bf16 run is the f32 run (no product in bfloat16)"
                        ));
                    }
                }
                None if moved != 0.0 => failures.push(format!(
                    "{model}{set}: no bfloat16 kernel, yet the run differs from f32 by {moved:e}"
                )),
                None => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
