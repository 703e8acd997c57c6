//! torch's core FFTs on real pairs: one `pt2kit.dft` per transformed dim
//! (ONNX `DFT`'s semantics: the inverse divides by the length), torch's
//! `normalization` code applied by one multiplication.
//!
//! - `_fft_r2c(x, dim, normalization, onesided)`: the real signal (a
//!   trailing dim of 1) transformed over the last of `dim` (one-sided when
//!   asked), then the complex result over the others;
//! - `_fft_c2c(x, dim, normalization, forward)`: over each dim;
//! - `_fft_c2r(x, dim, normalization, last_dim_size)`: inverse over all
//!   but the last of `dim`; over the last, the one-sided half extended to
//!   the full length by Hermitian symmetry (`X[n - k] = conj(X[k])`), an
//!   inverse transform, its real part: what pocketfft's c2r computes (it
//!   too ignores the imaginary parts of the bins a real signal has real).

use super::{ComplexNode, Handler};
use crate::decompose::args::NodeArgs;
use crate::ir::op::aten;
use crate::ir::{Argument, Sym, ValueId};
use crate::{Error, Result};

/// `pt2kit.dft` of pair (or real signal) `x` over `axis`.
fn dft(
    cx: &mut ComplexNode,
    x: ValueId,
    axis: usize,
    inverse: bool,
    onesided: bool,
) -> Result<ValueId> {
    let m = cx.em.meta(x)?.clone();
    let mut sizes = m.sizes.clone();
    if onesided {
        let n = cx.em.static_dim(x, axis, "a one-sided FFT")?;
        sizes[axis] = Sym::Int(n / 2 + 1);
    }
    if let Some(last) = sizes.last_mut() {
        *last = Sym::Int(2);
    }
    let meta = cx.meta(x, m.dtype, sizes)?;
    cx.op(
        "pt2kit.dft.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("axis", Argument::Int(axis as i64)),
            ("inverse", Argument::Bool(inverse)),
            ("onesided", Argument::Bool(onesided)),
        ],
        meta,
    )
}

/// torch's `normalization` code as a factor for a signal of `n` points:
/// 0 none, 1 by `1 / sqrt(n)`, 2 by `1 / n`.
fn norm_factor(code: i64, n: i64) -> Result<f64> {
    match code {
        0 => Ok(1.0),
        1 => Ok(1.0 / (n as f64).sqrt()),
        2 => Ok(1.0 / n as f64),
        other => Err(Error::bad_input(format!(
            "normalization {other} is none of 0 (none), 1 (by root n), 2 (by n)"
        ))),
    }
}

/// `x * s`, or `x` when `s` is 1.
fn scaled(cx: &mut ComplexNode, x: ValueId, s: f64) -> Result<ValueId> {
    if s == 1.0 {
        return Ok(x);
    }
    cx.scalar(aten::MUL_TENSOR, x, s)
}

/// The number of points of the signal: the product of `sizes` over `dims`.
fn points(cx: &ComplexNode, x: ValueId, dims: &[usize], what: &str) -> Result<i64> {
    dims.iter().map(|&d| cx.em.static_dim(x, d, what)).product()
}

fn r2c(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let real = cx.out_meta(0)?.dtype.real_part();
    let x = cx.cast(x, real)?;
    let r = cx.em.rank(x)?;
    let dims = a
        .ints("dim")?
        .iter()
        .map(|&d| crate::ir::normalize_dim(d, r))
        .collect::<Result<Vec<usize>>>()?;
    let Some((&last, rest)) = dims.split_last() else {
        return Err(Error::bad_input("an FFT over no dims"));
    };
    let n = points(cx, x, &dims, "an FFT")?;
    let signal = cx.unsqueeze(x, r)?;
    let mut p = dft(cx, signal, last, false, a.bool("onesided")?)?;
    for &d in rest {
        p = dft(cx, p, d, false, false)?;
    }
    Ok(vec![scaled(
        cx,
        p,
        norm_factor(a.int("normalization")?, n)?,
    )?])
}

fn c2c(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let real = cx.out_meta(0)?.dtype.real_part();
    let mut p = cx.as_pair(x, real)?;
    let dims = cx.dims(x, &a.ints("dim")?)?;
    let forward = a.bool("forward")?;
    let n = points(cx, p, &dims, "an FFT")?;
    for &d in &dims {
        p = dft(cx, p, d, !forward, false)?;
    }
    // the inverse DFT divides by n already
    let s = norm_factor(a.int("normalization")?, n)? * if forward { 1.0 } else { n as f64 };
    Ok(vec![scaled(cx, p, s)?])
}

fn c2r(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let out = a.out(0)?;
    let real = cx.out_meta(0)?.dtype;
    let mut p = cx.as_pair(x, real)?;
    let dims = cx.dims(x, &a.ints("dim")?)?;
    let Some((&last, rest)) = dims.split_last() else {
        return Err(Error::bad_input("an FFT over no dims"));
    };
    let len = a.int("last_dim_size")?;
    for &d in rest {
        p = dft(cx, p, d, true, false)?;
    }
    // the half torch reads: the first len / 2 + 1 bins, zeros past the end
    let half = len / 2 + 1;
    let have = cx.em.static_dim(p, last, "an inverse real FFT")?;
    let m = cx.em.meta(p)?.clone();
    let rank = m.sizes.len();
    let mut sizes = m.sizes.clone();
    sizes[last] = Sym::Int(half);
    let head = if have > half {
        let meta = cx.meta(p, real, sizes.clone())?;
        cx.op(
            aten::SLICE_TENSOR,
            vec![
                ("self", Argument::Tensor(p)),
                ("dim", Argument::Int(last as i64)),
                ("start", Argument::Int(0)),
                ("end", Argument::Int(half)),
            ],
            meta,
        )?
    } else if have < half {
        let mut pad = vec![0i64; 2 * (rank - last)];
        let at = pad.len() - 1;
        pad[at] = half - have;
        let meta = cx.meta(p, real, sizes.clone())?;
        cx.op(
            aten::CONSTANT_PAD_ND,
            vec![
                ("self", Argument::Tensor(p)),
                ("pad", Argument::Ints(pad)),
                ("value", Argument::Float(0.0)),
            ],
            meta,
        )?
    } else {
        p
    };
    // the other half: X[len - k] = conj(X[k]), k = len - half .. 1
    let tail = len - half;
    let full = if tail > 0 {
        let mut ts = sizes.clone();
        ts[last] = Sym::Int(tail);
        let meta = cx.meta(head, real, ts.clone())?;
        let t = cx.op(
            aten::SLICE_TENSOR,
            vec![
                ("self", Argument::Tensor(head)),
                ("dim", Argument::Int(last as i64)),
                ("start", Argument::Int(1)),
                ("end", Argument::Int(1 + tail)),
            ],
            meta.clone(),
        )?;
        let t = cx.op(
            aten::FLIP,
            vec![
                ("self", Argument::Tensor(t)),
                ("dims", Argument::Ints(vec![last as i64])),
            ],
            meta.clone(),
        )?;
        let (re, im) = cx.parts(t)?;
        let im = cx.unary(aten::NEG, im, real)?;
        let t = cx.join(re, im, meta)?;
        let mut fs = sizes.clone();
        fs[last] = Sym::Int(len);
        let meta = cx.meta(head, real, fs)?;
        cx.op(
            aten::CAT,
            vec![
                ("tensors", Argument::Tensors(vec![head, t])),
                ("dim", Argument::Int(last as i64)),
            ],
            meta,
        )?
    } else {
        head
    };
    let y = dft(cx, full, last, true, false)?;
    // the output's points: len over the last dim, the others as they are
    let mut n = len;
    for &d in rest {
        n *= cx.em.static_dim(y, d, "an FFT")?;
    }
    let s = norm_factor(a.int("normalization")?, n)? * n as f64;
    let pair_dim = rank - 1;
    let args = |y| {
        vec![
            ("self", Argument::Tensor(y)),
            ("dim", Argument::Int(pair_dim as i64)),
            ("index", Argument::Int(0)),
        ]
    };
    if s == 1.0 {
        cx.em.op_into(aten::SELECT_INT, args(y), out)?;
    } else {
        let mut rs = cx.em.sizes(y)?;
        rs.pop();
        let meta = cx.meta(y, real, rs)?;
        let re = cx.op(aten::SELECT_INT, args(y), meta)?;
        cx.em.op_into(
            aten::MUL_TENSOR,
            vec![
                ("self", Argument::Tensor(re)),
                ("other", Argument::Float(s)),
            ],
            out,
        )?;
    }
    Ok(vec![out])
}

pub(super) const ROWS: &[(&str, Handler)] = &[
    (aten::_FFT_R2C, r2c),
    (aten::_FFT_C2C, c2c),
    (aten::_FFT_C2R, c2r),
];
