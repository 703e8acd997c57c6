//! Convolutions, transposed convolutions, im2col and col2im: the executor rows.

use crate::ir::op::aten;
use super::*;

/// The element types the convolution's product runs in.
trait GemmElem: candle_core::WithDType + Default + Send + Sync {
    const ONE: Self;
}

impl GemmElem for f32 {
    const ONE: f32 = 1.0;
}

impl GemmElem for f64 {
    const ONE: f64 = 1.0;
}

/// `out[bi] = W [co, k] @ col[bi] [k, n] (+ bias per row)`: the output
/// channels split between the threads, each a single-threaded gemm (which
/// scales better than one gemm asked to parallelise small products), the
/// bias the product's initial value.
fn gemm_bias<T: GemmElem>(col: &[T], ws: &[T], bias: Option<&[T]>, b: usize, co: usize, n: usize) -> Vec<T> {
    let k = ws.len() / co.max(1);
    let mut out: Vec<T> = Vec::with_capacity(b * co * n);
    for bi in 0..b {
        let colb = &col[bi * k * n..(bi + 1) * k * n];
        for o in 0..co {
            let v = bias.map_or(T::default(), |bv| bv[o]);
            out.extend(std::iter::repeat_n(v, n));
        }
        let dst = &mut out[bi * co * n..(bi + 1) * co * n];
        let threads = rayon::current_num_threads().clamp(1, co.max(1));
        let rows = co.div_ceil(threads).max(1);
        crate::kernels::threads::par_chunks(dst, rows * n, |t, d| {
            let m = d.len() / n.max(1);
            let wrows = &ws[t * rows * k..(t * rows + m) * k];
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
                    T::ONE,
                    T::ONE,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
        });
    }
    out
}

/// Convolution (one group, CPU, float32 or float64) over 1 to 3 spatial
/// dims as im2col ([`im2col_fill`]) plus a gemm per thread ([`gemm_bias`]),
/// the weights used as they lie (`[c_out, c_in * taps]`). candle's own 2-D
/// kernel converts the input to NHWC and reshuffles the weights on every
/// call, single-threaded; this is about six times as fast on ResNet's 3x3s.
/// Stride, padding and dilation may differ per dim.
fn conv_im2col(exec: &Executor, x: &CandleTensor, w: &CandleTensor, bias: Option<&CandleTensor>, args: ConvArgs) -> Result<CandleTensor> {
    let mut p = ConvParams::new(x.dims(), w.dims(), args)?;
    // the packed kernels scale their packed copy of a weight (packed
    // once); the others read it scaled
    let packed = x.dtype() == DType::F32
        && (p.algorithm == Algorithm::Packed
            || p.algorithm == Algorithm::Subsampled
            || p.algorithm == Algorithm::Direct && pointwise(&p.g) && channels_last_dims(x).is_some());
    let scaled;
    let w = match p.scale {
        Some(s) if !packed => {
            scaled = scaled_weight(w, s)?;
            p.scale = None;
            &scaled
        }
        _ => w,
    };
    if x.dtype() != DType::F32 {
        return match x.dtype() {
            DType::F64 => conv_host::<f64>(x, w, bias, &p),
            other => Err(Error::internal(format!("im2col convolution in {other:?}"))),
        };
    }
    // --precision bf16: the product in bfloat16 (bf16.rs), but for a stem
    // over few channels
    let planar = x.rank() == 4 && p.g.planar();
    if let Some(k) = exec.bf16_kernel().filter(|_| p.algorithm != Algorithm::FewChannels && (planar || p.algorithm != Algorithm::Host)) {
        return conv_bf16(exec, x, w, bias, &p, k);
    }
    match p.algorithm {
        Algorithm::Subsampled => {
            // a 1x1 convolution with a stride: the pixels it reads, then a
            // pointwise one over them
            let xs = subsample(x, &p.g)?;
            conv_im2col(exec, &xs, w, bias, ConvArgs { scale: p.scale, ..args.geometry(&[1, 1], &[0, 0], &[1, 1]) })
        }
        Algorithm::FewChannels => conv_few_channels(exec, x, w, bias, &p),
        Algorithm::Winograd => conv_winograd(exec, x, w, bias, &p),
        Algorithm::PixelTaps => conv_pixel_taps(exec, x, w, bias, &p),
        // an input stored channels-last is the pixel rows' A as it lies,
        // and their product is an output left so
        Algorithm::Direct if pointwise(&p.g) && channels_last_dims(x).is_some() => conv_packed(exec, x, w, bias, &p),
        Algorithm::Direct => conv_direct(x, w, bias, &p),
        Algorithm::Packed => conv_packed(exec, x, w, bias, &p),
        Algorithm::Host => conv_host::<f32>(x, w, bias, &p),
    }
}

/// The pixels a strided 1x1 convolution reads, `[b, c, oh, ow]`: the
/// stride-phased grid of the direct path copied every phase of the input
/// to read one (ResNet's downsampling 1x1s at batch 8 ran at 120-225
/// GFLOP/s).
fn subsample(x: &CandleTensor, g: &Windows) -> Result<CandleTensor> {
    let (b, c) = (x.dims()[0], x.dims()[1]);
    let ([_, h, w], [_, sh, sw], [_, oh, ow]) = (g.input, g.stride, g.output);
    let mut out = sgemm::uninit(b * c * oh * ow);
    with_host(x, |xs: &[f32]| {
        crate::kernels::threads::par_chunks(&mut out, oh * ow, |p, dst| {
            let plane = &xs[p * h * w..][..h * w];
            for (oy, line) in dst.chunks_mut(ow.max(1)).enumerate() {
                crate::kernels::conv::every_nth(&plane[oy * sh * w..], sw, line);
            }
        })
    })
    .ok_or_else(|| Error::internal("subsampled convolution of an input that is not float32 on the host"))?;
    // SAFETY: every plane's every line written whole by every_nth
    let out = unsafe { sgemm::assume_init(out) };
    CandleTensor::from_vec(out, (b, c, oh, ow), x.device()).map_err(Error::from)
}

/// A convolution's float32 output `[b, c, h, w]` left channels-last
/// (`[b][h][w][c]`, a permuted view; counted in `ir-run --stats`), made
/// by `make(out, then)` (every element written, `then` run on each block),
/// where the fused chain after it, if any, is of constants (an element's
/// place is moot); `None`, nothing made, where the chain reads other
/// tensors (their elements lie in planes).
fn channels_last_output(
    exec: &Executor,
    epilogue: Option<&EpilogueArgs>,
    dims: [usize; 4],
    make: impl FnOnce(&mut [std::mem::MaybeUninit<f32>], Option<&sgemm::Epilogue>) -> Result<()>,
) -> Result<Option<CandleTensor>> {
    let len = dims.iter().product();
    let fused = register_epilogue(epilogue, len);
    let then = fused.as_ref().map(|(steps, inputs)| sgemm::Epilogue {
        steps,
        inputs,
        map: None,
    });
    if epilogue.is_some() && !then.as_ref().is_some_and(sgemm::Epilogue::constants_only) {
        return Ok(None);
    }
    let mut out = sgemm::uninit(len);
    make(&mut out, then.as_ref())?;
    mark_applied(epilogue, then.is_some());
    exec.outputs_channels_last.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: `make` wrote every element
    let out = unsafe { sgemm::assume_init(out) };
    channels_last_tensor(out, dims).map(Some)
}

/// A convolution's float32 output of `shape`, made by `make(out,
/// accumulate, then)` (every element of `out` written; with `accumulate`,
/// added to what `out` holds; `then` run on each block as it is done):
/// written over the dead residual its epilogue offers
/// ([`EpilogueArgs::over`]), the add made as each element is stored, the
/// steps after it on each block; or fresh, the epilogue run on each block
/// where it fits.
fn output_of(
    device: &candle_core::Device,
    shape: Vec<usize>,
    epilogue: Option<&EpilogueArgs>,
    make: impl FnOnce(&mut [std::mem::MaybeUninit<f32>], bool, Option<&sgemm::Epilogue>) -> Result<()>,
) -> Result<CandleTensor> {
    let len: usize = shape.iter().product();
    if let Some((e, (r, steps, inputs))) = epilogue.and_then(|e| Some((e, e.over(len)?))) {
        let then = sgemm::Epilogue {
            steps: &steps,
            inputs,
            map: None,
        };
        write_over(r, |dst| make(sgemm::as_uninit(dst), true, Some(&then)))?;
        return Ok(applied_over(e, r));
    }
    let mut out = sgemm::uninit(len);
    let fused = register_epilogue(epilogue, len);
    let then = fused.as_ref().map(|(steps, inputs)| sgemm::Epilogue {
        steps,
        inputs,
        map: None,
    });
    make(&mut out, false, then.as_ref())?;
    mark_applied(epilogue, then.is_some());
    // SAFETY: `make` wrote every element
    let out = unsafe { sgemm::assume_init(out) };
    CandleTensor::from_vec(out, shape, device).map_err(Error::from)
}

mod bf16;
pub(crate) use bf16::prepack_conv_weight;
use bf16::conv_bf16;
mod calls;
mod plan;
use plan::{packed_as_pixel_rows, writes_over, Algorithm, ConvArgs, ConvParams};
use calls::{conv2d_depthwise, conv_direct, conv_few_channels, conv_pixel_rows, conv_pixel_taps, conv_winograd, depthwise_tap_sum};
mod scaled;
use scaled::{conv_scaled, scaled_weight};
pub(crate) use calls::takes_blocked;
pub(crate) use crate::kernels::conv::depthwise::depthwise_by_blocks;
pub(crate) use crate::kernels::conv::winograd::winograd_weights;
use crate::kernels::conv::{im2col_fill, pointwise};
use crate::kernels::conv::{few::few_channels, pixels::pixel_taps, winograd::winograd};

/// A convolution's weight as the product's matrix `[c_out, c_in * taps]`.
fn weight_matrix(w: &CandleTensor, co: usize, k: usize) -> Result<CandleTensor> {
    w.contiguous()?.reshape((co, k)).map_err(Error::from)
}

/// That matrix packed as the kernel's left operand (once: the executor's
/// pack cache keeps a weight's).
fn packed_weight(exec: &Executor, w: &CandleTensor) -> Result<std::sync::Arc<sgemm::PackedA>> {
    with_matrix(w, |v| exec.packed_a(v))
        .ok_or_else(|| Error::internal("packed convolution of a weight that is not float32 on the host"))
}

/// Output planes of at least this many pixels take [`conv_packed`]'s
/// product image by image; smaller ones the batch's images side by side
/// (see there).
const PACKED_IMAGE_MIN: usize = 1024;

/// A convolution in float32 through the packed kernel ([`sgemm`]): the
/// weight `[c_out, c_in * taps]` (packed once, the left operand) times
/// the im2col matrix of the batch's images `[c_in * taps, images *
/// pixels]` (the right one, made block by block as the kernel reads it,
/// never whole: [`sgemm::gemm_rows`]), the bias added as the first slice
/// is stored, the fused chain run on each block of the output once it is
/// final (one image a product) or on the images once they are in place
/// (several side by side). A pointwise convolution (1x1, stride 1, no
/// padding; any rank) reads its input as it lies; others (2-D) read a
/// padded, stride-phased copy ([`crate::kernels::conv::direct::Im2col`]). Pointwise ones over
/// fewer than [`FEW_PIXELS`] columns, or the planes [`pixel_rows`]
/// names, take [`conv_pixel_rows`].
fn conv_packed(exec: &Executor, x: &CandleTensor, w: &CandleTensor, bias: Option<&CandleTensor>, p: &ConvParams) -> Result<CandleTensor> {
    let (g, shape, scale) = (&p.g, &p.shape, p.scale);
    let (b, c, co) = (shape[0], x.dims()[1], shape[1]);
    let k = c * g.taps();
    let w = weight_matrix(w, co, k)?;
    if pointwise(g) && (packed_as_pixel_rows(g, b, c, co) || channels_last_dims(x).is_some()) {
        return conv_pixel_rows(exec, x, &w, bias, p);
    }
    let pa = packed_weight(exec, &w)?;
    let Some(s) = scale else {
        return packed_product(x, &pa, bias, p);
    };
    let scaled = pa.scaled_columns(s, g.taps());
    let y = packed_product(x, &scaled, bias, p);
    scaled.recycle();
    y
}

/// [`conv_packed`]'s product with the weight packed (`pa`, `[c_out, c_in
/// * taps]`).
fn packed_product(x: &CandleTensor, pa: &sgemm::PackedA, bias: Option<&CandleTensor>, p: &ConvParams) -> Result<CandleTensor> {
    let (g, shape, epilogue) = (&p.g, p.shape.clone(), p.epilogue);
    let (b, c, co) = (shape[0], x.dims()[1], shape[1]);
    let (k, n) = (c * g.taps(), g.out_plane());
    let len = b * co * n;
    // the fused chain after it, on each block as it is done
    let fused = register_epilogue(epilogue, len);
    let then = fused.as_ref().map(|(steps, inputs)| sgemm::Epilogue {
        steps,
        inputs,
        map: None,
    });
    let threads = rayon::current_num_threads();
    // the batch's images side by side: one product of `b * n` columns,
    // the weight read once (a batch of 8 at ResNet's 14x14 stage is 1568
    // columns where each image alone is 196: 6.5 -> 5.1 ms); images of
    // 1024 pixels or more one by one, each product written in place (the
    // reordering costs more than it saves there: ResNet-18 at batch 8
    // 115 -> 101 ms against batching up to 4096)
    let per = if n >= PACKED_IMAGE_MIN { 1 } else { b.max(1) };
    let bv = bias.map(f32s).transpose()?;
    let init = bv.as_deref().map_or(sgemm::Init::Zero, sgemm::Init::RowBias);
    let image = c * g.input.iter().product::<usize>();
    let mut out = sgemm::uninit(len);
    let mut staging = Vec::new();
    with_host(x, |xs: &[f32]| {
        for first in (0..b).step_by(per) {
            let count = per.min(b - first);
            let (total, xs) = (count * n, &xs[first * image..][..count * image]);
            // row r of the columns from column j0: image by image
            let im2col = (!pointwise(g)).then(|| crate::kernels::conv::direct::Im2col::new(xs, count, c, g));
            let fill = |r: usize, j0: usize, seg: &mut [f32]| match &im2col {
                Some(im) => im.fill(xs, r, j0, seg),
                None => {
                    let (mut j, mut at) = (j0, 0);
                    while at < seg.len() {
                        let (i, p) = (j / n, j % n);
                        let len = (n - p).min(seg.len() - at);
                        seg[at..at + len].copy_from_slice(&xs[(i * c + r) * n + p..][..len]);
                        (j, at) = (j + len, at + len);
                    }
                    // the same row's next block fetched into L2 while this
                    // block's products run: B's rows are 64 to 256 planes
                    // at once, more streams than the hardware prefetcher
                    // follows (at batch 8, `[256, 64]` over 56x56 0.80 ->
                    // 0.67x of the direct kernel's time, `[64, 256]` 1.50
                    // -> 1.04x, interleaved; at batch 1 within noise)
                    let (i, p) = (j / n, j % n);
                    if i < count {
                        let from = (i * c + r) * n + p;
                        let end = (from + seg.len()).min((i * c + r + 1) * n);
                        for q in (from..end).step_by(16) {
                            crate::kernels::prefetch_l2(xs.as_ptr().wrapping_add(q));
                        }
                    }
                }
            };
            if count == 1 {
                // the chain on each block as the product finishes it,
                // its inputs from this image on
                let at = first * co * n;
                let inputs: Vec<&[f32]> = then
                    .map(|e| e.inputs.iter().map(|v| &v[at.min(v.len())..]).collect())
                    .unwrap_or_default();
                let then = then.map(|e| sgemm::Epilogue {
                    inputs: &inputs,
                    ..e
                });
                let prod = &mut out[at..][..co * n];
                sgemm::gemm_rows(sgemm::Lhs::packed(pa), k, n, &fill, prod, n, init, then.as_ref(), threads);
                continue;
            }
            staging.resize(co * total, 0.0);
            let prod = sgemm::as_uninit(&mut staging);
            sgemm::gemm_rows(sgemm::Lhs::packed(pa), k, total, &fill, prod, total, init, None, threads);
            // [c_out, images, n] to [images, c_out, n]
            for (o, row) in staging.chunks(total.max(1)).enumerate() {
                for (i, part) in row.chunks(n.max(1)).enumerate() {
                    for (d, v) in out[((first + i) * co + o) * n..][..n].iter_mut().zip(part) {
                        d.write(*v);
                    }
                }
            }
            if let Some(e) = &then {
                let at = first * co * n;
                // SAFETY: the images' elements were written just above
                let done = unsafe { sgemm::assume_init_mut(&mut out[at..at + count * co * n]) };
                sgemm::run_epilogue(e, at, done);
            }
        }
    })
    .ok_or_else(|| Error::internal("packed convolution of an input that is not on the host"))?;
    mark_applied(epilogue, then.is_some());
    // SAFETY: every element written (each image's product or its part of a
    // group's)
    let out = unsafe { sgemm::assume_init(out) };
    CandleTensor::from_vec(out, shape, x.device()).map_err(Error::from)
}

/// [`conv_im2col`] in `T`, to an output of `shape`.
fn conv_host<T: GemmElem>(x: &CandleTensor, w: &CandleTensor, bias: Option<&CandleTensor>, p: &ConvParams) -> Result<CandleTensor> {
    let (g, shape) = (&p.g, p.shape.clone());
    let (b, c, co) = (shape[0], x.dims()[1], shape[1]);
    let bias: Option<Vec<T>> = match bias {
        Some(t) => Some(t.flatten_all().and_then(|t| t.to_vec1())?),
        None => None,
    };
    let out = with_host(x, |xs: &[T]| {
        let col = im2col_fill(xs, b, c, g);
        with_host(w, |ws: &[T]| gemm_bias(&col, ws, bias.as_deref(), b, co, g.out_plane()))
    })
    .flatten()
    .ok_or_else(|| Error::internal("im2col convolution of tensors that are not on the host"))?;
    CandleTensor::from_vec(out, shape, x.device()).map_err(Error::from)
}

fn conv(ctx: &mut Ctx) -> OpResult {
    // conv(x * s, w) as conv(x, w * s), s one number an input channel
    // (fuse::Plan::scaled)
    if let Some((x, s)) = ctx.scaled_input()? {
        let w = ctx.tensor("weight")?;
        let scale = with_host::<f32, _>(&s.t, <[f32]>::to_vec).filter(|_| s.dtype == Dtype::Float32);
        return match scale {
            Some(scale) => conv_scaled(ctx, x, w, &scale),
            None => {
                let ws = w.t.broadcast_mul(&s.t)?;
                conv_scaled(ctx, x, Tensor::new(ws, w.dtype), &[])
            }
        };
    }
    let (x, w) = (ctx.tensor("input")?, ctx.tensor("weight")?);
    if !x.dtype.is_floating() || !w.dtype.is_floating() {
        return Err(unsupported(format!(
            "a convolution of {} values (the executor convolves floats only)",
            x.dtype.torch_name()
        )));
    }
    if x.rank() + 1 == w.rank() {
        // An unbatched input (torch takes [C, L] or [C, H, W]): a batch of one.
        let xb = Tensor::new(x.t.unsqueeze(0)?, x.dtype);
        let mut outs = conv_batched(ctx, xb, w, None)?;
        if let Some(Value::Tensor(y)) = outs.first_mut() {
            y.t = y.t.squeeze(0)?;
        }
        return Ok(outs);
    }
    conv_batched(ctx, x, w, None)
}

/// `scale`: one number an input channel to scale the weight's by (the
/// plan's folded scale: a 2-D convolution of one group, not transposed).
fn conv_batched(ctx: &mut Ctx, x: Tensor, w: Tensor, scale: Option<&[f32]>) -> OpResult {
    let w = match scale {
        Some(s) if x.rank() != 4 || ctx.node.target.name != "convolution" && ctx.node.target.name != "conv2d" => {
            Tensor::new(scaled_weight(&w.t, s)?, w.dtype)
        }
        _ => w,
    };
    let bias = ctx.opt_tensor("bias")?;
    let transposed = ctx.node.target.name == "convolution" && ctx.bool("transposed")?;
    let groups = ctx.opt_int("groups")?.unwrap_or(1) as usize;
    let stride = pair(&ctx.ints("stride").unwrap_or_default(), 1);
    let mut dilation = pair(&ctx.ints("dilation").unwrap_or_default(), 1);
    if w.rank() == 4 {
        // a dilation along a dim of one tap spaces nothing: 1 there, so
        // that a 1x1 with dilation (2, 1) is the plain pointwise one
        // (candle's kernels, where the baseline takes them, refused it)
        if w.dims()[2] == 1 {
            dilation.0 = 1;
        }
        if w.dims()[3] == 1 {
            dilation.1 = 1;
        }
    }
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
            let mut y = x.t.conv_transpose2d(&w.t, p, op, s, d)?;
            if let Some(b) = bias {
                let b = b
                    .cast(Dtype::Float32)?
                    .t
                    .reshape((1, b.dims()[0], 1, 1))?;
                y = y.broadcast_add(&b)?;
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
            .conv1d(&w.cast(dt)?.t, padding.0, stride.0, dilation.0, groups)?;
        if let Some(b) = bias {
            let b = b.cast(dt)?.t.reshape((1, b.dims()[0], 1))?;
            y = y.broadcast_add(&b)?;
        }
        return one(Tensor::new(y, dt));
    }
    if x.rank() == 5 {
        return one(conv3d(ctx, &x, &w, bias, groups)?);
    }
    if x.rank() != 4 {
        return Err(unsupported(format!(
            "convolution on rank {} (1-D to 3-D are implemented)",
            x.rank()
        )));
    }
    let dt = result_type(&[(x.dtype, Rank::Dim), (w.dtype, Rank::Dim)]);
    let (xin, win) = (x.cast(dt)?.t, w.cast(dt)?.t);
    let one_by_one =
        win.dims()[2] == 1 && win.dims()[3] == 1 && stride == (1, 1) && padding == (0, 0);
    let host_f32 = dt == Dtype::Float32 && xin.device().is_cpu();
    let depthwise = groups > 1 && groups == xin.dims()[1] && win.dims()[1] == 1;
    // 1x1 convolutions too, where the packed kernel runs (else candle's)
    let own = groups > 1 || !one_by_one || crate::kernels::cpu().vector;
    let mut y = if host_f32 && own {
        let b = match &bias {
            Some(b) => Some(b.cast(dt)?.t),
            None => None,
        };
        // the bias is added inside (fused into the product or the sum)
        let (s, p, d) = (
            [stride.0, stride.1],
            [padding.0, padding.1],
            [dilation.0, dilation.1],
        );
        // a fused group after it runs on each block of its output as the
        // block is done (where the kernel takes one); most kernels may
        // write their output over a dead residual the group adds
        let over = !depthwise
            && groups == 1
            && crate::kernels::cpu().vector
            && Windows::new(&xin.dims()[2..], &win.dims()[2..], &s, &p, &d)
                .is_ok_and(|g| writes_over(&g, xin.dims(), win.dims()));
        let y = ctx.with_epilogue_over(over, |epi| {
            if depthwise {
                conv2d_depthwise(ctx.exec, &xin, &win, b.as_ref(), (stride, padding, dilation), epi)
            } else {
                // left channels-last where every reader reads it so
                let channels_last = ctx.exec.channels_last && ctx.channels_last_readers();
                let scale = scale.filter(|_| groups == 1);
                let args = ConvArgs {
                    epilogue: epi,
                    channels_last,
                    scale,
                    ..ConvArgs::geometry_only(&s, &p, &d)
                };
                conv_grouped(ctx.exec, &xin, &win, b.as_ref(), groups, args)
            }
        })?;
        return one(Tensor::new(y, dt));
    } else if depthwise && !xin.device().is_cpu() {
        depthwise_tap_sum(&xin, &win, (stride, padding, dilation))?
    } else {
        if stride.0 != stride.1 || dilation.0 != dilation.1 {
            // candle's kernels take one stride and one dilation: on the
            // host, im2col over each dim's own (as 3-D convolutions run),
            // in float64 for float64
            if !xin.device().is_cpu() || !matches!(dt, Dtype::Float32 | Dtype::Float64) {
                return Err(unsupported(format!(
                    "a convolution with strides {stride:?} and dilations {dilation:?} that differ \
                     per dim, in {} on {} (candle's kernels have one of each)",
                    dt.torch_name(),
                    if xin.device().is_cpu() { "the CPU" } else { "the GPU" }
                )));
            }
            let win = match scale {
                Some(s) => scaled_weight(&win, s)?,
                None => win,
            };
            let b = bias.as_ref().map(|b| b.cast(dt).map(|b| b.t)).transpose()?;
            let (s, p, d) = ([stride.0, stride.1], [padding.0, padding.1], [dilation.0, dilation.1]);
            let geometry = ConvArgs::geometry_only(&s, &p, &d);
            let y = conv_grouped(ctx.exec, &xin.contiguous()?, &win.contiguous()?, b.as_ref(), groups, geometry)?;
            return one(Tensor::new(y, dt));
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
        let win = match scale {
            Some(s) => scaled_weight(&win, s)?,
            None => win,
        };
        xin.conv2d(&win, pad, stride.0, dilation.0, groups)?
    };
    if let Some(b) = bias {
        let b = b.cast(dt)?.t.reshape((1, b.dims()[0], 1, 1))?;
        y = y.broadcast_add(&b)?;
    }
    one(Tensor::new(y, dt))
}

/// A tensor's f32 elements, row-major.
fn f32s(t: &CandleTensor) -> Result<Vec<f32>> {
    t.flatten_all().and_then(|t| t.to_vec1()).map_err(Error::from)
}

/// A convolution in `groups` (ResNeXt, ShuffleNet; one group is the
/// plain case): one im2col product per group, on its slices of channels.
fn conv_grouped(exec: &Executor, x: &CandleTensor, w: &CandleTensor, bias: Option<&CandleTensor>, groups: usize, args: ConvArgs) -> Result<CandleTensor> {
    if groups == 1 {
        return conv_im2col(exec, x, w, bias, args);
    }
    let scale = args.scale;
    let scaled;
    let w = match scale {
        Some(s) => {
            scaled = scaled_weight(w, s)?;
            &scaled
        }
        None => w,
    };
    let (c, co) = (x.dims()[1], w.dims()[0]);
    if groups == 0 || c % groups != 0 || co % groups != 0 {
        return Err(Error::bad_input(format!(
            "convolution: groups {groups} do not divide {c} input or {co} output channels"
        )));
    }
    let (cg, og) = (c / groups, co / groups);
    let parts = (0..groups)
        .map(|g| {
            let xg = x.narrow(1, g * cg, cg).and_then(|t| t.contiguous())?;
            let wg = w.narrow(0, g * og, og).and_then(|t| t.contiguous())?;
            let bg = match bias {
                Some(b) => Some(b.narrow(0, g * og, og)?),
                None => None,
            };
            conv_im2col(exec, &xg, &wg, bg.as_ref(), ConvArgs::geometry_only(args.stride, args.pad, args.dil))
        })
        .collect::<Result<Vec<_>>>()?;
    CandleTensor::cat(&parts, 1).map_err(Error::from)
}

/// 3-D convolution on the host: im2col over three spatial dims and a gemm
/// ([`conv_grouped`]), in float64 for float64 and in float32 otherwise;
/// stride, padding and dilation per dim, any groups.
fn conv3d(
    ctx: &Ctx,
    x: &Tensor,
    w: &Tensor,
    bias: Option<Tensor>,
    groups: usize,
) -> Result<Tensor> {
    if w.rank() != 5 {
        return Err(Error::bad_input(format!(
            "3-D convolution with a weight of {:?}",
            w.dims()
        )));
    }
    let dt = result_type(&[(x.dtype, Rank::Dim), (w.dtype, Rank::Dim)]);
    let compute = if dt == Dtype::Float64 {
        Dtype::Float64
    } else {
        Dtype::Float32
    };
    let cpu = candle_core::Device::Cpu;
    let host = |t: &Tensor| -> Result<CandleTensor> {
        t.cast(compute)?
            .t
            .to_device(&cpu)
            .and_then(|t| t.contiguous())
            .map_err(Error::from)
    };
    let ints = |name: &str, default: usize| -> Result<Vec<usize>> {
        let v = if ctx.has(name) { ctx.ints(name)? } else { Vec::new() };
        Ok(per_dim(&v, 3, &[default; 3]))
    };
    let (stride, pad, dil) = (ints("stride", 1)?, ints("padding", 0)?, ints("dilation", 1)?);
    let b = bias.as_ref().map(host).transpose()?;
    let y = conv_grouped(ctx.exec, &host(x)?, &host(w)?, b.as_ref(), groups, ConvArgs::geometry_only(&stride, &pad, &dil))?;
    Tensor::new(y.to_device(ctx.device())?, compute).cast(dt)
}

/// The geometry of im2col and col2im: `kernel_size`, `dilation`,
/// `padding` and `stride` (one value or two) over an image of `size`; its
/// output is the grid of sliding blocks.
fn blocks_geom(ctx: &Ctx, size: &[usize]) -> Result<Windows> {
    let arg = |name: &str, default: usize| -> Result<Vec<usize>> {
        Ok(per_dim(&ctx.ints(name)?, 2, &[default; 2]))
    };
    Windows::new(
        size,
        &arg("kernel_size", 1)?,
        &arg("stride", 1)?,
        &arg("padding", 0)?,
        &arg("dilation", 1)?,
    )
}

/// `im2col(self [n, c, h, w], kernel_size, dilation, padding, stride)`:
/// the sliding blocks as columns, `[n, c * kh * kw, blocks]` (unbatched:
/// without n), zero where a block reads padding ([`im2col_fill`]; float32
/// on the host as it lies, other dtypes through float64, exactly).
fn im2col(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let dims = x.dims().to_vec();
    let batched = dims.len() == 4;
    if !(3..=4).contains(&dims.len()) {
        return Err(Error::bad_input(format!(
            "im2col takes a 3-D or 4-D input, not {dims:?}"
        )));
    }
    let (n, c) = if batched { (dims[0], dims[1]) } else { (1, dims[0]) };
    let g = blocks_geom(ctx, &dims[dims.len() - 2..])?;
    let mut shape = vec![c * g.taps(), g.out_plane()];
    if batched {
        shape.insert(0, n);
    }
    if let Some(col) = with_host(&x.t, |xs: &[f32]| im2col_fill(xs, n, c, &g)) {
        let t = CandleTensor::from_vec(col, shape, ctx.device())?;
        return one(Tensor::new(t, x.dtype));
    }
    let col = im2col_fill(&host_f64(&x)?, n, c, &g);
    one(from_f64(&col, &shape, x.dtype, ctx.device())?)
}

/// `col2im(self [n, c * kh * kw, l], output_size, kernel_size, dilation,
/// padding, stride)`: sums the sliding blocks back into images.
fn col2im(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let size = per_dim(&ctx.ints("output_size")?, 2, &[1, 1]);
    let batched = x.rank() == 3;
    if !(2..=3).contains(&x.rank()) {
        return Err(Error::bad_input("col2im takes a 2-D or 3-D input"));
    }
    let g = blocks_geom(ctx, &size)?;
    let ([_, oh, ow], [_, kh, kw], [_, sh, sw]) = (g.input, g.kernel, g.stride);
    let ([_, ph, pw], [_, dh, dw], [_, bh, bw]) = (g.pad, g.dilation, g.output);
    let (n, rows, l) = if batched {
        (x.dims()[0], x.dims()[1], x.dims()[2])
    } else {
        (1, x.dims()[0], x.dims()[1])
    };
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
    (aten::CONV2D, conv),
    (aten::CONVOLUTION, conv),
    (aten::COL2IM, col2im),
    (aten::IM2COL, im2col),
    (crate::exec::int8::CONV2D, super::int8::int8_conv2d),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A convolution for the speed tests below: `b` images of `c` channels
    /// `hw` square, to `co` channels under a `kk` square kernel of stride
    /// `st` (padding `kk / 2`), with a bias; its weight as floats and
    /// packed.
    struct Case {
        g: Windows,
        x: CandleTensor,
        w: CandleTensor,
        bias: CandleTensor,
        ws: Vec<f32>,
        pa: sgemm::PackedA,
        shape: Vec<usize>,
        /// Calls of each variant, about 1.5 GFLOP of them.
        reps: usize,
    }

    impl Case {
        fn new((c, co, hw, kk, st): (usize, usize, usize, usize, usize), b: usize) -> candle_core::Result<Case> {
            let cpu = candle_core::Device::Cpu;
            let pad = kk / 2;
            let g = Windows::new(&[hw, hw], &[kk, kk], &[st, st], &[pad, pad], &[1, 1]).expect("a geometry");
            let [_, oh, ow] = g.output;
            let x = CandleTensor::arange(0f32, (b * c * hw * hw) as f32, &cpu)?.affine(0.37, -3.0)?.sin()?.reshape((b, c, hw, hw))?;
            let k = c * kk * kk;
            let w = CandleTensor::arange(0f32, (co * k) as f32, &cpu)?.affine(0.11, -0.7)?.cos()?.reshape((co, c, kk, kk))?;
            let bias = CandleTensor::arange(0f32, co as f32, &cpu)?.affine(0.01, -0.2)?;
            let ws = w.flatten_all()?.to_vec1::<f32>()?;
            let pa = sgemm::pack_a(&sgemm::View::row_major(&ws, co, k));
            let reps = (1.5e9 / (2.0 * (b * co * k * oh * ow) as f64)) as usize + 20;
            Ok(Case { g, x, w, bias, ws, pa, shape: vec![b, co, oh, ow], reps })
        }

        /// The convolution's parameters (whichever algorithm is called).
        fn params(&self) -> ConvParams<'static> {
            ConvParams {
                g: self.g,
                shape: self.shape.clone(),
                algorithm: Algorithm::Direct,
                epilogue: None,
                channels_last: false,
                scale: None,
            }
        }

        /// The packed product's output ([`packed_product`]).
        fn packed(&self) -> CandleTensor {
            packed_product(&self.x, &self.pa, Some(&self.bias), &self.params()).expect("a convolution")
        }

        /// `a` and `b` called in turn `reps` times each (who goes first
        /// alternating): the median microseconds of each.
        fn medians(&self, mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
            let mut t: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            for round in 0..self.reps {
                for mode in [round % 2, 1 - round % 2] {
                    let t0 = std::time::Instant::now();
                    if mode == 0 {
                        a()
                    } else {
                        b()
                    }
                    t[mode].push(t0.elapsed().as_secs_f64());
                }
            }
            let [mut x, mut y] = t;
            let med = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2] * 1e6
            };
            (med(&mut x), med(&mut y))
        }
    }

    /// The speed tests' environment: `THREADS` (1) and `BATCH` (1).
    fn threads_and_batch() -> (rayon::ThreadPool, usize) {
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(1);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(var("THREADS")).build().expect("a pool");
        (pool, var("BATCH"))
    }

    /// The pixel rows of taps ([`crate::kernels::conv::pixels::pixel_taps_product`]) against
    /// the packed product ([`packed_product`]) on ResNet's small planes at
    /// batch `BATCH` (1), calls interleaved, `THREADS` threads (1):
    /// medians and their ratio. `cargo test --release -p pt2kit
    /// --features exec --lib taps_or_packed_speed -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn taps_or_packed_speed() -> candle_core::Result<()> {
        let (pool, nb) = threads_and_batch();
        // (c_in, c_out, input side, kernel, stride)
        let shapes = [(256usize, 256usize, 28usize, 3usize, 2usize), (512, 512, 14, 3, 2), (128, 256, 28, 3, 2), (256, 512, 14, 3, 2), (256, 256, 14, 3, 1), (512, 512, 7, 3, 1)];
        pool.install(|| {
            for shape in shapes {
                let (c, co, hw, kk, st) = shape;
                let case = Case::new(shape, nb)?;
                let xs = case.x.flatten_all()?.to_vec1::<f32>()?;
                let bv = case.bias.to_vec1::<f32>()?;
                let taps = kk * kk;
                let bs: Vec<sgemm::PackedB> = (0..taps).map(|t| sgemm::pack_b(&crate::kernels::conv::pixels::tap_weight(&case.ws, t, (c, co), taps))).collect();
                let bs: Vec<&sgemm::PackedB> = bs.iter().collect();
                let mut out = sgemm::uninit(case.shape.iter().product());
                let (d, p) = case.medians(
                    || crate::kernels::conv::pixels::pixel_taps_product(&xs, (nb, c, co), &case.g, &bs, Some(&bv), (false, None), &mut out),
                    || drop(case.packed()),
                );
                eprintln!("[{co}, {c}] k{kk} s{st} over {hw}x{hw}: pixel taps {d:.1} us, packed {p:.1} us, packed / taps {:.3}", p / d);
            }
            Ok(())
        })
    }

    /// The direct kernel ([`conv_direct`]) against the packed product
    /// made from an im2col in blocks ([`packed_product`]) on ResNet's and
    /// MobileNetV3's shapes at batch `BATCH` (1; with a bias), calls
    /// interleaved, on `THREADS` threads (1): the medians and their
    /// ratio, the outputs compared. `cargo test --release -p pt2kit
    /// --features exec --lib direct_or_packed_speed -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn direct_or_packed_speed() -> candle_core::Result<()> {
        let (pool, nb) = threads_and_batch();
        // (c_in, c_out, input side, kernel, stride)
        let shapes = [
            (64usize, 256usize, 56usize, 1usize, 1usize),
            (256, 64, 56, 1, 1),
            (64, 64, 56, 1, 1),
            (256, 128, 56, 1, 1),
            (128, 512, 28, 1, 1),
            (512, 128, 28, 1, 1),
            (64, 64, 56, 3, 1),
            (128, 128, 56, 3, 2),
            (64, 128, 56, 3, 2),
            (16, 16, 56, 1, 1),
            (16, 72, 56, 1, 1),
            (72, 24, 28, 1, 1),
            (24, 88, 28, 1, 1),
            (88, 24, 28, 1, 1),
            (24, 96, 28, 1, 1),
            (40, 240, 14, 1, 1),
            (240, 40, 14, 1, 1),
            (48, 288, 14, 1, 1),
            (288, 48, 14, 1, 1),
        ];
        pool.install(|| {
            for shape in shapes {
                let (c, co, hw, kk, st) = shape;
                let case = Case::new(shape, nb)?;
                let direct = || conv_direct(&case.x, &case.w, Some(&case.bias), &case.params()).expect("a convolution");
                let diff = (direct() - case.packed())?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
                assert!(diff < 1e-3, "[{co}, {c}] k{kk} s{st} over {hw}: {diff}");
                let (d, p) = case.medians(|| drop(direct()), || drop(case.packed()));
                eprintln!("[{co}, {c}] k{kk} s{st} over {hw}x{hw}: direct {d:.1} us, packed {p:.1} us, packed / direct {:.3}", p / d);
            }
            Ok(())
        })
    }

    /// The GPU's depthwise convolution ([`depthwise_tap_sum`]), run on the
    /// host, against candle's grouped convolution: strides, dilations and
    /// paddings (per dim, where candle's take one), a channel multiplier,
    /// odd kernels.
    #[test]
    fn depthwise_tap_sum_is_the_grouped_convolution() -> candle_core::Result<()> {
        let cpu = candle_core::Device::Cpu;
        let (b, c, h, w) = (2, 3, 9, 8);
        let x = CandleTensor::arange(0f32, (b * c * h * w) as f32, &cpu)?
            .affine(0.37, -3.0)?
            .sin()?
            .reshape((b, c, h, w))?;
        for (mult, (kh, kw), s, p, d) in [
            (1, (3, 3), 1, 1, 1),
            (1, (3, 3), 2, 1, 1),
            (1, (5, 5), 2, 2, 1),
            (2, (3, 3), 1, 2, 2),
            (1, (3, 1), 3, 0, 1),
        ] {
            let co = c * mult;
            let wt = CandleTensor::arange(0f32, (co * kh * kw) as f32, &cpu)?
                .affine(0.11, -0.7)?
                .cos()?
                .reshape((co, 1, kh, kw))?;
            let want = x.conv2d(&wt, p, s, d, c)?;
            let got = depthwise_tap_sum(&x, &wt, ((s, s), (p, p), (d, d)))?;
            assert_eq!(got.dims(), want.dims(), "mult {mult} k {kh}x{kw} s {s} p {p} d {d}");
            let diff = (got - &want)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
            assert!(diff < 1e-4, "mult {mult} k {kh}x{kw} s {s} p {p} d {d}: {diff}");
        }
        // per-dim strides and paddings (candle's take one): against the
        // input padded by hand and a (1, 2) stride taken from stride 1
        let wt = CandleTensor::ones((c, 1, 3, 3), DType::F32, &cpu)?;
        let full = depthwise_tap_sum(&x, &wt, ((1, 1), (1, 2), (1, 1)))?;
        let strided = depthwise_tap_sum(&x, &wt, ((1, 2), (1, 2), (1, 1)))?;
        let every_other = full.index_select(&CandleTensor::new(vec![0u32, 2, 4, 6, 8], &cpu)?, 3)?;
        let diff = (strided - every_other)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        assert!(diff < 1e-5, "per-dim stride: {diff}");
        Ok(())
    }
}
