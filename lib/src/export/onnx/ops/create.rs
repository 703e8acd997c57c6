//! Tensor creation (full, zeros, arange, scalar_tensor, empty, ...): the ONNX emitters.

use super::*;

pub(super) fn fill(cx: &mut Cx) -> Result<()> {
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
fn fill_shape(cx: &mut Cx, shape: &str, value: &Operand, dtype: Dtype) -> Result<String> {
    match value {
        Operand::Lit(l) => constant_of_shape(cx, shape, *l, dtype),
        other => {
            let v = cx.operand_as(other, dtype)?;
            Ok(cx.node("Expand", &[&v, shape], vec![]))
        }
    }
}

// creation

fn full(cx: &mut Cx) -> Result<()> {
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

fn full_like(cx: &mut Cx) -> Result<()> {
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

fn scalar_tensor(cx: &mut Cx) -> Result<()> {
    let v = cx.operand("s")?;
    let out = cx.out_dtype(0)?;
    let y = cx.operand_as(&v, out)?;
    cx.set(0, y);
    Ok(())
}

fn arange(cx: &mut Cx) -> Result<()> {
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
fn random(cx: &mut Cx) -> Result<()> {
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
    ("aten.fill.Scalar", fill),
    ("aten.zero.default", fill),
    ("aten.full.default", full),
    ("aten.zeros.default", full),
    ("aten.ones.default", full),
    ("aten.empty.memory_format", full),
    ("aten.empty_strided.default", full),
    ("aten.rand.default", random),
    ("aten.randn.default", random),
    ("aten.new_full.default", full),
    ("aten.new_zeros.default", full),
    ("aten.new_ones.default", full),
    ("aten.new_empty.default", full),
    ("aten.full_like.default", full_like),
    ("aten.zeros_like.default", full_like),
    ("aten.ones_like.default", full_like),
    ("aten.empty_like.default", full_like),
    ("aten.scalar_tensor.default", scalar_tensor),
    ("aten.arange.default", arange),
    ("aten.arange.start", arange),
    ("aten.arange.start_step", arange),
];
