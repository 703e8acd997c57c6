//! `pt2kit.dft`, the DFT that torch's FFTs lower to (complex values as
//! real pairs, `decompose::complex`), by rustfft: any length (radix and
//! Bluestein plans), computed in float64 and rounded once to the input's
//! float dtype. ONNX `DFT`'s semantics: over `axis` of a tensor whose
//! trailing dim holds a real signal (1) or a complex pair (2); the inverse
//! divides by the length; `onesided` keeps the first `n / 2 + 1` bins.

use super::{one, unsupported, OpResult};
use crate::exec::{Ctx, Tensor};
use crate::ir::Dtype;
use crate::kernels::threads;
use candle_core::{DType, Device, Tensor as CandleTensor};
use rustfft::num_complex::Complex;

pub(super) fn dft(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let inverse = ctx.bool("inverse")?;
    let onesided = ctx.opt_bool("onesided", false)?;
    let dims = x.dims().to_vec();
    let rank = dims.len();
    let pair = dims.last().copied().unwrap_or(0);
    if rank < 2 || !(pair == 1 || pair == 2) {
        return Err(unsupported(format!(
            "pt2kit.dft takes a real signal ([..., 1]) or complex pairs ([..., 2]), not {dims:?}"
        )));
    }
    let axis = usize::try_from(ctx.int("axis")?)
        .ok()
        .filter(|&a| a < rank - 1)
        .ok_or_else(|| unsupported(format!("pt2kit.dft: axis out of range for {dims:?}")))?;
    if inverse && onesided {
        return Err(unsupported("pt2kit.dft: a one-sided inverse transform"));
    }
    if !matches!(
        x.dtype,
        Dtype::Float32 | Dtype::Float64 | Dtype::Float16 | Dtype::BFloat16
    ) {
        return Err(unsupported(format!(
            "pt2kit.dft of {} values",
            x.dtype.torch_name()
        )));
    }
    let n = dims[axis];
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..rank - 1].iter().product();
    let n_out = if onesided { n / 2 + 1 } else { n };
    let mut out_dims = dims.clone();
    out_dims[axis] = n_out;
    out_dims[rank - 1] = 2;
    let device = x.t.device().clone();
    let host =
        x.t.to_device(&Device::Cpu)
            .and_then(|t| t.to_dtype(DType::F64))
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f64>())?;
    // An infinity or a NaN in a signal: torch's bins are then what
    // pocketfft's order of operations makes of it (some parts stay
    // finite, others are NaN, by the radix plan), which this DFT does not
    // reproduce. Refused, not guessed.
    if let Some(i) = host.iter().position(|v| !v.is_finite()) {
        return Err(unsupported(format!(
            "pt2kit.dft (torch's FFT): the signal holds {} at element {i}; torch's transform of a non-finite signal is pocketfft's order of operations, which this runtime does not reproduce",
            if host[i].is_nan() { "NaN" } else { "an infinity" }
        )));
    }
    let mut out = vec![0f64; outer * n_out * inner * 2];
    if n > 0 && !out.is_empty() {
        let mut planner = rustfft::FftPlanner::<f64>::new();
        let fft = if inverse {
            planner.plan_fft_inverse(n)
        } else {
            planner.plan_fft_forward(n)
        };
        let scale = if inverse { 1.0 / n as f64 } else { 1.0 };
        let scratch_len = fft.get_inplace_scratch_len();
        threads::par_chunks_init(
            &mut out,
            n_out * inner * 2,
            || {
                (
                    vec![Complex::new(0f64, 0f64); n],
                    vec![Complex::new(0f64, 0f64); scratch_len],
                )
            },
            |(line, scratch), o, part| {
                for i in 0..inner {
                    for (k, z) in line.iter_mut().enumerate() {
                        let at = ((o * n + k) * inner + i) * pair;
                        let im = if pair == 2 { host[at + 1] } else { 0.0 };
                        *z = Complex::new(host[at], im);
                    }
                    let size = line
                        .iter()
                        .map(|z| z.re.abs().max(z.im.abs()))
                        .fold(0.0, f64::max);
                    fft.process_with_scratch(line, scratch);
                    // Rounding noise of the twiddles (sin(pi) is not 0 in
                    // floating point) is flushed to +0.0, so a bin that is
                    // real by symmetry (a real signal's Nyquist bin) is
                    // real, as pocketfft's exact twiddles leave it: its
                    // sign decides an angle of pi or -pi.
                    // (only where the signal is finite: an infinity or a
                    // NaN is no scale for noise)
                    let noise = 8.0 * n as f64 * f64::EPSILON * size;
                    let flush = |v: f64| {
                        if size.is_finite() && v.abs() <= noise {
                            0.0
                        } else {
                            v * scale
                        }
                    };
                    if pair == 1 {
                        // a real signal's transform as pocketfft's r2c
                        // gives it: Hermitian (the upper half the lower's
                        // conjugate), the DC and Nyquist bins real
                        line[0].im = 0.0;
                        if n % 2 == 0 {
                            line[n / 2].im = 0.0;
                        }
                        for k in n / 2 + 1..n {
                            line[k] = line[n - k].conj();
                        }
                    }
                    for (k, z) in line.iter().take(n_out).enumerate() {
                        let at = (k * inner + i) * 2;
                        part[at] = flush(z.re);
                        part[at + 1] = flush(z.im);
                    }
                }
            },
        );
    }
    let t =
        CandleTensor::from_vec(out, out_dims, &Device::Cpu).and_then(|t| t.to_device(&device))?;
    one(Tensor::new(t, Dtype::Float64).cast(x.dtype)?)
}
