//! torchvision's detection ops (`roi_align`, `roi_pool`, `ps_roi_align`,
//! `ps_roi_pool`, `nms`, `deform_conv2d`): the shape rules, as
//! torchvision's fake (meta) kernels check them. `nms` keeps a number of
//! boxes only the data decides: its length is an unbacked symbol, as
//! `nonzero`'s.

use crate::ir::op::torchvision;
use super::*;

/// The input `[B, C, H, W]`, the boxes `[K, 5]` and the pooled size
/// (positive) of a RoI op: (C, K, ph, pw).
fn rois(site: &Site) -> Result<(Dim, Dim, i64, i64)> {
    let x = site.dims("input")?;
    if x.len() != 4 {
        return Err(site.fail("input", format!("has rank {}, must be 4 ([batch, channels, height, width])", x.len())));
    }
    let r = site.dims("rois")?;
    if r.len() != 2 || r[1].is_some_and(|d| d != 5) {
        return Err(site.fail("rois", format!("has dims {r:?}, must be [K, 5] (batch index, x1, y1, x2, y2)")));
    }
    let (ph, pw) = (site.sym_int("pooled_height")?, site.sym_int("pooled_width")?);
    let (Some(ph), Some(pw)) = (ph, pw) else {
        return Err(site.fail("pooled_height", "is symbolic; the pooled size must be a constant"));
    };
    site.each_above("pooled size", &[ph, pw], 0)?;
    Ok((x[1], r[0], ph, pw))
}

/// roi_align and roi_pool: `[K, C, ph, pw]` (roi_pool's argmax too).
fn roi(site: &Site) -> Result<Vec<Out>> {
    let (c, k, ph, pw) = rois(site)?;
    let dims = vec![k, c, Some(ph), Some(pw)];
    Ok(vec![Out::dims(dims.clone()), Out::dims(dims)])
}

/// ps_roi_align and ps_roi_pool: the channels split over the bins,
/// `[K, C / (ph * pw), ph, pw]`, and the channel each bin read.
fn ps_roi(site: &Site) -> Result<Vec<Out>> {
    let (c, k, ph, pw) = rois(site)?;
    let c_out = match c {
        Some(c) if c % (ph * pw) != 0 => {
            return Err(site.fail("input", format!("has {c} channels, must be a multiple of the pooled size {ph} x {pw}")))
        }
        Some(c) => Some(c / (ph * pw)),
        None => None,
    };
    let dims = vec![k, c_out, Some(ph), Some(pw)];
    Ok(vec![Out::dims(dims.clone()), Out::dims(dims)])
}

/// nms: boxes `[N, 4]`, scores `[N]`; keeps a data-dependent count.
fn nms(site: &Site) -> Result<Vec<Out>> {
    let d = site.dims("dets")?;
    if d.len() != 2 || d[1].is_some_and(|v| v != 4) {
        return Err(site.fail("dets", format!("has dims {d:?}, must be [N, 4] (x1, y1, x2, y2)")));
    }
    let s = site.dims("scores")?;
    if s.len() != 1 {
        return Err(site.fail("scores", format!("has rank {}, must be 1", s.len())));
    }
    if let (Some(a), Some(b)) = (d[0], s[0]) {
        if a != b {
            return Err(site.fail("scores", format!("has {b} elements, dets has {a} boxes")));
        }
    }
    Ok(vec![Out {
        dims: Some(vec![None]),
        dtype: Some(Dtype::Int64),
    }])
}

/// deform_conv2d: a convolution's output size, the offsets (and mask)
/// at that size.
fn deform_conv2d(site: &Site) -> Result<Vec<Out>> {
    let x = site.dims("input")?;
    let w = site.dims("weight")?;
    if x.len() != 4 || w.len() != 4 {
        return Err(site.fail("input", format!("and weight have dims {x:?} and {w:?}, both must have rank 4")));
    }
    let mut v = Vec::new();
    for n in ["stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w", "groups", "offset_groups"] {
        match site.sym_int(n)? {
            Some(i) => v.push(i),
            None => return Ok(vec![Out::dims(vec![x[0], w[0], None, None])]),
        }
    }
    let [sh, sw, ph, pw, dh, dw, groups, og] = v[..] else {
        return Err(site.fail("stride_h", "and the other window arguments are missing"));
    };
    site.each_above("stride", &[sh, sw], 0)?;
    site.each_above("dilation", &[dh, dw], 0)?;
    site.each_above("padding", &[ph, pw], -1)?;
    site.each_above("groups", &[groups, og], 0)?;
    if let (Some(c), Some(cg)) = (x[1], w[1]) {
        if cg * groups != c {
            return Err(site.fail("weight", format!("has {cg} input channels a group, input has {c} for {groups} group(s)")));
        }
        if c % og != 0 {
            return Err(site.fail("offset_groups", format!("is {og}, must divide the {c} input channels")));
        }
    }
    if let Some(o) = w[0] {
        if o % groups != 0 {
            return Err(site.fail("groups", format!("is {groups}, must divide the {o} output channels")));
        }
    }
    let size = |i: Dim, p: i64, d: i64, k: Dim, s: i64| -> Result<Dim> {
        let (Some(i), Some(k)) = (i, k) else { return Ok(None) };
        let o = (i + 2 * p - (d * (k - 1) + 1)) / s + 1;
        if o <= 0 {
            return Err(site.fail("input", format!("of size {i} gives an output of size {o} for a kernel of {k}")));
        }
        Ok(Some(o))
    };
    Ok(vec![Out::dims(vec![x[0], w[0], size(x[2], ph, dh, w[2], sh)?, size(x[3], pw, dw, w[3], sw)?])])
}

/// This family's rows: op identity -> rule.
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (torchvision::ROI_ALIGN, roi),
    (torchvision::ROI_POOL, roi),
    (torchvision::PS_ROI_ALIGN, ps_roi),
    (torchvision::PS_ROI_POOL, ps_roi),
    (torchvision::NMS, nms),
    (torchvision::DEFORM_CONV2D, deform_conv2d),
];
