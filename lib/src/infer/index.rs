//! Indexing, gathering and scattering (index, index_put, gather, scatter, embedding, ...): the shape rules.

use crate::ir::op::aten;
use super::*;

fn integer(site: &Site, arg: &str) -> Result<()> {
    let d = site.dtype(arg)?;
    if d.is_floating() || d == Dtype::Bool || d.is_complex() {
        return Err(site.fail(arg, format!("is {}, must be an integer tensor", d.torch_name())));
    }
    Ok(())
}

/// embedding: a 2-D weight, integer ids; rows of the weight per id.
fn embedding(site: &Site) -> Result<Vec<Out>> {
    let w = site.dims("weight")?;
    if w.len() != 2 {
        return Err(site.fail("weight", format!("has rank {}, must be 2", w.len())));
    }
    integer(site, "indices")?;
    let mut out = site.dims("indices")?;
    out.push(w[1]);
    Ok(vec![Out::dims(out)])
}

/// index_select: `dim` in range, a 1-D (or 0-d) integer index.
fn index_select(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    let d = site.dim_index("dim", site.args.int("dim")?, dims.len())?;
    integer(site, "index")?;
    let idx = site.dims("index")?;
    if idx.len() > 1 {
        return Err(site.fail("index", format!("has rank {}, must be 0 or 1", idx.len())));
    }
    if let Some(x) = dims.get_mut(d) {
        *x = idx.first().copied().unwrap_or(Some(1));
    }
    Ok(vec![Out::dims(dims)])
}

/// gather and scatter: `dim` in range, an integer index of the input's
/// rank. Returns (self's dims, the index's).
fn dim_and_index(site: &Site) -> Result<(Vec<Dim>, Vec<Dim>)> {
    let dims = site.dims("self")?;
    site.dim_index("dim", site.args.int("dim")?, dims.len())?;
    integer(site, "index")?;
    let idx = site.dims("index")?;
    if idx.len() != dims.len() && !(idx.len() <= 1 && dims.len() <= 1) {
        return Err(site.fail(
            "index",
            format!("has rank {}, self {}: they must be equal", idx.len(), dims.len()),
        ));
    }
    Ok((dims, idx))
}

/// gather: the index's shape.
fn gather(site: &Site) -> Result<Vec<Out>> {
    Ok(vec![Out::dims(dim_and_index(site)?.1)])
}

/// scatter family: the input's shape.
fn scatter(site: &Site) -> Result<Vec<Out>> {
    Ok(vec![Out::dims(dim_and_index(site)?.0)])
}

/// masked_fill: `self` and `mask` broadcast (torch expands both); a bool
/// mask; a tensor `value` is 0-d.
fn masked_fill(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    if site.dtype("mask")? != Dtype::Bool {
        return Err(site.fail("mask", format!("is {}, must be bool", site.dtype("mask")?.torch_name())));
    }
    if let Argument::Tensor(value) = site.args.arg("value") {
        let v = site.dims_of(value)?;
        if !v.is_empty() {
            return Err(site.fail("value", format!("has rank {}, a tensor value must be 0-d", v.len())));
        }
    }
    Ok(vec![Out::dims(broadcast(site, &dims, &site.dims("mask")?)?)])
}

/// tril/triu: a matrix or a batch of them.
fn triangle(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    if dims.len() < 2 {
        return Err(site.fail("self", format!("has rank {}, must be at least 2", dims.len())));
    }
    Ok(vec![Out::dims(dims)])
}

/// index.Tensor: per leading dim an index or None; an integer index
/// picks along its dim, a bool (or uint8) mask of rank k along k dims at
/// once (its true count unknown here). The indices broadcast; their shape
/// replaces the dims they index where those are adjacent, else comes first.
fn index_tensor(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let indices: Vec<Option<ValueId>> = match site.args.arg("indices") {
        Argument::OptionalTensors(v) => v,
        Argument::Tensors(v) => v.into_iter().map(Some).collect(),
        _ => return Err(site.fail("indices", "should be a list of tensors or None")),
    };
    let mut at = 0;
    let mut shape: Option<Vec<Dim>> = None;
    let (mut first, mut last, mut gap) = (None, 0, false);
    for (k, ix) in indices.iter().enumerate() {
        let Some(v) = ix else {
            at += 1;
            if first.is_some() {
                gap = true;
            }
            continue;
        };
        let d = site.dims_of(*v)?;
        let dtype = site
            .meta_of(*v)
            .map(|m| m.dtype)
            .ok_or_else(|| site.fail("indices", "has a tensor without metadata"))?;
        let (picked, width) = if matches!(dtype, Dtype::Bool | Dtype::Uint8) {
            for (i, n) in d.iter().enumerate() {
                if let (Some(n), Some(Some(have))) = (n, dims.get(at + i)) {
                    if n != have {
                        return Err(site.fail(
                            &format!("indices[{k}]"),
                            format!("is a mask of {n} in dim {i}, self has {have} in dim {}", at + i),
                        ));
                    }
                }
            }
            (vec![None], d.len())
        } else if dtype.is_floating() || dtype.is_complex() {
            return Err(site.fail(
                &format!("indices[{k}]"),
                format!("is {}, must be an integer or bool tensor", dtype.torch_name()),
            ));
        } else {
            (d, 1)
        };
        if first.is_some() && gap {
            // a None between two indices: the broadcast shape goes first
            first = Some(usize::MAX);
        }
        first.get_or_insert(at);
        at += width;
        last = at;
        shape = Some(match shape {
            None => picked,
            Some(s) => broadcast(site, &s, &picked)?,
        });
    }
    if at > dims.len() {
        return Err(site.fail(
            "indices",
            format!("index {at} dims, self has {}", dims.len()),
        ));
    }
    let (Some(first), Some(shape)) = (first, shape) else {
        return Ok(vec![Out::dims(dims)]);
    };
    let out = if first == usize::MAX {
        let mut out = shape;
        let mut p = 0;
        for ix in &indices {
            match ix {
                None => out.push(dims[p]),
                Some(v) => {
                    let mask = site.meta_of(*v).is_some_and(|m| matches!(m.dtype, Dtype::Bool | Dtype::Uint8));
                    p += if mask { site.dims_of(*v)?.len() } else { 1 };
                    continue;
                }
            }
            p += 1;
        }
        out.extend_from_slice(&dims[p..]);
        out
    } else {
        let mut out = dims[..first].to_vec();
        out.extend(shape);
        out.extend_from_slice(&dims[last..]);
        out
    };
    Ok(vec![Out::dims(out)])
}

/// one_hot: an integer tensor; a last dim of `num_classes` (unknown when
/// -1: the largest value plus one), int64.
fn one_hot(site: &Site) -> Result<Vec<Out>> {
    integer(site, "self")?;
    let mut dims = site.dims("self")?;
    let n = site.args.opt_int("num_classes")?.unwrap_or(-1);
    if n < -1 {
        return Err(site.fail("num_classes", format!("is {n}, must be -1 or >= 0")));
    }
    dims.push((n >= 0).then_some(n));
    Ok(vec![Out {
        dims: Some(dims),
        dtype: Some(Dtype::Int64),
    }])
}

/// embedding_bag: a 2-D weight, 1-D integer indices and offsets (one per
/// bag, and one past the last with `include_last_offset`). Outputs as
/// torch's meta function has them: the bags' rows, the bag of each index
/// (its length depends on the kernel's path, so it is left unknown), each
/// bag's size, and the argmax rows (max mode) or one per bag.
fn embedding_bag(site: &Site) -> Result<Vec<Out>> {
    let w = site.dims("weight")?;
    if w.len() != 2 {
        return Err(site.fail("weight", format!("has rank {}, must be 2", w.len())));
    }
    integer(site, "indices")?;
    integer(site, "offsets")?;
    let (idx, offsets) = (site.dims("indices")?, site.dims("offsets")?);
    if idx.len() != 1 || offsets.len() != 1 {
        return Err(site.fail(
            "indices",
            format!("has rank {} and offsets {}: both must be 1", idx.len(), offsets.len()),
        ));
    }
    let mode = site.args.opt_int("mode")?.unwrap_or(0);
    if !(0..=2).contains(&mode) {
        return Err(site.fail("mode", format!("is {mode}, must be 0 (sum), 1 (mean) or 2 (max)")));
    }
    let last = site.args.bool("include_last_offset")?;
    let bags = offsets[0].map(|n| n - last as i64);
    let index = site.dtype("offsets")?;
    let int = |dims: Vec<Dim>| Out {
        dims: Some(dims),
        dtype: Some(index),
    };
    let max_rows = if mode == 2 { vec![bags, w[1]] } else { vec![bags] };
    Ok(vec![
        Out::dims(vec![bags, w[1]]),
        int(vec![None]),
        int(vec![bags]),
        int(max_rows),
    ])
}

/// slice_scatter / select_scatter: `self`'s shape, `dim` in range.
fn scatter_view(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(0), dims.len())?;
    site.dims("src")?;
    Ok(vec![Out::dims(dims)])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::EMBEDDING, embedding), (aten::INDEX_SELECT, index_select),
    (aten::GATHER, gather), (aten::SCATTER_SRC, scatter),
    (aten::SCATTER_VALUE, scatter), (aten::SCATTER_ADD, scatter),
    (aten::SCATTER_REDUCE_TWO, scatter),
    (aten::MASKED_FILL_SCALAR, masked_fill), (aten::MASKED_FILL_TENSOR, masked_fill),
    (aten::TRIL, triangle), (aten::TRIU, triangle),
    (aten::INDEX_TENSOR, index_tensor), (aten::ONE_HOT, one_hot),
    (aten::EMBEDDING_BAG, embedding_bag), (aten::EMBEDDING_BAG_PADDING_IDX, embedding_bag),
    (aten::_EMBEDDING_BAG, embedding_bag),
    (aten::SLICE_SCATTER, scatter_view), (aten::SELECT_SCATTER, scatter_view),
];
