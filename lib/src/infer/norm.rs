//! Normalisation: batch, layer, group and instance norm: the shape rules.

use crate::ir::op::aten;
use super::*;

/// A per-channel parameter of length `c`, when given.
fn per_channel(site: &Site, arg: &str, c: Dim) -> Result<()> {
    if let Some(p) = site.opt_dims(arg)? {
        let n = p.iter().try_fold(1i64, |t, d| d.map(|d| t * d));
        if let (Some(n), Some(c)) = (n, c) {
            if p.len() != 1 || n != c {
                return Err(site.fail(arg, format!("has {}, the input {c} channels", show(&p))));
            }
        }
    }
    Ok(())
}

/// batch norm: weight, bias and running stats of one value per channel.
fn batch_norm(site: &Site) -> Result<Vec<Out>> {
    let x = site.dims("input")?;
    if x.len() < 2 {
        return Err(site.fail("input", format!("has rank {}, must be at least 2", x.len())));
    }
    for arg in ["weight", "bias", "running_mean", "running_var"] {
        per_channel(site, arg, x[1])?;
    }
    Ok(vec![Out::dims(x)])
}

/// layer norm: `normalized_shape` is the input's last dims; weight and bias
/// have that shape.
fn layer_norm(site: &Site) -> Result<Vec<Out>> {
    let x = site.dims("input")?;
    let shape = site.sym_list("normalized_shape")?;
    let tail = x.len().checked_sub(shape.len()).map(|k| &x[k..]);
    let fits = tail.is_some_and(|t| {
        t.iter()
            .zip(&shape)
            .all(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a == b) || a.is_none() || b.is_none())
    });
    if !fits {
        return Err(site.fail(
            "normalized_shape",
            format!("{} is not the last dims of the input {}", show(&shape), show(&x)),
        ));
    }
    for arg in ["weight", "bias"] {
        if let Some(p) = site.opt_dims(arg)? {
            if p.len() != shape.len()
                || p.iter().zip(&shape).any(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a != b))
            {
                return Err(site.fail(arg, format!("has {}, normalized_shape is {}", show(&p), show(&shape))));
            }
        }
    }
    Ok(vec![Out::dims(x)])
}

/// group norm: groups divide the channels.
fn group_norm(site: &Site) -> Result<Vec<Out>> {
    let x = site.dims("input")?;
    let groups = site.args.int("num_groups")?;
    if groups <= 0 {
        return Err(site.fail("num_groups", format!("is {groups}, must be > 0")));
    }
    if let Some(c) = x.get(1).copied().flatten() {
        if c % groups != 0 {
            return Err(site.fail("num_groups", format!("is {groups}, which does not divide the {c} channels")));
        }
        per_channel(site, "weight", Some(c))?;
        per_channel(site, "bias", Some(c))?;
    }
    Ok(vec![Out::dims(x)])
}

/// native_group_norm(input, weight, bias, N, C, HxW, group, eps).
fn native_group_norm(site: &Site) -> Result<Vec<Out>> {
    let x = site.dims("input")?;
    let groups = site.args.int("group")?;
    let c = site.args.int("C")?;
    if groups <= 0 || c % groups != 0 {
        return Err(site.fail("group", format!("is {groups}, which does not divide the {c} channels")));
    }
    Ok(vec![Out::dims(x)])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::BATCH_NORM, batch_norm),
    (aten::_NATIVE_BATCH_NORM_LEGIT_NO_TRAINING, batch_norm),
    (aten::LAYER_NORM, layer_norm), (aten::NATIVE_LAYER_NORM, layer_norm),
    (aten::GROUP_NORM, group_norm), (aten::INSTANCE_NORM, batch_norm),
    (aten::NATIVE_GROUP_NORM, native_group_norm),
];
