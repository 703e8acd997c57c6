//! `--precision bf16` end to end: fixtures whose products (linear layers,
//! attention's projections, a classifier) and convolutions (strided,
//! padded, pointwise, with fused epilogues, channels-last inputs) run with both
//! operands rounded to bfloat16 (`kernels::lowp`) match torch's float32
//! outputs (`golden/models/*.expected.npz`) within a bound for bfloat16,
//! and differ from the float32 run (the reduced-precision path was
//! taken). Without a bfloat16 kernel (`PT2KIT_NO_AVX512=1`, or a CPU
//! without AVX512-BF16) the run is the float32 run, bit for bit.

#![cfg(feature = "exec")]

mod common;

use common::*;
use pt2kit::exec::{self, DeviceKind, ExecOptions, Executor};
use pt2kit::kernels::lowp;
use pt2kit::tensorfile::HostTensor;

/// Each model and the largest error allowed against torch, relative to
/// its largest output magnitude (at least 1). bfloat16 keeps 8 bits: one
/// rounding is 2^-9 (0.002) relative, and a product over `k` terms of
/// either sign errs about 2^-9 of its magnitudes' sum, less where the
/// errors cancel; a deep network adds the layers' errors up. The bounds
/// are about four times what was measured (in the comment), so a
/// rounding that went wrong (float32 left in, a truncation, a weight read
/// wrongly) fails them. (`vit_small` is left out: torchvision zeroes its
/// classifier, so its output is the bias whatever the products give; so
/// is `stem_pool`, whose convolutions are all stems over few channels,
/// which stay in float32.)
const MODELS: &[(&str, f64)] = &[
    ("mlp", 0.006),              // measured 1.46e-3
    ("linear_epilogues", 0.005), // measured 1.06e-3
    ("transformer", 0.003),      // measured 8.9e-4
    ("bert", 0.001),             // measured 1.86e-4
    ("gpt2", 0.005),             // measured 1.17e-3
    ("cnn", 0.002),              // measured 4.0e-4
    ("conv_epilogues", 0.01),    // measured 2.37e-3
    ("conv_paths", 0.008),       // measured 2.04e-3
    ("conv_over", 0.009),        // measured 2.21e-3
    ("se_fold", 0.006),          // measured 1.63e-3
    ("channels_last", 0.0005),   // measured 1.07e-4
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

/// GFLOP/s of the bfloat16 kernels and of the float32 one on BERT-base's
/// products, on `THREADS` threads (1 by default), A rounded apart (timed
/// alone), B in cache or, with `COLD=n`, one of `n` copies in turn (from
/// memory where they outgrow the caches, as a model's weights); best and
/// median of a second of calls (`cargo test --release --features exec
/// --test precision -- --ignored --nocapture bf16_products_speed`;
/// `SHAPES="m,n,k ..."`).
#[test]
#[ignore = "a measurement"]
fn bf16_products_speed() {
    use pt2kit::kernels::sgemm;
    let number = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (threads, cold) = (number("THREADS", 1), number("COLD", 1).max(1));
    let _ = pt2kit::exec::start_threads(Some(threads as u64));
    let shapes: Vec<(usize, usize, usize)> = std::env::var("SHAPES")
        .unwrap_or_else(|_| "128,768,768 128,3072,768 128,768,3072".into())
        .split_whitespace()
        .map(|s| {
            let v: Vec<usize> = s
                .split(',')
                .map(|x| x.parse().expect("SHAPES: m,n,k"))
                .collect();
            (v[0], v[1], v[2])
        })
        .collect();
    // (best, median) seconds of a second of calls
    let time = |f: &mut dyn FnMut()| {
        let mut times = vec![];
        let start = std::time::Instant::now();
        while start.elapsed().as_secs_f64() < 1.0 {
            let t = std::time::Instant::now();
            f();
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        (times[0], times[times.len() / 2])
    };
    for (m, n, k) in shapes {
        let a: Vec<f32> = spread(m * k, 1);
        let b: Vec<f32> = spread(k * n, 2);
        let mut out = vec![std::mem::MaybeUninit::new(0f32); m * n];
        let flops = 2.0 * (m * n * k) as f64;
        let rate = |(best, median): (f64, f64)| {
            format!(
                "best {:.0} median {:.0} GFLOP/s ({:.3} ms)",
                flops / best / 1e9,
                flops / median / 1e9,
                median * 1e3
            )
        };
        let pbs: Vec<_> = (0..cold)
            .map(|_| sgemm::pack_b(&sgemm::View::row_major(&b, k, n)))
            .collect();
        let av = sgemm::View::row_major(&a, m, k);
        let mut turn = 0;
        let t = pt2kit::exec::in_pool(|| {
            time(&mut || {
                turn = (turn + 1) % cold;
                sgemm::gemm_lhs(
                    sgemm::Lhs::view(&av).unwrap(),
                    &pbs[turn],
                    &mut out,
                    n,
                    sgemm::Init::Zero,
                    None,
                    threads,
                )
            })
        });
        eprintln!("[{m}, {k}] x [{k}, {n}] f32 {}", rate(t));
        let b16s: Vec<_> = (0..cold).map(|_| lowp::pack_b(&b, 0, k, n, n, 1)).collect();
        let a16 = lowp::round_a(&a, 0, m, k, k, 1);
        for kernel in [lowp::Kernel::Amx, lowp::Kernel::Avx512] {
            if !lowp::runs(kernel) {
                continue;
            }
            let t = pt2kit::exec::in_pool(|| {
                time(&mut || {
                    turn = (turn + 1) % cold;
                    let b16 = &b16s[turn];
                    lowp::gemm(
                        &a16,
                        b16,
                        &mut out,
                        n,
                        lowp::Bias::None,
                        threads,
                        kernel,
                        None,
                    )
                })
            });
            let (_, r) = pt2kit::exec::in_pool(|| {
                time(&mut || {
                    std::hint::black_box(lowp::round_a(&a, 0, m, k, k, 1));
                })
            });
            eprintln!(
                "[{m}, {k}] x [{k}, {n}] {} {}, rounding A {:.3} ms",
                kernel.name(),
                rate(t),
                r * 1e3
            );
        }
    }
}

/// GFLOP/s of the bfloat16 convolutions (`lowp::conv`, the input's
/// rounding into its pair planes included and timed apart) on
/// ResNet-50's shapes at batch 1, on `THREADS` threads (2 by default)
/// (`cargo test --release --features exec --test precision --
/// --ignored --nocapture bf16_convolutions_speed`).
#[test]
#[ignore = "a measurement"]
fn bf16_convolutions_speed() {
    use pt2kit::kernels::window::Windows;
    let threads: usize = std::env::var("THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let _ = pt2kit::exec::start_threads(Some(threads as u64));
    // (c, c_out, plane, kernel, stride, pad)
    let shapes = [
        (64, 256, 56, 1, 1, 0),
        (64, 64, 56, 3, 1, 1),
        (256, 64, 56, 1, 1, 0),
        (128, 128, 56, 3, 2, 1),
        (256, 512, 56, 1, 2, 0),
        (128, 128, 28, 3, 1, 1),
        (512, 128, 28, 1, 1, 0),
        (256, 256, 14, 3, 1, 1),
        (1024, 256, 14, 1, 1, 0),
        (256, 1024, 14, 1, 1, 0),
        (512, 512, 7, 3, 1, 1),
        (2048, 512, 7, 1, 1, 0),
        (512, 2048, 7, 1, 1, 0),
    ];
    for kernel in [lowp::Kernel::Amx, lowp::Kernel::Avx512] {
        if !lowp::runs(kernel) {
            continue;
        }
        for &(c, co, hw, k, s, p) in &shapes {
            let g = Windows::new(&[hw, hw], &[k, k], &[s, s], &[p, p], &[1, 1]).unwrap();
            let x = spread(c * hw * hw, 1);
            let w = spread(co * c * k * k, 2);
            let weight = lowp::conv_weight(&w, co, c, k * k);
            let strides = lowp::Strides {
                image: c * hw * hw,
                channel: hw * hw,
                row: hw,
                col: 1,
            };
            let n = g.out_plane();
            let mut out = vec![std::mem::MaybeUninit::new(0f32); co * n];
            let flops = 2.0 * (co * n * c * k * k) as f64;
            let time = |f: &mut dyn FnMut()| {
                let mut best = f64::MAX;
                let start = std::time::Instant::now();
                while start.elapsed().as_secs_f64() < 0.5 {
                    let t = std::time::Instant::now();
                    f();
                    best = best.min(t.elapsed().as_secs_f64());
                }
                best
            };
            let (all, round) = pt2kit::exec::in_pool(|| {
                let all = time(&mut || {
                    let act = lowp::act16(&x, 1, c, &g, strides);
                    lowp::conv(&weight, &act, &mut out, false, None, threads, kernel, None);
                });
                let round = time(&mut || {
                    std::hint::black_box(lowp::act16(&x, 1, c, &g, strides));
                });
                (all, round)
            });
            eprintln!(
                "{} [{c} -> {co}] {k}x{k} stride {s} over {hw}x{hw}: {:.0} GFLOP/s ({:.3} ms, of which rounding the input {:.3} ms)",
                kernel.name(),
                flops / all / 1e9,
                all * 1e3,
                round * 1e3
            );
        }
    }
}
