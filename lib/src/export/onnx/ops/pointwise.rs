//! Elementwise arithmetic, comparisons, logic and math functions: the ONNX emitters.

use crate::ir::op::{aten, quantized_decomposed};
use super::*;

fn rsqrt(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let s = cx.node("Sqrt", &[x], vec![]);
        Ok(cx.node("Reciprocal", &[&s], vec![]))
    })
}

fn square(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        Ok(cx.node("Mul", &[x, x], vec![]))
    })
}

/// torch's sign: 0 at NaN (ONNX's Sign keeps NaN), a bool itself.
fn sign(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    if meta.dtype == Dtype::Bool {
        return copy_of(cx);
    }
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let s = cx.node("Sign", &[x], vec![]);
        if !c.is_floating() {
            return Ok(s);
        }
        let nan = cx.node("IsNaN", &[x], vec![]);
        let zero = cx.scalar(Lit::Int(0), c)?;
        Ok(cx.node("Where", &[&nan, &zero, &s], vec![]))
    })
}

/// floor, ceil and round: an integer is its own.
fn rounding(cx: &mut EmitNode, op: &str) -> Result<()> {
    let (_, meta) = first(cx)?;
    if !meta.dtype.is_floating() {
        return copy_of(cx);
    }
    unary(cx, op)
}

/// ONNX has no Trunc: sign(x) * floor(|x|).
fn trunc(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    if !meta.dtype.is_floating() {
        return copy_of(cx);
    }
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let a = cx.node("Abs", &[x], vec![]);
        let f = cx.node("Floor", &[&a], vec![]);
        let s = cx.node("Sign", &[x], vec![]);
        Ok(cx.node("Mul", &[&s, &f], vec![]))
    })
}

fn log_base(cx: &mut EmitNode, ln_base: f64) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let l = cx.node("Log", &[x], vec![]);
        let k = cx.scalar(Lit::Float(ln_base), c)?;
        Ok(cx.node("Div", &[&l, &k], vec![]))
    })
}

fn log1p(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let one = cx.scalar(Lit::Int(1), c)?;
        let s = cx.node("Add", &[x, &one], vec![]);
        Ok(cx.node("Log", &[&s], vec![]))
    })
}

fn expm1(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let one = cx.scalar(Lit::Int(1), c)?;
        let e = cx.node("Exp", &[x], vec![]);
        Ok(cx.node("Sub", &[&e, &one], vec![]))
    })
}

fn clamp(cx: &mut EmitNode) -> Result<()> {
    let min = if cx.has("min") {
        Some(cx.operand("min")?)
    } else {
        None
    };
    let max = if cx.has("max") {
        Some(cx.operand("max")?)
    } else {
        None
    };
    let is_rank0 = |o: &Option<Operand>| match o {
        Some(Operand::Tensor { rank0, .. }) => *rank0,
        _ => true,
    };
    if is_rank0(&min) && is_rank0(&max) {
        return clip(cx, min, max);
    }
    clamp_tensor(cx)
}

/// Clamp with tensor bounds: Max then Min, broadcasting.
fn clamp_tensor(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let min = if cx.has("min") {
        Some(cx.operand("min")?)
    } else {
        None
    };
    let max = if cx.has("max") {
        Some(cx.operand("max")?)
    } else {
        None
    };
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let mut y = x.to_string();
        if let Some(m) = &min {
            let m = cx.operand_as(m, c)?;
            y = cx.node("Max", &[&y, &m], vec![]);
        }
        if let Some(m) = &max {
            let m = cx.operand_as(m, c)?;
            y = cx.node("Min", &[&y, &m], vec![]);
        }
        Ok(y)
    })
}

fn logical_not(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let b = cx.cast(&x, meta.dtype, Dtype::Bool)?;
    let y = cx.node("Not", &[&b], vec![]);
    let out = cx.out_dtype(0)?;
    let y = cx.cast(&y, Dtype::Bool, out)?;
    cx.set(0, y);
    Ok(())
}

fn bitwise_not(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    if meta.dtype == Dtype::Bool {
        return logical_not(cx);
    }
    if cx.opset() < 18 {
        // ~x == -x - 1 for two's complement integers.
        let one = cx.scalar(Lit::Int(1), meta.dtype)?;
        let n = cx.node("Neg", &[&x], vec![]);
        let y = cx.node("Sub", &[&n, &one], vec![]);
        cx.set(0, y);
        return Ok(());
    }
    let y = cx.node("BitwiseNot", &[&x], vec![]);
    cx.set(0, y);
    Ok(())
}

fn predicate(cx: &mut EmitNode, op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    let c = cx.compute(meta.dtype);
    let xc = cx.cast(&x, meta.dtype, c)?;
    let y = if meta.dtype.is_floating() {
        cx.node(op, &[&xc], vec![])
    } else {
        // Integers are never NaN or infinite.
        let shape = cx.shape(&x);
        constant_of_shape(cx, &shape, Lit::Bool(false), Dtype::Bool)?
    };
    cx.set(0, y);
    Ok(())
}

// binary

/// `op(a, b)` computed in the output dtype.
fn arith(cx: &mut EmitNode, op: &str, a: &str, b: &str) -> Result<()> {
    let x = cx.operand(a)?;
    let y = cx.operand(b)?;
    binary_op(cx, op, &x, &y)
}

/// add/sub with `alpha`; `reverse` for rsub (other - alpha * self).
fn add_sub(cx: &mut EmitNode, op: &str, reverse: bool) -> Result<()> {
    let (a, b) = if reverse {
        ("other", "self")
    } else {
        ("self", "other")
    };
    let x = cx.operand(a)?;
    let y = cx.operand(b)?;
    let alpha = lit(cx, "alpha")?.unwrap_or(Lit::Int(1));
    let out = cx.out_dtype(0)?;
    // of bools, any alpha other than 0 is True: x + alpha * y is x or y
    if alpha.as_f64() == 1.0 || (out == Dtype::Bool && alpha.as_f64() != 0.0) {
        return binary_op(cx, op, &x, &y);
    }
    let c = cx.compute(out);
    let xs = cx.operand_as(&x, c)?;
    let ys = cx.operand_as(&y, c)?;
    let r = match out {
        // torch fuses the scaled operand in float32 (one rounding: a
        // product that overflows alone does not): in float64, where the
        // float32 product is exact, rounded once more
        Dtype::Float32 => {
            let k = alpha.as_f64() as f32 as f64;
            let (x64, y64) = (cx.cast(&xs, c, Dtype::Float64)?, cx.cast(&ys, c, Dtype::Float64)?);
            let k = cx.scalar(Lit::Float(k), Dtype::Float64)?;
            let scaled = cx.node("Mul", &[&y64, &k], vec![]);
            let r = cx.node(op, &[&x64, &scaled], vec![]);
            cx.cast(&r, Dtype::Float64, c)?
        }
        // and in float64, where the product that overflows alone is
        // taken again scaled down by a power of two
        Dtype::Float64 => fused_f64(cx, op, &xs, &ys, alpha.as_f64())?,
        // (not in float16 and bfloat16: computed in float32 from their
        // values, `k * b` overflows alone there, as it does here)
        _ => {
            let k = cx.scalar(alpha, c)?;
            let scaled = cx.node("Mul", &[&ys, &k], vec![]);
            cx.node(op, &[&xs, &scaled], vec![])
        }
    };
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// `x op k*y` in float64 as a fused multiply-add gives it where `k*y`
/// alone overflows (`x` infinite, or bringing the sum back in range):
/// there `(x/2^s op (k/2^s)*y) * 2^s`, with 2^s at least |k|, whose
/// scaled product cannot overflow.
fn fused_f64(cx: &mut EmitNode, op: &str, x: &str, y: &str, k: f64) -> Result<String> {
    let kc = cx.scalar(Lit::Float(k), Dtype::Float64)?;
    let p = cx.node("Mul", &[y, &kc], vec![]);
    let r = cx.node(op, &[x, &p], vec![]);
    if k.abs() <= 1.0 || !k.is_finite() {
        return Ok(r);
    }
    let s = k.abs().log2().ceil() as i32;
    let (down, up) = (2f64.powi(-s), 2f64.powi(s));
    let p_inf = cx.node("IsInf", &[&p], vec![]);
    let y_inf = cx.node("IsInf", &[y], vec![]);
    let y_finite = cx.node("Not", &[&y_inf], vec![]);
    let overflow = cx.node("And", &[&p_inf, &y_finite], vec![]);
    let (dc, kd, uc) = (
        cx.scalar(Lit::Float(down), Dtype::Float64)?,
        cx.scalar(Lit::Float(k * down), Dtype::Float64)?,
        cx.scalar(Lit::Float(up), Dtype::Float64)?,
    );
    let xd = cx.node("Mul", &[x, &dc], vec![]);
    let pd = cx.node("Mul", &[y, &kd], vec![]);
    let rd = cx.node(op, &[&xd, &pd], vec![]);
    let back = cx.node("Mul", &[&rd, &uc], vec![]);
    Ok(cx.node("Where", &[&overflow, &back, &r], vec![]))
}

/// An integer divisor made safe for ONNX Runtime, whose integer Div and
/// Mod trap (SIGFPE) on the minimum value divided by -1 (torch's result
/// wraps): `(ys with -1 as 1, ys == -1)`; the caller takes `-xs` (Div) or
/// 0 (Mod) where the mask is set. `None` for unsigned types, which have
/// no -1 (255 is a divisor like any other).
fn safe_divisor(cx: &mut EmitNode, ys: &str, c: Dtype) -> Result<Option<(String, String)>> {
    if matches!(c, Dtype::Uint8 | Dtype::Uint16 | Dtype::Uint32 | Dtype::Uint64) {
        return Ok(None);
    }
    let minus = cx.scalar(Lit::Int(-1), c)?;
    let one = cx.scalar(Lit::Int(1), c)?;
    let is_minus = cx.node("Equal", &[ys, &minus], vec![]);
    let safe = cx.node("Where", &[&is_minus, &one, ys], vec![]);
    Ok(Some((safe, is_minus)))
}

/// True division, or with `rounding_mode` trunc/floor.
fn div(cx: &mut EmitNode) -> Result<()> {
    let x = cx.operand("self")?;
    let y = cx.operand("other")?;
    let mode = if cx.node.target.name == "floor_divide" {
        Some("floor".to_string())
    } else {
        cx.opt_string("rounding_mode")?
    };
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.operand_as(&x, c)?;
    let ys = cx.operand_as(&y, c)?;
    if c.is_floating() && mode.as_deref() == Some("floor") {
        let r = floor_divide_floating(cx, &xs, &ys, c)?;
        let r = cx.cast(&r, c, out)?;
        cx.set(0, r);
        return Ok(());
    }
    let q = if c.is_floating() {
        cx.node("Div", &[&xs, &ys], vec![])
    } else {
        match safe_divisor(cx, &ys, c)? {
            Some((safe, is_minus)) => {
                let q = cx.node("Div", &[&xs, &safe], vec![]);
                let neg = cx.node("Neg", &[&xs], vec![]);
                cx.node("Where", &[&is_minus, &neg, &q], vec![])
            }
            None => cx.node("Div", &[&xs, &ys], vec![]),
        }
    };
    let r = match mode.as_deref() {
        None => q,
        Some("trunc") if c.is_floating() => {
            // the quotient as the output's dtype holds it first: torch
            // divides float16 in float16, then truncates
            let q = if c != out {
                let h = cx.cast(&q, c, out)?;
                cx.cast(&h, out, c)?
            } else {
                q
            };
            let a = cx.node("Abs", &[&q], vec![]);
            let f = cx.node("Floor", &[&a], vec![]);
            let s = cx.node("Sign", &[&q], vec![]);
            cx.node("Mul", &[&s, &f], vec![])
        }
        // ONNX integer division truncates.
        Some("trunc") => q,
        Some("floor") => {
            // q - (q * y != x and (x < 0) != (y < 0))
            let zero = cx.scalar(Lit::Int(0), c)?;
            let one = cx.scalar(Lit::Int(1), c)?;
            let back = cx.node("Mul", &[&q, &ys], vec![]);
            let exact = cx.node("Equal", &[&back, &xs], vec![]);
            let inexact = cx.node("Not", &[&exact], vec![]);
            let xn = cx.node("Less", &[&xs, &zero], vec![]);
            let yn = cx.node("Less", &[&ys, &zero], vec![]);
            let signs = cx.node("Xor", &[&xn, &yn], vec![]);
            let fix = cx.node("And", &[&inexact, &signs], vec![]);
            let q1 = cx.node("Sub", &[&q, &one], vec![]);
            cx.node("Where", &[&fix, &q1, &q], vec![])
        }
        Some(m) => return Err(Error::unsupported(format!("rounding_mode={m:?}"))),
    };
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// torch's `div_floor_floating`: the quotient through C's fmod, exact
/// where `floor(a / b)` would round the quotient up to an integer; a / b
/// where b is 0.
fn floor_divide_floating(cx: &mut EmitNode, a: &str, b: &str, c: Dtype) -> Result<String> {
    let zero = cx.scalar(Lit::Int(0), c)?;
    let one = cx.scalar(Lit::Int(1), c)?;
    let half = cx.scalar(Lit::Float(0.5), c)?;
    let m = cx.node("Mod", &[a, b], vec![attr_int("fmod", 1)]);
    let am = cx.node("Sub", &[a, &m], vec![]);
    let div = cx.node("Div", &[&am, b], vec![]);
    // one less where the remainder's sign is not the divisor's
    let m_nonzero = cx.node("Equal", &[&m, &zero], vec![]);
    let m_nonzero = cx.node("Not", &[&m_nonzero], vec![]);
    let b_neg = cx.node("Less", &[b, &zero], vec![]);
    let m_neg = cx.node("Less", &[&m, &zero], vec![]);
    let signs = cx.node("Xor", &[&b_neg, &m_neg], vec![]);
    let fix = cx.node("And", &[&m_nonzero, &signs], vec![]);
    let less = cx.node("Sub", &[&div, &one], vec![]);
    let div = cx.node("Where", &[&fix, &less, &div], vec![]);
    // rounded to the nearest integer (floor, up past .5)
    let f = cx.node("Floor", &[&div], vec![]);
    let frac = cx.node("Sub", &[&div, &f], vec![]);
    let up = cx.node("Greater", &[&frac, &half], vec![]);
    let f1 = cx.node("Add", &[&f, &one], vec![]);
    let rounded = cx.node("Where", &[&up, &f1, &f], vec![]);
    // a zero quotient takes the sign of a / b
    let q = cx.node("Div", &[a, b], vec![]);
    let signed_zero = cx.node("Mul", &[&q, &zero], vec![]);
    let div_zero = cx.node("Equal", &[&div, &zero], vec![]);
    let r = cx.node("Where", &[&div_zero, &signed_zero, &rounded], vec![]);
    // a zero divisor: a / b
    let b_zero = cx.node("Equal", &[b, &zero], vec![]);
    Ok(cx.node("Where", &[&b_zero, &q, &r], vec![]))
}

/// Python's remainder (the sign of the divisor), as torch computes it:
/// C's fmod, plus the divisor where the signs differ.
fn remainder(cx: &mut EmitNode) -> Result<()> {
    binary_in(cx, "self", "other", |cx, xs, ys, c| {
        let r = if c.is_floating() {
            let m = cx.node("Mod", &[xs, ys], vec![attr_int("fmod", 1)]);
            let zero = cx.scalar(Lit::Int(0), c)?;
            let m_zero = cx.node("Equal", &[&m, &zero], vec![]);
            let m_nonzero = cx.node("Not", &[&m_zero], vec![]);
            let b_neg = cx.node("Less", &[ys, &zero], vec![]);
            let m_neg = cx.node("Less", &[&m, &zero], vec![]);
            let signs = cx.node("Xor", &[&b_neg, &m_neg], vec![]);
            let fix = cx.node("And", &[&m_nonzero, &signs], vec![]);
            let shifted = cx.node("Add", &[&m, ys], vec![]);
            cx.node("Where", &[&fix, &shifted, &m], vec![])
        } else {
            int_mod(cx, xs, ys, c, 0)?
        };
        Ok(r)
    })
}

/// ONNX's integer Mod (`fmod` 0: Python's sign, 1: C's), 0 where the
/// divisor is -1 ([`safe_divisor`]).
fn int_mod(cx: &mut EmitNode, xs: &str, ys: &str, c: Dtype, fmod: i64) -> Result<String> {
    let Some((safe, is_minus)) = safe_divisor(cx, ys, c)? else {
        return Ok(cx.node("Mod", &[xs, ys], vec![attr_int("fmod", fmod)]));
    };
    let m = cx.node("Mod", &[xs, &safe], vec![attr_int("fmod", fmod)]);
    let zero = cx.scalar(Lit::Int(0), c)?;
    Ok(cx.node("Where", &[&is_minus, &zero, &m], vec![]))
}

pub(super) fn fmod(cx: &mut EmitNode) -> Result<()> {
    binary_in(cx, "self", "other", |cx, xs, ys, c| {
        if c.is_floating() {
            Ok(cx.node("Mod", &[xs, ys], vec![attr_int("fmod", 1)]))
        } else {
            int_mod(cx, xs, ys, c, 1)
        }
    })
}

fn pow(cx: &mut EmitNode) -> Result<()> {
    let x = cx.operand("self")?;
    let e = cx.operand("exponent")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    if !c.is_floating() && c != Dtype::Bool {
        return int_pow(cx, &x, &e, out);
    }
    let xs = cx.operand_as(&x, c)?;
    let r = match e {
        // x**2 as a product is exact where Pow may not be.
        Operand::Lit(l) if l.as_f64() == 2.0 => cx.node("Mul", &[&xs, &xs], vec![]),
        Operand::Lit(l) if l.as_f64() == 1.0 => xs,
        Operand::Lit(l) if l.as_f64() == 0.5 && c.is_floating() => cx.node("Sqrt", &[&xs], vec![]),
        _ => {
            let es = cx.operand_as(&e, c)?;
            cx.node("Pow", &[&xs, &es], vec![])
        }
    };
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// An integer power as torch computes it: exact, wrapping (products in
/// int64, or int32 for narrower types, which wrap alike once cast back),
/// by squaring and multiplying. A constant exponent unrolls; a tensor
/// exponent takes one step per bit of its dtype, and a negative one gives
/// 0, except for bases 1 and -1 (torch's `powi`). A negative constant
/// exponent is refused, as torch refuses it.
fn int_pow(cx: &mut EmitNode, x: &Operand, e: &Operand, out: Dtype) -> Result<()> {
    let w = if out == Dtype::Int64 || out == Dtype::Uint64 { out } else { Dtype::Int32 };
    let b = cx.operand_as(x, w)?;
    let r = if let Operand::Lit(l) = e {
        let k = l.as_i64();
        if k < 0 {
            return Err(Error::bad_input(
                "integers to negative integer powers are not allowed (torch refuses them)",
            ));
        }
        if k == 0 {
            // 1 shaped as the base: b * 0 + 1
            let zero = cx.scalar(Lit::Int(0), w)?;
            let one = cx.scalar(Lit::Int(1), w)?;
            let z = cx.node("Mul", &[&b, &zero], vec![]);
            cx.node("Add", &[&z, &one], vec![])
        } else {
            let (mut sq, mut k) = (b.clone(), k as u64);
            let mut r: Option<String> = None;
            while k > 0 {
                if k & 1 == 1 {
                    r = Some(match r {
                        None => sq.clone(),
                        Some(r) => cx.node("Mul", &[&r, &sq], vec![]),
                    });
                }
                k >>= 1;
                if k > 0 {
                    sq = cx.node("Mul", &[&sq, &sq], vec![]);
                }
            }
            r.unwrap_or(b)
        }
    } else {
        let ed = match e {
            Operand::Tensor { dtype, .. } | Operand::Sym { dtype, .. } => *dtype,
            Operand::Lit(_) => unreachable!(),
        };
        let es = cx.operand_as(e, w)?;
        let zero = cx.scalar(Lit::Int(0), w)?;
        let one = cx.scalar(Lit::Int(1), w)?;
        let two = cx.scalar(Lit::Int(2), w)?;
        let signed = !matches!(ed, Dtype::Uint8 | Dtype::Uint16 | Dtype::Uint32 | Dtype::Uint64 | Dtype::Bool);
        let neg = if signed { Some(cx.node("Less", &[&es, &zero], vec![])) } else { None };
        let mut rest = match &neg {
            Some(n) => cx.node("Where", &[n, &zero, &es], vec![]),
            None => es.clone(),
        };
        // the exponent's bits that can be set
        let bits = match ed {
            Dtype::Bool => 1,
            d if signed => d.size() * 8 - 1,
            d => d.size() * 8,
        };
        let mut r = one.clone();
        let mut sq = b.clone();
        for i in 0..bits {
            let bit = cx.node("Mod", &[&rest, &two], vec![attr_int("fmod", 0)]);
            let set = cx.node("Equal", &[&bit, &one], vec![]);
            let times = cx.node("Mul", &[&r, &sq], vec![]);
            r = cx.node("Where", &[&set, &times, &r], vec![]);
            if i + 1 < bits {
                rest = cx.node("Div", &[&rest, &two], vec![]);
                sq = cx.node("Mul", &[&sq, &sq], vec![]);
            }
        }
        if let Some(n) = neg {
            // base 1: 1; base -1: -1 for an odd exponent, else 1; else 0
            let minus = cx.scalar(Lit::Int(-1), w)?;
            let is_one = cx.node("Equal", &[&b, &one], vec![]);
            let is_minus = cx.node("Equal", &[&b, &minus], vec![]);
            let parity = cx.node("Mod", &[&es, &two], vec![attr_int("fmod", 0)]);
            let odd = cx.node("Equal", &[&parity, &one], vec![]);
            let pm = cx.node("Where", &[&odd, &minus, &one], vec![]);
            let m = cx.node("Where", &[&is_minus, &pm, &zero], vec![]);
            let m = cx.node("Where", &[&is_one, &one, &m], vec![]);
            r = cx.node("Where", &[&n, &m, &r], vec![]);
        }
        r
    };
    let r = cx.cast(&r, w, out)?;
    cx.set(0, r);
    Ok(())
}

fn compare(cx: &mut EmitNode, op: &str, negate: bool) -> Result<()> {
    let x = cx.operand("self")?;
    let y = cx.operand("other")?;
    let c = cx.compute(promote(&[&x, &y]));
    // ONNX's order comparisons take no bools.
    let c = if c == Dtype::Bool && op != "Equal" {
        Dtype::Int32
    } else {
        c
    };
    let xs = cx.operand_as(&x, c)?;
    let ys = cx.operand_as(&y, c)?;
    let mut r = cx.node(op, &[&xs, &ys], vec![]);
    if negate {
        r = cx.node("Not", &[&r], vec![]);
    }
    cx.set(0, r);
    Ok(())
}

fn logical(cx: &mut EmitNode, op: &str) -> Result<()> {
    let x = cx.operand("self")?;
    let y = cx.operand("other")?;
    let xs = cx.operand_as(&x, Dtype::Bool)?;
    let ys = cx.operand_as(&y, Dtype::Bool)?;
    let r = cx.node(op, &[&xs, &ys], vec![]);
    let out = cx.out_dtype(0)?;
    let r = cx.cast(&r, Dtype::Bool, out)?;
    cx.set(0, r);
    Ok(())
}

fn bitwise(cx: &mut EmitNode, bool_op: &str, int_op: &str) -> Result<()> {
    let out = cx.out_dtype(0)?;
    if out == Dtype::Bool {
        return logical(cx, bool_op);
    }
    if cx.opset() < 18 {
        return Err(Error::unsupported(format!(
            "{int_op} on integers needs opset 18"
        )));
    }
    arith(cx, int_op, "self", "other")
}

fn where_(cx: &mut EmitNode) -> Result<()> {
    let cond = cx.operand("condition")?;
    let x = cx.operand("self")?;
    let y = cx.operand("other")?;
    where_op(cx, &cond, &x, &y)
}

/// self + value * tensor1 * tensor2
fn addcmul(cx: &mut EmitNode) -> Result<()> {
    let x = cx.operand("self")?;
    let a = cx.operand("tensor1")?;
    let b = cx.operand("tensor2")?;
    let value = lit(cx, "value")?.unwrap_or(Lit::Int(1));
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let (xs, as_, bs) = (
        cx.operand_as(&x, c)?,
        cx.operand_as(&a, c)?,
        cx.operand_as(&b, c)?,
    );
    let mut p = cx.node("Mul", &[&as_, &bs], vec![]);
    if value.as_f64() != 1.0 {
        let k = cx.scalar(value, c)?;
        p = cx.node("Mul", &[&p, &k], vec![]);
    }
    let r = cx.node("Add", &[&xs, &p], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// n-th forward difference along `dim`, after prepending/appending.
fn diff(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let n = cx.opt_int("n")?.unwrap_or(1);
    let dim = normalize_dim(cx.opt_int("dim")?.unwrap_or(-1), rank)? as i64;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let mut parts = Vec::new();
    for (name, value) in [("prepend", None), ("self", Some(x)), ("append", None)] {
        let v = match value {
            Some(v) => Some((v, meta.dtype)),
            None => match cx.opt_input(name)? {
                Some(v) => Some((v, cx.dtype(name)?)),
                None => None,
            },
        };
        if let Some((v, d)) = v {
            parts.push(cx.cast(&v, d, c)?);
        }
    }
    let mut y = cx.concat(&parts, dim);
    let axes = cx.const_i64s(&[dim]);
    let one = cx.const_i64s(&[1]);
    let zero = cx.const_i64s(&[0]);
    let minus_one = cx.const_i64s(&[-1]);
    let end = cx.const_i64s(&[i64::MAX]);
    for _ in 0..n {
        let hi = cx.node("Slice", &[&y, &one, &end, &axes], vec![]);
        let lo = cx.node("Slice", &[&y, &zero, &minus_one, &axes], vec![]);
        let op = if c == Dtype::Bool { "Xor" } else { "Sub" };
        y = cx.node(op, &[&hi, &lo], vec![]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

// more elementwise

fn erfc(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let one = cx.scalar(Lit::Int(1), c)?;
        let e = cx.node("Erf", &[x], vec![]);
        Ok(cx.node("Sub", &[&one, &e], vec![]))
    })
}

fn exp2(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let two = cx.scalar(Lit::Int(2), c)?;
        Ok(cx.node("Pow", &[&two, x], vec![]))
    })
}

/// x - trunc(x)
fn frac(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let a = cx.node("Abs", &[x], vec![]);
        let f = cx.node("Floor", &[&a], vec![]);
        let s = cx.node("Sign", &[x], vec![]);
        let t = cx.node("Mul", &[&s, &f], vec![]);
        Ok(cx.node("Sub", &[x, &t], vec![]))
    })
}

fn nan_to_num(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    if !meta.dtype.is_floating() {
        return copy_of(cx);
    }
    let (max, min) = match meta.dtype {
        Dtype::Float64 => (f64::MAX, f64::MIN),
        Dtype::Float16 => (65504.0, -65504.0),
        Dtype::BFloat16 => (3.3895313892515355e38, -3.3895313892515355e38),
        _ => (f32::MAX as f64, f32::MIN as f64),
    };
    let nan = cx.opt_float("nan")?.unwrap_or(0.0);
    let posinf = cx.opt_float("posinf")?.unwrap_or(max);
    let neginf = cx.opt_float("neginf")?.unwrap_or(min);
    let dtype = meta.dtype;
    elementwise(cx, &x, dtype, |cx, x, c| {
        let is_nan = cx.node("IsNaN", &[x], vec![]);
        let n = cx.scalar(Lit::Float(nan), c)?;
        let y = cx.node("Where", &[&is_nan, &n, x], vec![]);
        let is_pos = cx.node("IsInf", &[x], vec![attr_int("detect_negative", 0)]);
        let p = cx.scalar(Lit::Float(posinf), c)?;
        let y = cx.node("Where", &[&is_pos, &p, &y], vec![]);
        let is_neg = cx.node("IsInf", &[x], vec![attr_int("detect_positive", 0)]);
        let m = cx.scalar(Lit::Float(neginf), c)?;
        Ok(cx.node("Where", &[&is_neg, &m, &y], vec![]))
    })
}

/// atan2(y, x) from Atan(y / x) and the quadrant.
fn atan2(cx: &mut EmitNode) -> Result<()> {
    let y = cx.operand("self")?;
    let x = cx.operand("other")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let ys = cx.operand_as(&y, c)?;
    let xs = cx.operand_as(&x, c)?;
    let pi = std::f64::consts::PI;
    let zero = cx.scalar(Lit::Int(0), c)?;
    // the sign bit, as IEEE atan2 reads it: negative, or a zero whose
    // reciprocal is -inf (-0.0)
    let one = cx.scalar(Lit::Int(1), c)?;
    let sign_bit = |cx: &mut EmitNode, v: &str| {
        let lt = cx.node("Less", &[v, &zero], vec![]);
        let inv = cx.node("Div", &[&one, v], vec![]);
        let neg_zero = cx.node("Less", &[&inv, &zero], vec![]);
        cx.node("Or", &[&lt, &neg_zero], vec![])
    };
    let (y_neg, x_neg) = (sign_bit(cx, &ys), sign_bit(cx, &xs));
    // atan(y / x), turned by pi toward y's side where x is negative (x = ±0
    // included: y / ±0 is ±inf, whose atan is ±pi/2)
    let q = cx.node("Div", &[&ys, &xs], vec![]);
    let a = cx.node("Atan", &[&q], vec![]);
    let pos_pi = cx.scalar(Lit::Float(pi), c)?;
    let neg_pi = cx.scalar(Lit::Float(-pi), c)?;
    let turn = cx.node("Where", &[&y_neg, &neg_pi, &pos_pi], vec![]);
    let turned = cx.node("Add", &[&a, &turn], vec![]);
    let r = cx.node("Where", &[&x_neg, &turned, &a], vec![]);
    // both zero (0 / 0 is NaN): ±pi where x is -0, else y itself (±0)
    let x_zero = cx.node("Equal", &[&xs, &zero], vec![]);
    let y_zero = cx.node("Equal", &[&ys, &zero], vec![]);
    let both = cx.node("And", &[&x_zero, &y_zero], vec![]);
    let at_origin = cx.node("Where", &[&x_neg, &turn, &ys], vec![]);
    let r = cx.node("Where", &[&both, &at_origin, &r], vec![]);
    // both infinite (inf / inf is NaN): ±pi/4 toward x's side, ±3pi/4
    // where x is -inf, y's sign
    let x_inf = cx.node("IsInf", &[&xs], vec![]);
    let y_inf = cx.node("IsInf", &[&ys], vec![]);
    let both_inf = cx.node("And", &[&x_inf, &y_inf], vec![]);
    let (q1, q3) = (cx.scalar(Lit::Float(pi / 4.0), c)?, cx.scalar(Lit::Float(3.0 * pi / 4.0), c)?);
    let (n1, n3) = (cx.scalar(Lit::Float(-pi / 4.0), c)?, cx.scalar(Lit::Float(-3.0 * pi / 4.0), c)?);
    let up = cx.node("Where", &[&x_neg, &q3, &q1], vec![]);
    let down = cx.node("Where", &[&x_neg, &n3, &n1], vec![]);
    let corner = cx.node("Where", &[&y_neg, &down, &up], vec![]);
    let r = cx.node("Where", &[&both_inf, &corner, &r], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

// PT2E int8 (quantized_decomposed): QuantizeLinear and DequantizeLinear,
// int8 and uint8, per tensor or along an axis: the QDQ form ONNX Runtime
// fuses with the ops between its nodes into int8 kernels where it can.
// QuantizeLinear divides by the scale where torch multiplies by its float32
// reciprocal: a value within an ulp of a rounding tie may land one step
// apart. Other dtypes, an `out_dtype` of a per-tensor dequantize, and a
// zero point outside the dtype's range are declined (`qdq_declines`) and
// lowered through the decomposition rules instead, to torch's arithmetic.

/// Whether QuantizeLinear/DequantizeLinear cannot say this node as torch
/// computes it (see above): the decomposition rule lowers it instead.
pub(super) fn qdq_declines(n: &crate::ir::Node) -> bool {
    let dtype = match n.arg("dtype") {
        Some(Argument::ScalarType(d)) => *d,
        _ => return true,
    };
    let Some((lo, hi)) = int8_range(dtype) else {
        return true;
    };
    let zp_out = matches!(n.arg("zero_point"), Some(Argument::Int(z)) if *z < lo || *z > hi);
    let out_dtype = n.target.name == "dequantize_per_tensor"
        && !matches!(n.arg("out_dtype"), None | Some(Argument::None) | Some(Argument::ScalarType(Dtype::Float32)));
    zp_out || out_dtype
}

/// The range of the dtypes QDQ takes here.
fn int8_range(d: Dtype) -> Option<(i64, i64)> {
    match d {
        Dtype::Int8 => Some((-128, 127)),
        Dtype::Uint8 => Some((0, 255)),
        _ => None,
    }
}

/// A per-tensor parameter as a rank-0 ONNX value of `dtype`: a number as a
/// constant, a one-element tensor (`.tensor`) cast and reshaped.
fn qparam(cx: &mut EmitNode, name: &str, dtype: Dtype) -> Result<String> {
    match cx.operand(name)? {
        Operand::Lit(l) => cx.scalar(l, dtype),
        op => {
            let v = cx.operand_as(&op, dtype)?;
            cx.reshape_const(&v, &[])
        }
    }
}

/// Scale, zero point (absent: none, which is 0) and attributes of a QDQ
/// node: per tensor, or per channel along `axis` (float32 scales only:
/// other scales make torch compute in their dtype).
fn qdq_params(cx: &mut EmitNode, per_channel: bool, dtype: Dtype) -> Result<(Vec<String>, Vec<onnx_protobuf::AttributeProto>)> {
    let zp = if per_channel { "zero_points" } else { "zero_point" };
    if cx.has(zp) && matches!(cx.operand(zp)?, Operand::Tensor { dtype: d, .. } if d.is_floating()) {
        return Err(Error::unsupported(format!(
            "{} zero points: QuantizeLinear and DequantizeLinear take them in the quantized dtype, and torch computes with the float",
            cx.dtype(zp)?.torch_name()
        )));
    }
    if !per_channel {
        let s = qparam(cx, "scale", Dtype::Float32)?;
        let z = qparam(cx, "zero_point", dtype)?;
        return Ok((vec![s, z], vec![]));
    }
    if cx.dtype("scales")? != Dtype::Float32 {
        return Err(Error::unsupported(format!(
            "per-channel scales of {}: QuantizeLinear and DequantizeLinear take float32 scales, and torch computes in the scales' dtype",
            cx.dtype("scales")?.torch_name()
        )));
    }
    let rank = cx.rank("input")?;
    let axis = normalize_dim(cx.int("axis")?, rank)? as i64;
    // one scale for every channel: per tensor
    let one = cx.meta("scales")?.sizes.first() == Some(&Sym::Int(1));
    let fit = |cx: &mut EmitNode, v: String| if one { cx.reshape_const(&v, &[]) } else { Ok(v) };
    let s = cx.input("scales")?;
    let mut params = vec![fit(cx, s)?];
    if cx.opt_input("zero_points")?.is_some() {
        let z = cx.input_as("zero_points", dtype)?;
        params.push(fit(cx, z)?);
    }
    Ok((params, vec![attr_int("axis", axis)]))
}

/// quantize_per_tensor / quantize_per_channel: QuantizeLinear of the
/// input as float32, then a Clip where `quant_min`/`quant_max` are
/// narrower than the dtype's range (torch clamps to them).
fn quantize(cx: &mut EmitNode, per_channel: bool) -> Result<()> {
    let dtype = cx.out_dtype(0)?;
    let x = cx.input_as("input", Dtype::Float32)?;
    let (params, attrs) = qdq_params(cx, per_channel, dtype)?;
    let mut inputs = vec![x.as_str()];
    inputs.extend(params.iter().map(String::as_str));
    let mut y = cx.node("QuantizeLinear", &inputs, attrs);
    let (lo, hi) = (cx.int("quant_min")?, cx.int("quant_max")?);
    if Some((lo, hi)) != int8_range(dtype) {
        let (l, h) = (cx.scalar(Lit::Int(lo), dtype)?, cx.scalar(Lit::Int(hi), dtype)?);
        y = cx.node("Clip", &[&y, &l, &h], vec![]);
    }
    cx.set(0, y);
    Ok(())
}

/// dequantize_per_tensor / dequantize_per_channel: DequantizeLinear
/// (`(x - zero_point) * scale` in float32, as torch), cast to `out_dtype`.
fn dequantize(cx: &mut EmitNode, per_channel: bool) -> Result<()> {
    let dtype = cx.dtype("input")?;
    let x = cx.input("input")?;
    let (params, attrs) = qdq_params(cx, per_channel, dtype)?;
    let mut inputs = vec![x.as_str()];
    inputs.extend(params.iter().map(String::as_str));
    let y = cx.node("DequantizeLinear", &inputs, attrs);
    let out = cx.out_dtype(0)?;
    let y = cx.cast(&y, Dtype::Float32, out)?;
    cx.set(0, y);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::EXP, |cx| unary(cx, "Exp")),
    (aten::LOG, |cx| unary(cx, "Log")),
    (aten::SQRT, |cx| unary(cx, "Sqrt")),
    (aten::NEG, |cx| unary(cx, "Neg")),
    (aten::ABS, |cx| unary(cx, "Abs")),
    (aten::SIN, |cx| unary(cx, "Sin")),
    (aten::COS, |cx| unary(cx, "Cos")),
    (aten::TAN, |cx| unary(cx, "Tan")),
    (aten::ASIN, |cx| unary(cx, "Asin")),
    (aten::ACOS, |cx| unary(cx, "Acos")),
    (aten::ATAN, |cx| unary(cx, "Atan")),
    (aten::SINH, |cx| unary(cx, "Sinh")),
    (aten::COSH, |cx| unary(cx, "Cosh")),
    (aten::ERF, |cx| unary(cx, "Erf")),
    (aten::FLOOR, |cx| rounding(cx, "Floor")),
    (aten::CEIL, |cx| rounding(cx, "Ceil")),
    (aten::ROUND, |cx| rounding(cx, "Round")),
    (aten::RECIPROCAL, |cx| unary(cx, "Reciprocal")),
    (aten::SIGN, sign),
    (aten::RSQRT, rsqrt),
    (aten::SQUARE, square),
    (aten::TRUNC, trunc),
    (aten::LOG2, |cx| log_base(cx, std::f64::consts::LN_2)),
    (aten::LOG10, |cx| log_base(cx, std::f64::consts::LN_10)),
    (aten::LOG1P, log1p),
    (aten::EXPM1, expm1),
    (aten::CLAMP, clamp),
    (aten::CLAMP_TENSOR, clamp_tensor),
    (aten::CLAMP_MIN, clamp),
    (aten::CLAMP_MAX, clamp),
    (aten::LOGICAL_NOT, logical_not),
    (aten::BITWISE_NOT, bitwise_not),
    (aten::ISNAN, |cx| predicate(cx, "IsNaN")),
    (aten::ACOSH, |cx| unary(cx, "Acosh")),
    (aten::ASINH, |cx| unary(cx, "Asinh")),
    (aten::ATANH, |cx| unary(cx, "Atanh")),
    (aten::ERFC, erfc),
    (aten::EXP2, exp2),
    (aten::FRAC, frac),
    (aten::NAN_TO_NUM, nan_to_num),
    (aten::ISINF, |cx| predicate(cx, "IsInf")),
    (aten::ADD_TENSOR, |cx| add_sub(cx, "Add", false)),
    (aten::ADD_SCALAR, |cx| add_sub(cx, "Add", false)),
    (aten::SUB_TENSOR, |cx| add_sub(cx, "Sub", false)),
    (aten::SUB_SCALAR, |cx| add_sub(cx, "Sub", false)),
    (aten::RSUB_TENSOR, |cx| add_sub(cx, "Sub", true)),
    (aten::RSUB_SCALAR, |cx| add_sub(cx, "Sub", true)),
    (aten::MUL_TENSOR, |cx| arith(cx, "Mul", "self", "other")),
    (aten::MUL_SCALAR, |cx| arith(cx, "Mul", "self", "other")),
    (aten::DIV_TENSOR, div),
    (aten::DIV_SCALAR, div),
    (aten::DIV_TENSOR_MODE, div),
    (aten::DIV_SCALAR_MODE, div),
    (aten::FLOOR_DIVIDE, div),
    (aten::TRUE_DIVIDE_TENSOR, div),
    (aten::REMAINDER_TENSOR, remainder),
    (aten::REMAINDER_SCALAR, remainder),
    (aten::FMOD_TENSOR, fmod),
    (aten::FMOD_SCALAR, fmod),
    (aten::POW_TENSOR_SCALAR, pow),
    (aten::POW_TENSOR_TENSOR, pow),
    (aten::POW_SCALAR, pow),
    (aten::MAXIMUM, |cx| arith(cx, "Max", "self", "other")),
    (aten::MINIMUM, |cx| arith(cx, "Min", "self", "other")),
    (aten::EQ_TENSOR, |cx| compare(cx, "Equal", false)),
    (aten::EQ_SCALAR, |cx| compare(cx, "Equal", false)),
    (aten::NE_TENSOR, |cx| compare(cx, "Equal", true)),
    (aten::NE_SCALAR, |cx| compare(cx, "Equal", true)),
    (aten::LT_TENSOR, |cx| compare(cx, "Less", false)),
    (aten::LT_SCALAR, |cx| compare(cx, "Less", false)),
    (aten::LE_TENSOR, |cx| compare(cx, "LessOrEqual", false)),
    (aten::LE_SCALAR, |cx| compare(cx, "LessOrEqual", false)),
    (aten::GT_TENSOR, |cx| compare(cx, "Greater", false)),
    (aten::GT_SCALAR, |cx| compare(cx, "Greater", false)),
    (aten::GE_TENSOR, |cx| compare(cx, "GreaterOrEqual", false)),
    (aten::GE_SCALAR, |cx| compare(cx, "GreaterOrEqual", false)),
    (aten::LOGICAL_AND, |cx| logical(cx, "And")),
    (aten::LOGICAL_OR, |cx| logical(cx, "Or")),
    (aten::LOGICAL_XOR, |cx| logical(cx, "Xor")),
    (aten::BITWISE_AND_TENSOR, |cx| bitwise(cx, "And", "BitwiseAnd")),
    (aten::BITWISE_AND_SCALAR, |cx| bitwise(cx, "And", "BitwiseAnd")),
    (aten::BITWISE_OR_TENSOR, |cx| bitwise(cx, "Or", "BitwiseOr")),
    (aten::BITWISE_OR_SCALAR, |cx| bitwise(cx, "Or", "BitwiseOr")),
    (aten::BITWISE_XOR_TENSOR, |cx| bitwise(cx, "Xor", "BitwiseXor")),
    (aten::BITWISE_XOR_SCALAR, |cx| bitwise(cx, "Xor", "BitwiseXor")),
    (aten::__AND___TENSOR, |cx| bitwise(cx, "And", "BitwiseAnd")),
    (aten::__OR___TENSOR, |cx| bitwise(cx, "Or", "BitwiseOr")),
    (aten::__XOR___TENSOR, |cx| bitwise(cx, "Xor", "BitwiseXor")),
    (aten::WHERE_SELF, where_),
    (aten::WHERE_SCALAROTHER, where_),
    (aten::WHERE_SCALARSELF, where_),
    (aten::WHERE_SCALAR, where_),
    (aten::ADDCMUL, addcmul),
    (aten::ATAN2, atan2),
    (aten::DIFF, diff),
    (quantized_decomposed::QUANTIZE_PER_TENSOR, |cx| quantize(cx, false)),
    (quantized_decomposed::QUANTIZE_PER_TENSOR_TENSOR, |cx| quantize(cx, false)),
    (quantized_decomposed::QUANTIZE_PER_CHANNEL, |cx| quantize(cx, true)),
    (quantized_decomposed::DEQUANTIZE_PER_TENSOR, |cx| dequantize(cx, false)),
    (quantized_decomposed::DEQUANTIZE_PER_TENSOR_TENSOR, |cx| dequantize(cx, false)),
    (quantized_decomposed::DEQUANTIZE_PER_CHANNEL, |cx| dequantize(cx, true)),
];
