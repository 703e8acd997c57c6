//! Convolutions, transposed convolutions, im2col and col2im: the shape rules.

use crate::ir::op::aten;
use super::*;

/// One spatial dim's sliding window: kernel, stride, padding before and
/// after, dilation, and whether the count rounds up (pooling's ceil_mode).
pub(super) struct Window {
    pub kernel: i64,
    pub stride: i64,
    pub pad: (i64, i64),
    pub dilation: i64,
    pub ceil: bool,
}

/// One spatial dim of a convolution or pooling output, as torch computes
/// it; the kernel must fit the padded input.
pub(super) fn out_size(site: &Site, dim: usize, input: i64, w: Window) -> Result<i64> {
    let Window { kernel, stride, pad, dilation, ceil } = w;
    if stride < 1 {
        return Err(site.fail("stride", format!("is {stride}, must be > 0")));
    }
    let span = dilation * (kernel - 1) + 1;
    let room = input + pad.0 + pad.1 - span;
    // torch's pooling_output_shape: rounded toward negative infinity, up
    // with ceil_mode (so a kernel one stride short of the padded input
    // still has one window there)
    let mut n = (room + if ceil { stride - 1 } else { 0 }).div_euclid(stride) + 1;
    // torch: a last window that starts in the right padding is dropped
    if ceil && (n - 1) * stride >= input + pad.0 {
        n -= 1;
    }
    if n < 1 {
        return Err(site.fail(
            "input",
            format!(
                "has {input} in spatial dim {dim}: less than the kernel's {span} (padding {}+{})",
                pad.0, pad.1
            ),
        ));
    }
    Ok(n)
}

/// convolution and conv1d/2d/3d: matching ranks, positive stride and
/// dilation, padding not negative, groups that divide both channel counts.
fn convolution(site: &Site) -> Result<Vec<Out>> {
    let x = site.dims("input")?;
    let w = site.dims("weight")?;
    if w.len() < 3 || (x.len() != w.len() && x.len() + 1 != w.len()) {
        return Err(site.fail(
            "weight",
            format!("has rank {} for an input of rank {}", w.len(), x.len()),
        ));
    }
    let n = w.len() - 2;
    let batched = x.len() == w.len();
    let transposed = site.node.target.name.starts_with("conv_transpose")
        || (site.args.has("transposed") && site.args.bool("transposed")?);
    let stride = site.per_dim("stride", n, 1)?;
    let dilation = site.per_dim("dilation", n, 1)?;
    site.each_above("stride", &stride, 0)?;
    site.each_above("dilation", &dilation, 0)?;
    let groups = site.args.opt_int("groups")?.unwrap_or(1);
    if groups <= 0 {
        return Err(site.fail("groups", format!("is {groups}, must be > 0")));
    }
    let padding: Vec<(i64, i64)> = match site.args.arg("padding") {
        Argument::String(mode) if mode == "valid" => vec![(0, 0); n],
        Argument::String(_) => return Ok(vec![]), // "same": the output is the input's size
        _ => {
            let p = site.per_dim("padding", n, 0)?;
            site.each_above("padding", &p, -1)?;
            p.iter().map(|v| (*v, *v)).collect()
        }
    };
    let cin = x[if batched { 1 } else { 0 }];
    let (wo, wi) = (w[0], w[1]);
    if let Some(c) = cin {
        // a transposed weight is [in, out / groups, ...], else [out, in / groups, ...]
        let expect = if transposed { wo } else { wi.map(|k| k * groups) };
        if c % groups != 0 || expect.is_some_and(|e| e != c) {
            return Err(site.fail(
                "weight",
                format!(
                    "takes {} input channels in {groups} groups, the input has {c}",
                    expect.map_or("?".into(), |e| e.to_string())
                ),
            ));
        }
    }
    if !transposed && wo.is_some_and(|o| o % groups != 0) {
        return Err(site.fail(
            "groups",
            format!("is {groups}, which does not divide the {} output channels", wo.unwrap_or(0)),
        ));
    }
    let mut out: Vec<Dim> = Vec::new();
    if batched {
        out.push(x[0]);
    }
    out.push(if transposed { wi.map(|c| c * groups) } else { wo });
    let first = x.len() - n;
    let output_padding = site.per_dim("output_padding", n, 0).unwrap_or(vec![0; n]);
    for i in 0..n {
        out.push(match (x[first + i], w[2 + i]) {
            (Some(size), Some(k)) if transposed => Some(
                (size - 1) * stride[i] - padding[i].0 - padding[i].1
                    + dilation[i] * (k - 1)
                    + output_padding[i]
                    + 1,
            ),
            (Some(size), Some(k)) => Some(out_size(
                site,
                i,
                size,
                Window { kernel: k, stride: stride[i], pad: padding[i], dilation: dilation[i], ceil: false },
            )?),
            _ => None,
        });
    }
    Ok(vec![Out::dims(out)])
}

/// im2col: a 3-D or 4-D input, positive kernel, dilation and stride,
/// padding not negative; `[n, c * kh * kw, blocks]`.
fn im2col(site: &Site) -> Result<Vec<Out>> {
    let x = site.dims("self")?;
    if x.len() != 3 && x.len() != 4 {
        return Err(site.fail("self", format!("has rank {}, must be 3 or 4", x.len())));
    }
    let kernel = site.per_dim("kernel_size", 2, 1)?;
    let dilation = site.per_dim("dilation", 2, 1)?;
    let padding = site.per_dim("padding", 2, 0)?;
    let stride = site.per_dim("stride", 2, 1)?;
    site.each_above("kernel_size", &kernel, 0)?;
    site.each_above("dilation", &dilation, 0)?;
    site.each_above("padding", &padding, -1)?;
    site.each_above("stride", &stride, 0)?;
    let first = x.len() - 2;
    let mut blocks = Some(1);
    for i in 0..2 {
        blocks = match (blocks, x[first + i]) {
            (Some(b), Some(size)) => Some(
                b * out_size(
                    site,
                    i,
                    size,
                    Window { kernel: kernel[i], stride: stride[i], pad: (padding[i], padding[i]), dilation: dilation[i], ceil: false },
                )?,
            ),
            _ => None,
        };
    }
    let mut out = x[..first - 1].to_vec();
    out.push(x[first - 1].map(|c| c * kernel[0] * kernel[1]));
    out.push(blocks);
    Ok(vec![Out::dims(out)])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::CONVOLUTION, convolution), (aten::CONV1D, convolution),
    (aten::CONV_TRANSPOSE1D, convolution), (aten::CONV_TRANSPOSE2D_INPUT, convolution),
    (aten::CONV_TRANSPOSE3D_INPUT, convolution),
    (aten::CONV2D, convolution), (aten::CONV3D, convolution),
    (aten::CONV1D_PADDING, convolution), (aten::CONV2D_PADDING, convolution),
    (aten::CONV3D_PADDING, convolution), (aten::IM2COL, im2col),
];
