//! Convolutions, transposed convolutions, im2col and col2im: the ONNX emitters.

use super::*;

fn convolution(cx: &mut Cx) -> Result<()> {
    let transposed = cx.node.target.name == "convolution" && cx.bool("transposed")?;
    let x = cx.input("input")?;
    let xd = cx.dtype("input")?;
    let rank = cx.rank("input")?;
    let w = cx.input("weight")?;
    let wd = cx.dtype("weight")?;
    let n = cx.rank("weight")?.saturating_sub(2);
    let bias = cx.opt_input("bias")?;
    let stride = spatial(cx, "stride", n, 1)?;
    let dilation = spatial(cx, "dilation", n, 1)?;
    let groups = cx.opt_int("groups")?.unwrap_or(1);
    let mut attrs = vec![
        attr_ints("strides", &stride),
        attr_ints("dilations", &dilation),
        attr_int("group", groups),
    ];
    match cx.arg("padding")? {
        Argument::String(mode) => match mode.as_str() {
            "valid" => attrs.push(attr_ints("pads", &vec![0; 2 * n])),
            // torch pads the extra element at the end, like SAME_UPPER.
            "same" => attrs.push(attr_str("auto_pad", "SAME_UPPER")),
            other => return Err(Error::unsupported(format!("padding={other:?}"))),
        },
        _ => {
            let p = spatial(cx, "padding", n, 0)?;
            attrs.push(attr_ints("pads", &[p.clone(), p].concat()));
        }
    }
    let op = if transposed {
        let op = spatial(cx, "output_padding", n, 0)?;
        if op.iter().any(|v| *v != 0) {
            attrs.push(attr_ints("output_padding", &op));
        }
        "ConvTranspose"
    } else {
        "Conv"
    };
    conv_node(cx, op, (&x, xd, rank), (&w, wd), bias, n, attrs)
}

fn conv_node(
    cx: &mut Cx,
    op: &str,
    (x, xd, rank): (&str, Dtype, usize),
    (w, wd): (&str, Dtype),
    bias: Option<String>,
    n: usize,
    attrs: Vec<onnx_protobuf::AttributeProto>,
) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(x, xd, c)?;
    let ws = cx.cast(w, wd, c)?;
    let (xs, added) = batch(cx, &xs, rank, n);
    let y = match bias {
        Some(b) => {
            let bd = cx.dtype("bias")?;
            let bs = cx.cast(&b, bd, c)?;
            cx.node(op, &[&xs, &ws, &bs], attrs)
        }
        None => cx.node(op, &[&xs, &ws], attrs),
    };
    let y = unbatch(cx, y, added);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

fn conv_transpose(cx: &mut Cx) -> Result<()> {
    let x = cx.input("input")?;
    let xd = cx.dtype("input")?;
    let rank = cx.rank("input")?;
    let w = cx.input("weight")?;
    let wd = cx.dtype("weight")?;
    let n = cx.rank("weight")?.saturating_sub(2);
    let bias = cx.opt_input("bias")?;
    let stride = spatial(cx, "stride", n, 1)?;
    let dilation = spatial(cx, "dilation", n, 1)?;
    let padding = spatial(cx, "padding", n, 0)?;
    let output_padding = spatial(cx, "output_padding", n, 0)?;
    let groups = cx.opt_int("groups")?.unwrap_or(1);
    let mut attrs = vec![
        attr_ints("strides", &stride),
        attr_ints("dilations", &dilation),
        attr_int("group", groups),
        attr_ints("pads", &[padding.clone(), padding].concat()),
    ];
    if output_padding.iter().any(|v| *v != 0) {
        attrs.push(attr_ints("output_padding", &output_padding));
    }
    conv_node(
        cx,
        "ConvTranspose",
        (&x, xd, rank),
        (&w, wd),
        bias,
        n,
        attrs,
    )
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    ("aten.convolution.default", convolution),
    ("aten.conv1d.default", convolution),
    ("aten.conv2d.default", convolution),
    ("aten.conv3d.default", convolution),
    ("aten.conv1d.padding", convolution),
    ("aten.conv2d.padding", convolution),
    ("aten.conv3d.padding", convolution),
    ("aten.conv_transpose1d.default", conv_transpose),
    ("aten.conv_transpose2d.input", conv_transpose),
    ("aten.conv_transpose3d.input", conv_transpose),
];
