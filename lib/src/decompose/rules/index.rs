//! Indexing, gathering and scattering (index, index_put, gather, scatter, embedding, ...): the decomposition rules.

use crate::ir::op::aten;
use super::*;

fn masked_fill(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let x = a.tensor("self")?;
    let dtype = em.dtype(x)?;
    let value = match a.0.arg("value") {
        Some(Argument::Tensor(v)) if em.dtype(*v)? == dtype => *v,
        Some(Argument::Tensor(v)) => to_copy(em, *v, dtype, None)?,
        _ => scalar_tensor(em, x, a.arg("value"), dtype)?,
    };
    Ok(vec![where_(em, a.tensor("mask")?, value, x, Some(out))?])
}

fn tri(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let r = em.rank(x)?;
    if r < 2 {
        return Err(Error::bad_input(format!(
            "node {}: {} of a tensor of rank {r}",
            a.0.name, a.0.target.name
        )));
    }
    // (a symbolic diagonal, `x.shape[1] - x.shape[0]`, is compared as
    // the run's value)
    let k = match a.sym("diagonal")? {
        SymRef::Int(k) => Argument::Int(k),
        r => Argument::SymInt(r),
    };
    let rows = arange_dim(em, x, r - 2, true)?;
    let cols = arange_dim(em, x, r - 1, false)?;
    let diff = binary(em, aten::SUB_TENSOR, cols, rows, Dtype::Int64, None)?;
    let op = if a.0.target.name == "tril" {
        aten::LE_SCALAR
    } else {
        aten::GE_SCALAR
    };
    let keep = cmp(em, op, diff, k)?;
    let dtype = em.dtype(x)?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    Ok(vec![where_(em, keep, x, zero, Some(a.out(0)?))?])
}

fn one_hot(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let n = a.int("num_classes")?;
    if n < 0 {
        return Err(Error::unsupported(format!(
            "node {}: one_hot without num_classes depends on the data (pass num_classes)",
            a.0.name
        )));
    }
    let r = em.rank(x)?;
    let col = unsqueeze(em, x, r)?;
    let classes = arange_col(em, x, n, false)?;
    let eq = binary(em, aten::EQ_TENSOR, col, classes, Dtype::Bool, None)?;
    Ok(vec![to_copy(em, eq, Dtype::Int64, Some(a.out(0)?))?])
}

fn take(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let total = em.static_sizes(x, "take")?.iter().product::<i64>();
    let flat = reshape(em, x, &[SymRef::Int(total)], None)?;
    em.op_into(
        aten::INDEX_TENSOR,
        vec![
            ("self", Argument::Tensor(flat)),
            (
                "indices",
                Argument::OptionalTensors(vec![Some(a.tensor("index")?)]),
            ),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

/// diagonal_scatter(self, src, offset, dim1, dim2): `self` with the
/// diagonal `diagonal(offset, dim1, dim2)` replaced by `src`: an
/// index_put on `self` with dim1 and dim2 moved to the front, at the
/// diagonal's rows and columns, of `src` with its last dim moved first.
fn diagonal_scatter(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, src) = (a.tensor("self")?, a.tensor("src")?);
    let sizes = em.static_sizes(x, "diagonal_scatter")?;
    let r = sizes.len();
    let offset = a.opt_int("offset")?.unwrap_or(0);
    let d1 = normalize_dim(a.opt_int("dim1")?.unwrap_or(0), r)?;
    let d2 = normalize_dim(a.opt_int("dim2")?.unwrap_or(1), r)?;
    let (row0, col0) = (0.max(-offset), 0.max(offset));
    let len = (sizes[d1] - row0).min(sizes[d2] - col0).max(0);
    let perm: Vec<usize> = [d1, d2].into_iter().chain((0..r).filter(|d| *d != d1 && *d != d2)).collect();
    let mut inv = vec![0; r];
    for (i, p) in perm.iter().enumerate() {
        inv[*p] = i;
    }
    let xp = permute(em, x, &perm, None)?;
    let rs = em.sizes(src)?.len();
    let sp = permute(em, src, &std::iter::once(rs - 1).chain(0..rs - 1).collect::<Vec<_>>(), None)?;
    let (rows, cols) = (arange_from(em, x, row0, len)?, arange_from(em, x, col0, len)?);
    let meta = em.meta(xp)?.clone();
    let put = em.op(
        aten::INDEX_PUT,
        vec![
            ("self", Argument::Tensor(xp)),
            ("indices", Argument::OptionalTensors(vec![Some(rows), Some(cols)])),
            ("values", Argument::Tensor(sp)),
            ("accumulate", Argument::Bool(false)),
        ],
        meta,
    )?;
    Ok(vec![permute(em, put, &inv, Some(a.out(0)?))?])
}

fn take_along_dim(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, idx) = (a.tensor("self")?, a.tensor("indices")?);
    let out = a.out(0)?;
    let Some(dim) = a.opt_int("dim")? else {
        let total = em
            .static_sizes(x, "take_along_dim")?
            .iter()
            .product::<i64>();
        let flat = reshape(em, x, &[SymRef::Int(total)], None)?;
        let n = em
            .static_sizes(idx, "take_along_dim")?
            .iter()
            .product::<i64>();
        let fi = reshape(em, idx, &[SymRef::Int(n)], None)?;
        em.op_into(
            aten::GATHER,
            vec![
                ("self", Argument::Tensor(flat)),
                ("dim", Argument::Int(0)),
                ("index", Argument::Tensor(fi)),
            ],
            out,
        )?;
        return Ok(vec![out]);
    };
    let r = em.rank(x)?;
    let d = normalize_dim(dim, r)?;
    let (xs, is) = (
        em.static_sizes(x, "take_along_dim")?,
        em.static_sizes(idx, "take_along_dim")?,
    );
    let b: Vec<i64> = xs.iter().zip(&is).map(|(p, q)| *p.max(q)).collect();
    let mut want_x = b.clone();
    want_x[d] = xs[d];
    let mut want_i = b;
    want_i[d] = is[d];
    let x = if want_x != xs {
        expand(
            em,
            x,
            &want_x.iter().map(|v| SymRef::Int(*v)).collect::<Vec<_>>(),
        )?
    } else {
        x
    };
    let idx = if want_i != is {
        expand(
            em,
            idx,
            &want_i.iter().map(|v| SymRef::Int(*v)).collect::<Vec<_>>(),
        )?
    } else {
        idx
    };
    Ok(vec![gather(em, x, d, idx, Some(out))?])
}

/// `nonzero(as_tuple=True)` (and `where(condition)`, which torchvision's
/// MultiScaleRoIAlign calls): the columns of `nonzero`, one per dim.
pub(super) fn nonzero_numpy(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    // (`where(condition)` is the same op under another argument name)
    let x = if a.has("condition") { a.tensor("condition")? } else { a.tensor("self")? };
    let outs = a.outs();
    let rank = em.rank(x)?.max(1);
    let first = *outs
        .first()
        .ok_or_else(|| Error::bad_input(format!("node {}: no outputs", a.0.name)))?;
    let count = em.sizes(first)?[0].clone();
    let meta = em.meta_like(x, Dtype::Int64, vec![count, Sym::Int(rank as i64)])?;
    let nz = em.op(
        aten::NONZERO,
        vec![("self", Argument::Tensor(x))],
        meta,
    )?;
    for (i, o) in outs.iter().enumerate() {
        em.op_into(
            aten::SELECT_INT,
            vec![
                ("self", Argument::Tensor(nz)),
                ("dim", Argument::Int(1)),
                ("index", Argument::SymInt(SymRef::Int(i as i64))),
            ],
            *o,
        )?;
    }
    Ok(outs)
}

/// `masked_select(self, mask)`: both broadcast to one shape, then
/// `self[mask]` (a bool-mask `index`, its length known at run time).
fn masked_select(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, m) = (a.tensor("self")?, a.tensor("mask")?);
    let shape = broadcast(&em.sizes(x)?, &em.sizes(m)?);
    let widen = |em: &mut Emitter, v: ValueId| -> Result<ValueId> {
        if em.sizes(v)? == shape {
            return Ok(v);
        }
        let mut refs = Vec::new();
        for (d, s) in shape.iter().enumerate() {
            refs.push(match s {
                Sym::Int(n) => SymRef::Int(*n),
                _ => {
                    // a symbolic dim: read from whichever operand has it
                    let (xs, ms) = (em.sizes(x)?, em.sizes(m)?);
                    let pick = |sizes: &[Sym]| (d + sizes.len()).checked_sub(shape.len());
                    match pick(&xs).filter(|&j| xs[j] == *s) {
                        Some(j) => em.size(x, j)?,
                        None => match pick(&ms) {
                            Some(j) => em.size(m, j)?,
                            None => return Err(Error::unsupported(format!(
                                "node {}: masked_select: dim {d} ({s}) of the broadcast shape",
                                a.0.name
                            ))),
                        },
                    }
                }
            });
        }
        expand(em, v, &refs)
    };
    let (xe, me) = (widen(em, x)?, widen(em, m)?);
    let out = a.out(0)?;
    em.op_into(
        aten::INDEX_TENSOR,
        vec![
            ("self", Argument::Tensor(xe)),
            ("indices", Argument::OptionalTensors(vec![Some(me)])),
        ],
        out,
    )?;
    Ok(vec![out])
}

/// `index_copy(self, dim, index, source)`: `index_put(self, [None] * dim +
/// [index], source)`, as torch's decomposition (`_index_copy`); a 0-D index
/// is one of length 1. Repeated indices are undefined in torch (the last
/// write wins here).
fn index_copy(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, index, source) = (a.tensor("self")?, a.tensor("index")?, a.tensor("source")?);
    let r = em.rank(x)?;
    if r == 0 {
        return Err(Error::unsupported(format!(
            "node {}: index_copy of a 0-D tensor",
            a.0.name
        )));
    }
    let dim = normalize_dim(a.int("dim")?, r)?;
    let index = match em.rank(index)? {
        0 => unsqueeze(em, index, 0)?,
        1 => index,
        n => {
            return Err(Error::bad_input(format!(
                "node {}: index_copy takes an index of rank 0 or 1, not {n}",
                a.0.name
            )));
        }
    };
    let source = if em.rank(source)? == 0 && r > 0 {
        let ones = vec![SymRef::Int(1); r];
        view(em, source, &ones, None)?
    } else {
        source
    };
    let mut indices = vec![None; dim];
    indices.push(Some(index));
    let out = a.out(0)?;
    em.op_into(
        aten::INDEX_PUT,
        vec![
            ("self", Argument::Tensor(x)),
            ("indices", Argument::OptionalTensors(indices)),
            ("values", Argument::Tensor(source)),
            ("accumulate", Argument::Bool(false)),
        ],
        out,
    )?;
    Ok(vec![out])
}

rules! {
    aten::NONZERO_NUMPY => [aten::NONZERO, aten::SELECT_INT] nonzero_numpy;
    aten::MASKED_FILL_SCALAR => [aten::SCALAR_TENSOR, aten::WHERE_SELF] masked_fill;
    aten::MASKED_FILL_TENSOR => [aten::WHERE_SELF] masked_fill;
    aten::EMBEDDING_BAG_PADDING_IDX => [aten::_EMBEDDING_BAG] same_args;
    aten::ONE_HOT => [aten::ARANGE_START_STEP, aten::UNSQUEEZE, aten::EQ_TENSOR, aten::_TO_COPY] one_hot;
    aten::MASKED_SELECT => [aten::EXPAND, aten::INDEX_TENSOR] masked_select;
    aten::INDEX_COPY => [aten::UNSQUEEZE, aten::VIEW, aten::INDEX_PUT] index_copy;
    aten::DIAGONAL_SCATTER => [aten::PERMUTE, aten::ARANGE_START_STEP, aten::INDEX_PUT] diagonal_scatter;
    aten::TAKE => [aten::VIEW, aten::INDEX_TENSOR] take;
    aten::TAKE_ALONG_DIM => [aten::EXPAND, aten::GATHER, aten::VIEW] take_along_dim;
    aten::TRIL => [aten::ARANGE_START_STEP, aten::UNSQUEEZE, aten::SUB_TENSOR, aten::LE_SCALAR, aten::SCALAR_TENSOR, aten::WHERE_SELF] tri;
    aten::TRIU => [aten::ARANGE_START_STEP, aten::UNSQUEEZE, aten::SUB_TENSOR, aten::GE_SCALAR, aten::SCALAR_TENSOR, aten::WHERE_SELF] tri;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[
    (aten::_UNSAFE_INDEX_TENSOR, aten::INDEX_TENSOR),
    (aten::_UNSAFE_INDEX_PUT, aten::INDEX_PUT),
];
