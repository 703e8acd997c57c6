//! Pooling: max, average and adaptive, 1-D to 3-D: the executor rows.

use crate::ir::op::aten;
use super::*;

fn max_pool(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let k = pair(&ctx.ints("kernel_size")?, 1);
    let s = ctx.ints("stride").unwrap_or_default();
    let s = if s.is_empty() { k } else { pair(&s, 1) };
    let p = pair(&ctx.ints("padding").unwrap_or_default(), 0);
    let d = pair(&ctx.ints("dilation").unwrap_or_default(), 1);
    // candle pools 4-D tensors only, and skips NaN: other dtypes than
    // float32 (whose kernel keeps NaN) on the host, as torch's
    if d != (1, 1) || x.rank() != 4 || x.dtype != Dtype::Float32 || (ctx.node.outputs.len() > 1 && ctx.output_used(1)) {
        return max_pool_host(ctx, &x, 2);
    }
    let ceil = ctx.opt_bool("ceil_mode", false)?;
    let (h, w) = (x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]);
    // torch's rule, signed: a kernel wider than the padded input still
    // has one window in ceil mode (width 2, kernel 3 panicked here on an
    // unsigned span, fuzz_graphs seed 20261127)
    let (oh, ow) = (
        pool_len(h, k.0, s.0, p.0, 1, ceil)?,
        pool_len(w, k.1, s.1, p.1, 1, ceil)?,
    );
    if let Some(y) = max_pool_f32(&x, k, s, p, (oh, ow))? {
        let mut outs = vec![Value::Tensor(y)];
        if ctx.node.outputs.len() > 1 {
            outs.push(Value::None);
        }
        return Ok(outs);
    }
    let extra_h = ((oh - 1) * s.0 + k.0).saturating_sub(h + 2 * p.0);
    let extra_w = ((ow - 1) * s.1 + k.1).saturating_sub(w + 2 * p.1);
    let padded = pad_hw(
        &x.t,
        p.0,
        p.0 + extra_h,
        p.1,
        p.1 + extra_w,
        f64::NEG_INFINITY,
    )?;
    let y = padded.max_pool2d_with_stride(k, s)?;
    let mut outs = vec![Value::Tensor(Tensor::new(y, x.dtype))];
    if ctx.node.outputs.len() > 1 {
        outs.push(Value::None);
    }
    Ok(outs)
}

/// A 2-D max pool of a float32 host tensor `[.., h, w]`, planes split
/// over the threads, each by [`window_plane`] (padding and ceil mode's
/// overhang read as -inf; NaN wins, as in torch's kernel). `None` for
/// other dtypes and devices.
fn max_pool_f32(
    x: &Tensor,
    k: (usize, usize),
    s: (usize, usize),
    p: (usize, usize),
    (oh, ow): (usize, usize),
) -> Result<Option<Tensor>> {
    if x.dtype != Dtype::Float32 || !x.t.device().is_cpu() || x.rank() < 2 {
        return Ok(None);
    }
    let (h, w) = (x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]);
    if let Some(dims) = channels_last_dims(&x.t) {
        let out = max_pool_channels_last(&x.t, dims, (k, s, p), (oh, ow))
            .ok_or_else(|| Error::internal("max pool of a channels-last input not on the host"))?;
        return Ok(Some(Tensor::new(
            CandleTensor::from_vec(out, (dims[0], dims[1], oh, ow), x.t.device())?,
            Dtype::Float32,
        )));
    }
    let g = PlaneWindows {
        h,
        w,
        kh: k.0,
        kw: k.1,
        stride: s,
        pad: p,
        dil: (1, 1),
        oh,
        ow,
    };
    let planes = x.t.elem_count() / (h * w).max(1);
    // written whole by window_planes
    let mut out = sgemm::uninit(planes * oh * ow);
    let done = with_host::<f32, _>(&x.t, |xs| {
        window_planes(g, xs, &mut out, f32::NEG_INFINITY, |i| (i, f32::NEG_INFINITY, WindowOp::Max), None)
    });
    if done.is_none() {
        return Ok(None);
    }
    // SAFETY: every plane was written
    let out = unsafe { sgemm::assume_init(out) };
    let mut shape = x.dims()[..x.rank() - 2].to_vec();
    shape.extend([oh, ow]);
    Ok(Some(Tensor::new(
        CandleTensor::from_vec(out, shape, x.t.device())?,
        Dtype::Float32,
    )))
}

/// A 2-D max pool of a float32 input stored channels-last (`[b][h][w][c]`,
/// [`channels_last_dims`]: ResNet's stem leaves its output so) into
/// planes: each output line's `[ow][c]` maxima, every window's pixels'
/// channels side by side (a vector of them at a time: no gathers of a
/// stride-2 window's columns), then the line transposed into its planes'
/// lines; a task a band of an image's lines. Padding and ceil mode's
/// overhang are skipped (-inf where a window holds no pixel); NaN wins,
/// as in torch's kernel and the planes' path.
fn max_pool_channels_last(
    x: &CandleTensor,
    [b, c, h, w]: [usize; 4],
    (k, s, p): ((usize, usize), (usize, usize), (usize, usize)),
    (oh, ow): (usize, usize),
) -> Option<Vec<f32>> {
    with_channels_last(x, |xs: &[f32]| {
        let mut out = sgemm::uninit(b * c * oh * ow);
        let dst = sgemm::SendPtr(out.as_mut_ptr().cast::<f32>());
        // bands of lines, about four a thread
        let threads = rayon::current_num_threads().max(1);
        let per_image = (4 * threads).div_ceil(b.max(1)).clamp(1, oh.max(1));
        let band = oh.div_ceil(per_image).max(1);
        let bands = oh.div_ceil(band);
        crate::kernels::threads::par_for_init(b * bands, Vec::new, |tile: &mut Vec<f32>, t| {
            let (n, oy0) = (t / bands, (t % bands) * band);
            let image = &xs[n * h * w * c..][..h * w * c];
            tile.resize(ow * c, 0.0);
            for oy in oy0..(oy0 + band).min(oh) {
                crate::kernels::pool::max_line(image, (h, w, c), (k, s, p), (oy, ow), tile);
                // SAFETY: line oy of image n's planes, this task's only,
                // inside `out`
                unsafe {
                    crate::kernels::vmath::transpose_strided::<false>(tile, c, (ow, c), dst.at(n * c * oh * ow + oy * ow), oh * ow)
                };
            }
        });
        // SAFETY: every line of every plane was written by its band's task
        unsafe { sgemm::assume_init(out) }
    })
}

fn adaptive_avg_pool(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let (oh, ow) = pair(&ctx.ints("output_size")?, 1);
    let (h, w) = (x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]);
    // candle pools 4-D tensors only; other ranks take the general case
    let t = if x.rank() == 4 && h % oh == 0 && w % ow == 0 {
        x.t.avg_pool2d_with_stride((h / oh, w / ow), (h / oh, w / ow))?
    } else {
        // general case: each output cell averages its own window
        let mut rows = Vec::new();
        for i in 0..oh {
            let (h0, h1) = (i * h / oh, ((i + 1) * h).div_ceil(oh));
            let mut cols = Vec::new();
            for j in 0..ow {
                let (w0, w1) = (j * w / ow, ((j + 1) * w).div_ceil(ow));
                let win =
                    x.t.narrow(x.rank() - 2, h0, h1 - h0)
                        .and_then(|t| t.narrow(x.rank() - 1, w0, w1 - w0))
                        .and_then(|t| t.mean_keepdim(vec![x.rank() - 2, x.rank() - 1]))?;
                cols.push(win);
            }
            rows.push(CandleTensor::cat(&cols, x.rank() - 1)?);
        }
        CandleTensor::cat(&rows, x.rank() - 2)?
    };
    one(Tensor::new(t, x.dtype))
}

fn avg_pool(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let k = pair(&ctx.ints("kernel_size")?, 1);
    let s = ctx.ints("stride").unwrap_or_default();
    let s = if s.is_empty() { k } else { pair(&s, 1) };
    let p = pair(&ctx.ints("padding").unwrap_or_default(), 0);
    if p != (0, 0)
        || ctx.opt_bool("ceil_mode", false)?
        || ctx.opt_int("divisor_override")?.is_some()
        || !x.dtype.is_floating()
        || x.rank() != 4
    {
        if x.dtype.is_floating() && x.rank() >= 3 {
            return avg_pool2d_padded(ctx, &x, 2);
        }
        return avg_pool_host(ctx, &x, 2);
    }
    one(Tensor::new(
        x.t.avg_pool2d_with_stride(k, s)?,
        x.dtype,
    ))
}

fn adaptive_avg_pool1d(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let out = ctx.ints("output_size")?[0] as usize;
    let n = *x
        .dims()
        .last()
        .ok_or_else(|| Error::bad_input("adaptive_avg_pool1d on a 0-d tensor"))?;
    let last = x.rank() - 1;
    let mut cols = Vec::new();
    for j in 0..out {
        let (a, b) = (j * n / out, ((j + 1) * n).div_ceil(out));
        cols.push(
            x.t.narrow(last, a, b - a)
                .and_then(|t| t.mean_keepdim(last))?,
        );
    }
    one(Tensor::new(
        CandleTensor::cat(&cols, last)?,
        x.dtype,
    ))
}


impl Windows {
    /// Reads kernel_size, stride, padding, dilation and ceil_mode for `n`
    /// spatial dims of `x`.
    fn read(ctx: &Ctx, x: &Tensor, n: usize) -> Result<Windows> {
        if x.rank() < n + 1 {
            return Err(Error::bad_input(format!(
                "{n}-D pooling on a rank-{} tensor",
                x.rank()
            )));
        }
        let ints = |name: &str| -> Vec<i64> {
            if ctx.has(name) {
                ctx.ints(name).unwrap_or_default()
            } else {
                Vec::new()
            }
        };
        let kernel = per_dim(&ints("kernel_size"), n, &vec![1; n]);
        let stride = per_dim(&ints("stride"), n, &kernel);
        let pad = per_dim(&ints("padding"), n, &vec![0; n]);
        let dilation = per_dim(&ints("dilation"), n, &vec![1; n]);
        let ceil = ctx.opt_bool("ceil_mode", false)?;
        if [&kernel, &stride, &pad, &dilation]
            .iter()
            .any(|v| v.len() != n)
            || kernel
                .iter()
                .chain(&stride)
                .chain(&dilation)
                .any(|&v| v == 0)
        {
            return Err(Error::bad_input(
                "pooling: bad kernel_size, stride, padding or dilation",
            ));
        }
        let mut p = Windows {
            input: [1; 3],
            kernel: [1; 3],
            stride: [1; 3],
            pad: [0; 3],
            dilation: [1; 3],
            output: [1; 3],
        };
        let dims = x.dims();
        for i in 0..n {
            let j = 3 - n + i;
            p.input[j] = dims[dims.len() - n + i];
            p.kernel[j] = kernel[i];
            p.stride[j] = stride[i];
            p.pad[j] = pad[i];
            p.dilation[j] = dilation[i];
            // torch's check, on the dilated kernel
            if pad[i] > ((kernel[i] - 1) * dilation[i]).div_ceil(2) {
                return Err(Error::bad_input(
                    "pooling: padding should be at most half of the effective kernel size",
                ));
            }
            p.output[j] = pool_len(
                dims[dims.len() - n + i],
                kernel[i],
                stride[i],
                pad[i],
                dilation[i],
                ceil,
            )?;
        }
        Ok(p)
    }

    fn out_shape(&self, x: &Tensor, n: usize) -> Vec<usize> {
        let mut shape = x.dims()[..x.rank() - n].to_vec();
        shape.extend(&self.output[3 - n..]);
        shape
    }
}

/// Average pooling (`avg_pool1d/2d/3d`) as torch's CPU kernel computes it:
/// each window summed in order in the input's precision (float32 for
/// float32 and narrower, float64 for float64: torch's accumulators, whose
/// rounding a window of huge values shows), integers in int64 and divided
/// truncating.
fn avg_pool_host(ctx: &Ctx, x: &Tensor, n: usize) -> OpResult {
    let count_include_pad = ctx.opt_bool("count_include_pad", true)?;
    let divisor = ctx.opt_int("divisor_override")?.filter(|&d| d != 0);
    let p = Windows::read(ctx, x, n)?;
    let vals = elems(x)?;
    let wide = x.dtype == Dtype::Float64;
    let plane_len = p.plane().max(1);
    let planes = vals.len() / plane_len;
    let [id, ih, iw] = p.input.map(|v| v as i64);
    let mut ints = Vec::new();
    let mut floats = Vec::new();
    for plane in 0..planes {
        for ot in 0..p.output[0] {
            for oh in 0..p.output[1] {
                for ow in 0..p.output[2] {
                    let range = |o: usize, a: usize, size: i64| {
                        let start = (o * p.stride[a]) as i64 - p.pad[a] as i64;
                        let end = (start + p.kernel[a] as i64).min(size + p.pad[a] as i64);
                        (start, end)
                    };
                    let (t0, t1) = range(ot, 0, id);
                    let (h0, h1) = range(oh, 1, ih);
                    let (w0, w1) = range(ow, 2, iw);
                    let pool_size = (t1 - t0) * (h1 - h0) * (w1 - w0);
                    let (t0, h0, w0) = (t0.max(0), h0.max(0), w0.max(0));
                    let (t1, h1, w1) = (t1.min(id), h1.min(ih), w1.min(iw));
                    let empty = t0 >= t1 || h0 >= h1 || w0 >= w1;
                    let factor = match divisor {
                        Some(d) => d,
                        None if count_include_pad => pool_size,
                        None => (t1 - t0) * (h1 - h0) * (w1 - w0),
                    };
                    let at = (t0..t1.max(t0)).flat_map(move |t| {
                        (h0..h1.max(h0)).flat_map(move |h| (w0..w1.max(w0)).map(move |w| plane * plane_len + ((t * ih + h) * iw + w) as usize))
                    });
                    match &vals {
                        Elems::I(v) => {
                            let sum = at.fold(0i64, |s, i| s.wrapping_add(v[i]));
                            ints.push(if empty { 0 } else { sum.wrapping_div(factor) });
                        }
                        Elems::F(v) if wide => {
                            let sum = at.fold(0f64, |s, i| s + v[i]);
                            floats.push(if empty { 0.0 } else { sum / factor as f64 });
                        }
                        Elems::F(v) => {
                            let sum = at.fold(0f32, |s, i| s + v[i] as f32);
                            floats.push(if empty { 0.0 } else { (sum / factor as f32) as f64 });
                        }
                    }
                }
            }
        }
    }
    let out = if matches!(vals, Elems::I(_)) { Elems::I(ints) } else { Elems::F(floats) };
    one(from_elems(out, &p.out_shape(x, n), x.dtype, ctx.device())?)
}

/// 2-D average pooling with padding, ceil_mode or a divisor on the
/// device: window sums from candle's pooling over the zero-padded input
/// (widened so every window fits), each output scaled by torch's divisor
/// for its window (computed on the host, one per output position).
fn avg_pool2d_padded(ctx: &Ctx, x: &Tensor, n: usize) -> OpResult {
    let count_include_pad = ctx.opt_bool("count_include_pad", true)?;
    let divisor = ctx.opt_int("divisor_override")?.filter(|&d| d != 0);
    let p = Windows::read(ctx, x, n)?;
    let out_shape = p.out_shape(x, n);
    let ([_, h, w], [_, kh, kw], [_, sh, sw], [_, ph, pw], [_, oh, ow]) =
        (p.input, p.kernel, p.stride, p.pad, p.output);
    // candle pools 4-D tensors: the leading dims (unbatched or not) as
    // channels, 1-D pools as 2-D with a unit height
    let planes = x.t.elem_count() / (h * w).max(1);
    let x = Tensor::new(x.t.reshape((1, planes, h, w))?, x.dtype);
    let extra = |o: usize, k: usize, s: usize, n: usize, pad: usize| {
        ((o - 1) * s + k).saturating_sub(n + 2 * pad)
    };
    let compute = if x.dtype == Dtype::Float64 {
        Dtype::Float64
    } else {
        Dtype::Float32
    };
    let padded = pad_hw(
        &x.cast(compute)?.t,
        ph,
        ph + extra(oh, kh, sh, h, ph),
        pw,
        pw + extra(ow, kw, sw, w, pw),
        0.0,
    )?;
    let mean = padded
        .avg_pool2d_with_stride((kh, kw), (sh, sw))
        .and_then(|t| t.narrow(2, 0, oh))
        .and_then(|t| t.narrow(3, 0, ow))?;
    let window = |o: usize, k: usize, s: usize, n: usize, pad: usize| {
        let start = (o * s) as i64 - pad as i64;
        let end = (start + k as i64).min((n + pad) as i64);
        let size = end - start;
        (size, end.min(n as i64) - start.max(0))
    };
    let mut scale = Vec::with_capacity(oh * ow);
    for i in 0..oh {
        let (size_h, inside_h) = window(i, kh, sh, h, ph);
        for j in 0..ow {
            let (size_w, inside_w) = window(j, kw, sw, w, pw);
            let factor = match divisor {
                _ if inside_h <= 0 || inside_w <= 0 => 0.0,
                Some(d) => d as f64,
                None if count_include_pad => (size_h * size_w) as f64,
                None => (inside_h * inside_w) as f64,
            };
            scale.push(if factor == 0.0 {
                0.0
            } else {
                (kh * kw) as f64 / factor
            });
        }
    }
    let scale = from_f64(&scale, &[oh, ow], compute, ctx.device())?;
    let y = mean
        .broadcast_mul(&scale.t)
        .and_then(|t| t.reshape(out_shape))?;
    one(Tensor::new(y, compute).cast(x.dtype)?)
}

/// Max pooling with indices (flat positions in each input plane), as
/// torch's CPU kernel computes it: NaN wins, the first maximum is kept;
/// integers compared exactly.
fn max_pool_host(ctx: &Ctx, x: &Tensor, n: usize) -> OpResult {
    let p = Windows::read(ctx, x, n)?;
    let (values, indices) = match elems(x)? {
        Elems::I(v) => {
            let (o, i) = max_pool_planes(&v, &p);
            (Elems::I(o), i)
        }
        Elems::F(v) => {
            let (o, i) = max_pool_planes(&v, &p);
            (Elems::F(o), i)
        }
    };
    values_and_indices(ctx, x.dtype, (values, indices), &p.out_shape(x, n))
}

fn max_pool_planes<T: Extreme>(vals: &[T], p: &Windows) -> (Vec<T>, Vec<i64>) {
    let planes = vals.len() / p.plane().max(1);
    let [id, ih, iw] = p.input.map(|v| v as i64);
    let mut out = Vec::with_capacity(planes * p.out_plane());
    let mut indices: Vec<i64> = Vec::with_capacity(planes * p.out_plane());
    for plane in vals.chunks(p.plane().max(1)).take(planes) {
        for ot in 0..p.output[0] {
            for oh in 0..p.output[1] {
                for ow in 0..p.output[2] {
                    let range = |o: usize, a: usize, size: i64| {
                        let mut start = (o * p.stride[a]) as i64 - p.pad[a] as i64;
                        let d = p.dilation[a] as i64;
                        let end = (start + (p.kernel[a] as i64 - 1) * d + 1).min(size);
                        while start < 0 {
                            start += d;
                        }
                        (start, end, d as usize)
                    };
                    let (t0, t1, dt) = range(ot, 0, id);
                    let (h0, h1, dh) = range(oh, 1, ih);
                    let (w0, w1, dw) = range(ow, 2, iw);
                    let (best, at) = window_max(plane, [id, ih, iw], [t0, h0, w0], [t1, h1, w1], [dt, dh, dw]);
                    out.push(best);
                    indices.push(at);
                }
            }
        }
    }
    (out, indices)
}

/// A value max pooling compares: NaN above all (floats), the lowest value
/// a window starts from.
trait Extreme: Copy + PartialOrd {
    const LOWEST: Self;
    fn nan(self) -> bool;
}

impl Extreme for f64 {
    const LOWEST: f64 = f64::NEG_INFINITY;
    fn nan(self) -> bool {
        self.is_nan()
    }
}

impl Extreme for i64 {
    const LOWEST: i64 = i64::MIN;
    fn nan(self) -> bool {
        false
    }
}

/// The maximum of the box [start, end) (every `step`th position per dim)
/// of a plane of sizes `dims`, and its flat position, as torch's CPU
/// kernels find it: a later value replaces the maximum when greater, or
/// NaN; the position is the box's first when nothing is (all lowest).
fn window_max<T: Extreme>(plane: &[T], dims: [i64; 3], start: [i64; 3], end: [i64; 3], step: [usize; 3]) -> (T, i64) {
    let [_, ih, iw] = dims;
    let mut best = T::LOWEST;
    let mut at = (start[0] * ih + start[1]) * iw + start[2];
    for t in (start[0]..end[0]).step_by(step[0]) {
        for h in (start[1]..end[1]).step_by(step[1]) {
            let row = (t * ih + h) * iw;
            for w in (start[2]..end[2]).step_by(step[2]) {
                let v = plane[(row + w) as usize];
                if v > best || v.nan() {
                    best = v;
                    at = row + w;
                }
            }
        }
    }
    (best, at)
}

/// A pooling row's outputs: the values (in `dtype`) and, when the node
/// has a second output, the indices.
fn values_and_indices(ctx: &Ctx, dtype: Dtype, (values, indices): (Elems, Vec<i64>), shape: &[usize]) -> OpResult {
    let mut outs = vec![Value::Tensor(from_elems(values, shape, dtype, ctx.device())?)];
    if ctx.node.outputs.len() > 1 {
        let idx = CandleTensor::from_vec(indices, shape, ctx.device())?;
        outs.push(Value::Tensor(Tensor::new(idx, Dtype::Int64)));
    }
    Ok(outs)
}

/// torch's `generate_intervals`: where each of `m` windows of size `k`
/// starts in a dim of size `n`, from the plane's sample `u`, in the
/// input's dtype (float32 arithmetic unless it is float64).
fn intervals(u: f64, (n, m, k): (i64, i64, i64), f64_math: bool) -> Vec<i64> {
    let mut seq: Vec<i64> = if f64_math {
        let alpha = (n - k) as f64 / (m - 1) as f64;
        (0..m - 1)
            .map(|i| ((i as f64 + u) * alpha) as i64 - (u * alpha) as i64)
            .collect()
    } else {
        let (u, alpha) = (u as f32, (n - k) as f32 / (m - 1) as f32);
        (0..m - 1)
            .map(|i| ((i as f32 + u) * alpha) as i64 - (u * alpha) as i64)
            .collect()
    };
    seq.push(n - k);
    seq
}

/// `fractional_max_pool2d/3d(self, kernel_size, output_size,
/// random_samples)`, as torch's CPU kernel computes it: each plane's
/// windows start at the interval sequences of its samples (`[W, H]` in
/// 2-D, `[T, H, W]` in 3-D), and each keeps its maximum and its flat
/// position in the plane ([`window_max`]).
fn fractional_max_pool(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let u = ctx.tensor("random_samples")?;
    let n = if ctx.node.target.name.ends_with("3d") { 3 } else { 2 };
    let kernel = per_dim(&ctx.ints("kernel_size")?, n, &[]);
    let output = per_dim(&ctx.ints("output_size")?, n, &[]);
    let rank = x.rank();
    if !(n + 1..=n + 2).contains(&rank) || kernel.len() != n || output.len() != n {
        return Err(Error::bad_input(format!(
            "{}-D fractional max pooling of a rank-{rank} tensor with kernel {kernel:?} to {output:?}",
            n
        )));
    }
    let [mut input, mut k, mut o] = [[1i64; 3]; 3];
    for j in 0..n {
        let a = 3 - n + j;
        input[a] = x.dims()[rank - n + j] as i64;
        (k[a], o[a]) = (kernel[j] as i64, output[j] as i64);
        if k[a] == 0 || o[a] == 0 || o[a] + k[a] - 1 > input[a] {
            return Err(Error::bad_input(format!(
                "fractional max pooling: a window of {} to {} outputs does not fit an input of {} in spatial dim {j}",
                k[a], o[a], input[a]
            )));
        }
    }
    let plane: usize = input.iter().product::<i64>() as usize;
    let planes = x.t.elem_count() / plane.max(1);
    let samples = host_f64(&u)?;
    if samples.len() != planes * n {
        return Err(Error::bad_input(format!(
            "fractional max pooling: random_samples of {:?} for {planes} planes",
            u.dims()
        )));
    }
    let vals = host_f64(&x)?;
    let f64_math = x.dtype == Dtype::Float64;
    let cells = o.iter().product::<i64>() as usize;
    let (mut out, mut indices) = (Vec::with_capacity(planes * cells), Vec::with_capacity(planes * cells));
    for (p, src) in vals.chunks(plane.max(1)).take(planes).enumerate() {
        let u = &samples[p * n..][..n];
        // the samples by dim (depth, height, width): 2-D has [W, H]
        let sample = |a: usize| if n == 2 { u.get(2 - a).copied().unwrap_or(0.0) } else { u[a] };
        let seq: Vec<Vec<i64>> = (0..3)
            .map(|a| intervals(sample(a), (input[a], o[a], k[a]), f64_math))
            .collect();
        for &t in &seq[0] {
            for &h in &seq[1] {
                for &w in &seq[2] {
                    let start = [t, h, w];
                    let end = [t + k[0], h + k[1], w + k[2]];
                    let (best, at) = window_max(src, input, start, end, [1; 3]);
                    out.push(best);
                    indices.push(at);
                }
            }
        }
    }
    let mut shape = x.dims()[..rank - n].to_vec();
    shape.extend(&output);
    values_and_indices(ctx, x.dtype, (Elems::F(out), indices), &shape)
}

fn avg_pool1d(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.dtype.is_floating() && x.rank() >= 2 {
        return avg_pool2d_padded(ctx, &x, 1);
    }
    avg_pool_host(ctx, &x, 1)
}

fn avg_pool3d(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    avg_pool_host(ctx, &x, 3)
}

fn max_pool3d(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    max_pool_host(ctx, &x, 3)
}

/// Adaptive average pooling over the last `n` dims: output cell i of a
/// dim averages input [floor(i * in / out), ceil((i + 1) * in / out)).
fn adaptive_avg_pool_host(ctx: &Ctx, x: &Tensor, n: usize) -> OpResult {
    let sizes = ctx.ints("output_size")?;
    if x.rank() < n || sizes.len() != n || sizes.iter().any(|&s| s < 0) {
        return Err(Error::bad_input(format!(
            "adaptive pooling of a rank-{} tensor to {sizes:?}",
            x.rank()
        )));
    }
    let mut input = [1usize; 3];
    let mut output = [1usize; 3];
    for i in 0..n {
        input[3 - n + i] = x.dims()[x.rank() - n + i];
        output[3 - n + i] = sizes[i] as usize;
    }
    let vals = host_f64(x)?;
    let plane: usize = input.iter().product();
    let window = |o: usize, a: usize| {
        (
            o * input[a] / output[a],
            ((o + 1) * input[a]).div_ceil(output[a]),
        )
    };
    let mut out = Vec::new();
    for src in vals.chunks(plane.max(1)).take(vals.len() / plane.max(1)) {
        for ot in 0..output[0] {
            let (t0, t1) = window(ot, 0);
            for oh in 0..output[1] {
                let (h0, h1) = window(oh, 1);
                for ow in 0..output[2] {
                    let (w0, w1) = window(ow, 2);
                    let mut sum = 0.0;
                    for t in t0..t1 {
                        for h in h0..h1 {
                            let row = (t * input[1] + h) * input[2];
                            sum += src[row + w0..row + w1].iter().sum::<f64>();
                        }
                    }
                    out.push(sum / ((t1 - t0) * (h1 - h0) * (w1 - w0)) as f64);
                }
            }
        }
    }
    let mut shape = x.dims()[..x.rank() - n].to_vec();
    shape.extend(sizes.iter().map(|&s| s as usize));
    one(from_f64(&out, &shape, x.dtype, ctx.device())?)
}

fn adaptive_avg_pool3d(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    adaptive_avg_pool_host(ctx, &x, 3)
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::MAX_POOL2D, max_pool),
    (aten::MAX_POOL2D_WITH_INDICES, max_pool),
    (crate::exec::int8::MAX_POOL2D, super::int8::int8_max_pool2d),
    (aten::AVG_POOL2D, avg_pool),
    (aten::ADAPTIVE_AVG_POOL2D, adaptive_avg_pool),
    (aten::_ADAPTIVE_AVG_POOL2D, adaptive_avg_pool),
    (aten::ADAPTIVE_AVG_POOL1D, adaptive_avg_pool1d),
    (aten::AVG_POOL1D, avg_pool1d),
    (aten::AVG_POOL3D, avg_pool3d),
    (aten::MAX_POOL3D_WITH_INDICES, max_pool3d),
    (aten::_ADAPTIVE_AVG_POOL3D, adaptive_avg_pool3d),
    (aten::ADAPTIVE_AVG_POOL3D, adaptive_avg_pool3d),
    (aten::FRACTIONAL_MAX_POOL2D, fractional_max_pool),
    (aten::FRACTIONAL_MAX_POOL3D, fractional_max_pool),
];
