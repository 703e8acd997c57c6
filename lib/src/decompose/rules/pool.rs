//! Pooling: max, average and adaptive, 1-D to 3-D: the decomposition rules.

use crate::ir::op::aten;
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
        aten::MAX_POOL2D_WITH_INDICES,
        a.tensor("self")?,
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
        aten::MAX_POOL3D_WITH_INDICES,
        a.tensor("self")?,
        Some(out),
        meta,
    )?])
}

fn max_pool1d(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
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
        aten::MAX_POOL2D_WITH_INDICES,
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
    let x = a.tensor("self")?;
    let out = a.out(0)?;
    if a.ints("output_size").ok().as_deref() == Some(&[1, 1]) {
        em.op_into(
            aten::MEAN_DIM,
            vec![
                ("self", Argument::Tensor(x)),
                ("dim", ints_arg(&[-1, -2])),
                ("keepdim", Argument::Bool(true)),
            ],
            out,
        )?;
    } else {
        em.op_into(
            aten::_ADAPTIVE_AVG_POOL2D,
            vec![
                ("self", Argument::Tensor(x)),
                ("output_size", a.arg("output_size")),
            ],
            out,
        )?;
    }
    Ok(vec![out])
}

/// `adaptive_max_pool1d/2d/3d`: window i of a dim of size n pooled to m
/// is torch's [floor(i * n / m), ceil((i + 1) * n / m)). A window is a box,
/// so its maximum is the maximum over its first dim of the maxima over the
/// rest: the dims are pooled in turn (the last first), each window a slice
/// reduced by [`window_max`]. The index is torch's: the first maximum in
/// row-major order (the last NaN, if any), as a flat position in the
/// pooled dims. Pooling a dim finds, per
/// output, the first position p along it whose sub-box reaches the
/// maximum; the flat index is p times the sub-box's size plus the index
/// already found in that sub-box (gathered at p).
fn adaptive_max_pool(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let output = a.ints("output_size")?;
    let n = output.len();
    let sizes = em.sizes(x)?;
    let r = sizes.len();
    let name = &a.0.target.name;
    if n == 0 || !(n + 1..=n + 2).contains(&r) || output.iter().any(|&o| o <= 0) {
        return Err(Error::bad_input(format!(
            "{name} of a rank-{r} tensor to {output:?}"
        )));
    }
    let spatial = static_sizes(&sizes[r - n..], name)?;
    let (mut values, mut index) = (x, None);
    let mut inner = 1;
    for j in (0..n).rev() {
        let dim = r - n + j;
        let outs = if j == 0 {
            (a.out(0).ok(), a.out(1).ok())
        } else {
            (None, None)
        };
        let first = index.is_none();
        let (v, pos) = adaptive_max_dim(
            em,
            values,
            (dim, spatial[j], output[j]),
            (outs.0, if first { outs.1 } else { None }),
        )?;
        index = Some(match index {
            None => pos,
            Some(inner_index) => {
                let at = gather(em, inner_index, dim, pos, None)?;
                let start = with_scalar(em, aten::MUL_SCALAR, pos, Argument::Int(inner))?;
                binary(em, aten::ADD_TENSOR, start, at, Dtype::Int64, outs.1)?
            }
        });
        inner *= spatial[j];
        values = v;
    }
    let index = index.ok_or_else(|| Error::internal(format!("{name} pooled no dim")))?;
    Ok(vec![values, index])
}

/// Static sizes, or a refusal naming the op that needs them.
fn static_sizes(sizes: &[Sym], op: &str) -> Result<Vec<i64>> {
    sizes.iter().map(Sym::as_int).collect::<Option<_>>().ok_or_else(|| {
        Error::unsupported(format!(
            "{op} over symbolic spatial sizes (the windows depend on them)"
        ))
    })
}

/// Pools dim `dim` (of static size `n`) into `m` adaptive windows by their
/// maximum: the maxima and the positions along `dim` where they first are
/// (into `outs` when given).
fn adaptive_max_dim(
    em: &mut Emitter,
    x: ValueId,
    (dim, n, m): (usize, i64, i64),
    (out, out_index): (Option<ValueId>, Option<ValueId>),
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
        let (value, at) = window_max(em, window, dim, (m == 1).then_some((out, out_index)))?;
        values.push(value);
        positions.push(if start == 0 {
            at
        } else {
            with_scalar(em, aten::ADD_SCALAR, at, Argument::Int(start))?
        });
    }
    if m == 1 {
        return Ok((values[0], positions[0]));
    }
    Ok((
        cat_op(em, &values, dim, out)?,
        cat_op(em, &positions, dim, out_index)?,
    ))
}

/// The maximum of `x` along `dim` (kept as a dim of 1) and its position,
/// as torch's pooling kernels find it: the first greatest value, unless
/// there is a NaN, when the last NaN wins. That is `max.dim` where the
/// window has no NaN; else the position is the largest of `(i + 1)` over
/// its NaNs, less one, and the value is read back there. `into`: the
/// outputs to write.
fn window_max(
    em: &mut Emitter,
    x: ValueId,
    dim: usize,
    into: Option<(Option<ValueId>, Option<ValueId>)>,
) -> Result<(ValueId, ValueId)> {
    let dtype = em.dtype(x)?;
    let mut sizes = em.sizes(x)?;
    let len = sizes[dim]
        .as_int()
        .ok_or_else(|| Error::unsupported(format!("a window over symbolic dim {dim}")))?;
    sizes[dim] = Sym::Int(1);
    let meta = em.meta_like(x, dtype, sizes.clone())?;
    let index = em.meta_like(x, Dtype::Int64, sizes)?;
    let (out, out_index) = into.unwrap_or((None, None));
    let to = |o: Option<ValueId>, meta| o.map_or(Out::New(meta), Out::Into);
    let args = |x: ValueId| {
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(dim as i64)),
            ("keepdim", Argument::Bool(true)),
        ]
    };
    if !dtype.is_floating() {
        let vi = em.call(aten::MAX_DIM, args(x), vec![to(out, meta), to(out_index, index)])?;
        return Ok((vi[0], vi[1]));
    }
    let first = em.call(
        aten::MAX_DIM,
        args(x),
        vec![Out::New(meta.clone()), Out::New(index.clone())],
    )?[1];
    let nan = predicate(em, aten::ISNAN, x)?;
    let nan = to_copy(em, nan, Dtype::Int64, None)?;
    let rank = em.rank(x)?;
    let from_one = arange_to(em, x, len, 1, Dtype::Int64)?;
    let from_one = with_scalar(em, aten::ADD_SCALAR, from_one, Argument::Int(1))?;
    let shape: Vec<SymRef> = (0..rank).map(|d| SymRef::Int(if d == dim { len } else { 1 })).collect();
    let from_one = view(em, from_one, &shape, None)?;
    let weighted = binary(em, aten::MUL_TENSOR, nan, from_one, Dtype::Int64, None)?;
    let mut ext = args(weighted);
    ext[1].1 = Argument::Ints(vec![dim as i64]);
    let last = em.op(aten::AMAX, ext, index.clone())?;
    let any = cmp(em, aten::GT_SCALAR, last, Argument::Int(0))?;
    let last = with_scalar(em, aten::SUB_SCALAR, last, Argument::Int(1))?;
    let at = where_(em, any, last, first, out_index)?;
    Ok((gather(em, x, dim, at, out)?, at))
}

/// `max_unpool2d/3d`: each value goes to its index in a zero plane of the
/// output size, per batch and channel, as torch's CPU kernel writes them:
/// the planes are the rows of a `[planes, plane size]` zeros tensor, the
/// values scattered into them along dim 1 at their indices, and the
/// result viewed as the output. (`stride` and `padding` of the 3-D op only
/// check its arguments in torch.)
fn max_unpool(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, indices, out) = (a.tensor("self")?, a.tensor("indices")?, a.out(0)?);
    let size = a.syms("output_size")?;
    let n = size.len();
    let r = em.rank(x)?;
    if n == 0 || !(n + 1..=n + 2).contains(&r) || em.sizes(indices)? != em.sizes(x)? {
        return Err(Error::bad_input(format!(
            "{} of a rank-{r} tensor to {n} output sizes, with indices of another shape",
            a.0.target.name
        )));
    }
    let dims = em.size_refs(x)?;
    let planes = em.product(&dims[..r - n])?;
    let plane = em.product(&dims[r - n..])?;
    let out_plane = em.product(&size)?;
    let values = reshape(em, x, &[planes, plane], None)?;
    let at = reshape(em, indices, &[planes, plane], None)?;
    let dtype = em.dtype(x)?;
    let zeros = full(em, x, &[planes, out_plane], scalar(0.0, dtype), dtype)?;
    let meta = em.meta(zeros)?.clone();
    let scattered = em.op(
        aten::SCATTER_SRC,
        vec![
            ("self", Argument::Tensor(zeros)),
            ("dim", Argument::Int(1)),
            ("index", Argument::Tensor(at)),
            ("src", Argument::Tensor(values)),
        ],
        meta,
    )?;
    let shape: Vec<SymRef> = dims[..r - n].iter().chain(&size).copied().collect();
    Ok(vec![view(em, scattered, &shape, Some(out))?])
}

/// `fractional_max_pool2d/3d` as torch's CPU kernel computes it. Plane p
/// (a batch item's channel) pools a dim of size n to m windows of size k
/// that start at torch's interval sequence: `trunc((i + u) * a) -
/// trunc(u * a)` for i < m - 1 and `n - k` for the last, u the plane's
/// sample for that dim (`random_samples[..., 0]` is the width's in 2-D,
/// the depth's in 3-D) and `a = (n - k) / (m - 1)`, in the input's dtype.
/// The windows' flat starts in the plane are summed from the dims'; each
/// offset of the window is then a gather from the flattened planes, and
/// the maximum is kept as the kernel keeps it: a later value replaces it
/// when greater, or NaN.
fn fractional_max_pool(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, u) = (a.tensor("self")?, a.tensor("random_samples")?);
    let name = a.0.target.name.clone();
    let n = if name.ends_with("3d") { 3 } else { 2 };
    let sizes = em.sizes(x)?;
    let r = sizes.len();
    let per_dim = |v: Vec<i64>| if v.len() == 1 { vec![v[0]; n] } else { v };
    let (kernel, output) = (per_dim(a.ints("kernel_size")?), per_dim(a.ints("output_size")?));
    if !(n + 1..=n + 2).contains(&r) || kernel.len() != n || output.len() != n {
        return Err(Error::bad_input(format!(
            "{name} of a rank-{r} tensor with kernel {kernel:?} to {output:?}"
        )));
    }
    let input = static_sizes(&sizes[r - n..], &name)?;
    for j in 0..n {
        if kernel[j] <= 0 || output[j] <= 0 || output[j] + kernel[j] - 1 > input[j] {
            return Err(Error::bad_input(format!(
                "{name}: a window of {} to {} outputs does not fit an input of {} in spatial dim {j}",
                kernel[j], output[j], input[j]
            )));
        }
    }
    let dtype = em.dtype(x)?;
    let dims = em.size_refs(x)?;
    let planes = em.product(&dims[..r - n])?;
    let plane: i64 = input.iter().product();
    let xs = reshape(em, x, &[planes, SymRef::Int(plane)], None)?;
    let us = reshape(em, u, &[planes, SymRef::Int(n as i64)], None)?;
    // The windows' flat starts, [planes, m_0, ..., m_{n-1}].
    let mut starts: Option<ValueId> = None;
    let mut stride = plane;
    for j in 0..n {
        stride /= input[j];
        let sample = if n == 2 { 1 - j } else { j } as i64;
        let u_j = slice(em, us, 1, sample, sample + 1)?;
        let seq = intervals(em, u_j, (input[j], output[j], kernel[j]), dtype, planes)?;
        let scaled = with_scalar(em, aten::MUL_SCALAR, seq, Argument::Int(stride))?;
        let mut shape = vec![planes];
        shape.extend((0..n).map(|d| SymRef::Int(if d == j { output[j] } else { 1 })));
        let term = view(em, scaled, &shape, None)?;
        starts = Some(match starts {
            None => term,
            Some(acc) => binary(em, aten::ADD_TENSOR, acc, term, Dtype::Int64, None)?,
        });
    }
    let starts = starts.ok_or_else(|| Error::internal(format!("{name} pooled no dim")))?;
    let cells: i64 = output.iter().product();
    let starts = view(em, starts, &[planes, SymRef::Int(cells)], None)?;
    let mut best: Option<(ValueId, ValueId)> = None;
    for k in 0..kernel.iter().product::<i64>() {
        // the offset's position in the window, row-major, as a flat offset
        let (mut rest, mut offset, mut stride) = (k, 0, 1);
        for j in (0..n).rev() {
            offset += (rest % kernel[j]) * stride;
            rest /= kernel[j];
            stride *= input[j];
        }
        let at = if offset == 0 {
            starts
        } else {
            with_scalar(em, aten::ADD_SCALAR, starts, Argument::Int(offset))?
        };
        let v = gather(em, xs, 1, at, None)?;
        best = Some(match best {
            None => (v, at),
            Some((max, arg)) => {
                let greater = binary(em, aten::GT_TENSOR, v, max, Dtype::Bool, None)?;
                let nan = predicate(em, aten::ISNAN, v)?;
                let take = binary(em, aten::LOGICAL_OR, greater, nan, Dtype::Bool, None)?;
                (where_(em, take, v, max, None)?, where_(em, take, at, arg, None)?)
            }
        });
    }
    let (max, arg) = best.ok_or_else(|| Error::internal(format!("{name} with an empty window")))?;
    let shape: Vec<SymRef> = dims[..r - n]
        .iter()
        .copied()
        .chain(output.iter().map(|&o| SymRef::Int(o)))
        .collect();
    let values = view(em, max, &shape, Some(a.out(0)?))?;
    let indices = view(em, arg, &shape, a.out(1).ok())?;
    Ok(vec![values, indices])
}

/// torch's `generate_intervals` for every plane at once: the starts of
/// `m` windows of size `k` in a dim of size `n`, from the planes' samples
/// `u` (`[planes, 1]`, of `dtype`, in which the arithmetic runs), as int64
/// `[planes, m]`.
fn intervals(
    em: &mut Emitter,
    u: ValueId,
    (n, m, k): (i64, i64, i64),
    dtype: Dtype,
    planes: SymRef,
) -> Result<ValueId> {
    let last = full(em, u, &[planes, SymRef::Int(1)], Argument::Int(n - k), Dtype::Int64)?;
    if m == 1 {
        return Ok(last);
    }
    // alpha as the kernel computes it: a quotient in the input's dtype
    let alpha = if dtype == Dtype::Float64 {
        (n - k) as f64 / (m - 1) as f64
    } else {
        ((n - k) as f32 / (m - 1) as f32) as f64
    };
    let i = arange_to(em, u, m - 1, 1, dtype)?;
    let shifted = binary(em, aten::ADD_TENSOR, i, u, dtype, None)?;
    let mut trunc = |v: ValueId| -> Result<ValueId> {
        let scaled = with_scalar(em, aten::MUL_SCALAR, v, Argument::Float(alpha))?;
        to_copy(em, scaled, Dtype::Int64, None)
    };
    let (ends, origin) = (trunc(shifted)?, trunc(u)?);
    let seq = binary(em, aten::SUB_TENSOR, ends, origin, Dtype::Int64, None)?;
    cat_op(em, &[seq, last], 1, None)
}

rules! {
    aten::MAX_POOL2D => [aten::MAX_POOL2D_WITH_INDICES] max_pool2d;
    aten::MAX_POOL3D => [aten::MAX_POOL3D_WITH_INDICES] max_pool3d;
    aten::MAX_POOL1D => [aten::UNSQUEEZE, aten::MAX_POOL2D_WITH_INDICES, aten::SQUEEZE_DIMS] max_pool1d;
    aten::ADAPTIVE_AVG_POOL2D => [aten::MEAN_DIM, aten::_ADAPTIVE_AVG_POOL2D] adaptive_avg_pool2d;
    aten::MAX_POOL1D_WITH_INDICES => [aten::UNSQUEEZE, aten::MAX_POOL2D_WITH_INDICES, aten::SQUEEZE_DIMS] max_pool1d;
    aten::ADAPTIVE_MAX_POOL1D => [aten::SLICE_TENSOR, aten::MAX_DIM, aten::ISNAN, aten::_TO_COPY, aten::ARANGE_START_STEP, aten::ADD_SCALAR, aten::VIEW, aten::MUL_TENSOR, aten::AMAX, aten::GT_SCALAR, aten::SUB_SCALAR, aten::WHERE_SELF, aten::GATHER, aten::CAT, aten::MUL_SCALAR, aten::ADD_TENSOR] adaptive_max_pool;
    aten::ADAPTIVE_MAX_POOL2D => [aten::SLICE_TENSOR, aten::MAX_DIM, aten::ISNAN, aten::_TO_COPY, aten::ARANGE_START_STEP, aten::ADD_SCALAR, aten::VIEW, aten::MUL_TENSOR, aten::AMAX, aten::GT_SCALAR, aten::SUB_SCALAR, aten::WHERE_SELF, aten::GATHER, aten::CAT, aten::MUL_SCALAR, aten::ADD_TENSOR] adaptive_max_pool;
    aten::ADAPTIVE_MAX_POOL3D => [aten::SLICE_TENSOR, aten::MAX_DIM, aten::ISNAN, aten::_TO_COPY, aten::ARANGE_START_STEP, aten::ADD_SCALAR, aten::VIEW, aten::MUL_TENSOR, aten::AMAX, aten::GT_SCALAR, aten::SUB_SCALAR, aten::WHERE_SELF, aten::GATHER, aten::CAT, aten::MUL_SCALAR, aten::ADD_TENSOR] adaptive_max_pool;
    aten::MAX_UNPOOL2D => [aten::VIEW, aten::CLONE, aten::FULL, aten::SCATTER_SRC] max_unpool;
    aten::FRACTIONAL_MAX_POOL2D => [aten::VIEW, aten::CLONE, aten::SLICE_TENSOR, aten::FULL, aten::ARANGE_START_STEP, aten::ADD_TENSOR, aten::MUL_SCALAR, aten::_TO_COPY, aten::SUB_TENSOR, aten::CAT, aten::ADD_SCALAR, aten::GATHER, aten::GT_TENSOR, aten::ISNAN, aten::LOGICAL_OR, aten::WHERE_SELF] fractional_max_pool;
    aten::FRACTIONAL_MAX_POOL3D => [aten::VIEW, aten::CLONE, aten::SLICE_TENSOR, aten::FULL, aten::ARANGE_START_STEP, aten::ADD_TENSOR, aten::MUL_SCALAR, aten::_TO_COPY, aten::SUB_TENSOR, aten::CAT, aten::ADD_SCALAR, aten::GATHER, aten::GT_TENSOR, aten::ISNAN, aten::LOGICAL_OR, aten::WHERE_SELF] fractional_max_pool;
    aten::MAX_UNPOOL3D => [aten::VIEW, aten::CLONE, aten::FULL, aten::SCATTER_SRC] max_unpool;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[(
    aten::ADAPTIVE_AVG_POOL3D,
    aten::_ADAPTIVE_AVG_POOL3D,
)];
