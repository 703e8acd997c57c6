//! torchvision's detection ops (`torchvision::roi_align`, `roi_pool`,
//! `ps_roi_align`, `ps_roi_pool`, `nms`, `deform_conv2d`): the executor
//! rows, each a transcription of torchvision's CPU kernel
//! (`torchvision/csrc/ops/cpu/*_kernel.cpp`) computed in the input's
//! dtype (float64 in float64, every other float in float32), in the
//! kernel's order of operations, so the numbers are torch's.
//!
//! Boxes are `[K, 5]` rows `(batch index, x1, y1, x2, y2)`; a batch index
//! outside the input (which torchvision reads out of bounds) is refused.

use crate::ir::op::torchvision;
use super::*;

/// The float type a kernel computes in: `f32` or `f64`, as torchvision's
/// `scalar_t`.
trait Real:
    Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::AddAssign
    + Send
    + Sync
    + candle_core::WithDType
{
    fn of(v: f64) -> Self;
    fn wide(self) -> f64;
    /// C's `(int)x`: toward zero.
    fn trunc_i(self) -> i64 {
        self.wide() as i64
    }
}

impl Real for f32 {
    fn of(v: f64) -> f32 {
        v as f32
    }
    fn wide(self) -> f64 {
        self as f64
    }
}

impl Real for f64 {
    fn of(v: f64) -> f64 {
        v
    }
    fn wide(self) -> f64 {
        self
    }
}

/// A float tensor's elements in `T`, row-major.
fn host_as<T: Real>(x: &Tensor) -> Result<Vec<T>> {
    Ok(x.to_host()?.to_f64().into_iter().map(T::of).collect())
}

/// A tensor of `T`s on the context's device, with the logical dtype the
/// kernel computed in.
fn out_tensor<T: Real>(ctx: &Ctx, v: Vec<T>, shape: &[usize]) -> Result<Tensor> {
    let t = CandleTensor::from_vec(v, shape, ctx.device())?;
    let dtype = if T::DTYPE == DType::F64 {
        Dtype::Float64
    } else {
        Dtype::Float32
    };
    Ok(Tensor::new(t, dtype))
}

fn int32_tensor(ctx: &Ctx, v: Vec<i32>, shape: &[usize]) -> Result<Tensor> {
    let t = CandleTensor::from_vec(v, shape, ctx.device())?;
    Ok(Tensor::new(t, Dtype::Int32))
}

/// What every RoI op reads: the input `[B, C, H, W]`, the boxes `[K, 5]`,
/// the scale and the pooled size.
struct Rois<T> {
    input: Vec<T>,
    dims: [usize; 4],
    rois: Vec<T>,
    k: usize,
    scale: T,
    ph: usize,
    pw: usize,
}

impl<T: Real> Rois<T> {
    fn read(ctx: &Ctx) -> Result<Rois<T>> {
        let x = ctx.tensor("input")?;
        let r = ctx.tensor("rois")?;
        let &[b, c, h, w] = x.dims() else {
            return Err(Error::bad_input(format!(
                "input has shape {:?}, must be [batch, channels, height, width]",
                x.dims()
            )));
        };
        if r.rank() != 2 || r.dims()[1] != 5 {
            return Err(Error::bad_input(format!(
                "rois has shape {:?}, must be [K, 5] (batch index, x1, y1, x2, y2)",
                r.dims()
            )));
        }
        if x.dtype != r.dtype {
            return Err(Error::bad_input(format!(
                "input is {} and rois {}: torchvision needs one dtype",
                x.dtype.torch_name(),
                r.dtype.torch_name()
            )));
        }
        let (ph, pw) = (ctx.int("pooled_height")?, ctx.int("pooled_width")?);
        if ph <= 0 || pw <= 0 {
            return Err(Error::bad_input(format!(
                "pooled size ({ph}, {pw}) must be positive"
            )));
        }
        let rois: Vec<T> = host_as(&r)?;
        let k = r.dims()[0];
        for n in 0..k {
            let bi = rois[n * 5].trunc_i();
            if bi < 0 || bi as usize >= b {
                return Err(Error::bad_input(format!(
                    "rois[{n}, 0] (the batch index) is {}, the input has {b} image(s)",
                    rois[n * 5].wide()
                )));
            }
        }
        Ok(Rois {
            input: host_as(&x)?,
            dims: [b, c, h, w],
            rois,
            k,
            scale: T::of(ctx.float("spatial_scale")?),
            ph: ph as usize,
            pw: pw as usize,
        })
    }

    /// Box `n`'s batch index and corners scaled (x1, y1, x2, y2).
    fn roi(&self, n: usize) -> (usize, [T; 4]) {
        let r = &self.rois[n * 5..n * 5 + 5];
        (
            r[0].trunc_i() as usize,
            [r[1] * self.scale, r[2] * self.scale, r[3] * self.scale, r[4] * self.scale],
        )
    }

    fn plane(&self, b: usize, c: usize) -> &[T] {
        let [_, ch, h, w] = self.dims;
        &self.input[(b * ch + c) * h * w..(b * ch + c + 1) * h * w]
    }
}

/// torchvision's bilinear sample of a `[h, w]` plane at (y, x): zero
/// outside `[-1, h] x [-1, w]` (NaN coordinates too), clamped to the edge
/// inside. Returns the four weights and positions (roi_align's PreCalc).
fn bilinear_taps<T: Real>(h: usize, w: usize, mut y: T, mut x: T) -> Option<([T; 4], [usize; 4])> {
    let (hf, wf) = (h as f64, w as f64);
    if !(y.wide() >= -1.0 && y.wide() <= hf && x.wide() >= -1.0 && x.wide() <= wf) {
        return None;
    }
    let zero = T::of(0.0);
    if y <= zero {
        y = zero;
    }
    if x <= zero {
        x = zero;
    }
    let (mut y_low, mut x_low) = (y.trunc_i(), x.trunc_i());
    let (h, w) = (h as i64, w as i64);
    let y_high = if y_low >= h - 1 {
        y_low = h - 1;
        y = T::of(y_low as f64);
        y_low
    } else {
        y_low + 1
    };
    let x_high = if x_low >= w - 1 {
        x_low = w - 1;
        x = T::of(x_low as f64);
        x_low
    } else {
        x_low + 1
    };
    let ly = y - T::of(y_low as f64);
    let lx = x - T::of(x_low as f64);
    let one = T::of(1.0);
    let (hy, hx) = (one - ly, one - lx);
    let at = |yy: i64, xx: i64| (yy * w + xx).max(0) as usize;
    Some((
        [hy * hx, hy * lx, ly * hx, ly * lx],
        [at(y_low, x_low), at(y_low, x_high), at(y_high, x_low), at(y_high, x_high)],
    ))
}

/// One sample's value: `w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4`, in that order.
fn sample<T: Real>(plane: &[T], taps: &Option<([T; 4], [usize; 4])>) -> T {
    match taps {
        Some((wt, pos)) => {
            wt[0] * plane[pos[0]] + wt[1] * plane[pos[1]] + wt[2] * plane[pos[2]] + wt[3] * plane[pos[3]]
        }
        None => T::of(0.0),
    }
}

/// The sampling grid of a bin: `sampling_ratio` where positive, else
/// `ceil(roi size / pooled size)`, as C converts it to int.
fn grid<T: Real>(sampling_ratio: i64, size: T, pooled: usize) -> i64 {
    if sampling_ratio > 0 {
        sampling_ratio
    } else {
        (size / T::of(pooled as f64)).wide().ceil() as i64
    }
}

/// Where box `n`'s samples of bin (ph, pw) fall: `roi_start + p * bin +
/// (i + .5) * bin / grid`.
fn coord<T: Real>(start: T, p: usize, bin: T, i: i64, grid: i64) -> T {
    start + T::of(p as f64) * bin + T::of(i as f64 + 0.5) * bin / T::of(grid as f64)
}

fn roi_align_t<T: Real>(ctx: &Ctx) -> Result<Tensor> {
    let r = Rois::<T>::read(ctx)?;
    let sampling_ratio = ctx.int("sampling_ratio")?;
    let aligned = ctx.bool("aligned")?;
    let [_, c, h, w] = r.dims;
    let (ph, pw) = (r.ph, r.pw);
    let per_roi = c * ph * pw;
    ctx.check_alloc(&[r.k, c, ph, pw], Dtype::Float32)?;
    let mut out = vec![T::of(0.0); r.k * per_roi];
    let offset = T::of(if aligned { 0.5 } else { 0.0 });
    crate::kernels::threads::par_chunks(&mut out, per_roi.max(1), |n, part| {
        let (b, [x1, y1, x2, y2]) = r.roi(n);
        let (start_w, start_h) = (x1 - offset, y1 - offset);
        let (mut roi_w, mut roi_h) = (x2 - offset - start_w, y2 - offset - start_h);
        if !aligned {
            // malformed boxes forced to 1x1
            let one = T::of(1.0);
            roi_w = if roi_w > one { roi_w } else { one };
            roi_h = if roi_h > one { roi_h } else { one };
        }
        let bin_h = roi_h / T::of(ph as f64);
        let bin_w = roi_w / T::of(pw as f64);
        let gh = grid(sampling_ratio, roi_h, ph);
        let gw = grid(sampling_ratio, roi_w, pw);
        let count = T::of((gh.wrapping_mul(gw)).max(1) as f64);
        let mut taps = Vec::with_capacity(ph * pw * (gh.max(0) * gw.max(0)) as usize);
        for py in 0..ph {
            for px in 0..pw {
                for iy in 0..gh {
                    let y = coord(start_h, py, bin_h, iy, gh);
                    for ix in 0..gw {
                        let x = coord(start_w, px, bin_w, ix, gw);
                        taps.push(bilinear_taps(h, w, y, x));
                    }
                }
            }
        }
        let per_bin = (gh.max(0) * gw.max(0)) as usize;
        for ch in 0..c {
            let plane = r.plane(b, ch);
            for bin in 0..ph * pw {
                let mut v = T::of(0.0);
                for t in &taps[bin * per_bin..(bin + 1) * per_bin] {
                    v += sample(plane, t);
                }
                part[ch * ph * pw + bin] = v / count;
            }
        }
    });
    out_tensor(ctx, out, &[r.k, c, ph, pw])
}

fn roi_align(ctx: &mut Ctx) -> OpResult {
    let t = if ctx.tensor("input")?.dtype == Dtype::Float64 {
        roi_align_t::<f64>(ctx)?
    } else {
        roi_align_t::<f32>(ctx)?
    };
    one(t)
}

fn ps_roi_align_t<T: Real>(ctx: &Ctx) -> Result<Vec<Value>> {
    let r = Rois::<T>::read(ctx)?;
    let sampling_ratio = ctx.int("sampling_ratio")?;
    let [_, c, h, w] = r.dims;
    let (ph, pw) = (r.ph, r.pw);
    if c % (ph * pw) != 0 {
        return Err(Error::bad_input(format!(
            "input has {c} channels, must be a multiple of the pooled size {ph} x {pw}"
        )));
    }
    let c_out = c / (ph * pw);
    let per_roi = c_out * ph * pw;
    ctx.check_alloc(&[r.k, c_out, ph, pw], Dtype::Float32)?;
    let mut out = vec![T::of(0.0); r.k * per_roi];
    let half = T::of(0.5);
    crate::kernels::threads::par_chunks(&mut out, per_roi.max(1), |n, part| {
        let (b, [x1, y1, x2, y2]) = r.roi(n);
        let (start_w, start_h) = (x1 - half, y1 - half);
        let (roi_w, roi_h) = (x2 - half - start_w, y2 - half - start_h);
        let bin_h = roi_h / T::of(ph as f64);
        let bin_w = roi_w / T::of(pw as f64);
        let gh = grid(sampling_ratio, roi_h, ph);
        let gw = grid(sampling_ratio, roi_w, pw);
        let count = T::of(gh.wrapping_mul(gw) as f64);
        for (c_in, slot) in part.iter_mut().enumerate() {
            let (py, px) = ((c_in / pw) % ph, c_in % pw);
            let plane = r.plane(b, c_in);
            let mut sum = T::of(0.0);
            for iy in 0..gh {
                let y = coord(start_h, py, bin_h, iy, gh);
                for ix in 0..gw {
                    let x = coord(start_w, px, bin_w, ix, gw);
                    sum += sample(plane, &bilinear_taps(h, w, y, x));
                }
            }
            *slot = sum / count;
        }
    });
    let mapping: Vec<i32> = (0..r.k * per_roi).map(|i| (i % per_roi) as i32).collect();
    Ok(vec![
        Value::Tensor(out_tensor(ctx, out, &[r.k, c_out, ph, pw])?),
        Value::Tensor(int32_tensor(ctx, mapping, &[r.k, c_out, ph, pw])?),
    ])
}

fn ps_roi_align(ctx: &mut Ctx) -> OpResult {
    if ctx.tensor("input")?.dtype == Dtype::Float64 {
        ps_roi_align_t::<f64>(ctx)
    } else {
        ps_roi_align_t::<f32>(ctx)
    }
}

/// C's `round` (half away from zero) as int.
fn round_i<T: Real>(v: T) -> i64 {
    v.wide().round() as i64
}

/// The integer window of bin (p) of a box that starts at `start` and is
/// `bins` wide: `floor(p * bin)` to `ceil((p + 1) * bin)`, moved by the
/// start and clipped to `[0, limit]`.
fn int_bin<T: Real>(p: usize, bin: T, start: i64, limit: i64) -> (i64, i64) {
    let lo = (T::of(p as f64) * bin).wide().floor() as i64;
    let hi = (T::of((p + 1) as f64) * bin).wide().ceil() as i64;
    ((lo + start).clamp(0, limit), (hi + start).clamp(0, limit))
}

fn roi_pool_t<T: Real>(ctx: &Ctx) -> Result<Vec<Value>> {
    let r = Rois::<T>::read(ctx)?;
    let [_, c, h, w] = r.dims;
    let (ph, pw) = (r.ph, r.pw);
    let per_roi = c * ph * pw;
    ctx.check_alloc(&[r.k, c, ph, pw], Dtype::Float32)?;
    let mut out = vec![T::of(0.0); r.k * per_roi];
    let mut arg = vec![-1i32; r.k * per_roi];
    crate::kernels::threads::par_chunks_pair((&mut out, per_roi.max(1)), (&mut arg, per_roi.max(1)), |n, part, args| {
        let (b, [x1, y1, x2, y2]) = r.roi(n);
        let (sw, sh, ew, eh) = (round_i(x1), round_i(y1), round_i(x2), round_i(y2));
        let roi_w = (ew - sw + 1).max(1);
        let roi_h = (eh - sh + 1).max(1);
        let bin_h = T::of(roi_h as f64) / T::of(ph as f64);
        let bin_w = T::of(roi_w as f64) / T::of(pw as f64);
        for py in 0..ph {
            let (hs, he) = int_bin(py, bin_h, sh, h as i64);
            for px in 0..pw {
                let (ws, we) = int_bin(px, bin_w, sw, w as i64);
                let empty = he <= hs || we <= ws;
                for ch in 0..c {
                    let plane = r.plane(b, ch);
                    let mut best = T::of(if empty { 0.0 } else { -(f32::MAX as f64) });
                    let mut best_at = -1i64;
                    for yy in hs..he {
                        for xx in ws..we {
                            let at = (yy * w as i64 + xx) as usize;
                            if plane[at] > best {
                                best = plane[at];
                                best_at = at as i64;
                            }
                        }
                    }
                    part[(ch * ph + py) * pw + px] = best;
                    args[(ch * ph + py) * pw + px] = best_at as i32;
                }
            }
        }
    });
    Ok(vec![
        Value::Tensor(out_tensor(ctx, out, &[r.k, c, ph, pw])?),
        Value::Tensor(int32_tensor(ctx, arg, &[r.k, c, ph, pw])?),
    ])
}

fn roi_pool(ctx: &mut Ctx) -> OpResult {
    if ctx.tensor("input")?.dtype == Dtype::Float64 {
        roi_pool_t::<f64>(ctx)
    } else {
        roi_pool_t::<f32>(ctx)
    }
}

fn ps_roi_pool_t<T: Real>(ctx: &Ctx) -> Result<Vec<Value>> {
    let r = Rois::<T>::read(ctx)?;
    let [_, c, h, w] = r.dims;
    let (ph, pw) = (r.ph, r.pw);
    if c % (ph * pw) != 0 {
        return Err(Error::bad_input(format!(
            "input has {c} channels, must be a multiple of the pooled size {ph} x {pw}"
        )));
    }
    let c_out = c / (ph * pw);
    let per_roi = c_out * ph * pw;
    ctx.check_alloc(&[r.k, c_out, ph, pw], Dtype::Float32)?;
    let mut out = vec![T::of(0.0); r.k * per_roi];
    crate::kernels::threads::par_chunks(&mut out, per_roi.max(1), |n, part| {
        let (b, [x1, y1, x2, y2]) = r.roi(n);
        let (sw, sh, ew, eh) = (round_i(x1), round_i(y1), round_i(x2), round_i(y2));
        let roi_w = (ew - sw).max(1);
        let roi_h = (eh - sh).max(1);
        let bin_h = T::of(roi_h as f64) / T::of(ph as f64);
        let bin_w = T::of(roi_w as f64) / T::of(pw as f64);
        for (c_in, slot) in part.iter_mut().enumerate() {
            let (py, px) = ((c_in / pw) % ph, c_in % pw);
            // clipped to the last row and column, as torchvision's kernel
            let (hs, he) = int_bin(py, bin_h, sh, h as i64 - 1);
            let (ws, we) = int_bin(px, bin_w, sw, w as i64 - 1);
            let plane = r.plane(b, c_in);
            let mut sum = T::of(0.0);
            for yy in hs..he {
                for xx in ws..we {
                    sum += plane[(yy * w as i64 + xx) as usize];
                }
            }
            let empty = he <= hs || we <= ws;
            *slot = if empty {
                T::of(0.0)
            } else {
                sum / T::of(((he - hs) * (we - ws)) as f64)
            };
        }
    });
    let mapping: Vec<i32> = (0..r.k * per_roi).map(|i| (i % per_roi) as i32).collect();
    Ok(vec![
        Value::Tensor(out_tensor(ctx, out, &[r.k, c_out, ph, pw])?),
        Value::Tensor(int32_tensor(ctx, mapping, &[r.k, c_out, ph, pw])?),
    ])
}

fn ps_roi_pool(ctx: &mut Ctx) -> OpResult {
    if ctx.tensor("input")?.dtype == Dtype::Float64 {
        ps_roi_pool_t::<f64>(ctx)
    } else {
        ps_roi_pool_t::<f32>(ctx)
    }
}

/// torch's descending order of scores, stable, NaN first (as `sort`).
fn descending<T: Real>(scores: &[T]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (scores[a].wide(), scores[b].wide());
        match (x.is_nan(), y.is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            _ => y.partial_cmp(&x).unwrap_or(std::cmp::Ordering::Equal),
        }
    });
    order
}

fn nms_t<T: Real>(ctx: &Ctx) -> Result<Vec<i64>> {
    let dets = ctx.tensor("dets")?;
    let scores = ctx.tensor("scores")?;
    if dets.rank() != 2 || dets.dims()[1] != 4 {
        return Err(Error::bad_input(format!(
            "dets has shape {:?}, must be [N, 4] (x1, y1, x2, y2)",
            dets.dims()
        )));
    }
    if scores.rank() != 1 || scores.dims()[0] != dets.dims()[0] {
        return Err(Error::bad_input(format!(
            "scores has shape {:?}, must be [{}] (one score a box)",
            scores.dims(),
            dets.dims()[0]
        )));
    }
    if dets.dtype != scores.dtype {
        return Err(Error::bad_input(format!(
            "dets is {} and scores {}: torchvision needs one dtype",
            dets.dtype.torch_name(),
            scores.dtype.torch_name()
        )));
    }
    let threshold = ctx.float("iou_threshold")?;
    let b: Vec<T> = host_as(&dets)?;
    let s: Vec<T> = host_as(&scores)?;
    let n = s.len();
    let areas: Vec<T> = (0..n)
        .map(|i| (b[4 * i + 2] - b[4 * i]) * (b[4 * i + 3] - b[4 * i + 1]))
        .collect();
    let order = descending(&s);
    let mut suppressed = vec![false; n];
    let mut keep = Vec::new();
    let max = |a: T, c: T| if c > a { c } else { a };
    let min = |a: T, c: T| if c < a { c } else { a };
    let zero = T::of(0.0);
    for (at, &i) in order.iter().enumerate() {
        if suppressed[i] {
            continue;
        }
        keep.push(i as i64);
        let bi = &b[4 * i..4 * i + 4];
        for &j in &order[at + 1..] {
            if suppressed[j] {
                continue;
            }
            let bj = &b[4 * j..4 * j + 4];
            // std::max(a, b) returns a unless a < b; std::min(a, b) a unless b < a
            let (xx1, yy1) = (max(bi[0], bj[0]), max(bi[1], bj[1]));
            let (xx2, yy2) = (min(bi[2], bj[2]), min(bi[3], bj[3]));
            let iw = max(zero, xx2 - xx1);
            let ih = max(zero, yy2 - yy1);
            let inter = iw * ih;
            let ovr = inter / (areas[i] + areas[j] - inter);
            if ovr.wide() > threshold {
                suppressed[j] = true;
            }
        }
    }
    Ok(keep)
}

fn nms(ctx: &mut Ctx) -> OpResult {
    let keep = if ctx.tensor("dets")?.dtype == Dtype::Float64 {
        nms_t::<f64>(ctx)?
    } else {
        nms_t::<f32>(ctx)?
    };
    let k = keep.len();
    let t = CandleTensor::from_vec(keep, k, ctx.device())?;
    one(Tensor::new(t, Dtype::Int64))
}

/// torchvision's deformable sample: zero outside `(-1, h) x (-1, w)`,
/// each of the four corners read only where it lies inside.
fn deform_sample<T: Real>(plane: &[T], h: usize, w: usize, y: T, x: T) -> T {
    let (yw, xw) = (y.wide(), x.wide());
    if yw <= -1.0 || h as f64 <= yw || xw <= -1.0 || w as f64 <= xw {
        return T::of(0.0);
    }
    let (h_low, w_low) = (yw.floor() as i64, xw.floor() as i64);
    let (h_high, w_high) = (h_low + 1, w_low + 1);
    let lh = y - T::of(h_low as f64);
    let lw = x - T::of(w_low as f64);
    let one = T::of(1.0);
    let (hh, hw) = (one - lh, one - lw);
    let (hi, wi) = (h as i64, w as i64);
    let at = |yy: i64, xx: i64| plane[(yy * wi + xx) as usize];
    let zero = T::of(0.0);
    let v1 = if h_low >= 0 && w_low >= 0 { at(h_low, w_low) } else { zero };
    let v2 = if h_low >= 0 && w_high < wi { at(h_low, w_high) } else { zero };
    let v3 = if h_high < hi && w_low >= 0 { at(h_high, w_low) } else { zero };
    let v4 = if h_high < hi && w_high < wi { at(h_high, w_high) } else { zero };
    hh * hw * v1 + hh * lw * v2 + lh * hw * v3 + lh * lw * v4
}

fn deform_conv2d_t<T: Real>(ctx: &Ctx) -> Result<Tensor> {
    let x = ctx.tensor("input")?;
    let wt = ctx.tensor("weight")?;
    let off = ctx.tensor("offset")?;
    let mask = ctx.tensor("mask")?;
    let bias = ctx.tensor("bias")?;
    let use_mask = ctx.bool("use_mask")?;
    let (&[b, c, h, w], &[o, cg, kh, kw]) = (x.dims(), wt.dims()) else {
        return Err(Error::bad_input(format!(
            "input {:?} and weight {:?} must both have rank 4",
            x.dims(),
            wt.dims()
        )));
    };
    let get = |n: &str| ctx.int(n);
    let (sh, sw) = (get("stride_h")?, get("stride_w")?);
    let (pad_h, pad_w) = (get("pad_h")?, get("pad_w")?);
    let (dh, dw) = (get("dilation_h")?, get("dilation_w")?);
    let (groups, og) = (get("groups")?, get("offset_groups")?);
    if sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 || groups <= 0 || og <= 0 {
        return Err(Error::bad_input(
            "stride, dilation, groups and offset_groups must be positive",
        ));
    }
    let (groups, og) = (groups as usize, og as usize);
    let out_dim = |size: usize, pad: i64, dil: i64, k: usize, s: i64| {
        (size as i64 + 2 * pad - (dil * (k as i64 - 1) + 1)) / s + 1
    };
    let (oh, ow) = (out_dim(h, pad_h, dh, kh, sh), out_dim(w, pad_w, dw, kw, sw));
    if oh <= 0 || ow <= 0 || cg * groups != c || o % groups != 0 || c % og != 0 {
        return Err(Error::bad_input(format!(
            "deform_conv2d: input {:?}, weight {:?}, groups {groups}, offset_groups {og}: \
             the output is {oh} x {ow}, or channels do not divide into the groups",
            x.dims(),
            wt.dims()
        )));
    }
    let (oh, ow) = (oh as usize, ow as usize);
    if off.dims() != [b, og * 2 * kh * kw, oh, ow] {
        return Err(Error::bad_input(format!(
            "offset has shape {:?}, must be [{b}, {}, {oh}, {ow}]",
            off.dims(),
            og * 2 * kh * kw
        )));
    }
    if use_mask && mask.dims() != [b, og * kh * kw, oh, ow] {
        return Err(Error::bad_input(format!(
            "mask has shape {:?}, must be [{b}, {}, {oh}, {ow}]",
            mask.dims(),
            og * kh * kw
        )));
    }
    if bias.dims() != [o] {
        return Err(Error::bad_input(format!("bias has shape {:?}, must be [{o}]", bias.dims())));
    }
    ctx.check_alloc(&[b, o, oh, ow], Dtype::Float32)?;
    let input: Vec<T> = host_as(&x)?;
    let weight: Vec<T> = host_as(&wt)?;
    let offset: Vec<T> = host_as(&off)?;
    let mask: Vec<T> = if use_mask { host_as(&mask)? } else { Vec::new() };
    let bias: Vec<T> = host_as(&bias)?;
    let (taps, pix) = (kh * kw, oh * ow);
    let c_per_og = c / og;
    let o_per_g = o / groups;
    let mut out = vec![T::of(0.0); b * o * pix];
    crate::kernels::threads::par_chunks(&mut out, o * pix, |bi, part| {
        // the columns of image bi: [c * taps, pix]
        let mut cols = vec![T::of(0.0); c * taps * pix];
        for ci in 0..c {
            let g = ci / c_per_og;
            let plane = &input[(bi * c + ci) * h * w..(bi * c + ci + 1) * h * w];
            let offs = &offset[(bi * og + g) * 2 * taps * pix..];
            for i in 0..kh {
                for j in 0..kw {
                    let t = i * kw + j;
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let p = oy * ow + ox;
                            let m = if use_mask {
                                mask[(bi * og + g) * taps * pix + t * pix + p]
                            } else {
                                T::of(1.0)
                            };
                            let y = T::of(((oy as i64) * sh - pad_h + i as i64 * dh) as f64) + offs[2 * t * pix + p];
                            let x = T::of(((ox as i64) * sw - pad_w + j as i64 * dw) as f64) + offs[(2 * t + 1) * pix + p];
                            cols[(ci * taps + t) * pix + p] = m * deform_sample(plane, h, w, y, x);
                        }
                    }
                }
            }
        }
        // weight [o, cg * taps] times columns [cg * taps, pix] per group, plus bias
        for oc in 0..o {
            let g = oc / o_per_g;
            let row = &weight[oc * cg * taps..(oc + 1) * cg * taps];
            let dst = &mut part[oc * pix..(oc + 1) * pix];
            for (kk, &wv) in row.iter().enumerate() {
                let col = &cols[(g * cg * taps + kk) * pix..(g * cg * taps + kk + 1) * pix];
                for (d, &v) in dst.iter_mut().zip(col) {
                    *d += wv * v;
                }
            }
            for d in dst.iter_mut() {
                *d += bias[oc];
            }
        }
    });
    out_tensor(ctx, out, &[b, o, oh, ow])
}

fn deform_conv2d(ctx: &mut Ctx) -> OpResult {
    let t = if ctx.tensor("input")?.dtype == Dtype::Float64 {
        deform_conv2d_t::<f64>(ctx)?
    } else {
        deform_conv2d_t::<f32>(ctx)?
    };
    one(t)
}

/// `_cuda_version`: torchvision's import-time check that its CUDA build
/// matches torch's, traced into graphs that call its ops; the graph keeps
/// no result (`None`), so the row computes none.
fn cuda_version(ctx: &mut Ctx) -> OpResult {
    Ok(ctx.node.outputs.iter().map(|_| Value::None).collect())
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    (torchvision::ROI_ALIGN, roi_align),
    (torchvision::ROI_POOL, roi_pool),
    (torchvision::PS_ROI_ALIGN, ps_roi_align),
    (torchvision::PS_ROI_POOL, ps_roi_pool),
    (torchvision::NMS, nms),
    (torchvision::DEFORM_CONV2D, deform_conv2d),
    (torchvision::_CUDA_VERSION, cuda_version),
];
