//! Convolutions with their product in bfloat16 (`--precision bf16`,
//! [`lowp`]): the weight `[c_out, c_in * taps]` rounded once (the left
//! operand), each image's columns (im2col) made row by row, rounded and
//! packed per call (the right one), the output `[c_out, pixels]` written
//! in planes, the bias per output channel and a fused chain after it run
//! on each block as it is final. A stem over few channels stays in
//! float32 (its product is short along k, its im2col long: ResNet-50's
//! 7x7 over 3 channels took 3x its float32 time).

use super::*;
use crate::kernels::conv::im2col_row;

/// One group's convolution (`x` `[b, c, ...]`, `w` `[c_out, c, ...]`,
/// scaled per input channel by `p.scale` where given) on `kernel`.
pub(super) fn conv_bf16(
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
