//! Reductions (sum, mean, amax, argmax, var, prod, cumsum, sort, topk, ...): the shape rules.

use crate::ir::op::aten;
use super::*;

/// A reduction over `dim` (a list; empty or absent: every dim), keeping
/// the reduced dims as 1 with `keepdim`.
fn over_dims(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let listed = match site.args.arg("dim") {
        Argument::None => vec![],
        _ => site.args.ints("dim")?,
    };
    let mut reduced = vec![false; dims.len()];
    for d in &listed {
        let i = site.dim_index("dim", *d, dims.len())?;
        if reduced.get(i) == Some(&true) {
            return Err(site.fail("dim", format!("names dim {d} twice")));
        }
        if let Some(r) = reduced.get_mut(i) {
            *r = true;
        }
    }
    if listed.is_empty() {
        reduced.iter_mut().for_each(|r| *r = true);
    }
    let keep = site.args.has("keepdim") && site.args.bool("keepdim")?;
    let out = dims
        .iter()
        .zip(&reduced)
        .filter_map(|(d, r)| match (r, keep) {
            (true, true) => Some(Some(1)),
            (true, false) => None,
            (false, _) => Some(*d),
        })
        .collect();
    Ok(vec![Out::dims(out)])
}

/// argmax/argmin: one `dim` (or none: the flattened tensor).
fn arg_extreme(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let keep = site.args.has("keepdim") && site.args.bool("keepdim")?;
    let out = match site.args.opt_int("dim")? {
        None if keep => vec![Some(1); dims.len()],
        None => vec![],
        Some(d) => {
            let i = site.dim_index("dim", d, dims.len())?;
            let mut out = dims.clone();
            if dims.is_empty() {
                return Ok(vec![Out::dims(out)]);
            }
            if keep {
                out[i] = Some(1);
            } else {
                out.remove(i);
            }
            out
        }
    };
    Ok(vec![Out {
        dims: Some(out),
        dtype: Some(Dtype::Int64),
    }])
}

/// `topk(self, k, dim)`: k within the dim.
fn topk(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let k = site.args.int("k")?;
    let d = site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(-1), dims.len())?;
    let size = if dims.is_empty() { Some(1) } else { dims[d] };
    if k < 0 || size.is_some_and(|n| k > n) {
        return Err(site.fail(
            "k",
            format!("is {k}, must be in [0, {}] (the size of dim {d})", size.unwrap_or(0)),
        ));
    }
    let mut out = dims.clone();
    if let Some(x) = out.get_mut(d) {
        *x = Some(k);
    }
    Ok(vec![
        Out::dims(out.clone()),
        Out {
            dims: Some(out),
            dtype: Some(Dtype::Int64),
        },
    ])
}

/// cumsum, sort: one `dim` in range, the input's shape.
fn along_dim(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(-1), dims.len())?;
    Ok(vec![Out::dims(dims.clone()), Out::dims(dims)])
}

/// max.dim/min.dim, any.dim/all.dim, prod.dim_int: one `dim` in range,
/// kept as 1 with `keepdim`; max/min also give int64 indices.
fn one_dim(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let d = site.dim_index("dim", site.args.int("dim")?, dims.len())?;
    let keep = site.args.has("keepdim") && site.args.bool("keepdim")?;
    let mut out = dims.clone();
    if !dims.is_empty() {
        if keep {
            out[d] = Some(1);
        } else {
            out.remove(d);
        }
    }
    Ok(vec![
        Out::dims(out.clone()),
        Out {
            dims: Some(out),
            dtype: Some(Dtype::Int64),
        },
    ])
}

/// all.default: every dim reduced, bool (uint8 stays uint8, as torch).
fn all_bool(site: &Site) -> Result<Vec<Out>> {
    let d = site.dtype("self")?;
    Ok(vec![Out {
        dims: Some(vec![]),
        dtype: Some(if d == Dtype::Uint8 { d } else { Dtype::Bool }),
    }])
}

/// max.other / min.other: the two broadcast.
fn elementwise(site: &Site) -> Result<Vec<Out>> {
    Ok(vec![Out::dims(broadcast(site, &site.dims("self")?, &site.dims("other")?)?)])
}

/// prod.default: every dim reduced.
fn all_dims(site: &Site) -> Result<Vec<Out>> {
    site.dims("self")?;
    Ok(vec![Out::dims(vec![])])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::SUM_DIM_INTLIST, over_dims), (aten::SUM, over_dims),
    (aten::MEAN_DIM, over_dims), (aten::MEAN, over_dims),
    (aten::AMAX, over_dims), (aten::AMIN, over_dims),
    (aten::VAR_CORRECTION, over_dims), (aten::VAR_DIM, over_dims),
    (aten::ANY_DIMS, over_dims), (aten::ANY, over_dims),
    (aten::ARGMAX, arg_extreme), (aten::ARGMIN, arg_extreme),
    (aten::TOPK, topk), (aten::CUMSUM, along_dim),
    (aten::SORT, along_dim), (aten::MAX_DIM, one_dim), (aten::MIN_DIM, one_dim),
    (aten::ANY_DIM, one_dim), (aten::ALL_DIM, one_dim), (aten::PROD_DIM_INT, one_dim),
    (aten::PROD, all_dims), (aten::MAX, all_dims), (aten::MIN, all_dims),
    (aten::ALL, all_bool), (aten::MAX_OTHER, elementwise), (aten::MIN_OTHER, elementwise),
    (aten::STD_CORRECTION, over_dims), (aten::STD_DIM, over_dims),
];
