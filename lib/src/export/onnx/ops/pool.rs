//! Pooling: max, average and adaptive, 1-D to 3-D: the ONNX emitters.

use super::*;

// pooling

/// A pooling op's spatial rank, kernel and stride (a single value or an
/// empty stride expanded as torch does).
fn pool_window(cx: &Cx) -> Result<(usize, Vec<i64>, Vec<i64>)> {
    let kernel = cx.ints("kernel_size")?;
    let n = if kernel.len() > 1 {
        kernel.len()
    } else {
        match cx.node.target.name.as_str() {
            n if n.contains("1d") => 1,
            n if n.contains("3d") => 3,
            _ => 2,
        }
    };
    let kernel = if kernel.len() == 1 {
        vec![kernel[0]; n]
    } else {
        kernel
    };
    let mut stride = cx.opt_ints("stride")?.unwrap_or_default();
    if stride.is_empty() {
        stride = kernel.clone();
    } else if stride.len() == 1 {
        stride = vec![stride[0]; n];
    }
    Ok((n, kernel, stride))
}

fn max_pool(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let (n, kernel, stride) = pool_window(cx)?;
    let padding = spatial(cx, "padding", n, 0)?;
    let dilation = spatial(cx, "dilation", n, 1)?;
    let ceil = cx.opt_bool("ceil_mode")?.unwrap_or(false);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let (xs, added) = batch(cx, &xs, meta.sizes.len(), n);
    let attrs = vec![
        attr_ints("kernel_shape", &kernel),
        attr_ints("strides", &stride),
        attr_ints("pads", &[padding.clone(), padding].concat()),
        attr_ints("dilations", &dilation),
        attr_int("ceil_mode", ceil as i64),
    ];
    let want_indices = cx.out_count() > 1 && cx.out_used(1);
    let ys = cx.node_n("MaxPool", &[&xs], attrs, if want_indices { 2 } else { 1 });
    let y = unbatch(cx, ys[0].clone(), added);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    if want_indices {
        // ONNX indexes the whole tensor, torch each channel's plane.
        let plane: Vec<Sym> = meta.sizes[meta.sizes.len() - n..].to_vec();
        let plane_shape = cx.sizes(&plane)?;
        let numel = cx.reduce("ReduceProd", &plane_shape, None, false);
        let idx = cx.node("Mod", &[&ys[1], &numel], vec![attr_int("fmod", 0)]);
        let idx = unbatch(cx, idx, added);
        cx.set(1, idx);
    }
    Ok(())
}

fn avg_pool(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let (n, kernel, stride) = pool_window(cx)?;
    let padding = spatial(cx, "padding", n, 0)?;
    let ceil = cx.opt_bool("ceil_mode")?.unwrap_or(false);
    let include_pad = cx.opt_bool("count_include_pad")?.unwrap_or(true);
    if cx.has("divisor_override") {
        return Err(Error::unsupported("avg_pool with divisor_override"));
    }
    let attrs = vec![
        attr_ints("kernel_shape", &kernel),
        attr_ints("strides", &stride),
        attr_ints("pads", &[padding.clone(), padding].concat()),
        attr_int("ceil_mode", ceil as i64),
        attr_int("count_include_pad", include_pad as i64),
    ];
    let rank = meta.sizes.len();
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let (xs, added) = batch(cx, x, rank, n);
        let y = cx.node("AveragePool", &[&xs], attrs);
        Ok(unbatch(cx, y, added))
    })
}

/// Global pooling for output size 1, a plain pool when the input divides
/// evenly, otherwise unsupported.
fn adaptive_avg_pool(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let output = cx.ints("output_size")?;
    let n = output.len();
    let rank = meta.sizes.len();
    let input: Option<Vec<i64>> = meta.sizes[rank - n..].iter().map(Sym::as_int).collect();
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let (xs, added) = batch(cx, x, rank, n);
        let y = if output.iter().all(|o| *o == 1) {
            cx.node("GlobalAveragePool", &[&xs], vec![])
        } else {
            let input = input
                .clone()
                .ok_or_else(|| Error::unsupported("adaptive pooling of symbolic spatial sizes"))?;
            if input
                .iter()
                .zip(&output)
                .any(|(i, o)| *o == 0 || i % o != 0)
            {
                return Err(Error::unsupported(format!(
                    "adaptive pooling of {input:?} to {output:?} (sizes that do not divide)"
                )));
            }
            let k: Vec<i64> = input.iter().zip(&output).map(|(i, o)| i / o).collect();
            cx.node(
                "AveragePool",
                &[&xs],
                vec![attr_ints("kernel_shape", &k), attr_ints("strides", &k)],
            )
        };
        Ok(unbatch(cx, y, added))
    })
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    ("aten.max_pool1d.default", max_pool),
    ("aten.max_pool2d.default", max_pool),
    ("aten.max_pool3d.default", max_pool),
    ("aten.max_pool2d_with_indices.default", max_pool),
    ("aten.max_pool3d_with_indices.default", max_pool),
    ("aten.avg_pool1d.default", avg_pool),
    ("aten.avg_pool2d.default", avg_pool),
    ("aten.avg_pool3d.default", avg_pool),
    ("aten.adaptive_avg_pool1d.default", adaptive_avg_pool),
    ("aten.adaptive_avg_pool2d.default", adaptive_avg_pool),
    ("aten._adaptive_avg_pool2d.default", adaptive_avg_pool),
    ("aten.adaptive_avg_pool3d.default", adaptive_avg_pool),
    ("aten._adaptive_avg_pool3d.default", adaptive_avg_pool),
];
