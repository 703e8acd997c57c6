//! The executor's tensor ([`Tensor`]: a candle tensor with its logical
//! dtype), its copies to and from the host, and a run's outputs
//! ([`RunOutput`]), whose bytes a file writer reads in place.

use candle_core::{DType, Device, Tensor as CandleTensor};

use super::ops;
use crate::error::{Error, Result};
use crate::ir::Dtype;
use crate::tensorfile::HostTensor;

/// A tensor with its logical (PyTorch) dtype.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub t: CandleTensor,
    pub dtype: Dtype,
}

thread_local! {
    /// Copies between a device and the host made on this thread (none are
    /// counted on the CPU device).
    static HOST_COPIES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts a copy between `device` and the host, when `device` is not the
/// host itself.
pub(super) fn note_host_copy(device: &Device) {
    if !device.is_cpu() {
        HOST_COPIES.with(|c| c.set(c.get() + 1));
    }
}

pub(super) fn host_copies_so_far() -> usize {
    HOST_COPIES.with(|c| c.get())
}

/// The candle dtype a logical dtype is stored in.
pub fn storage_dtype(d: Dtype) -> Result<DType> {
    Ok(match d {
        Dtype::Float32 => DType::F32,
        Dtype::Float64 => DType::F64,
        Dtype::Float16 => DType::F16,
        Dtype::BFloat16 => DType::BF16,
        Dtype::Int64 | Dtype::Uint32 | Dtype::Uint64 => DType::I64,
        Dtype::Int32 | Dtype::Uint16 => DType::I32,
        Dtype::Int16 | Dtype::Int8 => DType::I16,
        Dtype::Uint8 | Dtype::Bool => DType::U8,
        other => {
            return Err(Error::unsupported(format!(
                "dtype {} is not supported by the executor",
                other.torch_name()
            )))
        }
    })
}

/// Whether candle stores `d` wider than it is (int8 as i16, uint16 as
/// i32, uint32 as i64): a value put there must be wrapped to its width.
fn storage_is_wider(d: Dtype) -> bool {
    matches!(d, Dtype::Int8 | Dtype::Uint16 | Dtype::Uint32)
}

impl Tensor {
    pub fn new(t: CandleTensor, dtype: Dtype) -> Tensor {
        Tensor { t, dtype }
    }

    pub fn dims(&self) -> &[usize] {
        self.t.dims()
    }

    pub fn rank(&self) -> usize {
        self.t.rank()
    }

    /// Converts to another logical dtype (with PyTorch's semantics for
    /// bool: nonzero is true).
    pub fn cast(&self, to: Dtype) -> Result<Tensor> {
        if to == self.dtype {
            return Ok(self.clone());
        }
        let target = storage_dtype(to)?;
        let t = if to == Dtype::Bool {
            self.t.ne(0f64)?
        } else if !to.is_floating() {
            // float -> int truncates toward zero, as torch does; then the
            // value wraps to the dtype's width (int8 is stored as i16: 300
            // becomes 44, as torch's cast gives)
            let ints = if self.dtype.is_floating() {
                // as torch's casts on x86 (cvtt*): NaN, an infinity or a
                // value out of range is the "integer indefinite", the
                // minimum of the int64 the cast goes through for 64-bit
                // targets, of int32 for narrower ones (then wrapped:
                // int8 of inf is 0)
                let wide = matches!(to, Dtype::Int64 | Dtype::Uint64 | Dtype::Uint32);
                let f = ops::elems(self)?.into_f64();
                let v: Vec<i64> = f
                    .into_iter()
                    .map(|x| {
                        let t = x.trunc();
                        if wide {
                            if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&t) {
                                t as i64
                            } else {
                                i64::MIN
                            }
                        } else if (-2147483648.0..2147483648.0).contains(&t) {
                            t as i64
                        } else {
                            i32::MIN as i64
                        }
                    })
                    .collect();
                CandleTensor::from_vec(v, self.dims(), self.t.device())?
            } else {
                self.t.clone()
            };
            if storage_is_wider(to) {
                let src = Tensor::new(ints, Dtype::Int64);
                return ops::from_elems(ops::elems(&src)?, self.dims(), to, self.t.device());
            }
            ints.to_dtype(target)?
        } else {
            self.t.to_dtype(target)?
        };
        Ok(Tensor::new(t, to))
    }

    /// The candle dtype and shape a complex tensor of `shape` is held in:
    /// its real pairs (a trailing dim of 2; `decompose::complex` lowers
    /// every op on complex values to ops on those).
    fn complex_storage(dtype: Dtype, shape: &[usize]) -> Result<(DType, Vec<usize>)> {
        let mut pairs = shape.to_vec();
        pairs.push(2);
        Ok((storage_dtype(dtype.real_part())?, pairs))
    }

    pub fn from_host(h: &HostTensor, device: &Device) -> Result<Tensor> {
        Tensor::from_bytes(h.dtype, &h.shape, &h.data, device)
    }

    /// Builds a tensor from little-endian element bytes: the one copy of
    /// weight bytes the executor makes (IR storage to candle storage).
    pub fn from_bytes(
        dtype: Dtype,
        shape: &[usize],
        data: &[u8],
        device: &Device,
    ) -> Result<Tensor> {
        note_host_copy(device);
        if dtype.is_complex() {
            let (storage, pairs) = Tensor::complex_storage(dtype, shape)?;
            let t = CandleTensor::from_raw_buffer(data, storage, &pairs, device)?;
            return Ok(Tensor::new(t, dtype));
        }
        let storage = storage_dtype(dtype)?;
        let widened: Vec<u8>;
        let bytes: &[u8] = match dtype {
            Dtype::Int8 => {
                widened = data
                    .iter()
                    .flat_map(|b| (*b as i8 as i16).to_le_bytes())
                    .collect();
                &widened
            }
            Dtype::Uint16 => {
                widened = data
                    .chunks_exact(2)
                    .flat_map(|c| (u16::from_le_bytes([c[0], c[1]]) as i32).to_le_bytes())
                    .collect();
                &widened
            }
            Dtype::Uint32 => {
                widened = data
                    .chunks_exact(4)
                    .flat_map(|c| {
                        (u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).to_le_bytes()
                    })
                    .collect();
                &widened
            }
            _ => data,
        };
        let t = CandleTensor::from_raw_buffer(bytes, storage, shape, device)?;
        Ok(Tensor::new(t, dtype))
    }

    /// Lends the elements' bytes to `f`: borrowed from candle's storage
    /// where candle keeps them as the file has them (a contiguous CPU
    /// tensor of float32, float64, float16, bfloat16, int64 or uint8), else
    /// a host copy.
    fn with_raw_bytes(&self, f: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        fn raw<T: candle_core::WithDType>(
            t: &CandleTensor,
            f: &mut dyn FnMut(&[u8]) -> Result<()>,
        ) -> Option<Result<()>> {
            ops::with_host::<T, _>(t, |v| {
                // SAFETY: T is a plain number type (no padding, every byte
                // initialised); the bytes are read within the slice.
                f(unsafe {
                    std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v))
                })
            })
        }
        let lent = if cfg!(target_endian = "big") {
            None
        } else {
            match self.dtype {
                Dtype::Float32 | Dtype::Complex64 => raw::<f32>(&self.t, f),
                Dtype::Float64 | Dtype::Complex128 => raw::<f64>(&self.t, f),
                Dtype::Complex32 => raw::<half::f16>(&self.t, f),
                Dtype::Float16 => raw::<half::f16>(&self.t, f),
                Dtype::BFloat16 => raw::<half::bf16>(&self.t, f),
                Dtype::Int64 | Dtype::Uint64 => raw::<i64>(&self.t, f),
                Dtype::Uint8 => raw::<u8>(&self.t, f),
                _ => None,
            }
        };
        match lent {
            Some(r) => r,
            None => f(&self.to_host()?.data),
        }
    }

    /// The logical shape: a complex tensor's without its pair dim.
    pub fn shape(&self) -> &[usize] {
        let dims = self.dims();
        if self.dtype.is_complex() {
            &dims[..dims.len().saturating_sub(1)]
        } else {
            dims
        }
    }

    pub fn to_host(&self) -> Result<HostTensor> {
        note_host_copy(self.t.device());
        let shape = self.shape().to_vec();
        if self.t.elem_count() == 0 {
            // candle reads an empty view at its offset, past the end of an
            // empty storage (a panic): nothing to read
            return Ok(HostTensor {
                dtype: self.dtype,
                shape,
                data: Vec::new(),
            });
        }
        // A CPU tensor whose elements are stored as written (float32 and the
        // like): its bytes copied once, not through a typed Vec first (the
        // logits of a language model are hundreds of MB).
        let raw = matches!(
            (self.dtype, self.t.dtype()),
            (Dtype::Float32 | Dtype::Complex64, DType::F32)
                | (Dtype::Float64 | Dtype::Complex128, DType::F64)
                | (Dtype::Complex32, DType::F16)
                | (Dtype::Float16, DType::F16)
                | (Dtype::BFloat16, DType::BF16)
                | (Dtype::Int64 | Dtype::Uint64, DType::I64)
                | (Dtype::Uint8, DType::U8)
        );
        if raw && self.t.device().is_cpu() && cfg!(target_endian = "little") {
            let mut data = Vec::new();
            self.with_raw_bytes(&mut |b| {
                data.extend_from_slice(b);
                Ok(())
            })?;
            return Ok(HostTensor {
                dtype: self.dtype,
                shape,
                data,
            });
        }
        let flat = self.t.flatten_all()?.to_device(&Device::Cpu)?;
        let data: Vec<u8> = match self.dtype {
            Dtype::Float32 | Dtype::Complex64 => flat
                .to_vec1::<f32>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            Dtype::Float64 | Dtype::Complex128 => flat
                .to_vec1::<f64>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            Dtype::Float16 | Dtype::Complex32 => flat
                .to_vec1::<half::f16>()?
                .iter()
                .flat_map(|v| v.to_bits().to_le_bytes())
                .collect(),
            Dtype::BFloat16 => flat
                .to_vec1::<half::bf16>()?
                .iter()
                .flat_map(|v| v.to_bits().to_le_bytes())
                .collect(),
            Dtype::Int64 | Dtype::Uint64 => flat
                .to_vec1::<i64>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            Dtype::Uint32 => flat
                .to_vec1::<i64>()?
                .iter()
                .flat_map(|v| (*v as u32).to_le_bytes())
                .collect(),
            Dtype::Int32 => flat
                .to_vec1::<i32>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            Dtype::Uint16 => flat
                .to_vec1::<i32>()?
                .iter()
                .flat_map(|v| (*v as u16).to_le_bytes())
                .collect(),
            Dtype::Int16 => flat
                .to_vec1::<i16>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            Dtype::Int8 => flat
                .to_vec1::<i16>()?
                .iter()
                .map(|v| *v as i8 as u8)
                .collect(),
            Dtype::Uint8 => flat.to_vec1::<u8>()?,
            Dtype::Bool => flat
                .to_vec1::<u8>()?
                .iter()
                .map(|v| (*v != 0) as u8)
                .collect(),
            other => {
                return Err(Error::unsupported(format!(
                    "cannot read back {}",
                    other.torch_name()
                )))
            }
        };
        Ok(HostTensor {
            dtype: self.dtype,
            shape,
            data,
        })
    }
}

/// An output of a run: a tensor as the executor made it, or a scalar made
/// a host tensor. Written to a file, a tensor's bytes are read in place
/// ([`TensorBytes`]), not copied into a [`HostTensor`] first.
pub enum RunOutput {
    Tensor(Tensor),
    Host(HostTensor),
}

impl RunOutput {
    pub fn into_host(self) -> Result<HostTensor> {
        match self {
            RunOutput::Tensor(t) => t.to_host(),
            RunOutput::Host(h) => Ok(h),
        }
    }

    /// A copy on the host (for a summary: [`RunOutput::into_host`] where
    /// the output is no longer needed).
    pub fn to_host(&self) -> Result<HostTensor> {
        match self {
            RunOutput::Tensor(t) => t.to_host(),
            RunOutput::Host(h) => Ok(h.clone()),
        }
    }
}

impl crate::tensorfile::TensorBytes for RunOutput {
    fn dtype(&self) -> Dtype {
        match self {
            RunOutput::Tensor(t) => t.dtype,
            RunOutput::Host(h) => h.dtype,
        }
    }
    fn shape(&self) -> &[usize] {
        match self {
            RunOutput::Tensor(t) => t.shape(),
            RunOutput::Host(h) => &h.shape,
        }
    }
    fn with_bytes(&self, f: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        match self {
            RunOutput::Tensor(t) => t.with_raw_bytes(f),
            RunOutput::Host(h) => f(&h.data),
        }
    }
}
