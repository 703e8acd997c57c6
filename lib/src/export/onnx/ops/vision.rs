//! torchvision's detection ops: the ONNX emitters.
//!
//! - `roi_align` -> `RoiAlign` (opset 16+: `coordinate_transformation_mode`
//!   `half_pixel` for `aligned=True`, `output_half_pixel` for False), the
//!   boxes' batch index column split off and cast to int64 (truncated, as
//!   torchvision's `(int)`).
//! - `ps_roi_align` -> `RoiAlign` in `half_pixel` over every channel, then
//!   each bin's own channel gathered; a box whose adaptive sampling grid is
//!   empty gives NaN, as torchvision's 0 / 0.
//! - `roi_pool` -> `MaxRoiPool` (the same rounding and clipping as
//!   torchvision's kernel); its argmax output has no ONNX form.
//! - `nms` -> `NonMaxSuppression` over one batch and one class (boxes
//!   `[1, N, 4]` as corners, scores `[1, 1, N]`, every box allowed), the
//!   selected boxes' column 2: ONNX Runtime suppresses on `iou >
//!   threshold` and picks in descending score, ties by index, as
//!   torchvision's stable sort.
//! - `deform_conv2d` -> `DeformConv` (opset 19+).
//! - `ps_roi_pool` is refused: no ONNX op averages RoI bins.

use crate::ir::op::torchvision;
use super::*;

/// The boxes of a RoI op split as ONNX takes them: corners `[K, 4]`
/// and batch indices `[K]` as int64.
fn split_rois(cx: &mut EmitNode) -> Result<(String, String)> {
    let rois = cx.input("rois")?;
    let idx = cx.const_i64s(&[0]);
    let batch = cx.node("Gather", &[&rois, &idx], vec![attr_int("axis", 1)]);
    let batch = cx.reshape_const(&batch, &[-1])?;
    let batch = cx.cast(&batch, cx.dtype("rois")?, Dtype::Int64)?;
    let (a, b, axis) = (cx.const_i64s(&[1]), cx.const_i64s(&[5]), cx.const_i64s(&[1]));
    let corners = cx.node("Slice", &[&rois, &a, &b, &axis], vec![]);
    Ok((corners, batch))
}

/// The float dtypes ONNX Runtime's RoI kernels take.
fn roi_dtype(cx: &EmitNode, name: &str, onnx_op: &str) -> Result<Dtype> {
    let d = cx.dtype(name)?;
    if !matches!(d, Dtype::Float32 | Dtype::Float64) {
        return Err(Error::unsupported(format!(
            "{} is {}; ONNX {onnx_op} takes float32 and float64 here",
            name,
            d.torch_name()
        )));
    }
    Ok(d)
}

fn spatial_scale(cx: &EmitNode) -> Result<f64> {
    cx.opt_float("spatial_scale")?
        .ok_or_else(|| Error::bad_input("argument 'spatial_scale' is missing"))
}

fn pooled(cx: &EmitNode) -> Result<(i64, i64)> {
    Ok((cx.int("pooled_height")?, cx.int("pooled_width")?))
}

fn need_opset(cx: &EmitNode, min: i64, what: &str) -> Result<()> {
    if cx.opset() < min {
        return Err(Error::unsupported(format!(
            "{what} needs opset {min} or later (asked for {})",
            cx.opset()
        )));
    }
    Ok(())
}

/// `RoiAlign` over the input, torchvision's `sampling_ratio <= 0`
/// (adaptive) as ONNX's 0.
fn roi_align_node(cx: &mut EmitNode, half_pixel: bool, sampling_ratio: i64) -> Result<String> {
    let (ph, pw) = pooled(cx)?;
    let scale = spatial_scale(cx)?;
    let x = cx.input("input")?;
    let (corners, batch) = split_rois(cx)?;
    let mode = if half_pixel { "half_pixel" } else { "output_half_pixel" };
    Ok(cx.node(
        "RoiAlign",
        &[&x, &corners, &batch],
        vec![
            attr_str("coordinate_transformation_mode", mode),
            attr_str("mode", "avg"),
            attr_int("output_height", ph),
            attr_int("output_width", pw),
            attr_int("sampling_ratio", sampling_ratio.max(0)),
            attr_float("spatial_scale", scale),
        ],
    ))
}

fn roi_align(cx: &mut EmitNode) -> Result<()> {
    need_opset(cx, 16, "RoiAlign with coordinate_transformation_mode")?;
    roi_dtype(cx, "input", "RoiAlign")?;
    let aligned = cx.bool("aligned")?;
    let sampling_ratio = cx.int("sampling_ratio")?;
    let y = roi_align_node(cx, aligned, sampling_ratio)?;
    cx.set(0, y);
    Ok(())
}

/// Boxes whose adaptive grid `ceil(h / ph) * ceil(w / pw)` is 0 (as
/// torchvision computes h and w: corners scaled, less 0.5, subtracted):
/// a `[K, 1, 1, 1]` bool.
fn empty_grid(cx: &mut EmitNode, dtype: Dtype, ph: i64, pw: i64) -> Result<String> {
    let rois = cx.input("rois")?;
    let scale = spatial_scale(cx)?;
    let (a, b, axis) = (cx.const_i64s(&[1]), cx.const_i64s(&[5]), cx.const_i64s(&[1]));
    let c = cx.node("Slice", &[&rois, &a, &b, &axis], vec![]);
    let s = cx.scalar(Lit::Float(scale), dtype)?;
    let c = cx.node("Mul", &[&c, &s], vec![]);
    let half = cx.scalar(Lit::Float(0.5), dtype)?;
    let c = cx.node("Sub", &[&c, &half], vec![]);
    let pick = |cx: &mut EmitNode, i: i64| {
        let at = cx.const_i64s(&[i]);
        cx.node("Gather", &[&c, &at], vec![attr_int("axis", 1)])
    };
    let (x1, y1, x2, y2) = (pick(cx, 0), pick(cx, 1), pick(cx, 2), pick(cx, 3));
    let w = cx.node("Sub", &[&x2, &x1], vec![]);
    let h = cx.node("Sub", &[&y2, &y1], vec![]);
    let phs = cx.scalar(Lit::Float(ph as f64), dtype)?;
    let pws = cx.scalar(Lit::Float(pw as f64), dtype)?;
    let gh = cx.node("Div", &[&h, &phs], vec![]);
    let gh = cx.node("Ceil", &[&gh], vec![]);
    let gw = cx.node("Div", &[&w, &pws], vec![]);
    let gw = cx.node("Ceil", &[&gw], vec![]);
    let g = cx.node("Mul", &[&gh, &gw], vec![]);
    let zero = cx.scalar(Lit::Float(0.0), dtype)?;
    let e = cx.node("Equal", &[&g, &zero], vec![]);
    cx.reshape_const(&e, &[-1, 1, 1, 1])
}

/// The channel each bin of a position-sensitive op reads, `[K, C', ph,
/// pw]` int32: `c' * ph * pw + bin`, whatever the box.
fn channel_mapping(cx: &mut EmitNode, pooled_out: &str, c_out: i64, ph: i64, pw: i64) -> Result<String> {
    let n = c_out * ph * pw;
    let raw: Vec<u8> = (0..n as i32).flat_map(|v| v.to_le_bytes()).collect();
    let map = cx.constant(Dtype::Int32, &[1, c_out, ph, pw], raw)?;
    let shape = cx.shape(pooled_out);
    Ok(cx.node("Expand", &[&map, &shape], vec![]))
}

fn ps_roi_align(cx: &mut EmitNode) -> Result<()> {
    need_opset(cx, 16, "RoiAlign with coordinate_transformation_mode")?;
    let dtype = roi_dtype(cx, "input", "RoiAlign")?;
    let (ph, pw) = pooled(cx)?;
    let c = match cx.meta("input")?.sizes.get(1).and_then(Sym::as_int) {
        Some(c) if c % (ph * pw) == 0 => c,
        _ => {
            return Err(Error::unsupported(
                "ps_roi_align over a symbolic channel count (the bins' channels are gathered by constant indices)",
            ))
        }
    };
    let sampling_ratio = cx.int("sampling_ratio")?;
    let bins = ph * pw;
    let c_out = c / bins;
    // every channel pooled at every bin: [K, C, ph, pw] -> [K, C', bins * bins]
    let all = roi_align_node(cx, true, sampling_ratio)?;
    let flat = cx.reshape_const(&all, &[-1, c_out, bins * bins])?;
    // bin b of channel c' * bins + b: the diagonal
    let diag = cx.const_i64s(&(0..bins).map(|b| b * bins + b).collect::<Vec<_>>());
    let y = cx.node("Gather", &[&flat, &diag], vec![attr_int("axis", 2)]);
    let mut y = cx.reshape_const(&y, &[-1, c_out, ph, pw])?;
    if sampling_ratio <= 0 {
        // torchvision divides by the grid's size: 0 / 0 where it is empty
        let empty = empty_grid(cx, dtype, ph, pw)?;
        let nan = cx.scalar(Lit::Float(f64::NAN), dtype)?;
        y = cx.node("Where", &[&empty, &nan, &y], vec![]);
    }
    if cx.out_used(1) {
        let m = channel_mapping(cx, &y, c_out, ph, pw)?;
        cx.set(1, m);
    }
    cx.set(0, y);
    Ok(())
}

fn roi_pool(cx: &mut EmitNode) -> Result<()> {
    if cx.out_used(1) {
        return Err(Error::unsupported(
            "roi_pool's argmax output is read; ONNX MaxRoiPool gives only the pooled values",
        ));
    }
    roi_dtype(cx, "input", "MaxRoiPool")?;
    let (ph, pw) = pooled(cx)?;
    let scale = spatial_scale(cx)?;
    let x = cx.input("input")?;
    let rois = cx.input("rois")?;
    let y = cx.node(
        "MaxRoiPool",
        &[&x, &rois],
        vec![attr_ints("pooled_shape", &[ph, pw]), attr_float("spatial_scale", scale)],
    );
    cx.set(0, y);
    Ok(())
}

fn ps_roi_pool(_cx: &mut EmitNode) -> Result<()> {
    Err(Error::unsupported(
        "ps_roi_pool averages integer RoI bins; ONNX has no such op (MaxRoiPool takes the maximum, RoiAlign samples bilinearly)",
    ))
}

fn nms(cx: &mut EmitNode) -> Result<()> {
    if cx.dtype("dets")? != Dtype::Float32 || cx.dtype("scores")? != Dtype::Float32 {
        return Err(Error::unsupported(format!(
            "nms over {} boxes; ONNX NonMaxSuppression takes float32 (a cast could change which boxes tie)",
            cx.dtype("dets")?.torch_name()
        )));
    }
    let threshold = cx
        .opt_float("iou_threshold")?
        .ok_or_else(|| Error::bad_input("argument 'iou_threshold' is missing"))?;
    let dets = cx.input("dets")?;
    let scores = cx.input("scores")?;
    let boxes = cx.unsqueeze(&dets, &[0]);
    let scores3 = cx.reshape_const(&scores, &[1, 1, -1])?;
    // every box may be kept: max_output_boxes_per_class = N
    let n = cx.shape(&scores);
    let iou = cx.scalar(Lit::Float(threshold), Dtype::Float32)?;
    let sel = cx.node(
        "NonMaxSuppression",
        &[&boxes, &scores3, &n, &iou],
        vec![attr_int("center_point_box", 0)],
    );
    let col = cx.const_i64(2);
    let keep = cx.node("Gather", &[&sel, &col], vec![attr_int("axis", 1)]);
    cx.set(0, keep);
    Ok(())
}

fn deform_conv2d(cx: &mut EmitNode) -> Result<()> {
    need_opset(cx, 19, "deform_conv2d (ONNX DeformConv)")?;
    roi_dtype(cx, "input", "DeformConv")?;
    let w = cx.meta("weight")?;
    let (Some(kh), Some(kw)) = (
        w.sizes.get(2).and_then(Sym::as_int),
        w.sizes.get(3).and_then(Sym::as_int),
    ) else {
        return Err(Error::unsupported("deform_conv2d with a symbolic kernel size"));
    };
    let x = cx.input("input")?;
    let weight = cx.input("weight")?;
    let offset = cx.input("offset")?;
    let bias = cx.input("bias")?;
    let mut inputs = vec![x, weight, offset, bias];
    if cx.bool("use_mask")? {
        inputs.push(cx.input("mask")?);
    }
    let get = |n: &str| cx.int(n);
    let (ph, pw) = (get("pad_h")?, get("pad_w")?);
    let attrs = vec![
        attr_ints("dilations", &[get("dilation_h")?, get("dilation_w")?]),
        attr_int("group", get("groups")?),
        attr_ints("kernel_shape", &[kh, kw]),
        attr_int("offset_group", get("offset_groups")?),
        attr_ints("pads", &[ph, pw, ph, pw]),
        attr_ints("strides", &[get("stride_h")?, get("stride_w")?]),
    ];
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let y = cx.node("DeformConv", &refs, attrs);
    cx.set(0, y);
    Ok(())
}

/// `_cuda_version`: an import-time check traced into the graph, whose
/// result the graph does not keep: nothing to emit.
fn cuda_version(cx: &mut EmitNode) -> Result<()> {
    if (0..cx.out_count()).any(|i| cx.out_used(i)) {
        return Err(Error::unsupported(
            "torchvision's CUDA version is read by the graph; it has no ONNX form",
        ));
    }
    Ok(())
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, Emit)] = &[
    (torchvision::ROI_ALIGN, roi_align),
    (torchvision::ROI_POOL, roi_pool),
    (torchvision::PS_ROI_ALIGN, ps_roi_align),
    (torchvision::PS_ROI_POOL, ps_roi_pool),
    (torchvision::NMS, nms),
    (torchvision::DEFORM_CONV2D, deform_conv2d),
    (torchvision::_CUDA_VERSION, cuda_version),
];
