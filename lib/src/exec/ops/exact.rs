//! Torch's dtype model on the host, exactly: the one place where values
//! leave candle's storage types for host arithmetic.
//!
//! - Integers (and bools) are `i64`, never a float: every int64 keeps its
//!   bits (a float64 holds 53), and a result is wrapped to its dtype's
//!   width as torch's kernels wrap (`int8` 127 + 1 is -128).
//! - Floating values are `f64`, rounded once to their dtype on the way
//!   back (exact for +, -, *, / of float32 and narrower).
//! - Python numbers are [`Num`]s: an int stays an `i64`.
//!
//! candle stores some logical dtypes wider than they are (int8 as i16,
//! uint16 as i32, uint32 as i64: `storage_dtype`); [`from_elems`] wraps to
//! the logical width, so no op leaves a value out of its dtype's range.

use super::*;

/// A Python number as an op takes it (torch's `Scalar`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Num {
    /// The number a value holds (`None` for tensors and lists).
    pub(crate) fn of(v: &Value) -> Option<Num> {
        match v {
            Value::Int(i) => Some(Num::Int(*i)),
            Value::Float(f) => Some(Num::Float(*f)),
            Value::Bool(b) => Some(Num::Bool(*b)),
            _ => None,
        }
    }

    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
            Num::Bool(b) => b as i64 as f64,
        }
    }

    /// As an integer (a float truncated toward zero, as torch converts).
    pub(crate) fn as_i64(self) -> i64 {
        match self {
            Num::Int(i) => i,
            Num::Float(f) => f as i64,
            Num::Bool(b) => b as i64,
        }
    }

    /// The dtype torch's promotion gives a Python number of this kind.
    pub(crate) fn dtype(self) -> Dtype {
        match self {
            Num::Int(_) => Dtype::Int64,
            Num::Float(_) => Dtype::Float32,
            Num::Bool(_) => Dtype::Bool,
        }
    }
}

impl Value {
    /// A number as a value (an int stays an int).
    pub(crate) fn from_num(n: Num) -> Value {
        match n {
            Num::Int(i) => Value::Int(i),
            Num::Float(f) => Value::Float(f),
            Num::Bool(b) => Value::Bool(b),
        }
    }
}

/// A tensor's elements on the host, exactly: integer and bool dtypes as
/// `i64` (uint64 as its bits), floating ones as `f64`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Elems {
    I(Vec<i64>),
    F(Vec<f64>),
}

impl Elems {
    pub(crate) fn len(&self) -> usize {
        match self {
            Elems::I(v) => v.len(),
            Elems::F(v) => v.len(),
        }
    }

    /// `n` copies of `v`, as `dtype` holds it.
    pub(crate) fn filled(n: usize, v: Num, dtype: Dtype) -> Elems {
        if dtype.is_floating() {
            Elems::F(vec![v.as_f64(); n])
        } else if dtype == Dtype::Bool {
            Elems::I(vec![(v.as_f64() != 0.0) as i64; n])
        } else {
            Elems::I(vec![wrap(v.as_i64(), dtype); n])
        }
    }

    /// The elements at `idx` (each in range), in that order.
    pub(crate) fn pick(&self, idx: impl Iterator<Item = usize>) -> Elems {
        match self {
            Elems::I(v) => Elems::I(idx.map(|i| v[i]).collect()),
            Elems::F(v) => Elems::F(idx.map(|i| v[i]).collect()),
        }
    }

    /// Element `i` as a number.
    pub(crate) fn get(&self, i: usize) -> Num {
        match self {
            Elems::I(v) => Num::Int(v[i]),
            Elems::F(v) => Num::Float(v[i]),
        }
    }

    /// As floats (integers converted, as torch converts them).
    pub(crate) fn into_f64(self) -> Vec<f64> {
        match self {
            Elems::I(v) => v.into_iter().map(|x| x as f64).collect(),
            Elems::F(v) => v,
        }
    }
}

/// `v` wrapped to `dtype`'s width, as torch's integer kernels wrap (two's
/// complement; bool: nonzero is 1). Floating dtypes: unchanged.
pub(crate) fn wrap(v: i64, dtype: Dtype) -> i64 {
    match dtype {
        Dtype::Int8 => v as i8 as i64,
        Dtype::Uint8 => v as u8 as i64,
        Dtype::Int16 => v as i16 as i64,
        Dtype::Uint16 => v as u16 as i64,
        Dtype::Int32 => v as i32 as i64,
        Dtype::Uint32 => v as u32 as i64,
        Dtype::Bool => (v != 0) as i64,
        _ => v,
    }
}

/// A tensor's elements, exactly ([`Elems`]), in row-major order.
pub(crate) fn elems(t: &Tensor) -> Result<Elems> {
    let flat =
        t.t.flatten_all()
            .and_then(|f| f.to_device(&candle_core::Device::Cpu))?;
    if t.dtype.is_floating() {
        let f = if flat.dtype() == DType::F64 {
            flat
        } else {
            flat.to_dtype(DType::F64)?
        };
        return Ok(Elems::F(f.to_vec1::<f64>()?));
    }
    if t.dtype.is_complex() {
        return Err(unsupported(format!("{} values here", t.dtype.torch_name())));
    }
    let i = match flat.dtype() {
        DType::I64 => flat,
        _ => flat.to_dtype(DType::I64)?,
    };
    let mut v = i.to_vec1::<i64>()?;
    if t.dtype == Dtype::Bool {
        v.iter_mut().for_each(|x| *x = (*x != 0) as i64);
    }
    Ok(Elems::I(v))
}

/// A tensor of `dtype` from elements: integers wrapped to its width,
/// floats truncated toward zero into an integer dtype (as torch casts),
/// rounded once into a floating one.
pub(crate) fn from_elems(
    e: Elems,
    shape: &[usize],
    dtype: Dtype,
    dev: &candle_core::Device,
) -> Result<Tensor> {
    let storage = storage_dtype(dtype)?;
    let t = if dtype.is_floating() {
        let f = e.into_f64();
        let t = CandleTensor::from_vec(f, shape, dev)?;
        if storage == DType::F64 {
            t
        } else {
            t.to_dtype(storage)?
        }
    } else {
        let ints: Vec<i64> = match e {
            Elems::I(v) => v.into_iter().map(|x| wrap(x, dtype)).collect(),
            Elems::F(v) => v.into_iter().map(|x| wrap(x as i64, dtype)).collect(),
        };
        match storage {
            DType::I64 => CandleTensor::from_vec(ints, shape, dev),
            DType::I32 => CandleTensor::from_vec(
                ints.into_iter().map(|x| x as i32).collect::<Vec<_>>(),
                shape,
                dev,
            ),
            DType::I16 => CandleTensor::from_vec(
                ints.into_iter().map(|x| x as i16).collect::<Vec<_>>(),
                shape,
                dev,
            ),
            _ => CandleTensor::from_vec(
                ints.into_iter().map(|x| x as u8).collect::<Vec<_>>(),
                shape,
                dev,
            ),
        }?
    };
    Ok(Tensor::new(t, dtype))
}

/// Row-major `vals` of `from` broadcast to `to` (which `from` broadcasts
/// to: checked by the caller).
pub(crate) fn broadcast_vec<T: Copy>(vals: &[T], from: &[usize], to: &[usize]) -> Vec<T> {
    if from == to {
        return vals.to_vec();
    }
    let strides = broadcast_strides(from, to);
    let n: usize = to.iter().product();
    (0..n)
        .map(|k| {
            let mut rem = k;
            let mut src = 0;
            for (axis, size) in to.iter().enumerate().rev() {
                src += (rem % size) * strides[axis];
                rem /= size;
            }
            vals[src]
        })
        .collect()
}

/// [`Elems`] broadcast (see [`broadcast_vec`]).
pub(crate) fn broadcast_elems(e: &Elems, from: &[usize], to: &[usize]) -> Elems {
    match e {
        Elems::I(v) => Elems::I(broadcast_vec(v, from, to)),
        Elems::F(v) => Elems::F(broadcast_vec(v, from, to)),
    }
}

/// `init + alpha * [.., m, k] x [.., k, n]` on the host, exactly as
/// torch's CPU gemm for these dtypes: integers wrapping in int64 (the
/// same bits as wrapping in their own width, once wrapped), floats in
/// float64 as torch's `gemm_notrans_`, each `b * alpha` fused onto the
/// sum that starts from `init` (addmm's `beta * self`: an infinite bias
/// plus a term that only overflows once rounded stays infinite). Batch
/// dims broadcast; `init` broadcasts to `[.., m, n]`.
pub(crate) fn matmul_host(
    a: &Elems,
    ad: &[usize],
    b: &Elems,
    bd: &[usize],
    init: Option<(&Elems, &[usize])>,
    alpha: Num,
) -> Result<(Elems, Vec<usize>)> {
    let (ar, br) = (ad.len(), bd.len());
    if ar < 2 || br < 2 || ad[ar - 1] != bd[br - 2] {
        return Err(Error::bad_input(format!("a product of {ad:?} and {bd:?}")));
    }
    let (m, k, n) = (ad[ar - 2], ad[ar - 1], bd[br - 1]);
    let batch = broadcast_shape(&[&ad[..ar - 2], &bd[..br - 2]])?;
    let count: usize = batch.iter().product();
    let full = |r: usize, c: usize| -> Vec<usize> { [&batch[..], &[r, c][..]].concat() };
    let a = broadcast_elems(a, ad, &full(m, k));
    let b = broadcast_elems(b, bd, &full(k, n));
    let out_shape = full(m, n);
    let c0 = match init {
        Some((e, d)) => broadcast_elems(e, d, &out_shape),
        None => match (&a, &b) {
            (Elems::I(_), Elems::I(_)) => Elems::I(vec![0; count * m * n]),
            _ => Elems::F(vec![0.0; count * m * n]),
        },
    };
    let out = match (a, b, c0) {
        (Elems::I(a), Elems::I(b), Elems::I(mut c)) => {
            let alpha = alpha.as_i64();
            for bi in 0..count {
                let (a, b, c) = (&a[bi * m * k..], &b[bi * k * n..], &mut c[bi * m * n..]);
                for i in 0..m {
                    for p in 0..k {
                        let x = a[i * k + p];
                        for j in 0..n {
                            let y = b[p * n + j].wrapping_mul(alpha);
                            c[i * n + j] = c[i * n + j].wrapping_add(x.wrapping_mul(y));
                        }
                    }
                }
            }
            Elems::I(c)
        }
        (a, b, c) => {
            let (a, b, mut c) = (a.into_f64(), b.into_f64(), c.into_f64());
            let alpha = alpha.as_f64();
            for bi in 0..count {
                let (a, b, c) = (&a[bi * m * k..], &b[bi * k * n..], &mut c[bi * m * n..]);
                for i in 0..m {
                    for p in 0..k {
                        let x = a[i * k + p];
                        for j in 0..n {
                            c[i * n + j] = x.mul_add(b[p * n + j] * alpha, c[i * n + j]);
                        }
                    }
                }
            }
            Elems::F(c)
        }
    };
    Ok((out, out_shape))
}

/// torch's total order for sorting floats: NaN above everything (and
/// equal to itself), -0.0 equal to 0.0.
pub(crate) fn nan_last(a: f64, b: f64) -> std::cmp::Ordering {
    a.partial_cmp(&b)
        .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// `base ** exp` in integers, as torch's `powi`: wrapping, a negative
/// exponent 0 except for bases 1 and -1.
pub(crate) fn int_pow(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 => {
                if exp % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut result, mut b, mut e) = (1i64, base, exp as u64);
    while e > 0 {
        if e & 1 == 1 {
            result = result.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    result
}

/// Floor division of integers (Python's `//`): a zero divisor is an
/// error, as torch's `ZeroDivisionError`; int64 min // -1 wraps to int64
/// min, as torch gives.
pub(crate) fn floor_div(a: i64, b: i64) -> Result<i64> {
    if b == 0 {
        return Err(Error::bad_input(
            "integer division by zero (ZeroDivisionError)",
        ));
    }
    let q = a.wrapping_div(b);
    Ok(if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q.wrapping_sub(1)
    } else {
        q
    })
}

/// Truncating division of integers (C's `/`; see [`floor_div`]).
pub(crate) fn trunc_div(a: i64, b: i64) -> Result<i64> {
    if b == 0 {
        return Err(Error::bad_input(
            "integer division by zero (ZeroDivisionError)",
        ));
    }
    Ok(a.wrapping_div(b))
}

/// Python's `%` of integers (the sign of the divisor), as torch's
/// `remainder`.
pub(crate) fn int_remainder(a: i64, b: i64) -> Result<i64> {
    if b == 0 {
        return Err(Error::bad_input(
            "integer division by zero (ZeroDivisionError)",
        ));
    }
    let r = a.wrapping_rem(b);
    Ok(if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    })
}

/// C's `%` of integers (the sign of the dividend), as torch's `fmod`.
pub(crate) fn int_fmod(a: i64, b: i64) -> Result<i64> {
    if b == 0 {
        return Err(Error::bad_input(
            "integer division by zero (ZeroDivisionError)",
        ));
    }
    Ok(a.wrapping_rem(b))
}

/// Python's `%` of floats, as torch's `remainder`: `a - floor(a / b) * b`.
pub(crate) fn float_remainder(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
        r + b
    } else {
        r
    }
}

/// A shift as torch's `bitwise_left_shift` / `bitwise_right_shift` of
/// `dtype`: a shift by the width or more (or a negative one) gives 0, or
/// -1 for a negative value shifted right.
pub(crate) fn shift(a: i64, b: i64, left: bool, dtype: Dtype) -> i64 {
    let bits = (dtype.size() * 8) as i64;
    if b < 0 || b >= bits {
        return if !left && a < 0 { -1 } else { 0 };
    }
    if left {
        wrap(a.wrapping_shl(b as u32), dtype)
    } else {
        a >> b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_as_torch() {
        assert_eq!(wrap(128, Dtype::Int8), -128);
        assert_eq!(wrap(-1, Dtype::Uint8), 255);
        assert_eq!(wrap(1 << 40, Dtype::Int32), 0);
        assert_eq!(wrap(70000, Dtype::Uint16), 4464);
        assert_eq!(floor_div(i64::MIN, -1).unwrap(), i64::MIN);
        assert_eq!(floor_div(-7, 2).unwrap(), -4);
        assert_eq!(trunc_div(-7, 2).unwrap(), -3);
        assert_eq!(int_remainder(-7, 3).unwrap(), 2);
        assert_eq!(int_remainder(i64::MIN, -1).unwrap(), 0);
        assert_eq!(int_fmod(-7, 3).unwrap(), -1);
        assert!(floor_div(1, 0).is_err());
        assert_eq!(int_pow(3, 41), 3i64.wrapping_pow(41));
        assert_eq!(int_pow(-1, -3), -1);
        assert_eq!(int_pow(2, -1), 0);
        assert_eq!(shift(1, 70, true, Dtype::Int64), 0);
        assert_eq!(shift(-8, 70, false, Dtype::Int64), -1);
        assert_eq!(shift(1, 7, true, Dtype::Int8), -128);
        // (2^53 + 1) survives a round trip where a float64 would not
        let big = (1i64 << 53) + 1;
        let t = from_elems(
            Elems::I(vec![big, -big]),
            &[2],
            Dtype::Int64,
            &candle_core::Device::Cpu,
        )
        .unwrap();
        assert_eq!(elems(&t).unwrap(), Elems::I(vec![big, -big]));
        let t = from_elems(
            Elems::I(vec![127 + 1, 300]),
            &[2],
            Dtype::Int8,
            &candle_core::Device::Cpu,
        )
        .unwrap();
        assert_eq!(elems(&t).unwrap(), Elems::I(vec![-128, 44]));
    }

    #[test]
    fn nan_sorts_last() {
        let mut v = [3.0, f64::NAN, 1.0, -0.0, 0.0];
        v.sort_by(|a, b| nan_last(*a, *b));
        assert_eq!(&v[..4], &[-0.0, 0.0, 1.0, 3.0]);
        assert!(v[4].is_nan());
    }
}
