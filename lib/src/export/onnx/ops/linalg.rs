//! Linear algebra (mm, bmm, addmm, linear, matmul, distances, ...): the ONNX emitters.

use crate::ir::op::aten;
use super::*;

// linear algebra

fn matmul(cx: &mut EmitNode, a: &str, b: &str) -> Result<()> {
    let x = cx.operand(a)?;
    let y = cx.operand(b)?;
    binary_op(cx, "MatMul", &x, &y)
}

/// beta * self + alpha * (mat1 @ mat2), as Gemm where ONNX Runtime has it.
fn addmm(cx: &mut EmitNode) -> Result<()> {
    let bias = cx.operand("self")?;
    let m1 = cx.operand("mat1")?;
    let m2 = cx.operand("mat2")?;
    let beta = lit(cx, "beta")?.unwrap_or(Lit::Int(1)).as_f64();
    let alpha = lit(cx, "alpha")?.unwrap_or(Lit::Int(1)).as_f64();
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let (a, b) = (cx.operand_as(&m1, c)?, cx.operand_as(&m2, c)?);
    let r = if matches!(c, Dtype::Float32 | Dtype::Float64 | Dtype::Float16) {
        let mut attrs = Vec::new();
        if alpha != 1.0 {
            attrs.push(attr_float("alpha", alpha));
        }
        if beta != 1.0 {
            attrs.push(attr_float("beta", beta));
        }
        if beta == 0.0 {
            cx.node("Gemm", &[&a, &b], attrs)
        } else {
            let bias = cx.operand_as(&bias, c)?;
            cx.node("Gemm", &[&a, &b, &bias], attrs)
        }
    } else {
        scaled_matmul_add(cx, &a, &b, &bias, alpha, beta, c)?
    };
    let r = if c == Dtype::Float64 && beta != 0.0 {
        infinite_start(cx, &r, (&a, &b), &bias, (alpha, beta))?
    } else {
        r
    };
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// torch's float64 addmm starts from `beta * self` and adds each term
/// `a * (alpha * b)` fused (exact, then rounded): where the start is
/// infinite and every term's factors are finite, the result is the start,
/// even where a term alone overflows to the other infinity (which makes
/// ONNX's sum NaN).
fn infinite_start(
    cx: &mut EmitNode,
    r: &str,
    (a, b): (&str, &str),
    bias: &Operand,
    (alpha, beta): (f64, f64),
) -> Result<String> {
    let c = Dtype::Float64;
    let b = if alpha != 1.0 {
        let k = cx.scalar(Lit::Float(alpha), c)?;
        cx.node("Mul", &[b, &k], vec![])
    } else {
        b.to_string()
    };
    let mut s = cx.operand_as(bias, c)?;
    if beta != 1.0 {
        let k = cx.scalar(Lit::Float(beta), c)?;
        s = cx.node("Mul", &[&s, &k], vec![]);
    }
    // whether a row of a, or a column of b, holds a value that is not finite
    let bad = |cx: &mut EmitNode, v: &str, axis: i64| -> Result<String> {
        let inf = cx.node("IsInf", &[v], vec![]);
        let nan = cx.node("IsNaN", &[v], vec![]);
        let any = cx.node("Or", &[&inf, &nan], vec![]);
        let f = cx.cast(&any, Dtype::Bool, Dtype::Float32)?;
        Ok(cx.reduce("ReduceMax", &f, Some(&[axis]), true))
    };
    let rows = bad(cx, a, 1)?;
    let cols = bad(cx, &b, 0)?;
    let either = cx.node("Add", &[&rows, &cols], vec![]);
    let zero = cx.scalar(Lit::Float(0.0), Dtype::Float32)?;
    let finite_terms = cx.node("Equal", &[&either, &zero], vec![]);
    let s_inf = cx.node("IsInf", &[&s], vec![]);
    let keep = cx.node("And", &[&s_inf, &finite_terms], vec![]);
    Ok(cx.node("Where", &[&keep, &s, r], vec![]))
}

/// `beta * bias + alpha * (a @ b)` (addmm / baddbmm forms), in dtype `c`.
fn scaled_matmul_add(
    cx: &mut EmitNode,
    a: &str,
    b: &str,
    bias: &Operand,
    alpha: f64,
    beta: f64,
    c: Dtype,
) -> Result<String> {
    let mut p = cx.node("MatMul", &[a, b], vec![]);
    if alpha != 1.0 {
        let k = cx.scalar(Lit::Float(alpha), c)?;
        p = cx.node("Mul", &[&p, &k], vec![]);
    }
    if beta != 0.0 {
        let mut s = cx.operand_as(bias, c)?;
        if beta != 1.0 {
            let k = cx.scalar(Lit::Float(beta), c)?;
            s = cx.node("Mul", &[&s, &k], vec![]);
        }
        p = cx.node("Add", &[&p, &s], vec![]);
    }
    Ok(p)
}

fn baddbmm(cx: &mut EmitNode) -> Result<()> {
    let bias = cx.operand("self")?;
    let b1 = cx.operand("batch1")?;
    let b2 = cx.operand("batch2")?;
    let beta = lit(cx, "beta")?.unwrap_or(Lit::Int(1)).as_f64();
    let alpha = lit(cx, "alpha")?.unwrap_or(Lit::Int(1)).as_f64();
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let (a, b) = (cx.operand_as(&b1, c)?, cx.operand_as(&b2, c)?);
    let p = scaled_matmul_add(cx, &a, &b, &bias, alpha, beta, c)?;
    let r = cx.cast(&p, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// input @ weight.T + bias: Gemm for 2-D inputs, MatMul otherwise.
fn linear(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("input")?;
    let xd = cx.dtype("input")?;
    let w = cx.input("weight")?;
    let wd = cx.dtype("weight")?;
    let rank = cx.rank("input")?;
    let w_rank = cx.rank("weight")?;
    let bias = cx.opt_input("bias")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, xd, c)?;
    let ws = cx.cast(&w, wd, c)?;
    let bs = match &bias {
        Some(b) => {
            let bd = cx.dtype("bias")?;
            Some(cx.cast(b, bd, c)?)
        }
        None => None,
    };
    let r = if rank == 2
        && w_rank == 2
        && matches!(c, Dtype::Float32 | Dtype::Float64 | Dtype::Float16)
    {
        let attrs = vec![attr_int("transB", 1)];
        match &bs {
            Some(b) => cx.node("Gemm", &[&xs, &ws, b], attrs),
            None => cx.node("Gemm", &[&xs, &ws], attrs),
        }
    } else {
        let wt = if w_rank == 2 {
            cx.transpose(&ws, &[1, 0])
        } else {
            ws
        };
        let p = cx.node("MatMul", &[&xs, &wt], vec![]);
        match &bs {
            Some(b) => cx.node("Add", &[&p, b], vec![]),
            None => p,
        }
    };
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

// more linear algebra, sampling and normalization

fn einsum(cx: &mut EmitNode) -> Result<()> {
    let equation = cx.string("equation")?;
    let tensors = cx.tensors("tensors")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let mut inputs = Vec::new();
    for (name, meta) in tensors {
        inputs.push(cx.cast(&name, meta.dtype, c)?);
    }
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let y = cx.node("Einsum", &refs, vec![attr_str("equation", &equation)]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

fn vector_norm(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dims = reduce_dims(cx, Some("dim"), rank)?;
    let keepdim = cx.opt_bool("keepdim")?.unwrap_or(false);
    let ord = lit(cx, "ord")?.map_or(2.0, Lit::as_f64);
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        p_norm(cx, x, ord, dims.as_deref(), keepdim, c)
    })
}

/// The `ord`-norm of `x` (in dtype `c`) over `dims` (all when `None`), as
/// `linalg.vector_norm` defines it for every `ord`.
fn p_norm(
    cx: &mut EmitNode,
    x: &str,
    ord: f64,
    dims: Option<&[i64]>,
    keepdim: bool,
    c: Dtype,
) -> Result<String> {
    Ok(if ord == 2.0 {
        cx.reduce("ReduceL2", x, dims, keepdim)
    } else if ord == 1.0 {
        cx.reduce("ReduceL1", x, dims, keepdim)
    } else if ord.is_infinite() {
        let a = cx.node("Abs", &[x], vec![]);
        let op = if ord > 0.0 { "ReduceMax" } else { "ReduceMin" };
        cx.reduce(op, &a, dims, keepdim)
    } else if ord == 0.0 {
        let zero = cx.scalar(Lit::Int(0), c)?;
        let nz = cx.node("Equal", &[x, &zero], vec![]);
        let nz = cx.node("Not", &[&nz], vec![]);
        let f = cx.cast(&nz, Dtype::Bool, c)?;
        cx.reduce("ReduceSum", &f, dims, keepdim)
    } else {
        let a = cx.node("Abs", &[x], vec![]);
        let p = cx.scalar(Lit::Float(ord), c)?;
        let ap = cx.node("Pow", &[&a, &p], vec![]);
        let s = cx.reduce("ReduceSum", &ap, dims, keepdim);
        let inv = cx.scalar(Lit::Float(1.0 / ord), c)?;
        cx.node("Pow", &[&s, &inv], vec![])
    })
}

/// `_cdist_forward`: the p-norm distance between every row of x1 and every
/// row of x2 (`[.., P, M]` and `[.., R, M]` to `[.., P, R]`), reduced from
/// their broadcast difference `[.., P, R, M]`.
fn cdist(cx: &mut EmitNode) -> Result<()> {
    let p = cx.opt_float("p")?.unwrap_or(2.0);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let a = cx.input("x1")?;
    let a = cx.cast(&a, cx.dtype("x1")?, c)?;
    let b = cx.input("x2")?;
    let b = cx.cast(&b, cx.dtype("x2")?, c)?;
    let a = cx.unsqueeze(&a, &[-2]);
    let b = cx.unsqueeze(&b, &[-3]);
    let d = cx.node("Sub", &[&a, &b], vec![]);
    let y = p_norm(cx, &d, p, Some(&[-1]), false, c)?;
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// `_pdist_forward`: the p-norm distance of every pair i < j of the rows
/// of an `[N, M]` input with a static N, in torch's order (row-major over
/// the upper triangle).
fn pdist(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let n = match meta.sizes.first() {
        Some(Sym::Int(n)) => *n,
        _ => {
            return Err(Error::unsupported(
                "_pdist_forward over a symbolic number of rows",
            ))
        }
    };
    let p = cx.opt_float("p")?.unwrap_or(2.0);
    let (rows_i, rows_j): (Vec<i64>, Vec<i64>) =
        (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).unzip();
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let i = cx.const_i64s(&rows_i);
        let j = cx.const_i64s(&rows_j);
        let xi = cx.node("Gather", &[x, &i], vec![attr_int("axis", 0)]);
        let xj = cx.node("Gather", &[x, &j], vec![attr_int("axis", 0)]);
        let d = cx.node("Sub", &[&xi, &xj], vec![]);
        p_norm(cx, &d, p, Some(&[-1]), false, c)
    })
}

/// `pt2kit.dft` (torch's FFTs on complex values as real pairs,
/// `decompose::complex`): ONNX `DFT`, whose semantics it has; from opset
/// 20 the axis is an input. ONNX Runtime's DFT takes float and double.
fn dft(cx: &mut EmitNode) -> Result<()> {
    if cx.opset() < 17 {
        return Err(Error::unsupported(format!(
            "pt2kit.dft needs ONNX DFT, from opset 17 (this is {})",
            cx.opset()
        )));
    }
    let dtype = cx.dtype("self")?;
    let c = match cx.compute(dtype) {
        Dtype::Float64 => Dtype::Float64,
        _ => Dtype::Float32,
    };
    let x = cx.input_as("self", c)?;
    let mut attrs = vec![
        attr_int("inverse", i64::from(cx.bool("inverse")?)),
        attr_int("onesided", i64::from(cx.opt_bool("onesided")?.unwrap_or(false))),
    ];
    let axis = cx.int("axis")?;
    let y = if cx.opset() >= 20 {
        let a = cx.const_i64(axis);
        cx.node("DFT", &[&x, "", &a], attrs)
    } else {
        attrs.push(attr_int("axis", axis));
        cx.node("DFT", &[&x], attrs)
    };
    let out = cx.out_dtype(0)?;
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// `transformers.grouped_mm_fallback(input [S, K], weight [E, K, N], offs
/// [E])` and `aten._grouped_mm(self, mat2, offs)` (2-D x 3-D), exactly:
/// every expert's product of every row (`MatMul` of [1, S, K] and
/// [E, K, N], [E, S, N]), each kept where its row lies in
/// `[offs[i-1], offs[i])` (`GreaterOrEqual`/`Less` of a row `Range`
/// against the offsets), 0 elsewhere (`Where`), summed over the experts:
/// one product and exact zeros per row, so rows past the last offset are 0.
/// The offsets are not checked here as `ir-run` checks them.
fn grouped_mm(cx: &mut EmitNode) -> Result<()> {
    let aten = cx.has("mat2");
    let (xa, wa) = if aten { ("self", "mat2") } else { ("input", "weight") };
    if aten && cx.has("bias") {
        return Err(Error::unsupported("_grouped_mm with a bias"));
    }
    if !cx.has("offs") {
        return Err(Error::unsupported(
            "_grouped_mm without offs (only the grouped 2-D x 3-D product)",
        ));
    }
    let (xm, wm) = (cx.meta(xa)?, cx.meta(wa)?);
    if xm.sizes.len() != 2 || wm.sizes.len() != 3 {
        return Err(Error::unsupported(format!(
            "{xa} of rank {} and {wa} of rank {}: only the 2-D x 3-D grouped product",
            xm.sizes.len(),
            wm.sizes.len()
        )));
    }
    let s = xm.sizes[0].clone();
    let out = cx.out_dtype(0)?;
    let c = cx.compute(xm.dtype);
    let x = cx.input_as(xa, c)?;
    let w = cx.input_as(wa, c)?;
    let x = cx.unsqueeze(&x, &[0]);
    let prod = cx.node("MatMul", &[&x, &w], vec![]);
    // the rows of each expert: [start_i, end_i) with start_0 = 0
    let ends = cx.input_as("offs", Dtype::Int64)?;
    let (zero, last, axis0) = (cx.const_i64s(&[0]), cx.const_i64s(&[-1]), cx.const_i64s(&[0]));
    let before = cx.node("Slice", &[&ends, &zero, &last, &axis0], vec![]);
    let starts = cx.concat(&[zero.clone(), before], 0);
    let n_rows = cx.sym_size(&s)?;
    let (r0, r1) = (cx.const_i64(0), cx.const_i64(1));
    let rows = cx.node("Range", &[&r0, &n_rows, &r1], vec![]);
    let rows = cx.unsqueeze(&rows, &[0]);
    let starts = cx.unsqueeze(&starts, &[1]);
    let ends = cx.unsqueeze(&ends, &[1]);
    let from = cx.node("GreaterOrEqual", &[&rows, &starts], vec![]);
    let to = cx.node("Less", &[&rows, &ends], vec![]);
    let mask = cx.node("And", &[&from, &to], vec![]);
    let mask = cx.unsqueeze(&mask, &[2]);
    let z = cx.scalar(Lit::Int(0), c)?;
    let kept = cx.node("Where", &[&mask, &prod, &z], vec![]);
    let y = cx.reduce("ReduceSum", &kept, Some(&[0]), false);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::MM, |cx| matmul(cx, "self", "mat2")),
    (aten::BMM, |cx| matmul(cx, "self", "mat2")),
    (aten::MATMUL, |cx| matmul(cx, "self", "other")),
    (aten::ADDMM, addmm),
    (aten::BADDBMM, baddbmm),
    (aten::LINEAR, linear),
    (aten::EINSUM, einsum),
    (aten::LINALG_VECTOR_NORM, vector_norm),
    (aten::_CDIST_FORWARD, cdist),
    (aten::_PDIST_FORWARD, pdist),
    ("pt2kit.dft.default", dft),
    ("transformers.grouped_mm_fallback.default", grouped_mm),
    (aten::_GROUPED_MM, grouped_mm),
];
