//! Resampling: upsampling, interpolation and grid sampling: the ONNX emitters.

use super::*;

fn grid_sample(cx: &mut Cx) -> Result<()> {
    let x = cx.input("input")?;
    let xd = cx.dtype("input")?;
    let grid = cx.input("grid")?;
    let gd = cx.dtype("grid")?;
    let new_names = cx.opset() >= 20;
    let mode = match (cx.int("interpolation_mode")?, new_names) {
        (0, true) => "linear",
        (0, false) => "bilinear",
        (1, _) => "nearest",
        (2, true) => "cubic",
        (2, false) => "bicubic",
        (m, _) => {
            return Err(Error::unsupported(format!(
                "grid_sampler interpolation_mode {m}"
            )))
        }
    };
    let padding = match cx.int("padding_mode")? {
        0 => "zeros",
        1 => "border",
        2 => "reflection",
        m => return Err(Error::unsupported(format!("grid_sampler padding_mode {m}"))),
    };
    let align = cx.bool("align_corners")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, xd, c)?;
    let gs = cx.cast(&grid, gd, c)?;
    let y = cx.node(
        "GridSample",
        &[&xs, &gs],
        vec![
            attr_str("mode", mode),
            attr_str("padding_mode", padding),
            attr_int("align_corners", align as i64),
        ],
    );
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// upsample_*: Resize to the recorded output sizes, or by the given scale
/// factors (torch maps coordinates with the scale when it is given).
fn resize(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let name = cx.node.target.name.clone();
    let rank = meta.sizes.len();
    let n = rank.saturating_sub(2);
    let align = cx.opt_bool("align_corners")?.unwrap_or(false);
    let mut attrs = if name.contains("nearest_exact") {
        // torch: floor((o + 0.5) * in / out); ONNX: round_prefer_ceil of the
        // half-pixel source (o + 0.5) * in / out - 0.5, the same index
        vec![
            attr_str("mode", "nearest"),
            attr_str("coordinate_transformation_mode", "half_pixel"),
            attr_str("nearest_mode", "round_prefer_ceil"),
        ]
    } else if name.contains("nearest") {
        vec![
            attr_str("mode", "nearest"),
            attr_str("coordinate_transformation_mode", "asymmetric"),
            attr_str("nearest_mode", "floor"),
        ]
    } else {
        let mode = if name.contains("bicubic") {
            "cubic"
        } else {
            "linear"
        };
        let mut a = vec![
            attr_str("mode", mode),
            attr_str(
                "coordinate_transformation_mode",
                if align {
                    "align_corners"
                } else {
                    "pytorch_half_pixel"
                },
            ),
        ];
        if mode == "cubic" {
            a.push(attr_float("cubic_coeff_a", -0.75));
        }
        a
    };
    // Scale factors: the .vec overload's list, or scales_h/scales_w/...
    let scales: Option<Vec<f64>> = if cx.node.target.overload == "vec" {
        match cx.node.arg("scale_factors") {
            Some(Argument::Floats(f)) if !f.is_empty() => Some(f.clone()),
            _ => None,
        }
    } else {
        let v: Vec<Option<f64>> = crate::schema::upsample_scale_args(n)
            .iter()
            .map(|k| cx.opt_float(k))
            .collect::<Result<_>>()?;
        v.into_iter().collect()
    };
    let out_sizes = cx.out_meta(0)?.sizes.clone();
    let (scales_in, sizes_in) = match scales {
        Some(f) if f.len() == n => {
            let all: Vec<f32> = [1.0, 1.0]
                .into_iter()
                .chain(f.iter().map(|v| *v as f32))
                .collect();
            let raw: Vec<u8> = all.iter().flat_map(|v| v.to_le_bytes()).collect();
            (
                cx.constant(Dtype::Float32, &[all.len() as i64], raw)?,
                String::new(),
            )
        }
        _ => (String::new(), cx.sizes(&out_sizes)?),
    };
    let _ = &mut attrs;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        if sizes_in.is_empty() {
            Ok(cx.node("Resize", &[x, "", &scales_in], attrs))
        } else {
            Ok(cx.node("Resize", &[x, "", "", &sizes_in], attrs))
        }
    })
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    ("aten.grid_sampler_2d.default", grid_sample),
    ("aten.grid_sampler.default", grid_sample),
    ("aten.upsample_nearest1d.default", resize),
    ("aten.upsample_nearest2d.default", resize),
    ("aten.upsample_nearest3d.default", resize),
    ("aten.upsample_nearest1d.vec", resize),
    ("aten.upsample_nearest2d.vec", resize),
    ("aten.upsample_nearest3d.vec", resize),
    ("aten.upsample_linear1d.default", resize),
    ("aten.upsample_bilinear2d.default", resize),
    ("aten.upsample_trilinear3d.default", resize),
    ("aten.upsample_linear1d.vec", resize),
    ("aten.upsample_bilinear2d.vec", resize),
    ("aten.upsample_trilinear3d.vec", resize),
    ("aten.upsample_bicubic2d.default", resize),
    ("aten.upsample_bicubic2d.vec", resize),
    ("aten._upsample_nearest_exact1d.default", resize),
    ("aten._upsample_nearest_exact2d.default", resize),
    ("aten._upsample_nearest_exact3d.default", resize),
    ("aten._upsample_nearest_exact1d.vec", resize),
    ("aten._upsample_nearest_exact2d.vec", resize),
    ("aten._upsample_nearest_exact3d.vec", resize),
];
