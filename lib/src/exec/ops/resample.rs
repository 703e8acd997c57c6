//! Resampling: upsampling, interpolation and grid sampling: the executor rows.

use crate::ir::op::aten;
use super::*;

/// What an upsampling node asks for: per spatial dim, the input size, the
/// output size and the scale the caller gave (`scale_factors`, or
/// `scales` / `scales_d` / `scales_h` / `scales_w`), in dim order.
struct Resize {
    input: Tensor,
    dims: Vec<(usize, usize, Option<f64>)>,
}

fn resize_args(ctx: &mut Ctx) -> Result<Resize> {
    let x = ctx.tensor(if ctx.node.arg("input").is_some() {
        "input"
    } else {
        "self"
    })?;
    let k = crate::schema::upsample_spatial_dims(&ctx.node.target.name);
    let name = ctx.node.target.name.clone();
    if x.rank() < k + 1 {
        return Err(Error::bad_input(format!(
            "{name} takes a tensor of rank {} or more, not {}",
            k + 1,
            x.rank()
        )));
    }
    let sizes_in = x.dims()[x.rank() - k..].to_vec();
    let scales: Vec<Option<f64>> = match ctx.node.arg("scale_factors") {
        Some(Argument::Floats(v)) if !v.is_empty() => {
            (0..k).map(|i| v.get(i).or(v.last()).copied()).collect()
        }
        _ => {
            crate::schema::upsample_scale_args(k)
                .iter()
                .map(|n| ctx.opt_float(n))
                .collect::<Result<_>>()?
        }
    };
    let given = if ctx.has("output_size") {
        ctx.ints("output_size")?
    } else {
        Vec::new()
    };
    let sizes_out: Vec<usize> = if !given.is_empty() {
        if given.len() != k || given.iter().any(|&n| n < 0) {
            return Err(Error::bad_input(format!(
                "{name}: output_size {given:?} for {k} spatial dims"
            )));
        }
        given.iter().map(|&n| n as usize).collect()
    } else {
        sizes_in
            .iter()
            .zip(&scales)
            .map(|(&n, s)| match s {
                Some(s) if *s > 0.0 => Ok((n as f64 * s).floor() as usize),
                _ => Err(unsupported("upsample without output_size or scale factors")),
            })
            .collect::<Result<_>>()?
    };
    if sizes_in.iter().zip(&sizes_out).any(|(&i, &o)| i == 0 && o > 0) {
        return Err(Error::bad_input(format!(
            "{name}: an empty input of sizes {sizes_in:?} cannot be upsampled to {sizes_out:?}"
        )));
    }
    Ok(Resize {
        input: x,
        dims: sizes_in
            .into_iter()
            .zip(sizes_out)
            .zip(scales)
            .map(|((i, o), s)| (i, o, s))
            .collect(),
    })
}

/// torch's `compute_scales_value`: 1 / the given scale, else in / out.
fn source_ratio(n_in: usize, n_out: usize, scale: Option<f64>) -> f64 {
    match scale {
        Some(s) if s > 0.0 => 1.0 / s,
        _ if n_out > 0 => n_in as f64 / n_out as f64,
        _ => 0.0,
    }
}

/// `upsample_nearest{1,2,3}d` and `_upsample_nearest_exact{1,2,3}d`: a
/// gather per spatial dim, source index floor(o * ratio) (nearest) or
/// floor((o + 0.5) * ratio) (nearest-exact), clamped to the input, as
/// torch's `nearest_idx`.
fn upsample_nearest(ctx: &mut Ctx) -> OpResult {
    let exact = ctx.node.target.name.contains("exact");
    let r = resize_args(ctx)?;
    let rank = r.input.rank();
    let k = r.dims.len();
    let mut t = r.input.t.clone();
    for (i, &(n_in, n_out, scale)) in r.dims.iter().enumerate() {
        // in float32, as torch's nearest_idx (same size and 2x are exact)
        let ratio = source_ratio(n_in, n_out, scale) as f32;
        let ids: Vec<u32> = (0..n_out)
            .map(|o| {
                let src = if exact {
                    ((o as f32 + 0.5) * ratio).floor() as usize
                } else if n_out == n_in {
                    o
                } else if n_out == 2 * n_in {
                    o / 2
                } else {
                    (o as f32 * ratio).floor() as usize
                };
                src.min(n_in.saturating_sub(1)) as u32
            })
            .collect();
        let ids = CandleTensor::from_vec(ids, n_out, ctx.device())?;
        t = t.index_select(&ids, rank - k + i)?;
    }
    one(Tensor::new(t, r.input.dtype))
}

/// A linear or cubic resampling's arguments, the dtype it computes in
/// (float32 at least: torch's opmath) and its `align_corners`.
fn resample_setup(ctx: &mut Ctx) -> Result<(Resize, Dtype, bool)> {
    let align = ctx.bool("align_corners")?;
    let r = resize_args(ctx)?;
    if !r.input.dtype.is_floating() {
        return Err(Error::bad_input(format!(
            "{} takes a floating tensor, not {}",
            ctx.node.target.name, r.input.dtype
        )));
    }
    let compute = if r.input.dtype == Dtype::Float64 {
        Dtype::Float64
    } else {
        Dtype::Float32
    };
    Ok((r, compute, align))
}

/// The source position of output index `o` is `o * ratio` (aligned
/// corners) or `ratio * (o + 0.5) - 0.5`.
fn position_ratio(align: bool, n_in: usize, n_out: usize, scale: Option<f64>) -> f64 {
    match align {
        true if n_out > 1 => (n_in as f64 - 1.0) / (n_out as f64 - 1.0),
        true => 0.0,
        false => source_ratio(n_in, n_out, scale),
    }
}

/// `upsample_linear1d`, `upsample_bilinear2d`, `upsample_trilinear3d`
/// (`.vec` and `.default`): separable linear interpolation, one spatial dim
/// after another, with source positions as torch's CPU kernel computes them
/// (`area_pixel_compute_source_index`), in float32 at least (torch's
/// opmath).
fn upsample_linear(ctx: &mut Ctx) -> OpResult {
    let (r, compute, align) = resample_setup(ctx)?;
    let x = &r.input;
    let dev = ctx.device();
    let rank = x.rank();
    let k = r.dims.len();
    let mut t = x.cast(compute)?.t;
    for (i, &(n_in, n_out, scale)) in r.dims.iter().enumerate() {
        let d = rank - k + i;
        // (first source index, second, weight of the second) per output index
        let ratio = position_ratio(align, n_in, n_out, scale);
        let taps: Vec<(u32, u32, f64)> = (0..n_out)
            .map(|o| {
                let src = if align {
                    ratio * o as f64
                } else {
                    (ratio * (o as f64 + 0.5) - 0.5).max(0.0)
                };
                let last = n_in.saturating_sub(1);
                let i0 = (src.floor() as usize).min(last);
                let lambda = (src - i0 as f64).clamp(0.0, 1.0);
                let i1 = if i0 < last { i0 + 1 } else { i0 };
                (i0 as u32, i1 as u32, lambda)
            })
            .collect();
        let ids = |v: Vec<u32>| CandleTensor::from_vec(v, n_out, dev).map_err(Error::from);
        // weights shaped [n_out, 1, ..., 1] to broadcast over the dims after d
        let mut wshape = vec![n_out];
        wshape.extend(std::iter::repeat_n(1, rank - d - 1));
        let weights = |v: Vec<f64>| -> Result<CandleTensor> {
            Ok(from_f64(&v, &wshape, compute, dev)?.t)
        };
        let (i0, i1) = (
            ids(taps.iter().map(|p| p.0).collect())?,
            ids(taps.iter().map(|p| p.1).collect())?,
        );
        let w1 = weights(taps.iter().map(|p| p.2).collect())?;
        let w0 = weights(taps.iter().map(|p| 1.0 - p.2).collect())?;
        t = (|| -> candle_core::Result<CandleTensor> {
            t.index_select(&i0, d)?
                .broadcast_mul(&w0)?
                .add(&t.index_select(&i1, d)?.broadcast_mul(&w1)?)
        })()?;
    }
    one(Tensor::new(t, compute).cast(x.dtype)?)
}

/// torch's cubic convolution weights (`get_cubic_upsample_coefficients`,
/// A = -0.75) of the four taps around a source position `t` past a sample.
fn cubic_weights(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// `upsample_bicubic2d` (`.vec` and `.default`, no antialiasing): separable
/// cubic convolution, one spatial dim after the other, as torch's CPU
/// kernel: source position `scale * (o + 0.5) - 0.5` (not clamped), or
/// `o * (in - 1) / (out - 1)` with aligned corners; the scale is 1 / the
/// given scale factor, else in / out; four taps from `floor(position) - 1`,
/// each index clamped into the input; in float32 at least (torch's opmath).
fn upsample_bicubic(ctx: &mut Ctx) -> OpResult {
    let (r, compute, align) = resample_setup(ctx)?;
    let x = &r.input;
    let dev = ctx.device();
    let rank = x.rank();
    let k = r.dims.len();
    let mut t = x.cast(compute)?.t;
    for (i, &(n_in, n_out, scale)) in r.dims.iter().enumerate() {
        let d = rank - k + i;
        let ratio = position_ratio(align, n_in, n_out, scale);
        let last = n_in.saturating_sub(1) as i64;
        let mut ids: Vec<Vec<u32>> = (0..4).map(|_| Vec::with_capacity(n_out)).collect();
        let mut ws: Vec<Vec<f64>> = (0..4).map(|_| Vec::with_capacity(n_out)).collect();
        for o in 0..n_out {
            let src = if align {
                ratio * o as f64
            } else {
                ratio * (o as f64 + 0.5) - 0.5
            };
            let i0 = src.floor();
            let w = cubic_weights(src - i0);
            for j in 0..4 {
                ids[j].push((i0 as i64 - 1 + j as i64).clamp(0, last) as u32);
                ws[j].push(w[j]);
            }
        }
        let mut wshape = vec![n_out];
        wshape.extend(std::iter::repeat_n(1, rank - d - 1));
        let mut acc: Option<CandleTensor> = None;
        for (idx, w) in ids.into_iter().zip(ws) {
            let idx = CandleTensor::from_vec(idx, n_out, dev)?;
            let w = from_f64(&w, &wshape, compute, dev)?.t;
            let tap = t
                .index_select(&idx, d)
                .and_then(|v| v.broadcast_mul(&w))?;
            acc = Some(match acc {
                None => tap,
                Some(a) => a.add(&tap)?,
            });
        }
        if let Some(a) = acc {
            t = a;
        }
    }
    one(Tensor::new(t, compute).cast(x.dtype)?)
}

/// `grid_sampler_2d(input, grid, interpolation_mode, padding_mode,
/// align_corners)`: bilinear (0) and nearest (1) sampling with zeros (0),
/// border (1) or reflection (2) padding, as torch's CPU kernel.
fn grid_sampler_2d(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let grid = ctx.tensor("grid")?;
    let mode = ctx.int("interpolation_mode")?;
    let padding = ctx.int("padding_mode")?;
    let align = ctx.bool("align_corners")?;
    if mode > 1 {
        return Err(unsupported("grid_sampler_2d with bicubic interpolation"));
    }
    if x.rank() != 4 || grid.rank() != 4 || grid.dims()[3] != 2 || grid.dims()[0] != x.dims()[0] {
        return Err(Error::bad_input(format!(
            "grid_sampler_2d of {:?} with a grid of {:?}",
            x.dims(),
            grid.dims()
        )));
    }
    if x.dtype.is_floating() && grid.dtype.is_floating() {
        return grid_sample_device(&x, &grid, mode, padding, align);
    }
    let (n, c, h, w) = (x.dims()[0], x.dims()[1], x.dims()[2], x.dims()[3]);
    let (gh, gw) = (grid.dims()[1], grid.dims()[2]);
    let source = |coord: f64, size: usize| -> f64 {
        let size_f = size as f64;
        let mut v = if align {
            (coord + 1.0) / 2.0 * (size_f - 1.0)
        } else {
            ((coord + 1.0) * size_f - 1.0) / 2.0
        };
        let clip = |v: f64| v.max(0.0).min(size_f - 1.0);
        match padding {
            1 => v = clip(v),
            2 => {
                let (lo, hi) = if align {
                    (0.0, 2.0 * (size_f - 1.0))
                } else {
                    (-1.0, 2.0 * size_f - 1.0)
                };
                v = if lo == hi {
                    0.0
                } else {
                    let (min, span) = (lo / 2.0, (hi - lo) / 2.0);
                    let d = (v - min).abs();
                    let extra = d % span;
                    if (d / span).floor() as i64 % 2 == 0 {
                        extra + min
                    } else {
                        span - extra + min
                    }
                };
                v = clip(v);
            }
            _ => {}
        }
        v
    };
    let xv = host_f64(&x)?;
    let gv = host_f64(&grid)?;
    let mut out = vec![0.0; n * c * gh * gw];
    for b in 0..n {
        for gy in 0..gh {
            for gx in 0..gw {
                let g = ((b * gh + gy) * gw + gx) * 2;
                let (ix, iy) = (source(gv[g], w), source(gv[g + 1], h));
                let at = |yy: i64, xx: i64| -> Option<usize> {
                    (yy >= 0 && yy < h as i64 && xx >= 0 && xx < w as i64)
                        .then(|| yy as usize * w + xx as usize)
                };
                let taps: Vec<(usize, f64)> = if mode == 1 {
                    let round = |v: f64| {
                        let r = v.round();
                        if (v - v.trunc()).abs() == 0.5 {
                            2.0 * (v / 2.0).round()
                        } else {
                            r
                        }
                    };
                    at(round(iy) as i64, round(ix) as i64)
                        .map(|i| (i, 1.0))
                        .into_iter()
                        .collect()
                } else {
                    let (x0, y0) = (ix.floor(), iy.floor());
                    let (tx, ty) = (ix - x0, iy - y0);
                    let (x0, y0) = (x0 as i64, y0 as i64);
                    [
                        (y0, x0, (1.0 - tx) * (1.0 - ty)),
                        (y0, x0 + 1, tx * (1.0 - ty)),
                        (y0 + 1, x0, (1.0 - tx) * ty),
                        (y0 + 1, x0 + 1, tx * ty),
                    ]
                    .iter()
                    .filter_map(|&(yy, xx, wt)| at(yy, xx).map(|i| (i, wt)))
                    .collect()
                };
                for ch in 0..c {
                    let plane = &xv[(b * c + ch) * h * w..][..h * w];
                    out[((b * c + ch) * gh + gy) * gw + gx] =
                        taps.iter().map(|&(i, wt)| plane[i] * wt).sum();
                }
            }
        }
    }
    one(from_f64(&out, &[n, c, gh, gw], x.dtype, ctx.device())?)
}

/// `grid_sampler_2d` on the device, in the input's precision (float32 at
/// least): source coordinates per output position, then up to four
/// gathered taps per position, weighted (taps outside the input weigh 0).
fn grid_sample_device(x: &Tensor, grid: &Tensor, mode: i64, padding: i64, align: bool) -> OpResult {
    let (n, c, h, w) = (x.dims()[0], x.dims()[1], x.dims()[2], x.dims()[3]);
    let (gh, gw) = (grid.dims()[1], grid.dims()[2]);
    let compute = if x.dtype == Dtype::Float64 {
        Dtype::Float64
    } else {
        Dtype::Float32
    };
    let run = || -> candle_core::Result<CandleTensor> {
        let g = grid.cast(compute).map_err(candle_core::Error::wrap)?.t;
        let g = g.reshape((n, gh * gw, 2))?;
        // x -> width, y -> height; returns source coordinates, padded
        let source = |coord: CandleTensor, size: usize| -> candle_core::Result<CandleTensor> {
            let sf = size as f64;
            let v = if align {
                coord.affine((sf - 1.0) / 2.0, (sf - 1.0) / 2.0)?
            } else {
                coord.affine(sf / 2.0, (sf - 1.0) / 2.0)?
            };
            match padding {
                1 => v.clamp(0f64, sf - 1.0),
                2 => {
                    let (lo, hi) = if align {
                        (0.0, 2.0 * (sf - 1.0))
                    } else {
                        (-1.0, 2.0 * sf - 1.0)
                    };
                    if lo == hi {
                        return v.zeros_like();
                    }
                    let (min, span) = (lo / 2.0, (hi - lo) / 2.0);
                    let d = v.affine(1.0, -min)?.abs()?;
                    let flips = d.affine(1.0 / span, 0.0)?.floor()?;
                    let extra = (&d - flips.affine(span, 0.0)?)?;
                    let odd = (&flips - flips.affine(0.5, 0.0)?.floor()?.affine(2.0, 0.0)?)?;
                    let even_v = extra.affine(1.0, min)?;
                    let odd_v = extra.affine(-1.0, span + min)?;
                    odd.ne(0f64)?
                        .where_cond(&odd_v, &even_v)?
                        .clamp(0f64, sf - 1.0)
                }
                _ => Ok(v),
            }
        };
        let ix = source(g.narrow(2, 0, 1)?.squeeze(2)?, w)?;
        let iy = source(g.narrow(2, 1, 1)?.squeeze(2)?, h)?;
        let xs =
            x.t.to_dtype(storage_dtype(compute).map_err(candle_core::Error::wrap)?)?;
        let xs = xs.reshape((n, c, h * w))?;
        // one tap: values at integer (yy, xx) (float tensors), weighted
        let tap = |yy: &CandleTensor,
                   xx: &CandleTensor,
                   wt: &CandleTensor|
         -> candle_core::Result<CandleTensor> {
            let inside = xx
                .ge(0f64)?
                .mul(&xx.le((w - 1) as f64)?)?
                .mul(&yy.ge(0f64)?)?
                .mul(&yy.le((h - 1) as f64)?)?;
            let at = yy
                .clamp(0f64, (h - 1) as f64)?
                .affine(w as f64, 0.0)?
                .add(&xx.clamp(0f64, (w - 1) as f64)?)?
                .to_dtype(DType::I64)?;
            let at = at
                .unsqueeze(1)?
                .broadcast_as((n, c, gh * gw))?
                .contiguous()?;
            let wt = wt.mul(&inside.to_dtype(wt.dtype())?)?.unsqueeze(1)?;
            xs.gather(&at, 2)?.broadcast_mul(&wt)
        };
        let out = if mode == 1 {
            // nearest: round half to even, as nearbyint
            let round = |v: &CandleTensor| -> candle_core::Result<CandleTensor> {
                let f = v.floor()?;
                let frac = (v - &f)?;
                let up = f.affine(1.0, 1.0)?;
                let f_odd = (&f - f.affine(0.5, 0.0)?.floor()?.affine(2.0, 0.0)?)?.ne(0f64)?;
                let tie = frac.eq(0.5)?.where_cond(&f_odd.where_cond(&up, &f)?, &f)?;
                frac.gt(0.5)?.where_cond(&up, &tie)
            };
            let ones = ix.ones_like()?;
            tap(&round(&iy)?, &round(&ix)?, &ones)?
        } else {
            let (x0, y0) = (ix.floor()?, iy.floor()?);
            let (tx, ty) = ((&ix - &x0)?, (&iy - &y0)?);
            let (x1, y1) = (x0.affine(1.0, 1.0)?, y0.affine(1.0, 1.0)?);
            let (sx, sy) = (tx.affine(-1.0, 1.0)?, ty.affine(-1.0, 1.0)?);
            let nw = tap(&y0, &x0, &sx.mul(&sy)?)?;
            let ne = tap(&y0, &x1, &tx.mul(&sy)?)?;
            let sw = tap(&y1, &x0, &sx.mul(&ty)?)?;
            let se = tap(&y1, &x1, &tx.mul(&ty)?)?;
            (((nw + ne)? + sw)? + se)?
        };
        out.reshape((n, c, gh, gw))
    };
    one(Tensor::new(run()?, compute).cast(x.dtype)?)
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::UPSAMPLE_NEAREST1D_VEC, upsample_nearest),
    (aten::UPSAMPLE_NEAREST1D, upsample_nearest),
    (aten::UPSAMPLE_NEAREST2D_VEC, upsample_nearest),
    (aten::UPSAMPLE_NEAREST2D, upsample_nearest),
    (aten::UPSAMPLE_NEAREST3D_VEC, upsample_nearest),
    (aten::UPSAMPLE_NEAREST3D, upsample_nearest),
    (aten::_UPSAMPLE_NEAREST_EXACT1D_VEC, upsample_nearest),
    (aten::_UPSAMPLE_NEAREST_EXACT1D, upsample_nearest),
    (aten::_UPSAMPLE_NEAREST_EXACT2D_VEC, upsample_nearest),
    (aten::_UPSAMPLE_NEAREST_EXACT2D, upsample_nearest),
    (aten::_UPSAMPLE_NEAREST_EXACT3D_VEC, upsample_nearest),
    (aten::_UPSAMPLE_NEAREST_EXACT3D, upsample_nearest),
    (aten::UPSAMPLE_LINEAR1D_VEC, upsample_linear),
    (aten::UPSAMPLE_LINEAR1D, upsample_linear),
    (aten::UPSAMPLE_BILINEAR2D_VEC, upsample_linear),
    (aten::UPSAMPLE_BILINEAR2D, upsample_linear),
    (aten::UPSAMPLE_TRILINEAR3D_VEC, upsample_linear),
    (aten::UPSAMPLE_TRILINEAR3D, upsample_linear),
    (aten::UPSAMPLE_BICUBIC2D_VEC, upsample_bicubic),
    (aten::UPSAMPLE_BICUBIC2D, upsample_bicubic),
    (aten::GRID_SAMPLER_2D, grid_sampler_2d),
];
