//! Resampling: upsampling, interpolation and grid sampling: the decomposition rules.

use crate::ir::op::aten;
use super::*;

/// What an upsampling node asks for: its input, the output sizes it gives
/// (empty: none), and its scale factors (`scale_factors`, or `scales*` of
/// the `.default` overload; `None` unless every spatial dim has one).
struct Resize {
    x: ValueId,
    sizes: Vec<SymRef>,
    scales: Option<Vec<f64>>,
}

fn resize_args(a: &NodeArgs, k: usize) -> Result<Resize> {
    let x = if a.has("input") { a.tensor("input")? } else { a.tensor("self")? };
    let sizes = match a.arg("output_size") {
        Argument::None => Vec::new(),
        _ => a.syms("output_size")?,
    };
    let scales = match a.arg("scale_factors") {
        Argument::Floats(f) if f.len() == k => Some(f),
        _ => {
            crate::schema::upsample_scale_args(k)
                .iter()
                .map(|n| if a.has(n) { a.opt_float(n) } else { Ok(None) })
                .collect::<Result<Option<Vec<f64>>>>()?
        }
    };
    if sizes.is_empty() && scales.is_none() {
        return Err(Error::bad_input(format!(
            "node {}: neither output_size nor scale factors for {k} spatial dims",
            a.0.name
        )));
    }
    Ok(Resize { x, sizes, scales })
}

/// One core 2-D upsampling (`upsample_nearest2d.vec` or
/// `upsample_bilinear2d.vec`) of `x` to `out_hw`, by the scales when given
/// (they decide torch's source positions), else by the sizes.
fn upsample_2d(
    em: &mut Emitter,
    a: &NodeArgs,
    x: ValueId,
    sizes: Vec<SymRef>,
    scales: Option<Vec<f64>>,
    out_hw: [Sym; 2],
    out: Option<ValueId>,
) -> Result<ValueId> {
    let linear = a.0.target.name.contains("linear");
    let mut dims = em.sizes(x)?;
    let r = dims.len();
    dims[r - 2..].clone_from_slice(&out_hw);
    let meta = em.meta_like(x, em.dtype(x)?, dims)?;
    let (size_arg, scale_arg) = match scales {
        Some(s) => (Argument::None, Argument::Floats(s)),
        None => (sym_ints_arg(&sizes), Argument::None),
    };
    let mut args = vec![
        ("input", Argument::Tensor(x)),
        ("output_size", size_arg),
        ("scale_factors", scale_arg),
    ];
    let op = if linear {
        args.push(("align_corners", Argument::Bool(a.bool("align_corners")?)));
        aten::UPSAMPLE_BILINEAR2D_VEC
    } else {
        aten::UPSAMPLE_NEAREST2D_VEC
    };
    em.op_to(op, args, out, meta)
}

/// 1-D and 3-D nearest and linear upsampling (`upsample_nearest1d`,
/// `upsample_linear1d`, `upsample_nearest3d`, `upsample_trilinear3d`, `.vec`
/// or `.default`) as the core 2-D ops. Both modes are separable, and an
/// axis resized to its own size at scale 1 maps each index to itself in
/// torch's source-index arithmetic (nearest, linear, aligned corners), so:
/// 1-D is the 2-D op over a height of 1; 3-D is the 2-D op over (H, W) with
/// D folded into the channels, then over (D, H*W). Sizes may be symbolic.
fn upsample_via_2d(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let k = if a.0.target.name.ends_with("3d") { 3 } else { 1 };
    let rz = resize_args(a, k)?;
    let (x, out) = (rz.x, a.out(0)?);
    let r = em.rank(x)?;
    let out_sizes = em.sizes(out)?;
    if r < k + 1 || out_sizes.len() != r {
        return Err(Error::bad_input(format!(
            "node {}: {} of a tensor of rank {r}",
            a.0.name, a.0.target.name
        )));
    }
    if k == 1 {
        let x2 = unsqueeze(em, x, r - 1)?;
        let mut sizes = vec![SymRef::Int(1)];
        sizes.extend(rz.sizes);
        let scales = rz.scales.map(|s| vec![1.0, s[0]]);
        let y = upsample_2d(em, a, x2, sizes, scales, [Sym::Int(1), out_sizes[r - 1].clone()], None)?;
        squeeze_dims(em, y, &[r - 1], Some(out))?;
        return Ok(vec![out]);
    }
    if r != 5 {
        return Err(Error::unsupported(format!(
            "node {}: {} of a {r}-D tensor (5-D expected)",
            a.0.name, a.0.target.name
        )));
    }
    let refs = em.size_refs(x)?;
    let cd = em.mul(refs[1], refs[2])?;
    let v1 = view(em, x, &[refs[0], cd, refs[3], refs[4]], None)?;
    let hw_sizes = rz.sizes.get(1..).map(<[SymRef]>::to_vec).unwrap_or_default();
    let hw_scales = rz.scales.as_ref().map(|s| s[1..].to_vec());
    let hw = [out_sizes[3].clone(), out_sizes[4].clone()];
    let y1 = upsample_2d(em, a, v1, hw_sizes, hw_scales, hw, None)?;
    let (oh, ow) = (em.size(y1, 2)?, em.size(y1, 3)?);
    let ohw = em.mul(oh, ow)?;
    let v2 = view(em, y1, &[refs[0], refs[1], refs[2], ohw], None)?;
    let d_sizes = match rz.sizes.first() {
        Some(d) => vec![*d, ohw],
        None => Vec::new(),
    };
    let d_scales = rz.scales.as_ref().map(|s| vec![s[0], 1.0]);
    let flat = em.sizes(v2)?[3].clone();
    let y2 = upsample_2d(em, a, v2, d_sizes, d_scales, [out_sizes[2].clone(), flat], None)?;
    let od = em.size(y2, 2)?;
    view(em, y2, &[refs[0], refs[1], od, oh, ow], Some(out))?;
    Ok(vec![out])
}

/// `_upsample_nearest_exact{1,2,3}d`: per spatial dim an `index_select` of
/// source indices floor((o + 0.5) * ratio) (ratio 1/scale when given, else
/// in/out, in float32 as torch), clamped to the input. Static spatial sizes.
fn upsample_nearest_exact(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let name = a.0.target.name.as_str();
    let k = crate::schema::upsample_spatial_dims(name);
    let rz = resize_args(a, k)?;
    let out = a.out(0)?;
    let r = em.rank(rz.x)?;
    if r < k + 1 {
        return Err(Error::bad_input(format!(
            "node {}: {name} of a tensor of rank {r}",
            a.0.name
        )));
    }
    let mut y = rz.x;
    for i in 0..k {
        let d = r - k + i;
        let n_in = em.static_dim(rz.x, d, "nearest-exact upsampling")?;
        let n_out = em.static_dim(out, d, "nearest-exact upsampling")?;
        let ratio = match &rz.scales {
            Some(s) if s[i] > 0.0 => (1.0 / s[i]) as f32,
            _ => n_in as f32 / n_out.max(1) as f32,
        };
        let o = arange_col(em, rz.x, n_out, false)?;
        let f = to_copy(em, o, Dtype::Float32, None)?;
        let f = with_scalar(em, aten::ADD_TENSOR, f, Argument::Float(0.5))?;
        let f = with_scalar(em, aten::MUL_TENSOR, f, Argument::Float(ratio as f64))?;
        let idx = to_copy(em, f, Dtype::Int64, None)?;
        let idx = same(
            em,
            aten::CLAMP,
            vec![
                ("self", Argument::Tensor(idx)),
                ("max", Argument::Int((n_in - 1).max(0))),
            ],
            idx,
            None,
        )?;
        let mut sizes = em.sizes(y)?;
        sizes[d] = Sym::Int(n_out);
        let meta = em.meta_like(y, em.dtype(y)?, sizes)?;
        let last = i + 1 == k;
        y = em.op_to(
            aten::INDEX_SELECT,
            vec![
                ("self", Argument::Tensor(y)),
                ("dim", Argument::Int(d as i64)),
                ("index", Argument::Tensor(idx)),
            ],
            last.then_some(out),
            meta,
        )?;
    }
    Ok(vec![out])
}

/// `grid_sampler` is `grid_sampler_2d` on 4-D inputs, with the same
/// arguments. Volumetric (5-D) sampling runs nowhere here: refused by name.
fn grid_sampler(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let op = match em.rank(a.tensor("input")?)? {
        4 => aten::GRID_SAMPLER_2D,
        5 => {
            return Err(Error::unsupported(format!(
                "node {}: grid_sampler on a 5-D input (grid_sampler_3d)",
                a.0.name
            )))
        }
        r => {
            return Err(Error::bad_input(format!(
                "node {}: grid_sampler takes a 4-D or 5-D input, not {r}-D",
                a.0.name
            )))
        }
    };
    let target = crate::ir::Target::parse(&format!("torch.ops.{op}"))
        .ok_or_else(|| Error::internal(format!("{op} does not parse")))?;
    let args = crate::decompose::edit::args_for(a.0, &target)?;
    let out = a.out(0)?;
    em.op_into(op, crate::decompose::edit::borrow_args(&args), out)?;
    Ok(vec![out])
}

rules! {
    aten::GRID_SAMPLER => [aten::GRID_SAMPLER_2D] grid_sampler;
    aten::UPSAMPLE_NEAREST1D_VEC => [aten::VIEW, aten::UNSQUEEZE, aten::UPSAMPLE_NEAREST2D_VEC, aten::UPSAMPLE_BILINEAR2D_VEC, aten::SQUEEZE_DIMS] upsample_via_2d;
    aten::UPSAMPLE_NEAREST1D => [aten::VIEW, aten::UNSQUEEZE, aten::UPSAMPLE_NEAREST2D_VEC, aten::UPSAMPLE_BILINEAR2D_VEC, aten::SQUEEZE_DIMS] upsample_via_2d;
    aten::UPSAMPLE_LINEAR1D_VEC => [aten::VIEW, aten::UNSQUEEZE, aten::UPSAMPLE_NEAREST2D_VEC, aten::UPSAMPLE_BILINEAR2D_VEC, aten::SQUEEZE_DIMS] upsample_via_2d;
    aten::UPSAMPLE_LINEAR1D => [aten::VIEW, aten::UNSQUEEZE, aten::UPSAMPLE_NEAREST2D_VEC, aten::UPSAMPLE_BILINEAR2D_VEC, aten::SQUEEZE_DIMS] upsample_via_2d;
    aten::UPSAMPLE_NEAREST3D_VEC => [aten::VIEW, aten::UNSQUEEZE, aten::UPSAMPLE_NEAREST2D_VEC, aten::UPSAMPLE_BILINEAR2D_VEC, aten::SQUEEZE_DIMS] upsample_via_2d;
    aten::UPSAMPLE_NEAREST3D => [aten::VIEW, aten::UNSQUEEZE, aten::UPSAMPLE_NEAREST2D_VEC, aten::UPSAMPLE_BILINEAR2D_VEC, aten::SQUEEZE_DIMS] upsample_via_2d;
    aten::UPSAMPLE_TRILINEAR3D_VEC => [aten::VIEW, aten::UNSQUEEZE, aten::UPSAMPLE_NEAREST2D_VEC, aten::UPSAMPLE_BILINEAR2D_VEC, aten::SQUEEZE_DIMS] upsample_via_2d;
    aten::UPSAMPLE_TRILINEAR3D => [aten::VIEW, aten::UNSQUEEZE, aten::UPSAMPLE_NEAREST2D_VEC, aten::UPSAMPLE_BILINEAR2D_VEC, aten::SQUEEZE_DIMS] upsample_via_2d;
    aten::_UPSAMPLE_NEAREST_EXACT1D_VEC => [aten::ARANGE_START_STEP, aten::_TO_COPY, aten::ADD_TENSOR, aten::MUL_TENSOR, aten::CLAMP, aten::INDEX_SELECT] upsample_nearest_exact;
    aten::_UPSAMPLE_NEAREST_EXACT1D => [aten::ARANGE_START_STEP, aten::_TO_COPY, aten::ADD_TENSOR, aten::MUL_TENSOR, aten::CLAMP, aten::INDEX_SELECT] upsample_nearest_exact;
    aten::_UPSAMPLE_NEAREST_EXACT2D_VEC => [aten::ARANGE_START_STEP, aten::_TO_COPY, aten::ADD_TENSOR, aten::MUL_TENSOR, aten::CLAMP, aten::INDEX_SELECT] upsample_nearest_exact;
    aten::_UPSAMPLE_NEAREST_EXACT2D => [aten::ARANGE_START_STEP, aten::_TO_COPY, aten::ADD_TENSOR, aten::MUL_TENSOR, aten::CLAMP, aten::INDEX_SELECT] upsample_nearest_exact;
    aten::_UPSAMPLE_NEAREST_EXACT3D_VEC => [aten::ARANGE_START_STEP, aten::_TO_COPY, aten::ADD_TENSOR, aten::MUL_TENSOR, aten::CLAMP, aten::INDEX_SELECT] upsample_nearest_exact;
    aten::_UPSAMPLE_NEAREST_EXACT3D => [aten::ARANGE_START_STEP, aten::_TO_COPY, aten::ADD_TENSOR, aten::MUL_TENSOR, aten::CLAMP, aten::INDEX_SELECT] upsample_nearest_exact;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
