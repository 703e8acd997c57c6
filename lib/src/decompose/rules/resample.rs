//! Resampling: upsampling, interpolation and grid sampling: the decomposition rules.

use super::*;

/// Nearest 1-D upsampling as a gather: source index floor(i * in / out).
fn upsample_nearest1d(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("input")?;
    let out = a.out(0)?;
    let last = |v: Vec<i64>| {
        v.last()
            .copied()
            .ok_or_else(|| Error::bad_input("upsample_nearest1d of a 0-d tensor"))
    };
    let n_in = last(em.static_sizes(x, "upsample_nearest1d")?)?;
    let n_out = last(em.static_sizes(out, "upsample_nearest1d")?)?;
    let scale = match a.0.arg("scale_factors") {
        Some(Argument::Floats(f)) if !f.is_empty() => 1.0 / f[0],
        _ => n_in as f64 / n_out as f64,
    };
    let i = arange_col(em, x, n_out, false)?;
    let f = to_copy(em, i, Dtype::Float32, None)?;
    let f = with_scalar(em, "aten.mul.Tensor", f, Argument::Float(scale))?;
    let idx = to_copy(em, f, Dtype::Int64, None)?;
    let idx = same(
        em,
        "aten.clamp.default",
        vec![
            ("self", Argument::Tensor(idx)),
            ("max", Argument::Int(n_in - 1)),
        ],
        idx,
        None,
    )?;
    let r = em.rank(x)?;
    let mut indices: Vec<Option<ValueId>> = vec![None; r - 1];
    indices.push(Some(idx));
    em.op_into(
        "aten.index.Tensor",
        vec![
            ("self", Argument::Tensor(x)),
            ("indices", Argument::OptionalTensors(indices)),
        ],
        out,
    )?;
    Ok(vec![out])
}

/// `grid_sampler` is `grid_sampler_2d` on 4-D inputs, with the same
/// arguments. Volumetric (5-D) sampling runs nowhere here: refused by name.
fn grid_sampler(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let op = match em.rank(a.t("input")?)? {
        4 => "aten.grid_sampler_2d.default",
        5 => {
            return Err(Error::unsupported(format!(
                "node {}: grid_sampler on a 5-D input (grid_sampler_3d)",
                a.0.name
            )))
        }
        r => {
            return Err(Error::bad_input(format!(
                "node {}: grid_sampler takes a 4-D or 5-D input, not {r}-D",
                a.0.name
            )))
        }
    };
    let target = crate::ir::Target::parse(&format!("torch.ops.{op}"))
        .ok_or_else(|| Error::internal(format!("{op} does not parse")))?;
    let args = crate::decompose::edit::args_for(a.0, &target)?;
    let out = a.out(0)?;
    em.op_into(op, crate::decompose::edit::borrow_args(&args), out)?;
    Ok(vec![out])
}

rules! {
    "aten.grid_sampler.default" => ["aten.grid_sampler_2d.default"] grid_sampler;
    "aten.upsample_nearest1d.vec" => ["aten.arange.start_step", "aten.mul.Tensor", "aten._to_copy.default", "aten.index.Tensor"] upsample_nearest1d;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
