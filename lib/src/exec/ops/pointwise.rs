//! Elementwise arithmetic, comparisons, logic and math functions: the executor rows.

use crate::ir::op::{aten, quantized_decomposed};
use super::*;

/// An elementwise operand: a tensor or a Python number.
enum Operand {
    Tensor(Tensor),
    S(Num),
}

impl Operand {
    fn from_rv(v: Value) -> Result<Operand> {
        if let Some(n) = Num::of(&v) {
            return Ok(Operand::S(n));
        }
        match v {
            Value::Tensor(t) => Ok(Operand::Tensor(t)),
            other => Err(Error::bad_input(format!(
                "expected a tensor or a number, found {other:?}"
            ))),
        }
    }

    fn key(&self) -> (Dtype, Rank) {
        match self {
            Operand::Tensor(t) if t.rank() == 0 => (t.dtype, Rank::ZeroDim),
            Operand::Tensor(t) => (t.dtype, Rank::Dim),
            Operand::S(n) => (n.dtype(), Rank::Scalar),
        }
    }

    fn dims(&self) -> &[usize] {
        match self {
            Operand::Tensor(t) => t.dims(),
            Operand::S(_) => &[],
        }
    }

    fn as_tensor(&self, dtype: Dtype, dev: &candle_core::Device) -> Result<CandleTensor> {
        match self {
            Operand::Tensor(t) => Ok(t.cast(dtype)?.t),
            Operand::S(v) => Ok(scalar_tensor(*v, dtype, dev)?.t),
        }
    }

    /// The values as `dtype` holds them, exactly ([`Elems`]).
    fn elems_as(&self, dtype: Dtype) -> Result<Elems> {
        match self {
            Operand::Tensor(t) => elems(&t.cast(dtype)?),
            Operand::S(v) => Ok(Elems::filled(1, *v, dtype)),
        }
    }
}

/// `f` over two operands broadcast, on the host, exactly: in `compute`
/// (each operand converted to it first, as torch's kernels convert), the
/// result a tensor of `out` (integers wrapped to its width).
fn host_map2(
    ctx: &Ctx,
    a: &Operand,
    b: &Operand,
    compute: Dtype,
    out: Dtype,
    fi: impl Fn(i64, i64) -> Result<i64>,
    ff: impl Fn(f64, f64) -> f64,
) -> OpResult {
    let shape = broadcast_shape(&[a.dims(), b.dims()])?;
    let x = broadcast_elems(&a.elems_as(compute)?, a.dims(), &shape);
    let y = broadcast_elems(&b.elems_as(compute)?, b.dims(), &shape);
    let r = match (x, y) {
        (Elems::I(x), Elems::I(y)) => Elems::I(
            x.iter()
                .zip(&y)
                .map(|(p, q)| fi(*p, *q))
                .collect::<Result<_>>()?,
        ),
        (x, y) => Elems::F(
            x.into_f64()
                .iter()
                .zip(y.into_f64())
                .map(|(p, q)| ff(*p, q))
                .collect(),
        ),
    };
    one(from_elems(r, &shape, out, ctx.device())?)
}

#[derive(Clone, Copy, PartialEq)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Xor,
}

/// Whether a float binary op's result should be NaN where an operand
/// is: torch's maximum and minimum propagate NaN.
fn propagates_nan(op: Bin) -> bool {
    matches!(op, Bin::Max | Bin::Min)
}

/// A binary op over integer or bool operands, exactly (host `i64`,
/// wrapping as torch's kernels wrap; see [`exact`]): arithmetic in
/// `compute`'s width, comparisons and logical ops as bools.
fn int_binary_on(ctx: &Ctx, a: &Operand, b: &Operand, op: Bin, alpha: Num, compute: Dtype) -> OpResult {
    let k = alpha.as_i64();
    let out = match op {
        Bin::Eq | Bin::Ne | Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge | Bin::And | Bin::Or | Bin::Xor => Dtype::Bool,
        _ => compute,
    };
    let f = move |x: i64, y: i64| -> Result<i64> {
        Ok(match op {
            Bin::Add => x.wrapping_add(y.wrapping_mul(k)),
            Bin::Sub => x.wrapping_sub(y.wrapping_mul(k)),
            Bin::Mul => x.wrapping_mul(y),
            Bin::Div => trunc_div(x, y)?,
            Bin::Max => x.max(y),
            Bin::Min => x.min(y),
            Bin::Pow => int_pow(x, y),
            Bin::Eq => (x == y) as i64,
            Bin::Ne => (x != y) as i64,
            Bin::Lt => (x < y) as i64,
            Bin::Le => (x <= y) as i64,
            Bin::Gt => (x > y) as i64,
            Bin::Ge => (x >= y) as i64,
            Bin::And => (x != 0 && y != 0) as i64,
            Bin::Or => (x != 0 || y != 0) as i64,
            Bin::Xor => ((x != 0) != (y != 0)) as i64,
        })
    };
    host_map2(ctx, a, b, compute, out, f, |_, _| f64::NAN)
}

fn binary_on(ctx: &Ctx, a: Value, b: Value, op: Bin, alpha: Option<Num>) -> OpResult {
    let a = Operand::from_rv(a)?;
    let b = Operand::from_rv(b)?;
    let dev = ctx.device();
    let result = result_type(&[a.key(), b.key()]);
    let compute = match op {
        Bin::Div if !result.is_floating() => Dtype::Float32,
        _ => result,
    };
    if !compute.is_floating() {
        // exact: comparisons and logic of two tensors of one storage type
        // (no conversion, no overflow) stay candle's; the rest on the host
        let plain = |o: &Operand| matches!(o, Operand::Tensor(t) if storage_dtype(t.dtype).ok() == storage_dtype(compute).ok());
        let cmp = matches!(op, Bin::Eq | Bin::Ne | Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge);
        if !(cmp && plain(&a) && plain(&b)) {
            return int_binary_on(ctx, &a, &b, op, alpha.unwrap_or(Num::Int(1)), compute);
        }
    }
    let alpha = alpha.map(Num::as_f64);
    // powers by IEEE pow (pow(x, 0) = 1 and pow(1, y) = 1 with NaN, a
    // negative base to an integer power: torch's), and a scaled second
    // operand fused (a - k*b in one rounding, as torch's vectorised
    // kernels: a product that overflows alone does not)
    if op == Bin::Pow || (matches!(op, Bin::Add | Bin::Sub) && alpha.is_some_and(|k| k != 1.0) && compute != Dtype::Float32) {
        let k = alpha.unwrap_or(1.0);
        let k = if op == Bin::Sub { -k } else { k };
        let f = move |x: f64, y: f64| if op == Bin::Pow { x.powf(y) } else { y.mul_add(k, x) };
        if compute == Dtype::Float64 {
            return host_map2(ctx, &a, &b, compute, compute, no_int, f);
        }
        // float32 arithmetic for float32 and narrower (widened) operands
        let g = move |x: f64, y: f64| if op == Bin::Pow { (x as f32).powf(y as f32) as f64 } else { (y as f32).mul_add(k as f32, x as f32) as f64 };
        return host_map2(ctx, &a, &b, compute, compute, no_int, g);
    }
    // torch fuses a scaled operand in float32 and float64 (one rounding)
    // but not in float16 and bfloat16, computed in float32 from their
    // values: `k * b` overflows alone there, as it does here widened
    let fused = !matches!(ctx.recorded_dtype(0), Some(Dtype::Float16 | Dtype::BFloat16));
    if compute == Dtype::Float32 {
        if let Some(t) = binary_f32(&a, &b, op, alpha.unwrap_or(1.0), fused)? {
            return one(t);
        }
    }
    let x = a.as_tensor(compute, dev)?;
    let mut y = b.as_tensor(compute, dev)?;
    if let Some(alpha) = alpha.filter(|a| *a != 1.0) {
        y = y
            .broadcast_mul(&scalar_tensor(Num::Float(alpha), compute, dev)?.t)?;
    }
    let logical = |t: &CandleTensor| t.ne(0f64);
    let t = match op {
        Bin::Add => x.broadcast_add(&y),
        Bin::Sub => x.broadcast_sub(&y),
        Bin::Mul => x.broadcast_mul(&y),
        Bin::Div => x.broadcast_div(&y),
        Bin::Max => x.broadcast_maximum(&y),
        Bin::Min => x.broadcast_minimum(&y),
        Bin::Pow => x.broadcast_pow(&y),
        Bin::Eq => x.broadcast_eq(&y),
        Bin::Ne => x.broadcast_ne(&y),
        Bin::Lt => x.broadcast_lt(&y),
        Bin::Le => x.broadcast_le(&y),
        Bin::Gt => x.broadcast_gt(&y),
        Bin::Ge => x.broadcast_ge(&y),
        Bin::And | Bin::Or | Bin::Xor => {
            // logical_*: nonzero is true whatever the dtype (the bitwise
            // ops on integers go through `bitwise` instead)
            let (p, q) = (logical(&x)?, logical(&y)?);
            match op {
                Bin::And => p.broadcast_mul(&q),
                Bin::Or => p.broadcast_maximum(&q),
                _ => p.broadcast_ne(&q),
            }
        }
    }?;
    // NaN where either operand is NaN (candle's maximum keeps the other)
    let t = if compute.is_floating() && propagates_nan(op) {
        let nan = x.ne(&x).and_then(|p| p.broadcast_maximum(&y.ne(&y)?))?;
        nan.where_cond(&x.broadcast_add(&y)?, &t)?
    } else {
        t
    };
    let out_dtype = match op {
        Bin::Eq
        | Bin::Ne
        | Bin::Lt
        | Bin::Le
        | Bin::Gt
        | Bin::Ge
        | Bin::And
        | Bin::Or
        | Bin::Xor => Dtype::Bool,
        _ => compute,
    };
    one(Tensor::new(t, out_dtype))
}

/// A float32 binary op on the host by [`vmath`]'s vectorised loops, split
/// over the threads: two tensors of one shape, or a tensor and a number (or
/// a one-element tensor). IEEE arithmetic and comparisons only (their
/// result is the same as candle's; max/min differ on NaN and stay there).
/// `None` where it does not apply: candle's broadcasting path runs.
fn binary_f32(a: &Operand, b: &Operand, op: Bin, alpha: f64, fused: bool) -> Result<Option<Tensor>> {
    if !matches!(
        op,
        Bin::Add
            | Bin::Sub
            | Bin::Mul
            | Bin::Div
            | Bin::Max
            | Bin::Min
            | Bin::Eq
            | Bin::Ne
            | Bin::Lt
            | Bin::Le
            | Bin::Gt
            | Bin::Ge
    ) {
        return Ok(None);
    }
    let host = |o: &Operand| match o {
        Operand::Tensor(t) => t.dtype == Dtype::Float32 && t.t.device().is_cpu(),
        Operand::S(_) => true,
    };
    if !host(a) || !host(b) {
        return Ok(None);
    }
    let k = alpha as f32;
    // the op chosen here, once: each arm's closure is its own instance of
    // the loops below, which the compiler vectorises (one closure matching
    // on the op per element was a scalar loop through a jump table:
    // MobileNetV3's squeeze-excite scales, channels-last, 5x ONNX
    // Runtime's time at batch 8)
    let no_arith = |_: f32, _: f32| f32::NAN;
    let no_cmp = |_: f32, _: f32| 0u8;
    macro_rules! arith {
        ($f:expr) => {
            binary_f32_by(a, b, false, $f, no_cmp)
        };
    }
    macro_rules! cmp {
        ($f:expr) => {
            binary_f32_by(a, b, true, no_arith, move |x: f32, y: f32| $f(x, y) as u8)
        };
    }
    // NaN from either side, as torch's maximum and minimum
    let max = |x: f32, y: f32| if x.is_nan() || y.is_nan() { f32::NAN } else { x.max(y) };
    let min = |x: f32, y: f32| if x.is_nan() || y.is_nan() { f32::NAN } else { x.min(y) };
    match op {
        // (a scale fused, as torch's kernels: one rounding)
        Bin::Add if k == 1.0 => arith!(|x: f32, y: f32| x + y),
        Bin::Sub if k == 1.0 => arith!(|x: f32, y: f32| x - y),
        Bin::Add if !fused => arith!(move |x: f32, y: f32| x + y * k),
        Bin::Sub if !fused => arith!(move |x: f32, y: f32| x - y * k),
        Bin::Add => arith!(move |x: f32, y: f32| y.mul_add(k, x)),
        Bin::Sub => arith!(move |x: f32, y: f32| y.mul_add(-k, x)),
        Bin::Mul => arith!(|x: f32, y: f32| x * y),
        Bin::Max => arith!(max),
        Bin::Min => arith!(min),
        Bin::Div => arith!(|x: f32, y: f32| x / y),
        Bin::Eq => cmp!(|x: f32, y: f32| x == y),
        Bin::Ne => cmp!(|x: f32, y: f32| x != y),
        Bin::Lt => cmp!(|x: f32, y: f32| x < y),
        Bin::Le => cmp!(|x: f32, y: f32| x <= y),
        Bin::Gt => cmp!(|x: f32, y: f32| x > y),
        _ => cmp!(|x: f32, y: f32| x >= y),
    }
}

/// [`binary_f32`] with its op as `arith` (`is_cmp` false) or `cmp`
/// (true): the other is never called.
fn binary_f32_by(
    a: &Operand,
    b: &Operand,
    is_cmp: bool,
    arith: impl Fn(f32, f32) -> f32 + Copy + Send + Sync,
    cmp: impl Fn(f32, f32) -> u8 + Copy + Send + Sync,
) -> Result<Option<Tensor>> {
    use crate::kernels::vmath::{map2, map2_blocks, map_to};
    // a one-element tensor or a number: its value and rank
    let single = |o: &Operand| -> Result<Option<(f32, usize)>> {
        Ok(match o {
            Operand::S(v) => Some((v.as_f64() as f32, 0)),
            Operand::Tensor(t) if t.t.elem_count() == 1 => {
                let v = t.t.flatten_all().and_then(|t| t.to_vec1::<f32>())?;
                Some((v[0], t.rank()))
            }
            Operand::Tensor(_) => None,
        })
    };
    let dev = candle_core::Device::Cpu;
    let out = |shape: &[usize], f: Vec<f32>, c: Vec<u8>| -> Result<Tensor> {
        Ok(if is_cmp {
            Tensor::new(CandleTensor::from_vec(c, shape, &dev)?, Dtype::Bool)
        } else {
            Tensor::new(CandleTensor::from_vec(f, shape, &dev)?, Dtype::Float32)
        })
    };
    if let (Operand::Tensor(x), Operand::Tensor(y), false) = (a, b, is_cmp) {
        if x.dims() == y.dims() && (!x.t.is_contiguous() || !y.t.is_contiguous()) {
            if let Some(t) = rows_binary(x, y, arith)? {
                return Ok(Some(t));
            }
        }
    }
    let result = match (a, b, single(a)?, single(b)?) {
        // two tensors of one shape, read where they lie when contiguous
        (Operand::Tensor(x), Operand::Tensor(y), None, None) if x.dims() == y.dims() => {
            with_host::<f32, _>(&x.t, |xs| {
                with_host::<f32, _>(&y.t, |ys| {
                    if is_cmp {
                        out(x.dims(), Vec::new(), map2(xs, ys, cmp))
                    } else {
                        out(x.dims(), map2(xs, ys, arith), Vec::new())
                    }
                })
            })
            .flatten()
        }
        // one tensor broadcast over the other's trailing dims
        (Operand::Tensor(x), Operand::Tensor(y), None, None) => {
            let (big, small, swapped) = if x.t.elem_count() >= y.t.elem_count() {
                (x, y, false)
            } else {
                (y, x, true)
            };
            if !is_cmp {
                if let Some(t) = channels_last_by_channel(big, small, swapped, arith)? {
                    return Ok(Some(t));
                }
            }
            match trailing_broadcast(big.dims(), small.dims()) {
                Some(inner) => with_host::<f32, _>(&big.t, |bs| {
                    with_host::<f32, _>(&small.t, |ss| {
                        let (dims, f, c) = match (is_cmp, swapped) {
                            (false, false) => (big.dims(), map2_blocks(bs, ss, inner, arith), Vec::new()),
                            (false, true) => (big.dims(), map2_blocks(bs, ss, inner, move |p, q| arith(q, p)), Vec::new()),
                            (true, false) => (big.dims(), Vec::new(), map2_blocks(bs, ss, inner, cmp)),
                            (true, true) => (big.dims(), Vec::new(), map2_blocks(bs, ss, inner, move |p, q| cmp(q, p))),
                        };
                        out(dims, f, c)
                    })
                })
                .flatten(),
                None => None,
            }
        }
        // a permuted view and a number: in the view's storage order
        (Operand::Tensor(x), _, None, Some((v, r))) if r <= x.rank() && !is_cmp && !x.t.is_contiguous() => {
            match map_in_storage_order(x, move |e| arith(e, v))? {
                Some(t) => Some(Ok(t)),
                None => with_host::<f32, _>(&x.t, |xs| out(x.dims(), map_to(xs, |e| arith(e, v)), Vec::new())),
            }
        }
        // a tensor and a number (or a one-element tensor of no higher rank)
        (Operand::Tensor(x), _, None, Some((v, r))) if r <= x.rank() => with_host::<f32, _>(&x.t, |xs| {
            if is_cmp {
                out(x.dims(), Vec::new(), map_to(xs, |e| cmp(e, v)))
            } else {
                out(x.dims(), map_to(xs, |e| arith(e, v)), Vec::new())
            }
        }),
        (_, Operand::Tensor(y), Some((v, r)), None) if r <= y.rank() => with_host::<f32, _>(&y.t, |ys| {
            if is_cmp {
                out(y.dims(), Vec::new(), map_to(ys, |e| cmp(v, e)))
            } else {
                out(y.dims(), map_to(ys, |e| arith(v, e)), Vec::new())
            }
        }),
        _ => None,
    };
    result.transpose()
}

/// `f(x, y)` over two float32 host tensors of one shape, at least one of
/// them a strided view, whose last dims are contiguous (stride 1, none
/// broadcast): row by row of the last dim, each operand's row read where
/// it lies, the rows split over the threads, into a contiguous result.
/// Before, both went through candle's element-by-element strided copies:
/// ViT-B/16's twelve residual adds of its sequence-first stream
/// transposed, `[8, 197, 768]` rows 6144 floats apart, took 0.6-1.2 ms
/// each at batch 8. `None` for other layouts.
fn rows_binary(x: &Tensor, y: &Tensor, f: impl Fn(f32, f32) -> f32 + Sync) -> Result<Option<Tensor>> {
    let host = |t: &Tensor| t.dtype == Dtype::Float32 && t.t.device().is_cpu();
    // (no dim broadcast: a stride 0 would read one row for many)
    let dense = |t: &Tensor| t.dims().iter().zip(t.t.stride()).all(|(&d, &s)| d <= 1 || s > 0);
    if x.dims() != y.dims() || !host(x) || !host(y) || !dense(x) || !dense(y) {
        return Ok(None);
    }
    let (Some(xr), Some(yr)) = (RowLayout::of(&x.t), RowLayout::of(&y.t)) else {
        return Ok(None);
    };
    let (xs, _) = x.t.storage_and_layout();
    let (ys, _) = y.t.storage_and_layout();
    let (candle_core::Storage::Cpu(xc), candle_core::Storage::Cpu(yc)) = (&*xs, &*ys) else {
        return Ok(None);
    };
    let (Ok(xall), Ok(yall)) = (xc.as_slice::<f32>(), yc.as_slice::<f32>()) else {
        return Ok(None);
    };
    if !xr.fits(xall.len()) || !yr.fits(yall.len()) {
        return Ok(None);
    }
    let inner = xr.inner();
    let mut out = sgemm::uninit(xr.count() * inner);
    crate::kernels::threads::par_chunks(&mut out, inner, |i, dst| {
        let (a, b) = (xr.start(i), yr.start(i));
        for ((d, &p), &q) in dst.iter_mut().zip(&xall[a..a + inner]).zip(&yall[b..b + inner]) {
            d.write(f(p, q));
        }
    });
    drop((xs, ys));
    // SAFETY: every row was written above
    let out = unsafe { sgemm::assume_init(out) };
    Ok(Some(Tensor::new(host_f32_tensor(out, x.dims())?, Dtype::Float32)))
}

/// `f(x, s)` (`f(s, x)` where `swapped`) of a float32 `x` stored
/// channels-last ([`channels_last_dims`]) and `s` one value per channel
/// (`[c, 1, 1]`, `[1, c, 1, 1]` or `[b, c, 1, 1]`: a squeeze-and-excitation
/// block's scales), left channels-last: each pixel's channels against its
/// image's values, no copy of `x` into planes first. `None` for other
/// operands.
fn channels_last_by_channel(
    x: &Tensor,
    s: &Tensor,
    swapped: bool,
    f: impl Fn(f32, f32) -> f32 + Copy + Sync,
) -> Result<Option<Tensor>> {
    let Some([b, c, h, w]) = channels_last_dims(&x.t) else {
        return Ok(None);
    };
    let sd = s.dims();
    if sd.len() > 4 || s.dtype != Dtype::Float32 {
        return Ok(None);
    }
    let mut padded = vec![1; 4 - sd.len()];
    padded.extend_from_slice(sd);
    if padded[1] != c || padded[2] != 1 || padded[3] != 1 || (padded[0] != 1 && padded[0] != b) {
        return Ok(None);
    }
    let (per_image, n) = (padded[0] == b && b > 1, h * w);
    let out = with_channels_last(&x.t, |xs| {
        with_host::<f32, _>(&s.t, |ss| {
            let mut out = sgemm::uninit(b * n * c);
            // pixels `[p0, p0 + len)` of the batch (rows of c)
            let rows = |p0: usize, dst: &mut [std::mem::MaybeUninit<f32>]| {
                for (j, (dp, xp)) in dst.chunks_exact_mut(c).zip(xs[p0 * c..].chunks_exact(c)).enumerate() {
                    let i = (p0 + j) / n;
                    let sv = &ss[if per_image { i * c } else { 0 }..][..c];
                    if swapped {
                        crate::kernels::vmath::map2_here(xp, sv, dp, move |a, v| f(v, a));
                    } else {
                        crate::kernels::vmath::map2_here(xp, sv, dp, f);
                    }
                }
            };
            let per = (crate::kernels::vmath::PARALLEL_MIN / c.max(1)).max(1);
            if out.len() < 2 * crate::kernels::vmath::PARALLEL_MIN {
                rows(0, &mut out);
            } else {
                crate::kernels::threads::par_chunks(&mut out, per * c, |t, dst| rows(t * per, dst));
            }
            // SAFETY: every pixel's channels were written above
            unsafe { sgemm::assume_init(out) }
        })
    })
    .flatten();
    match out {
        Some(v) => Ok(Some(Tensor::new(channels_last_tensor(v, [b, c, h, w])?, Dtype::Float32))),
        None => Ok(None),
    }
}

/// Where `small` broadcast to `big` (of no lower rank) is constant over
/// whole blocks of `big`'s trailing dims: the block's size. `small`'s
/// dims, right-aligned, equal `big`'s up to its last dim that is not 1,
/// and are 1 after it (`[c, 1, 1]` of `[n, c, h, w]` only when `n` is 1;
/// `[n, c, 1, 1]` of `[n, c, h, w]`).
fn trailing_broadcast(big: &[usize], small: &[usize]) -> Option<usize> {
    if small.len() > big.len() || small.iter().product::<usize>() == 0 {
        return None;
    }
    let mut padded = vec![1; big.len() - small.len()];
    padded.extend_from_slice(small);
    let last = padded.iter().rposition(|&d| d != 1).unwrap_or(0);
    (padded[..=last] == big[..=last] && padded[last + 1..].iter().all(|&d| d == 1))
        .then(|| big[last + 1..].iter().product())
}

fn binary(ctx: &mut Ctx, op: Bin) -> OpResult {
    let a = ctx.value("self")?;
    let b = ctx.value("other")?;
    let alpha = ctx.opt_num("alpha")?;
    binary_on(ctx, a, b, op, alpha)
}

macro_rules! binary_ops {
    ($($name:ident => $op:expr;)*) => { $( pub(super) fn $name(ctx: &mut Ctx) -> OpResult { binary(ctx, $op) } )* };
}

/// `a * b` for other families' rows (torch's promotion, exact integers).
pub(super) fn mul_by(ctx: &Ctx, a: Value, b: Value) -> OpResult {
    binary_on(ctx, a, b, Bin::Mul, None)
}

binary_ops! {
    add => Bin::Add;
    sub => Bin::Sub;
    mul => Bin::Mul;
    maximum => Bin::Max;
    minimum => Bin::Min;
    eq => Bin::Eq;
    ne => Bin::Ne;
    lt => Bin::Lt;
    le => Bin::Le;
    gt => Bin::Gt;
    ge => Bin::Ge;
    logical_and => Bin::And;
    logical_or => Bin::Or;
    logical_xor => Bin::Xor;
}

/// Integer division with a rounding mode, exact ([`exact::floor_div`],
/// [`exact::trunc_div`]); a zero divisor is an error, as torch's
/// `ZeroDivisionError`.
fn int_div(ctx: &Ctx, a: &Operand, b: &Operand, result: Dtype, floor: bool) -> OpResult {
    let f = if floor { floor_div } else { trunc_div };
    host_map2(ctx, a, b, result, result, f, |_, _| f64::NAN)
}

fn div(ctx: &mut Ctx) -> OpResult {
    let a = ctx.value("self")?;
    let b = ctx.value("other")?;
    let mode = ctx.string("rounding_mode")?;
    if let Some(m @ ("floor" | "trunc")) = mode.as_deref() {
        let (x, y) = (Operand::from_rv(a.clone())?, Operand::from_rv(b.clone())?);
        let result = result_type(&[x.key(), y.key()]);
        if !result.is_floating() && result != Dtype::Bool {
            return int_div(ctx, &x, &y, result, m == "floor");
        }
    }
    if mode.as_deref() == Some("floor") {
        let (x, y) = (Operand::from_rv(a.clone())?, Operand::from_rv(b.clone())?);
        let result = result_type(&[x.key(), y.key()]);
        if result.is_floating() {
            // torch's div_floor_floating: through fmod, exact where
            // floor(a / b) would round the quotient up to an integer
            if result == Dtype::Float64 {
                return host_map2(ctx, &x, &y, result, result, no_int, floor_divide_f64);
            }
            let f = |p: f64, q: f64| floor_divide_f32(p as f32, q as f32) as f64;
            return host_map2(ctx, &x, &y, result, result, no_int, f);
        }
    }
    let out = binary_on(ctx, a, b, Bin::Div, None)?;
    match ctx.string("rounding_mode")?.as_deref() {
        None => Ok(out),
        Some(mode) => {
            let Value::Tensor(t) = &out[0] else {
                unreachable!()
            };
            let a = Operand::from_rv(ctx.value("self")?)?;
            let b = Operand::from_rv(ctx.value("other")?)?;
            let result = result_type(&[a.key(), b.key()]);
            let r = match mode {
                "floor" => t.t.floor(),
                "trunc" => {
                    // the quotient as the graph's dtype holds it first
                    // (torch divides float16 in float16, then truncates)
                    let q = match ctx.recorded_dtype(0) {
                        Some(d @ (Dtype::Float16 | Dtype::BFloat16)) if t.dtype == Dtype::Float32 => t.cast(d)?.cast(Dtype::Float32)?.t,
                        _ => t.t.clone(),
                    };
                    q.ge(0f64)
                        .and_then(|p| p.where_cond(&q.floor()?, &q.ceil()?))
                }
                other => return Err(unsupported(format!("rounding_mode {other:?}"))),
            }?;
            one(Tensor::new(r, t.dtype).cast(result)?)
        }
    }
}

macro_rules! floor_divide_float {
    ($name:ident, $t:ty) => {
        /// torch's `div_floor_floating` in this precision.
        fn $name(a: $t, b: $t) -> $t {
            if b == 0.0 {
                return a / b;
            }
            let m = a % b;
            let mut div = (a - m) / b;
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                div -= 1.0;
            }
            if div != 0.0 {
                let mut f = div.floor();
                if div - f > 0.5 {
                    f += 1.0;
                }
                f
            } else {
                (0.0 as $t).copysign(a / b)
            }
        }
    };
}

floor_divide_float!(floor_divide_f64, f64);
floor_divide_float!(floor_divide_f32, f32);

fn pow(ctx: &mut Ctx) -> OpResult {
    let a = ctx.value("self")?;
    let b = ctx.value("exponent")?;
    // A scalar exponent uses powf, which (unlike exp(log(x) * y)) is right
    // for negative bases; the result dtype is torch's.
    if let (Value::Tensor(t), Some(e)) = (&a, Num::of(&b)) {
        let out = result_type(&[(t.dtype, Rank::Dim), (e.dtype(), Rank::Scalar)]);
        if !out.is_floating() {
            // integers: exact, wrapping; torch refuses a negative exponent
            if e.as_i64() < 0 {
                return Err(Error::bad_input(
                    "integers to negative integer powers are not allowed",
                ));
            }
            return int_binary_on(ctx, &Operand::Tensor(t.clone()), &Operand::S(e), Bin::Pow, Num::Int(1), out);
        }
        let e = e.as_f64();
        if e == 2.0 {
            let x = t.cast(out)?.t;
            return one(Tensor::new(x.mul(&x)?, out));
        }
        if e == 3.0 {
            // (x * x) * x in the tensor's dtype, as torch's CPU kernel
            // computes a cube (GPT-2's tanh GELU), not powf through float64
            let x = t.cast(out)?.t;
            return one(Tensor::new(x.mul(&x).and_then(|x2| x2.mul(&x))?, out));
        }
        let r = t
            .cast(out)?
            .t
            .to_dtype(DType::F64)
            .and_then(|x| x.powf(e))?;
        return one(Tensor::new(r, Dtype::Float64).cast(out)?);
    }
    binary_on(ctx, a, b, Bin::Pow, None)
}

fn rsub(ctx: &mut Ctx) -> OpResult {
    let a = ctx.value("self")?;
    let b = ctx.value("other")?;
    let alpha = ctx.opt_num("alpha")?;
    binary_on(ctx, b, a, Bin::Sub, alpha)
}

unary_ops! {
    sin => |t| t.sin();
    cos => |t| t.cos();
    log => |t| t.log();
    sqrt => |t| t.sqrt();
    rsqrt => |t| t.sqrt()?.recip();
    reciprocal => |t| t.recip();
}

vm_unary_ops! {
    exp => vmath::exp, |t| t.exp();
    erf => vmath::erf, |t| t.erf();
}

fn neg(ctx: &mut Ctx) -> OpResult {
    same_dtype_unary(ctx, |t| t.neg(), i64::wrapping_neg)
}

fn abs(ctx: &mut Ctx) -> OpResult {
    same_dtype_unary(ctx, |t| t.abs(), i64::wrapping_abs)
}

fn clamp(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let (lo, hi) = (ctx.opt_num("min")?, ctx.opt_num("max")?);
    let mut keys = vec![(x.dtype, Rank::Dim)];
    keys.extend(lo.iter().chain(&hi).map(|n| (n.dtype(), Rank::Scalar)));
    let out = result_type(&keys);
    if x.dtype == Dtype::Float32 && out == Dtype::Float32 {
        // one vectorised pass; NaN stays NaN (a NaN bound too), and min
        // above max gives max, as torch's
        let (l, h) = (lo.map_or(f32::NEG_INFINITY, |v| v.as_f64() as f32), hi.map_or(f32::INFINITY, |v| v.as_f64() as f32));
        let f = move |v: f32| {
            let v = if v < l || l.is_nan() { l } else { v };
            if v > h || h.is_nan() {
                h
            } else {
                v
            }
        };
        if let Some(v) = with_host::<f32, _>(&x.t, |xs| crate::kernels::vmath::map(xs, f)) {
            return one(Tensor::new(host_f32_tensor(v, x.dims())?, x.dtype));
        }
    }
    // min(max(x, lo), hi), each step NaN-propagating and exact for integers
    let mut v = Value::Tensor(x);
    if let Some(lo) = lo {
        v = binary_on(ctx, v, Value::from_num(lo), Bin::Max, None)?.remove(0);
    }
    if let Some(hi) = hi {
        v = binary_on(ctx, v, Value::from_num(hi), Bin::Min, None)?.remove(0);
    }
    match v {
        Value::Tensor(t) => one(t.cast(out)?),
        other => Ok(vec![other]),
    }
}

fn logical_not(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    // bools and bytes on the host: one pass
    if let Some(v) = with_host::<u8, _>(&x.t, |v| v.iter().map(|&b| (b == 0) as u8).collect::<Vec<u8>>()) {
        return one(Tensor::new(
            CandleTensor::from_vec(v, x.dims(), x.t.device())?,
            Dtype::Bool,
        ));
    }
    one(Tensor::new(x.t.eq(0f64)?, Dtype::Bool))
}

fn where_self(ctx: &mut Ctx) -> OpResult {
    let c = ctx.tensor("condition")?;
    let a = Operand::from_rv(ctx.value("self")?)?;
    let b = Operand::from_rv(ctx.value("other")?)?;
    let dt = result_type(&[a.key(), b.key()]);
    let x = a.as_tensor(dt, ctx.device())?;
    let y = b.as_tensor(dt, ctx.device())?;
    let shape = broadcast_shape(&[c.dims(), x.dims(), y.dims()])?;
    // a condition the same everywhere picks one operand whole: that
    // operand as it is (in the result's dtype, no copy) where it already
    // has the result's shape. The guard of a decomposed scaled-dot-product
    // attention, where(all of a row -inf, 0, softmax), keeps the softmax
    // everywhere: ViT-B/16 at batch 8 spent 10 ms copying it.
    if let Some(all) = uniform_condition(&c) {
        let pick = if all { &x } else { &y };
        if pick.dims() == shape.as_slice() {
            return one(Tensor::new(pick.clone(), dt));
        }
    }
    let t =
        c.t.broadcast_as(shape.clone())
            .and_then(|c| c.where_cond(&x.broadcast_as(shape.clone())?, &y.broadcast_as(shape)?))?;
    one(Tensor::new(t, dt))
}

/// Whether a host condition (bool or uint8) holds everywhere (`Some(true)`)
/// or nowhere (`Some(false)`); `None` where it is mixed, empty or not on
/// the host.
fn uniform_condition(c: &Tensor) -> Option<bool> {
    if !matches!(c.dtype, Dtype::Bool | Dtype::Uint8) {
        return None;
    }
    with_host::<u8, _>(&c.t, |v| {
        let first = *v.first()? != 0;
        v.iter().all(|&b| (b != 0) == first).then_some(first)
    })
    .flatten()
}

fn diff(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if ctx.opt_int("n")?.unwrap_or(1) != 1 {
        return Err(unsupported("diff with n > 1"));
    }
    let d = normalize_dim(ctx.opt_int("dim")?.unwrap_or(-1), x.rank())?;
    let mut parts = Vec::new();
    if let Some(p) = ctx.opt_tensor("prepend")? {
        parts.push(p.cast(x.dtype)?.t);
    }
    parts.push(x.t.clone());
    if let Some(a) = ctx.opt_tensor("append")? {
        parts.push(a.cast(x.dtype)?.t);
    }
    let full = CandleTensor::cat(&parts, d)?;
    let n = full.dims()[d];
    if n == 0 {
        return one(Tensor::new(full, x.dtype));
    }
    let (hi, lo) = (
        full.narrow(d, 1, n - 1)?,
        full.narrow(d, 0, n - 1)?,
    );
    let t = if x.dtype == Dtype::Bool {
        hi.ne(&lo)
    } else {
        hi.sub(&lo)
    }?;
    one(Tensor::new(t, x.dtype))
}

macro_rules! host_unary_ops {
    ($($name:ident => $float:expr, $f:expr, $int:expr;)*) => {
        $( pub(super) fn $name(ctx: &mut Ctx) -> OpResult { host_unary_with(ctx, $float, $f, $int) } )*
    };
}

const SAME: Option<fn(i64) -> i64> = Some(|v| v);

/// acosh without overflow: Rust's `ln(x + sqrt(x² - 1))` is infinite past
/// 1e154, where acosh(x) is ln(2x) = ln(x) + ln(2) to the last bit.
fn acosh_f64(x: f64) -> f64 {
    if x > 1e150 {
        x.ln() + std::f64::consts::LN_2
    } else {
        x.acosh()
    }
}

/// asinh without overflow (see [`acosh_f64`]), odd.
fn asinh_f64(x: f64) -> f64 {
    if x.abs() > 1e150 {
        (x.abs().ln() + std::f64::consts::LN_2).copysign(x)
    } else {
        x.asinh()
    }
}

host_unary_ops! {
    acos => true, f64::acos, None;
    acosh => true, acosh_f64, None;
    asin => true, f64::asin, None;
    asinh => true, asinh_f64, None;
    atan => true, f64::atan, None;
    atanh => true, f64::atanh, None;
    cosh => true, f64::cosh, None;
    sinh => true, f64::sinh, None;
    tan => true, f64::tan, None;
    expm1 => true, f64::exp_m1, None;
    log10 => true, f64::log10, None;
    log1p => true, f64::ln_1p, None;
    log2 => true, f64::log2, None;
    ceil => false, f64::ceil, SAME;
    floor => false, f64::floor, SAME;
    trunc => false, f64::trunc, SAME;
    round => false, |v: f64| { let r = v.round(); if (v - v.trunc()).abs() == 0.5 { 2.0 * (v / 2.0).round() } else { r } }, SAME;
    // (NaN's sign is 0, as torch's (0 < x) - (x < 0))
    sign => false, |v: f64| if v > 0.0 { 1.0 } else if v < 0.0 { -1.0 } else { 0.0 }, Some(i64::signum);
}

fn bool_unary(ctx: &mut Ctx, f: fn(f64) -> bool) -> OpResult {
    let x = ctx.tensor("self")?;
    let vals: Vec<u8> = x
        .to_host()?
        .to_f64()
        .into_iter()
        .map(|v| f(v) as u8)
        .collect();
    let t = CandleTensor::from_vec(vals, x.dims(), ctx.device())?;
    one(Tensor::new(t, Dtype::Bool))
}

fn isnan(ctx: &mut Ctx) -> OpResult {
    bool_unary(ctx, f64::is_nan)
}

fn isinf(ctx: &mut Ctx) -> OpResult {
    bool_unary(ctx, f64::is_infinite)
}

fn bitwise_not(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.dtype == Dtype::Bool {
        return one(Tensor::new(x.t.eq(0f64)?, Dtype::Bool));
    }
    if x.dtype.is_floating() {
        return Err(unsupported("bitwise_not on floats"));
    }
    host_unary_with(ctx, false, |v| v, Some(|v: i64| !v))
}

/// An elementwise binary op on the host, exactly, with broadcasting and
/// torch's promotion (`float_out`: an integer result type computes in
/// float32): `fi` over integers, `ff` over floats.
fn host_binary(
    ctx: &mut Ctx,
    a: &str,
    b: &str,
    float_out: bool,
    fi: impl Fn(i64, i64) -> Result<i64>,
    ff: impl Fn(f64, f64) -> f64,
) -> OpResult {
    let x = Operand::from_rv(ctx.value(a)?)?;
    let y = Operand::from_rv(ctx.value(b)?)?;
    let mut dt = result_type(&[x.key(), y.key()]);
    if float_out && !dt.is_floating() {
        dt = Dtype::Float32;
    }
    host_map2(ctx, &x, &y, dt, dt, fi, ff)
}

/// No integer form: an integer result is refused (the float forms apply
/// to every op promoted to a float).
fn no_int(_: i64, _: i64) -> Result<i64> {
    Err(unsupported("this op on integers"))
}

fn atan2(ctx: &mut Ctx) -> OpResult {
    host_binary(ctx, "self", "other", true, no_int, f64::atan2)
}

fn fmod(ctx: &mut Ctx) -> OpResult {
    host_binary(ctx, "self", "other", false, int_fmod, |a, b| a % b)
}

fn remainder(ctx: &mut Ctx) -> OpResult {
    host_binary(ctx, "self", "other", false, int_remainder, float_remainder)
}

fn pow_scalar_base(ctx: &mut Ctx) -> OpResult {
    host_binary(ctx, "self", "exponent", false, |a, b| Ok(int_pow(a, b)), f64::powf)
}

fn clamp_tensor(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let mut out = Value::Tensor(x);
    if ctx.has("min") {
        let lo = ctx.value("min")?;
        out = binary_on(ctx, out, lo, Bin::Max, None)?.remove(0);
    }
    if ctx.has("max") {
        let hi = ctx.value("max")?;
        out = binary_on(ctx, out, hi, Bin::Min, None)?.remove(0);
    }
    Ok(vec![out])
}

fn div_scalar_mode(ctx: &mut Ctx) -> OpResult {
    div(ctx)
}

fn bitwise(ctx: &mut Ctx, op: Bin, f: fn(i64, i64) -> i64) -> OpResult {
    let a = Operand::from_rv(ctx.value("self")?)?;
    let b = Operand::from_rv(ctx.value("other")?)?;
    let dt = result_type(&[a.key(), b.key()]);
    if dt == Dtype::Bool {
        let (a, b) = (ctx.value("self")?, ctx.value("other")?);
        return binary_on(ctx, a, b, op, None);
    }
    if dt.is_floating() {
        return Err(unsupported(format!("{} of floating values", ctx.node.target.name)));
    }
    host_map2(ctx, &a, &b, dt, dt, move |x, y| Ok(f(x, y)), |_, _| f64::NAN)
}

fn bitwise_and(ctx: &mut Ctx) -> OpResult {
    bitwise(ctx, Bin::And, |a, b| a & b)
}

fn bitwise_or(ctx: &mut Ctx) -> OpResult {
    bitwise(ctx, Bin::Or, |a, b| a | b)
}

fn bitwise_xor_op(ctx: &mut Ctx) -> OpResult {
    bitwise(ctx, Bin::Xor, |a, b| a ^ b)
}

/// `<<` and `>>` (`bitwise_left_shift`, `__lshift__`, ...): torch's
/// results for shifts past the width ([`exact::shift`]).
fn shift_op(ctx: &mut Ctx, left: bool) -> OpResult {
    let a = Operand::from_rv(ctx.value("self")?)?;
    let b = Operand::from_rv(ctx.value("other")?)?;
    let dt = result_type(&[a.key(), b.key()]);
    if dt.is_floating() || dt == Dtype::Bool {
        return Err(unsupported(format!("{} of {} values", ctx.node.target.name, dt.torch_name())));
    }
    host_map2(ctx, &a, &b, dt, dt, move |x, y| Ok(shift(x, y, left, dt)), |_, _| f64::NAN)
}

fn left_shift(ctx: &mut Ctx) -> OpResult {
    shift_op(ctx, true)
}

fn right_shift(ctx: &mut Ctx) -> OpResult {
    shift_op(ctx, false)
}

// PT2E int8: quantized_decomposed's ops as torch's reference kernels
// compute them (torch/ao/quantization/fx/_decomposed.py), exactly: every
// step in the dtype torch computes it in (Python numbers as float32 where
// they meet a float32 tensor), on the host: in float32 itself, or in f64
// rounded to the dtype after each step.

/// `v` rounded to the floating dtype `d` (float32 unless float64, float16
/// or bfloat16): the result of one op computed in `d`.
fn round_to(v: f64, d: Dtype) -> f64 {
    match d {
        Dtype::Float64 => v,
        Dtype::Float16 => half::f16::from_f64(v).to_f64(),
        Dtype::BFloat16 => half::bf16::from_f64(v).to_f64(),
        _ => v as f32 as f64,
    }
}

/// A per-tensor parameter: a number (`.default`), or a one-element tensor
/// (`.tensor`, as choose_qparams makes them) that torch reads with `.item()`.
fn qparam(ctx: &Ctx, name: &str) -> Result<Num> {
    match ctx.value(name)? {
        Value::Tensor(t) => {
            let e = elems(&t)?;
            if e.len() != 1 {
                return Err(Error::bad_input(format!(
                    "argument '{name}': {} elements, expected one",
                    e.len()
                )));
            }
            Ok(e.get(0))
        }
        v => Num::of(&v).ok_or_else(|| {
            Error::bad_input(format!("argument '{name}': expected a number, found {v:?}"))
        }),
    }
}

/// `quant_min`, `quant_max` and the integer `dtype` (the shape rule checked
/// them against each other).
fn quant_range(ctx: &Ctx) -> Result<(f64, f64, Dtype)> {
    let dtype = ctx
        .dtype("dtype")
        .ok_or_else(|| Error::bad_input("argument 'dtype' is missing"))?;
    Ok((ctx.int("quant_min")? as f64, ctx.int("quant_max")? as f64, dtype))
}

/// `v` rounded to an integer, half to even (`f32::round_ties_even`, which
/// is a libm call on baseline x86-64): past 2^23 a float32 is one, below
/// it adding and taking away 2^23 rounds in the FPU's default mode.
#[inline(always)]
pub(super) fn rint(v: f32) -> f32 {
    const BIG: f32 = 8_388_608.0;
    if v.abs() < BIG {
        let m = BIG.copysign(v);
        (v + m) - m
    } else {
        v
    }
}

/// torch's `clamp(round(x * inv) + zp, lo, hi)` of the float32 values of
/// `x`, each step in `c` (float32, or float64 where per-channel scales
/// are); `(inv, zp)` of element `i` by `param(i)`, each already in `c`.
/// Rounds half to even; NaN gives 0 (torch's cast of NaN is undefined).
/// Split over the threads.
fn quantize_values(
    x: &Tensor,
    c: Dtype,
    lo: f64,
    hi: f64,
    param: impl Fn(usize) -> (f64, f64) + Sync,
) -> Result<Vec<i64>> {
    let t = x.cast(Dtype::Float32)?.t;
    let t = if t.device().is_cpu() { t } else { t.to_device(&candle_core::Device::Cpu)? };
    let one = |v: f32, (inv, zp): (f64, f64)| -> i64 {
        let r = if c == Dtype::Float64 {
            (v as f64 * inv).round_ties_even() + zp
        } else {
            (rint(v * inv as f32) + zp as f32) as f64
        };
        (if r < lo {
            lo
        } else if r > hi {
            hi
        } else {
            r
        }) as i64
    };
    const PART: usize = 1 << 14;
    with_host::<f32, _>(&t, |xs| {
        let mut out = vec![0i64; xs.len()];
        crate::kernels::threads::par_chunks(&mut out, PART, |k, part| {
            for (j, o) in part.iter_mut().enumerate() {
                let i = k * PART + j;
                *o = one(xs[i], param(i));
            }
        });
        out
    })
    .ok_or_else(|| Error::internal("float32 host values expected"))
}

/// A per-channel parameter of element `i` (`inner` elements after the
/// channel's dim of `n`): one value a channel, or one for all.
fn per_channel(v: &[f64], i: usize, inner: usize, n: usize) -> f64 {
    if v.len() == 1 {
        v[0]
    } else {
        v[(i / inner.max(1)) % n.max(1)]
    }
}

/// The channel dim of a per-channel op, and the elements after it.
fn channel_axis(ctx: &Ctx, x: &Tensor) -> Result<(usize, usize)> {
    let axis = normalize_dim(ctx.int("axis")?, x.rank())?;
    Ok((x.dims()[axis], x.dims()[axis + 1..].iter().product()))
}

/// quantize_per_tensor (`.default` and `.tensor`): `input * (1.0 / scale)`
/// with the reciprocal in float64 (Python's) and the product in float32.
fn quantize_per_tensor(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let (scale, zp) = (qparam(ctx, "scale")?.as_f64(), qparam(ctx, "zero_point")?.as_f64());
    let (lo, hi, dtype) = quant_range(ctx)?;
    let (inv, zp) = (round_to(1.0 / scale, Dtype::Float32), round_to(zp, Dtype::Float32));
    if let Some(t) = quantized_bytes(&x, dtype, [inv, zp, lo, hi], ctx.device()) {
        return one(t?);
    }
    let q = quantize_values(&x, Dtype::Float32, lo, hi, |_| (inv, zp))?;
    one(from_elems(Elems::I(q), x.dims(), dtype, ctx.device())?)
}

/// [`quantize_values`]'s float32 steps from a float32 host tensor straight
/// into uint8 or int8 (the same values, without the int64 between: the
/// input quantization of a PT2E graph); `None` for other dtypes, devices
/// and ranges.
fn quantized_bytes(
    x: &Tensor,
    dtype: Dtype,
    [inv, zp, lo, hi]: [f64; 4],
    dev: &candle_core::Device,
) -> Option<Result<Tensor>> {
    let fits = match dtype {
        Dtype::Uint8 => lo >= 0.0 && hi <= 255.0,
        Dtype::Int8 => lo >= -128.0 && hi <= 127.0,
        _ => false,
    };
    if !fits || x.dtype != Dtype::Float32 || !x.t.device().is_cpu() {
        return None;
    }
    let (inv, zp, lo, hi) = (inv as f32, zp as f32, lo as f32, hi as f32);
    // NaN compares false both ways and casts to 0, as quantize_values gives
    let q = move |v: f32| -> f32 {
        let r = rint(v * inv) + zp;
        if r < lo {
            lo
        } else if r > hi {
            hi
        } else {
            r
        }
    };
    const PART: usize = 1 << 14;
    let made = with_host::<f32, _>(&x.t, |xs| -> Result<CandleTensor> {
        if dtype == Dtype::Uint8 {
            let mut out = vec![0u8; xs.len()];
            crate::kernels::threads::par_chunks(&mut out, PART, |k, part| {
                for (o, v) in part.iter_mut().zip(&xs[k * PART..]) {
                    *o = q(*v) as u8;
                }
            });
            return Ok(CandleTensor::from_vec(out, x.dims(), dev)?);
        }
        let mut out = vec![0i16; xs.len()];
        crate::kernels::threads::par_chunks(&mut out, PART, |k, part| {
            for (o, v) in part.iter_mut().zip(&xs[k * PART..]) {
                *o = q(*v) as i16;
            }
        });
        Ok(CandleTensor::from_vec(out, x.dims(), dev)?)
    })?;
    Some(made.map(|t| Tensor::new(t, dtype)))
}

/// quantize_per_channel: `input * (1.0 / scales)` with the reciprocals in
/// the scales' dtype, computed in float32 promoted with it (float64 scales
/// make it float64).
fn quantize_per_channel(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let (s, z) = (ctx.tensor("scales")?, ctx.tensor("zero_points")?);
    let (n, inner) = channel_axis(ctx, &x)?;
    let (lo, hi, dtype) = quant_range(ctx)?;
    let c = result_type(&[(Dtype::Float32, Rank::Dim), (s.dtype, Rank::Dim)]);
    let inv: Vec<f64> = elems(&s)?.into_f64().iter().map(|&v| round_to(1.0 / v, s.dtype)).collect();
    let zp: Vec<f64> = elems(&z)?.into_f64().iter().map(|&v| round_to(v, c)).collect();
    let q = quantize_values(&x, c, lo, hi, |i| {
        (per_channel(&inv, i, inner, n), per_channel(&zp, i, inner, n))
    })?;
    one(from_elems(Elems::I(q), x.dims(), dtype, ctx.device())?)
}

/// dequantize_per_tensor (`.default` and `.tensor`):
/// `(input.to(out_dtype) - zero_point) * scale`, the numbers in the op
/// math dtype (float32 for float16 and bfloat16), each step rounded to
/// `out_dtype` (float32 by default).
fn dequantize_per_tensor(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let (scale, zp) = (qparam(ctx, "scale")?.as_f64(), qparam(ctx, "zero_point")?.as_f64());
    let od = ctx.dtype("out_dtype").unwrap_or(Dtype::Float32);
    let m = if matches!(od, Dtype::Float16 | Dtype::BFloat16) { Dtype::Float32 } else { od };
    let (zp, scale) = (round_to(zp, m), round_to(scale, m));
    if od == Dtype::Float32 {
        // the same steps in float32 itself
        let (zp, scale) = (zp as f32, scale as f32);
        let f = |q: f32| (q - zp) * scale;
        // uint8 and int8 read where they lie (the PT2E activations)
        let direct = match x.t.dtype() {
            DType::U8 => with_host::<u8, _>(&x.t, |v| v.iter().map(|&q| f(q as f32)).collect()),
            DType::I16 => with_host::<i16, _>(&x.t, |v| v.iter().map(|&q| f(q as f32)).collect()),
            _ => None,
        };
        let v: Vec<f32> = match direct {
            Some(v) => v,
            None => match elems(&x)? {
            Elems::I(q) => q.into_iter().map(|q| (q as f32 - zp) * scale).collect(),
            Elems::F(q) => q.into_iter().map(|q| (q as f32 - zp) * scale).collect(),
            },
        };
        let t = CandleTensor::from_vec(v, x.dims(), ctx.device())?;
        return one(Tensor::new(t, Dtype::Float32));
    }
    let v = elems(&x)?
        .into_f64()
        .into_iter()
        .map(|q| round_to(round_to(round_to(q, od) - zp, od) * scale, od))
        .collect();
    one(from_elems(Elems::F(v), x.dims(), od, ctx.device())?)
}

/// dequantize_per_channel: `((input - zero_points) * scales).to(out_dtype)`
/// under torch's promotion (int8 less int64 zero points is int64, exact;
/// times float32 scales is float32).
fn dequantize_per_channel(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let (s, z) = (ctx.tensor("scales")?, ctx.opt_tensor("zero_points")?);
    let (n, inner) = channel_axis(ctx, &x)?;
    let od = ctx.dtype("out_dtype").unwrap_or(Dtype::Float32);
    let d = match &z {
        Some(z) => result_type(&[(x.dtype, Rank::Dim), (z.dtype, Rank::Dim)]),
        None => x.dtype,
    };
    let c = result_type(&[(d, Rank::Dim), (s.dtype, Rank::Dim)]);
    let sv = elems(&s)?.into_f64();
    let zv = z.as_ref().map(elems).transpose()?.map(Elems::into_f64);
    let v = elems(&x)?
        .into_f64()
        .into_iter()
        .enumerate()
        .map(|(i, q)| {
            let diff = match &zv {
                Some(zv) if d.is_floating() => round_to(q - per_channel(zv, i, inner, n), d),
                Some(zv) => wrap((q - per_channel(zv, i, inner, n)) as i64, d) as f64,
                None => q,
            };
            round_to(round_to(diff * per_channel(&sv, i, inner, n), c), od)
        })
        .collect();
    one(from_elems(Elems::F(v), x.dims(), od, ctx.device())?)
}

/// choose_qparams.tensor: the per-tensor affine parameters of the input's
/// range with 0 in it, `(scale f64[1], zero_point i64[1])`, as torch's
/// `determine_qparams` computes them: `(max(x, 0) - min(x, 0)) / (qmax -
/// qmin)` in the input's dtype, at least `eps` (in float32), and `qmin -
/// round(min(x, 0) / scale)` in int32, clamped. NaN propagates.
fn choose_qparams(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let (qmin, qmax) = (ctx.int("quant_min")?, ctx.int("quant_max")?);
    let f32_ = Dtype::Float32;
    let xs = elems(&x)?.into_f64();
    if xs.is_empty() {
        return Err(Error::bad_input("choose_qparams of an empty tensor (torch: aminmax of no elements)"));
    }
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in xs {
        (lo, hi) = if v.is_nan() || lo.is_nan() { (f64::NAN, f64::NAN) } else { (lo.min(v), hi.max(v)) };
    }
    let (neg, pos) = if lo.is_nan() { (lo, hi) } else { (lo.min(0.0), hi.max(0.0)) };
    let range = round_to(pos - neg, x.dtype);
    let scale = round_to(round_to(range / (qmax - qmin) as f64, x.dtype), f32_);
    let eps = round_to(ctx.float("eps")?, f32_);
    let scale = if scale.is_nan() { scale } else { scale.max(eps) };
    let r = round_to(neg / scale, f32_).round_ties_even();
    let zp = wrap(qmin.wrapping_sub(wrap(r as i64, Dtype::Int32)), Dtype::Int32);
    let zp = if zp < qmin { qmin } else if zp > qmax { qmax } else { zp };
    Ok(vec![
        Value::Tensor(from_elems(Elems::F(vec![scale]), &[1], Dtype::Float64, ctx.device())?),
        Value::Tensor(from_elems(Elems::I(vec![zp]), &[1], Dtype::Int64, ctx.device())?),
    ])
}

/// The rows an element-wise chain runs in one pass (`exec::fuse`): the
/// same formulas as the rows (`x + y * alpha` for add, clamp keeping NaN).
pub(super) const FUSES: &[(&str, Fusable)] = &[
    (aten::NEG, Fusable::Unary(FuseOp::Neg)),
    (aten::ABS, Fusable::Unary(FuseOp::Abs)),
    (aten::CLAMP, Fusable::Clamp),
    (aten::POW_TENSOR_SCALAR, Fusable::Pow),
    (aten::ADD_TENSOR, Fusable::Binary(FuseOp::Add)),
    (aten::ADD_SCALAR, Fusable::Binary(FuseOp::Add)),
    (aten::SUB_TENSOR, Fusable::Binary(FuseOp::Sub)),
    (aten::SUB_SCALAR, Fusable::Binary(FuseOp::Sub)),
    (aten::MUL_TENSOR, Fusable::Binary(|_| FuseOp::Mul)),
    (aten::MUL_SCALAR, Fusable::Binary(|_| FuseOp::Mul)),
    (aten::DIV_TENSOR, Fusable::Binary(|_| FuseOp::Div)),
    (aten::DIV_SCALAR, Fusable::Binary(|_| FuseOp::Div)),
];

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::ADD_TENSOR, add),
    (aten::ADD_SCALAR, add),
    (aten::SUB_TENSOR, sub),
    (aten::SUB_SCALAR, sub),
    (aten::RSUB_SCALAR, rsub),
    (aten::RSUB_TENSOR, rsub),
    (aten::MUL_TENSOR, mul),
    (aten::MUL_SCALAR, mul),
    (aten::DIV_TENSOR, div),
    (aten::DIV_SCALAR, div),
    (aten::DIV_TENSOR_MODE, div),
    (aten::POW_TENSOR_SCALAR, pow),
    (aten::POW_TENSOR_TENSOR, pow),
    (aten::MAXIMUM, maximum),
    (aten::MINIMUM, minimum),
    (aten::EQ_TENSOR, eq),
    (aten::EQ_SCALAR, eq),
    (aten::NE_TENSOR, ne),
    (aten::NE_SCALAR, ne),
    (aten::LT_TENSOR, lt),
    (aten::LT_SCALAR, lt),
    (aten::LE_TENSOR, le),
    (aten::LE_SCALAR, le),
    (aten::GT_TENSOR, gt),
    (aten::GT_SCALAR, gt),
    (aten::GE_TENSOR, ge),
    (aten::GE_SCALAR, ge),
    (aten::LOGICAL_AND, logical_and),
    (aten::LOGICAL_OR, logical_or),
    (aten::LOGICAL_XOR, logical_xor),
    (aten::BITWISE_AND_TENSOR, bitwise_and),
    (aten::BITWISE_OR_TENSOR, bitwise_or),
    (aten::__AND___TENSOR, bitwise_and),
    (aten::__OR___TENSOR, bitwise_or),
    (aten::LOGICAL_NOT, logical_not),
    (aten::WHERE_SELF, where_self),
    (aten::SIN, sin),
    (aten::COS, cos),
    (aten::EXP, exp),
    (aten::LOG, log),
    (aten::SQRT, sqrt),
    (aten::RSQRT, rsqrt),
    (aten::RECIPROCAL, reciprocal),
    (aten::ERF, erf),
    (aten::NEG, neg),
    (aten::ABS, abs),
    (aten::CLAMP, clamp),
    (aten::ACOS, acos),
    (aten::ACOSH, acosh),
    (aten::ASIN, asin),
    (aten::ASINH, asinh),
    (aten::ATAN, atan),
    (aten::ATANH, atanh),
    (aten::COSH, cosh),
    (aten::SINH, sinh),
    (aten::TAN, tan),
    (aten::EXPM1, expm1),
    (aten::LOG10, log10),
    (aten::LOG1P, log1p),
    (aten::LOG2, log2),
    (aten::CEIL, ceil),
    (aten::FLOOR, floor),
    (aten::TRUNC, trunc),
    (aten::ROUND, round),
    (aten::SIGN, sign),
    (aten::ISNAN, isnan),
    (aten::ISINF, isinf),
    (aten::BITWISE_NOT, bitwise_not),
    (aten::ATAN2, atan2),
    (aten::FMOD_TENSOR, fmod),
    (aten::FMOD_SCALAR, fmod),
    (aten::REMAINDER_TENSOR, remainder),
    (aten::REMAINDER_SCALAR, remainder),
    (aten::BITWISE_XOR_TENSOR, bitwise_xor_op),
    (aten::BITWISE_XOR_SCALAR, bitwise_xor_op),
    (aten::BITWISE_AND_SCALAR, bitwise_and),
    (aten::BITWISE_OR_SCALAR, bitwise_or),
    (aten::POW_SCALAR, pow_scalar_base),
    (aten::CLAMP_TENSOR, clamp_tensor),
    (aten::DIV_SCALAR_MODE, div_scalar_mode),
    (aten::ATAN2_OUT, atan2),
    (aten::DIFF, diff),
    (aten::WHERE_SCALAROTHER, where_self),
    (aten::WHERE_SCALARSELF, where_self),
    (aten::WHERE_SCALAR, where_self),
    (aten::__LSHIFT___SCALAR, left_shift),
    (aten::__LSHIFT___TENSOR, left_shift),
    (aten::BITWISE_LEFT_SHIFT_TENSOR, left_shift),
    (aten::BITWISE_LEFT_SHIFT_TENSOR_SCALAR, left_shift),
    (aten::BITWISE_LEFT_SHIFT_SCALAR_TENSOR, left_shift),
    (aten::__RSHIFT___SCALAR, right_shift),
    (aten::__RSHIFT___TENSOR, right_shift),
    (aten::BITWISE_RIGHT_SHIFT_TENSOR, right_shift),
    (aten::BITWISE_RIGHT_SHIFT_TENSOR_SCALAR, right_shift),
    (aten::BITWISE_RIGHT_SHIFT_SCALAR_TENSOR, right_shift),
    (quantized_decomposed::QUANTIZE_PER_TENSOR, quantize_per_tensor),
    (quantized_decomposed::QUANTIZE_PER_TENSOR_TENSOR, quantize_per_tensor),
    (quantized_decomposed::QUANTIZE_PER_CHANNEL, quantize_per_channel),
    (quantized_decomposed::DEQUANTIZE_PER_TENSOR, dequantize_per_tensor),
    (quantized_decomposed::DEQUANTIZE_PER_TENSOR_TENSOR, dequantize_per_tensor),
    (quantized_decomposed::DEQUANTIZE_PER_CHANNEL, dequantize_per_channel),
    (quantized_decomposed::CHOOSE_QPARAMS_TENSOR, choose_qparams),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The FPU's rounding is libm's `rintf` (half to even) on every
    /// float32 the quantizers round: ties, both zeros, around 2^23 and
    /// past it, infinities, NaN, and a sweep of values.
    #[test]
    fn rint_rounds_half_to_even() {
        let mut vals = vec![
            0.5f32, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, 0.49999997, -0.49999997,
            8_388_607.5, -8_388_607.5, 8_388_608.0, 8_388_609.0, 16_777_216.0, 1e30, -1e30,
            f32::INFINITY, f32::NEG_INFINITY, f32::MIN_POSITIVE, -f32::MIN_POSITIVE,
        ];
        let mut v = 1e-3f32;
        while v < 3e7 {
            vals.extend([v, -v, v + 0.5, -(v + 0.5)]);
            v *= 1.0137;
        }
        for x in vals {
            assert_eq!(rint(x), x.round_ties_even(), "{x}");
        }
        assert!(rint(f32::NAN).is_nan());
    }
}
