//! The ONNX messages emitters build from: attributes, literal scalars and
//! their bytes, elementwise operands and their promotion, value types.

use onnx_protobuf::{
    attribute_proto::AttributeType,
    tensor_shape_proto::{dimension, Dimension},
    type_proto, AttributeProto, GraphProto, TensorProto, TensorShapeProto, TypeProto,
};
use protobuf::{EnumOrUnknown, MessageField};

use crate::error::{Error, Result};
use crate::ir::{Dtype, Sym, ValueKind};
use crate::promote::{result_type, Rank};

pub(crate) fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::INT),
        i: v,
        ..Default::default()
    }
}

pub(crate) fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::INTS),
        ints: v.to_vec(),
        ..Default::default()
    }
}

pub(crate) fn attr_float(name: &str, v: f64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::FLOAT),
        f: v as f32,
        ..Default::default()
    }
}

pub(crate) fn attr_floats(name: &str, v: &[f64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::FLOATS),
        floats: v.iter().map(|x| *x as f32).collect(),
        ..Default::default()
    }
}

pub(crate) fn attr_str(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::STRING),
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

pub(crate) fn attr_strs(name: &str, v: &[String]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::STRINGS),
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..Default::default()
    }
}

pub(crate) fn attr_tensor(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::TENSOR),
        t: MessageField::some(t),
        ..Default::default()
    }
}

pub(crate) fn attr_graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::GRAPH),
        g: MessageField::some(g),
        ..Default::default()
    }
}

/// A literal scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Lit {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Lit {
    pub fn as_f64(self) -> f64 {
        match self {
            Lit::Int(v) => v as f64,
            Lit::Float(v) => v,
            Lit::Bool(b) => b as i64 as f64,
        }
    }
    pub fn as_i64(self) -> i64 {
        match self {
            Lit::Int(v) => v,
            Lit::Float(v) => v as i64,
            Lit::Bool(b) => b as i64,
        }
    }
}

/// An operand of an elementwise op: a tensor, a symbolic scalar (a rank-0
/// ONNX value), or a literal; each promotes as torch says.
#[derive(Clone, Debug)]
pub(crate) enum Operand {
    Tensor {
        name: String,
        dtype: Dtype,
        rank0: bool,
    },
    Sym {
        name: String,
        dtype: Dtype,
    },
    Lit(Lit),
}

/// The dtype torch computes an elementwise op of these operands in
/// ([`crate::promote::result_type`]).
pub(crate) fn promote(ops: &[&Operand]) -> Dtype {
    let operands: Vec<(Dtype, Rank)> = ops
        .iter()
        .map(|op| match op {
            Operand::Tensor {
                dtype,
                rank0: false,
                ..
            } => (*dtype, Rank::Dim),
            Operand::Tensor {
                dtype, rank0: true, ..
            } => (*dtype, Rank::ZeroDim),
            Operand::Sym { dtype, .. } => (*dtype, Rank::Scalar),
            Operand::Lit(Lit::Int(_)) => (Dtype::Int64, Rank::Scalar),
            Operand::Lit(Lit::Float(_)) => (Dtype::Float32, Rank::Scalar),
            Operand::Lit(Lit::Bool(_)) => (Dtype::Bool, Rank::Scalar),
        })
        .collect();
    result_type(&operands)
}

fn f32_to_f16(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let mant = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut r = m >> shift;
        if rest > half || (rest == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

fn f32_to_bf16(v: f32) -> u16 {
    let x = v.to_bits();
    if v.is_nan() {
        return ((x >> 16) | 0x40) as u16;
    }
    let round = 0x7fff + ((x >> 16) & 1);
    (x.wrapping_add(round) >> 16) as u16
}

/// The little-endian bytes of a literal as `dtype`.
pub(crate) fn lit_bytes(v: Lit, dtype: Dtype) -> Result<Vec<u8>> {
    let f = v.as_f64();
    Ok(match dtype {
        Dtype::Bool => vec![(f != 0.0) as u8],
        Dtype::Uint8 => vec![v.as_i64() as u8],
        Dtype::Int8 => vec![v.as_i64() as i8 as u8],
        Dtype::Int16 => (v.as_i64() as i16).to_le_bytes().to_vec(),
        Dtype::Uint16 => (v.as_i64() as u16).to_le_bytes().to_vec(),
        Dtype::Int32 => (v.as_i64() as i32).to_le_bytes().to_vec(),
        Dtype::Uint32 => (v.as_i64() as u32).to_le_bytes().to_vec(),
        Dtype::Int64 => v.as_i64().to_le_bytes().to_vec(),
        Dtype::Uint64 => (v.as_i64() as u64).to_le_bytes().to_vec(),
        Dtype::Float16 => f32_to_f16(f as f32).to_le_bytes().to_vec(),
        Dtype::BFloat16 => f32_to_bf16(f as f32).to_le_bytes().to_vec(),
        Dtype::Float32 => (f as f32).to_le_bytes().to_vec(),
        Dtype::Float64 => f.to_le_bytes().to_vec(),
        other => {
            return Err(Error::unsupported(format!(
                "cannot write a {} constant",
                other.torch_name()
            )))
        }
    })
}

/// ONNX type of an IR value.
pub(crate) fn value_type(kind: &ValueKind, opset: i64) -> Result<TypeProto> {
    let (dtype, dims): (Dtype, Vec<Dimension>) = match kind {
        ValueKind::Tensor(meta) => (
            meta.dtype,
            meta.sizes
                .iter()
                .map(|s| Dimension {
                    value: Some(match s {
                        Sym::Int(v) => dimension::Value::DimValue(*v),
                        Sym::Expr { expr, .. } => dimension::Value::DimParam(expr.to_string()),
                        other => dimension::Value::DimParam(format!("{other:?}")),
                    }),
                    ..Default::default()
                })
                .collect(),
        ),
        ValueKind::SymInt(_) => (Dtype::Int64, vec![]),
        ValueKind::SymFloat(_) => (Dtype::Float64, vec![]),
        ValueKind::SymBool(_) => (Dtype::Bool, vec![]),
        ValueKind::CustomObj(c) => {
            return Err(Error::unsupported(format!(
                "script object {c} has no ONNX type"
            )))
        }
        ValueKind::Token => return Err(Error::unsupported("effect tokens have no ONNX type")),
    };
    let elem = crate::export::onnx::onnx_dtype(dtype, opset)?;
    Ok(TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: elem as i32,
            shape: MessageField::some(TensorShapeProto {
                dim: dims,
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    })
}
