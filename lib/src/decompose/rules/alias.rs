//! Identities, copies, casts, clones and aliasing views: the decomposition rules.

use super::*;

fn contiguous(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    if is_contiguous(em.meta(x)?) {
        return Ok(vec![x]);
    }
    Ok(vec![clone(em, x, Some(a.out(0)?))?])
}

/// `detach` means nothing without autograd: its input is its value (as in
/// torch's `run_decompositions()`).
fn detach(_: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![a.t("self")?])
}

fn lift_fresh_copy(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![clone(em, a.t("self")?, Some(a.out(0)?))?])
}

pub(super) fn dropout(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("input")?;
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
        "aten.native_dropout.default",
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
    let x = a.t("self")?;
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
    em.op_into("aten._to_copy.default", args, out)?;
    Ok(vec![out])
}

rules! {
    "aten.contiguous.default" => ["aten.clone.default"] contiguous;
    "aten.lift_fresh_copy.default" => ["aten.clone.default"] lift_fresh_copy;
    "aten.detach.default" => [] detach;
    "aten.dropout.default" => ["aten.native_dropout.default"] dropout;
    "aten.feature_dropout.default" => [] dropout;
    "aten.alpha_dropout.default" => [] dropout;
    "aten.to.dtype" => ["aten._to_copy.default"] to;
    "aten.to.dtype_layout" => ["aten._to_copy.default"] to;
    "aten.to.device" => ["aten._to_copy.default"] to;
    "aten.to.other" => ["aten._to_copy.default"] to;
    "aten.type_as.default" => ["aten._to_copy.default"] to;
    "aten.alias_copy.default" => ["aten.alias.default", "aten.clone.default"] copy_variant;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
