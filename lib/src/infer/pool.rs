//! Pooling: max, average and adaptive, 1-D to 3-D: the shape rules.

use crate::ir::op::aten;
use super::conv::{out_size, Window};
use super::*;

/// max/avg pooling over the last `n` dims: a positive kernel, stride and
/// dilation, padding at most half the kernel.
fn pool(site: &Site, n: usize) -> Result<Vec<Out>> {
    let x = site.dims("self")?;
    if x.len() != n + 1 && x.len() != n + 2 {
        return Err(site.fail("self", format!("has rank {}, must be {} or {}", x.len(), n + 1, n + 2)));
    }
    let kernel = site.per_dim("kernel_size", n, 1)?;
    site.each_above("kernel_size", &kernel, 0)?;
    let stride = match site.args.arg("stride") {
        Argument::Ints(v) if v.is_empty() => kernel.clone(),
        Argument::None => kernel.clone(),
        _ => site.per_dim("stride", n, 1)?,
    };
    site.each_above("stride", &stride, 0)?;
    let padding = site.per_dim("padding", n, 0)?;
    site.each_above("padding", &padding, -1)?;
    let dilation = site.per_dim("dilation", n, 1)?;
    site.each_above("dilation", &dilation, 0)?;
    for i in 0..n {
        let span = dilation[i] * (kernel[i] - 1) + 1;
        if 2 * padding[i] > span {
            return Err(site.fail(
                &format!("padding[{i}]"),
                format!("is {}, must be at most half the kernel's span ({span})", padding[i]),
            ));
        }
    }
    let ceil = site.args.has("ceil_mode") && site.args.bool("ceil_mode")?;
    let first = x.len() - n;
    let mut out = x[..first].to_vec();
    for i in 0..n {
        out.push(match x[first + i] {
            Some(size) => Some(out_size(
                site,
                i,
                size,
                Window {
                    kernel: kernel[i],
                    stride: stride[i],
                    pad: (padding[i], padding[i]),
                    dilation: dilation[i],
                    ceil,
                },
            )?),
            None => None,
        });
    }
    Ok(vec![Out::dims(out.clone()), Out::dims(out)])
}

/// The output of an op that takes the last `n` dims of `self` to the
/// sizes of `output_size` (none negative): the leading dims, then those.
fn to_size(site: &Site, n: usize) -> Result<Vec<Dim>> {
    let x = site.dims("self")?;
    if x.len() != n + 1 && x.len() != n + 2 {
        return Err(site.fail("self", format!("has rank {}, must be {} or {}", x.len(), n + 1, n + 2)));
    }
    let size = site.sym_list("output_size")?;
    if size.len() != n {
        return Err(site.fail("output_size", format!("has {} sizes, must be {n}", size.len())));
    }
    if let Some((i, v)) = size.iter().enumerate().find_map(|(i, s)| s.filter(|v| *v < 0).map(|v| (i, v))) {
        return Err(site.fail(&format!("output_size[{i}]"), format!("is {v}, must be >= 0")));
    }
    let mut out = x[..x.len() - n].to_vec();
    out.extend(size);
    Ok(out)
}

/// adaptive pooling to `output_size` over the last `n` dims.
fn adaptive(site: &Site, n: usize) -> Result<Vec<Out>> {
    let out = to_size(site, n)?;
    Ok(vec![Out::dims(out.clone()), Out::dims(out)])
}

/// max_unpool: indices of the input's shape, the planes unpooled to
/// `output_size`.
fn unpool(site: &Site, n: usize) -> Result<Vec<Out>> {
    let out = to_size(site, n)?;
    let (x, idx) = (site.dims("self")?, site.dims("indices")?);
    let differ = idx.len() != x.len()
        || x.iter().zip(&idx).any(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a != b));
    if differ {
        return Err(site.fail("indices", "must have the shape of self"));
    }
    Ok(vec![Out::dims(out)])
}

/// fractional max pooling to `output_size` with windows of `kernel_size`
/// (positive) that fit the input.
fn fractional(site: &Site, n: usize) -> Result<Vec<Out>> {
    let out = to_size(site, n)?;
    let kernel = site.per_dim("kernel_size", n, 1)?;
    site.each_above("kernel_size", &kernel, 0)?;
    let x = site.dims("self")?;
    let first = x.len() - n;
    for i in 0..n {
        if let (Some(input), Some(o)) = (x[first + i], out[first + i]) {
            if o + kernel[i] - 1 > input {
                return Err(site.fail(
                    &format!("kernel_size[{i}]"),
                    format!("is {}, too large for {o} outputs from an input of {input}", kernel[i]),
                ));
            }
        }
    }
    Ok(vec![Out::dims(out.clone()), Out::dims(out)])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::MAX_POOL1D, |s| pool(s, 1)), (aten::MAX_POOL2D, |s| pool(s, 2)),
    (aten::MAX_POOL3D, |s| pool(s, 3)),
    (aten::MAX_POOL2D_WITH_INDICES, |s| pool(s, 2)),
    (aten::MAX_POOL3D_WITH_INDICES, |s| pool(s, 3)),
    (aten::AVG_POOL1D, |s| pool(s, 1)), (aten::AVG_POOL2D, |s| pool(s, 2)),
    (aten::AVG_POOL3D, |s| pool(s, 3)),
    (aten::ADAPTIVE_AVG_POOL1D, |s| adaptive(s, 1)),
    (aten::ADAPTIVE_AVG_POOL2D, |s| adaptive(s, 2)),
    (aten::_ADAPTIVE_AVG_POOL2D, |s| adaptive(s, 2)),
    (aten::ADAPTIVE_MAX_POOL1D, |s| adaptive(s, 1)),
    (aten::ADAPTIVE_MAX_POOL2D, |s| adaptive(s, 2)),
    (aten::ADAPTIVE_MAX_POOL3D, |s| adaptive(s, 3)),
    (aten::MAX_UNPOOL2D, |s| unpool(s, 2)), (aten::MAX_UNPOOL3D, |s| unpool(s, 3)),
    (aten::FRACTIONAL_MAX_POOL2D, |s| fractional(s, 2)),
    (aten::FRACTIONAL_MAX_POOL3D, |s| fractional(s, 3)),
];
