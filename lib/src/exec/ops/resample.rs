//! Resampling: upsampling, interpolation and grid sampling: the executor rows.

use super::*;

fn upsample_nearest(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let (h, w) = (x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]);
    let (oh, ow) = if ctx.has("output_size") {
        pair(&ctx.ints("output_size")?, 1)
    } else {
        let scales = match ctx.node.arg("scale_factors") {
            Some(Argument::Floats(v)) => v.clone(),
            _ => return Err(unsupported("upsample without output_size or scale factors")),
        };
        (
            (h as f64 * scales[0]).floor() as usize,
            (w as f64 * scales[scales.len() - 1]).floor() as usize,
        )
    };
    // torch picks floor(out_index * in / out): build the index lists
    let rows: Vec<u32> = (0..oh).map(|i| ((i * h) / oh) as u32).collect();
    let cols: Vec<u32> = (0..ow).map(|j| ((j * w) / ow) as u32).collect();
    let t =
        x.t.index_select(
            &CandleTensor::new(rows.as_slice(), ctx.device()).map_err(ce)?,
            x.rank() - 2,
        )
        .and_then(|t| {
            t.index_select(
                &CandleTensor::new(cols.as_slice(), ctx.device())?,
                x.rank() - 1,
            )
        })
        .map_err(ce)?;
    one(Tensor::new(t, x.dtype))
}

/// `upsample_bilinear2d` (`.vec` and `.default`), as torch's CPU kernel
/// computes source positions (`area_pixel_compute_source_index`).
fn upsample_bilinear(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor(if ctx.node.arg("input").is_some() {
        "input"
    } else {
        "self"
    })?;
    if x.rank() < 2 {
        return Err(Error::bad_input(
            "upsample_bilinear2d on a tensor of rank < 2",
        ));
    }
    let align = ctx.bool("align_corners")?;
    let (h, w) = (x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]);
    // scales given by the caller (scale_factors, or scales_h / scales_w)
    let (sh, sw) = match ctx.node.arg("scale_factors") {
        Some(Argument::Floats(v)) if !v.is_empty() => (Some(v[0]), Some(v[v.len() - 1])),
        _ => (ctx.opt_float("scales_h")?, ctx.opt_float("scales_w")?),
    };
    let (oh, ow) = if ctx.has("output_size") && !ctx.ints("output_size")?.is_empty() {
        pair(&ctx.ints("output_size")?, 1)
    } else {
        match (sh, sw) {
            (Some(a), Some(b)) => (
                (h as f64 * a).floor() as usize,
                (w as f64 * b).floor() as usize,
            ),
            _ => return Err(unsupported("upsample without output_size or scale factors")),
        }
    };
    // (first source index, second source index, weight of the second) per output index
    let taps = |n_in: usize, n_out: usize, scale: Option<f64>| -> Vec<(usize, usize, f64)> {
        let ratio = if align {
            if n_out > 1 {
                (n_in as f64 - 1.0) / (n_out as f64 - 1.0)
            } else {
                0.0
            }
        } else {
            match scale {
                Some(s) if s > 0.0 => 1.0 / s,
                _ => n_in as f64 / n_out as f64,
            }
        };
        (0..n_out)
            .map(|o| {
                let src = if align {
                    ratio * o as f64
                } else {
                    (ratio * (o as f64 + 0.5) - 0.5).max(0.0)
                };
                let i0 = (src.floor() as usize).min(n_in - 1);
                let lambda = (src - i0 as f64).clamp(0.0, 1.0);
                let i1 = if i0 < n_in - 1 { i0 + 1 } else { i0 };
                (i0, i1, lambda)
            })
            .collect()
    };
    let rows = taps(h, oh, sh);
    let cols = taps(w, ow, sw);
    if !x.dtype.is_floating() {
        return Err(Error::bad_input(
            "upsample_bilinear2d takes a floating tensor",
        ));
    }
    // on the device: gather the two source rows, then the two source
    // columns of each, and blend with per-row and per-column weights, in
    // float32 at least (torch's opmath)
    let compute = if x.dtype == Dtype::Float64 {
        Dtype::Float64
    } else {
        Dtype::Float32
    };
    let xt = x.cast(compute)?.t;
    let dev = ctx.device();
    let (hd, wd) = (x.rank() - 2, x.rank() - 1);
    let ids = |v: Vec<u32>| -> Result<CandleTensor> {
        let n = v.len();
        CandleTensor::from_vec(v, n, dev).map_err(ce)
    };
    let weights = |v: Vec<f64>, shape: Vec<usize>| -> Result<CandleTensor> {
        Ok(from_f64(&v, &shape, compute, dev)?.t)
    };
    let (r0, r1) = (
        ids(rows.iter().map(|r| r.0 as u32).collect())?,
        ids(rows.iter().map(|r| r.1 as u32).collect())?,
    );
    let (c0, c1) = (
        ids(cols.iter().map(|c| c.0 as u32).collect())?,
        ids(cols.iter().map(|c| c.1 as u32).collect())?,
    );
    let ly = weights(rows.iter().map(|r| r.2).collect(), vec![oh, 1])?;
    let ly0 = weights(rows.iter().map(|r| 1.0 - r.2).collect(), vec![oh, 1])?;
    let lx = weights(cols.iter().map(|c| c.2).collect(), vec![ow])?;
    let lx0 = weights(cols.iter().map(|c| 1.0 - c.2).collect(), vec![ow])?;
    let blend = |row: &CandleTensor| -> candle_core::Result<CandleTensor> {
        row.index_select(&c0, wd)?
            .broadcast_mul(&lx0)?
            .add(&row.index_select(&c1, wd)?.broadcast_mul(&lx)?)
    };
    let out = (|| -> candle_core::Result<CandleTensor> {
        let top = blend(&xt.index_select(&r0, hd)?)?;
        let bottom = blend(&xt.index_select(&r1, hd)?)?;
        top.broadcast_mul(&ly0)?.add(&bottom.broadcast_mul(&ly)?)
    })()
    .map_err(ce)?;
    one(Tensor::new(out, compute).cast(x.dtype)?)
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
    one(Tensor::new(run().map_err(ce)?, compute).cast(x.dtype)?)
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    ("aten.upsample_nearest2d.vec", upsample_nearest),
    ("aten.upsample_nearest2d.default", upsample_nearest),
    ("aten.upsample_bilinear2d.vec", upsample_bilinear),
    ("aten.upsample_bilinear2d.default", upsample_bilinear),
    ("aten.grid_sampler_2d.default", grid_sampler_2d),
];
