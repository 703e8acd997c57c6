//! The packed and direct products against a float64 reference, and (ignored)
//! their speed against the gemm crate.

use super::*;

fn naive(a: &View, b: &View) -> Vec<f64> {
    let mut c = vec![0f64; a.rows * b.cols];
    for i in 0..a.rows {
        for j in 0..b.cols {
            c[i * b.cols + j] = (0..a.cols)
                .map(|p| a.at(i, p) as f64 * b.at(p, j) as f64)
                .sum();
        }
    }
    c
}

/// Values in [-1, 1] from a seed (xorshift), for the kernels' tests.
pub(crate) fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// [`gemm_taps`] against a float64 reference: panels of 1 to 12 rows at
/// odd places, taps at odd offsets, k over several slices, columns that
/// fill no panel, a bias or not, one and two threads, and an A larger
/// than one block of row panels.
/// `C = A B` by the `gemm` crate (the reference our products are timed
/// against): A row-major `m x k`, B `k x n` row-major or (`b_rows`
/// false) column-major, C row-major, on `threads` threads.
fn crate_gemm(
    (m, n, k): (usize, usize, usize),
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    b_rows: bool,
    threads: usize,
) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    let (b_cs, b_rs) = if b_rows {
        (1, n as isize)
    } else {
        (k as isize, 1)
    };
    // SAFETY: the lengths asserted above hold every element the strides
    // name
    unsafe {
        ::gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            b_cs,
            b_rs,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            if threads == 1 {
                ::gemm::Parallelism::None
            } else {
                ::gemm::Parallelism::Rayon(threads)
            },
        );
    }
}

/// The thread count a speed test runs on (`THREADS`, 1 by default) and a
/// pool of that many threads.
/// [`gemm_lhs_each`] hands each block of C over once, final: the blocks
/// cover C exactly once, and each holds the product (against a float64
/// reference) when it is handed over, on one to three threads (MobileNetV3's
/// 7x7 shapes among them: five row panels, the last of one row).
#[test]
fn products_hand_each_final_block_over_once() {
    if !available() {
        eprintln!("no AVX-512F or AVX2 here: the packed kernel is not used, nothing to test");
        return;
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .expect("a thread pool");
    for &(m, n, k) in &[
        (49, 96, 576),
        (49, 576, 96),
        (13, 33, 257),
        (1, 45, 600),
        (3, 70, 0),
    ] {
        let (av, bv) = (values(m * k, 3), values(k * n, 4));
        let (a, b) = (View::row_major(&av, m, k), View::row_major(&bv, k, n));
        let want = naive(&a, &b);
        let (pa, pb) = (pack_a(&a), pack_b(&b));
        for threads in [1, 2, 3] {
            let ldc = n + 5;
            let mut c = vec![0f32; m * ldc];
            let blocks = std::sync::Mutex::new(Vec::new());
            let wrong = std::sync::atomic::AtomicUsize::new(0);
            let done = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>, at: SendPtr| {
                for i in rows.clone() {
                    for j in cols.clone() {
                        // SAFETY: the block is final and this call's alone
                        let got = unsafe { *at.at(i * ldc + j) } as f64;
                        let w = want[i * n + j];
                        if (got - w).abs() > 1e-4 * (1.0 + w.abs()) {
                            wrong.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
                blocks.lock().unwrap().push((rows, cols));
            };
            pool.install(|| {
                gemm_lhs_each(
                    Lhs::packed(&pa),
                    &pb,
                    as_uninit(&mut c),
                    ldc,
                    Init::Zero,
                    threads,
                    &done,
                )
            });
            assert_eq!(
                wrong.into_inner(),
                0,
                "{m}x{n}x{k} on {threads}: a block handed over before it was final"
            );
            let mut seen = vec![0u8; m * n];
            for (rows, cols) in blocks.into_inner().unwrap() {
                for i in rows {
                    for j in cols.clone() {
                        seen[i * n + j] += 1;
                    }
                }
            }
            assert!(
                seen.iter().all(|&v| v == 1),
                "{m}x{n}x{k} on {threads}: blocks that do not cover C once"
            );
        }
    }
}

fn bench_pool() -> (usize, rayon::ThreadPool) {
    crate::kernels::bench_pool(1)
}

#[test]
fn tap_products_match_a_reference() {
    if !available() {
        eprintln!("no AVX-512F here: the packed kernel is not used, nothing to test");
        return;
    }
    for &(k, n, taps, panels, lda) in &[
        (7usize, 33usize, 1usize, 3usize, 9usize),
        (300, 64, 3, 10, 311),
        (16, 5, 4, 40, 2000),
    ] {
        let tap_offs: Vec<usize> = (0..taps).map(|t| t * 37 + t % 2).collect();
        let mut rows = Vec::new();
        let mut at = 3;
        let mut c_row = 0;
        for p in 0..panels {
            let r = 1 + (p * 5) % MR;
            rows.push(RowPanel { at, c_row, rows: r });
            at += r * lda + 11;
            c_row += r;
        }
        let m = c_row;
        let a = values(at + tap_offs[taps - 1] + k + MR * lda, 5);
        let ws: Vec<Vec<f32>> = (0..taps).map(|t| values(k * n, 6 + t as u32)).collect();
        let bs: Vec<PackedB> = ws
            .iter()
            .map(|w| pack_b(&View::row_major(w, k, n)))
            .collect();
        let bs: Vec<&PackedB> = bs.iter().collect();
        let bias = values(n, 9);
        let ldc = n + 3;
        for threads in [1, 2] {
            for with_bias in [false, true] {
                let mut c = vec![std::mem::MaybeUninit::new(f32::NAN); m * ldc];
                gemm_taps(
                    &a,
                    lda,
                    &tap_offs,
                    &rows,
                    &bs,
                    &mut c,
                    ldc,
                    with_bias.then_some(&bias[..]),
                    threads,
                );
                for r in &rows {
                    for i in 0..r.rows {
                        for j in 0..n {
                            let mut want = if with_bias { bias[j] as f64 } else { 0.0 };
                            for t in 0..taps {
                                for p in 0..k {
                                    want += a[r.at + tap_offs[t] + i * lda + p] as f64
                                        * ws[t][p * n + j] as f64;
                                }
                            }
                            // SAFETY: a float was written there (NaN before)
                            let got = unsafe { c[(r.c_row + i) * ldc + j].assume_init() } as f64;
                            assert!(
                                (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                                "k {k} n {n} taps {taps}: row {} col {j}: {got} against {want}",
                                r.c_row + i
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Every edge (rows and columns that do not fill a block, k across
/// several KC slices, one and two threads, row- and column-major
/// operands, accumulation) against a float64 reference.
#[test]
fn products_match_a_reference() {
    if !available() {
        eprintln!("no AVX-512F here: the packed kernel is not used, nothing to test");
        return;
    }
    for &(m, n, k) in &[
        (1, 1, 1),
        // a row or two: the whole micro-panel at once, k in one slice up
        // to 2048 (then in even ones)
        (1, 45, 600),
        (2, 70, 2100),
        (2, 17, 3),
        (12, 32, 7),
        (13, 33, 257),
        (25, 100, 600),
        // blocks of B across several column panels, rows in parts of
        // 6 + 6 and a last panel of 4
        (40, 300, 700),
        (64, 10, 784),
        // k in three slices of 567 (KC = 800)
        (30, 70, 1700),
        (3, 70, 0),
        (100, 3, 20),
    ] {
        let av = values(m * k, 1);
        let bv = values(k * n, 2);
        for &(a_rowmajor, b_rowmajor) in &[(true, true), (false, false), (true, false)] {
            let a = View {
                data: &av,
                off: 0,
                rows: m,
                cols: k,
                rs: if a_rowmajor { k } else { 1 },
                cs: if a_rowmajor { 1 } else { m },
            };
            let b = View {
                data: &bv,
                off: 0,
                rows: k,
                cols: n,
                rs: if b_rowmajor { n } else { 1 },
                cs: if b_rowmajor { 1 } else { k },
            };
            let want = naive(&a, &b);
            let (pa, pb) = (pack_a(&a), pack_b(&b));
            for threads in [1, 2, 3] {
                let ldc = n + 3;
                let mut c = vec![7f32; m * ldc];
                gemm(&pa, &pb, &mut c, ldc, false, threads);
                for i in 0..m {
                    for j in 0..n {
                        let got = c[i * ldc + j] as f64;
                        let w = want[i * n + j];
                        assert!(
                            (got - w).abs() <= 1e-4 * (1.0 + w.abs()),
                            "{m}x{n}x{k} ({i},{j}): {got} vs {w}"
                        );
                    }
                    // the padding between rows is left alone
                    assert!(c[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 7.0));
                }
                // B made row by row as the kernel needs it: the same
                let mut c2 = vec![7f32; m * ldc];
                let fill = |r: usize, j0: usize, out: &mut [f32]| {
                    for (j, o) in out.iter_mut().enumerate() {
                        *o = b.at(r, j0 + j);
                    }
                };
                gemm_rows(
                    Lhs::packed(&pa),
                    k,
                    n,
                    &fill,
                    as_uninit(&mut c2),
                    ldc,
                    Init::Zero,
                    None,
                    threads,
                );
                assert_eq!(c, c2, "{m}x{n}x{k}: gemm_rows");
                // A read where it lies: the same bits as packed
                let inplace = Lhs::view(&a).expect("one stride is 1");
                let mut c3 = vec![7f32; m * ldc];
                gemm_lhs(
                    inplace,
                    &pb,
                    as_uninit(&mut c3),
                    ldc,
                    Init::Zero,
                    None,
                    threads,
                );
                assert_eq!(c, c3, "{m}x{n}x{k}: A in place");
                // each block columns outer (AVX-512's order; on AVX2 rows
                // outer, see `rows_outer`): the same bits
                COLUMNS_OUTER.store(true, std::sync::atomic::Ordering::Relaxed);
                let mut c6 = vec![7f32; m * ldc];
                gemm(&pa, &pb, &mut c6, ldc, false, threads);
                COLUMNS_OUTER.store(false, std::sync::atomic::Ordering::Relaxed);
                assert_eq!(c, c6, "{m}x{n}x{k}: columns outer");
                // a bias per column, then relu and a residual input:
                // the bias added at the first slice, the epilogue on
                // each final block (rounded as the separate ops are)
                let bias = values(n, 6);
                let res = values(m * ldc, 7);
                let steps = [
                    EpiStep {
                        op: EpiOp::Add(1.0),
                        b: EpiSrc::Input(0),
                    },
                    EpiStep {
                        op: EpiOp::Relu,
                        b: EpiSrc::Const(0.0),
                    },
                ];
                let inputs = [&res[..]];
                let e = Epilogue {
                    steps: &steps,
                    inputs: &inputs,
                    map: None,
                };
                let mut c4 = vec![7f32; m * ldc];
                gemm_lhs(
                    inplace,
                    &pb,
                    as_uninit(&mut c4),
                    ldc,
                    Init::Bias(&bias),
                    Some(&e),
                    threads,
                );
                let mut c5 = vec![7f32; m * ldc];
                gemm_rows(
                    inplace,
                    k,
                    n,
                    &fill,
                    as_uninit(&mut c5),
                    ldc,
                    Init::Bias(&bias),
                    None,
                    threads,
                );
                // a bias per row, the epilogue after it, B made row by
                // row: the bias as it was added before (written into C,
                // the product accumulated on it), the epilogue as above
                let rbias = values(m, 8);
                let mut c7 = vec![7f32; m * ldc];
                gemm_rows(
                    Lhs::packed(&pa),
                    k,
                    n,
                    &fill,
                    as_uninit(&mut c7),
                    ldc,
                    Init::RowBias(&rbias),
                    Some(&e),
                    threads,
                );
                let mut rold = vec![7f32; m * ldc];
                for i in 0..m {
                    rold[i * ldc..i * ldc + n].fill(rbias[i]);
                }
                gemm(&pa, &pb, &mut rold, ldc, true, threads);
                for i in 0..m {
                    for j in 0..n {
                        let at = i * ldc + j;
                        let want = (rold[at] + res[at]).max(0.0);
                        assert_eq!(c7[at], want, "{m}x{n}x{k} ({i},{j}): a bias per row");
                    }
                    assert!(c7[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 7.0));
                }
                // the bias as it was added before: written into C,
                // the product accumulated on it
                let mut old = vec![7f32; m * ldc];
                for i in 0..m {
                    old[i * ldc..i * ldc + n].copy_from_slice(&bias);
                }
                gemm(&pa, &pb, &mut old, ldc, true, threads);
                for i in 0..m {
                    for j in 0..n {
                        let at = i * ldc + j;
                        let want = (old[at] + res[at]).max(0.0);
                        assert_eq!(c5[at], old[at], "{m}x{n}x{k} ({i},{j}): bias");
                        assert_eq!(c4[at], want, "{m}x{n}x{k} ({i},{j}): epilogue");
                    }
                    assert!(c4[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 7.0));
                }
                // a relu alone and a hardswish alone (on AVX2 stored by
                // the kernel, `STORE_RELU` / `STORE_HARDSWISH`; otherwise
                // the chain's pass), after a bias per column: the relu or
                // hardswish of the same bits as `old`, the padding untouched
                let one = |op: EpiOp| {
                    let steps = [EpiStep {
                        op,
                        b: EpiSrc::Const(0.0),
                    }];
                    let e = Epilogue {
                        steps: &steps,
                        inputs: &[],
                        map: None,
                    };
                    let mut c = vec![7f32; m * ldc];
                    gemm_lhs(
                        inplace,
                        &pb,
                        as_uninit(&mut c),
                        ldc,
                        Init::Bias(&bias),
                        Some(&e),
                        threads,
                    );
                    c
                };
                let (relu, hardswish) = (one(EpiOp::Relu), one(EpiOp::Hardswish));
                for i in 0..m {
                    for j in 0..n {
                        let (at, x) = (i * ldc + j, old[i * ldc + j]);
                        let want = if 0.0 > x { 0.0 } else { x };
                        assert_eq!(
                            relu[at].to_bits(),
                            want.to_bits(),
                            "{m}x{n}x{k} ({i},{j}): relu"
                        );
                        let want = x * (x + 3.0).clamp(0.0, 6.0) / 6.0;
                        assert_eq!(
                            hardswish[at].to_bits(),
                            want.to_bits(),
                            "{m}x{n}x{k} ({i},{j}): hardswish"
                        );
                    }
                    for c in [&relu, &hardswish] {
                        assert!(c[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 7.0));
                    }
                }
                let mut c = vec![1f32; m * n];
                gemm(&pa, &pb, &mut c, n, true, threads);
                for (got, w) in c.iter().zip(&want) {
                    assert!((*got as f64 - (w + 1.0)).abs() <= 1e-4 * (1.0 + w.abs()));
                }
            }
        }
    }
}

/// A relu alone and a hardswish alone after a packed product (on AVX2
/// stored by the kernel) over edge values: rows of A holding NaN, an
/// infinity, and zeros (products of -0 and +0), biases of -0 and -inf; each
/// element the chain of the plain product's same bits (NaN and -0 kept by
/// the relu), at `k` of one slice and of several.
#[test]
fn stored_chains_keep_edge_values() {
    if !available() {
        eprintln!("no AVX-512F or AVX2 here: the packed kernel is not used, nothing to test");
        return;
    }
    for &(m, n, k) in &[(13, 40, 16), (7, 70, 700)] {
        let mut av = values(m * k, 11);
        av[3] = f32::NAN;
        av[k + 5] = f32::INFINITY;
        av[2 * k..3 * k].fill(-0.0);
        av[3 * k..4 * k].fill(0.0);
        av[4 * k + 1] = f32::NEG_INFINITY;
        let bm = values(k * n, 12);
        let mut bias = values(n, 13);
        bias[0] = -0.0;
        bias[1] = f32::NEG_INFINITY;
        let pb = pack_b(&View::row_major(&bm, k, n));
        let a = View::row_major(&av, m, k);
        let run = |op: Option<EpiOp>| {
            let steps = op.map(|op| {
                [EpiStep {
                    op,
                    b: EpiSrc::Const(0.0),
                }]
            });
            let e = steps.as_ref().map(|steps| Epilogue {
                steps,
                inputs: &[],
                map: None,
            });
            let mut c = vec![7f32; m * n];
            gemm_lhs(
                Lhs::view(&a).expect("row-major"),
                &pb,
                as_uninit(&mut c),
                n,
                Init::Bias(&bias),
                e.as_ref(),
                1,
            );
            c
        };
        let plain = run(None);
        assert!(plain.iter().any(|v| v.is_nan()) && plain.iter().any(|v| v.is_infinite()));
        let (relu, hardswish) = (run(Some(EpiOp::Relu)), run(Some(EpiOp::Hardswish)));
        for (e, &x) in plain.iter().enumerate() {
            let want = if 0.0 > x { 0.0 } else { x };
            assert_eq!(
                relu[e].to_bits(),
                want.to_bits(),
                "{m}x{n}x{k} relu element {e}: {x}"
            );
            let want = x * (x + 3.0).clamp(0.0, 6.0) / 6.0;
            assert_eq!(
                hardswish[e].to_bits(),
                want.to_bits(),
                "{m}x{n}x{k} hardswish element {e}: {x}"
            );
        }
    }
}

/// A direct product's panels (runs crossing "lines", lanes dropped, a
/// panel of 16 lanes or fewer, rows that do not fill a block, a bias
/// or none, A packed or read as it lies, one and two threads) against a float64 reference, and no
/// element of C outside the runs touched.
#[test]
fn direct_products_match_a_reference() {
    if !available() {
        eprintln!("no AVX-512F here: the direct kernel is not used, nothing to test");
        return;
    }
    let (src, ldc) = (values(4000, 3), 90);
    // elements the stored relu set to 0 (some must be)
    let mut clipped = 0;
    for &(m, k) in &[(1, 1), (12, 27), (29, 300), (40, 5)] {
        let av = values(m * k, 4);
        let a = View::row_major(&av, m, k);
        let pa = pack_a(&a);
        let offs: Vec<usize> = (0..k).map(|r| (r * 37) % 500).collect();
        let bias = values(m, 5);
        let mut panels = Panels::default();
        // all 32 lanes to columns 0..32
        panels.push(0, [Run { mask: !0, at: 0 }]);
        // lanes 0..10 to 40..50, 13..30 to 60..77; 10..13 and 30..32 dropped
        panels.push(
            700,
            [
                Run {
                    mask: 0x3ff,
                    at: 40,
                },
                Run {
                    mask: 0x3fff_e000,
                    at: 60 - 13,
                },
            ],
        );
        // seven lanes: the one-vector kernel
        panels.push(1500, [Run { mask: 0x7f, at: 80 }]);
        let lhs = [Lhs::packed(&pa), Lhs::rows(&av, m, k)];
        for (bias, lhs) in [None, Some(&bias[..])]
            .into_iter()
            .flat_map(|b| lhs.map(|l| (b, l)))
        {
            // with `accumulate`, added to what C holds (a residual)
            for (threads, accumulate) in [(1, false), (2, false), (2, true)] {
                let held = |e: usize| {
                    if accumulate {
                        (e % 11) as f32 - 5.0
                    } else {
                        7.0
                    }
                };
                // C from what it held, the product run with `epilogue`
                let product = |epilogue: Option<&Epilogue>| {
                    let mut c: Vec<f32> = (0..m * ldc).map(held).collect();
                    // SAFETY: the runs write distinct columns
                    unsafe {
                        gemm_direct(
                            lhs,
                            &src,
                            &offs,
                            &panels,
                            as_uninit(&mut c),
                            ldc,
                            bias,
                            accumulate,
                            epilogue,
                            threads,
                        )
                    };
                    c
                };
                let c = product(None);
                let mut want: Vec<f64> = (0..m * ldc).map(|e| held(e) as f64).collect();
                for p in 0..panels.len() {
                    for run in panels.runs(p) {
                        for l in (0..32).filter(|l| run.mask >> l & 1 == 1) {
                            let col = (run.at + l as isize) as usize;
                            for i in 0..m {
                                let dot: f64 = (0..k)
                                    .map(|r| {
                                        av[i * k + r] as f64
                                            * src[panels.base[p] + offs[r] + l] as f64
                                    })
                                    .sum();
                                let was = if accumulate {
                                    held(i * ldc + col) as f64
                                } else {
                                    0.0
                                };
                                want[i * ldc + col] = dot + bias.map_or(0.0, |b| b[i] as f64) + was;
                            }
                        }
                    }
                }
                for (e, (got, w)) in c.iter().zip(&want).enumerate() {
                    assert!(
                        (*got as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                        "{m}x{k} element {e}: {got} vs {w}"
                    );
                }
                // a relu alone as the epilogue, stored by the kernel
                // (STORE_RELU): the relu of the same bits, and no element
                // outside the runs touched
                let relu = [EpiStep {
                    op: EpiOp::Relu,
                    b: EpiSrc::Const(0.0),
                }];
                let e = Epilogue {
                    steps: &relu,
                    inputs: &[],
                    map: None,
                };
                let r = product(Some(&e));
                let written = |e: usize| {
                    (0..panels.len()).any(|p| {
                        panels.runs(p).iter().any(|run| {
                            let l = (e % ldc) as isize - run.at;
                            (0..32).contains(&l) && run.mask >> l & 1 == 1
                        })
                    })
                };
                for (e, (got, plain)) in r.iter().zip(&c).enumerate() {
                    // x86's max of 0 and the value: NaN and -0 kept
                    let want = if written(e) && 0.0 > *plain {
                        clipped += 1;
                        0.0
                    } else {
                        *plain
                    };
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{m}x{k} relu element {e}: {got} vs {want}"
                    );
                }
                // a hardswish alone (STORE_HARDSWISH where nothing is
                // accumulated, the epilogue's pass where it is): the
                // hardswish of the same bits, nothing else touched
                let hardswish = [EpiStep {
                    op: EpiOp::Hardswish,
                    b: EpiSrc::Const(0.0),
                }];
                let e = Epilogue {
                    steps: &hardswish,
                    inputs: &[],
                    map: None,
                };
                let h = product(Some(&e));
                for (e, (got, plain)) in h.iter().zip(&c).enumerate() {
                    let want = if written(e) {
                        plain * (plain + 3.0).clamp(0.0, 6.0) / 6.0
                    } else {
                        *plain
                    };
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{m}x{k} hardswish element {e}: {got} vs {want}"
                    );
                }
            }
        }
    }
    assert!(
        clipped > 0,
        "no element below zero: the relu was not tested"
    );
}

mod speed {
    use super::*;

    /// `cargo test --release -p pt2kit --features exec --lib gemm_speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn gemm_speed() {
        for &(m, n, k) in &[
            (128, 768, 768),
            (128, 3072, 768),
            (128, 768, 3072),
            (64, 512, 784),
            (64, 3136, 576),
            (256, 196, 2304),
        ] {
            let av: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
            let bv: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
            let a = View::row_major(&av, m, k);
            let b = View {
                data: &bv,
                off: 0,
                rows: k,
                cols: n,
                rs: 1,
                cs: k,
            };
            let many: Vec<PackedB> = (0..16).map(|_| pack_b(&b)).collect();
            let pb = pack_b(&b);
            let mut c = vec![0f32; m * n];
            for threads in [1, 2] {
                let t = std::time::Instant::now();
                for r in 0..48 {
                    let pa = pack_a(&a);
                    gemm(&pa, &many[r % 16], &mut c, n, false, threads);
                }
                let s = t.elapsed().as_secs_f64() / 48.0;
                eprintln!(
                    "{m}x{n}x{k} threads {threads}: B from memory {:.1} GFLOP/s, {:.1} GB/s of B",
                    2.0 * (m * n * k) as f64 / s / 1e9,
                    (k * n * 4) as f64 / s / 1e9
                );
            }
            let flops = 2.0 * (m * n * k) as f64;
            for threads in [1, 2] {
                let t = std::time::Instant::now();
                let reps = 50;
                for _ in 0..reps {
                    let pa = pack_a(&a);
                    gemm(&pa, &pb, &mut c, n, false, threads);
                }
                let s = t.elapsed().as_secs_f64() / reps as f64;
                let t2 = std::time::Instant::now();
                for _ in 0..reps {
                    crate_gemm((m, n, k), &mut c, &av, &bv, false, threads);
                }
                let s2 = t2.elapsed().as_secs_f64() / reps as f64;
                eprintln!(
                    "{m}x{n}x{k} threads {threads}: packed {:.1} GFLOP/s, gemm crate {:.1} GFLOP/s",
                    flops / s / 1e9,
                    flops / s2 / 1e9
                );
            }
        }
    }
}

#[test]
#[ignore]
fn transformer_shapes() {
    for &(m, n, k) in &[
        (1024usize, 3072usize, 768usize),
        (1024, 768, 3072),
        (1024, 768, 768),
        (1576, 3072, 768),
        (128, 3072, 768),
    ] {
        let av: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let bv: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
        let a = View::row_major(&av, m, k);
        let pb = pack_b(&View::row_major(&bv, k, n));
        let bias = vec![0.5f32; n];
        let mut c = vec![0f32; m * n];
        let flops = 2.0 * (m * n * k) as f64;
        let mut best = 0f64;
        for _ in 0..5 {
            let reps = (8e9 / flops) as usize + 1;
            let t = std::time::Instant::now();
            for _ in 0..reps {
                gemm_lhs(
                    Lhs::view(&a).unwrap(),
                    &pb,
                    as_uninit(&mut c),
                    n,
                    Init::Bias(&bias),
                    None,
                    2,
                );
            }
            best = best.max(flops * reps as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
        eprintln!("{m}x{n}x{k}: {best:.1} GF/s");
    }
}

/// The packed product's best time of many (robust to a busy machine), on
/// `THREADS` threads (1), for `SHAPES` (`m x n x k,...`; the MLP's and ResNet's by
/// default): `cargo test --release -p pt2kit --features exec --lib
/// gemm_best -- --ignored --nocapture`.
#[test]
#[ignore]
fn gemm_best() {
    let shapes =
        std::env::var("SHAPES").unwrap_or_else(|_| "512x512x784,256x196x2304,128x768x768".into());
    for shape in shapes.split(',') {
        let d: Vec<usize> = shape.split('x').filter_map(|v| v.parse().ok()).collect();
        let (m, n, k) = (d[0], d[1], d[2]);
        let av: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let bv: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
        let pb = pack_b(&View::row_major(&bv, k, n));
        let mut c = uninit(m * n);
        let (threads, pool) = bench_pool();
        let mut times = Vec::new();
        pool.install(|| {
            for _ in 0..200 {
                let t = std::time::Instant::now();
                gemm_lhs(
                    Lhs::rows(&av, m, k),
                    &pb,
                    &mut c,
                    n,
                    Init::Zero,
                    None,
                    threads,
                );
                times.push(t.elapsed().as_secs_f64());
            }
        });
        times.sort_by(f64::total_cmp);
        let gflops = |t: f64| 2.0 * (m * n * k) as f64 / t / 1e9;
        eprintln!(
            "{m}x{n}x{k}: GFLOP/s at the best time {:.1}, the 25th percentile {:.1}, median {:.1}, 75th {:.1}",
            gflops(times[0]),
            gflops(times[times.len() / 4]),
            gflops(times[times.len() / 2]),
            gflops(times[times.len() * 3 / 4])
        );
    }
}

/// The blocks a product splits into read the least of A and B between
/// them; B made row by row splits by columns alone.
#[test]
fn products_split_into_blocks_that_read_least() {
    // the MLP at batch 512 on two threads: 2 x 8 (B, a weight from
    // memory, read twice; A, in cache, 8 times), not 16 column blocks (A
    // read 16 times)
    assert_eq!(split(43, 16, 512, 512, 16, true), (2, 8));
    // BERT's 768 x 768 at batch 1: columns alone (each row block would
    // read the weight again), not 2 x 8
    assert_eq!(split(11, 24, 128, 768, 16, true), (1, 16));
    assert_eq!(split(43, 16, 512, 512, 16, false), (1, 16));
    // a wide product of few rows: columns
    assert_eq!(split(1, 24, 8, 768, 16, true), (1, 16));
    // a tall one of few columns: rows
    assert_eq!(split(86, 1, 1024, 10, 16, true), (16, 1));
    // fewer panels than tasks
    assert_eq!(split(2, 2, 24, 64, 16, true), (2, 2));
}

/// The packed product against the `gemm` crate, interleaved call by call
/// (so a slow minute of a shared machine falls on both), on `THREADS`
/// threads (1), for `SHAPES` (`m x n x k,...`): the median of the paired
/// ratios (ours / the crate's) and each one's median GFLOP/s. `cargo test
/// --release -p pt2kit --features exec --lib gemm_vs_crate -- --ignored
/// --nocapture`.
#[test]
#[ignore]
fn gemm_vs_crate() {
    let shapes = std::env::var("SHAPES").unwrap_or_else(|_| {
        "512x512x784,128x768x768,128x3072x768,128x768x3072,256x196x2304".into()
    });
    let (threads, pool) = bench_pool();
    for shape in shapes.split(',') {
        let d: Vec<usize> = shape.split('x').filter_map(|v| v.parse().ok()).collect();
        let (m, n, k) = (d[0], d[1], d[2]);
        let av: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let bv: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
        // COLD=1: B from memory, as a model's weights (16 copies, read in
        // turn: more than an L3)
        let copies = if std::env::var("COLD").is_ok() { 16 } else { 1 };
        let bvs: Vec<Vec<f32>> = (0..copies).map(|_| bv.clone()).collect();
        let pbs: Vec<PackedB> = bvs
            .iter()
            .map(|bv| pack_b(&View::row_major(bv, k, n)))
            .collect();
        let mut c = uninit(m * n);
        let mut c2 = vec![0f32; m * n];
        let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        pool.install(|| {
            for it in 0..300 {
                let (pb, bv) = (&pbs[it % copies], &bvs[it % copies]);
                let t = std::time::Instant::now();
                gemm_lhs(
                    Lhs::rows(&av, m, k),
                    pb,
                    &mut c,
                    n,
                    Init::Zero,
                    None,
                    threads,
                );
                let a = t.elapsed().as_secs_f64();
                let t = std::time::Instant::now();
                crate_gemm((m, n, k), &mut c2, &av, bv, true, threads);
                let b = t.elapsed().as_secs_f64();
                ours.push(a);
                theirs.push(b);
                ratios.push(a / b);
            }
        });
        let med = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let gf = |t: f64| 2.0 * (m * n * k) as f64 / t / 1e9;
        eprintln!(
            "{m}x{n}x{k}: ours / crate {:.3} (paired median), ours {:.1} GF/s, crate {:.1} GF/s",
            med(&mut ratios),
            gf(med(&mut ours)),
            gf(med(&mut theirs))
        );
    }
}

/// A B packed from rows made as they are needed has the layout of one
/// packed from a view (each panel's two halves one after the other), with
/// panels to spare for the threads and with fewer panels than threads.
#[test]
fn packed_from_rows_as_from_a_view() {
    for &(k, n) in &[(5, 70), (300, 33), (7, 16), (3, 200)] {
        let bv = values(k * n, 3);
        let b = View::row_major(&bv, k, n);
        let want = pack_b(&b);
        assert_eq!(want.data.len(), n.div_ceil(NR) * k * NR);
        // column 17 of the first panel at step 2: the right half's
        if k > 2 && n > 17 {
            assert_eq!(want.data[k * HALF + 2 * HALF + 1], bv[2 * n + 17]);
        }
        let fill = |r: usize, j0: usize, out: &mut [f32]| {
            for (j, o) in out.iter_mut().enumerate() {
                *o = b.at(r, j0 + j);
            }
        };
        for threads in [1, 2, 8] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a pool");
            let got = pool.install(|| pack_b_with(k, n, &fill));
            assert_eq!(got.data, want.data, "{k}x{n} on {threads} threads");
        }
    }
}

/// The AVX2 kernel alone on one 12 x 32 block, its panels hot (`kc` steps
/// over the same A and B again and again), GFLOP/s, best of 5: the
/// kernel's own ceiling, against which a product's figure says what its
/// blocking costs. On the 2-vCPU Zen 3 VM (about 101 GFLOP/s of FMAs a
/// core): 94-95 at `kc` of 256 to 512, 80 at 64. `cargo test --release -p
/// pt2kit --features exec --lib kernel_alone_speed -- --ignored
/// --nocapture`.
#[test]
#[ignore]
fn kernel_alone_speed() {
    if !available() || avx512() {
        return;
    }
    for kc in [32usize, 64, 128, 192, 256, 320, 512] {
        let a = values(MR * kc, 1);
        let b = values(NR * kc, 2);
        let mut c = vec![0f32; MR * NR];
        let reps = (4e9 / (2.0 * (MR * NR * kc) as f64)) as usize;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t0 = std::time::Instant::now();
            for _ in 0..reps {
                // SAFETY: the panels and C are the sizes the kernel reads
                unsafe {
                    kernel_avx2(
                        kc,
                        a.as_ptr(),
                        1,
                        MR,
                        b.as_ptr(),
                        kc * HALF,
                        c.as_mut_ptr(),
                        NR,
                        MR,
                        NR,
                        true,
                        BiasAt::None,
                        std::ptr::null(),
                    )
                };
            }
            best = best.min(t0.elapsed().as_secs_f64());
        }
        eprintln!(
            "kc {kc}: {:.1} GFLOP/s",
            2.0 * (MR * NR * kc * reps) as f64 / best / 1e9
        );
    }
}

/// The products of a linear layer (A in place, B packed) with each block
/// rows outer ([`rows_outer`], AVX2) against columns outer, interleaved
/// call by call on `THREADS` threads (1): the same bits asserted, the
/// median of the paired ratios and each one's median GFLOP/s. `cargo test
/// --release -p pt2kit --features exec --lib block_order_speed --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn block_order_speed() {
    use std::sync::atomic::Ordering::Relaxed;
    if !available() || avx512() {
        return;
    }
    let threads: usize = std::env::var("THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let shapes = [
        (197usize, 3072usize, 768usize),
        (197, 768, 3072),
        (197, 2304, 768),
        (512, 512, 784),
        (512, 512, 512),
        (128, 768, 768),
        (1024, 3072, 768),
    ];
    let (_, pool) = bench_pool();
    pool.install(|| {
        for &(m, n, k) in &shapes {
            let a = values(m * k, 1);
            let bm = values(k * n, 2);
            let pb = pack_b(&View::row_major(&bm, k, n));
            let av = View::row_major(&a, m, k);
            let mut outs = [vec![0f32; m * n], vec![0f32; m * n]];
            let mut t: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            let reps = (3e9 / (2.0 * (m * n * k) as f64)) as usize + 10;
            for round in 0..reps {
                for mode in [round % 2, 1 - round % 2] {
                    COLUMNS_OUTER.store(mode == 0, Relaxed);
                    let t0 = std::time::Instant::now();
                    gemm_lhs(Lhs::view(&av).unwrap(), &pb, as_uninit(&mut outs[mode]), n, Init::Zero, None, threads);
                    t[mode].push(t0.elapsed().as_secs_f64());
                }
            }
            COLUMNS_OUTER.store(false, Relaxed);
            assert!(outs[0] == outs[1], "the same bits either way");
            let mut r: Vec<f64> = t[1].iter().zip(&t[0]).map(|(x, y)| x / y).collect();
            let med = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let gf = 2.0 * (m * n * k) as f64 / 1e9;
            let ratio = med(&mut r);
            let (x, y) = (med(&mut t[0]), med(&mut t[1]));
            eprintln!("{m}x{n}x{k}: columns outer {:.1} GFLOP/s, rows outer {:.1}, rows / columns {ratio:.3} (paired median)", gf / x, gf / y);
        }
    });
}

/// Linear layers' products (A in place, B packed, as the executor runs
/// them) for 2 s each on `THREADS` threads: median and best GFLOP/s, to
/// set beside ONNX Runtime's MatMul on the same shapes
/// (`recipes/bench/matmul_speed.py`). `SHAPES="m,n,k m,n,k"` (GPT-2's and the
/// MLP's by default); `COLD=1`: B from memory each call. `cargo test --release -p pt2kit --features exec
/// --lib products_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn products_speed() {
    let shapes: Vec<(usize, usize, usize)> = std::env::var("SHAPES")
        .unwrap_or_else(|_| {
            "128,3072,768 128,768,3072 128,2304,768 128,768,768 64,512,784 512,512,784".into()
        })
        .split_whitespace()
        .map(|s| {
            let v: Vec<usize> = s
                .split(',')
                .map(|x| x.parse().expect("SHAPES: m,n,k"))
                .collect();
            (v[0], v[1], v[2])
        })
        .collect();
    let cold = std::env::var_os("COLD").is_some();
    let (threads, pool) = bench_pool();
    pool.install(|| {
        for &(m, n, k) in &shapes {
            let (a, bm) = (values(m * k, 1), values(k * n, 2));
            // COLD: B from memory each call, as a model's weights past L3
            // (a ring of copies of 128 MiB or more)
            let copies = if cold {
                (128usize << 20).div_ceil(k * n * 4)
            } else {
                1
            };
            let pbs: Vec<PackedB> = (0..copies)
                .map(|_| pack_b(&View::row_major(&bm, k, n)))
                .collect();
            let av = View::row_major(&a, m, k);
            let mut out = vec![0f32; m * n];
            let mut t = Vec::new();
            let start = std::time::Instant::now();
            while start.elapsed().as_secs_f64() < 2.0 {
                let pb = &pbs[t.len() % copies];
                let t0 = std::time::Instant::now();
                gemm_lhs(
                    Lhs::view(&av).unwrap(),
                    pb,
                    as_uninit(&mut out),
                    n,
                    Init::Zero,
                    None,
                    threads,
                );
                t.push(t0.elapsed().as_secs_f64());
            }
            t.sort_by(f64::total_cmp);
            let gf = 2.0 * (m * n * k) as f64 / 1e9;
            let how = if cold { " cold" } else { "" };
            eprintln!(
                "ir-run {m}x{n}x{k} t{threads}{how}: median {:.1} GF/s best {:.1}",
                gf / t[t.len() / 2],
                gf / t[0]
            );
        }
    });
}

/// A few rows against a weight's rows in place ([`super::dot`]): every
/// row count up to its most, `k` with and without a tail of fewer than
/// 16, an odd count of W rows, padded strides, with and without a bias,
/// one and two threads, against a float64 reference.
#[test]
fn dot_rows_match_a_reference() {
    use super::dot::{dot_rows, Rows, DOT_MAX_ROWS};
    if !available() {
        eprintln!("no AVX-512F or AVX2 here: the kernel is not used, nothing to test");
        return;
    }
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool");
        for &(k, n) in &[
            (1, 1),
            (15, 3),
            (16, 64),
            (100, 129),
            (1000, 70),
            (777, 200),
        ] {
            for m in 1..=DOT_MAX_ROWS {
                let (lda, ldw, ldc) = (k + 1, k + 3, n + 2);
                let (av, wv, bv) = (values(m * lda, 3), values(n * ldw, 4), values(n, 5));
                for bias in [None, Some(&bv[..])] {
                    let mut c = vec![f32::NAN; m * ldc];
                    let a = Rows {
                        p: av.as_ptr(),
                        ld: lda,
                        rows: m,
                    };
                    let w = Rows {
                        p: wv.as_ptr(),
                        ld: ldw,
                        rows: n,
                    };
                    // SAFETY: every row within its vector; C holds m rows of ldc
                    pool.install(|| unsafe { dot_rows(a, w, k, bias, c.as_mut_ptr(), ldc) });
                    for i in 0..m {
                        for j in 0..n {
                            let want = (0..k)
                                .map(|p| av[i * lda + p] as f64 * wv[j * ldw + p] as f64)
                                .sum::<f64>()
                                + bias.map_or(0.0, |b| b[j] as f64);
                            let got = c[i * ldc + j] as f64;
                            assert!(
                                (got - want).abs() <= 1e-4 * (1.0 + want.abs()) * (k as f64).sqrt(),
                                "m {m} k {k} n {n} bias {} threads {threads}: C[{i}, {j}] {got} vs {want}",
                                bias.is_some()
                            );
                        }
                        // the padding between C's rows untouched
                        assert!(c[i * ldc + n..(i + 1) * ldc].iter().all(|v| v.is_nan()));
                    }
                }
            }
        }
    }
}
