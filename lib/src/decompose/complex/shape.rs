//! Ops that move, pick or reduce complex elements, on the real pairs: the
//! same op with its dims normalised against the complex rank (so a
//! negative dim never lands on the pair dim), size lists given the pair
//! dim, and complex tensors made of parts where torch creates them.

use super::{pair_meta, scalar_parts, ComplexNode, Handler};
use crate::decompose::args::{node_outputs, NodeArgs};
use crate::ir::op::aten;
use crate::ir::{normalize_dim, Argument, Sym, SymRef, ValueId};
use crate::{Error, Result};

fn ints(v: &[usize]) -> Argument {
    Argument::Ints(v.iter().map(|&d| d as i64).collect())
}

/// A size list with the pair dim's size appended.
fn with_pair(a: &NodeArgs, name: &str, last: i64) -> Result<Argument> {
    let mut v = a.syms(name)?;
    v.push(SymRef::Int(last));
    Ok(Argument::SymInts(v))
}

/// The node again on the pair of `self`, with these arguments replaced
/// and every output given its pair meta.
fn on_pair(
    cx: &mut ComplexNode,
    a: &NodeArgs,
    args: Vec<(&str, Argument)>,
) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.tensor("self")?)?;
    let metas = (0..node_outputs(cx.node).len())
        .map(|i| cx.out_pair(i))
        .collect::<Result<Vec<_>>>()?;
    let mut args = args;
    args.push(("self", Argument::Tensor(p)));
    cx.same_op(args, metas)
}

fn dim_arg(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let d = cx.dim(x, a.int("dim")?)?;
    on_pair(cx, a, vec![("dim", Argument::Int(d as i64))])
}

fn dims_arg(
    cx: &mut ComplexNode,
    a: &NodeArgs,
    name: &str,
    pair_too: bool,
) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let mut dims = cx.dims(x, &a.ints(name)?)?;
    if pair_too {
        dims.push(cx.crank(x)?);
    }
    on_pair(cx, a, vec![(name, ints(&dims))])
}

fn permute(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    dims_arg(cx, a, "dims", true)
}

fn flip(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    dims_arg(cx, a, "dims", false)
}

fn squeeze_dims(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    dims_arg(cx, a, "dim", false)
}

fn unsqueeze(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let d = normalize_dim(a.int("dim")?, cx.crank(x)? + 1)?;
    on_pair(cx, a, vec![("dim", Argument::Int(d as i64))])
}

/// `view`, `_unsafe_view`, `expand`: the sizes and the pair dim.
fn sized(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    on_pair(cx, a, vec![("size", with_pair(a, "size", 2)?)])
}

fn repeat(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    on_pair(cx, a, vec![("repeats", with_pair(a, "repeats", 1)?)])
}

/// `as_strided` in real elements: strides and offset doubled.
fn as_strided(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let stride = a
        .ints("stride")
        .map_err(|_| Error::unsupported("as_strided of complex values needs constant strides"))?;
    let mut stride: Vec<i64> = stride.iter().map(|s| s * 2).collect();
    stride.push(1);
    let offset = match a.opt_int("storage_offset") {
        Ok(o) => o.unwrap_or(0) * 2,
        Err(_) => {
            return Err(Error::unsupported(
                "as_strided of complex values needs a constant storage offset",
            ))
        }
    };
    on_pair(
        cx,
        a,
        vec![
            ("size", with_pair(a, "size", 2)?),
            ("stride", Argument::Ints(stride)),
            ("storage_offset", Argument::Int(offset)),
        ],
    )
}

/// `index` and the ops whose other arguments need nothing (the indexed
/// dims precede the pair dim).
fn same(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    on_pair(cx, a, vec![])
}

fn cat(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = cx.out_meta(0)?;
    let real = out.dtype.real_part();
    let d = normalize_dim(a.int("dim")?, out.sizes.len())?;
    let mut xs = Vec::new();
    for x in a.tensors("tensors")? {
        xs.push(cx.as_pair(x, real)?);
    }
    let meta = pair_meta(&out);
    Ok(vec![cx.op(
        aten::CAT,
        vec![
            ("tensors", Argument::Tensors(xs)),
            ("dim", Argument::Int(d as i64)),
        ],
        meta,
    )?])
}

/// `constant_pad_nd`: the pair dim unpadded; a nonzero value pads each
/// part with its own part.
fn constant_pad(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let p = cx.pair(x)?;
    let meta = cx.out_pair(0)?;
    let pad = a.syms("pad")?;
    let (c, d) = scalar_parts(&a.arg("value")).unwrap_or((0.0, 0.0));
    if c == 0.0 && d == 0.0 {
        let mut full = vec![SymRef::Int(0), SymRef::Int(0)];
        full.extend(pad);
        return Ok(vec![cx.op(
            aten::CONSTANT_PAD_ND,
            vec![
                ("self", Argument::Tensor(p)),
                ("pad", Argument::SymInts(full)),
                ("value", Argument::Float(0.0)),
            ],
            meta,
        )?]);
    }
    let (re, im) = cx.parts(p)?;
    let n = meta.sizes.len() - 1;
    let mut halves = Vec::new();
    for (x, v) in [(re, c), (im, d)] {
        let m = cx.meta(x, meta.dtype, meta.sizes[..n].to_vec())?;
        halves.push(cx.op(
            aten::CONSTANT_PAD_ND,
            vec![
                ("self", Argument::Tensor(x)),
                ("pad", Argument::SymInts(pad.clone())),
                ("value", Argument::Float(v)),
            ],
            m,
        )?);
    }
    Ok(vec![cx.join(halves[0], halves[1], meta)?])
}

/// `sum` and `mean` over dims (all of them when none are given).
fn reduce(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let out = cx.out_meta(0)?;
    let p = cx.pair(x)?;
    let p = cx.cast(p, out.dtype.real_part())?;
    let r = cx.crank(x)?;
    let dims = match a.opt_ints("dim").ok().flatten() {
        Some(d) if !d.is_empty() => cx.dims(x, &d)?,
        _ => (0..r).collect(),
    };
    let keepdim = a.has("keepdim") && a.bool("keepdim")?;
    let meta = pair_meta(&out);
    let sum = cx.op(
        aten::SUM_DIM_INTLIST,
        vec![
            ("self", Argument::Tensor(p)),
            ("dim", ints(&dims)),
            ("keepdim", Argument::Bool(keepdim)),
        ],
        meta.clone(),
    )?;
    if cx.node.target.name != "mean" {
        return Ok(vec![sum]);
    }
    // the sum divided by (n, 0) as torch divides complex values (Smith's
    // method: a NaN or infinite part reaches the other part)
    let n: i64 = dims
        .iter()
        .map(|&d| cx.em.static_dim(p, d, "a mean of complex values"))
        .product::<Result<i64>>()?;
    let real = meta.dtype;
    let z = cx.parts(sum)?;
    let c = cx.constant(sum, n as f64, real)?;
    let d = cx.constant(sum, 0.0, real)?;
    let (re, im) = super::exact::cdiv(cx, z, (c, d), &out.sizes, real)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `where(condition, self, other)`: the condition broadcast over the pair.
fn where_(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = cx.out_meta(0)?;
    let real = out.dtype.real_part();
    let cond = a.tensor("condition")?;
    let r = cx.em.rank(cond)?;
    let cond = cx.unsqueeze(cond, r)?;
    let x = cx.as_pair(a.tensor("self")?, real)?;
    let y = cx.as_pair(a.tensor("other")?, real)?;
    let meta = pair_meta(&out);
    Ok(vec![cx.op(
        aten::WHERE_SELF,
        vec![
            ("condition", Argument::Tensor(cond)),
            ("self", Argument::Tensor(x)),
            ("other", Argument::Tensor(y)),
        ],
        meta,
    )?])
}

/// `sym_size.int`: the size of the pair's same dim.
fn sym_size(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let p = cx.pair(x)?;
    let d = cx.dim(x, a.int("dim")?)?;
    let mut n = cx.node.clone();
    for input in &mut n.inputs {
        match input.name.as_str() {
            "self" => input.arg = Argument::Tensor(p),
            "dim" => input.arg = Argument::Int(d as i64),
            _ => {}
        }
    }
    n.meta = cx.em.meta.clone();
    cx.em.nodes.push(n);
    Ok(node_outputs(cx.node))
}

/// `_assert_tensor_metadata` of a complex value: its dtype is the
/// lowering's to keep now; dropped.
fn drop_assert(_: &mut ComplexNode, _: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![])
}

/// `full`, `scalar_tensor` of a complex dtype: each part filled.
fn filled(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = cx.out_meta(0)?;
    let real = out.dtype.real_part();
    let scalar = cx.node.target.name == "scalar_tensor";
    let value = a.arg(if scalar { "s" } else { "fill_value" });
    let (c, d) = scalar_parts(&value)
        .ok_or_else(|| Error::bad_input(format!("a fill value that is no number: {value:?}")))?;
    let mut halves = Vec::new();
    for v in [c, d] {
        let meta = crate::ir::TensorMeta {
            dtype: real,
            strides: crate::decompose::edit::contiguous_sym_strides(&out.sizes),
            storage_offset: Sym::Int(0),
            ..out.clone()
        };
        halves.push(if scalar {
            cx.op(
                aten::SCALAR_TENSOR,
                vec![
                    ("s", Argument::Float(v)),
                    ("dtype", Argument::ScalarType(real)),
                ],
                meta,
            )?
        } else {
            cx.op(
                aten::FULL,
                vec![
                    ("size", a.arg("size")),
                    ("fill_value", Argument::Float(v)),
                    ("dtype", Argument::ScalarType(real)),
                ],
                meta,
            )?
        });
    }
    Ok(vec![cx.join(halves[0], halves[1], pair_meta(&out))?])
}

/// `empty` of a complex dtype: of pairs.
fn empty(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = cx.out_meta(0)?;
    let meta = pair_meta(&out);
    Ok(vec![cx.op(
        aten::EMPTY_MEMORY_FORMAT,
        vec![
            ("size", with_pair(a, "size", 2)?),
            ("dtype", Argument::ScalarType(meta.dtype)),
        ],
        meta,
    )?])
}

pub(super) const ROWS: &[(&str, Handler)] = &[
    (aten::VIEW, sized),
    (aten::_UNSAFE_VIEW, sized),
    (aten::EXPAND, sized),
    (aten::PERMUTE, permute),
    (aten::SELECT_INT, dim_arg),
    (aten::SLICE_TENSOR, dim_arg),
    (aten::INDEX_SELECT, dim_arg),
    (aten::SPLIT_WITH_SIZES, dim_arg),
    (aten::UNSQUEEZE, unsqueeze),
    (aten::SQUEEZE_DIMS, squeeze_dims),
    (aten::FLIP, flip),
    (aten::REPEAT, repeat),
    (aten::AS_STRIDED, as_strided),
    (aten::INDEX_TENSOR, same),
    (aten::CAT, cat),
    (aten::CONSTANT_PAD_ND, constant_pad),
    (aten::SUM_DIM_INTLIST, reduce),
    (aten::SUM, reduce),
    (aten::MEAN_DIM, reduce),
    (aten::MEAN, reduce),
    (aten::WHERE_SELF, where_),
    (aten::SYM_SIZE_INT, sym_size),
    (aten::_ASSERT_TENSOR_METADATA, drop_assert),
    (aten::FULL, filled),
    (aten::SCALAR_TENSOR, filled),
    (aten::EMPTY_MEMORY_FORMAT, empty),
];
