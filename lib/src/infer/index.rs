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

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::EMBEDDING, embedding), (aten::INDEX_SELECT, index_select),
    (aten::GATHER, gather), (aten::SCATTER_SRC, scatter),
    (aten::SCATTER_VALUE, scatter), (aten::SCATTER_ADD, scatter),
    (aten::SCATTER_REDUCE_TWO, scatter),
];
