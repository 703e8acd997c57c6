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

/// `adaptive_max_pool2d`: window i of a dim of size n pooled to m is
/// torch's [floor(i * n / m), ceil((i + 1) * n / m)). A window's maximum is
/// the maximum over its rows of each row's maximum, so the two dims are
/// pooled in turn (the last first), each window a slice and a `max.dim`.
/// The index is torch's: the first maximum in row-major order, that is the
/// first row reaching the window's maximum, at the column where that row
/// first reaches it; as a flat position in the plane, `row * width + column`.
fn adaptive_max_pool2d(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let output = a.ints("output_size")?;
    let sizes = em.sizes(x)?;
    let r = sizes.len();
    if output.len() != 2 || !(3..=4).contains(&r) || output.iter().any(|&o| o <= 0) {
        return Err(Error::bad_input(format!(
            "adaptive_max_pool2d of a rank-{r} tensor to {output:?}"
        )));
    }
    let (Some(h), Some(w)) = (sizes[r - 2].as_int(), sizes[r - 1].as_int()) else {
        return Err(Error::unsupported(
            "adaptive_max_pool2d over symbolic spatial sizes (the windows depend on them)",
        ));
    };
    let (row_max, cols) = adaptive_max_dim(em, x, (r - 1, w, output[1]), None)?;
    let (values, rows) = adaptive_max_dim(em, row_max, (r - 2, h, output[0]), a.out(0).ok())?;
    let col = {
        let meta = em.meta(rows)?.clone();
        em.op(
            "aten.gather.default",
            vec![
                ("self", Argument::Tensor(cols)),
                ("dim", Argument::Int(r as i64 - 2)),
                ("index", Argument::Tensor(rows)),
            ],
            meta,
        )?
    };
    let row_start = with_scalar(em, "aten.mul.Scalar", rows, Argument::Int(w))?;
    let index = binary(
        em,
        "aten.add.Tensor",
        row_start,
        col,
        Dtype::Int64,
        a.out(1).ok(),
    )?;
    Ok(vec![values, index])
}

/// Pools dim `dim` (of static size `n`) into `m` adaptive windows by their
/// maximum: the maxima (into `out` when given), and the positions along
/// `dim` where they first are.
fn adaptive_max_dim(
    em: &mut Emitter,
    x: ValueId,
    (dim, n, m): (usize, i64, i64),
    out: Option<ValueId>,
) -> Result<(ValueId, ValueId)> {
    let mut values = Vec::new();
    let mut positions = Vec::new();
    for i in 0..m {
        let (start, end) = (i * n / m, ((i + 1) * n + m - 1) / m);
        let window = if (start, end) == (0, n) {
            x
        } else {
            slice(em, x, dim, start, end)?
        };
        let mut sizes = em.sizes(window)?;
        sizes[dim] = Sym::Int(1);
        let meta = em.meta_like(window, em.dtype(window)?, sizes.clone())?;
        let index = em.meta_like(window, Dtype::Int64, sizes)?;
        let value = match out {
            Some(o) if m == 1 => Out::Into(o),
            _ => Out::New(meta),
        };
        let vi = em.call(
            "aten.max.dim",
            vec![
                ("self", Argument::Tensor(window)),
                ("dim", Argument::Int(dim as i64)),
                ("keepdim", Argument::Bool(true)),
            ],
            vec![value, Out::New(index)],
        )?;
        values.push(vi[0]);
        positions.push(if start == 0 {
            vi[1]
        } else {
            with_scalar(em, "aten.add.Scalar", vi[1], Argument::Int(start))?
        });
    }
    if m == 1 {
        return Ok((values[0], positions[0]));
    }
    Ok((
        cat_op(em, &values, dim, out)?,
        cat_op(em, &positions, dim, None)?,
    ))
}

rules! {
    "aten.max_pool2d.default" => ["aten.max_pool2d_with_indices.default"] max_pool2d;
    "aten.max_pool3d.default" => ["aten.max_pool3d_with_indices.default"] max_pool3d;
    "aten.max_pool1d.default" => ["aten.unsqueeze.default", "aten.max_pool2d_with_indices.default", "aten.squeeze.dims"] max_pool1d;
    "aten.adaptive_avg_pool2d.default" => ["aten.mean.dim", "aten._adaptive_avg_pool2d.default"] adaptive_avg_pool2d;
    "aten.max_pool1d_with_indices.default" => ["aten.unsqueeze.default", "aten.max_pool2d_with_indices.default", "aten.squeeze.dims"] max_pool1d;
    "aten.adaptive_max_pool2d.default" => ["aten.slice.Tensor", "aten.max.dim", "aten.add.Scalar", "aten.cat.default", "aten.gather.default", "aten.mul.Scalar", "aten.add.Tensor"] adaptive_max_pool2d;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[(
    "aten.adaptive_avg_pool3d.default",
    "aten._adaptive_avg_pool3d.default",
)];
