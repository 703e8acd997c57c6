//! Identities, copies, casts, clones and aliasing views: the decomposition rules.

use crate::ir::op::aten;
use super::*;

fn contiguous(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    if is_contiguous(em.meta(x)?) {
        return Ok(vec![x]);
    }
    Ok(vec![clone(em, x, Some(a.out(0)?))?])
}

/// `detach` means nothing without autograd: its input is its value (as in
/// torch's `run_decompositions()`).
fn detach(_: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![a.tensor("self")?])
}

fn lift_fresh_copy(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![clone(em, a.tensor("self")?, Some(a.out(0)?))?])
}

pub(super) fn dropout(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("input")?;
    let (p, train) = (a.float("p")?, a.bool("train")?);
    if !train || p == 0.0 {
        return Ok(vec![x]);
    }
    if a.0.target.name != "dropout" {
        return Err(Error::unsupported(format!(
            "node {}: {} in training mode has no decomposition",
            a.0.name, a.0.target
        )));
    }
    let mask = em.meta_like(x, Dtype::Bool, em.sizes(x)?)?;
    let r = em.call(
        aten::NATIVE_DROPOUT,
        vec![
            ("input", Argument::Tensor(x)),
            ("p", Argument::Float(p)),
            ("train", Argument::Bool(true)),
        ],
        vec![Out::Into(a.out(0)?), Out::New(mask)],
    )?;
    Ok(vec![r[0]])
}

fn to(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let out = a.out(0)?;
    let want = em.dtype(out)?;
    let same_device = em.meta(x)?.device == em.meta(out)?.device;
    if want == em.dtype(x)? && same_device && !a.bool("copy")? {
        return Ok(vec![x]);
    }
    let mut args = vec![
        ("self", Argument::Tensor(x)),
        ("dtype", Argument::ScalarType(want)),
    ];
    if !same_device {
        args.push(("device", Argument::Device(em.meta(out)?.device.clone())));
    }
    em.op_into(aten::_TO_COPY, args, out)?;
    Ok(vec![out])
}

rules! {
    aten::CONTIGUOUS => [aten::CLONE] contiguous;
    aten::LIFT_FRESH_COPY => [aten::CLONE] lift_fresh_copy;
    aten::DETACH => [] detach;
    aten::DROPOUT => [aten::NATIVE_DROPOUT] dropout;
    aten::FEATURE_DROPOUT => [] dropout;
    aten::ALPHA_DROPOUT => [] dropout;
    aten::TO_DTYPE => [aten::_TO_COPY] to;
    aten::TO_DTYPE_LAYOUT => [aten::_TO_COPY] to;
    aten::TO_DEVICE => [aten::_TO_COPY] to;
    aten::TO_OTHER => [aten::_TO_COPY] to;
    aten::TYPE_AS => [aten::_TO_COPY] to;
    aten::ALIAS_COPY => [aten::ALIAS, aten::CLONE] copy_variant;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
