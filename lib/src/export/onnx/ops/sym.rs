//! Symbolic scalars: sym_size, Python operators on SymInts, asserts: the ONNX emitters.

use crate::ir::op::aten;
use super::*;

// symbolic scalars (rank-0 ONNX values: int64, double, bool)

fn sym_size(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let rank = cx.rank("self")?;
    let dim = normalize_dim(cx.int("dim")?, rank)? as i64;
    let shape = cx.shape(&x);
    let i = cx.const_i64(dim);
    let y = cx.node("Gather", &[&shape, &i], vec![attr_int("axis", 0)]);
    cx.set(0, y);
    Ok(())
}

fn sym_numel(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let y = cx.node("Size", &[&x], vec![]);
    cx.set(0, y);
    Ok(())
}

/// Strides and storage offsets have no ONNX meaning: only their recorded
/// constant values convert.
fn sym_constant(cx: &mut EmitNode) -> Result<()> {
    match cx.out_kind(0)? {
        ValueKind::SymInt(Sym::Int(k)) => {
            let y = cx.const_i64(*k);
            cx.set(0, y);
            Ok(())
        }
        _ => Err(Error::unsupported(
            "symbolic strides and storage offsets have no ONNX equivalent",
        )),
    }
}

fn item(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let out = cx.out_dtype(0)?;
    let s = cx.reshape_const(&x, &[])?;
    let y = cx.cast(&s, meta.dtype, out)?;
    cx.set(0, y);
    Ok(())
}

/// The positional operands of a Python function on symbolic scalars.
fn sym_operands(cx: &EmitNode) -> Result<Vec<Operand>> {
    cx.node
        .inputs
        .iter()
        .map(|a| cx.operand_of(&a.arg, &a.name))
        .collect()
}

fn sym_dtype(op: &Operand) -> Dtype {
    match op {
        Operand::Tensor { dtype, .. } | Operand::Sym { dtype, .. } => *dtype,
        Operand::Lit(Lit::Int(_)) => Dtype::Int64,
        Operand::Lit(Lit::Float(_)) => Dtype::Float64,
        Operand::Lit(Lit::Bool(_)) => Dtype::Bool,
    }
}

fn sym_binary(cx: &mut EmitNode, op: &str) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a, b] = ops.as_slice() else {
        return Err(Error::bad_input(format!("{op} takes two operands")));
    };
    let out = cx.out_dtype(0)?;
    // Compute in the output's type (truediv of ints gives a float).
    let c = match (op, out) {
        ("And" | "Or", _) => Dtype::Bool,
        (_, Dtype::Bool) => promote_sym(a, b),
        _ => out,
    };
    let x = cx.operand_as(a, c)?;
    let y = cx.operand_as(b, c)?;
    let r = cx.node(op, &[&x, &y], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

fn promote_sym(a: &Operand, b: &Operand) -> Dtype {
    match (sym_dtype(a), sym_dtype(b)) {
        (Dtype::Float64, _) | (_, Dtype::Float64) => Dtype::Float64,
        (Dtype::Bool, Dtype::Bool) => Dtype::Bool,
        _ => Dtype::Int64,
    }
}

fn sym_compare(cx: &mut EmitNode, op: &str, negate: bool) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a, b] = ops.as_slice() else {
        return Err(Error::bad_input(format!("{op} takes two operands")));
    };
    let c = match promote_sym(a, b) {
        Dtype::Bool if op != "Equal" => Dtype::Int64,
        d => d,
    };
    let x = cx.operand_as(a, c)?;
    let y = cx.operand_as(b, c)?;
    let mut r = cx.node(op, &[&x, &y], vec![]);
    if negate {
        r = cx.node("Not", &[&r], vec![]);
    }
    cx.set(0, r);
    Ok(())
}

/// Python floor division of integers (sizes may be negative in general).
fn sym_floordiv(cx: &mut EmitNode) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a, b] = ops.as_slice() else {
        return Err(Error::bad_input("floordiv takes two operands"));
    };
    let out = cx.out_dtype(0)?;
    if out.is_floating() {
        let x = cx.operand_as(a, out)?;
        let y = cx.operand_as(b, out)?;
        let q = cx.node("Div", &[&x, &y], vec![]);
        let r = cx.node("Floor", &[&q], vec![]);
        cx.set(0, r);
        return Ok(());
    }
    let x = cx.operand_as(a, Dtype::Int64)?;
    let y = cx.operand_as(b, Dtype::Int64)?;
    // (x - mod(x, y)) / y is exact and floors, with Python's mod.
    let m = cx.node("Mod", &[&x, &y], vec![attr_int("fmod", 0)]);
    let d = cx.node("Sub", &[&x, &m], vec![]);
    let r = cx.node("Div", &[&d, &y], vec![]);
    cx.set(0, r);
    Ok(())
}

fn sym_mod(cx: &mut EmitNode) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a, b] = ops.as_slice() else {
        return Err(Error::bad_input("mod takes two operands"));
    };
    let out = cx.out_dtype(0)?;
    let x = cx.operand_as(a, out)?;
    let y = cx.operand_as(b, out)?;
    let fmod = out.is_floating() as i64;
    let r = if out.is_floating() {
        let q = cx.node("Div", &[&x, &y], vec![]);
        let f = cx.node("Floor", &[&q], vec![]);
        let p = cx.node("Mul", &[&f, &y], vec![]);
        cx.node("Sub", &[&x, &p], vec![])
    } else {
        cx.node("Mod", &[&x, &y], vec![attr_int("fmod", fmod)])
    };
    cx.set(0, r);
    Ok(())
}

fn sym_unary(cx: &mut EmitNode, op: &str) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a] = ops.as_slice() else {
        return Err(Error::bad_input(format!("{op} takes one operand")));
    };
    let out = cx.out_dtype(0)?;
    let x = cx.operand_as(a, out)?;
    let r = cx.node(op, &[&x], vec![]);
    cx.set(0, r);
    Ok(())
}

fn sym_cast(cx: &mut EmitNode) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a] = ops.as_slice() else {
        return Err(Error::bad_input("a cast takes one operand"));
    };
    let out = cx.out_dtype(0)?;
    let from = sym_dtype(a);
    let x = cx.operand_as(a, from)?;
    // float -> int truncates, as Python's int() does.
    let x = if from.is_floating() && !out.is_floating() {
        let a = cx.node("Abs", &[&x], vec![]);
        let f = cx.node("Floor", &[&a], vec![]);
        let s = cx.node("Sign", &[&x], vec![]);
        cx.node("Mul", &[&s, &f], vec![])
    } else {
        x
    };
    let r = cx.cast(&x, from, out)?;
    cx.set(0, r);
    Ok(())
}

fn sym_round(cx: &mut EmitNode, op: &str) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a] = ops.as_slice() else {
        return Err(Error::bad_input(format!("{op} takes one operand")));
    };
    let out = cx.out_dtype(0)?;
    let from = sym_dtype(a);
    if !from.is_floating() {
        let r = cx.operand_as(a, out)?;
        cx.set(0, r);
        return Ok(());
    }
    let x = cx.operand_as(a, from)?;
    let r = cx.node(op, &[&x], vec![]);
    let r = cx.cast(&r, from, out)?;
    cx.set(0, r);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::SYM_SIZE_INT, sym_size),
    (aten::SYM_NUMEL, sym_numel),
    (aten::SYM_STORAGE_OFFSET, sym_constant),
    (aten::SYM_STRIDE_INT, sym_constant),
    (aten::_LOCAL_SCALAR_DENSE, item),
    (aten::ITEM, item),
    ("_operator.add", |cx| sym_binary(cx, "Add")),
    ("_operator.sub", |cx| sym_binary(cx, "Sub")),
    ("_operator.mul", |cx| sym_binary(cx, "Mul")),
    ("_operator.floordiv", sym_floordiv),
    ("_operator.truediv", |cx| sym_binary(cx, "Div")),
    ("_operator.mod", sym_mod),
    ("_operator.pow", |cx| sym_binary(cx, "Pow")),
    ("_operator.eq", |cx| sym_compare(cx, "Equal", false)),
    ("_operator.ne", |cx| sym_compare(cx, "Equal", true)),
    ("_operator.lt", |cx| sym_compare(cx, "Less", false)),
    ("_operator.le", |cx| sym_compare(cx, "LessOrEqual", false)),
    ("_operator.gt", |cx| sym_compare(cx, "Greater", false)),
    ("_operator.ge", |cx| sym_compare(cx, "GreaterOrEqual", false)),
    ("_operator.and_", |cx| sym_binary(cx, "And")),
    ("_operator.or_", |cx| sym_binary(cx, "Or")),
    ("_operator.neg", |cx| sym_unary(cx, "Neg")),
    ("_operator.not_", |cx| sym_unary(cx, "Not")),
    ("torch.sym_not", |cx| sym_unary(cx, "Not")),
    ("torch.sym_max", |cx| sym_binary(cx, "Max")),
    ("torch.sym_min", |cx| sym_binary(cx, "Min")),
    ("torch.sym_float", sym_cast),
    ("torch.sym_int", sym_cast),
    ("math.floor", |cx| sym_round(cx, "Floor")),
    ("math.ceil", |cx| sym_round(cx, "Ceil")),
    ("math.trunc", sym_cast),
];
