//! Resampling: upsampling, interpolation and grid sampling: the shape rules.

use crate::ir::op::aten;
use super::*;

/// `upsample_{nearest,linear,bilinear,trilinear,nearest_exact}{1,2,3}d`
/// (`.vec` and `.default`): rank above the spatial dims, an `output_size`
/// of one non-negative size per spatial dim, else positive scales; the
/// trailing dims become the output size (floor(in * scale)).
fn upsample(site: &Site) -> Result<Vec<Out>> {
    let name = site.node.target.name.as_str();
    let k = crate::schema::upsample_spatial_dims(name);
    let arg = if site.args.has("input") { "input" } else { "self" };
    let mut dims = site.dims(arg)?;
    if dims.len() < k + 1 {
        return Err(site.fail(
            arg,
            format!("has rank {}, {name} needs rank {} or more", dims.len(), k + 1),
        ));
    }
    let off = dims.len() - k;
    let given = match site.args.arg("output_size") {
        Argument::None => Vec::new(),
        _ => site.sym_list("output_size")?,
    };
    if !given.is_empty() {
        if given.len() != k {
            return Err(site.fail(
                "output_size",
                format!("has {} values for {k} spatial dims", given.len()),
            ));
        }
        for (i, s) in given.iter().enumerate() {
            if let Some(n) = s.filter(|n| *n < 0) {
                return Err(site.fail(&format!("output_size[{i}]"), format!("is {n}, must be >= 0")));
            }
            dims[off + i] = *s;
        }
        return Ok(vec![Out::dims(dims)]);
    }
    let (scale_arg, scales): (&str, Vec<Option<f64>>) = match site.args.arg("scale_factors") {
        Argument::Floats(v) if !v.is_empty() => {
            if v.len() != k {
                return Err(site.fail(
                    "scale_factors",
                    format!("has {} values for {k} spatial dims", v.len()),
                ));
            }
            ("scale_factors", v.iter().map(|f| Some(*f)).collect())
        }
        _ => {
            let v: Vec<Option<f64>> = crate::schema::upsample_scale_args(k)
                .iter()
                .map(|n| site.args.opt_float(n))
                .collect::<Result<_>>()?;
            if v.iter().all(Option::is_none) {
                return Err(site.fail("output_size", "and the scale factors are both absent"));
            }
            ("scales", v)
        }
    };
    for (i, s) in scales.iter().enumerate() {
        match s {
            Some(f) if *f <= 0.0 || !f.is_finite() => {
                return Err(site.fail(&format!("{scale_arg}[{i}]"), format!("is {f}, must be > 0")))
            }
            Some(f) => dims[off + i] = dims[off + i].map(|n| (n as f64 * f).floor() as i64),
            None => dims[off + i] = None,
        }
    }
    Ok(vec![Out::dims(dims)])
}

/// This family's rows: op identity -> rule.
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::UPSAMPLE_NEAREST1D_VEC, upsample),
    (aten::UPSAMPLE_NEAREST1D, upsample),
    (aten::UPSAMPLE_NEAREST2D_VEC, upsample),
    (aten::UPSAMPLE_NEAREST2D, upsample),
    (aten::UPSAMPLE_NEAREST3D_VEC, upsample),
    (aten::UPSAMPLE_NEAREST3D, upsample),
    (aten::_UPSAMPLE_NEAREST_EXACT1D_VEC, upsample),
    (aten::_UPSAMPLE_NEAREST_EXACT1D, upsample),
    (aten::_UPSAMPLE_NEAREST_EXACT2D_VEC, upsample),
    (aten::_UPSAMPLE_NEAREST_EXACT2D, upsample),
    (aten::_UPSAMPLE_NEAREST_EXACT3D_VEC, upsample),
    (aten::_UPSAMPLE_NEAREST_EXACT3D, upsample),
    (aten::UPSAMPLE_LINEAR1D_VEC, upsample),
    (aten::UPSAMPLE_LINEAR1D, upsample),
    (aten::UPSAMPLE_BILINEAR2D_VEC, upsample),
    (aten::UPSAMPLE_BILINEAR2D, upsample),
    (aten::UPSAMPLE_TRILINEAR3D_VEC, upsample),
    (aten::UPSAMPLE_TRILINEAR3D, upsample),
    (aten::UPSAMPLE_BICUBIC2D_VEC, upsample),
    (aten::UPSAMPLE_BICUBIC2D, upsample),
];
