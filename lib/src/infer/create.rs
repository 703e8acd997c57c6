//! Tensor creation (full, zeros, arange, scalar_tensor, empty, ...): the shape rules.

use crate::ir::op::aten;
use super::pointwise::same;
use super::*;

/// full/zeros/ones/empty: sizes that are not negative.
fn sized(site: &Site) -> Result<Vec<Out>> {
    let sizes = site.sym_list("size")?;
    if let Some((i, n)) = sizes.iter().enumerate().find_map(|(i, s)| s.filter(|n| *n < 0).map(|n| (i, n))) {
        return Err(site.fail(&format!("size[{i}]"), format!("is {n}, must be >= 0")));
    }
    Ok(vec![Out::dims(sizes)])
}

/// arange: a step that is not 0 and goes from start towards end.
fn arange(site: &Site) -> Result<Vec<Out>> {
    let num = |name: &str, default: f64| -> Result<Option<f64>> {
        match site.args.arg(name) {
            Argument::None => Ok(Some(default)),
            Argument::Int(i) => Ok(Some(i as f64)),
            Argument::Float(f) => Ok(Some(f)),
            _ => Ok(None), // symbolic
        }
    };
    let (start, end, step) = (num("start", 0.0)?, num("end", 0.0)?, num("step", 1.0)?);
    if step == Some(0.0) {
        return Err(site.fail("step", "is 0, must not be"));
    }
    if let (Some(s), Some(e), Some(st)) = (start, end, step) {
        if !(s.is_finite() && e.is_finite() && st.is_finite()) {
            return Err(site.fail("start, end and step", "must be finite"));
        }
        if (e - s) / st < 0.0 {
            return Err(site.fail(
                "step",
                format!("is {st}: it goes away from end {e} (start {s})"),
            ));
        }
        return Ok(vec![Out::dims(vec![Some(((e - s) / st).ceil() as i64)])]);
    }
    Ok(vec![])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::FULL, sized), (aten::ZEROS, sized), (aten::ONES, sized),
    (aten::EMPTY_MEMORY_FORMAT, sized), (aten::NEW_ZEROS, sized),
    (aten::NEW_ONES, sized), (aten::NEW_FULL, sized),
    (aten::NEW_EMPTY, sized),
    (aten::ARANGE, arange), (aten::ARANGE_START, arange),
    (aten::ARANGE_START_STEP, arange), (aten::ZEROS_LIKE, same),
    (aten::ONES_LIKE, same), (aten::FULL_LIKE, same),
    (aten::EMPTY_LIKE, same), (aten::FILL_SCALAR, same),
];
