//! Resampling: upsampling, interpolation and grid sampling: the ONNX emitters.

use crate::ir::op::aten;
use super::*;

fn grid_sample(cx: &mut EmitNode) -> Result<()> {
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

/// torch's `compute_scales_value`: 1 / the given scale, else in / out.
fn source_ratio(n_in: i64, n_out: i64, scale: Option<f64>) -> f64 {
    match scale {
        Some(s) if s > 0.0 => 1.0 / s,
        _ if n_out > 0 => n_in as f64 / n_out as f64,
        _ => 0.0,
    }
}

/// Nearest and linear upsampling as torch's CPU kernels compute them,
/// one spatial dim after another (the executor's `upsample_nearest` and
/// `upsample_linear`): a Gather of each output's source index (nearest),
/// or of its two taps, weighted and added (linear: a weight of 0 times an
/// infinity is NaN there, where ONNX's Resize skips the tap). `None`
/// where the sizes are symbolic or the mode is cubic.
fn upsample_gather(cx: &mut EmitNode, x: &str, meta: &TensorMeta) -> Result<Option<String>> {
    let name = cx.node.target.name.clone();
    if name.contains("bicubic") {
        return Ok(None);
    }
    let k = crate::schema::upsample_spatial_dims(&name);
    let rank = meta.sizes.len();
    let (Ok(input), Ok(output)) = (
        last_static(&meta.sizes, k, &name),
        last_static(&cx.out_meta(0)?.sizes, k, &name),
    ) else {
        return Ok(None);
    };
    let scales: Vec<Option<f64>> = match cx.node.arg("scale_factors") {
        Some(Argument::Floats(v)) if !v.is_empty() => (0..k).map(|i| v.get(i).or(v.last()).copied()).collect(),
        _ => crate::schema::upsample_scale_args(k)
            .iter()
            .map(|n| cx.opt_float(n))
            .collect::<Result<_>>()?,
    };
    let exact = name.contains("exact");
    let nearest = name.contains("nearest");
    let align = !nearest && cx.opt_bool("align_corners")?.unwrap_or(false);
    let out = cx.out_dtype(0)?;
    let c = if nearest { meta.dtype } else { cx.compute(out) };
    if !nearest && !c.is_floating() {
        return Ok(None);
    }
    let mut t = cx.cast(x, meta.dtype, c)?;
    for i in 0..k {
        let (n_in, n_out, scale) = (input[i], output[i], scales[i]);
        let d = (rank - k + i) as i64;
        if n_out > 0 && n_in == 0 {
            return Err(Error::bad_input(format!("{name}: an empty input cannot be upsampled")));
        }
        if nearest {
            // in float32, as torch's nearest_idx
            let ratio = source_ratio(n_in, n_out, scale) as f32;
            let ids: Vec<i64> = (0..n_out)
                .map(|o| {
                    let src = if exact {
                        ((o as f32 + 0.5) * ratio).floor() as i64
                    } else if n_out == n_in {
                        o
                    } else if n_out == 2 * n_in {
                        o / 2
                    } else {
                        (o as f32 * ratio).floor() as i64
                    };
                    src.min(n_in - 1).max(0)
                })
                .collect();
            if ids.iter().enumerate().all(|(o, s)| *s == o as i64) && n_in == n_out {
                continue;
            }
            let ids = cx.const_i64s(&ids);
            t = cx.node("Gather", &[&t, &ids], vec![attr_int("axis", d)]);
            continue;
        }
        let ratio = if align {
            if n_out > 1 { (n_in as f64 - 1.0) / (n_out as f64 - 1.0) } else { 0.0 }
        } else {
            source_ratio(n_in, n_out, scale)
        };
        let mut i0 = Vec::new();
        let mut i1 = Vec::new();
        let mut w0 = Vec::new();
        let mut w1 = Vec::new();
        for o in 0..n_out {
            let src = if align { ratio * o as f64 } else { (ratio * (o as f64 + 0.5) - 0.5).max(0.0) };
            let last = n_in - 1;
            let a = (src.floor() as i64).min(last);
            let lambda = (src - a as f64).clamp(0.0, 1.0);
            i0.push(a);
            i1.push(if a < last { a + 1 } else { a });
            w0.push(1.0 - lambda);
            w1.push(lambda);
        }
        // weights [n_out, 1, ..., 1], broadcasting over the dims after d
        let mut wshape = vec![n_out];
        wshape.extend(std::iter::repeat_n(1, rank - d as usize - 1));
        let weights = |cx: &mut EmitNode, w: &[f64]| -> Result<String> {
            let (dt, raw): (Dtype, Vec<u8>) = if c == Dtype::Float64 {
                (c, w.iter().flat_map(|v| v.to_le_bytes()).collect())
            } else {
                (Dtype::Float32, w.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect())
            };
            let k = cx.constant(dt, &wshape, raw)?;
            cx.cast(&k, dt, c)
        };
        let (i0, i1) = (cx.const_i64s(&i0), cx.const_i64s(&i1));
        let (w0, w1) = (weights(cx, &w0)?, weights(cx, &w1)?);
        let g0 = cx.node("Gather", &[&t, &i0], vec![attr_int("axis", d)]);
        let g1 = cx.node("Gather", &[&t, &i1], vec![attr_int("axis", d)]);
        let p0 = cx.node("Mul", &[&g0, &w0], vec![]);
        let p1 = cx.node("Mul", &[&g1, &w1], vec![]);
        t = cx.node("Add", &[&p0, &p1], vec![]);
    }
    Ok(Some(cx.cast(&t, c, out)?))
}

/// upsample_*: torch's own arithmetic where the sizes are static
/// ([`upsample_gather`]); otherwise Resize to the recorded output sizes,
/// or by the given scale factors (torch maps coordinates with the scale
/// when it is given).
fn resize(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    if let Some(y) = upsample_gather(cx, &x, meta)? {
        cx.set(0, y);
        return Ok(());
    }
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
    (aten::GRID_SAMPLER_2D, grid_sample),
    (aten::GRID_SAMPLER, grid_sample),
    (aten::UPSAMPLE_NEAREST1D, resize),
    (aten::UPSAMPLE_NEAREST2D, resize),
    (aten::UPSAMPLE_NEAREST3D, resize),
    (aten::UPSAMPLE_NEAREST1D_VEC, resize),
    (aten::UPSAMPLE_NEAREST2D_VEC, resize),
    (aten::UPSAMPLE_NEAREST3D_VEC, resize),
    (aten::UPSAMPLE_LINEAR1D, resize),
    (aten::UPSAMPLE_BILINEAR2D, resize),
    (aten::UPSAMPLE_TRILINEAR3D, resize),
    (aten::UPSAMPLE_LINEAR1D_VEC, resize),
    (aten::UPSAMPLE_BILINEAR2D_VEC, resize),
    (aten::UPSAMPLE_TRILINEAR3D_VEC, resize),
    (aten::UPSAMPLE_BICUBIC2D, resize),
    (aten::UPSAMPLE_BICUBIC2D_VEC, resize),
    (aten::_UPSAMPLE_NEAREST_EXACT1D, resize),
    (aten::_UPSAMPLE_NEAREST_EXACT2D, resize),
    (aten::_UPSAMPLE_NEAREST_EXACT3D, resize),
    (aten::_UPSAMPLE_NEAREST_EXACT1D_VEC, resize),
    (aten::_UPSAMPLE_NEAREST_EXACT2D_VEC, resize),
    (aten::_UPSAMPLE_NEAREST_EXACT3D_VEC, resize),
];
