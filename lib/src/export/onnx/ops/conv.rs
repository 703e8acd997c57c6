//! Convolutions, transposed convolutions, im2col and col2im: the ONNX emitters.

use crate::ir::op::aten;
use super::*;

fn convolution(cx: &mut EmitNode) -> Result<()> {
    let transposed = cx.node.target.name == "convolution" && cx.bool("transposed")?;
    let x = cx.input("input")?;
    let xd = cx.dtype("input")?;
    let rank = cx.rank("input")?;
    let w = cx.input("weight")?;
    let wd = cx.dtype("weight")?;
    if xd == Dtype::Float64 || wd == Dtype::Float64 {
        // ONNX allows it; ONNX Runtime, the runtime these files are for,
        // cannot load it: refused rather than written unrunnable
        return Err(Error::unsupported(
            "a float64 convolution: ONNX Runtime's CPU provider has no float64 Conv kernel \
             (convert the model to float32 before export, or run it with ir-run)",
        ));
    }
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
            // torch pads dilation * (kernel - 1) in all, the extra element
            // at the end; as explicit pads where the kernel's size is
            // static, since ONNX Runtime takes no dilation with SAME_UPPER.
            "same" => {
                let kernel: Option<Vec<i64>> = cx.meta("weight")?.sizes[2..]
                    .iter()
                    .map(Sym::as_int)
                    .collect();
                match kernel {
                    Some(k) => {
                        let total: Vec<i64> =
                            k.iter().zip(&dilation).map(|(k, d)| d * (k - 1)).collect();
                        let begin: Vec<i64> = total.iter().map(|t| t / 2).collect();
                        let end: Vec<i64> = total.iter().zip(&begin).map(|(t, b)| t - b).collect();
                        attrs.push(attr_ints("pads", &[begin, end].concat()));
                    }
                    None => attrs.push(attr_str("auto_pad", "SAME_UPPER")),
                }
            }
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
    cx: &mut EmitNode,
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

fn conv_transpose(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("input")?;
    let xd = cx.dtype("input")?;
    let rank = cx.rank("input")?;
    let w = cx.input("weight")?;
    let wd = cx.dtype("weight")?;
    if xd == Dtype::Float64 || wd == Dtype::Float64 {
        // ONNX allows it; ONNX Runtime, the runtime these files are for,
        // cannot load it: refused rather than written unrunnable
        return Err(Error::unsupported(
            "a float64 convolution: ONNX Runtime's CPU provider has no float64 Conv kernel \
             (convert the model to float32 before export, or run it with ir-run)",
        ));
    }
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

/// col2im (fold): sums the sliding blocks of `self`, ([N,] C * kh * kw,
/// L), back into ([N,] C, oh, ow) images: ONNX's Col2Im from opset 18 for
/// float32 (the one type ONNX Runtime's has a kernel for); otherwise the
/// blocks added in turn ([`col2im_sums`]).
fn col2im(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let rank = meta.sizes.len();
    if !(2..=3).contains(&rank) {
        return Err(Error::bad_input(format!(
            "col2im takes a 2-D or 3-D input, not rank {rank}"
        )));
    }
    let geometry = Blocks::read(cx, spatial(cx, "output_size", 2, 1)?)?;
    let rows = meta.sizes[rank - 2].as_int();
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let (xs, added) = batch(cx, x, rank, 1);
        let g = &geometry;
        let y = if cx.opset() >= 18 && c == Dtype::Float32 {
            let (image, block) = (cx.const_i64s(&g.image), cx.const_i64s(&g.kernel));
            let attrs = vec![
                attr_ints("dilations", &g.dilation),
                attr_ints("pads", &[g.padding.clone(), g.padding.clone()].concat()),
                attr_ints("strides", &g.stride),
            ];
            cx.node("Col2Im", &[&xs, &image, &block], attrs)
        } else {
            let rows = rows.ok_or_else(|| {
                Error::unsupported("col2im with a symbolic channel dim (only ONNX's Col2Im, for float32 from opset 18, takes one)")
            })?;
            col2im_sums(cx, &xs, rows, g, c)?
        };
        Ok(unbatch(cx, y, added))
    })
}

/// The sliding blocks of col2im and im2col: the image's size, kernel,
/// dilation, padding and stride (two each).
struct Blocks {
    image: Vec<i64>,
    kernel: Vec<i64>,
    dilation: Vec<i64>,
    padding: Vec<i64>,
    stride: Vec<i64>,
}

impl Blocks {
    /// The node's kernel, dilation, padding and stride over `image`.
    fn read(cx: &EmitNode, image: Vec<i64>) -> Result<Blocks> {
        Ok(Blocks {
            image,
            kernel: spatial(cx, "kernel_size", 2, 1)?,
            dilation: spatial(cx, "dilation", 2, 1)?,
            padding: spatial(cx, "padding", 2, 0)?,
            stride: spatial(cx, "stride", 2, 1)?,
        })
    }

    /// How many blocks fit along spatial dim `i`.
    fn blocks(&self, i: usize) -> i64 {
        let span =
            self.image[i] + 2 * self.padding[i] - self.dilation[i] * (self.kernel[i] - 1) - 1;
        if span < 0 {
            0
        } else {
            span / self.stride[i] + 1
        }
    }
}

/// col2im as torch sums it: each kernel offset's values (`[N, C, bh,
/// bw]`) spread to the stride with zeros between, placed at the offset on
/// the padded image and added in turn (offsets row-major, torch's order),
/// the padding cropped. Additions only: an infinity stays where it lands
/// (a ConvTranspose with one-hot kernels multiplies it by 0 around it).
fn col2im_sums(cx: &mut EmitNode, x: &str, rows: i64, g: &Blocks, c: Dtype) -> Result<String> {
    // (bools add as torch's do: or)
    let add = if c == Dtype::Bool { "Or" } else { "Add" };
    let k = g.kernel[0] * g.kernel[1];
    let (bh, bw) = (g.blocks(0), g.blocks(1));
    if k <= 0 || rows % k != 0 || bh <= 0 || bw <= 0 {
        return Err(Error::bad_input(format!(
            "col2im: {rows} rows are not whole {}x{} blocks of an image of {:?}",
            g.kernel[0], g.kernel[1], g.image
        )));
    }
    let v = cx.reshape_const(x, &[-1, rows / k, k, bh, bw])?;
    let (s0, s1) = (g.stride[0], g.stride[1]);
    let (hp, wp) = (g.image[0] + 2 * g.padding[0], g.image[1] + 2 * g.padding[1]);
    let (h_reach, w_reach) = ((bh - 1) * s0 + 1, (bw - 1) * s1 + 1);
    let axis = cx.const_i64s(&[2]);
    let mut acc: Option<String> = None;
    for ki in 0..g.kernel[0] {
        for kj in 0..g.kernel[1] {
            let i = ki * g.kernel[1] + kj;
            let (a, b) = (cx.const_i64s(&[i]), cx.const_i64s(&[i + 1]));
            let part = cx.node("Slice", &[&v, &a, &b, &axis], vec![]);
            let mut part = cx.squeeze(&part, &[2]);
            if s0 > 1 || s1 > 1 {
                // [N, C, bh, 1, bw, 1] padded to [N, C, bh, s0, bw, s1]
                let u = cx.unsqueeze(&part, &[3, 5]);
                let pads = cx.const_i64s(&[0, 0, 0, 0, 0, 0, 0, 0, 0, s0 - 1, 0, s1 - 1]);
                let u = cx.node("Pad", &[&u, &pads], vec![]);
                let shape = cx.const_i64s(&[0, 0, bh * s0, bw * s1]);
                let u = cx.node("Reshape", &[&u, &shape], vec![]);
                let (z, e, ax) = (cx.const_i64s(&[0, 0]), cx.const_i64s(&[h_reach, w_reach]), cx.const_i64s(&[2, 3]));
                part = cx.node("Slice", &[&u, &z, &e, &ax], vec![]);
            }
            let (top, left) = (ki * g.dilation[0], kj * g.dilation[1]);
            let pads = cx.const_i64s(&[0, 0, top, left, 0, 0, hp - top - h_reach, wp - left - w_reach]);
            let placed = cx.node("Pad", &[&part, &pads], vec![]);
            acc = Some(match acc {
                None => placed,
                Some(s) => cx.node(add, &[&s, &placed], vec![]),
            });
        }
    }
    let acc = acc.expect("a kernel of at least one tap");
    if g.padding.iter().all(|p| *p == 0) {
        return Ok(acc);
    }
    let (a, b, ax) = (
        cx.const_i64s(&[g.padding[0], g.padding[1]]),
        cx.const_i64s(&[g.padding[0] + g.image[0], g.padding[1] + g.image[1]]),
        cx.const_i64s(&[2, 3]),
    );
    Ok(cx.node("Slice", &[&acc, &a, &b, &ax], vec![]))
}

/// im2col (unfold): the sliding blocks of `self`, ([N,] C, h, w), as
/// columns, ([N,] C * kh * kw, bh * bw), as torch decomposes it: the image
/// padded with zeros, its rows then its columns gathered at each block's
/// start plus the dilated taps (`[kh, bh]` and `[kw, bw]` indices), the
/// `[N, C, kh, bh, kw, bw]` result transposed to `[N, C, kh, kw, bh, bw]`
/// and flattened. Only copies, so exact in any dtype (a Conv with one-hot
/// kernels would turn an infinity in a block into NaNs around it).
fn im2col(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let rank = meta.sizes.len();
    if !(3..=4).contains(&rank) {
        return Err(Error::bad_input(format!(
            "im2col takes a 3-D or 4-D input, not rank {rank}"
        )));
    }
    let [c, h, w] = last_static(&meta.sizes, 3, "im2col")?[..] else {
        return Err(Error::internal("im2col: three static sizes"));
    };
    let g = Blocks::read(cx, vec![h, w])?;
    let (bh, bw) = (g.blocks(0), g.blocks(1));
    if bh <= 0 || bw <= 0 || g.kernel.iter().any(|k| *k <= 0) {
        return Err(Error::bad_input(format!(
            "im2col: no {}x{} block fits an image of {h}x{w}",
            g.kernel[0], g.kernel[1]
        )));
    }
    let (xs, added) = batch(cx, &x, rank, 2);
    let padded = if g.padding.iter().any(|p| *p != 0) {
        let (ph, pw) = (g.padding[0], g.padding[1]);
        let pads = cx.const_i64s(&[0, 0, ph, pw, 0, 0, ph, pw]);
        cx.node("Pad", &[&xs, &pads], vec![])
    } else {
        xs
    };
    let mut picked = padded;
    for (i, axis) in [(0, 2), (1, 4)] {
        let (k, b) = (g.kernel[i], g.blocks(i));
        let at: Vec<u8> = (0..k * b)
            .flat_map(|j| ((j % b) * g.stride[i] + (j / b) * g.dilation[i]).to_le_bytes())
            .collect();
        let at = cx.constant(Dtype::Int64, &[k, b], at)?;
        picked = cx.node("Gather", &[&picked, &at], vec![attr_int("axis", axis)]);
    }
    let blocks_last = cx.node("Transpose", &[&picked], vec![attr_ints("perm", &[0, 1, 2, 4, 3, 5])]);
    let y = cx.reshape_const(&blocks_last, &[-1, c * g.kernel[0] * g.kernel[1], bh * bw])?;
    let y = unbatch(cx, y, added);
    cx.set(0, y);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::CONVOLUTION, convolution),
    (aten::CONV1D, convolution),
    (aten::CONV2D, convolution),
    (aten::CONV3D, convolution),
    (aten::CONV1D_PADDING, convolution),
    (aten::CONV2D_PADDING, convolution),
    (aten::CONV3D_PADDING, convolution),
    (aten::CONV_TRANSPOSE1D, conv_transpose),
    (aten::CONV_TRANSPOSE2D_INPUT, conv_transpose),
    (aten::CONV_TRANSPOSE3D_INPUT, conv_transpose),
    (aten::COL2IM, col2im),
    (aten::IM2COL, im2col),
];
