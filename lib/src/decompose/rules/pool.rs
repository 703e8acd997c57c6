//! Pooling: max, average and adaptive, 1-D to 3-D: the decomposition rules.

use super::*;

fn pool_with_indices(
    em: &mut Emitter,
    a: &NodeArgs,
    op: &str,
    x: ValueId,
    out: Option<ValueId>,
    meta: TensorMeta,
) -> Result<ValueId> {
    let mut idx = meta.clone();
    idx.dtype = Dtype::Int64;
    let args = vec![
        ("self", Argument::Tensor(x)),
        ("kernel_size", a.arg("kernel_size")),
        ("stride", a.arg("stride")),
        ("padding", a.arg("padding")),
        ("dilation", a.arg("dilation")),
        ("ceil_mode", a.arg("ceil_mode")),
    ];
    let first = match out {
        Some(o) => Out::Into(o),
        None => Out::New(meta),
    };
    Ok(em.call(op, args, vec![first, Out::New(idx)])?[0])
}

fn max_pool2d(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let meta = em.meta(out)?.clone();
    Ok(vec![pool_with_indices(
        em,
        a,
        "aten.max_pool2d_with_indices.default",
        a.t("self")?,
        Some(out),
        meta,
    )?])
}

fn max_pool3d(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let meta = em.meta(out)?.clone();
    Ok(vec![pool_with_indices(
        em,
        a,
        "aten.max_pool3d_with_indices.default",
        a.t("self")?,
        Some(out),
        meta,
    )?])
}

fn max_pool1d(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let out = a.out(0)?;
    let r = em.rank(x)?;
    let x2 = unsqueeze(em, x, r - 1)?;
    let one = |v: Vec<i64>, fill: i64| -> Vec<i64> { [vec![fill], v].concat() };
    let m = em.meta(out)?.clone();
    let mut sizes = m.sizes.clone();
    sizes.insert(r - 1, Sym::Int(1));
    let meta = em.meta_like(out, m.dtype, sizes)?;
    let stride = a.ints("stride")?;
    let k = a.ints("kernel_size")?;
    let args = vec![
        ("self", Argument::Tensor(x2)),
        ("kernel_size", ints_arg(&one(k.clone(), 1))),
        (
            "stride",
            ints_arg(&one(if stride.is_empty() { k } else { stride }, 1)),
        ),
        ("padding", ints_arg(&one(a.ints("padding")?, 0))),
        ("dilation", ints_arg(&one(a.ints("dilation")?, 1))),
        ("ceil_mode", a.arg("ceil_mode")),
    ];
    let mut idx = meta.clone();
    idx.dtype = Dtype::Int64;
    let r2 = em.call(
        "aten.max_pool2d_with_indices.default",
        args,
        vec![Out::New(meta), Out::New(idx)],
    )?;
    let values = squeeze_dims(em, r2[0], &[r - 1], Some(out))?;
    if a.0.target.name == "max_pool1d_with_indices" {
        let indices = squeeze_dims(em, r2[1], &[r - 1], Some(a.out(1)?))?;
        return Ok(vec![values, indices]);
    }
    Ok(vec![values])
}

fn adaptive_avg_pool2d(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let out = a.out(0)?;
    if a.ints("output_size").ok().as_deref() == Some(&[1, 1]) {
        em.op_into(
            "aten.mean.dim",
            vec![
                ("self", Argument::Tensor(x)),
                ("dim", ints_arg(&[-1, -2])),
                ("keepdim", Argument::Bool(true)),
            ],
            out,
        )?;
    } else {
        em.op_into(
            "aten._adaptive_avg_pool2d.default",
            vec![
                ("self", Argument::Tensor(x)),
                ("output_size", a.arg("output_size")),
            ],
            out,
        )?;
    }
    Ok(vec![out])
}

rules! {
    "aten.max_pool2d.default" => ["aten.max_pool2d_with_indices.default"] max_pool2d;
    "aten.max_pool3d.default" => ["aten.max_pool3d_with_indices.default"] max_pool3d;
    "aten.max_pool1d.default" => ["aten.unsqueeze.default", "aten.max_pool2d_with_indices.default", "aten.squeeze.dims"] max_pool1d;
    "aten.adaptive_avg_pool2d.default" => ["aten.mean.dim", "aten._adaptive_avg_pool2d.default"] adaptive_avg_pool2d;
    "aten.max_pool1d_with_indices.default" => ["aten.unsqueeze.default", "aten.max_pool2d_with_indices.default", "aten.squeeze.dims"] max_pool1d;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[(
    "aten.adaptive_avg_pool3d.default",
    "aten._adaptive_avg_pool3d.default",
)];
