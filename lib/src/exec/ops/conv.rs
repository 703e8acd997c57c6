//! Convolutions, transposed convolutions, im2col and col2im: the executor rows.

use super::*;

/// 2-D convolution (one group, float32, CPU) as im2col in NCHW plus a
/// gemm: each row of the column matrix (one input channel and kernel tap)
/// is filled by its own task from contiguous input rows; the weights are
/// used as they lie (`[c_out, c_in * kh * kw]`), the output channels are
/// split between the threads (one single-threaded gemm each, which scales
/// better than one gemm asked to parallelise small products), and the bias
/// is the product's initial value. candle's own kernel converts the input
/// to NHWC and reshuffles the weights on every call, single-threaded; this
/// is about six times as fast on ResNet's 3x3s. Stride, padding and
/// dilation may differ per dim.
fn conv2d_im2col(
    x: &CandleTensor,
    w: &CandleTensor,
    bias: Option<&CandleTensor>,
    stride: (usize, usize),
    pad: (usize, usize),
    dil: (usize, usize),
) -> Result<CandleTensor> {
    use rayon::prelude::*;
    let (b, c, h, wd) = x.dims4().map_err(ce)?;
    let (co, ci, kh, kw) = w.dims4().map_err(ce)?;
    if ci != c {
        return Err(Error::bad_input(format!(
            "convolution: input has {c} channels, the weight expects {ci}"
        )));
    }
    let (oh, ow) = (
        conv_span(h, pad.0, dil.0, kh, stride.0)?,
        conv_span(wd, pad.1, dil.1, kw, stride.1)?,
    );
    let xs = f32s(x)?;
    let (k, n) = (c * kh * kw, oh * ow);
    let mut col: Vec<f32> = Vec::with_capacity(b * k * n);
    col.spare_capacity_mut()
        .par_chunks_mut(n)
        .enumerate()
        .for_each(|(row, out)| {
            let (bi, r) = (row / k, row % k);
            let (ch, ky, kx) = (r / (kh * kw), (r / kw) % kh, r % kw);
            let plane = &xs[(bi * c + ch) * h * wd..][..h * wd];
            let x0 = (kx * dil.1) as isize - pad.1 as isize;
            for oy in 0..oh {
                let dst = &mut out[oy * ow..(oy + 1) * ow];
                let iy = (oy * stride.0 + ky * dil.0) as isize - pad.0 as isize;
                if iy < 0 || iy >= h as isize {
                    dst.iter_mut().for_each(|d| {
                        d.write(0.0);
                    });
                    continue;
                }
                let src = &plane[iy as usize * wd..][..wd];
                // Output columns whose input column ox * s + x0 is inside
                // the row: [lo, hi); the rest read padding.
                let s1 = stride.1 as isize;
                let lo = if x0 >= 0 {
                    0
                } else {
                    ((-x0 + s1 - 1) / s1) as usize
                }
                .min(ow);
                let hi = if (wd as isize) <= x0 {
                    0
                } else {
                    ((wd as isize - x0 + s1 - 1) / s1) as usize
                }
                .clamp(lo, ow);
                dst[..lo].iter_mut().for_each(|d| {
                    d.write(0.0);
                });
                dst[hi..].iter_mut().for_each(|d| {
                    d.write(0.0);
                });
                if lo == hi {
                    // every tap of this row lies in the padding (a dilated
                    // kernel wider than the input)
                    continue;
                }
                let first = (lo as isize * s1 + x0) as usize;
                if stride.1 == 1 {
                    for (d, v) in dst[lo..hi].iter_mut().zip(&src[first..first + (hi - lo)]) {
                        d.write(*v);
                    }
                } else {
                    for (d, v) in dst[lo..hi]
                        .iter_mut()
                        .zip(src[first..].iter().step_by(stride.1))
                    {
                        d.write(*v);
                    }
                }
            }
        });
    // SAFETY: every element of the b * k * n chunks was written above.
    unsafe { col.set_len(b * k * n) };
    // out[bi] = W [co, k] @ col[bi] [k, n] (+ bias per row), the output
    // channels split between the threads, each a single-threaded gemm.
    let wv: Vec<f32>;
    let (ws, wl) = w.storage_and_layout();
    let wsl: &[f32] = match (&*ws, wl.contiguous_offsets()) {
        (candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)), Some((a, z))) => &v[a..z],
        _ => {
            wv = w.flatten_all().and_then(|t| t.to_vec1()).map_err(ce)?;
            &wv
        }
    };
    let bias: Option<Vec<f32>> = match bias {
        Some(t) => Some(t.flatten_all().and_then(|t| t.to_vec1()).map_err(ce)?),
        None => None,
    };
    let mut out: Vec<f32> = Vec::with_capacity(b * co * n);
    for bi in 0..b {
        let colb = &col[bi * k * n..(bi + 1) * k * n];
        for o in 0..co {
            let v = bias.as_ref().map_or(0.0, |bv| bv[o]);
            out.extend(std::iter::repeat_n(v, n));
        }
        let dst = &mut out[bi * co * n..(bi + 1) * co * n];
        let threads = rayon::current_num_threads().clamp(1, co);
        let rows = co.div_ceil(threads);
        dst.par_chunks_mut(rows * n).enumerate().for_each(|(t, d)| {
            let m = d.len() / n;
            let wrows = &wsl[t * rows * k..(t * rows + m) * k];
            // SAFETY: dst is m x n, lhs m x k and rhs k x n, all row-major
            // slices of exactly those sizes.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    d.as_mut_ptr(),
                    1,
                    n as isize,
                    bias.is_some(),
                    wrows.as_ptr(),
                    1,
                    k as isize,
                    colb.as_ptr(),
                    1,
                    n as isize,
                    1.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
        });
    }
    drop(ws);
    CandleTensor::from_vec(out, (b, co, oh, ow), x.device()).map_err(ce)
}

fn conv(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let w = ctx.tensor("weight")?;
    if x.rank() + 1 == w.rank() {
        // An unbatched input (torch takes [C, L] or [C, H, W]): a batch of one.
        let xb = Tensor::new(x.t.unsqueeze(0).map_err(ce)?, x.dtype);
        let mut outs = conv_batched(ctx, xb, w)?;
        if let Some(Value::Tensor(y)) = outs.first_mut() {
            y.t = y.t.squeeze(0).map_err(ce)?;
        }
        return Ok(outs);
    }
    conv_batched(ctx, x, w)
}

fn conv_batched(ctx: &mut Ctx, x: Tensor, w: Tensor) -> OpResult {
    let bias = ctx.opt_tensor("bias")?;
    let transposed = ctx.node.target.name == "convolution" && ctx.bool("transposed")?;
    let groups = ctx.opt_int("groups")?.unwrap_or(1) as usize;
    let stride = pair(&ctx.ints("stride").unwrap_or_default(), 1);
    let dilation = pair(&ctx.ints("dilation").unwrap_or_default(), 1);
    let padding = match ctx.node.arg("padding") {
        Some(Argument::String(s)) if s == "same" => {
            let (kh, kw) = (w.dims()[2], w.dims()[3]);
            ((dilation.0 * (kh - 1)) / 2, (dilation.1 * (kw - 1)) / 2)
        }
        Some(Argument::String(_)) => (0, 0),
        _ => pair(&ctx.ints("padding").unwrap_or_default(), 0),
    };
    if transposed {
        let uniform = |name: &str| -> Result<Option<usize>> {
            let v = if ctx.has(name) {
                ctx.ints(name)?
            } else {
                Vec::new()
            };
            Ok(match v.as_slice() {
                [] => Some(if name == "stride" || name == "dilation" {
                    1
                } else {
                    0
                }),
                [a, rest @ ..] if rest.iter().all(|b| b == a) => Some(*a as usize),
                _ => None,
            })
        };
        let params = (
            uniform("stride")?,
            uniform("padding")?,
            uniform("output_padding")?,
            uniform("dilation")?,
        );
        if let (4, 1, Dtype::Float32, Dtype::Float32, (Some(s), Some(p), Some(op), Some(d))) =
            (x.rank(), groups, x.dtype, w.dtype, params)
        {
            let mut y = x.t.conv_transpose2d(&w.t, p, op, s, d).map_err(ce)?;
            if let Some(b) = bias {
                let b = b
                    .cast(Dtype::Float32)?
                    .t
                    .reshape((1, b.dims()[0], 1, 1))
                    .map_err(ce)?;
                y = y.broadcast_add(&b).map_err(ce)?;
            }
            return one(Tensor::new(y, Dtype::Float32));
        }
        return one(conv_transpose_host(ctx, &x, &w, bias, groups)?);
    }
    if x.rank() == 3 {
        // 1-D: candle's conv1d (padding, stride, dilation are the first values)
        let dt = result_type(&[(x.dtype, Rank::Dim), (w.dtype, Rank::Dim)]);
        let mut y = x
            .cast(dt)?
            .t
            .conv1d(&w.cast(dt)?.t, padding.0, stride.0, dilation.0, groups)
            .map_err(ce)?;
        if let Some(b) = bias {
            let b = b.cast(dt)?.t.reshape((1, b.dims()[0], 1)).map_err(ce)?;
            y = y.broadcast_add(&b).map_err(ce)?;
        }
        return one(Tensor::new(y, dt));
    }
    if x.rank() != 4 {
        return Err(unsupported(format!(
            "convolution on rank {} (1-D and 2-D are implemented)",
            x.rank()
        )));
    }
    if transposed {
        return Err(unsupported("transposed convolution"));
    }
    let dt = result_type(&[(x.dtype, Rank::Dim), (w.dtype, Rank::Dim)]);
    let (xin, win) = (x.cast(dt)?.t, w.cast(dt)?.t);
    let one_by_one =
        win.dims()[2] == 1 && win.dims()[3] == 1 && stride == (1, 1) && padding == (0, 0);
    let host_f32 = dt == Dtype::Float32 && xin.device().is_cpu();
    let depthwise = groups > 1 && groups == xin.dims()[1] && win.dims()[1] == 1;
    let mut y = if host_f32 && ((groups == 1 && !one_by_one) || groups > 1) {
        let b = match &bias {
            Some(b) => Some(b.cast(dt)?.t),
            None => None,
        };
        // the bias is added inside (fused into the product or the sum)
        let y = if groups == 1 {
            conv2d_im2col(&xin, &win, b.as_ref(), stride, padding, dilation)?
        } else if depthwise {
            conv2d_depthwise(&xin, &win, b.as_ref(), stride, padding, dilation)?
        } else {
            conv2d_grouped(&xin, &win, b.as_ref(), groups, stride, padding, dilation)?
        };
        return one(Tensor::new(y, dt));
    } else {
        if stride.0 != stride.1 || dilation.0 != dilation.1 {
            return Err(unsupported(
                "grouped convolution with different strides or dilations per dim",
            ));
        }
        let (xin, pad) = if padding.0 == padding.1 {
            (xin, padding.0)
        } else {
            // candle takes one padding for both dims: pad by hand when they differ
            (
                pad_hw(&xin, padding.0, padding.0, padding.1, padding.1, 0.0)?,
                0,
            )
        };
        xin.conv2d(&win, pad, stride.0, dilation.0, groups)
            .map_err(ce)?
    };
    if let Some(b) = bias {
        let b = b.cast(dt)?.t.reshape((1, b.dims()[0], 1, 1)).map_err(ce)?;
        y = y.broadcast_add(&b).map_err(ce)?;
    }
    one(Tensor::new(y, dt))
}

/// The output size of a convolution along one dim.
fn conv_span(n: usize, p: usize, d: usize, k: usize, s: usize) -> Result<usize> {
    (n + 2 * p)
        .checked_sub(d * (k - 1) + 1)
        .map(|v| v / s + 1)
        .ok_or_else(|| Error::bad_input("convolution: the kernel is larger than the padded input"))
}

/// A tensor's f32 elements, row-major.
fn f32s(t: &CandleTensor) -> Result<Vec<f32>> {
    t.flatten_all().and_then(|t| t.to_vec1()).map_err(ce)
}

/// A depthwise convolution (groups = input channels; each output channel
/// reads one input channel, `co / c` outputs per input): a direct sum per
/// output plane, the planes split between the threads. im2col would build
/// one `kh * kw` by `oh * ow` matrix per channel for a product of one row.
fn conv2d_depthwise(
    x: &CandleTensor,
    w: &CandleTensor,
    bias: Option<&CandleTensor>,
    stride: (usize, usize),
    pad: (usize, usize),
    dil: (usize, usize),
) -> Result<CandleTensor> {
    use rayon::prelude::*;
    let (b, c, h, wd) = x.dims4().map_err(ce)?;
    let (co, _, kh, kw) = w.dims4().map_err(ce)?;
    if co % c != 0 {
        return Err(Error::bad_input(format!(
            "depthwise convolution: {co} output channels for {c} input channels"
        )));
    }
    let mult = co / c;
    let (oh, ow) = (
        conv_span(h, pad.0, dil.0, kh, stride.0)?,
        conv_span(wd, pad.1, dil.1, kw, stride.1)?,
    );
    let (xs, ws) = (f32s(x)?, f32s(w)?);
    let bs = bias.map(f32s).transpose()?;
    let mut out = vec![0f32; b * co * oh * ow];
    out.par_chunks_mut((oh * ow).max(1))
        .enumerate()
        .for_each(|(plane, dst)| {
            let (n, o) = (plane / co, plane % co);
            let src = &xs[(n * c + o / mult) * h * wd..][..h * wd];
            let k = &ws[o * kh * kw..][..kh * kw];
            let b0 = bs.as_ref().map_or(0.0, |v| v[o]);
            for oy in 0..oh {
                let row = &mut dst[oy * ow..][..ow];
                row.iter_mut().for_each(|d| *d = b0);
                for ky in 0..kh {
                    let iy = (oy * stride.0 + ky * dil.0) as isize - pad.0 as isize;
                    if iy < 0 || iy >= h as isize {
                        continue;
                    }
                    let line = &src[iy as usize * wd..][..wd];
                    for kx in 0..kw {
                        let wk = k[ky * kw + kx];
                        let x0 = (kx * dil.1) as isize - pad.1 as isize;
                        for (ox, d) in row.iter_mut().enumerate() {
                            let ix = ox as isize * stride.1 as isize + x0;
                            if ix >= 0 && ix < wd as isize {
                                *d += line[ix as usize] * wk;
                            }
                        }
                    }
                }
            }
        });
    CandleTensor::from_vec(out, (b, co, oh, ow), x.device()).map_err(ce)
}

/// A grouped convolution that is not depthwise (ResNeXt, ShuffleNet): one
/// im2col product per group, on its slices of channels.
fn conv2d_grouped(
    x: &CandleTensor,
    w: &CandleTensor,
    bias: Option<&CandleTensor>,
    groups: usize,
    stride: (usize, usize),
    pad: (usize, usize),
    dil: (usize, usize),
) -> Result<CandleTensor> {
    let (c, co) = (x.dims()[1], w.dims()[0]);
    if c % groups != 0 || co % groups != 0 {
        return Err(Error::bad_input(format!(
            "convolution: groups {groups} do not divide {c} input or {co} output channels"
        )));
    }
    let (cg, og) = (c / groups, co / groups);
    let parts = (0..groups)
        .map(|g| {
            let xg = x.narrow(1, g * cg, cg).and_then(|t| t.contiguous()).map_err(ce)?;
            let wg = w.narrow(0, g * og, og).and_then(|t| t.contiguous()).map_err(ce)?;
            let bg = match bias {
                Some(b) => Some(b.narrow(0, g * og, og).map_err(ce)?),
                None => None,
            };
            conv2d_im2col(&xg, &wg, bg.as_ref(), stride, pad, dil)
        })
        .collect::<Result<Vec<_>>>()?;
    CandleTensor::cat(&parts, 1).map_err(ce)
}

/// `col2im(self [n, c * kh * kw, l], output_size, kernel_size, dilation,
/// padding, stride)`: sums the sliding blocks back into images.
fn col2im(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let (oh, ow) = pair(&ctx.ints("output_size")?, 1);
    let (kh, kw) = pair(&ctx.ints("kernel_size")?, 1);
    let (dh, dw) = pair(&ctx.ints("dilation")?, 1);
    let (ph, pw) = pair(&ctx.ints("padding")?, 0);
    let (sh, sw) = pair(&ctx.ints("stride")?, 1);
    let batched = x.rank() == 3;
    if !(2..=3).contains(&x.rank()) || kh * kw == 0 || sh * sw == 0 {
        return Err(Error::bad_input(
            "col2im takes a 2-D or 3-D input and nonzero kernel and stride",
        ));
    }
    let (n, rows, l) = if batched {
        (x.dims()[0], x.dims()[1], x.dims()[2])
    } else {
        (1, x.dims()[0], x.dims()[1])
    };
    let blocks = |o: usize, p: usize, d: usize, k: usize, s: usize| {
        (o + 2 * p)
            .checked_sub(d * (k - 1) + 1)
            .map(|v| v / s + 1)
            .unwrap_or(0)
    };
    let (bh, bw) = (blocks(oh, ph, dh, kh, sh), blocks(ow, pw, dw, kw, sw));
    if rows % (kh * kw) != 0 || bh * bw != l {
        return Err(Error::bad_input(format!(
            "col2im: input {:?} does not match {bh}x{bw} blocks of a {kh}x{kw} kernel",
            x.dims()
        )));
    }
    let c = rows / (kh * kw);
    let v = host_f64(&x)?;
    let mut out = vec![0.0; n * c * oh * ow];
    for b in 0..n {
        for r in 0..rows {
            let (ch, ky, kx) = (r / (kh * kw), (r / kw) % kh, r % kw);
            let dst = &mut out[(b * c + ch) * oh * ow..][..oh * ow];
            let src = &v[(b * rows + r) * l..][..l];
            for by in 0..bh {
                let y = (by * sh + ky * dh) as i64 - ph as i64;
                if y < 0 || y >= oh as i64 {
                    continue;
                }
                for bx in 0..bw {
                    let xx = (bx * sw + kx * dw) as i64 - pw as i64;
                    if xx >= 0 && xx < ow as i64 {
                        dst[y as usize * ow + xx as usize] += src[by * bw + bx];
                    }
                }
            }
        }
    }
    let shape = if batched {
        vec![n, c, oh, ow]
    } else {
        vec![c, oh, ow]
    };
    one(from_f64(&out, &shape, x.dtype, ctx.device())?)
}

/// Transposed convolution over 1 to 3 spatial dims on the host, any
/// groups, stride, padding, output_padding and dilation per dim:
/// every input element scatters its kernel into the output.
fn conv_transpose_host(
    ctx: &Ctx,
    x: &Tensor,
    w: &Tensor,
    bias: Option<Tensor>,
    groups: usize,
) -> Result<Tensor> {
    let n = x.rank() - 2;
    if !(1..=3).contains(&n) || w.rank() != x.rank() {
        return Err(unsupported(format!(
            "transposed convolution of {:?} with {:?}",
            x.dims(),
            w.dims()
        )));
    }
    let ints = |name: &str, default: usize| -> Vec<usize> {
        let v = if ctx.has(name) {
            ctx.ints(name).unwrap_or_default()
        } else {
            Vec::new()
        };
        per_dim(&v, n, &vec![default; n])
    };
    let (stride, pad, opad, dil) = (
        ints("stride", 1),
        ints("padding", 0),
        ints("output_padding", 0),
        ints("dilation", 1),
    );
    let lift = |v: &[usize], fill: usize| -> [usize; 3] {
        let mut a = [fill; 3];
        a[3 - n..].copy_from_slice(v);
        a
    };
    let (s, p, op, d) = (
        lift(&stride, 1),
        lift(&pad, 0),
        lift(&opad, 0),
        lift(&dil, 1),
    );
    let (nb, cin) = (x.dims()[0], x.dims()[1]);
    let ci = lift(&x.dims()[2..], 1);
    let (wcin, cout_g) = (w.dims()[0], w.dims()[1]);
    let k = lift(&w.dims()[2..], 1);
    if groups == 0 || wcin != cin || cin % groups != 0 {
        return Err(Error::bad_input(format!(
            "transposed convolution: input has {cin} channels, the weight {wcin}, groups {groups}"
        )));
    }
    let mut o = [1usize; 3];
    for a in 0..3 {
        let len = (ci[a] as i64 - 1) * s[a] as i64 - 2 * p[a] as i64
            + (d[a] * (k[a] - 1)) as i64
            + op[a] as i64
            + 1;
        // torch allows an empty output (a size of 0), not a negative one
        if len < 0 {
            return Err(Error::bad_input("transposed convolution: negative output size"));
        }
        o[a] = len as usize;
    }
    let cout = cout_g * groups;
    let cin_g = cin / groups;
    let dt = result_type(&[(x.dtype, Rank::Dim), (w.dtype, Rank::Dim)]);
    let (xv, wv) = (host_f64(x)?, host_f64(w)?);
    let (ip, op_, kp) = (
        ci.iter().product::<usize>(),
        o.iter().product::<usize>(),
        k.iter().product::<usize>(),
    );
    let mut out = vec![0.0; nb * cout * op_];
    for b in 0..nb {
        for ic in 0..cin {
            let g = ic / cin_g;
            let src = &xv[(b * cin + ic) * ip..][..ip];
            for oc_l in 0..cout_g {
                let oc = g * cout_g + oc_l;
                let kern = &wv[(ic * cout_g + oc_l) * kp..][..kp];
                let dst = &mut out[(b * cout + oc) * op_..][..op_];
                for (i, &xval) in src.iter().enumerate() {
                    let pos = [i / (ci[1] * ci[2]), (i / ci[2]) % ci[1], i % ci[2]];
                    for (kk, &wval) in kern.iter().enumerate() {
                        let tap = [kk / (k[1] * k[2]), (kk / k[2]) % k[1], kk % k[2]];
                        let mut at = 0usize;
                        let mut inside = true;
                        for a in 0..3 {
                            let q = (pos[a] * s[a] + tap[a] * d[a]) as i64 - p[a] as i64;
                            if q < 0 || q >= o[a] as i64 {
                                inside = false;
                                break;
                            }
                            at = at * o[a] + q as usize;
                        }
                        if inside {
                            dst[at] += xval * wval;
                        }
                    }
                }
            }
        }
    }
    if let Some(bias) = bias {
        let bv = host_f64(&bias)?;
        for (i, v) in out.iter_mut().enumerate() {
            *v += bv[(i / op_) % cout];
        }
    }
    let mut shape = vec![nb, cout];
    shape.extend(&o[3 - n..]);
    from_f64(&out, &shape, dt, ctx.device())
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    ("aten.conv2d.default", conv),
    ("aten.convolution.default", conv),
    ("aten.col2im.default", col2im),
];
