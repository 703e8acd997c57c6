//! torch's spectral ops as torch decomposes them (`torch/_refs/fft.py`,
//! `stft` and `istft` in `torch/_refs/__init__.py` and ATen's
//! `SpectralOps.cpp`): the `fft_*` family into torch's core FFTs
//! (`_fft_r2c`, `_fft_c2r`, `_fft_c2c`) after the input is promoted and
//! cut or zero-padded to the asked length; `stft` into frames (`unfold`),
//! the window and one FFT; `istft` into an inverse FFT of the frames, the
//! window, and an overlap-add (a few padded adds, one per slice of a frame
//! that hops share) divided by the window's own overlap-add. Complex values
//! are kept, as in torch's core opset; `decompose::complex` lowers them to
//! real pairs for the back ends. The rows are in `linalg.rs`, the family's
//! file.

use super::*;
use crate::ir::op::aten;

/// torch's `normalization` code (0 none, 1 by root n, 2 by n) of a `norm`
/// argument, for a forward or an inverse transform.
fn norm_mode(a: &NodeArgs, forward: bool) -> Result<i64> {
    Ok(match (a.opt_string("norm")?.as_deref(), forward) {
        (None | Some("backward"), true) | (Some("forward"), false) => 0,
        (Some("ortho"), _) => 1,
        (None | Some("backward"), false) | (Some("forward"), true) => 2,
        (Some(other), _) => {
            return Err(Error::bad_input(format!(
                "norm {other:?} is none of backward, ortho, forward"
            )))
        }
    })
}

/// The complex dtype whose parts are `d`.
fn complex_of(d: Dtype) -> Dtype {
    match d {
        Dtype::Float64 => Dtype::Complex128,
        Dtype::Float16 => Dtype::Complex32,
        _ => Dtype::Complex64,
    }
}

/// torch's FFT promotion (`_maybe_promote_tensor_fft`): integers to
/// float32; float16 and bfloat16 refused (torch has no CPU FFT for them);
/// with `complex`, the complex dtype of those parts.
fn promote(em: &mut Emitter, x: ValueId, complex: bool) -> Result<ValueId> {
    let d = em.dtype(x)?;
    let real = match d {
        d if d.is_complex() => d.real_part(),
        Dtype::Float64 => Dtype::Float64,
        Dtype::Float16 | Dtype::BFloat16 => {
            return Err(Error::unsupported(format!(
                "an FFT of {} values (torch has none on the CPU)",
                d.torch_name()
            )))
        }
        _ => Dtype::Float32,
    };
    let want = if complex || d.is_complex() {
        complex_of(real)
    } else {
        real
    };
    if want == d {
        Ok(x)
    } else {
        to_copy(em, x, want, None)
    }
}

/// `_resize_fft_input`: each of `dims` cut to its size in `sizes` (from
/// the start) or zero-padded at its end.
fn resize(em: &mut Emitter, x: ValueId, dims: &[usize], sizes: &[i64]) -> Result<ValueId> {
    let rank = em.rank(x)?;
    let mut pad = vec![0i64; 2 * rank];
    let mut x = x;
    for (&d, &n) in dims.iter().zip(sizes) {
        let have = em.static_dim(x, d, "an FFT of a given length")?;
        if have > n {
            x = slice(em, x, d, 0, n)?;
        } else if have < n {
            pad[2 * (rank - d) - 1] = n - have;
        }
    }
    if pad.iter().all(|&p| p == 0) {
        return Ok(x);
    }
    constant_pad(em, x, &pad)
}

/// `constant_pad_nd(x, pad, 0)` (torch's order: the last dim's two ends
/// first).
fn constant_pad(em: &mut Emitter, x: ValueId, pad: &[i64]) -> Result<ValueId> {
    constant_pad_to(em, x, pad, None)
}

fn constant_pad_to(
    em: &mut Emitter,
    x: ValueId,
    pad: &[i64],
    out: Option<ValueId>,
) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let rank = m.sizes.len();
    let mut sizes = m.sizes.clone();
    for (i, pair) in pad.chunks(2).enumerate() {
        let d = rank - 1 - i;
        sizes[d] = sym_add(&sizes[d], &Sym::Int(pair[0] + pair[1]));
    }
    let meta = em.meta_like(x, m.dtype, sizes)?;
    em.op_to(
        aten::CONSTANT_PAD_ND,
        vec![
            ("self", Argument::Tensor(x)),
            ("pad", Argument::Ints(pad.to_vec())),
            ("value", Argument::Float(0.0)),
        ],
        out,
        meta,
    )
}

/// `_fft_r2c(x, dims, norm, onesided)`.
fn r2c(
    em: &mut Emitter,
    x: ValueId,
    dims: &[usize],
    norm: i64,
    onesided: bool,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let mut sizes = em.sizes(x)?;
    if onesided {
        let last = *dims
            .last()
            .ok_or_else(|| Error::bad_input("an FFT over no dims"))?;
        let n = em.static_dim(x, last, "a one-sided FFT")?;
        sizes[last] = Sym::Int(n / 2 + 1);
    }
    let meta = em.meta_like(x, complex_of(em.dtype(x)?), sizes)?;
    em.op_to(
        aten::_FFT_R2C,
        vec![
            ("self", Argument::Tensor(x)),
            (
                "dim",
                ints_arg(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>()),
            ),
            ("normalization", Argument::Int(norm)),
            ("onesided", Argument::Bool(onesided)),
        ],
        out,
        meta,
    )
}

/// `_fft_c2c(x, dims, norm, forward)`.
fn c2c(
    em: &mut Emitter,
    x: ValueId,
    dims: &[usize],
    norm: i64,
    forward: bool,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let meta = em.meta_like(x, m.dtype, m.sizes)?;
    em.op_to(
        aten::_FFT_C2C,
        vec![
            ("self", Argument::Tensor(x)),
            (
                "dim",
                ints_arg(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>()),
            ),
            ("normalization", Argument::Int(norm)),
            ("forward", Argument::Bool(forward)),
        ],
        out,
        meta,
    )
}

/// `_fft_c2r(x, dims, norm, last_dim_size)`.
fn c2r(
    em: &mut Emitter,
    x: ValueId,
    dims: &[usize],
    norm: i64,
    last_dim_size: i64,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let mut sizes = em.sizes(x)?;
    let last = *dims
        .last()
        .ok_or_else(|| Error::bad_input("an FFT over no dims"))?;
    sizes[last] = Sym::Int(last_dim_size);
    let meta = em.meta_like(x, em.dtype(x)?.real_part(), sizes)?;
    em.op_to(
        aten::_FFT_C2R,
        vec![
            ("self", Argument::Tensor(x)),
            (
                "dim",
                ints_arg(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>()),
            ),
            ("normalization", Argument::Int(norm)),
            ("last_dim_size", Argument::Int(last_dim_size)),
        ],
        out,
        meta,
    )
}

/// `_conj(x)`.
fn conj(em: &mut Emitter, x: ValueId, out: Option<ValueId>) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let meta = em.meta_like(x, m.dtype, m.sizes)?;
    em.op_to(aten::_CONJ, vec![("self", Argument::Tensor(x))], out, meta)
}

/// The FFT's dim and, when `n` is given, the input cut or padded to it.
fn one_dim(
    em: &mut Emitter,
    a: &NodeArgs,
    x: ValueId,
    n_for: impl Fn(i64) -> i64,
) -> Result<(ValueId, usize)> {
    let d = normalize_dim(a.opt_int("dim")?.unwrap_or(-1), em.rank(x)?)?;
    let x = match a.opt_int("n")? {
        Some(n) => resize(em, x, &[d], &[n_for(n)])?,
        None => x,
    };
    Ok((x, d))
}

/// `fft_fft`, `fft_ifft`: complex input by `_fft_c2c`; real input by a
/// two-sided `_fft_r2c` (conjugated for the inverse, as torch's refs do).
pub(super) fn fft(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let forward = a.0.target.name == "fft_fft";
    let out = a.out(0)?;
    let x = a.tensor("self")?;
    let norm = norm_mode(a, forward)?;
    if em.dtype(x)?.is_complex() {
        let (x, d) = one_dim(em, a, x, |n| n)?;
        return Ok(vec![c2c(em, x, &[d], norm, forward, Some(out))?]);
    }
    let x = promote(em, x, false)?;
    let (x, d) = one_dim(em, a, x, |n| n)?;
    if forward {
        return Ok(vec![r2c(em, x, &[d], norm, false, Some(out))?]);
    }
    let r = r2c(em, x, &[d], norm, false, None)?;
    Ok(vec![conj(em, r, Some(out))?])
}

/// `fft_rfft`, `fft_ihfft`: a one-sided `_fft_r2c` (conjugated for the
/// inverse).
pub(super) fn rfft(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let forward = a.0.target.name == "fft_rfft";
    let out = a.out(0)?;
    let x = a.tensor("self")?;
    if em.dtype(x)?.is_complex() {
        return Err(Error::bad_input(format!(
            "{} expects a real input tensor",
            a.0.target.name
        )));
    }
    let x = promote(em, x, false)?;
    let (x, d) = one_dim(em, a, x, |n| n)?;
    let norm = norm_mode(a, forward)?;
    if forward {
        return Ok(vec![r2c(em, x, &[d], norm, true, Some(out))?]);
    }
    let r = r2c(em, x, &[d], norm, true, None)?;
    Ok(vec![conj(em, r, Some(out))?])
}

/// `fft_irfft`, `fft_hfft`: `_fft_c2r` of the first `n / 2 + 1` bins
/// (conjugated first for `hfft`); `n` defaults to `2 * (bins - 1)`.
pub(super) fn irfft(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let forward = a.0.target.name == "fft_hfft";
    let out = a.out(0)?;
    let x = promote(em, a.tensor("self")?, true)?;
    let d = normalize_dim(a.opt_int("dim")?.unwrap_or(-1), em.rank(x)?)?;
    let last = match a.opt_int("n")? {
        Some(n) => n,
        None => 2 * (em.static_dim(x, d, "an inverse real FFT")? - 1),
    };
    if last < 1 {
        return Err(Error::bad_input(format!(
            "invalid number of data points ({last})"
        )));
    }
    let x = if a.opt_int("n")?.is_some() {
        resize(em, x, &[d], &[last / 2 + 1])?
    } else {
        x
    };
    let x = if forward { conj(em, x, None)? } else { x };
    Ok(vec![c2r(
        em,
        x,
        &[d],
        norm_mode(a, forward)?,
        last,
        Some(out),
    )?])
}

/// `_canonicalize_fft_shape_and_dim_args`: the dims transformed and the
/// signal's size along each.
fn shape_and_dims(em: &Emitter, a: &NodeArgs, x: ValueId) -> Result<(Vec<i64>, Vec<usize>)> {
    let rank = em.rank(x)?;
    let s = a.opt_ints("s")?;
    let dims: Vec<usize> = match (a.opt_ints("dim")?, &s) {
        (Some(d), _) => d
            .iter()
            .map(|&d| normalize_dim(d, rank))
            .collect::<Result<_>>()?,
        (None, Some(s)) => (rank - s.len()..rank).collect(),
        (None, None) => (0..rank).collect(),
    };
    let shape = match s {
        Some(s) => s
            .iter()
            .zip(&dims)
            .map(|(&n, &d)| {
                if n == -1 {
                    em.static_dim(x, d, "an FFT")
                } else {
                    Ok(n)
                }
            })
            .collect::<Result<_>>()?,
        None => dims
            .iter()
            .map(|&d| em.static_dim(x, d, "an FFT"))
            .collect::<Result<_>>()?,
    };
    Ok((shape, dims))
}

/// `fft_fftn`, `fft_fft2`, `fft_ifftn`, `fft_ifft2`: the input made
/// complex, resized, one `_fft_c2c`.
pub(super) fn fftn(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let forward = !a.0.target.name.starts_with("fft_i");
    let out = a.out(0)?;
    let x = a.tensor("self")?;
    let (shape, dims) = shape_and_dims(em, a, x)?;
    let x = promote(em, x, true)?;
    let x = resize(em, x, &dims, &shape)?;
    Ok(vec![c2c(
        em,
        x,
        &dims,
        norm_mode(a, forward)?,
        forward,
        Some(out),
    )?])
}

/// `fft_rfftn`, `fft_rfft2`: one one-sided `_fft_r2c` over the dims.
pub(super) fn rfftn(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let x = a.tensor("self")?;
    if em.dtype(x)?.is_complex() {
        return Err(Error::bad_input("rfftn expects a real-valued input tensor"));
    }
    let (shape, dims) = shape_and_dims(em, a, x)?;
    let x = promote(em, x, false)?;
    let x = resize(em, x, &dims, &shape)?;
    Ok(vec![r2c(
        em,
        x,
        &dims,
        norm_mode(a, true)?,
        true,
        Some(out),
    )?])
}

/// `fft_irfftn`, `fft_irfft2`: one `_fft_c2r`, the last dim's output
/// length from `s` (else `2 * (bins - 1)`).
pub(super) fn irfftn(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let x = a.tensor("self")?;
    let (mut shape, dims) = shape_and_dims(em, a, x)?;
    let Some(&last_dim) = dims.last() else {
        return Err(Error::bad_input("irfftn must transform at least one axis"));
    };
    let last = match a.opt_ints("s")? {
        Some(s) if s.last() != Some(&-1) => *shape.last().unwrap_or(&1),
        _ => 2 * (em.static_dim(x, last_dim, "an inverse real FFT")? - 1),
    };
    if let Some(l) = shape.last_mut() {
        *l = last / 2 + 1;
    }
    let x = promote(em, x, true)?;
    let x = resize(em, x, &dims, &shape)?;
    Ok(vec![c2r(
        em,
        x,
        &dims,
        norm_mode(a, false)?,
        last,
        Some(out),
    )?])
}

/// `fft_fftshift`, `fft_ifftshift`: a `roll` by half of each dim (every
/// dim when none are given), back for the inverse.
pub(super) fn fftshift(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let rank = em.rank(x)?;
    let dims: Vec<usize> = match a.opt_ints("dim")? {
        Some(d) => d
            .iter()
            .map(|&d| normalize_dim(d, rank))
            .collect::<Result<_>>()?,
        None => (0..rank).collect(),
    };
    let inverse = a.0.target.name == "fft_ifftshift";
    let shifts = dims
        .iter()
        .map(|&d| {
            let n = em.static_dim(x, d, "fftshift")?;
            Ok(if inverse { -(n / 2) } else { n / 2 })
        })
        .collect::<Result<Vec<i64>>>()?;
    let m = em.meta(x)?.clone();
    let meta = em.meta_like(x, m.dtype, m.sizes)?;
    Ok(vec![em.op_to(
        aten::ROLL,
        vec![
            ("self", Argument::Tensor(x)),
            ("shifts", ints_arg(&shifts)),
            (
                "dims",
                ints_arg(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>()),
            ),
        ],
        Some(a.out(0)?),
        meta,
    )?])
}

/// A window of `win` points centred in `n_fft` (zeros either side), or
/// ones when none is given.
fn padded_window(
    em: &mut Emitter,
    window: Option<ValueId>,
    like: ValueId,
    win: i64,
    n_fft: i64,
    dtype: Dtype,
) -> Result<Option<ValueId>> {
    let w = match window {
        Some(w) => w,
        None if win < n_fft => {
            let meta = em.meta_like(like, dtype, vec![Sym::Int(win)])?;
            em.op(
                aten::FULL,
                vec![
                    ("size", Argument::SymInts(vec![SymRef::Int(win)])),
                    ("fill_value", Argument::Float(1.0)),
                    ("dtype", Argument::ScalarType(dtype)),
                ],
                meta,
            )?
        }
        None => return Ok(None),
    };
    if win == n_fft {
        return Ok(Some(w));
    }
    let left = (n_fft - win) / 2;
    Ok(Some(constant_pad(em, w, &[left, n_fft - win - left])?))
}

/// `stft` (`.default`: the input already centred by torch's Python side;
/// `.center`: centred here): frames of `n_fft` every `hop_length`, times
/// the window, one FFT each, frequencies before frames.
pub(super) fn stft(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let mut x = a.tensor("self")?;
    let n_fft = a.int("n_fft")?;
    let hop = a.opt_int("hop_length")?.unwrap_or(n_fft / 4);
    let win = a.opt_int("win_length")?.unwrap_or(n_fft);
    let rank = em.rank(x)?;
    if !(1..=2).contains(&rank) {
        return Err(Error::bad_input("stft expected a 1D or 2D tensor"));
    }
    if a.has("align_to_window") && a.bool("align_to_window")? {
        return Err(Error::unsupported("stft with align_to_window"));
    }
    if rank == 1 {
        x = unsqueeze(em, x, 0)?;
    }
    let center = a.has("center") && a.bool("center")?;
    if center {
        let mode = a
            .opt_string("pad_mode")?
            .unwrap_or_else(|| "reflect".into());
        let s = em.static_sizes(x, "stft")?;
        let x3 = view(
            em,
            x,
            &[SymRef::Int(1), SymRef::Int(s[0]), SymRef::Int(s[1])],
            None,
        )?;
        let p = n_fft / 2;
        let meta = em.meta_like(
            x3,
            em.dtype(x3)?,
            vec![Sym::Int(1), Sym::Int(s[0]), Sym::Int(s[1] + 2 * p)],
        )?;
        let padded = em.op(
            aten::PAD,
            vec![
                ("self", Argument::Tensor(x3)),
                (
                    "pad",
                    Argument::SymInts(vec![SymRef::Int(p), SymRef::Int(p)]),
                ),
                ("mode", Argument::String(mode)),
            ],
            meta,
        )?;
        x = view(
            em,
            padded,
            &[SymRef::Int(s[0]), SymRef::Int(s[1] + 2 * p)],
            None,
        )?;
    }
    let length = em.static_dim(x, 1, "stft")?;
    if !(0 < n_fft && n_fft <= length && hop > 0 && 0 < win && win <= n_fft) {
        return Err(Error::bad_input(format!(
            "stft: n_fft {n_fft}, hop_length {hop}, win_length {win} over a signal of {length}"
        )));
    }
    let dtype = em.dtype(x)?;
    let window = padded_window(
        em,
        a.opt_tensor("window")?,
        x,
        win,
        n_fft,
        dtype.real_part(),
    )?;
    let batch = em.static_dim(x, 0, "stft")?;
    let frames = (length - n_fft) / hop + 1;
    let meta = em.meta_like(
        x,
        dtype,
        vec![Sym::Int(batch), Sym::Int(frames), Sym::Int(n_fft)],
    )?;
    let mut f = em.op(
        aten::UNFOLD,
        vec![
            ("self", Argument::Tensor(x)),
            ("dimension", Argument::Int(1)),
            ("size", Argument::Int(n_fft)),
            ("step", Argument::Int(hop)),
        ],
        meta,
    )?;
    if let Some(w) = window {
        let dt = if em.dtype(w)?.is_complex() {
            em.dtype(w)?
        } else {
            dtype
        };
        let sizes = em.sizes(f)?;
        let meta = em.meta_like(f, dt, sizes)?;
        f = em.op(
            aten::MUL_TENSOR,
            vec![
                ("self", Argument::Tensor(f)),
                ("other", Argument::Tensor(w)),
            ],
            meta,
        )?;
    }
    let complex = em.dtype(f)?.is_complex();
    let onesided = match a.0.arg("onesided") {
        Some(Argument::Bool(b)) => *b,
        _ => !complex,
    };
    if onesided && complex {
        return Err(Error::bad_input(
            "stft: a one-sided output of a complex input or window",
        ));
    }
    let norm = i64::from(a.has("normalized") && a.bool("normalized")?);
    let spec = if complex {
        c2c(em, f, &[2], norm, true, None)?
    } else {
        let f = promote(em, f, false)?;
        r2c(em, f, &[2], norm, onesided, None)?
    };
    let return_complex = match a.0.arg("return_complex") {
        Some(Argument::Bool(b)) => *b,
        _ => complex,
    };
    let t = permute(
        em,
        spec,
        &[0, 2, 1],
        (rank == 2 && return_complex).then_some(out),
    )?;
    let t = if rank == 1 {
        squeeze_dims(em, t, &[0], return_complex.then_some(out))?
    } else {
        t
    };
    if return_complex {
        return Ok(vec![t]);
    }
    em.op_into(aten::VIEW_AS_REAL, vec![("self", Argument::Tensor(t))], out)?;
    Ok(vec![out])
}

/// Frames `[B, T, N]` added where they overlap, `hop` apart: `[B, N + hop
/// * (T - 1)]`. Each frame is `N / g` slices of `g = gcd(N, hop)` points;
/// slice `k` of frame `t` lands on slice `t * hop / g + k` of the output:
/// one padded add per `k`.
fn overlap_add(em: &mut Emitter, frames: ValueId, hop: i64) -> Result<ValueId> {
    let s = em.static_sizes(frames, "istft's overlap-add")?;
    let (b, t, n) = (s[0], s[1], s[2]);
    let gcd = {
        let (mut p, mut q) = (n, hop);
        while q != 0 {
            (p, q) = (q, p % q);
        }
        p
    };
    let (step, per_frame) = (hop / gcd, n / gcd);
    let chunks = per_frame + step * (t - 1);
    let r = |v: &[i64]| v.iter().map(|&i| SymRef::Int(i)).collect::<Vec<_>>();
    let split = view(em, frames, &r(&[b, t, per_frame, gcd]), None)?;
    let mut acc: Option<ValueId> = None;
    for k in 0..per_frame {
        let m = em.meta(split)?.clone();
        let meta = em.meta_like(
            split,
            m.dtype,
            vec![Sym::Int(b), Sym::Int(t), Sym::Int(gcd)],
        )?;
        let mut piece = em.op(
            aten::SELECT_INT,
            vec![
                ("self", Argument::Tensor(split)),
                ("dim", Argument::Int(2)),
                ("index", Argument::Int(k)),
            ],
            meta,
        )?;
        if step > 1 {
            // frame t's slice at t * step: the frames spread `step` apart
            let u = unsqueeze(em, piece, 2)?;
            let u = constant_pad(em, u, &[0, 0, 0, step - 1])?;
            let v = view(em, u, &r(&[b, t * step, gcd]), None)?;
            piece = slice(em, v, 1, 0, (t - 1) * step + 1)?;
        }
        let placed = constant_pad(em, piece, &[0, 0, k, per_frame - 1 - k])?;
        acc = Some(match acc {
            None => placed,
            Some(a) => {
                let dt = em.dtype(a)?;
                binary(em, aten::ADD_TENSOR, a, placed, dt, None)?
            }
        });
    }
    let acc = acc.ok_or_else(|| Error::bad_input("istft of frames of no points"))?;
    view(em, acc, &r(&[b, chunks * gcd]), None)
}

/// `istft`: the inverse FFT of each frame, times the window, overlap-added
/// and divided by the window's squares overlap-added; centring cut, the
/// asked length cut or zero-padded. Where that divisor vanishes torch
/// refuses ("window overlap add min"); so does the lowered graph, by an
/// `_assert_async` on it.
pub(super) fn istft(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let mut x = a.tensor("self")?;
    if !em.dtype(x)?.is_complex() {
        return Err(Error::bad_input(
            "istft requires a complex-valued input tensor",
        ));
    }
    let n_fft = a.int("n_fft")?;
    let hop = a.opt_int("hop_length")?.unwrap_or(n_fft / 4);
    let win = a.opt_int("win_length")?.unwrap_or(n_fft);
    let rank = em.rank(x)?;
    if !(2..=3).contains(&rank) {
        return Err(Error::bad_input("istft expected a 2D or 3D tensor"));
    }
    if rank == 2 {
        x = unsqueeze(em, x, 0)?;
    }
    let s = em.static_sizes(x, "istft")?;
    let (fft_size, n_frames) = (s[1], s[2]);
    let expected = n_fft + hop * (n_frames - 1);
    let onesided = match a.0.arg("onesided") {
        Some(Argument::Bool(b)) => *b,
        _ => fft_size != n_fft,
    };
    if !(0 < hop && hop <= win && 0 < win && win <= n_fft) {
        return Err(Error::bad_input(format!(
            "istft: hop_length {hop}, win_length {win}, n_fft {n_fft}"
        )));
    }
    let real = em.dtype(x)?.real_part();
    let window = padded_window(em, a.opt_tensor("window")?, x, win, n_fft, real)?;
    let window = match window {
        Some(w) => w,
        None => {
            let meta = em.meta_like(x, real, vec![Sym::Int(n_fft)])?;
            em.op(
                aten::FULL,
                vec![
                    ("size", Argument::SymInts(vec![SymRef::Int(n_fft)])),
                    ("fill_value", Argument::Float(1.0)),
                    ("dtype", Argument::ScalarType(real)),
                ],
                meta,
            )?
        }
    };
    let x = permute(em, x, &[0, 2, 1], None)?;
    let norm_by_root = a.has("normalized") && a.bool("normalized")?;
    let norm = if norm_by_root { 1 } else { 2 };
    let return_complex = a.has("return_complex") && a.bool("return_complex")?;
    let frames = if return_complex {
        if onesided {
            return Err(Error::bad_input(
                "istft: a one-sided input cannot give a complex output",
            ));
        }
        c2c(em, x, &[2], norm, false, None)?
    } else {
        let x = if onesided {
            x
        } else {
            slice(em, x, 2, 0, n_fft / 2 + 1)?
        };
        let x = resize(em, x, &[2], &[n_fft / 2 + 1])?;
        c2r(em, x, &[2], norm, n_fft, None)?
    };
    let dt = em.dtype(frames)?;
    let w3 = view(
        em,
        window,
        &[SymRef::Int(1), SymRef::Int(1), SymRef::Int(n_fft)],
        None,
    )?;
    let weighted = binary(em, aten::MUL_TENSOR, frames, w3, dt, None)?;
    let y = overlap_add(em, weighted, hop)?;
    let w2 = binary(em, aten::MUL_TENSOR, w3, w3, real, None)?;
    let w2 = expand(
        em,
        w2,
        &[SymRef::Int(1), SymRef::Int(n_frames), SymRef::Int(n_fft)],
    )?;
    let env = overlap_add(em, w2, hop)?;
    let start = if a.has("center") && a.bool("center")? {
        n_fft / 2
    } else {
        0
    };
    let end = match a.opt_int("length")? {
        Some(l) => start + l,
        None if start > 0 => expected - n_fft / 2,
        None => expected,
    };
    let clamped = end.min(expected);
    let y = slice(em, y, 1, start, clamped)?;
    let env = slice(em, env, 1, start, clamped)?;
    // torch refuses where the envelope vanishes (NOLA)
    let abs = unary(em, aten::ABS, env)?;
    let meta = em.meta_like(abs, real, vec![])?;
    let lowest = em.op(
        aten::AMIN,
        vec![("self", Argument::Tensor(abs)), ("dim", ints_arg(&[0, 1]))],
        meta,
    )?;
    let ok = cmp(em, aten::GE_SCALAR, lowest, Argument::Float(1e-11))?;
    em.call(
        aten::_ASSERT_ASYNC_MSG,
        vec![
            ("self", Argument::Tensor(ok)),
            (
                "assert_msg",
                Argument::String(
                    "istft: window overlap add min below 1e-11 (the window and hop do not \
                     satisfy NOLA)"
                        .into(),
                ),
            ),
        ],
        vec![],
    )?;
    let dt = em.dtype(y)?;
    let pad = end > expected;
    let squeeze = rank == 2;
    let y = binary(
        em,
        aten::DIV_TENSOR,
        y,
        env,
        dt,
        (!pad && !squeeze).then_some(out),
    )?;
    let y = if squeeze {
        squeeze_dims(em, y, &[0], (!pad).then_some(out))?
    } else {
        y
    };
    if !pad {
        return Ok(vec![y]);
    }
    Ok(vec![constant_pad_to(
        em,
        y,
        &[0, end - expected],
        Some(out),
    )?])
}
