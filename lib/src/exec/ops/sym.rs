//! Symbolic scalars: sym_size, Python operators on SymInts, asserts: the executor rows.

use crate::ir::op::aten;
use super::*;

fn sym_size(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let d = normalize_dim(ctx.int("dim")?, x.rank())?;
    Ok(vec![Value::Int(x.dims()[d] as i64)])
}

fn sym_numel(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    Ok(vec![Value::Int(x.t.elem_count() as i64)])
}

/// `_operator.*` on symbolic integers.
fn py_operator(ctx: &mut Ctx) -> OpResult {
    let num = |v: Value| match v {
        Value::Int(i) => Ok(i),
        Value::Bool(b) => Ok(b as i64),
        other => Err(unsupported(format!("symbolic operand {other:?}"))),
    };
    let a = num(ctx.input(0)?)?;
    let b = if ctx.node.inputs.len() > 1 {
        num(ctx.input(1)?)?
    } else {
        0
    };
    let int = |v: i64| Ok(vec![Value::Int(v)]);
    let boolean = |v: bool| Ok(vec![Value::Bool(v)]);
    match ctx.node.target.name.as_str() {
        "add" => int(a + b),
        "sub" => int(a - b),
        "mul" => int(a * b),
        "floordiv" if b != 0 => {
            int(a.div_euclid(b) - if a.rem_euclid(b) != 0 && b < 0 { 1 } else { 0 })
        }
        "mod" if b != 0 => int(a.rem_euclid(b)),
        "neg" => int(-a),
        "eq" => boolean(a == b),
        "ne" => boolean(a != b),
        "lt" => boolean(a < b),
        "le" => boolean(a <= b),
        "gt" => boolean(a > b),
        "ge" => boolean(a >= b),
        "sym_max" => int(a.max(b)),
        "sym_min" => int(a.min(b)),
        other => Err(unsupported(format!("symbolic function {other}"))),
    }
}

/// `item()`: the one element of a tensor (torch refuses any other count).
fn local_scalar(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let host = x.to_host()?;
    if host.numel() != 1 {
        return Err(Error::bad_input(format!(
            "a tensor with {} elements cannot be converted to a scalar (item() of shape {:?})",
            host.numel(),
            host.shape
        )));
    }
    Ok(vec![match x.dtype {
        d if d.is_floating() => Value::Float(host.to_f64()[0]),
        Dtype::Bool => Value::Bool(host.data[0] != 0),
        // int64 exactly (through f64 it would round past 2^53)
        Dtype::Int64 => match host.data.get(..8).and_then(|b| b.try_into().ok()) {
            Some(b) => Value::Int(i64::from_le_bytes(b)),
            None => return Err(Error::internal("item(): an int64 element of other than 8 bytes")),
        },
        _ => Value::Int(host.to_f64()[0] as i64),
    }])
}

fn sym_stride(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let d = normalize_dim(ctx.int("dim")?, x.rank())?;
    Ok(vec![Value::Int(
        crate::ir::contiguous_strides(&x.dims().iter().map(|&v| v as i64).collect::<Vec<_>>())[d],
    )])
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::SYM_SIZE_INT, sym_size),
    (aten::SYM_NUMEL, sym_numel),
    (aten::_LOCAL_SCALAR_DENSE, local_scalar),
    (aten::ITEM, local_scalar),
    (aten::SYM_STRIDE_INT, sym_stride),
    ("_operator.add", py_operator),
    ("_operator.sub", py_operator),
    ("_operator.mul", py_operator),
    ("_operator.floordiv", py_operator),
    ("_operator.mod", py_operator),
    ("_operator.neg", py_operator),
    ("_operator.eq", py_operator),
    ("_operator.ne", py_operator),
    ("_operator.lt", py_operator),
    ("_operator.le", py_operator),
    ("_operator.gt", py_operator),
    ("_operator.ge", py_operator),
    ("torch.sym_max", py_operator),
    ("torch.sym_min", py_operator),
];
