//! Tensor creation (full, zeros, arange, scalar_tensor, empty, ...): the ONNX emitters.

use crate::ir::op::aten;
use super::*;

pub(super) fn fill(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let out = cx.out_dtype(0)?;
    let value = if cx.has("value") {
        cx.operand("value")?
    } else {
        Operand::Lit(Lit::Int(0))
    };
    let shape = cx.shape(&x);
    let y = fill_shape(cx, &shape, &value, out)?;
    cx.set(0, y);
    Ok(())
}

/// A tensor of `dtype` of the given (1-D int64) shape, filled with `value`.
fn fill_shape(cx: &mut EmitNode, shape: &str, value: &Operand, dtype: Dtype) -> Result<String> {
    match value {
        Operand::Lit(l) => constant_of_shape(cx, shape, *l, dtype),
        other => {
            let v = cx.operand_as(other, dtype)?;
            Ok(cx.node("Expand", &[&v, shape], vec![]))
        }
    }
}

// creation

fn full(cx: &mut EmitNode) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let value = match cx.node.target.name.as_str() {
        "full" | "new_full" => cx.operand("fill_value")?,
        "ones" | "new_ones" => Operand::Lit(Lit::Int(1)),
        _ => Operand::Lit(Lit::Int(0)),
    };
    let shape = cx.int_list("size")?;
    let y = fill_shape(cx, &shape, &value, out)?;
    cx.set(0, y);
    Ok(())
}

fn full_like(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let out = cx.out_dtype(0)?;
    let value = match cx.node.target.name.as_str() {
        "full_like" => cx.operand("fill_value")?,
        "ones_like" => Operand::Lit(Lit::Int(1)),
        _ => Operand::Lit(Lit::Int(0)),
    };
    let shape = cx.shape(&x);
    let y = fill_shape(cx, &shape, &value, out)?;
    cx.set(0, y);
    Ok(())
}

fn scalar_tensor(cx: &mut EmitNode) -> Result<()> {
    let v = cx.operand("s")?;
    let out = cx.out_dtype(0)?;
    let y = cx.operand_as(&v, out)?;
    cx.set(0, y);
    Ok(())
}

fn arange(cx: &mut EmitNode) -> Result<()> {
    let out = cx.out_dtype(0)?;
    // ONNX Range takes float, double, int16, int32 and int64 only.
    let c = match cx.compute(out) {
        Dtype::Float16 | Dtype::BFloat16 => Dtype::Float32,
        Dtype::Uint8 | Dtype::Int8 | Dtype::Uint16 | Dtype::Uint32 | Dtype::Uint64 => Dtype::Int64,
        d => d,
    };
    let start = if cx.has("start") {
        cx.operand("start")?
    } else {
        Operand::Lit(Lit::Int(0))
    };
    let end = cx.operand("end")?;
    let step = if cx.has("step") {
        cx.operand("step")?
    } else {
        Operand::Lit(Lit::Int(1))
    };
    let s = cx.operand_as(&start, c)?;
    let e = cx.operand_as(&end, c)?;
    let d = cx.operand_as(&step, c)?;
    let y = cx.node("Range", &[&s, &e, &d], vec![]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// rand / randn: ONNX's random generators (not torch's stream).
fn random(cx: &mut EmitNode) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let shape = cx.int_list("size")?;
    let zeros = constant_of_shape(cx, &shape, Lit::Float(0.0), c)?;
    let op = if cx.node.target.name == "randn" {
        "RandomNormalLike"
    } else {
        "RandomUniformLike"
    };
    let y = cx.node(op, &[&zeros], vec![]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::FILL_SCALAR, fill),
    (aten::ZERO, fill),
    (aten::FULL, full),
    (aten::ZEROS, full),
    (aten::ONES, full),
    (aten::EMPTY_MEMORY_FORMAT, full),
    (aten::EMPTY_STRIDED, full),
    (aten::RAND, random),
    (aten::RANDN, random),
    (aten::NEW_FULL, full),
    (aten::NEW_ZEROS, full),
    (aten::NEW_ONES, full),
    (aten::NEW_EMPTY, full),
    (aten::FULL_LIKE, full_like),
    (aten::ZEROS_LIKE, full_like),
    (aten::ONES_LIKE, full_like),
    (aten::EMPTY_LIKE, full_like),
    (aten::SCALAR_TENSOR, scalar_tensor),
    (aten::ARANGE, arange),
    (aten::ARANGE_START, arange),
    (aten::ARANGE_START_STEP, arange),
];
