//! The convolution kernels called on candle tensors: each reads its
//! operands on the host, runs its kernel of `kernels::conv` and makes the
//! output tensor (in planes or left channels-last), the fused epilogue
//! marked as run.

use super::*;
use crate::kernels::conv::{depthwise::*, direct::*, few::*, pixels::*, stride2::*, winograd::*};

// depthwise (`kernels::conv::depthwise`)

/// A depthwise convolution (groups = input channels; each output channel
/// reads one input channel, `co / c` outputs per input): a direct sum per
/// output plane, the planes (or blocks of 16) split between the threads,
/// by [`depthwise_blocked`] (kernels of [`BLOCKED_MIN_TAPS`] taps or
/// more, and where masks do not fit), [`conv_masked`] or
/// [`window_planes`] (all three the same multiply-adds in the same order,
/// so the same bits). im2col would build one `kh * kw` by `oh *
/// ow` matrix per channel for a product of one row.
pub(super) fn conv2d_depthwise(
    exec: &Executor,
    x: &CandleTensor,
    w: &CandleTensor,
    bias: Option<&CandleTensor>,
    (stride, pad, dil): ((usize, usize), (usize, usize), (usize, usize)),
    epilogue: Option<&EpilogueArgs>,
) -> Result<CandleTensor> {
    let (b, c, h, wd) = x.dims4()?;
    let (co, _, kh, kw) = w.dims4()?;
    if co % c != 0 {
        return Err(Error::bad_input(format!(
            "depthwise convolution: {co} output channels for {c} input channels"
        )));
    }
    let mult = co / c;
    let bs = bias.map(f32s).transpose()?;
    // read where it lies below: a weight that is a view, made contiguous
    // (a clone of the handle when it already is)
    let w = &w.contiguous()?;
    let geom = PlaneWindows::conv(h, wd, (kh, kw), stride, pad, dil)?;
    let (oh, ow) = (geom.oh, geom.ow);
    let params = Depthwise {
        g: geom,
        batch: b,
        channels: c,
        out_channels: co,
        bias: bs.as_deref(),
    };
    let len = b * co * oh * ow;
    // the fused chain after it, on each task's planes as they are done
    let fused = register_epilogue(epilogue, len).filter(|_| crate::kernels::cpu().vector);
    let then = fused.as_ref().map(|(steps, inputs)| sgemm::Epilogue {
        steps,
        inputs,
        map: None,
    });
    let apply = |at: usize, span: &mut [f32]| {
        if let Some(e) = &then {
            sgemm::run_epilogue(e, at, span)
        }
    };
    // a kernel that writes every plane, reading the input and the weight
    // where they lie
    type Kernel<'k> = dyn Fn(&[f32], &[f32], &mut [std::mem::MaybeUninit<f32>]) + 'k;
    // (with `(input_cl, output_cl)`: the input read as it lies
    // channels-last, the output left so; see `depthwise_blocked`)
    let write_laid_out = |kernel: &Kernel, (input_cl, output_cl): (bool, bool)| -> Result<CandleTensor> {
        let mut out = sgemm::uninit(len);
        let run = |xs: &[f32]| with_host(w, |ws: &[f32]| kernel(xs, ws, &mut out));
        if input_cl { with_channels_last(x, run) } else { with_host(x, run) }
            .flatten()
            .ok_or_else(|| Error::internal("depthwise convolution of an input or weight that is not float32 on the host"))?;
        mark_applied(epilogue, then.is_some());
        // SAFETY: the kernel wrote every plane (every pixel's channels)
        let out = unsafe { sgemm::assume_init(out) };
        if output_cl {
            exec.outputs_channels_last.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return channels_last_tensor(out, [b, co, oh, ow]);
        }
        CandleTensor::from_vec(out, (b, co, oh, ow), x.device()).map_err(Error::from)
    };
    let write_all = |kernel: &Kernel| write_laid_out(kernel, (false, false));
    // a chain of constants only (a relu, a hardswish) runs on each
    // output line of the blocked kernel as it is done, in L1, rather than
    // over the planes once they are transposed back (a relu's pass was 19%
    // of the samples of an 88-channel 3x3 over 28x28 alone)
    let by_line = then.filter(sgemm::Epilogue::constants_only);
    let finish = then.is_some().then_some(&apply as &Finish);
    let plan = MaskedPlan::cached(geom).filter(|_| crate::kernels::cpu().wide);
    // a stride of 2 along lines long enough: each plane read in place as
    // its even and odd columns
    if stride2_first(&geom, c, mult) {
        // SAFETY: the instruction set is present (checked by stride2); the sizes are the op's.
        return write_all(&|xs, ws, out| unsafe { conv_stride2(&params, xs, ws, out, finish) });
    }
    // sixteen channels at a time where a block's padded image fits the
    // cache: for 5x5 kernels and up always, under masks otherwise where
    // the lines allow
    let taps = kh * kw;
    if blocked_first(&geom, c, mult, channels_last_dims(x).is_some()) {
        // SAFETY: the instruction set is present (checked above); the sizes are the op's.
        let finish = if by_line.is_some() { None } else { finish };
        // an input left channels-last is read as it lies (its pixels'
        // channels side by side: no transpose into the grid)
        let input_cl = channels_last_dims(x).is_some();
        if finish.is_none() && exec.channels_last {
            let layout = (input_cl, true);
            return write_laid_out(
                &|xs, ws, out| {
                    let wt = exec.depthwise_taps(ws, c, taps);
                    // SAFETY: as below
                    unsafe { depthwise_blocked(&params, xs, &wt, out, None, by_line.as_ref(), layout) }
                },
                layout,
            );
        }
        return write_all(&|xs, ws, out| {
            let wt = exec.depthwise_taps(ws, c, taps);
            unsafe { depthwise_blocked(&params, xs, &wt, out, finish, by_line.as_ref(), (false, false)) }
        });
    }
    if let Some(plan) = plan {
        // SAFETY: AVX-512F is present (checked above); the sizes are the op's.
        return write_all(&|xs, ws, out| unsafe { conv_masked(&plan, &params, xs, ws, out, finish) });
    }
    let ws = f32s(w)?;
    // written whole by window_planes
    let mut out = sgemm::uninit(len);
    with_host(x, |xs: &[f32]| {
        let plane = |plane| {
            let (n, o) = (plane / co, plane % co);
            let b0 = bs.as_ref().map_or(0.0, |v| v[o]);
            (n * c + o / mult, b0, WindowOp::Fma(&ws[o * kh * kw..][..kh * kw]))
        };
        window_planes(geom, xs, &mut out, 0.0, plane, finish)
    })
    .ok_or_else(|| Error::internal("depthwise convolution of an input that is not float32 on the host"))?;
    mark_applied(epilogue, then.is_some());
    // SAFETY: window_planes wrote every plane
    let out = unsafe { sgemm::assume_init(out) };
    CandleTensor::from_vec(out, (b, co, oh, ow), x.device()).map_err(Error::from)
}

/// Whether a depthwise convolution (one filter a channel) of `c`
/// channels over `[h, w]` planes takes [`depthwise_blocked`] by the
/// geometry alone, as [`conv2d_depthwise`] picks (no stride of 2 along
/// lines long enough for [`conv_stride2`]; a kernel of
/// [`BLOCKED_MIN_TAPS`] or more): its input is then best left
/// channels-last by the op before it.
pub(crate) fn takes_blocked(c: usize, (h, w): (usize, usize), (kh, kw): (usize, usize), stride: (usize, usize), pad: (usize, usize), dil: (usize, usize)) -> bool {
    // (on AVX2 the 3x3s take the blocked kernel too, but an input left
    // channels-last for them did not pay: MobileNetV3's 28x28 layers at
    // batch 1 took 1.02-1.08x their time, node by node, alternated)
    PlaneWindows::conv(h, w, (kh, kw), stride, pad, dil).is_ok_and(|g| kh * kw >= BLOCKED_MIN_TAPS && blocked_first(&g, c, 1, false))
}

/// Whether [`conv2d_depthwise`] runs a depthwise convolution of `c`
/// channels, `mult` outputs each, over `g` on [`depthwise_blocked`]: not
/// on [`conv_stride2`] ([`stride2_first`]), one output a channel, whole
/// blocks of 16 channels whose grid fits the cache ([`blocked`]), and a
/// kernel of [`BLOCKED_MIN_TAPS`] or more; a smaller one where AVX-512
/// has no [`MaskedPlan`] for it, and on AVX2 where its input lies
/// channels-last (`input_cl`: the blocked kernel reads it as it lies),
/// it is strided along the lines, or its output lines are shorter than
/// [`PLANES_AVX2_MIN_COLUMNS`].
fn blocked_first(g: &PlaneWindows, c: usize, mult: usize, input_cl: bool) -> bool {
    let cpu = crate::kernels::cpu();
    let small = if cpu.wide {
        MaskedPlan::cached(*g).is_none()
    } else {
        input_cl || g.stride.1 != 1 || g.ow < PLANES_AVX2_MIN_COLUMNS
    };
    !stride2_first(g, c, mult) && mult == 1 && c >= 16 && blocked(g) && cpu.vector && (g.kh * g.kw >= BLOCKED_MIN_TAPS || small)
}

/// On AVX2, depthwise convolutions of fewer than [`BLOCKED_MIN_TAPS`]
/// taps, a stride of 1 along the lines and output lines this long or
/// longer run plane by plane ([`window_planes`]), not blocked: the 3x3s
/// over 28x28 and 56x56 (16 to 192 channels) took 0.42-0.98x of the
/// blocked kernel's time that way, over 14x14 1.08-1.17x and over 7x7
/// 1.7-1.9x (`depthwise_speed`, batches 1 and 8, one and two threads).
/// The 5x5s and 7x7s over 28x28 and 56x56 also ran faster alone (0.77-1.04x), but in
/// ConvNeXt, whose 7x7s read a channels-last input that the blocked
/// kernel takes as it lies and planes must copy, they took 1.40-1.48x:
/// they stay blocked.
const PLANES_AVX2_MIN_COLUMNS: usize = 28;

/// Whether a depthwise convolution of `c` channels, `mult` outputs each,
/// over `g` takes [`conv_stride2`]: where [`stride2`] holds, but on AVX2
/// not where the blocked kernel takes it ([`depthwise_blocked`]: a
/// block's grid in the cache, whole blocks of channels), which ran the
/// strided 3x3s and 5x5s there in 0.6-0.9x of its time
/// (`depthwise_speed`, MobileNetV3's 72 channels over 56x56, 144 over
/// 56x56 and 96 over 28x28, batches 1 and 8, one and two threads). Where
/// the blocked kernel does not go, `conv_stride2` took 0.83-0.93x of the
/// time plane by plane (16 and 32 channels over 112x112).
fn stride2_first(g: &PlaneWindows, c: usize, mult: usize) -> bool {
    stride2(g) && (crate::kernels::cpu().wide || !(mult == 1 && c >= 16 && blocked(g)))
}

/// A depthwise convolution (`w` `[c * mult, 1, kh, kw]` over `x` `[b, c,
/// h, w]`) as a sum over its taps: the padded input's window under each
/// tap (every `stride`th pixel) times the tap's weight of each channel, a
/// few kernels a tap. For a GPU, where candle runs a grouped convolution
/// as one convolution per group: MobileNetV3 at batch 1 on an H200 took
/// 74.7 ms that way, 22x torch, its 576-channel layers 576 convolutions
/// each. Any stride, dilation or padding per dim; no bias (the caller adds
/// it).
pub(super) fn depthwise_tap_sum(
    x: &CandleTensor,
    w: &CandleTensor,
    (stride, pad, dil): ((usize, usize), (usize, usize), (usize, usize)),
) -> candle_core::Result<CandleTensor> {
    let (c, co, kh, kw) = (x.dim(1)?, w.dim(0)?, w.dim(2)?, w.dim(3)?);
    // each output channel's input channel (a multiplier repeats them)
    let x = if co == c {
        x.clone()
    } else {
        let ids: Vec<u32> = (0..co).map(|o| (o / (co / c)) as u32).collect();
        x.index_select(&CandleTensor::new(ids, x.device())?, 1)?
    };
    let xp = x.pad_with_zeros(2, pad.0, pad.0)?.pad_with_zeros(3, pad.1, pad.1)?;
    // output positions: the window starts inside the padded input, every stride-th
    let span = |n: usize, k: usize, d: usize, s: usize| n.saturating_sub(d * (k - 1)).div_ceil(s);
    let (oh, ow) = (
        span(xp.dim(2)?, kh, dil.0, stride.0),
        span(xp.dim(3)?, kw, dil.1, stride.1),
    );
    // `n` elements along `d` from `start`, `s` apart
    let every = |t: &CandleTensor, d: usize, start: usize, n: usize, s: usize| -> candle_core::Result<CandleTensor> {
        if s == 1 {
            return t.narrow(d, start, n);
        }
        let short = (start + n * s).saturating_sub(t.dim(d)?);
        let t = t.pad_with_zeros(d, 0, short)?.narrow(d, start, n * s)?.contiguous()?;
        let mut dims = t.dims().to_vec();
        dims[d] = n;
        dims.insert(d + 1, s);
        t.reshape(dims)?.narrow(d + 1, 0, 1)?.squeeze(d + 1)
    };
    let mut sum: Option<CandleTensor> = None;
    for ky in 0..kh {
        let rows = every(&xp, 2, ky * dil.0, oh, stride.0)?;
        for kx in 0..kw {
            let window = every(&rows, 3, kx * dil.1, ow, stride.1)?;
            let tap = w.narrow(2, ky, 1)?.narrow(3, kx, 1)?.reshape((1, co, 1, 1))?;
            let term = window.broadcast_mul(&tap)?;
            sum = Some(match sum {
                None => term,
                Some(s) => (s + term)?,
            });
        }
    }
    sum.ok_or_else(|| candle_core::Error::Msg("a depthwise convolution with no taps".into()))
}

// direct (`kernels::conv::direct`)

/// A 2-D convolution, direct: the weight `[c_out, c_in * taps]`, read as
/// it lies (no packed copy: as fast, and ResNet-50's packed 3x3 weights
/// were 55 MB more at its peak), times B, whose row for tap (channel, ky, kx) is the input under that
/// tap at every output position, read where it lies in the batch's
/// [`Grid`] ([`sgemm::gemm_direct`]), each lane written straight to its
/// output pixel. im2col would copy the input `taps` times and the product
/// pack it once more: ResNet-18's 3x3 stages at batch 8 ran at 260-350
/// GFLOP/s that way, 330-410 direct; the copies dominate a product of
/// small `k` (MobileNetV3's stem at batch 8: 64 GFLOP/s).
pub(super) fn conv_direct(x: &CandleTensor, w: &CandleTensor, bias: Option<&CandleTensor>, p: &ConvParams) -> Result<CandleTensor> {
    let (shape, epilogue) = (p.shape.clone(), p.epilogue);
    // over a dead residual where the executor offers one (ResNets' last
    // convolution of a block): the add made as each vector is stored, on
    // the line it reads, where a fresh output's lines were read for
    // ownership first (25.7 MB for ResNet-50's [256, 64] over 56x56 at
    // batch 8)
    output_of(x.device(), shape.clone(), epilogue, |out, accumulate, then| {
        direct_into(x, w, bias, p, out, accumulate, then)
    })
}

/// [`conv_direct`] into `out` (its `shape`: every element written; with
/// `accumulate`, each added to what `out` holds, which is then
/// initialised), `then` run on each block as it is stored.
fn direct_into(
    x: &CandleTensor,
    w: &CandleTensor,
    bias: Option<&CandleTensor>,
    p: &ConvParams,
    out: &mut [std::mem::MaybeUninit<f32>],
    accumulate: bool,
    then: Option<&sgemm::Epilogue>,
) -> Result<()> {
    let (g, shape) = (&p.g, &p.shape);
    let (b, c, co) = (shape[0], x.dims()[1], shape[1]);
    let [_, oh, ow] = g.output;
    let k = c * g.taps();
    let bv = bias.map(f32s).transpose()?;
    // written whole by the kernel (every output pixel is a lane of a
    // panel, and k is at least 1: no channels take another path)
    assert!(k > 0, "conv_direct over no input channels");
    assert_eq!(out.len(), b * co * oh * ow, "conv_direct: an output of its shape");
    // a copied grid image by image where one image's is big (a stem's, a
    // stride-2 3x3's): each made just before its product reads it, in L2,
    // where the batch's went out to memory and back (MobileNetV3's stem
    // at batch 8: grid 0.35 and product 0.6 ms in the model, 0.12 and 0.3
    // warm)
    let [_, h, wd] = g.input;
    let per_image = b > 1 && !Grid::in_place(g) && c * Grid::copied_len(g) >= PER_IMAGE_GRID_MIN;
    let (images, count) = if per_image { (b, 1) } else { (1, b) };
    with_host(w, |ws: &[f32]| {
        with_host(x, |xs: &[f32]| {
            let (xlen, olen) = (count * c * h * wd, count * co * oh * ow);
            for (i, dst) in out.chunks_mut(olen.max(1)).enumerate().take(images) {
                let xs = &xs[i * xlen..][..xlen];
                let grid = Grid::new(xs, count, c, g);
                let panels = grid.panels(count, co, (oh, ow));
                // the epilogue's inputs from this image on
                let inputs: Vec<&[f32]> = then
                    .map(|e| e.inputs.iter().map(|v| &v[(i * olen).min(v.len())..]).collect())
                    .unwrap_or_default();
                let then = then.map(|e| sgemm::Epilogue {
                    inputs: &inputs,
                    ..*e
                });
                // SAFETY: each output pixel is one lane of one panel.
                unsafe {
                    sgemm::gemm_direct(
                        sgemm::Lhs::rows(ws, co, k),
                        grid.src(xs),
                        &grid.offs,
                        &panels,
                        dst,
                        oh * ow,
                        bv.as_deref(),
                        accumulate,
                        then.as_ref(),
                        rayon::current_num_threads(),
                    )
                };
            }
        })
    })
    .flatten()
    .ok_or_else(|| Error::internal("direct convolution of tensors that are not float32 on the host"))
}

// few (`kernels::conv::few`)

/// A 2-D convolution from few input channels (ResNet's 7x7 stride-2 stem
/// over three colours, MobileNetV3's 3x3 one), where a product has too
/// little depth for the direct kernel (`k` = 27 or 147 rows against a
/// stride-phased padded copy of the image, 64 output channels as panels
/// of 12 rows, 16 as 12 + 4): the output channels on the lanes (one to
/// four vectors), a run of an output line's pixels in registers (24 /
/// vectors of them), each tap's weights one load a vector and each input
/// value broadcast, read where it lies (the taps in the padding skipped:
/// lines by their rows, the few pixels at the lines' ends one by one).
/// Each line's results (`[pixels][c_out]`) are transposed into the
/// output planes, a band of lines a task, and the fused chain runs on the
/// band's planes while they are in the cache. ResNet's stem on two
/// threads, in the model, against the direct kernel (interleaved runs):
/// 0.96-0.99 -> 0.76-0.85 ms at batch 1, 3% less at batch 8 (369 GFLOP/s
/// warm at batch 1, the direct kernel 340); MobileNetV3's 16-channel stem
/// stays direct (slower this way).
pub(super) fn conv_few_channels(exec: &Executor, x: &CandleTensor, w: &CandleTensor, bias: Option<&CandleTensor>, p: &ConvParams) -> Result<CandleTensor> {
    let (g, shape, epilogue, channels_last) = (&p.g, p.shape.clone(), p.epilogue, p.channels_last);
    let (b, c, co) = (shape[0], x.dims()[1], shape[1]);
    let [_, oh, ow] = g.output;
    let k = c * g.taps();
    // the weights by tap: [k][c_out]
    let ws = f32s(&w.contiguous()?)?;
    let mut wt = vec![0f32; k * co];
    vmath::transpose(&ws, co, k, &mut wt);
    let bv = match bias {
        Some(t) => f32s(t)?,
        None => vec![0f32; co],
    };
    debug_assert_eq!(shape.iter().product::<usize>(), b * co * oh * ow);
    // each line's `[ow][co]` results are its output left channels-last
    // (no transposes into planes: a fifth of ResNet's stem on one thread)
    // where the readers read it so (a max pool), and the chain after it,
    // if any, is of constants (an element's place is moot)
    if channels_last && shape.len() == 4 {
        let made = channels_last_output(exec, epilogue, [b, co, oh, ow], |out, then| {
            with_host(x, |xs: &[f32]| {
                // SAFETY: as below
                unsafe { few_channels_product(xs, &wt, &bv, g, (b, c, co), out, (then, true)) }
            })
            .ok_or_else(|| Error::internal("convolution of an input that is not float32 on the host"))
        })?;
        if let Some(y) = made {
            return Ok(y);
        }
    }
    // never offered a residual to write over (`writes_over`)
    output_of(x.device(), shape, epilogue, |out, accumulate, then| {
        if accumulate {
            return Err(Error::internal("a few-channel convolution adding to its output"));
        }
        with_host(x, |xs: &[f32]| {
            // SAFETY: the kernels' instruction set is present (the
            // caller's check); the sizes are the convolution's.
            unsafe { few_channels_product(xs, &wt, &bv, g, (b, c, co), out, (then, false)) }
        })
        .ok_or_else(|| Error::internal("convolution of an input that is not float32 on the host"))
    })
}

// winograd (`kernels::conv::winograd`)

/// A 3x3 stride-1 convolution ([`winograd`]) as F(2x2, 3x3): each image
/// copied channels-last with its padding (as [`conv_pixel_taps`] does);
/// every 4x4 tile of it (2 pixels apart, over the batch) transformed,
/// `V = Bᵀ d B`, 16 channels a vector, into 16 matrices `[tiles, c]`; 16
/// products `M_ξν = V_ξν U_ξν` with the weights transformed once (the
/// executor's pack cache: [`winograd_weights`]); each tile's 2x2 outputs
/// `Aᵀ m A` plus the bias into a channels-last output, transposed into
/// the output planes with the fused chain run after. 4 multiply-adds an
/// output pixel and channel pair where the direct kernel does 9; the
/// transforms are additions. The results differ from torch's direct sum
/// by rounding (`winograd_matches_direct`).
pub(super) fn conv_winograd(exec: &Executor, x: &CandleTensor, w: &CandleTensor, bias: Option<&CandleTensor>, p: &ConvParams) -> Result<CandleTensor> {
    let (g, shape, epilogue) = (&p.g, p.shape.clone(), p.epilogue);
    let (b, c, co) = (shape[0], x.dims()[1], shape[1]);
    let bv = bias.map(f32s).transpose()?;
    let w = w.contiguous()?;
    let m = tile_for(g, b);
    let us = with_host(&w, |ws: &[f32]| exec.winograd_weights(&sgemm::View::row_major(ws, co, c * 9), m))
        .ok_or_else(|| Error::internal("Winograd convolution of a weight that is not float32 on the host"))?;
    output_of(x.device(), shape, epilogue, |out, accumulate, then| {
        with_host(x, |xs: &[f32]| {
            // SAFETY: the kernels' instruction set is present (the caller's check)
            unsafe { winograd_product(xs, (b, c, co), (g, m), &us, bv.as_deref(), (accumulate, then), out) }
        })
        .ok_or_else(|| Error::internal("Winograd convolution of an input that is not float32 on the host"))
    })
}

// pixels (`kernels::conv::pixels`)

/// A pointwise convolution over small planes with the pixels as the
/// product's rows: each image `[c, n]` read in place as A = its transpose
/// (`n x c`: the kernel broadcasts 12 pixels of a channel, which lie side
/// by side; packed first where [`packed_columns`] says), the weight transposed and packed once as B (`c x co`), the
/// bias C's initial row; each block of `[n, co]`, once final, transposed
/// into the image's output and the fused chain run on it by the thread
/// that made it ([`finish_block`]). The lanes are output channels,
/// so a 7x7 plane wastes none (panels of pixels left 15 of 64 idle), and
/// nothing is copied but the small result: the batch's images side by
/// side cost a copy of the input the size of the product's B (MobileNetV3
/// at batch 8, `[96, 576]` on 7x7). Images split between the threads
/// where there are enough of them, else each product is. An input stored
/// channels-last is A as it lies (its rows); with `channels_last` (every
/// reader reads it so, [`crate::exec::layout`]) and no fused chain but
/// one of constants, each image's product is its output, stored
/// channels-last, with no transpose.
pub(super) fn conv_pixel_rows(exec: &Executor, x: &CandleTensor, w: &CandleTensor, bias: Option<&CandleTensor>, p: &ConvParams) -> Result<CandleTensor> {
    let scale = p.scale;
    let pb = with_matrix(w, |v| {
        exec.packed_b(&sgemm::View {
            rows: v.cols,
            cols: v.rows,
            rs: v.cs,
            cs: v.rs,
            ..*v
        })
    })
    .ok_or_else(|| Error::internal("packed convolution of a weight that is not float32 on the host"))?;
    let Some(s) = scale else {
        return pixel_rows_with(exec, x, (w, &pb), bias, p);
    };
    // the packed weight (kept) with each input channel's row scaled
    let scaled = pb.scaled_rows(s, 1);
    let y = pixel_rows_with(exec, x, (w, &scaled), bias, p);
    scaled.recycle();
    y
}

/// [`conv_pixel_rows`] with the weight `w` packed as `pb`.
fn pixel_rows_with(exec: &Executor, x: &CandleTensor, (w, pb): (&CandleTensor, &sgemm::PackedB), bias: Option<&CandleTensor>, p: &ConvParams) -> Result<CandleTensor> {
    let (b, co, n) = (p.shape[0], p.shape[1], p.g.out_plane());
    let (shape, epilogue, channels_last) = (p.shape.clone(), p.epilogue, p.channels_last);
    let threads = rayon::current_num_threads();
    let bv = bias.map(f32s).transpose()?;
    let init = bv.as_deref().map_or(sgemm::Init::Zero, sgemm::Init::Bias);
    let k = w.dims()[1];
    // an input stored channels-last is A as it lies: each image's
    // `[n, k]` rows (no transpose into planes, none back in the packing)
    let rows_in_place = channels_last_dims(x).is_some();
    // each image's `[n, co]` product is its output left channels-last
    // (no transpose into planes) where the readers read it so, and the
    // chain after it, if any, is of constants (an element's place is moot)
    if channels_last && n > 1 && shape.len() == 4 {
        let made = channels_last_output(exec, epilogue, [b, co, shape[2], shape[3]], |out, then| {
            let run = |xs: &[f32]| {
                let image = |bi: usize, dst: &mut [std::mem::MaybeUninit<f32>], threads: usize| {
                    let image = &xs[bi * k * n..][..k * n];
                    if rows_in_place {
                        sgemm::gemm_lhs(sgemm::Lhs::rows(image, n, k), pb, dst, co, init, then, threads);
                    } else if packed_columns(n, k) {
                        let pa = sgemm::pack_a(&sgemm::View { data: image, off: 0, rows: n, cols: k, rs: 1, cs: n });
                        sgemm::gemm_lhs(sgemm::Lhs::packed(&pa), pb, dst, co, init, then, threads);
                    } else {
                        sgemm::gemm_lhs(sgemm::Lhs::columns(image, n, k), pb, dst, co, init, then, threads);
                    }
                };
                // images split between the threads where there are enough
                // of them, else each product is (as below)
                let threads = rayon::current_num_threads();
                if b >= threads {
                    crate::kernels::threads::par_chunks(out, n * co, |bi, dst| image(bi, dst, 1));
                } else {
                    for (bi, dst) in out.chunks_mut(n * co).enumerate() {
                        image(bi, dst, threads);
                    }
                }
            };
            // (each image's product writes all of its [n, co])
            if rows_in_place { with_channels_last(x, run) } else { with_host(x, run) }
                .ok_or_else(|| Error::internal("packed convolution of an input that is not on the host"))
        })?;
        if let Some(y) = made {
            return Ok(y);
        }
    }
    output_of(x.device(), shape, epilogue, |out, accumulate, then| {
        let run = |xs: &[f32]| {
            if n == 1 {
                // one pixel an image (a squeeze-and-excitation block's):
                // the batch is A's rows as it lies and C is the output's
                // layout, so one product, the weight read once, the chain
                // run on it
                let a = sgemm::Lhs::rows(xs, b, k);
                if !accumulate {
                    return sgemm::gemm_lhs(a, pb, out, co, init, then, threads);
                }
                // over a residual: the product, added to it, then the chain
                let mut y = sgemm::uninit(b * co);
                sgemm::gemm_lhs(a, pb, &mut y, co, init, None, threads);
                // SAFETY: gemm_lhs wrote all of y; out holds the residual
                let (y, out) = unsafe { (sgemm::assume_init(y), &mut *(out as *mut [std::mem::MaybeUninit<f32>] as *mut [f32])) };
                out.iter_mut().zip(&y).for_each(|(o, v)| *o += v);
                if let Some(e) = then {
                    sgemm::run_epilogue(e, 0, out);
                }
                return;
            }
            let image = |bi: usize, dst: &mut [std::mem::MaybeUninit<f32>], yt: &mut Vec<std::mem::MaybeUninit<f32>>, threads: usize| {
                // the image's columns [k, n] as A: n rows, k apart by step n
                let cols = &xs[bi * k * n..][..k * n];
                yt.resize(n * co, std::mem::MaybeUninit::uninit());
                // each block of the product [n, co], once final, transposed
                // into its channels' lines of the output and the chain run
                // there, by the thread that made it (after the product, on
                // one thread, they were up to half of a 7x7 layer's time
                // on two)
                let out = sgemm::SendPtr(dst.as_mut_ptr().cast());
                let done = |pixels: std::ops::Range<usize>, chans: std::ops::Range<usize>, y: sgemm::SendPtr| {
                    // SAFETY: the block is final and this part's alone; its
                    // channels' lines [pixels] of the image's output are
                    // this part's alone (initialised: the residual, when
                    // accumulating)
                    unsafe { finish_block(y, out, (n, co), (pixels, chans), (accumulate, then), bi) };
                };
                if rows_in_place {
                    let rows = &xs[bi * k * n..][..k * n];
                    sgemm::gemm_lhs_each(sgemm::Lhs::rows(rows, n, k), pb, yt, co, init, threads, &done);
                } else if packed_columns(n, k) {
                    let view = sgemm::View { data: cols, off: 0, rows: n, cols: k, rs: 1, cs: n };
                    let pa = sgemm::pack_a(&view);
                    sgemm::gemm_lhs_each(sgemm::Lhs::packed(&pa), pb, yt, co, init, threads, &done);
                } else {
                    sgemm::gemm_lhs_each(sgemm::Lhs::columns(cols, n, k), pb, yt, co, init, threads, &done);
                }
            };
            let chunk = (co * n).max(1);
            if b >= threads {
                crate::kernels::threads::par_chunks_init(out, chunk, Vec::new, |yt, bi, dst| image(bi, dst, yt, 1));
            } else {
                let mut yt = Vec::new();
                for (bi, dst) in out.chunks_mut(chunk).enumerate() {
                    image(bi, dst, &mut yt, threads);
                }
            }
        };
        if rows_in_place { with_channels_last(x, run) } else { with_host(x, run) }
            .ok_or_else(|| Error::internal("packed convolution of an input that is not on the host"))
    })
}

/// A 2-D convolution (float32, one group) as one product per tap with
/// the output pixels as rows and the output channels as columns
/// ([`sgemm::gemm_taps`]): each image copied channels-last with its
/// padding (`[hp][wp][c]`), so that under tap (ky, kx) the pixels of an
/// output line are rows `stride * c` floats apart and a row's channels
/// are contiguous; each tap's weight `[c, c_out]` packed once (the
/// executor's pack cache); the product `[pixels, c_out]` then transposed
/// into the output, with the bias in the kernel and the fused chain after
/// the transpose, image by image. The batch is one product (its images'
/// row panels side by side: the weight read once).
///
/// ResNet-18 at batch 1: its 7x7 3x3s 306 -> 420 GFLOP/s (about 480 with
/// the weights in cache, against 342 direct), the model 0.92x; ResNet-50
/// 0.95x; at batch 8 both about 0.97x (the direct kernel's batched planes
/// fill its lanes there already).
pub(super) fn conv_pixel_taps(exec: &Executor, x: &CandleTensor, w: &CandleTensor, bias: Option<&CandleTensor>, p: &ConvParams) -> Result<CandleTensor> {
    let (g, shape, epilogue) = (&p.g, p.shape.clone(), p.epilogue);
    let (b, c, co) = (shape[0], x.dims()[1], shape[1]);
    let ([_, kh, kw], [_, oh, ow]) = (g.kernel, g.output);
    let bv = bias.map(f32s).transpose()?;
    let w = w.contiguous()?;
    // each tap's weight [c, c_out] where it lies in [c_out, c, kh, kw]
    let bs = with_host(&w, |ws: &[f32]| {
        (0..kh * kw)
            .map(|t| exec.packed_b(&tap_weight(ws, t, (c, co), kh * kw)))
            .collect::<Vec<_>>()
    })
    .ok_or_else(|| Error::internal("pixel-row convolution of a weight that is not float32 on the host"))?;
    let bs: Vec<&sgemm::PackedB> = bs.iter().map(|b| &**b).collect();
    debug_assert_eq!(shape.iter().product::<usize>(), b * co * oh * ow);
    output_of(x.device(), shape, epilogue, |out, accumulate, then| {
        with_host(x, |xs: &[f32]| {
            pixel_taps_product(xs, (b, c, co), g, &bs, bv.as_deref(), (accumulate, then), out)
        })
        .ok_or_else(|| Error::internal("pixel-row convolution of an input that is not float32 on the host"))
    })
}
