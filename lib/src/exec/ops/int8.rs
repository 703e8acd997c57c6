//! `pt2kit.int8_conv2d` and `pt2kit.int8_linear` (what `exec::int8`
//! makes of a PT2E graph's quantized convolutions and linear layers at
//! load): the quantized activation times the int8 weight summed exactly
//! in integers ([`k8::gemm`]), then, per output element and in float32 as
//! torch's reference graph computes the ops it replaces, the scales, the
//! bias, the dequantized residual, the ReLU and the quantization.
//!
//! An int8 activation (XNNPACK's quantizer) is shifted by +128 to
//! unsigned, its zero point with it: `sum (x - z) w = sum (x + 128) w -
//! (z + 128) sum w`, the second term from the weight's column sums (the
//! compensation). A convolution's input is laid channels-last once per
//! call and its im2col rows copied from it by whole pixels, `k` ordered
//! (tap row, tap column, channel); its weight is reordered so when packed.
//! Packed weights are kept for the executor's life (by node and weight).
//!
//! `pt2kit.int8_max_pool2d` (a max pool between a dequantize and a
//! quantize of one quantization, `exec::int8`) pools the quantized values
//! themselves.

use super::pointwise::rint;
use super::{one, OpResult};
use crate::error::{Error, Result};
use crate::exec::{Ctx, Tensor};
use crate::ir::{Argument, Dtype};
use crate::kernels::int8 as k8;
use candle_core::{DType, Tensor as CandleTensor};
use std::sync::Arc;

/// The per-tensor quantization of the output.
#[derive(Clone, Copy)]
struct Quant {
    inv: f32,
    zp: f32,
    lo: f32,
    hi: f32,
}

/// What each output element gets after its integer sum, read once a call.
struct Finish {
    /// Per output channel: the input zero point times the weight's column
    /// sum (the compensation), `input_scale * weight_scale`, the bias.
    comp: Vec<i32>,
    scale: Vec<f32>,
    bias: Vec<f32>,
    /// The dequantized residual, in the output's layout.
    other: Option<Vec<f32>>,
    relu: bool,
    quant: Option<Quant>,
}

impl Finish {
    /// Finishes a block of C (`rows` x `cols` of `tile`, row stride
    /// [`k8::NR`], from row `i0` and column `j0`) into `sink`, laid as
    /// `out` says: the scales and the bias, the ReLU and the quantization
    /// a tile row at a time (per-channel values side by side, so the
    /// loops run in vector lanes), the residual, which lies in the
    /// output's layout, added between them, and the finished values
    /// stored at last (channels-last: each row's channels side by side).
    ///
    /// # Safety
    /// Every element the block names lies inside the output, which no
    /// other thread writes there.
    #[inline(always)]
    unsafe fn block(
        &self,
        sink: Sink,
        tile: &[i32],
        (i0, rows): (usize, usize),
        (j0, cols): (usize, usize),
        out: Out,
    ) {
        const NR: usize = k8::NR;
        let mut y = [0f32; k8::MR * NR];
        let comp = &self.comp[j0..j0 + cols];
        let scale = &self.scale[j0..j0 + cols];
        let bias = &self.bias[j0..j0 + cols];
        let used = rows * NR;
        scaled_rows(&tile[..used], &mut y[..used], comp, scale, bias);
        if let Some(o) = self.other.as_deref() {
            match out {
                Out::Planar { base, hw } => {
                    for j in 0..cols {
                        let line = &o[base + (j0 + j) * hw + i0..][..rows];
                        for (i, v) in line.iter().enumerate() {
                            y[i * NR + j] += v;
                        }
                    }
                }
                Out::Nhwc { base, co } => {
                    for i in 0..rows {
                        let px = &o[base + (i0 + i) * co + j0..][..cols];
                        for (yv, v) in y[i * NR..][..cols].iter_mut().zip(px) {
                            *yv += v;
                        }
                    }
                }
            }
        }
        if self.relu || self.quant.is_some() {
            relu_quantize_rows(&mut y[..used], cols, self.relu, self.quant);
        }
        match (sink, &self.quant) {
            (Sink::F32(p), _) => store(p, &y[..used], (i0, rows), (j0, cols), out),
            (Sink::U8(p), Some(_)) => {
                let mut q = [0u8; k8::MR * NR];
                whole_u8(&y[..used], &mut q[..used]);
                store(p, &q[..used], (i0, rows), (j0, cols), out)
            }
            (Sink::I16(p), Some(_)) => {
                let mut q = [0i16; k8::MR * NR];
                whole_i16(&y[..used], &mut q[..used]);
                store(p, &q[..used], (i0, rows), (j0, cols), out)
            }
            _ => {}
        }
    }

    /// torch's `clamp(round(y * (1 / scale)) + zero_point, min, max)`.
    #[inline(always)]
    fn quantize(q: &Quant, y: f32) -> f32 {
        (rint(y * q.inv) + q.zp).clamp(q.lo, q.hi)
    }
}

crate::kernels::vmath::multiversion! {
    /// `y = (t - comp) * scale + bias` of each tile row (`NR` wide, the
    /// first `comp.len()` columns), in the widest instruction set.
    fn scaled_rows(tile: &[i32], y: &mut [f32], comp: &[i32], scale: &[f32], bias: &[f32]) {
        let cols = comp.len();
        for (t, yr) in tile.chunks_exact(k8::NR).zip(y.chunks_exact_mut(k8::NR)) {
            for j in 0..cols {
                yr[j] = (t[j] - comp[j]) as f32 * scale[j] + bias[j];
            }
        }
    }
}

crate::kernels::vmath::multiversion! {
    /// The ReLU and the quantization (where asked) of the first `cols`
    /// values of each row of `y` (`NR` wide), in the widest instruction
    /// set.
    fn relu_quantize_rows(y: &mut [f32], cols: usize, relu: bool, quant: Option<Quant>) {
        for yr in y.chunks_exact_mut(k8::NR) {
            for v in &mut yr[..cols] {
                if relu && *v < 0.0 {
                    *v = 0.0;
                }
            }
            if let Some(q) = &quant {
                for v in &mut yr[..cols] {
                    *v = Finish::quantize(q, *v);
                }
            }
        }
    }
}

/// A finished block `q` (rows of [`k8::NR`]) stored into the output at
/// `p`, laid as `out` says.
///
/// # Safety
/// As [`Finish::block`].
#[inline(always)]
unsafe fn store<T: Copy>(
    p: *mut T,
    q: &[T],
    (i0, rows): (usize, usize),
    (j0, cols): (usize, usize),
    out: Out,
) {
    const NR: usize = k8::NR;
    match out {
        Out::Planar { base, hw } => {
            for j in 0..cols {
                let line = p.add(base + (j0 + j) * hw + i0);
                for i in 0..rows {
                    *line.add(i) = q[i * NR + j];
                }
            }
        }
        Out::Nhwc { base, co } => {
            for i in 0..rows {
                std::ptr::copy_nonoverlapping(
                    q[i * NR..].as_ptr(),
                    p.add(base + (i0 + i) * co + j0),
                    cols,
                );
            }
        }
    }
}

crate::kernels::vmath::multiversion! {
    /// Quantized values (whole numbers within 0..=255, as
    /// [`relu_quantize_rows`] leaves them) as bytes, in the widest
    /// instruction set: what `v as u8` gives (a NaN, which a weight file's
    /// NaN scale or bias makes, as 0), in vector lanes.
    fn whole_u8(y: &[f32], q: &mut [u8]) {
        for (d, &v) in q.iter_mut().zip(y) {
            let v = if v.is_nan() { 0.0 } else { v.clamp(0.0, 255.0) };
            // SAFETY: finite and within i32 (clamped above)
            *d = unsafe { v.to_int_unchecked::<i32>() } as u8;
        }
    }
}

crate::kernels::vmath::multiversion! {
    /// Quantized values (whole numbers within -128..=127) as int8 held
    /// in i16, in the widest instruction set (as `v as i16`).
    fn whole_i16(y: &[f32], q: &mut [i16]) {
        for (d, &v) in q.iter_mut().zip(y) {
            let v = if v.is_nan() { 0.0 } else { v.clamp(-32768.0, 32767.0) };
            // SAFETY: finite and within i32 (clamped above)
            *d = unsafe { v.to_int_unchecked::<i32>() } as i16;
        }
    }
}

/// The output being written, by several threads in disjoint blocks.
#[derive(Clone, Copy)]
enum Sink {
    F32(*mut f32),
    U8(*mut u8),
    I16(*mut i16),
}
// SAFETY: the tasks of a product write disjoint elements
unsafe impl Send for Sink {}
unsafe impl Sync for Sink {}

/// Where element (row `i`, channel `j`) of a block lies in the output.
#[derive(Clone, Copy)]
enum Out {
    /// Planes: at `base + j * hw + i` (a linear layer's rows: `hw` 1 and
    /// rows at `base + i * n`: see [`Out::Nhwc`]).
    Planar { base: usize, hw: usize },
    /// Rows of `co` channels: at `base + i * co + j` (channels-last, or a
    /// linear layer's `[m, n]`).
    Nhwc { base: usize, co: usize },
}

/// The output buffer of a fused node: float32, or quantized to uint8
/// (candle's U8) or int8 (held in I16).
enum OutBuf {
    F32(Vec<f32>),
    U8(Vec<u8>),
    I16(Vec<i16>),
}

impl OutBuf {
    fn new(len: usize, dtype: Option<Dtype>) -> Result<OutBuf> {
        Ok(match dtype {
            None => OutBuf::F32(vec![0.0; len]),
            Some(Dtype::Uint8) => OutBuf::U8(vec![0; len]),
            Some(Dtype::Int8) => OutBuf::I16(vec![0; len]),
            Some(d) => {
                return Err(Error::unsupported(format!(
                    "an int8 product quantized to {}",
                    d.torch_name()
                )))
            }
        })
    }

    fn sink(&mut self) -> Sink {
        match self {
            OutBuf::F32(v) => Sink::F32(v.as_mut_ptr()),
            OutBuf::U8(v) => Sink::U8(v.as_mut_ptr()),
            OutBuf::I16(v) => Sink::I16(v.as_mut_ptr()),
        }
    }

    fn tensor(self, dims: &[usize], ctx: &Ctx) -> Result<Tensor> {
        let dev = ctx.device();
        Ok(match self {
            OutBuf::F32(v) => Tensor::new(CandleTensor::from_vec(v, dims, dev)?, Dtype::Float32),
            OutBuf::U8(v) => Tensor::new(CandleTensor::from_vec(v, dims, dev)?, Dtype::Uint8),
            OutBuf::I16(v) => Tensor::new(CandleTensor::from_vec(v, dims, dev)?, Dtype::Int8),
        })
    }

    /// The `[b, c, h, w]` tensor of a buffer that holds it channels-last
    /// (`[b][h][w][c]`): a permuted view.
    fn nhwc_tensor(self, [b, c, h, w]: [usize; 4], ctx: &Ctx) -> Result<Tensor> {
        let t = self.tensor(&[b, h, w, c], ctx)?;
        Ok(Tensor::new(t.t.permute((0, 3, 1, 2))?, t.dtype))
    }
}

/// The shift that makes a quantized activation unsigned: 0 for uint8,
/// 128 for int8.
fn shift_of(t: &Tensor, what: &str) -> Result<i64> {
    match t.dtype {
        Dtype::Uint8 => Ok(0),
        Dtype::Int8 => Ok(128),
        d => Err(Error::bad_input(format!(
            "argument '{what}': expected uint8 or int8, found {}",
            d.torch_name()
        ))),
    }
}

/// A quantized activation's values shifted to unsigned bytes (row-major).
fn unsigned_bytes(t: &Tensor, shift: i64) -> Result<Vec<u8>> {
    let host = |t: &CandleTensor| -> Result<CandleTensor> {
        Ok(if t.device().is_cpu() {
            t.clone()
        } else {
            t.to_device(&candle_core::Device::Cpu)?
        })
    };
    let t2 = host(&t.t)?;
    let got = match t2.dtype() {
        DType::U8 => super::with_host::<u8, _>(&t2, |v| v.to_vec()),
        DType::I16 => super::with_host::<i16, _>(&t2, |v| {
            v.iter().map(|&x| (x as i64 + shift) as u8).collect()
        }),
        _ => None,
    };
    got.ok_or_else(|| Error::internal("int8 product: a quantized input not held as bytes"))
}

/// The image of a quantized NCHW activation (contiguous, on the host)
/// at element `at`, `[c, h, w]`, channels-last into `dst` (`[h][w][c]`)
/// and shifted to unsigned bytes, read where it lies; the rows split
/// between the threads where the image is large.
fn channels_last(
    t: &CandleTensor,
    shift: i64,
    at: usize,
    [c, h, w]: [usize; 3],
    dst: &mut [u8],
) -> Result<()> {
    fn each<T: Copy + Sync>(
        plane: &[T],
        [c, h, w]: [usize; 3],
        dst: &mut [u8],
        u: impl Fn(T) -> u8 + Sync,
    ) {
        let row = |y: usize, out: &mut [u8]| {
            for ch in 0..c {
                let line = &plane[(ch * h + y) * w..][..w];
                for (px, &v) in out.chunks_exact_mut(c).zip(line) {
                    px[ch] = u(v);
                }
            }
        };
        if c * h * w < 1 << 16 {
            dst.chunks_exact_mut(w * c)
                .enumerate()
                .for_each(|(y, out)| row(y, out));
        } else {
            crate::kernels::threads::par_chunks(dst, w * c, row);
        }
    }
    let len = c * h * w;
    let done = match t.dtype() {
        DType::U8 => super::with_host::<u8, _>(t, |v| {
            v.get(at..at + len).map(|p| each(p, [c, h, w], dst, |x| x))
        }),
        DType::I16 => super::with_host::<i16, _>(t, |v| {
            v.get(at..at + len)
                .map(|p| each(p, [c, h, w], dst, |x| (x as i64 + shift) as u8))
        }),
        _ => None,
    };
    done.flatten()
        .ok_or_else(|| Error::internal("int8 convolution: a quantized input not held as bytes"))
}

/// A quantized activation's bytes as they lie (int8 ones as their low
/// bytes, shifted by `shift`), and whether they lie channels-last
/// ([`super::nhwc_dims`]: `[b][h][w][c]`) rather than row-major.
fn stored_bytes(t: &Tensor, shift: i64) -> Result<(Vec<u8>, bool)> {
    if super::nhwc_dims(&t.t).is_none() {
        return Ok((unsigned_bytes(t, shift)?, false));
    }
    let got = match t.t.dtype() {
        DType::U8 => super::with_nhwc::<u8, _>(&t.t, |v| v.to_vec()),
        DType::I16 => super::with_nhwc::<i16, _>(&t.t, |v| {
            v.iter().map(|&x| (x as i64 + shift) as u8).collect()
        }),
        _ => None,
    };
    got.map(|v| (v, true))
        .ok_or_else(|| Error::internal("int8 product: a quantized input not held as bytes"))
}

/// The residual `other` dequantized as torch does (`(q - zp) * scale` in
/// float32), laid channels-last where the output is (`nhwc`), else
/// row-major.
fn dequantized(ctx: &Ctx, len: usize, nhwc: bool) -> Result<Option<Vec<f32>>> {
    let Some(o) = ctx.opt_tensor("other")? else {
        return Ok(None);
    };
    let (scale, zp) = (
        ctx.float("other_scale")? as f32,
        ctx.int("other_zero_point")? as f32,
    );
    shift_of(&o, "other")?;
    let (mut bytes, lies_nhwc) = stored_bytes(&o, 0)?;
    if bytes.len() != len {
        return Err(Error::bad_input(format!(
            "argument 'other': {} elements, the output has {len}",
            bytes.len()
        )));
    }
    if lies_nhwc != nhwc {
        let [b, c, h, w] = match o.dims() {
            [b, c, h, w] => [*b, *c, *h, *w],
            d => {
                return Err(Error::bad_input(format!(
                    "argument 'other': shape {d:?}, expected NCHW"
                )))
            }
        };
        let hw = h * w;
        let mut moved = vec![0u8; len];
        for img in 0..b {
            for ch in 0..c {
                for p in 0..hw {
                    let (planar, cl) = (img * c * hw + ch * hw + p, img * hw * c + p * c + ch);
                    if nhwc {
                        moved[cl] = bytes[planar];
                    } else {
                        moved[planar] = bytes[cl];
                    }
                }
            }
        }
        bytes = moved;
    }
    Ok(Some(match o.dtype {
        // int8 bytes were taken as they lie: back to signed
        Dtype::Int8 => bytes
            .iter()
            .map(|&x| (x as i8 as f32 - zp) * scale)
            .collect(),
        _ => bytes.iter().map(|&x| (x as f32 - zp) * scale).collect(),
    }))
}

/// The weight as `n` rows of `k` signed bytes (a convolution's reordered
/// to (tap row, tap column, channel) by `reorder`), packed: kept for the
/// executor's life when it is a weight of the program's own graph.
fn packed_weight(
    ctx: &Ctx,
    w: &Tensor,
    n: usize,
    k: usize,
    reorder: impl Fn(&[i8]) -> Vec<i8>,
    winograd: Option<usize>,
) -> Result<Arc<k8::PackedI8>> {
    let pack = || -> Result<k8::PackedI8> {
        let t = w.t.flatten_all()?.to_device(&candle_core::Device::Cpu)?;
        let bytes: Vec<i8> =
            super::with_host::<i16, _>(&t, |v| v.iter().map(|&x| x as i8).collect())
                .ok_or_else(|| Error::internal("int8 weight not held as I16"))?;
        if bytes.len() != n * k {
            return Err(Error::bad_input(format!(
                "argument 'weight': {} elements, expected {n} x {k}",
                bytes.len()
            )));
        }
        let packed = k8::pack_b(&reorder(&bytes), n, k, kernel()?);
        Ok(match winograd {
            Some(ci) => packed.with_winograd(&bytes, n, ci),
            None => packed,
        })
    };
    let slot = match ctx.node.arg("weight") {
        Some(Argument::Tensor(v)) => ctx.exec.is_weight_value(ctx.graph, *v),
        _ => false,
    };
    let at = super::with_host::<i16, _>(&w.t, |v| v.as_ptr() as usize);
    let (true, Some(at)) = (slot, at) else {
        return Ok(Arc::new(pack()?));
    };
    let key = (ctx.node.name.clone(), at);
    if let Some(p) = ctx
        .exec
        .packs
        .int8
        .lock()
        .ok()
        .and_then(|c| c.get(&key).cloned())
    {
        return Ok(p);
    }
    let p = Arc::new(pack()?);
    if let Ok(mut c) = ctx.exec.packs.int8.lock() {
        c.insert(key, p.clone());
    }
    Ok(p)
}

/// The scales, bias, residual, ReLU and output quantization of a fused
/// node with `n` output channels and `len` output elements, its residual
/// laid channels-last where the output is (`nhwc`).
fn finish_of(ctx: &Ctx, packed: &k8::PackedI8, zu: i64, len: usize, nhwc: bool) -> Result<Finish> {
    let n = packed.n;
    let sx = ctx.float("input_scale")? as f32;
    let sw: Vec<f32> = match ctx.opt_tensor("weight_scales")? {
        Some(s) => {
            let v = super::elems(&s)?.into_f64();
            if v.len() != n {
                return Err(Error::bad_input(format!(
                    "argument 'weight_scales': {} scales for {n} channels",
                    v.len()
                )));
            }
            v.into_iter().map(|s| s as f32).collect()
        }
        None => vec![ctx.float("weight_scale")? as f32; n],
    };
    let bias = match ctx.opt_tensor("bias")? {
        Some(b) => {
            let v: Vec<f32> = super::elems(&b)?
                .into_f64()
                .into_iter()
                .map(|x| x as f32)
                .collect();
            if v.len() != n {
                return Err(Error::bad_input(format!(
                    "argument 'bias': {} values for {n} channels",
                    v.len()
                )));
            }
            v
        }
        None => vec![0.0; n],
    };
    let quant = match ctx.dtype("output_dtype") {
        None => None,
        Some(_) => Some(Quant {
            // the reciprocal in float64 (Python's), used in float32
            inv: (1.0 / ctx.float("output_scale")?) as f32,
            zp: ctx.int("output_zero_point")? as f32,
            lo: ctx.int("output_min")? as f32,
            hi: ctx.int("output_max")? as f32,
        }),
    };
    Ok(Finish {
        comp: packed
            .column_sums()
            .iter()
            .map(|&s| zu as i32 * s)
            .collect(),
        scale: sw
            .iter()
            .map(|&w| ((sx as f64) * (w as f64)) as f32)
            .collect(),
        bias,
        other: dequantized(ctx, len, nhwc)?,
        relu: ctx.bool("relu")?,
        quant,
    })
}

/// The input's zero point made unsigned with it.
fn unsigned_zero_point(ctx: &Ctx, shift: i64) -> Result<i64> {
    let z = ctx.int("input_zero_point")? + shift;
    if !(0..=255).contains(&z) {
        return Err(Error::bad_input(format!(
            "argument 'input_zero_point': {} lies outside the dtype's range",
            z - shift
        )));
    }
    Ok(z)
}

fn kernel() -> Result<k8::Kernel> {
    k8::kernel().ok_or_else(|| Error::unsupported("int8 products need AVX512-VNNI or AVX2"))
}

/// `pt2kit.int8_linear`: `[.., k]` rows times a `[n, k]` weight.
pub(super) fn int8_linear(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let w = ctx.tensor("weight")?;
    let (&k, lead) = x
        .dims()
        .split_last()
        .ok_or_else(|| Error::bad_input("argument 'input': a scalar"))?;
    let m: usize = lead.iter().product();
    let (n, wk) = match w.dims() {
        [n, wk] => (*n, *wk),
        d => {
            return Err(Error::bad_input(format!(
                "argument 'weight': shape {d:?}, expected [n, k]"
            )))
        }
    };
    if wk != k || k > k8::MAX_K {
        return Err(Error::bad_input(format!(
            "argument 'weight': [{n}, {wk}] against {k} inputs"
        )));
    }
    let shift = shift_of(&x, "input")?;
    let zu = unsigned_zero_point(ctx, shift)?;
    let xs = unsigned_bytes(&x, shift)?;
    let packed = packed_weight(ctx, &w, n, k, |b| b.to_vec(), None)?;
    let fin = finish_of(ctx, &packed, zu, m * n, false)?;
    let fill = |r: usize, out: &mut [u8]| out.copy_from_slice(&xs[r * k..][..k]);
    let mut out = OutBuf::new(m * n, ctx.dtype("output_dtype"))?;
    let sink = out.sink();
    let rows = Out::Nhwc { base: 0, co: n };
    let done = |i0: usize, rows_: usize, j0: usize, cols: usize, tile: &[i32]| {
        // SAFETY: elements (i0 + i, j0 + j) of the output, this block's only
        unsafe { fin.block(sink, tile, (i0, rows_), (j0, cols), rows) };
    };
    let threads = rayon::current_num_threads();
    k8::gemm_rows(m, k, &fill, &packed, threads, kernel()?, &done);
    let mut dims = lead.to_vec();
    dims.push(n);
    one(out.tensor(&dims, ctx)?)
}

/// `pt2kit.int8_conv2d`: NCHW input, `[co, ci, kh, kw]` weight, one group.
pub(super) fn int8_conv2d(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let w = ctx.tensor("weight")?;
    let (b, ci, h, wd) = match x.dims() {
        [b, c, h, w] => (*b, *c, *h, *w),
        d => {
            return Err(Error::bad_input(format!(
                "argument 'input': shape {d:?}, expected NCHW"
            )))
        }
    };
    let (co, kh, kw) = match w.dims() {
        [co, c, kh, kw] if *c == ci && *kh > 0 && *kw > 0 => (*co, *kh, *kw),
        d => {
            return Err(Error::bad_input(format!(
                "argument 'weight': shape {d:?} against {ci} input channels"
            )))
        }
    };
    let pair = |name: &str| -> Result<[usize; 2]> {
        let v = ctx.ints(name)?;
        let v: Vec<usize> = v.iter().map(|&x| x.max(0) as usize).collect();
        match v.as_slice() {
            [a] => Ok([*a, *a]),
            [a, b] => Ok([*a, *b]),
            _ => Err(Error::bad_input(format!("argument '{name}': {v:?}"))),
        }
    };
    let (st, pd, dl) = (pair("stride")?, pair("padding")?, pair("dilation")?);
    if st.contains(&0) || dl.contains(&0) {
        return Err(Error::bad_input("a stride or dilation of 0"));
    }
    let span = |n: usize, k: usize, i: usize| (n + 2 * pd[i]).checked_sub(dl[i] * (k - 1) + 1);
    let (Some(eh), Some(ew)) = (span(h, kh, 0), span(wd, kw, 1)) else {
        return Err(Error::bad_input(
            "the kernel is larger than the padded input",
        ));
    };
    let (ho, wo) = (eh / st[0] + 1, ew / st[1] + 1);
    let k = ci * kh * kw;
    if k > k8::MAX_K || k == 0 || b * co * ho * wo == 0 {
        return Err(Error::unsupported(format!(
            "an int8 convolution {k} deep to [{b}, {co}, {ho}, {wo}]"
        )));
    }
    let shift = shift_of(&x, "input")?;
    let zu = unsigned_zero_point(ctx, shift)?;
    // the weight as [co][kh][kw][ci]
    let reorder = |src: &[i8]| -> Vec<i8> {
        let mut out = vec![0i8; src.len()];
        for o in 0..co {
            for c in 0..ci {
                for t in 0..kh * kw {
                    out[(o * kh * kw + t) * ci + c] = src[(o * ci + c) * kh * kw + t];
                }
            }
        }
        out
    };
    let kern = kernel()?;
    // Winograd's F(2x2, 3x3) where the AVX2 kernel runs (VNNI's direct
    // product is as fast as its 16-bit one would be)
    let winograd = kern == k8::Kernel::Avx2
        && [kh, kw, st[0], st[1], dl[0], dl[1]] == [3, 3, 1, 1, 1, 1]
        && k8::winograd::fits(ci, h, wd, pd);
    let packed = packed_weight(ctx, &w, co, k, reorder, winograd.then_some(ci))?;
    let hw = ho * wo;
    // the output left channels-last where only int8 convolutions read it
    // (`exec/layout.rs`)
    let out_nhwc = ctx.exec.channels_last
        && ctx.channels_last_readers()
        && ctx.dtype("output_dtype").is_some();
    let fin = finish_of(ctx, &packed, zu, b * co * hw, out_nhwc)?;
    let mut out = OutBuf::new(b * co * hw, ctx.dtype("output_dtype"))?;
    let sink = out.sink();
    let threads = rayon::current_num_threads();
    // an input left channels-last is read by whole images as it lies
    let stored = match super::nhwc_dims(&x.t) {
        Some(_) => Some(stored_bytes(&x, shift)?.0),
        None => None,
    };
    let xt = x.t.to_device(&candle_core::Device::Cpu)?;
    let xt = if stored.is_some() {
        xt
    } else {
        xt.contiguous()?
    };
    let len = h * wd * ci;
    let mut nhwc = vec![0u8; len];
    for img in 0..b {
        match &stored {
            Some(v) => nhwc.copy_from_slice(&v[img * len..][..len]),
            None => channels_last(&xt, shift, img * len, [ci, h, wd], &mut nhwc)?,
        }
        let src = &nhwc;
        let fill = |r: usize, row: &mut [u8]| {
            let (oy, ox) = (r / wo, r % wo);
            for ty in 0..kh {
                let iy = (oy * st[0] + ty * dl[0]) as isize - pd[0] as isize;
                let ix0 = (ox * st[1]) as isize - pd[1] as isize;
                let iy_in = iy >= 0 && (iy as usize) < h;
                if iy_in && dl[1] == 1 && ix0 >= 0 && ix0 as usize + kw <= wd {
                    // the tap row's pixels lie side by side: one copy
                    let at = (iy as usize * wd + ix0 as usize) * ci;
                    row[ty * kw * ci..][..kw * ci].copy_from_slice(&src[at..][..kw * ci]);
                    continue;
                }
                for tx in 0..kw {
                    let ix = (ox * st[1] + tx * dl[1]) as isize - pd[1] as isize;
                    let dst = &mut row[(ty * kw + tx) * ci..][..ci];
                    if !iy_in || ix < 0 || ix as usize >= wd {
                        dst.fill(zu as u8);
                    } else {
                        dst.copy_from_slice(&src[(iy as usize * wd + ix as usize) * ci..][..ci]);
                    }
                }
            }
        };
        let lay = if out_nhwc {
            Out::Nhwc {
                base: img * hw * co,
                co,
            }
        } else {
            Out::Planar {
                base: img * co * hw,
                hw,
            }
        };
        let done = |i0: usize, rows: usize, j0: usize, cols: usize, tile: &[i32]| {
            // SAFETY: elements (img, j0 + j, i0 + i) of the output, this
            // block's only
            unsafe { fin.block(sink, tile, (i0, rows), (j0, cols), lay) };
        };
        match packed.winograd.as_ref().filter(|_| winograd) {
            Some(wp) => k8::winograd::conv3x3(src, [h, wd], pd, zu as u8, wp, threads, &done),
            None => k8::gemm_rows(hw, k, &fill, &packed, threads, kern, &done),
        }
    }
    one(if out_nhwc {
        ctx.exec
            .outputs_channels_last
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        out.nhwc_tensor([b, co, ho, wo], ctx)?
    } else {
        out.tensor(&[b, co, ho, wo], ctx)?
    })
}

/// `pt2kit.int8_max_pool2d`: the 2-D max pool of a quantized NCHW tensor
/// (uint8, or int8 held in I16) on its values, each window's largest of
/// the elements inside the input (padding and ceil mode's overhang take
/// no part, as torch's -inf does not win; a window of padding alone gives
/// `empty`, the quantization's lowest value, as -inf quantizes), planes
/// split over the threads.
pub(super) fn int8_max_pool2d(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let [b, c, h, w] = match x.dims() {
        [b, c, h, w] => [*b, *c, *h, *w],
        d => {
            return Err(Error::bad_input(format!(
                "argument 'input': shape {d:?}, expected NCHW"
            )))
        }
    };
    let pair = |name: &str, default: Option<[usize; 2]>| -> Result<[usize; 2]> {
        let v = if ctx.has(name) {
            ctx.ints(name)?
        } else {
            Vec::new()
        };
        let v: Vec<usize> = v.iter().map(|&x| x.max(0) as usize).collect();
        match (v.as_slice(), default) {
            ([a], _) => Ok([*a, *a]),
            ([a, b], _) => Ok([*a, *b]),
            ([], Some(d)) => Ok(d),
            _ => Err(Error::bad_input(format!("argument '{name}': {v:?}"))),
        }
    };
    let k = pair("kernel_size", None)?;
    let (st, pd, dl) = (
        pair("stride", Some(k))?,
        pair("padding", Some([0, 0]))?,
        pair("dilation", Some([1, 1]))?,
    );
    let ceil = ctx.opt_bool("ceil_mode", false)?;
    let empty = if ctx.has("empty") {
        ctx.int("empty")?
    } else {
        0
    };
    for i in 0..2 {
        // (the dilated kernel's reach, checked: an untrusted graph may ask
        // for any size)
        let reach = k[i]
            .checked_sub(1)
            .and_then(|e| e.checked_mul(dl[i]))
            .filter(|&e| e <= 1 << 30);
        if reach
            .is_none_or(|e| st[i] == 0 || dl[i] == 0 || st[i] > 1 << 30 || pd[i] > e.div_ceil(2))
        {
            return Err(Error::bad_input(
                "pooling: bad kernel_size, stride, padding or dilation",
            ));
        }
    }
    let oh = super::pool_len(h, k[0], st[0], pd[0], dl[0], ceil)?;
    let ow = super::pool_len(w, k[1], st[1], pd[1], dl[1], ceil)?;
    let g = PoolGeometry {
        hw: [h, w],
        out: [oh, ow],
        k,
        st,
        pd,
        dl,
    };
    let xt = x.t.to_device(&candle_core::Device::Cpu)?.contiguous()?;
    let dims = [b, c, oh, ow];
    let dev = ctx.device();
    let t = match xt.dtype() {
        DType::U8 => super::with_host::<u8, _>(&xt, |v| {
            CandleTensor::from_vec(g.planes(v, empty.clamp(0, 255) as u8), &dims, dev)
        }),
        DType::I16 => super::with_host::<i16, _>(&xt, |v| {
            CandleTensor::from_vec(g.planes(v, empty.clamp(-128, 127) as i16), &dims, dev)
        }),
        _ => None,
    }
    .ok_or_else(|| {
        Error::bad_input("argument 'input': expected a quantized (uint8 or int8) tensor")
    })??;
    one(Tensor::new(t, x.dtype))
}

/// A 2-D max pool's geometry: input and output sides, kernel, stride,
/// padding and dilation, each `[h, w]`.
struct PoolGeometry {
    hw: [usize; 2],
    out: [usize; 2],
    k: [usize; 2],
    st: [usize; 2],
    pd: [usize; 2],
    dl: [usize; 2],
}

impl PoolGeometry {
    /// The taps of output position `o` along side `i` inside the input:
    /// the first input index and how many.
    fn taps(&self, i: usize, o: usize) -> (usize, usize) {
        let start = (o * self.st[i]) as isize - self.pd[i] as isize;
        let d = self.dl[i] as isize;
        let first = if start < 0 { (-start + d - 1) / d } else { 0 } as usize;
        let n = self.hw[i] as isize;
        let last = (0..self.k[i] as isize).rev().find(|&t| start + t * d < n);
        match last {
            Some(l) if l as usize >= first => (
                (start + first as isize * d) as usize,
                l as usize - first + 1,
            ),
            _ => (0, 0),
        }
    }

    /// Every plane of `v` pooled (planes of `hw`, in order): for each
    /// output line the largest of its window's input lines, element by
    /// element (in vector lanes), then of each window's columns of that.
    /// A window with no input element in it (a dilated kernel's taps
    /// all in the padding) gives `empty`: torch's -inf, quantized.
    fn planes<T: Copy + Ord + Default + Send + Sync>(&self, v: &[T], empty: T) -> Vec<T> {
        let ([h, w], [oh, ow]) = (self.hw, self.out);
        let planes = v.len() / (h * w).max(1);
        let rows: Vec<(usize, usize)> = (0..oh).map(|o| self.taps(0, o)).collect();
        let cols: Vec<(usize, usize)> = (0..ow).map(|o| self.taps(1, o)).collect();
        let mut out = vec![T::default(); planes * oh * ow];
        crate::kernels::threads::par_chunks_init(
            &mut out,
            (oh * ow).max(1),
            Vec::new,
            |line: &mut Vec<T>, p, o| {
                let plane = &v[p * h * w..][..h * w];
                for (oy, &(y0, ny)) in rows.iter().enumerate() {
                    let o = &mut o[oy * ow..][..ow];
                    if ny == 0 {
                        o.fill(empty);
                        continue;
                    }
                    line.clear();
                    line.extend_from_slice(&plane[y0 * w..][..w]);
                    for ty in 1..ny {
                        let next = &plane[(y0 + ty * self.dl[0]) * w..][..w];
                        for (m, &x) in line.iter_mut().zip(next) {
                            *m = (*m).max(x);
                        }
                    }
                    for (d, &(x0, nx)) in o.iter_mut().zip(&cols) {
                        *d = (1..nx).fold(if nx == 0 { empty } else { line[x0] }, |m, t| {
                            m.max(line[x0 + t * self.dl[1]])
                        });
                    }
                }
            },
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::PoolGeometry;

    /// The quantized max pool ([`PoolGeometry::planes`]) against each
    /// window's elements taken one by one inside the input, on random
    /// bytes and every kernel, stride, padding (up to torch's half the
    /// dilated kernel), dilation and ceil mode of a small grid, odd sides
    /// and planes: the same values.
    #[test]
    fn quantized_max_pool_matches_the_windows() {
        let mut seed = 0x5eed_u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        let mut cases = 0;
        for (h, w) in [(1, 1), (5, 7), (8, 8), (13, 6)] {
            let planes = 1 + next() % 3;
            let v: Vec<u8> = (0..planes * h * w).map(|_| next() as u8).collect();
            let vi: Vec<i16> = v.iter().map(|&x| x as i16 - 128).collect();
            for k in 1..=4usize {
                for s in 1..=3usize {
                    for d in 1..=2usize {
                        for p in 0..=((k - 1) * d).div_ceil(2) {
                            for ceil in [false, true] {
                                let out =
                                    |n: usize| crate::exec::ops::pool_len(n, k, s, p, d, ceil).ok();
                                let (Some(oh), Some(ow)) = (out(h), out(w)) else {
                                    continue;
                                };
                                let g = PoolGeometry {
                                    hw: [h, w],
                                    out: [oh, ow],
                                    k: [k, k],
                                    st: [s, s],
                                    pd: [p, p],
                                    dl: [d, d],
                                };
                                let (got, goti) = (g.planes(&v, 0), g.planes(&vi, -128));
                                for pl in 0..planes {
                                    for oy in 0..oh {
                                        for ox in 0..ow {
                                            let mut want: Option<u8> = None;
                                            for ty in 0..k {
                                                for tx in 0..k {
                                                    let iy =
                                                        (oy * s + ty * d) as isize - p as isize;
                                                    let ix =
                                                        (ox * s + tx * d) as isize - p as isize;
                                                    if iy >= 0
                                                        && ix >= 0
                                                        && (iy as usize) < h
                                                        && (ix as usize) < w
                                                    {
                                                        let x = v[pl * h * w
                                                            + iy as usize * w
                                                            + ix as usize];
                                                        want = Some(want.map_or(x, |m| m.max(x)));
                                                    }
                                                }
                                            }
                                            let at = (pl * oh + oy) * ow + ox;
                                            let what = format!("{h}x{w} k{k} s{s} d{d} p{p} ceil {ceil} at {pl},{oy},{ox}");
                                            assert_eq!(got[at], want.unwrap_or(0), "{what}");
                                            assert_eq!(
                                                goti[at],
                                                want.map_or(-128, |x| x as i16 - 128),
                                                "{what} (int8)"
                                            );
                                        }
                                    }
                                }
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(cases > 100, "{cases} geometries");
    }
}
