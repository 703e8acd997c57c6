//! A convolution whose input is scaled per channel (a
//! squeeze-and-excitation's `x * s`, folded by the plan:
//! [`crate::exec::fuse::Plan::scaled`]) run as one over `x` with its
//! weight's input channels scaled: the packed kernels scale their packed
//! copy of the weight ([`sgemm::PackedA::scaled_columns`],
//! [`sgemm::PackedB::scaled_rows`]), the others read it scaled
//! ([`scaled_weight`]).

use super::*;

/// [`conv`] of `x` with `w` whose input channels are scaled by `scale`
/// (none: scaled already).
pub(super) fn conv_scaled(ctx: &mut Ctx, x: Tensor, w: Tensor, scale: &[f32]) -> OpResult {
    conv_batched(ctx, x, w, (!scale.is_empty()).then_some(scale))
}

/// A weight `w` (`[co, c, ...]`) with each input channel's taps times
/// that channel's scale (`s`, `c` numbers): in one pass on the host for
/// float32 (candle's broadcast product took 4-10 us a MobileNetV3 weight,
/// as long as the product over the input it replaces), else candle's. The
/// packed kernels scale their packed copy of the weight instead
/// ([`conv_im2col`]).
pub(super) fn scaled_weight(w: &CandleTensor, s: &[f32]) -> Result<CandleTensor> {
    let dims = w.dims();
    if dims.len() < 2 || dims[1] != s.len() {
        return Err(Error::internal(format!(
            "a scale of {} channels for a weight of {dims:?}",
            s.len()
        )));
    }
    let taps: usize = dims[2..].iter().product();
    let scaled = with_host::<f32, _>(w, |ws| {
        let mut out = Vec::with_capacity(ws.len());
        for row in ws.chunks_exact((s.len() * taps).max(1)) {
            if taps == 1 {
                out.extend(row.iter().zip(s).map(|(v, k)| v * k));
            } else {
                for (ch, &k) in row.chunks_exact(taps).zip(s) {
                    out.extend(ch.iter().map(|v| v * k));
                }
            }
        }
        out
    });
    if let Some(out) = scaled {
        return CandleTensor::from_vec(out, dims, w.device()).map_err(Error::from);
    }
    let mut shape = vec![1; dims.len()];
    shape[1] = s.len();
    let st = CandleTensor::from_vec(s.to_vec(), shape, w.device())
        .and_then(|t| t.to_dtype(w.dtype()))?;
    w.broadcast_mul(&st).map_err(Error::from)
}
