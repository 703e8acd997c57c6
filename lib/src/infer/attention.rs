//! Attention (scaled_dot_product_attention and its variants): the shape rules.

use crate::ir::op::aten;
use super::*;

/// sdpa: query, key and value of rank >= 2; query and key share the last
/// dim, key and value the sequence dim.
fn sdpa(site: &Site) -> Result<Vec<Out>> {
    let (q, k, v) = (site.dims("query")?, site.dims("key")?, site.dims("value")?);
    for (name, t) in [("query", &q), ("key", &k), ("value", &v)] {
        if t.len() < 2 {
            return Err(site.fail(name, format!("has rank {}, must be at least 2", t.len())));
        }
    }
    let last = |t: &[Dim], back: usize| t[t.len() - back];
    if let (Some(a), Some(b)) = (last(&q, 1), last(&k, 1)) {
        if a != b {
            return Err(site.fail("key", format!("has {b} features, query {a}")));
        }
    }
    if let (Some(a), Some(b)) = (last(&k, 2), last(&v, 2)) {
        if a != b {
            return Err(site.fail("value", format!("has {b} positions, key {a}")));
        }
    }
    let mut out = q[..q.len() - 1].to_vec();
    out.push(last(&v, 1));
    Ok(vec![Out::dims(out)])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::SCALED_DOT_PRODUCT_ATTENTION, sdpa),
];
