//! Convolutions with their product in bfloat16 (`--precision bf16`,
//! [`lowp`]). 2-D ones as an implicit product ([`lowp::conv`]): the
//! weight rounded and laid out once (tap by tap, the channels padded),
//! the input rounded once per call into pairs of channels over its
//! padded, stride-phased planes (read as it lies, planes or
//! channels-last), no im2col; the output in planes, the bias per output
//! channel added as each block is stored, or the block added to the dead
//! residual it is written over, and the fused chain after it run on each
//! task's blocks as they are final. 1-D and 3-D ones: the weight `[c_out,
//! c_in * taps]` rounded once (the left operand), each image's columns
//! (im2col) made row by row, rounded and packed per call (the right
//! one). A stem over few channels stays in float32 (its product is short
//! along k, its channels padded to 32 would multiply it: ResNet-50's 7x7
//! over 3 channels took 3x its float32 time through im2col).

use super::*;
use crate::kernels::conv::im2col_row;

/// One group's convolution (`x` `[b, c, ...]`, `w` `[c_out, c, ...]`,
/// scaled per input channel by `p.scale` where given) on `kernel`: 2-D
/// ones by [`implicit`], others by im2col.
pub(super) fn conv_bf16(
    exec: &Executor,
    x: &CandleTensor,
    w: &CandleTensor,
    bias: Option<&CandleTensor>,
    p: &ConvParams,
    kernel: lowp::Kernel,
) -> Result<CandleTensor> {
    if x.rank() == 4 && p.g.planar() {
        return implicit(exec, x, w, bias, p, kernel);
    }
    im2col_bf16(exec, x, w, bias, p, kernel)
}

/// A 2-D convolution's weight `w` (`[c_out, c, kh, kw]`) rounded and
/// laid out for [`lowp::conv`] and kept, as [`implicit`] reads it
/// (`Executor::prepack_bf16`, at load).
pub(crate) fn prepack_conv_weight(exec: &Executor, w: &CandleTensor) -> Result<()> {
    let [co, c, kh, kw] = w.dims4().map(|(a, b, c, d)| [a, b, c, d])?;
    let wm = weight_matrix(w, co, c * kh * kw)?;
    with_matrix(&wm, |v| exec.conv_weight16(v, c, kh * kw))
        .map(drop)
        .ok_or_else(|| Error::internal("bfloat16 convolution: a weight not on the host"))
}

/// A 2-D convolution by [`lowp::conv`] (see the module).
fn implicit(
    exec: &Executor,
    x: &CandleTensor,
    w: &CandleTensor,
    bias: Option<&CandleTensor>,
    p: &ConvParams,
    kernel: lowp::Kernel,
) -> Result<CandleTensor> {
    let scaled;
    let w = match p.scale {
        Some(s) => {
            scaled = scaled_weight(w, s)?;
            &scaled
        }
        None => w,
    };
    let g = &p.g;
    let (b, c, co) = (p.shape[0], x.dims()[1], p.shape[1]);
    let [_, h, wd] = g.input;
    let taps = g.taps();
    let wm = weight_matrix(w, co, c * taps)?;
    let weight = with_matrix(&wm, |v| exec.conv_weight16(v, c, taps))
        .ok_or_else(|| Error::internal("bfloat16 convolution: a weight not on the host"))?;
    let image = c * h * wd;
    let act = match channels_last_dims(x) {
        Some(_) => {
            let s = lowp::Strides {
                image,
                channel: 1,
                row: wd * c,
                col: c,
            };
            with_channels_last(x, |xs| lowp::act16(xs, b, c, g, s))
        }
        None => {
            let s = lowp::Strides {
                image,
                channel: h * wd,
                row: wd,
                col: 1,
            };
            let contiguous;
            let x = if x.is_contiguous() {
                x
            } else {
                contiguous = x.contiguous()?;
                &contiguous
            };
            with_host(x, |xs: &[f32]| lowp::act16(xs, b, c, g, s))
        }
    }
    .ok_or_else(|| Error::internal("bfloat16 convolution: an input not float32 on the host"))?;
    let bv = bias.map(f32s).transpose()?;
    let n = g.out_plane();
    let threads = rayon::current_num_threads();
    output_of(x.device(), p.shape.clone(), p.epilogue, |out, accumulate, then| {
        let each = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>, first: *mut f32| {
            if let Some(e) = then {
                for r in rows {
                    let at = r * n + cols.start;
                    // SAFETY: the block is final and this task's alone
                    // (lowp::Done), inside the output
                    let span = unsafe { std::slice::from_raw_parts_mut(first.add(at), cols.len()) };
                    sgemm::run_epilogue(e, at, span);
                }
            }
        };
        let done: Option<lowp::Done> = then.is_some().then_some(&each);
        lowp::conv(&weight, &act, out, accumulate, bv.as_deref(), threads, kernel, done);
        Ok(())
    })
}

/// A convolution (any rank) through im2col in bfloat16 (see the module).
fn im2col_bf16(
    exec: &Executor,
    x: &CandleTensor,
    w: &CandleTensor,
    bias: Option<&CandleTensor>,
    p: &ConvParams,
    kernel: lowp::Kernel,
) -> Result<CandleTensor> {
    let (g, shape, epilogue) = (&p.g, p.shape.clone(), p.epilogue);
    let scaled;
    let w = match p.scale {
        Some(s) => {
            scaled = scaled_weight(w, s)?;
            &scaled
        }
        None => w,
    };
    let (b, c, co) = (shape[0], x.dims()[1], shape[1]);
    let (k, n) = (c * g.taps(), g.out_plane());
    let wm = weight_matrix(w, co, k)?;
    let a = with_matrix(&wm, |v| exec.rounded_a16(v))
        .ok_or_else(|| Error::internal("bfloat16 convolution: a weight not on the host"))?;
    let bv = bias.map(f32s).transpose()?;
    let bias = bv.as_deref().map_or(lowp::Bias::None, lowp::Bias::Rows);
    let len = b * co * n;
    let fused = register_epilogue(epilogue, len);
    let then = fused.as_ref().map(|(steps, inputs)| sgemm::Epilogue {
        steps,
        inputs,
        map: None,
    });
    let mut out = sgemm::uninit(len);
    let threads = rayon::current_num_threads();
    let image = c * g.input.iter().product::<usize>();
    with_host(x, |xs: &[f32]| {
        for i in 0..b {
            let xi = &xs[i * image..][..image];
            let fill = |r: usize, row: &mut [f32]| im2col_row(xi, c, g, r, row);
            let pb = lowp::pack_b_rows(k, n, &fill);
            let first = i * co * n;
            let each = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>, p: *mut f32| {
                if let Some(e) = then.as_ref() {
                    for r in rows {
                        let at = r * n + cols.start;
                        // SAFETY: the block is final and this thread's
                        // alone (lowp::Done), inside the image's planes
                        let span = unsafe { std::slice::from_raw_parts_mut(p.add(at), cols.len()) };
                        sgemm::run_epilogue(e, first + at, span);
                    }
                }
            };
            let done: Option<lowp::Done> = then.is_some().then_some(&each);
            lowp::gemm(&a, &pb, &mut out[first..first + co * n], n, bias, threads, kernel, done);
        }
    })
    .ok_or_else(|| Error::internal("bfloat16 convolution: an input not on the host"))?;
    mark_applied(epilogue, then.is_some());
    // SAFETY: each image's product wrote all of its planes
    let out = unsafe { sgemm::assume_init(out) };
    CandleTensor::from_vec(out, shape, x.device()).map_err(Error::from)
}
