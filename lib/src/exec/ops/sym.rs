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

/// `_operator.*` and `torch.sym_*` on symbolic scalars, by Python's rules:
/// ints stay exact, a float operand (or true division) gives a float,
/// comparisons a bool.
fn py_operator(ctx: &mut Ctx) -> OpResult {
    #[derive(Clone, Copy)]
    enum N {
        I(i64),
        F(f64),
    }
    let num = |v: Value| match v {
        Value::Int(i) => Ok(N::I(i)),
        Value::Bool(b) => Ok(N::I(b as i64)),
        Value::Float(f) => Ok(N::F(f)),
        other => Err(unsupported(format!("symbolic operand {other:?}"))),
    };
    let a = num(ctx.input(0)?)?;
    let b = if ctx.node.inputs.len() > 1 {
        num(ctx.input(1)?)?
    } else {
        N::I(0)
    };
    let f = |n: N| match n {
        N::I(i) => i as f64,
        N::F(x) => x,
    };
    let int = |v: i64| Ok(vec![Value::Int(v)]);
    let float = |v: f64| Ok(vec![Value::Float(v)]);
    let boolean = |v: bool| Ok(vec![Value::Bool(v)]);
    let name = ctx.node.target.name.as_str();
    if let (N::I(a), N::I(b)) = (a, b) {
        match name {
            "add" => return int(a.wrapping_add(b)),
            "sub" => return int(a.wrapping_sub(b)),
            "mul" => return int(a.wrapping_mul(b)),
            "floordiv" if b != 0 && !(a == i64::MIN && b == -1) => {
                return int(a.div_euclid(b) - if a.rem_euclid(b) != 0 && b < 0 { 1 } else { 0 })
            }
            "mod" if b != 0 => {
                // Python's sign: the divisor's
                let r = a.wrapping_rem(b);
                return int(if r != 0 && (r < 0) != (b < 0) { r + b } else { r });
            }
            "pow" if b >= 0 => return int(a.wrapping_pow(b.min(u32::MAX as i64) as u32)),
            "neg" => return int(a.wrapping_neg()),
            "sym_max" => return int(a.max(b)),
            "sym_min" => return int(a.min(b)),
            "sym_int" | "trunc" | "floor" | "ceil" => return int(a),
            "eq" => return boolean(a == b),
            "ne" => return boolean(a != b),
            "lt" => return boolean(a < b),
            "le" => return boolean(a <= b),
            "gt" => return boolean(a > b),
            "ge" => return boolean(a >= b),
            "floordiv" | "mod" => {
                return Err(Error::bad_input(format!(
                    "symbolic {name} of {a} by {b} (node {}): a division by zero or an overflow",
                    ctx.node.name
                )))
            }
            _ => {}
        }
    }
    let (x, y) = (f(a), f(b));
    match name {
        "add" => float(x + y),
        "sub" => float(x - y),
        "mul" => float(x * y),
        "truediv" => float(x / y),
        "floordiv" => float((x / y).floor()),
        "mod" => float(x - y * (x / y).floor()),
        "pow" => float(x.powf(y)),
        "neg" => float(-x),
        "sym_max" => float(x.max(y)),
        "sym_min" => float(x.min(y)),
        "sym_float" => float(x),
        "sym_int" | "trunc" => int(x.trunc() as i64),
        "floor" => int(x.floor() as i64),
        "ceil" => int(x.ceil() as i64),
        "eq" => boolean(x == y),
        "ne" => boolean(x != y),
        "lt" => boolean(x < y),
        "le" => boolean(x <= y),
        "gt" => boolean(x > y),
        "ge" => boolean(x >= y),
        "and_" => boolean(x != 0.0 && y != 0.0),
        "or_" => boolean(x != 0.0 || y != 0.0),
        "not_" | "sym_not" => boolean(x == 0.0),
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
    ("_operator.truediv", py_operator),
    ("_operator.mod", py_operator),
    ("_operator.pow", py_operator),
    ("_operator.neg", py_operator),
    ("_operator.and_", py_operator),
    ("_operator.or_", py_operator),
    ("_operator.not_", py_operator),
    ("_operator.eq", py_operator),
    ("_operator.ne", py_operator),
    ("_operator.lt", py_operator),
    ("_operator.le", py_operator),
    ("_operator.gt", py_operator),
    ("_operator.ge", py_operator),
    ("torch.sym_max", py_operator),
    ("torch.sym_min", py_operator),
    ("torch.sym_not", py_operator),
    ("torch.sym_float", py_operator),
    ("torch.sym_int", py_operator),
    ("math.floor", py_operator),
    ("math.ceil", py_operator),
    ("math.trunc", py_operator),
];
