//! PT2E int8 on the int8 kernels (`kernels::int8`, `exec::int8`): each
//! product kernel this CPU runs against the reference on randomized
//! shapes, exactly (integer sums have one answer), and the golden/quant
//! fixtures' quantized convolutions and linear layers fused at load where
//! the CPU has an int8 kernel, with their outputs as the graph run as written gives
//! them (within one quantization step of a dequantized output; torch's
//! own outputs are `exec.rs`'s `quant_fixtures_match_torch`).

#![cfg(feature = "exec")]

mod common;

use common::*;
use pt2kit::exec::{self, DeviceKind, ExecOptions, Executor};
use pt2kit::kernels::int8 as k8;

fn cases(default: usize) -> usize {
    std::env::var("PT2KIT_KERNEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every kernel this CPU runs against [`k8::reference`] on shapes at
/// every block edge and random ones, bytes over their whole range
/// (weights of -128 included): every element of C once, exactly.
#[test]
fn int8_products_match_the_reference_exactly() {
    let kernels: Vec<k8::Kernel> = [k8::Kernel::Vnni, k8::Kernel::Avx2, k8::Kernel::Scalar]
        .into_iter()
        .filter(|k| k8::runs(*k))
        .collect();
    eprintln!(
        "int8: kernels {:?}, the executor's {:?}",
        kernels.iter().map(|k| k.name()).collect::<Vec<_>>(),
        k8::kernel().map(|k| k.name())
    );
    if let Some(k) = k8::kernel() {
        assert!(kernels.contains(&k));
    }
    let mut shapes: Vec<(usize, usize, usize)> = vec![
        (1, 1, 1),
        (1, 768, 768),
        (12, 64, 32),
        (13, 65, 31),
        (31, 63, 33),
        (32, 128, 64),
        (25, 147, 64),
        (200, 3, 70),
        (7, 3072, 40),
        (3136, 576, 64),
    ];
    let mut d = draws(0x1_7e58);
    for _ in 0..cases(40) {
        shapes.push((1 + d(150), 1 + d(700), 1 + d(150)));
    }
    let mut failures = Vec::new();
    for &(m, k, n) in &shapes {
        let a: Vec<u8> = (0..m * k).map(|_| d(256) as u8).collect();
        let w: Vec<i8> = (0..n * k).map(|_| (d(256) as i64 - 128) as i8).collect();
        let want = k8::reference(&a, &w, m, k, n);
        let sums: Vec<i32> = (0..n)
            .map(|j| w[j * k..][..k].iter().map(|&v| v as i32).sum())
            .collect();
        let fill = |r: usize, out: &mut [u8]| out.copy_from_slice(&a[r * k..][..k]);
        let am = k8::A8::from_rows(m, k, &fill);
        // each kernel on its packing, through the product of a made A and
        // the one that makes A's rows in its tasks
        for (kernel, rows) in kernels.iter().flat_map(|&x| [(x, false), (x, true)]) {
            let packed = k8::pack_b(&w, n, k, kernel);
            if packed.column_sums() != sums.as_slice() {
                failures.push(format!("{} [{n}, {k}]: column sums differ", kernel.name()));
            }
            let c: Vec<std::sync::atomic::AtomicI64> = (0..m * n)
                .map(|_| std::sync::atomic::AtomicI64::new(i64::MIN))
                .collect();
            let writes = std::sync::atomic::AtomicUsize::new(0);
            let done = |i0: usize, rows: usize, j0: usize, cols: usize, tile: &[i32]| {
                for i in 0..rows {
                    for j in 0..cols {
                        let old = c[(i0 + i) * n + j0 + j].swap(
                            tile[i * k8::NR + j] as i64,
                            std::sync::atomic::Ordering::Relaxed,
                        );
                        if old == i64::MIN {
                            writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            };
            if rows {
                k8::gemm_rows(m, k, &fill, &packed, 2, kernel, &done);
            } else {
                k8::gemm(&am, &packed, 2, kernel, &done);
            }
            let what = format!(
                "{}{} [{m}, {k}] x [{k}, {n}]",
                kernel.name(),
                if rows { " (rows made in tasks)" } else { "" }
            );
            if writes.into_inner() != m * n {
                failures.push(format!("{what}: the blocks do not cover C once"));
            }
            if let Some(x) = (0..m * n)
                .find(|&x| c[x].load(std::sync::atomic::Ordering::Relaxed) != want[x] as i64)
            {
                failures.push(format!(
                    "{what}: C[{}, {}] is {}, the reference {}",
                    x / n,
                    x % n,
                    c[x].load(std::sync::atomic::Ordering::Relaxed),
                    want[x]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Winograd's 3 x 3 convolutions (the AVX2 kernel's) against the direct
/// sum on random sizes, paddings and zero points, bytes over their whole
/// range and a patch of extremes (255 against -128, the sums' largest):
/// every output element once, exactly.
#[test]
fn winograd_convolutions_match_the_direct_sum_exactly() {
    if !k8::runs(k8::Kernel::Avx2) {
        eprintln!("int8: no AVX2 here; Winograd's convolutions untested");
        return;
    }
    let mut d = draws(0x3_3a11);
    let mut shapes: Vec<[usize; 5]> = vec![
        // h, w, ci, co, pad
        [4, 4, 1, 1, 0],
        [7, 7, 512, 40, 1],
        [56, 56, 64, 64, 1],
        [5, 9, 3, 33, 2],
        [6, 3, 17, 70, 1],
    ];
    for _ in 0..cases(24) {
        let pad = d(3);
        let h = (2 + d(20)).max(4 - 2 * pad.min(1));
        let w = (2 + d(20)).max(4 - 2 * pad.min(1));
        shapes.push([h, w, 1 + d(80), 1 + d(80), pad]);
    }
    let mut failures = Vec::new();
    for (case, &[h, w, ci, co, pad]) in shapes.iter().enumerate() {
        if h + 2 * pad < 3 || w + 2 * pad < 3 {
            continue;
        }
        let extreme = case == 1;
        let x: Vec<u8> = (0..h * w * ci)
            .map(|_| if extreme { 255 } else { d(256) as u8 })
            .collect();
        let wt: Vec<i8> = (0..co * ci * 9)
            .map(|_| {
                if extreme {
                    -128
                } else {
                    (d(256) as i64 - 128) as i8
                }
            })
            .collect();
        let z = if extreme { 255 } else { d(256) as u8 };
        let (ho, wo) = (h + 2 * pad - 2, w + 2 * pad - 2);
        let px = |y: isize, xx: isize, c: usize| -> i64 {
            if y < 0 || xx < 0 || y as usize >= h || xx as usize >= w {
                z as i64
            } else {
                x[(y as usize * w + xx as usize) * ci + c] as i64
            }
        };
        let packed = k8::winograd::pack(&wt, co, ci);
        let c: Vec<std::sync::atomic::AtomicI64> = (0..ho * wo * co)
            .map(|_| std::sync::atomic::AtomicI64::new(i64::MIN))
            .collect();
        let done = |i0: usize, rows: usize, j0: usize, cols: usize, tile: &[i32]| {
            for i in 0..rows {
                for j in 0..cols {
                    let old = c[(i0 + i) * co + j0 + j].swap(
                        tile[i * k8::NR + j] as i64,
                        std::sync::atomic::Ordering::Relaxed,
                    );
                    assert_eq!(
                        old,
                        i64::MIN,
                        "element ({}, {}) written twice",
                        i0 + i,
                        j0 + j
                    );
                }
            }
        };
        k8::winograd::conv3x3(&x, [h, w], [pad, pad], z, &packed, 2, &done);
        let what = format!("[{h}, {w}] x {ci} -> {co}, pad {pad}, zero point {z}");
        'check: for oy in 0..ho {
            for ox in 0..wo {
                for o in 0..co {
                    let mut want = 0i64;
                    for c0 in 0..ci {
                        for t in 0..9 {
                            let (iy, ix) = (
                                (oy + t / 3) as isize - pad as isize,
                                (ox + t % 3) as isize - pad as isize,
                            );
                            want += px(iy, ix, c0) * wt[(o * ci + c0) * 9 + t] as i64;
                        }
                    }
                    let got = c[(oy * wo + ox) * co + o].load(std::sync::atomic::Ordering::Relaxed);
                    if got != want {
                        failures.push(format!(
                            "{what}: C[{oy}, {ox}, {o}] is {got}, the direct sum {want}"
                        ));
                        break 'check;
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn quant_fixtures() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(repo().join("golden/quant"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt2"))
        .collect();
    v.sort();
    v
}

/// The fused nodes of an executor's program, as `name op`.
fn fused(e: &Executor) -> Vec<String> {
    e.program
        .graph
        .nodes
        .iter()
        .filter(|n| n.target.namespace == "pt2kit" && n.target.name.starts_with("int8_"))
        .map(|n| format!("{} {}", n.name, n.target.name))
        .collect()
}

/// Where the CPU has an int8 kernel, the fixtures' static quantized convolutions
/// and linear layers run fused (both dialects: `conv2d`/`linear` as
/// exported, `convolution` as torch decomposes it; dynamic quantization,
/// whose scales are tensors, and weights quantized in the graph stay as
/// written), and their outputs agree with the graph run as written within
/// one quantization step of a dequantized output (a rounding tie); `-v`'s
/// note names the fused nodes.
#[test]
fn quant_fixtures_fuse_their_products_and_agree_with_the_graph_as_written() {
    if k8::kernel().is_none() {
        eprintln!("int8: no int8 kernel here; nothing is fused");
        return;
    }
    let cpu = || exec::device(DeviceKind::Cpu).unwrap();
    let mut failures = Vec::new();
    let mut report = String::new();
    for pt2 in quant_fixtures() {
        let name = stem(&pt2);
        let program = read(&pt2);
        let e = Executor::new(&program, cpu()).unwrap();
        let written = Executor::with_options(
            &program,
            cpu(),
            ExecOptions {
                as_given: true,
                ..Default::default()
            },
        )
        .unwrap();
        let nodes = fused(&e);
        assert!(fused(&written).is_empty(), "{name}: fused as given");
        let noted = e.fallback.notes.iter().any(|n| n.starts_with("int8: "));
        if noted == nodes.is_empty() {
            failures.push(format!("{name}: the -v note and the fused nodes disagree"));
        }
        report.push_str(&format!("{name}: {}\n", nodes.join(", ")));
        for (set, inputs, _) in input_sets(&pt2) {
            let inputs = pt2kit::tensorfile::read_npz(&inputs).unwrap();
            let ours = e.run(&inputs).unwrap();
            let theirs: Vec<_> = written
                .run(&inputs)
                .unwrap()
                .into_iter()
                .enumerate()
                .map(|(i, (_, t))| (format!("out_{i}"), t))
                .collect();
            failures.extend(compare_with_steps(
                &format!("{name}{set}"),
                &ours,
                &theirs,
                &quant_steps(&pt2),
            ));
        }
    }
    eprintln!("{report}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // what the matcher must find: the X86Inductor CNN's three products
    // (conv + relu + quantize, conv + add + relu, linear) in both dialects
    for stem_name in ["q_cnn_x86:", "q_cnn_x86.decomp:"] {
        let line = report.lines().find(|l| l.starts_with(stem_name)).unwrap();
        assert_eq!(line.matches("int8_").count(), 3, "{line}");
    }
}

/// The int8 product's speed on this CPU's kernel (ignored): `M x K x N`
/// shapes from `SHAPES` (ResNet-18's im2col products by default) on
/// `THREADS` threads (1), best and median GMAC/s of 50 calls, the
/// epilogue a no-op. `cargo test --release -p pt2kit --features exec
/// --test int8 int8_product_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn int8_product_speed() {
    let Some(kernel) = k8::kernel() else { return };
    let threads: usize = std::env::var("THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let shapes = std::env::var("SHAPES")
        .unwrap_or_else(|_| "12544x147x64,3136x576x64,784x1152x128,49x4608x512".into());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a pool");
    for shape in shapes.split(',') {
        let d: Vec<usize> = shape.split('x').filter_map(|v| v.parse().ok()).collect();
        let (m, k, n) = (d[0], d[1], d[2]);
        let a: Vec<u8> = (0..m * k).map(|i| (i * 7 % 251) as u8).collect();
        let w: Vec<i8> = (0..n * k).map(|i| (i * 5 % 253) as i8).collect();
        let fill = |r: usize, out: &mut [u8]| out.copy_from_slice(&a[r * k..][..k]);
        let am = k8::A8::from_rows(m, k, &fill);
        let packed = k8::pack_b(&w, n, k, kernel);
        let done = |_: usize, _: usize, _: usize, _: usize, _: &[i32]| {};
        let mut times = Vec::new();
        pool.install(|| {
            for _ in 0..50 {
                let t = std::time::Instant::now();
                k8::gemm(&am, &packed, threads, kernel, &done);
                times.push(t.elapsed().as_secs_f64());
            }
        });
        times.sort_by(f64::total_cmp);
        let g = |t: f64| (m * n * k) as f64 / t / 1e9;
        eprintln!(
            "{} {m}x{k}x{n} on {threads}: best {:.1} GMAC/s, median {:.1}",
            kernel.name(),
            g(times[0]),
            g(times[25])
        );
    }
}
