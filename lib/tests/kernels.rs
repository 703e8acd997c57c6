//! Every fast kernel against a plain reference loop, on randomized shapes
//! (a fixed seed: the same draws on every run): convolutions 1-D, 2-D and
//! 3-D with strides, paddings, dilations, groups and depthwise (whichever
//! kernel the executor picks for the shape: Winograd, pixel rows and taps,
//! the direct and packed products, few-channel stems, the depthwise
//! kernels, im2col), products (sgemm through mm, bmm, addmm, linear and
//! broadcast matmul), scaled dot-product attention (masks with rows of
//! every key masked, causal, grouped-query heads), reductions (with NaN)
//! and pooling (padding, ceil mode, dilation). Each case is one op in a
//! program built by hand, run by the executor as a user's graph is, in
//! float32 and, for the products and convolutions, float16 and bfloat16.
//!
//! `make test` runs this file again with `PT2KIT_NO_AVX512=1` (the AVX2
//! kernels) and `PT2KIT_NO_AVX2=1` (the baseline), so every ISA path is
//! held to the same references. `PT2KIT_KERNEL_CASES=N` draws N cases per
//! family instead of the default (`make fuzz-kernels` runs many).

#![cfg(feature = "exec")]

mod common;

use common::build::*;
use common::draws;
use pt2kit::exec::{self, DeviceKind, Executor};
use pt2kit::ir::*;
use pt2kit::tensorfile::HostTensor;

fn cases(default: usize) -> usize {
    std::env::var("PT2KIT_KERNEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Values in [-1, 1) from a seed, a few exact small integers among them.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut d = draws(seed.wrapping_mul(2654435761).wrapping_add(17) | 1);
    (0..n).map(|_| (d(2000) as f32 - 1000.0) / 1000.0).collect()
}

/// `v` rounded to `dtype` (float16 / bfloat16), as f32.
fn rounded(v: &[f32], dtype: Dtype) -> Vec<f32> {
    match dtype {
        Dtype::Float16 => v.iter().map(|x| half::f16::from_f32(*x).to_f32()).collect(),
        Dtype::BFloat16 => v
            .iter()
            .map(|x| half::bf16::from_f32(*x).to_f32())
            .collect(),
        _ => v.to_vec(),
    }
}

fn bytes(v: &[f32], dtype: Dtype) -> Vec<u8> {
    match dtype {
        Dtype::Float16 => v
            .iter()
            .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
            .collect(),
        Dtype::BFloat16 => v
            .iter()
            .flat_map(|x| half::bf16::from_f32(*x).to_le_bytes())
            .collect(),
        Dtype::Float64 => v.iter().flat_map(|x| (*x as f64).to_le_bytes()).collect(),
        _ => f32s(v),
    }
}

fn host(dtype: Dtype, shape: &[usize], v: &[f32]) -> HostTensor {
    HostTensor {
        dtype,
        shape: shape.to_vec(),
        data: bytes(v, dtype),
    }
}

fn sizes(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// Runs a built program on `inputs` (named x0, x1, ... in order).
fn run(p: &Program, inputs: Vec<HostTensor>) -> Result<Vec<HostTensor>, String> {
    let exec =
        Executor::new(p, exec::device(DeviceKind::Cpu).unwrap()).map_err(|e| e.to_string())?;
    let named: Vec<(String, HostTensor)> = inputs
        .into_iter()
        .enumerate()
        .map(|(i, t)| (format!("x{i}"), t))
        .collect();
    exec.run(&named)
        .map(|o| o.into_iter().map(|(_, t)| t).collect())
        .map_err(|e| e.to_string())
}

/// `got` against the float64 reference `want`, each element within
/// `tol * scale[i]` (the sum of the magnitudes of the terms that made it:
/// the rounding a float32 sum of them may gather) plus the rounding of the
/// output dtype; NaN only where the reference has NaN.
fn check(
    what: &str,
    got: &HostTensor,
    want: &[f64],
    scale: &[f64],
    tol: f64,
) -> Result<(), String> {
    let g = got.to_f64();
    if g.len() != want.len() {
        return Err(format!(
            "{what}: {} values, the reference has {}",
            g.len(),
            want.len()
        ));
    }
    // one unit in the last place of the output dtype, relative, and its
    // smallest subnormal's spacing below the normal range
    let (out_ulp, out_tiny) = match got.dtype {
        Dtype::Float16 => (1.0 / 1024.0, 2f64.powi(-24)),
        Dtype::BFloat16 => (1.0 / 128.0, 2f64.powi(-133)),
        _ => (0.0, 0.0),
    };
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        if a.is_nan() || b.is_nan() {
            if a.is_nan() != b.is_nan() {
                return Err(format!("{what}: element {i} is {a}, the reference {b}"));
            }
            continue;
        }
        let bound = tol * scale[i].max(1e-30) + out_ulp * b.abs() + out_tiny + 1e-30;
        if (a - b).abs() > bound {
            return Err(format!(
                "{what}: element {i} is {a}, the reference {b} (bound {bound:e})"
            ));
        }
    }
    Ok(())
}

/// One failure list for a family: all cases run, then every failure shown.
fn finish(family: &str, failures: Vec<String>, ran: usize) {
    assert!(
        failures.is_empty(),
        "{family}: {} of {ran} cases differ from the reference:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ------------------------------------------------------------ convolution

#[derive(Clone, Debug)]
struct Conv {
    batch: usize,
    groups: usize,
    cin: usize,  // per group
    cout: usize, // per group
    input: Vec<usize>,
    kernel: Vec<usize>,
    stride: Vec<usize>,
    pad: Vec<usize>,
    dilation: Vec<usize>,
    bias: bool,
    dtype: Dtype,
}

impl Conv {
    fn output(&self) -> Option<Vec<usize>> {
        (0..self.input.len())
            .map(|d| {
                let span = self.dilation[d] * (self.kernel[d] - 1) + 1;
                let padded = self.input[d] + 2 * self.pad[d];
                (padded >= span).then(|| (padded - span) / self.stride[d] + 1)
            })
            .collect()
    }
}

/// The convolution by its definition, in float64: (values, magnitudes).
fn conv_reference(c: &Conv, x: &[f32], w: &[f32], b: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let out = c.output().unwrap();
    let nd = c.input.len();
    let (ci, co) = (c.cin * c.groups, c.cout * c.groups);
    let in_plane: usize = c.input.iter().product();
    let out_plane: usize = out.iter().product();
    let taps: usize = c.kernel.iter().product();
    let mut y = vec![0f64; c.batch * co * out_plane];
    let mut s = vec![0f64; y.len()];
    let unravel = |mut i: usize, dims: &[usize]| -> Vec<usize> {
        let mut v = vec![0; dims.len()];
        for d in (0..dims.len()).rev() {
            v[d] = i % dims[d];
            i /= dims[d];
        }
        v
    };
    for n in 0..c.batch {
        for oc in 0..co {
            let g = oc / c.cout;
            for op in 0..out_plane {
                let o = unravel(op, &out);
                let (mut acc, mut mag) = (if c.bias { b[oc] as f64 } else { 0.0 }, 0f64);
                if c.bias {
                    mag += (b[oc] as f64).abs();
                }
                for icg in 0..c.cin {
                    let ic = g * c.cin + icg;
                    for t in 0..taps {
                        let k = unravel(t, &c.kernel);
                        let mut at = 0usize;
                        let mut inside = true;
                        for d in 0..nd {
                            let p = (o[d] * c.stride[d] + k[d] * c.dilation[d]) as isize
                                - c.pad[d] as isize;
                            if p < 0 || p >= c.input[d] as isize {
                                inside = false;
                                break;
                            }
                            at = at * c.input[d] + p as usize;
                        }
                        if !inside {
                            continue;
                        }
                        let xv = x[(n * ci + ic) * in_plane + at] as f64;
                        let wv = w[(oc * c.cin + icg) * taps + t] as f64;
                        acc += xv * wv;
                        mag += (xv * wv).abs();
                    }
                }
                y[(n * co + oc) * out_plane + op] = acc;
                s[(n * co + oc) * out_plane + op] = mag;
            }
        }
    }
    (y, s)
}

fn conv_case(c: &Conv, seed: u64) -> Result<(), String> {
    let out = c.output().ok_or("no output")?;
    let (ci, co) = (c.cin * c.groups, c.cout * c.groups);
    let mut xs = vec![c.batch, ci];
    xs.extend(&c.input);
    let mut ws = vec![co, c.cin];
    ws.extend(&c.kernel);
    let mut ys = vec![c.batch, co];
    ys.extend(&out);
    let nx: usize = xs.iter().product();
    let nw: usize = ws.iter().product();
    let x = rounded(&values(nx, seed), c.dtype);
    let w = rounded(&values(nw, seed + 1), c.dtype);
    let bv = rounded(&values(co, seed + 2), c.dtype);
    let mut b = B::new();
    let xv = b.input(
        "x0",
        InputKind::UserInput,
        meta_of(c.dtype, &sizes(&xs)),
        None,
    );
    let wv = b.input(
        "p_w",
        InputKind::Parameter("w".into()),
        meta_of(c.dtype, &sizes(&ws)),
        Some(bytes(&w, c.dtype)),
    );
    let bias = if c.bias {
        let bb = b.input(
            "p_b",
            InputKind::Parameter("b".into()),
            meta_of(c.dtype, &[co as i64]),
            Some(bytes(&bv, c.dtype)),
        );
        t(bb)
    } else {
        Argument::None
    };
    let ints = |v: &[usize]| Argument::Ints(sizes(v));
    let y = b.emit(|em| {
        em.op(
            "aten.convolution.default",
            vec![
                ("input", t(xv)),
                ("weight", t(wv)),
                ("bias", bias),
                ("stride", ints(&c.stride)),
                ("padding", ints(&c.pad)),
                ("dilation", ints(&c.dilation)),
                ("transposed", Argument::Bool(false)),
                ("output_padding", ints(&vec![0; c.input.len()])),
                ("groups", Argument::Int(c.groups as i64)),
            ],
            meta_of(c.dtype, &sizes(&ys)),
        )
        .unwrap()
    });
    b.output(y);
    let got = run(&b.p, vec![host(c.dtype, &xs, &x)]).map_err(|e| format!("{c:?}: {e}"))?;
    let (want, scale) = conv_reference(c, &x, &w, &bv);
    let tol = match c.dtype {
        Dtype::Float32 => 2e-6,
        Dtype::Float64 => 1e-13,
        _ => 4e-6,
    };
    check(&format!("{c:?}"), &got[0], &want, &scale, tol)
}

/// A random convolution: 1-D, 2-D or 3-D, groups (depthwise too), any
/// stride, padding and dilation, channel counts around the kernels'
/// thresholds (16, 32, 48, 64: Winograd, pixel rows and taps, the
/// few-channel stem).
fn random_conv(d: &mut impl FnMut(u64) -> usize) -> Conv {
    let nd = [1, 2, 2, 2, 3][d(5)];
    let depthwise = d(5) == 0;
    let pick = |d: &mut dyn FnMut(u64) -> usize| [1, 2, 3, 4, 5, 8, 16, 17, 32, 48, 64][d(11)];
    let (groups, cin, cout) = if depthwise {
        let c = pick(d);
        (c, 1, [1, 1, 2][d(3)])
    } else {
        let g = [1, 1, 1, 2, 4][d(5)];
        (g, pick(d), pick(d))
    };
    let kmax = if nd == 3 { 3 } else { 7 };
    let kernel: Vec<usize> = (0..nd).map(|_| 1 + d(kmax as u64)).collect();
    let stride: Vec<usize> = (0..nd).map(|_| [1, 1, 1, 2, 3][d(5)]).collect();
    let dilation: Vec<usize> = (0..nd).map(|_| [1, 1, 1, 2][d(4)]).collect();
    let pad: Vec<usize> = (0..nd)
        .map(|i| d((kernel[i] as u64 / 2) * dilation[i] as u64 + 1))
        .collect();
    let max = if nd == 3 {
        9
    } else if nd == 2 {
        30
    } else {
        60
    };
    let input: Vec<usize> = (0..nd)
        .map(|i| {
            let span = dilation[i] * (kernel[i] - 1) + 1;
            span.saturating_sub(2 * pad[i]).max(1) + d(max as u64)
        })
        .collect();
    let dtype = [
        Dtype::Float32,
        Dtype::Float32,
        Dtype::Float32,
        Dtype::Float16,
        Dtype::BFloat16,
        Dtype::Float64,
    ][d(6)];
    Conv {
        batch: 1 + d(3),
        groups,
        cin,
        cout,
        input,
        kernel,
        stride,
        pad,
        dilation,
        bias: d(2) == 0,
        dtype,
    }
}

/// Shapes each of the executor's convolution kernels takes (the
/// thresholds of `exec/ops/conv`), so that every one of them is checked
/// whatever the draws: a 7x7 stride-2 stem over three colours, Winograd's
/// 3x3s from 32 and 64 channels, small planes (pixel rows and taps),
/// the direct product over large planes, strided 1x1s, depthwise of
/// stride 1 and 2 in every width, 3-D ones over one plane.
fn fixed_convs() -> Vec<Conv> {
    let c2 = |batch,
              groups,
              cin,
              cout,
              hw: [usize; 2],
              k: [usize; 2],
              s: [usize; 2],
              p: [usize; 2],
              dl: [usize; 2]| Conv {
        batch,
        groups,
        cin,
        cout,
        input: hw.to_vec(),
        kernel: k.to_vec(),
        stride: s.to_vec(),
        pad: p.to_vec(),
        dilation: dl.to_vec(),
        bias: true,
        dtype: Dtype::Float32,
    };
    let mut v = vec![
        c2(1, 1, 3, 64, [45, 38], [7, 7], [2, 2], [3, 3], [1, 1]),
        c2(2, 1, 3, 16, [23, 26], [3, 3], [2, 2], [1, 1], [1, 1]),
        c2(1, 1, 32, 32, [28, 28], [3, 3], [1, 1], [1, 1], [1, 1]),
        c2(2, 1, 64, 64, [14, 14], [3, 3], [1, 1], [1, 1], [1, 1]),
        c2(1, 1, 64, 128, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1]),
        c2(2, 1, 48, 64, [9, 11], [3, 3], [2, 2], [1, 1], [1, 1]),
        // pixel taps at batch 1, lines of 14 and 13 pixels (panels of 5,
        // 5 and 4 rows, and 5, 4 and 4, on AVX2)
        c2(1, 1, 32, 64, [27, 27], [3, 3], [2, 2], [1, 1], [1, 1]),
        c2(1, 1, 16, 32, [26, 25], [3, 3], [2, 2], [1, 1], [1, 1]),
        c2(1, 1, 16, 32, [56, 56], [3, 3], [1, 1], [1, 1], [1, 1]),
        c2(1, 1, 24, 40, [40, 33], [5, 5], [2, 2], [2, 2], [1, 1]),
        c2(1, 1, 64, 256, [14, 14], [1, 1], [1, 1], [0, 0], [1, 1]),
        c2(2, 1, 256, 64, [8, 8], [1, 1], [1, 1], [0, 0], [1, 1]),
        c2(1, 1, 64, 128, [28, 28], [1, 1], [2, 2], [0, 0], [1, 1]),
        c2(1, 1, 16, 24, [64, 64], [1, 1], [1, 1], [0, 0], [1, 1]),
        c2(2, 1, 8, 8, [20, 18], [3, 3], [1, 1], [2, 2], [2, 2]),
        c2(1, 1, 5, 7, [6, 4], [3, 3], [1, 1], [1, 1], [1, 1]),
        // a 1x1 with a dilation along one dim (no tap for it to space:
        // the baseline refused it, `make fuzz-kernels CASES=1500`)
        c2(1, 1, 2, 8, [11, 9], [1, 1], [1, 1], [0, 0], [2, 1]),
        // depthwise stride 2 where the blocked kernel does not go (few
        // channels; a grid past the cache, two outputs a channel)
        c2(2, 8, 1, 1, [33, 35], [3, 3], [2, 2], [1, 1], [1, 1]),
        c2(1, 16, 1, 2, [70, 66], [5, 5], [2, 2], [2, 2], [1, 1]),
    ];
    for (k, s, hw) in [
        (3, 1, 28),
        (3, 2, 28),
        (5, 2, 29),
        (7, 2, 30),
        (5, 1, 14),
        (3, 1, 7),
        (2, 2, 16),
        (3, 2, 7),
    ] {
        v.push(c2(
            2,
            48,
            1,
            1,
            [hw, hw],
            [k, k],
            [s, s],
            [k / 2, k / 2],
            [1, 1],
        ));
    }
    let c3 = |cin, cout, dhw: [usize; 3], k: [usize; 3], s: [usize; 3], p: [usize; 3]| Conv {
        batch: 2,
        groups: 1,
        cin,
        cout,
        input: dhw.to_vec(),
        kernel: k.to_vec(),
        stride: s.to_vec(),
        pad: p.to_vec(),
        dilation: vec![1; 3],
        bias: true,
        dtype: Dtype::Float32,
    };
    v.extend([
        c3(32, 32, [1, 4, 4], [3, 3, 3], [1, 1, 1], [1, 1, 1]),
        c3(32, 64, [1, 8, 8], [3, 3, 3], [1, 1, 1], [1, 1, 1]),
        c3(16, 16, [1, 12, 12], [3, 3, 3], [1, 1, 1], [1, 1, 1]),
        c3(3, 16, [4, 16, 16], [3, 7, 7], [1, 2, 2], [1, 3, 3]),
        c3(16, 32, [2, 8, 8], [1, 1, 1], [2, 2, 2], [0, 0, 0]),
        c3(8, 16, [3, 8, 8], [1, 3, 3], [1, 1, 1], [0, 1, 1]),
    ]);
    v
}

#[test]
fn convolutions_match_the_definition() {
    let mut failures = Vec::new();
    let fixed = fixed_convs();
    for (i, c) in fixed.iter().enumerate() {
        if let Err(e) = conv_case(c, 1000 + i as u64) {
            failures.push(e);
        }
    }
    let mut d = draws(0x5eed_c0de);
    let n = cases(160);
    for i in 0..n {
        let c = random_conv(&mut d);
        if c.output().is_none() {
            continue;
        }
        if let Err(e) = conv_case(&c, i as u64) {
            failures.push(e);
        }
    }
    finish("convolution", failures, fixed.len() + n);
}

// ------------------------------------------------------------ products

/// A product by its definition: `[.., m, k] x [.., k, n]`, batch dims
/// broadcast; (values, magnitudes).
fn matmul_reference(
    a: &[f32],
    ad: &[usize],
    b: &[f32],
    bd: &[usize],
) -> (Vec<f64>, Vec<f64>, Vec<usize>) {
    let (m, k) = (ad[ad.len() - 2], ad[ad.len() - 1]);
    let n = bd[bd.len() - 1];
    let (ab, bb) = (&ad[..ad.len() - 2], &bd[..bd.len() - 2]);
    let rank = ab.len().max(bb.len());
    let pad = |s: &[usize]| {
        let mut v = vec![1; rank - s.len()];
        v.extend(s);
        v
    };
    let (pa, pb) = (pad(ab), pad(bb));
    let batch: Vec<usize> = pa.iter().zip(&pb).map(|(x, y)| *x.max(y)).collect();
    let count: usize = batch.iter().product();
    let offset = |dims: &[usize], mut i: usize| {
        let mut off = 0;
        let mut stride = 1;
        let mut idx = vec![0; rank];
        for d in (0..rank).rev() {
            idx[d] = i % batch[d];
            i /= batch[d];
        }
        for d in (0..rank).rev() {
            off += if dims[d] == 1 { 0 } else { idx[d] * stride };
            stride *= dims[d];
        }
        off
    };
    let mut y = Vec::with_capacity(count * m * n);
    let mut s = Vec::with_capacity(count * m * n);
    for bi in 0..count {
        let (oa, ob) = (offset(&pa, bi) * m * k, offset(&pb, bi) * k * n);
        for i in 0..m {
            for j in 0..n {
                let (mut acc, mut mag) = (0f64, 0f64);
                for p in 0..k {
                    let v = a[oa + i * k + p] as f64 * b[ob + p * n + j] as f64;
                    acc += v;
                    mag += v.abs();
                }
                y.push(acc);
                s.push(mag);
            }
        }
    }
    let mut shape = batch;
    shape.extend([m, n]);
    (y, s, shape)
}

#[test]
fn products_match_the_definition() {
    let mut d = draws(0xa11ce);
    let mut failures = Vec::new();
    let edge = [
        1usize, 2, 7, 12, 13, 16, 31, 32, 33, 47, 64, 100, 129, 300, 801,
    ];
    let n = cases(120);
    for i in 0..n {
        let pick = |d: &mut dyn FnMut(u64) -> usize| edge[d(edge.len() as u64)];
        let (m, k, nn) = (pick(&mut d), pick(&mut d), pick(&mut d));
        if m * k * nn > 6_000_000 {
            continue;
        }
        let dtype = [
            Dtype::Float32,
            Dtype::Float32,
            Dtype::Float32,
            Dtype::Float16,
            Dtype::BFloat16,
            Dtype::Float64,
        ][d(6)];
        let form = d(5);
        // 0: mm, 1: linear (weight [n, k], bias), 2: bmm, 3: matmul with a
        // broadcast weight, 4: addmm with a transposed input view
        let batch = 1 + d(3);
        let (ad, bd): (Vec<usize>, Vec<usize>) = match form {
            2 => (vec![batch, m, k], vec![batch, k, nn]),
            3 => (vec![batch, 2, m, k], vec![k, nn]),
            _ => (vec![m, k], vec![k, nn]),
        };
        let a = rounded(&values(ad.iter().product(), i as u64), dtype);
        let b = rounded(&values(bd.iter().product(), i as u64 + 7), dtype);
        let bias = rounded(&values(nn, i as u64 + 9), dtype);
        let (mut want, mut scale, shape) = matmul_reference(&a, &ad, &b, &bd);
        let mut p = B::new();
        let x = p.input(
            "x0",
            InputKind::UserInput,
            meta_of(dtype, &sizes(&ad)),
            None,
        );
        let out_meta = meta_of(dtype, &sizes(&shape));
        let y = match form {
            1 => {
                // the weight stored [n, k] as a linear layer's
                let mut wt = vec![0f32; nn * k];
                for r in 0..k {
                    for c in 0..nn {
                        wt[c * k + r] = b[r * nn + c];
                    }
                }
                let w = p.input(
                    "p_w",
                    InputKind::Parameter("w".into()),
                    meta_of(dtype, &[nn as i64, k as i64]),
                    Some(bytes(&wt, dtype)),
                );
                let bb = p.input(
                    "p_b",
                    InputKind::Parameter("b".into()),
                    meta_of(dtype, &[nn as i64]),
                    Some(bytes(&bias, dtype)),
                );
                for (r, v) in want.iter_mut().enumerate() {
                    *v += bias[r % nn] as f64;
                    scale[r] += (bias[r % nn] as f64).abs();
                }
                p.emit(|em| {
                    em.op(
                        "aten.linear.default",
                        vec![("input", t(x)), ("weight", t(w)), ("bias", t(bb))],
                        out_meta.clone(),
                    )
                    .unwrap()
                })
            }
            4 => {
                // A given as the transpose of a [k, m] input
                let mut at = vec![0f32; m * k];
                for r in 0..m {
                    for c in 0..k {
                        at[c * m + r] = a[r * k + c];
                    }
                }
                let xt = p.input(
                    "x1",
                    InputKind::UserInput,
                    meta_of(dtype, &[k as i64, m as i64]),
                    None,
                );
                let w = p.input(
                    "p_w",
                    InputKind::Parameter("w".into()),
                    meta_of(dtype, &sizes(&bd)),
                    Some(bytes(&b, dtype)),
                );
                let bb = p.input(
                    "p_b",
                    InputKind::Parameter("b".into()),
                    meta_of(dtype, &[nn as i64]),
                    Some(bytes(&bias, dtype)),
                );
                for (r, v) in want.iter_mut().enumerate() {
                    *v += bias[r % nn] as f64;
                    scale[r] += (bias[r % nn] as f64).abs();
                }
                let view = p.emit(|em| {
                    em.op(
                        "aten.permute.default",
                        vec![("self", t(xt)), ("dims", Argument::Ints(vec![1, 0]))],
                        meta_of(dtype, &[m as i64, k as i64]),
                    )
                    .unwrap()
                });
                let y = p.emit(|em| {
                    em.op(
                        "aten.addmm.default",
                        vec![("self", t(bb)), ("mat1", t(view)), ("mat2", t(w))],
                        out_meta.clone(),
                    )
                    .unwrap()
                });
                p.output(y);
                let got = run(&p.p, vec![host(dtype, &ad, &a), host(dtype, &[k, m], &at)]);
                let r = got.and_then(|g| {
                    check(
                        &format!("addmm {m}x{k}x{nn} {dtype:?}"),
                        &g[0],
                        &want,
                        &scale,
                        2e-6,
                    )
                });
                if let Err(e) = r {
                    failures.push(e);
                }
                continue;
            }
            _ => {
                let w = p.input(
                    "p_w",
                    InputKind::Parameter("w".into()),
                    meta_of(dtype, &sizes(&bd)),
                    Some(bytes(&b, dtype)),
                );
                let op = [
                    "aten.mm.default",
                    "",
                    "aten.bmm.default",
                    "aten.matmul.default",
                ][form];
                let (l, r) = if form == 3 {
                    ("self", "other")
                } else {
                    ("self", "mat2")
                };
                p.emit(|em| {
                    em.op(op, vec![(l, t(x)), (r, t(w))], out_meta.clone())
                        .unwrap()
                })
            }
        };
        p.output(y);
        let r = run(&p.p, vec![host(dtype, &ad, &a)]).and_then(|g| {
            check(
                &format!("form {form} {ad:?} x {bd:?} {dtype:?}"),
                &g[0],
                &want,
                &scale,
                if dtype == Dtype::Float64 { 1e-13 } else { 2e-6 },
            )
        });
        if let Err(e) = r {
            failures.push(e);
        }
    }
    finish("products", failures, n);
}

// ------------------------------------------------------------ attention

#[test]
fn attention_matches_the_definition() {
    let mut d = draws(0xa7e);
    let mut failures = Vec::new();
    let n = cases(80);
    for i in 0..n {
        let (b, hk, l, s, e) = (
            1 + d(2),
            1 + d(3),
            1 + d(9),
            1 + d(11),
            [1, 4, 8, 16, 64][d(5)],
        );
        let hq = hk * [1, 1, 2, 3][d(4)];
        let mask_kind = d(4); // 0 none, 1 bool, 2 float, 3 causal
        let scale = if d(3) == 0 { Some(0.3) } else { None };
        let q = values(b * hq * l * e, i as u64);
        let k = values(b * hk * s * e, i as u64 + 1);
        let v = values(b * hk * s * e, i as u64 + 2);
        let mut mask_bool: Vec<bool> = (0..b * l * s).map(|_| d(4) != 0).collect();
        // a row with every key masked
        if mask_kind == 1 && l > 1 {
            mask_bool[..s].iter_mut().for_each(|m| *m = false);
        }
        let mask_f: Vec<f32> = mask_bool
            .iter()
            .map(|&m| if m { 0.0 } else { f32::NEG_INFINITY })
            .collect();
        // reference: safe softmax (a fully masked row attends to nothing)
        let sc = scale.unwrap_or(1.0 / (e as f64).sqrt());
        let mut want = vec![0f64; b * hq * l * e];
        let mut mag = vec![0f64; want.len()];
        for bi in 0..b {
            for h in 0..hq {
                let kh = h / (hq / hk);
                for r in 0..l {
                    let mut logits = vec![f64::NEG_INFINITY; s];
                    for c in 0..s {
                        let allowed = match mask_kind {
                            1 | 2 => mask_bool[(bi * l + r) * s + c],
                            3 => c <= r,
                            _ => true,
                        };
                        if allowed {
                            let dot: f64 = (0..e)
                                .map(|x| {
                                    q[((bi * hq + h) * l + r) * e + x] as f64
                                        * k[((bi * hk + kh) * s + c) * e + x] as f64
                                })
                                .sum();
                            logits[c] = dot * sc;
                        }
                    }
                    let mx = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let w: Vec<f64> = if mx == f64::NEG_INFINITY {
                        vec![0.0; s]
                    } else {
                        let ex: Vec<f64> = logits.iter().map(|z| (z - mx).exp()).collect();
                        let sum: f64 = ex.iter().sum();
                        ex.iter().map(|z| z / sum).collect()
                    };
                    for x in 0..e {
                        let o = ((bi * hq + h) * l + r) * e + x;
                        for c in 0..s {
                            let vv = v[((bi * hk + kh) * s + c) * e + x] as f64;
                            want[o] += w[c] * vv;
                            mag[o] += (w[c] * vv).abs();
                        }
                        mag[o] += 1.0; // the softmax's own rounding
                    }
                }
            }
        }
        let mut p = B::new();
        let qv = p.input(
            "x0",
            InputKind::UserInput,
            meta(&[b as i64, hq as i64, l as i64, e as i64]),
            None,
        );
        let kv = p.input(
            "x1",
            InputKind::UserInput,
            meta(&[b as i64, hk as i64, s as i64, e as i64]),
            None,
        );
        let vv = p.input(
            "x2",
            InputKind::UserInput,
            meta(&[b as i64, hk as i64, s as i64, e as i64]),
            None,
        );
        let mut inputs = vec![
            host(Dtype::Float32, &[b, hq, l, e], &q),
            host(Dtype::Float32, &[b, hk, s, e], &k),
            host(Dtype::Float32, &[b, hk, s, e], &v),
        ];
        let mut args = vec![("query", t(qv)), ("key", t(kv)), ("value", t(vv))];
        match mask_kind {
            1 => {
                let m = p.input(
                    "x3",
                    InputKind::UserInput,
                    meta_of(Dtype::Bool, &[b as i64, 1, l as i64, s as i64]),
                    None,
                );
                inputs.push(HostTensor {
                    dtype: Dtype::Bool,
                    shape: vec![b, 1, l, s],
                    data: mask_bool.iter().map(|&x| x as u8).collect(),
                });
                args.push(("attn_mask", t(m)));
            }
            2 => {
                let m = p.input(
                    "x3",
                    InputKind::UserInput,
                    meta(&[b as i64, 1, l as i64, s as i64]),
                    None,
                );
                inputs.push(host(Dtype::Float32, &[b, 1, l, s], &mask_f));
                args.push(("attn_mask", t(m)));
            }
            3 => args.push(("is_causal", Argument::Bool(true))),
            _ => {}
        }
        if let Some(x) = scale {
            args.push(("scale", Argument::Float(x)));
        }
        if hq != hk {
            args.push(("enable_gqa", Argument::Bool(true)));
        }
        let y = p.emit(|em| {
            em.op(
                "aten.scaled_dot_product_attention.default",
                args,
                meta(&[b as i64, hq as i64, l as i64, e as i64]),
            )
            .unwrap()
        });
        p.output(y);
        let what = format!("b{b} hq{hq} hk{hk} l{l} s{s} e{e} mask{mask_kind} scale{scale:?}");
        if let Err(e) = run(&p.p, inputs).and_then(|g| check(&what, &g[0], &want, &mag, 1e-5)) {
            failures.push(e);
        }
    }
    finish("attention", failures, n);
}

// ------------------------------------------------------------ reductions

/// torch's max (NaN propagates) along a line.
fn nan_max(v: &[f64], largest: bool) -> (f64, usize) {
    let mut best = (v[0], 0);
    for (i, &x) in v.iter().enumerate() {
        if best.0.is_nan() {
            break;
        }
        if x.is_nan() || (largest && x > best.0) || (!largest && x < best.0) {
            best = (x, i);
        }
    }
    best
}

#[test]
fn reductions_match_the_definition() {
    let mut d = draws(0x5ced);
    let mut failures = Vec::new();
    let n = cases(120);
    for i in 0..n {
        let rank = 1 + d(4);
        let dims: Vec<usize> = (0..rank).map(|_| 1 + d(9)).collect();
        let total: usize = dims.iter().product();
        let mut x = values(total, i as u64);
        if d(3) == 0 {
            // a few NaN and infinities
            for _ in 0..1 + d(3) {
                let at = d(total as u64);
                x[at] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][d(3)];
            }
        }
        let axis = d(rank as u64);
        let keep = d(2) == 0;
        let op = d(6); // sum, mean, amax, amin, argmax, cumsum
        let outer: usize = dims[..axis].iter().product();
        let len = dims[axis];
        let inner: usize = dims[axis + 1..].iter().product();
        let line = |o: usize, j: usize| -> Vec<f64> {
            (0..len)
                .map(|a| x[(o * len + a) * inner + j] as f64)
                .collect()
        };
        let mut want = Vec::new();
        let mut mag = Vec::new();
        let mut out = dims.clone();
        if op == 5 {
            for o in 0..outer {
                for a in 0..len {
                    for j in 0..inner {
                        let l = line(o, j);
                        want.push(l[..=a].iter().sum::<f64>());
                        mag.push(l[..=a].iter().map(|v| v.abs()).sum::<f64>());
                    }
                }
            }
        } else {
            if keep {
                out[axis] = 1;
            } else {
                out.remove(axis);
            }
            for o in 0..outer {
                for j in 0..inner {
                    let l = line(o, j);
                    let m: f64 = l.iter().map(|v| v.abs()).sum();
                    let (v, s) = match op {
                        0 => (l.iter().sum(), m),
                        1 => (l.iter().sum::<f64>() / len as f64, m / len as f64),
                        2 => (nan_max(&l, true).0, 0.0),
                        3 => (nan_max(&l, false).0, 0.0),
                        _ => (nan_max(&l, true).1 as f64, 0.0),
                    };
                    want.push(v);
                    mag.push(s);
                }
            }
        }
        let mut p = B::new();
        let xv = p.input("x0", InputKind::UserInput, meta(&sizes(&dims)), None);
        let ax = Argument::Ints(vec![axis as i64]);
        let y = p.emit(|em| {
            match op {
                0 => em.op(
                    "aten.sum.dim_IntList",
                    vec![
                        ("self", t(xv)),
                        ("dim", ax),
                        ("keepdim", Argument::Bool(keep)),
                    ],
                    meta(&sizes(&out)),
                ),
                1 => em.op(
                    "aten.mean.dim",
                    vec![
                        ("self", t(xv)),
                        ("dim", ax),
                        ("keepdim", Argument::Bool(keep)),
                    ],
                    meta(&sizes(&out)),
                ),
                2 => em.op(
                    "aten.amax.default",
                    vec![
                        ("self", t(xv)),
                        ("dim", ax),
                        ("keepdim", Argument::Bool(keep)),
                    ],
                    meta(&sizes(&out)),
                ),
                3 => em.op(
                    "aten.amin.default",
                    vec![
                        ("self", t(xv)),
                        ("dim", ax),
                        ("keepdim", Argument::Bool(keep)),
                    ],
                    meta(&sizes(&out)),
                ),
                4 => em.op(
                    "aten.argmax.default",
                    vec![
                        ("self", t(xv)),
                        ("dim", Argument::Int(axis as i64)),
                        ("keepdim", Argument::Bool(keep)),
                    ],
                    meta_of(Dtype::Int64, &sizes(&out)),
                ),
                _ => em.op(
                    "aten.cumsum.default",
                    vec![("self", t(xv)), ("dim", Argument::Int(axis as i64))],
                    meta(&sizes(&out)),
                ),
            }
            .unwrap()
        });
        p.output(y);
        let what = format!("op {op} dims {dims:?} axis {axis} keep {keep}");
        let r = run(&p.p, vec![host(Dtype::Float32, &dims, &x)]).and_then(|g| {
            if g[0].shape != out {
                return Err(format!("{what}: shape {:?}, expected {out:?}", g[0].shape));
            }
            check(&what, &g[0], &want, &mag, 1e-6)
        });
        if let Err(e) = r {
            failures.push(e);
        }
    }
    finish("reductions", failures, n);
}

// ------------------------------------------------------------ pooling

#[test]
fn pooling_matches_the_definition() {
    let mut d = draws(0xb001);
    let mut failures = Vec::new();
    let n = cases(120);
    for i in 0..n {
        let (b, c) = (1 + d(2), 1 + d(20));
        let k = [1 + d(4), 1 + d(4)];
        let s = [1 + d(3), 1 + d(3)];
        let is_max = d(2) == 0;
        let dil = if is_max { [1 + d(2), 1 + d(2)] } else { [1, 1] };
        let pad = [d((k[0] / 2) as u64 + 1), d((k[1] / 2) as u64 + 1)];
        let ceil = d(3) == 0;
        let include = d(2) == 0;
        let hw = [
            dil[0] * (k[0] - 1) + 1 + d(20),
            dil[1] * (k[1] - 1) + 1 + d(20),
        ];
        let out_dim = |a: usize| {
            let span = dil[a] * (k[a] - 1) + 1;
            let num = hw[a] + 2 * pad[a] - span;
            let mut o = if ceil { num.div_ceil(s[a]) } else { num / s[a] } + 1;
            // torch: the last window must start inside the input or left padding
            if ceil && (o - 1) * s[a] >= hw[a] + pad[a] {
                o -= 1;
            }
            o
        };
        let (oh, ow) = (out_dim(0), out_dim(1));
        let dtype = [
            Dtype::Float32,
            Dtype::Float32,
            Dtype::Float16,
            Dtype::BFloat16,
            Dtype::Float64,
        ][d(5)];
        let x = rounded(&values(b * c * hw[0] * hw[1], i as u64), dtype);
        let mut want = Vec::new();
        for pl in 0..b * c {
            for y in 0..oh {
                for xw in 0..ow {
                    let (y0, x0) = (
                        (y * s[0]) as isize - pad[0] as isize,
                        (xw * s[1]) as isize - pad[1] as isize,
                    );
                    let (mut best, mut sum, mut count) = (f64::NEG_INFINITY, 0f64, 0usize);
                    for ky in 0..k[0] {
                        for kx in 0..k[1] {
                            let (yy, xx) =
                                (y0 + (ky * dil[0]) as isize, x0 + (kx * dil[1]) as isize);
                            if yy >= 0 && xx >= 0 && (yy as usize) < hw[0] && (xx as usize) < hw[1]
                            {
                                let v = x[pl * hw[0] * hw[1] + yy as usize * hw[1] + xx as usize]
                                    as f64;
                                best = best.max(v);
                                sum += v;
                                count += 1;
                            }
                        }
                    }
                    if is_max {
                        want.push(best);
                    } else {
                        // torch's divisor: the window clipped to the padded
                        // input (with count_include_pad), else to the input
                        let (ye, xe) = (
                            (y0 + k[0] as isize).min((hw[0] + pad[0]) as isize),
                            (x0 + k[1] as isize).min((hw[1] + pad[1]) as isize),
                        );
                        let div = if include {
                            ((ye - y0) * (xe - x0)) as usize
                        } else {
                            count
                        };
                        want.push(sum / div as f64);
                    }
                }
            }
        }
        let mag = vec![4.0; want.len()];
        let mut p = B::new();
        let xv = p.input(
            "x0",
            InputKind::UserInput,
            meta_of(dtype, &[b as i64, c as i64, hw[0] as i64, hw[1] as i64]),
            None,
        );
        let pair = |v: [usize; 2]| Argument::Ints(vec![v[0] as i64, v[1] as i64]);
        let out_meta = meta_of(dtype, &[b as i64, c as i64, oh as i64, ow as i64]);
        let y = p.emit(|em| {
            if is_max {
                em.call(
                    "aten.max_pool2d_with_indices.default",
                    vec![
                        ("self", t(xv)),
                        ("kernel_size", pair(k)),
                        ("stride", pair(s)),
                        ("padding", pair(pad)),
                        ("dilation", pair(dil)),
                        ("ceil_mode", Argument::Bool(ceil)),
                    ],
                    vec![
                        pt2kit::decompose::edit::Out::New(out_meta.clone()),
                        pt2kit::decompose::edit::Out::New(meta_of(
                            Dtype::Int64,
                            &[b as i64, c as i64, oh as i64, ow as i64],
                        )),
                    ],
                )
                .unwrap()[0]
            } else {
                em.op(
                    "aten.avg_pool2d.default",
                    vec![
                        ("self", t(xv)),
                        ("kernel_size", pair(k)),
                        ("stride", pair(s)),
                        ("padding", pair(pad)),
                        ("ceil_mode", Argument::Bool(ceil)),
                        ("count_include_pad", Argument::Bool(include)),
                    ],
                    out_meta.clone(),
                )
                .unwrap()
            }
        });
        p.output(y);
        let what = format!("max {is_max} b{b} c{c} hw {hw:?} k {k:?} s {s:?} p {pad:?} d {dil:?} ceil {ceil} include {include} {dtype:?}");
        let r = run(&p.p, vec![host(dtype, &[b, c, hw[0], hw[1]], &x)]).and_then(|g| {
            if g[0].shape != [b, c, oh, ow] {
                return Err(format!(
                    "{what}: shape {:?}, expected {:?}",
                    g[0].shape,
                    [b, c, oh, ow]
                ));
            }
            let tol = if dtype == Dtype::Float64 { 1e-14 } else { 1e-6 };
            check(&what, &g[0], &want, &mag, tol)
        });
        if let Err(e) = r {
            failures.push(e);
        }
    }
    finish("pooling", failures, n);
}

// ------------------------------------------------------------ bfloat16

/// `--precision bf16`'s products (`kernels::lowp`), each kernel this CPU
/// runs, against the reference (both operands rounded to bfloat16, the
/// products summed in float64): within a float32 sum's rounding of the
/// magnitudes. A and B in every layout the executor hands them over (rows
/// in place, a transposed activation, a transposed weight), edges of
/// every block size. Without a kernel (`PT2KIT_NO_AVX512=1`) there is none
/// to check, and the executor stays in float32 (`exec.rs`).
#[test]
fn bf16_products_match_the_reference() {
    use pt2kit::kernels::lowp;
    // the rounding is torch's (round to nearest even) on every class of
    // float32: normals, ties, subnormals, infinities, NaN
    let mut d = draws(0x5eed_bf16);
    for i in 0..200_000u32 {
        let bits = match i {
            0 => 0x7f80_0000,
            1 => 0xff80_0000,
            2 => 0x7fc0_0001,
            3 => 0x3f80_8000, // a tie, to even (down)
            4 => 0x3f81_8000, // a tie, to even (up)
            5 => 0x7f7f_ffff, // rounds to infinity
            _ => (d(1 << 32) as u32) ^ (i << 7),
        };
        let x = f32::from_bits(bits);
        let want = half::bf16::from_f32(x);
        let got = lowp::to_bf16(x);
        assert!(
            got == want.to_bits() || (x.is_nan() && lowp::from_bf16(got).is_nan()),
            "to_bf16({x:e} = {bits:#x}) = {got:#x}, half says {:#x}",
            want.to_bits()
        );
    }
    let kernels: Vec<lowp::Kernel> = [lowp::Kernel::Amx, lowp::Kernel::Avx512]
        .into_iter()
        .filter(|k| lowp::runs(*k))
        .collect();
    if kernels.is_empty() {
        assert!(lowp::kernel().is_none());
        eprintln!("bf16: this CPU (or the ISA knobs) leaves no bfloat16 kernel");
        return;
    }
    let mut shapes: Vec<(usize, usize, usize)> = vec![
        (1, 1, 1),
        (1, 768, 768),
        (12, 64, 32),
        (13, 33, 31),
        (31, 31, 33),
        (32, 32, 32),
        (33, 65, 65),
        (128, 768, 96),
        (200, 3, 70),
        (7, 3072, 40),
    ];
    let mut d = draws(0xbf16);
    for _ in 0..cases(40) {
        shapes.push((1 + d(140), 1 + d(300), 1 + d(140)));
    }
    let mut failures = Vec::new();
    for (case, &(m, k, n)) in shapes.iter().enumerate() {
        let a = values(m * k, case as u64 * 2 + 1);
        let b = values(k * n, case as u64 * 2 + 2);
        let bias = values(n, case as u64 + 999);
        let want = lowp::reference(&a, &b, m, k, n);
        // A transposed ([k, m] read as its transpose), B as a linear
        // layer's weight ([n, k] read as its transpose)
        let at: Vec<f32> = (0..k * m).map(|x| a[(x % m) * k + x / m]).collect();
        let bt: Vec<f32> = (0..n * k).map(|x| b[(x % k) * n + x / k]).collect();
        let scale: Vec<f64> = (0..m * n)
            .map(|x| {
                let (i, j) = (x / n, x % n);
                (0..k)
                    .map(|p| (a[i * k + p] as f64 * b[p * n + j] as f64).abs())
                    .sum::<f64>()
            })
            .collect();
        for &kernel in &kernels {
            for layout in 0..4 {
                let pa = if layout & 1 == 0 {
                    lowp::round_a(&a, 0, m, k, k, 1)
                } else {
                    lowp::round_a(&at, 0, m, k, 1, m)
                };
                // B: rows in place, made row by row (a convolution's
                // im2col), or transposed
                let pb = match layout {
                    0 => lowp::pack_b(&b, 0, k, n, n, 1),
                    1 => lowp::pack_b_rows(k, n, &|r, out| out.copy_from_slice(&b[r * n..][..n])),
                    _ => lowp::pack_b(&bt, 0, k, n, 1, k),
                };
                // a bias per row (a convolution's) or per column (a linear
                // layer's)
                let row_bias = values(m, case as u64 + 777);
                // C wider than n (ldc = n + 3): the gaps stay as they were
                let ldc = n + 3;
                let mut c = vec![std::mem::MaybeUninit::new(f32::NAN); m * ldc];
                let blocks = std::sync::atomic::AtomicUsize::new(0);
                let done = |r: std::ops::Range<usize>, c: std::ops::Range<usize>, _: *mut f32| {
                    blocks.fetch_add(r.len() * c.len(), std::sync::atomic::Ordering::Relaxed);
                };
                let b_row = match layout {
                    1 => lowp::Bias::Rows(&row_bias),
                    3 => lowp::Bias::Columns(&bias),
                    _ => lowp::Bias::None,
                };
                lowp::gemm(&pa, &pb, &mut c, ldc, b_row, 2, kernel, Some(&done));
                let c: Vec<f32> = c.iter().map(|v| unsafe { v.assume_init() }).collect();
                let what = format!("{} [{m}, {k}] x [{k}, {n}] layout {layout}", kernel.name());
                if blocks.into_inner() != m * n {
                    failures.push(format!("{what}: the blocks reported do not cover C once"));
                }
                for x in 0..m * n {
                    let (i, j) = (x / n, x % n);
                    let w = want[x] as f64
                        + match layout {
                            1 => row_bias[i] as f64,
                            3 => bias[j] as f64,
                            _ => 0.0,
                        };
                    let g = c[i * ldc + j] as f64;
                    let bound = (k as f64 + 2.0) * 2f64.powi(-24) * (scale[x] + w.abs()) + 1e-30;
                    if (g - w).abs() > bound || g.is_nan() {
                        failures.push(format!(
                            "{what}: C[{i}, {j}] is {g}, the reference {w} (bound {bound:e})"
                        ));
                        break;
                    }
                }
                if (0..m).any(|i| (n..ldc).any(|j| !c[i * ldc + j].is_nan())) {
                    failures.push(format!("{what}: wrote past the rows of C"));
                }
            }
        }
    }
    finish("bf16 products", failures, shapes.len() * kernels.len() * 4);
}

/// `--precision bf16`'s 2-D convolutions (`kernels::lowp::conv`), each
/// kernel this CPU runs, against the reference (input and weight rounded
/// to bfloat16, the products summed in float64), within a float32 sum's
/// rounding of the magnitudes: random strides, paddings and dilations
/// (the stride's phases, taps in the padding), channels that are no
/// multiple of 16 or 32, batches of more than one image, inputs in planes
/// and channels-last, a bias, the output added to what it holds (a
/// residual written over), and the blocks reported once each.
#[test]
fn bf16_convolutions_match_the_reference() {
    use pt2kit::kernels::lowp;
    use pt2kit::kernels::window::Windows;
    let kernels: Vec<lowp::Kernel> = [lowp::Kernel::Amx, lowp::Kernel::Avx512]
        .into_iter()
        .filter(|k| lowp::runs(*k))
        .collect();
    if kernels.is_empty() {
        eprintln!("bf16: this CPU (or the ISA knobs) leaves no bfloat16 kernel");
        return;
    }
    // (batch, c, c_out, [h, w], [kh, kw], [sh, sw], [ph, pw], [dh, dw])
    type Case = (
        usize,
        usize,
        usize,
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 2],
    );
    let mut shapes: Vec<Case> = vec![
        (1, 1, 1, [1, 1], [1, 1], [1, 1], [0, 0], [1, 1]),
        (1, 64, 64, [14, 14], [3, 3], [1, 1], [1, 1], [1, 1]),
        (2, 33, 47, [9, 11], [3, 3], [2, 2], [1, 1], [1, 1]),
        (1, 256, 64, [7, 7], [1, 1], [1, 1], [0, 0], [1, 1]),
        (1, 64, 128, [15, 15], [1, 1], [2, 2], [0, 0], [1, 1]),
        (3, 5, 40, [12, 10], [5, 3], [1, 2], [2, 0], [2, 1]),
        (1, 3, 16, [20, 20], [7, 7], [2, 2], [3, 3], [1, 1]),
        (1, 40, 70, [6, 30], [3, 1], [3, 1], [0, 2], [1, 3]),
    ];
    let mut d = draws(0xc0_bf16);
    for _ in 0..cases(40) {
        let k = [1 + d(5), 1 + d(5)];
        let dil = [1 + d(2), 1 + d(2)];
        let stride = [1 + d(3), 1 + d(3)];
        let pad = [d(3), d(3)];
        // the input at least as large as the dilated kernel
        let hw = [
            (k[0] - 1) * dil[0] + 1 + d(12),
            (k[1] - 1) * dil[1] + 1 + d(12),
        ];
        shapes.push((1 + d(3), 1 + d(70), 1 + d(80), hw, k, stride, pad, dil));
    }
    let mut failures = Vec::new();
    for (case, &(b, c, co, hw, k, stride, pad, dil)) in shapes.iter().enumerate() {
        let g = Windows::new(&hw, &k, &stride, &pad, &dil).unwrap();
        let [_, oh, ow] = g.output;
        let (h, w) = (hw[0], hw[1]);
        let x = values(b * c * h * w, case as u64 * 3 + 1);
        let wt = values(co * c * k[0] * k[1], case as u64 * 3 + 2);
        let bias = values(co, case as u64 * 3 + 3);
        let want = lowp::conv_reference(&x, &wt, b, c, co, &g);
        let n = oh * ow;
        // each output's sum of magnitudes, for the bound
        let taps = k[0] * k[1];
        let mags: Vec<f64> = {
            let xa: Vec<f32> = x.iter().map(|v| v.abs()).collect();
            let wa: Vec<f32> = wt.iter().map(|v| v.abs()).collect();
            lowp::conv_reference(&xa, &wa, b, c, co, &g)
                .iter()
                .map(|v| *v as f64)
                .collect()
        };
        let weight = lowp::conv_weight(&wt, co, c, taps);
        // the same input channels-last
        let mut xl = vec![0f32; x.len()];
        for i in 0..b {
            for ci in 0..c {
                for p in 0..h * w {
                    xl[(i * h * w + p) * c + ci] = x[(i * c + ci) * h * w + p];
                }
            }
        }
        for &kernel in &kernels {
            for variant in 0..3 {
                let act = if variant == 1 {
                    let s = lowp::Strides {
                        image: c * h * w,
                        channel: 1,
                        row: w * c,
                        col: c,
                    };
                    lowp::act16(&xl, b, c, &g, s)
                } else {
                    let s = lowp::Strides {
                        image: c * h * w,
                        channel: h * w,
                        row: w,
                        col: 1,
                    };
                    lowp::act16(&x, b, c, &g, s)
                };
                // variant 0: fresh, no bias; 1: channels-last input, a
                // bias; 2: added to what the output holds
                let base = values(b * co * n, case as u64 + 4242);
                let mut out: Vec<std::mem::MaybeUninit<f32>> = match variant {
                    2 => base
                        .iter()
                        .map(|v| std::mem::MaybeUninit::new(*v))
                        .collect(),
                    _ => vec![std::mem::MaybeUninit::new(f32::NAN); b * co * n + 5],
                };
                let covered = std::sync::atomic::AtomicUsize::new(0);
                let done = |r: std::ops::Range<usize>, c: std::ops::Range<usize>, _: *mut f32| {
                    covered.fetch_add(r.len() * c.len(), std::sync::atomic::Ordering::Relaxed);
                };
                let bv = (variant == 1).then_some(&bias[..]);
                lowp::conv(
                    &weight,
                    &act,
                    &mut out,
                    variant == 2,
                    bv,
                    2,
                    kernel,
                    Some(&done),
                );
                let got: Vec<f32> = out.iter().map(|v| unsafe { v.assume_init() }).collect();
                let what = format!(
                    "{} b {b} c {c} -> {co} over {hw:?} kernel {k:?} stride {stride:?} pad {pad:?} dilation {dil:?} variant {variant}",
                    kernel.name()
                );
                if covered.into_inner() != b * co * n {
                    failures.push(format!(
                        "{what}: the blocks reported do not cover the output once"
                    ));
                }
                for e in 0..b * co * n {
                    let o = e / n % co;
                    let add = match variant {
                        1 => bias[o] as f64,
                        2 => base[e] as f64,
                        _ => 0.0,
                    };
                    let wv = want[e] as f64 + add;
                    let gv = got[e] as f64;
                    let bound =
                        (c * taps + 2) as f64 * 2f64.powi(-24) * (mags[e] * 1.01 + wv.abs())
                            + 1e-30;
                    if (gv - wv).abs() > bound || gv.is_nan() {
                        failures.push(format!(
                            "{what}: output {e} is {gv}, the reference {wv} (bound {bound:e})"
                        ));
                        break;
                    }
                }
                if variant != 2 && got[b * co * n..].iter().any(|v| !v.is_nan()) {
                    failures.push(format!("{what}: wrote past the output"));
                }
            }
        }
    }
    finish(
        "bf16 convolutions",
        failures,
        shapes.len() * kernels.len() * 3,
    );
}
