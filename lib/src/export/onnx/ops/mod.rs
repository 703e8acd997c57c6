//! The op table: every IR op identity that converts to ONNX, and its
//! emitter. Adding an op is one row at the end of its family's file
//! (`pointwise.rs`, `conv.rs`, ...; the families of
//! `lib/data/op_families.txt`), and, when no existing emitter fits, one
//! function there. [`FAMILIES`] joins the families; this file holds the
//! helpers they share.
//!
//! In-place ops (`add_`, `copy_`, ...) need no rows: their functional
//! form's emitter runs and later readers of the mutated value see the
//! result. Emitters read arguments by their schema names (the importer
//! filled in every default), compute low-precision math as
//! `cx.compute` says, and honour the opset (`cx.opset()`).

use super::builder::{
    attr_float, attr_graph, attr_int, attr_ints, attr_str, lit_bytes, promote, Emit, EmitNode, Lit,
    Operand,
};
use crate::error::{Error, Result};
use crate::ir::op::{aten, quantized_decomposed};
use crate::ir::{
    normalize_dim, Argument, Dtype, Graph, Sym, SymRef, Target, TargetKind, TensorMeta, ValueKind,
};
use std::collections::HashMap;
use std::sync::OnceLock;

op_families!(&[(&str, Emit)]);
use self::alias::copy_of;

/// The emitter for an op, and whether the op writes its first argument in place.
pub(crate) fn lookup(target: &Target) -> Option<(Emit, bool)> {
    static MAP: OnceLock<HashMap<&'static str, Emit>> = OnceLock::new();
    let map = MAP.get_or_init(|| rows().map(|(_, op, e)| (op, e)).collect());
    let key = target.to_string();
    if let Some(e) = map.get(key.as_str()) {
        return Some((*e, false));
    }
    let name = &target.name;
    if target.kind == TargetKind::Op && name.ends_with('_') && !name.ends_with("__") {
        let functional = format!(
            "{}.{}.{}",
            target.namespace,
            &name[..name.len() - 1],
            target.overload
        );
        if let Some(e) = map.get(functional.as_str()) {
            return Some((*e, true));
        }
    }
    None
}

/// Arguments an emitter does not handle, as data: such a node is lowered
/// through the decomposition table instead (`decompose::fallback`), as
/// the executor's `DECLINES` are.
pub(crate) const DECLINES: crate::decompose::fallback::Declines = &[
    // ONNX's MaxPool has no indices for adaptive windows of unequal
    // sizes; the rule computes both.
    (aten::ADAPTIVE_MAX_POOL1D, |n, reads| reads.output(n, 1)),
    (aten::ADAPTIVE_MAX_POOL2D, |n, reads| reads.output(n, 1)),
    (aten::ADAPTIVE_MAX_POOL3D, |n, reads| reads.output(n, 1)),
    // ONNX's Pad wraps only from opset 19; the rule's slices and cat
    // work at every opset.
    (
        aten::PAD,
        |n, _| matches!(n.arg("mode"), Some(Argument::String(m)) if m == "circular"),
    ),
    // ONNX's LSTM has no projection (proj_size): one more weight per
    // layer and direction than the plain layout; the rule unrolls it.
    (aten::LSTM_INPUT, |n, _| rnn::lstm_unplain(n)),
    // QuantizeLinear/DequantizeLinear take int8 and uint8 here, a zero
    // point in the dtype's range, float32 out of a per-tensor dequantize.
    (quantized_decomposed::QUANTIZE_PER_TENSOR, |n, _| {
        pointwise::qdq_declines(n)
    }),
    (quantized_decomposed::QUANTIZE_PER_TENSOR_TENSOR, |n, _| {
        pointwise::qdq_declines(n)
    }),
    (quantized_decomposed::QUANTIZE_PER_CHANNEL, |n, _| {
        pointwise::qdq_declines(n)
    }),
    (quantized_decomposed::DEQUANTIZE_PER_TENSOR, |n, _| {
        pointwise::qdq_declines(n)
    }),
    (
        quantized_decomposed::DEQUANTIZE_PER_TENSOR_TENSOR,
        |n, _| pointwise::qdq_declines(n),
    ),
    (quantized_decomposed::DEQUANTIZE_PER_CHANNEL, |n, _| {
        pointwise::qdq_declines(n)
    }),
];

/// Every row with its family: (family, op identity, emitter).
pub fn rows() -> impl Iterator<Item = (&'static str, &'static str, Emit)> {
    FAMILIES
        .iter()
        .flat_map(|(family, rows)| rows.iter().map(move |(op, e)| (*family, *op, *e)))
}

/// Every op identity the table converts (for docs and tests).
pub fn supported_ops() -> Vec<&'static str> {
    let mut v: Vec<&str> = rows().map(|(_, op, _)| op).collect();
    v.sort_unstable();
    v
}

/// The first argument as a tensor: its ONNX name and metadata.
fn first<'p>(cx: &EmitNode<'_, 'p>) -> Result<(String, &'p TensorMeta)> {
    let name = cx
        .node
        .inputs
        .first()
        .map(|a| a.name.clone())
        .ok_or_else(|| Error::bad_input("no arguments"))?;
    Ok((cx.input(&name)?, cx.meta(&name)?))
}

/// A literal scalar argument (`Scalar alpha=1`).
fn lit(cx: &EmitNode, name: &str) -> Result<Option<Lit>> {
    match cx.operand(name) {
        Ok(Operand::Lit(l)) => Ok(Some(l)),
        Ok(_) => Err(Error::unsupported(format!(
            "argument '{name}' must be a constant"
        ))),
        Err(_) if !cx.has(name) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Applies an elementwise op to `x` (of `from`) giving the output dtype:
/// computes in `cx.compute(out)` and casts back.
fn elementwise(
    cx: &mut EmitNode,
    x: &str,
    from: Dtype,
    f: impl FnOnce(&mut EmitNode, &str, Dtype) -> Result<String>,
) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xc = cx.cast(x, from, c)?;
    let y = f(cx, &xc, c)?;
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// A binary op computed in the dtype `cx.compute` gives for the output:
/// both operands cast to it, `f` builds the result, which is cast back.
fn binary_in(
    cx: &mut EmitNode,
    a: &str,
    b: &str,
    f: impl FnOnce(&mut EmitNode, &str, &str, Dtype) -> Result<String>,
) -> Result<()> {
    let (x, y) = (cx.operand(a)?, cx.operand(b)?);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.operand_as(&x, c)?;
    let ys = cx.operand_as(&y, c)?;
    let r = f(cx, &xs, &ys, c)?;
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

fn constant_of_shape(cx: &mut EmitNode, shape: &str, value: Lit, dtype: Dtype) -> Result<String> {
    // ConstantOfShape takes bfloat16 (and the float8 types) from opset 20:
    // before, the value is made in float32 and cast.
    if dtype == Dtype::BFloat16 && cx.opset() < 20 {
        let f = constant_of_shape(cx, shape, value, Dtype::Float32)?;
        return cx.cast(&f, Dtype::Float32, dtype);
    }
    let onnx = super::onnx_dtype(dtype, cx.opset())?;
    let raw = lit_bytes(value, dtype)?;
    let t = super::tensor_proto("", onnx, &[1], raw);
    Ok(cx.node(
        "ConstantOfShape",
        &[shape],
        vec![super::builder::attr_tensor("value", t)],
    ))
}

// unary

fn unary(cx: &mut EmitNode, op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| Ok(cx.node(op, &[x], vec![])))
}

/// The values an integer dtype holds, as f64 (`None` for other dtypes).
fn int_range(d: Dtype) -> Option<(f64, f64)> {
    Some(match d {
        Dtype::Uint8 => (0.0, 255.0),
        Dtype::Int8 => (-128.0, 127.0),
        Dtype::Int16 => (-32768.0, 32767.0),
        Dtype::Uint16 => (0.0, 65535.0),
        Dtype::Int32 => (i32::MIN as f64, i32::MAX as f64),
        Dtype::Uint32 => (0.0, u32::MAX as f64),
        Dtype::Int64 => (i64::MIN as f64, i64::MAX as f64),
        Dtype::Uint64 => (0.0, u64::MAX as f64),
        _ => return None,
    })
}

/// Clip with constant bounds (hardtanh, relu6, clamp with scalars).
fn clip(cx: &mut EmitNode, min: Option<Operand>, max: Option<Operand>) -> Result<()> {
    let (x, meta) = first(cx)?;
    // a literal bound an integer dtype cannot hold clips nothing on its
    // side (torch compares values: hardtanh of uint8 at -1 keeps 0); one
    // past the far end would clip everything to a value the dtype lacks
    let (min, max) = match int_range(cx.compute(cx.out_dtype(0)?)) {
        Some((lo, hi)) => {
            let side = |b: Option<Operand>, low: bool| -> Result<Option<Operand>> {
                match b {
                    Some(Operand::Lit(l)) => {
                        let v = l.as_f64();
                        if (low && v <= lo) || (!low && v >= hi) {
                            Ok(None)
                        } else if v < lo || v > hi {
                            Err(Error::unsupported(format!(
                                "a {} bound of {v} outside the values of {}",
                                if low { "lower" } else { "upper" },
                                meta.dtype.torch_name()
                            )))
                        } else {
                            Ok(Some(Operand::Lit(l)))
                        }
                    }
                    other => Ok(other),
                }
            };
            (side(min, true)?, side(max, false)?)
        }
        None => (min, max),
    };
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        // a missing float bound is an infinity, not Clip's default (the
        // dtype's largest finite value, which an infinity would become)
        let lo = match &min {
            Some(m) => cx.operand_as(m, c)?,
            None if c.is_floating() => cx.scalar(Lit::Float(f64::NEG_INFINITY), c)?,
            None => String::new(),
        };
        let hi = match &max {
            Some(m) => cx.operand_as(m, c)?,
            None if c.is_floating() => cx.scalar(Lit::Float(f64::INFINITY), c)?,
            None => String::new(),
        };
        if hi.is_empty() {
            Ok(cx.node("Clip", &[x, &lo], vec![]))
        } else {
            Ok(cx.node("Clip", &[x, &lo, &hi], vec![]))
        }
    })
}

fn binary_op(cx: &mut EmitNode, op: &str, x: &Operand, y: &Operand) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    // Bool arithmetic is logic in torch.
    let op = match (c, op) {
        (Dtype::Bool, "Add") | (Dtype::Bool, "Max") => "Or",
        (Dtype::Bool, "Mul") | (Dtype::Bool, "Min") => "And",
        _ => op,
    };
    let xs = cx.operand_as(x, c)?;
    let ys = cx.operand_as(y, c)?;
    let r = cx.node(op, &[&xs, &ys], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

fn where_op(cx: &mut EmitNode, cond: &Operand, x: &Operand, y: &Operand) -> Result<()> {
    let out = cx.out_dtype(0)?;
    // ONNX Runtime has no Where kernel for bool values: chosen as uint8
    let c = match cx.compute(out) {
        Dtype::Bool => Dtype::Uint8,
        c => c,
    };
    let cs = cx.operand_as(cond, Dtype::Bool)?;
    let xs = cx.operand_as(x, c)?;
    let ys = cx.operand_as(y, c)?;
    let r = cx.node("Where", &[&cs, &xs, &ys], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// A per-spatial-dim list argument, repeating a single value.
fn spatial(cx: &EmitNode, name: &str, n: usize, default: i64) -> Result<Vec<i64>> {
    let v = cx.opt_ints(name)?.unwrap_or_default();
    Ok(match v.len() {
        0 => vec![default; n],
        1 => vec![v[0]; n],
        _ => v,
    })
}

/// Adds a batch dim to an unbatched input (torch allows them), returning
/// whether it did.
fn batch(cx: &mut EmitNode, x: &str, rank: usize, spatial_dims: usize) -> (String, bool) {
    if rank == spatial_dims + 1 {
        (cx.unsqueeze(x, &[0]), true)
    } else {
        (x.to_string(), false)
    }
}

fn unbatch(cx: &mut EmitNode, y: String, added: bool) -> String {
    if added {
        cx.squeeze(&y, &[0])
    } else {
        y
    }
}

/// Static sizes of the last `n` dims of a value, or a refusal naming what
/// needs them.
fn last_static(sizes: &[Sym], n: usize, what: &str) -> Result<Vec<i64>> {
    let dims = sizes
        .len()
        .checked_sub(n)
        .map(|k| &sizes[k..])
        .ok_or_else(|| Error::bad_input(format!("{what}: fewer than {n} dims")))?;
    dims.iter()
        .map(Sym::as_int)
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| Error::unsupported(format!("{what} over symbolic spatial sizes")))
}

// reductions

/// The reduced dims of a `dim` argument (`None`: all).
fn reduce_dims(cx: &EmitNode, dim_arg: Option<&str>, rank: usize) -> Result<Option<Vec<i64>>> {
    let Some(name) = dim_arg else { return Ok(None) };
    let dims = cx.opt_ints(name)?;
    let Some(dims) = dims.filter(|d| !d.is_empty()) else {
        return Ok(None);
    };
    if rank == 0 {
        return Ok(Some(Vec::new()));
    }
    let dims = dims
        .iter()
        .map(|x| Ok(normalize_dim(*x, rank)? as i64))
        .collect::<Result<_>>()?;
    Ok(Some(dims))
}

/// A 1-element int64 value for an optional symbolic int argument.
fn sym_arg(cx: &mut EmitNode, name: &str, default: i64) -> Result<String> {
    let r = match cx.node.arg(name) {
        None | Some(Argument::None) => SymRef::Int(default),
        Some(Argument::Int(v)) => SymRef::Int(*v),
        Some(Argument::SymInt(r)) => *r,
        Some(other) => return Err(Error::bad_input(format!("argument '{name}': {other:?}"))),
    };
    match r {
        SymRef::Int(v) => Ok(cx.const_i64s(&[v])),
        other => {
            let s = cx.sym_int(&other)?;
            cx.reshape_const(&s, &[1])
        }
    }
}
