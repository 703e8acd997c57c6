//! Indexing, gathering and scattering (index, index_put, gather, scatter, embedding, ...): the executor rows.

use crate::ir::op::aten;
use super::*;

fn embedding(ctx: &mut Ctx) -> OpResult {
    if let Some(m) = ctx.mapped("weight").filter(|m| m.rank() == 2) {
        // a mapped table: only the rows looked up are read
        let ids = ctx.tensor("indices")?;
        let flat: Vec<i64> = ids
            .t
            .flatten_all()
            .and_then(|t| t.to_dtype(DType::I64))
            .and_then(|t| t.to_vec1())?;
        let rows = m.rows(&flat, ctx.device())?;
        let mut shape = ids.dims().to_vec();
        shape.push(m.dims()[1]);
        return one(Tensor::new(rows.t.reshape(shape)?, m.dtype));
    }
    let w = ctx.tensor("weight")?;
    let ids = ctx.tensor("indices")?;
    let flat = ids
        .t
        .flatten_all()
        .and_then(|t| t.to_dtype(DType::I64))?;
    check_indices(&flat, w.dims()[0], false, "embedding: an id")?;
    let rows = w.t.index_select(&flat, 0)?;
    let mut shape = ids.dims().to_vec();
    shape.push(w.dims()[1]);
    one(Tensor::new(rows.reshape(shape)?, w.dtype))
}

fn index_select(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let d = normalize_dim(ctx.int("dim")?, x.rank())?;
    let idx = ctx.tensor("index")?.cast(Dtype::Int64)?;
    check_indices(&idx.t, x.dims().get(d).copied().unwrap_or(1), false, "index_select")?;
    if x.rank() == 0 {
        // a 0-d tensor indexes as one element and stays 0-d
        let t =
            x.t.reshape(1)
                .and_then(|t| t.index_select(&idx.t.flatten_all()?, 0))
                .and_then(|t| t.reshape(()))?;
        return one(Tensor::new(t, x.dtype));
    }
    // candle's index_select reads only contiguous tensors
    let src = x.t.contiguous()?;
    let idx = idx.t.contiguous()?;
    one(Tensor::new(src.index_select(&idx, d)?, x.dtype))
}

/// `aten.index.Tensor`: advanced indexing with integer index tensors on
/// adjacent dims (broadcast together), as torch places the result.
fn index(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let idx = ctx.tensors("indices")?;
    let given: Vec<(usize, Tensor)> = idx
        .clone()
        .into_iter()
        .enumerate()
        .filter_map(|(i, t)| t.map(|t| (i, t)))
        .collect();
    if given.is_empty() {
        return one(x);
    }
    let first = given[0].0;
    let k = given.len();
    if given
        .iter()
        .any(|(_, t)| matches!(t.dtype, Dtype::Bool | Dtype::Uint8))
        || given.iter().enumerate().any(|(j, (d, _))| *d != first + j)
    {
        // masks (the output shape depends on the data) and index tensors
        // split by slices: on the host
        return index_host(ctx, &x, &idx);
    }
    let dims = x.dims().to_vec();
    let shapes: Vec<&[usize]> = given.iter().map(|(_, t)| t.dims()).collect();
    let b = broadcast_shape(&shapes)?;
    // linear index over the indexed dims
    let mut linear: Option<CandleTensor> = None;
    for (d, t) in &given {
        // an index past its dim would land silently in another row of the
        // merged dims: refused, as torch does
        check_indices(&t.t, dims[*d], true, "index")?;
        let n = dims[*d] as f64;
        let i =
            t.t.to_dtype(DType::I64)
                .and_then(|i| i.broadcast_as(b.clone()))?;
        let i = i
            .lt(0f64)
            .and_then(|neg| neg.where_cond(&(&i + n)?, &i))?;
        linear = Some(match linear {
            None => i,
            Some(acc) => (acc * n).and_then(|acc| acc.add(&i))?,
        });
    }
    let linear = linear.unwrap().flatten_all()?;
    // move the indexed dims to the front, merge them, select, then put the
    // broadcast dims where the first indexed dim was
    let mut order: Vec<usize> = (first..first + k).collect();
    order.extend((0..dims.len()).filter(|d| *d < first || *d >= first + k));
    let moved =
        x.t.permute(order.clone())
            .and_then(|t| t.contiguous())?;
    let merged: usize = dims[first..first + k].iter().product();
    let rest: Vec<usize> = order[k..].iter().map(|&d| dims[d]).collect();
    let mut shape = vec![merged];
    shape.extend(&rest);
    let sel = moved
        .reshape(shape)
        .and_then(|t| t.index_select(&linear, 0))?;
    let mut out_shape = b.clone();
    out_shape.extend(&rest);
    let mut t = sel.reshape(out_shape)?;
    if first > 0 {
        // result dims: leading (non-indexed) dims, then b, then the rest
        let nb = b.len();
        let mut perm: Vec<usize> = (nb..nb + first).collect();
        perm.extend(0..nb);
        perm.extend(nb + first..nb + rest.len());
        t = t.permute(perm)?;
    }
    one(Tensor::new(t, x.dtype))
}

fn gather(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let d = normalize_dim(ctx.int("dim")?, x.rank())?;
    let idx = ctx.tensor("index")?.cast(Dtype::Int64)?;
    check_indices(&idx.t, x.dims().get(d).copied().unwrap_or(1), false, "gather")?;
    let t =
        x.t.contiguous()
            .and_then(|t| t.gather(&idx.t.contiguous()?, d))?;
    one(Tensor::new(t, x.dtype))
}

fn slice_scatter(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        return Err(Error::bad_input("slice_scatter() cannot be applied to a 0-dim tensor"));
    }
    let src = ctx.tensor("src")?.cast(x.dtype)?;
    let d = normalize_dim(ctx.opt_int("dim")?.unwrap_or(0), x.rank())?;
    let n = x.dims()[d] as i64;
    let clampi = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
    let start = clampi(ctx.opt_int("start")?.unwrap_or(0));
    let end = clampi(ctx.opt_int("end")?.unwrap_or(n)).max(start);
    let step = ctx.opt_int("step")?.unwrap_or(1).max(1);
    let positions: Vec<i64> = (start..end).step_by(step as usize).collect();
    scatter_positions(&x, &src.t, d, &positions)
}

fn select_scatter(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        return Err(Error::bad_input("select_scatter() cannot be applied to a 0-dim tensor"));
    }
    let d = normalize_dim(ctx.int("dim")?, x.rank())?;
    let src = ctx
        .tensor("src")?
        .cast(x.dtype)?
        .t
        .unsqueeze(d)?;
    let n = x.dims()[d] as i64;
    let i = ctx.int("index")?;
    scatter_positions(&x, &src, d, &[if i < 0 { i + n } else { i }])
}

/// Replaces the slices `positions` of dim `d` of x with those of src.
fn scatter_positions(x: &Tensor, src: &CandleTensor, d: usize, positions: &[i64]) -> OpResult {
    let n = x.dims()[d];
    let mut parts = Vec::with_capacity(n);
    for k in 0..n {
        let from_src = positions.iter().position(|&p| p == k as i64);
        parts.push(match from_src {
            Some(j) => src.narrow(d, j, 1)?,
            None => x.t.narrow(d, k, 1)?,
        });
    }
    one(Tensor::new(
        CandleTensor::cat(&parts, d)?,
        x.dtype,
    ))
}

fn scatter(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let d = normalize_dim(ctx.int("dim")?, x.rank())?;
    let idx = ctx.tensor("index")?.cast(Dtype::Int64)?;
    let name = ctx.node.target.name.clone();
    let reduce = match name.as_str() {
        "scatter_add" => Some("sum".to_string()),
        "scatter_reduce" => ctx.string("reduce")?,
        _ => ctx.string("reduce")?,
    };
    let include_self = ctx.opt_bool("include_self", true)?;
    // the values, exactly in self's dtype (a Python number converted to it)
    let (src_vals, src_dims) = if ctx.node.arg("src").is_some() {
        let src = ctx.tensor("src")?;
        (elems(&src.cast(x.dtype)?)?, src.dims().to_vec())
    } else {
        let v = ctx.num("value")?;
        (Elems::filled(idx.t.elem_count(), v, x.dtype), idx.dims().to_vec())
    };
    let out = elems(&x)?;
    check_indices(&idx.t, x.dims().get(d).copied().unwrap_or(1), false, "scatter")?;
    let Elems::I(idx_vals) = elems(&idx)? else {
        return Err(Error::internal("int64 indices expected"));
    };
    let xd = x.dims().to_vec();
    let id = idx.dims().to_vec();
    let xs = crate::ir::contiguous_strides(&xd.iter().map(|&v| v as i64).collect::<Vec<_>>());
    let ss = crate::ir::contiguous_strides(&src_dims.iter().map(|&v| v as i64).collect::<Vec<_>>());
    // (target, source) of each index element, in order
    let mut pairs = Vec::with_capacity(idx_vals.len());
    let mut pos = vec![0usize; id.len()];
    for iv in &idx_vals {
        let (mut target, mut source) = (0i64, 0i64);
        for k in 0..id.len() {
            let p = if k == d {
                if *iv < 0 {
                    iv + xd[d] as i64
                } else {
                    *iv
                }
            } else {
                pos[k] as i64
            };
            target += p * xs[k];
            source += pos[k] as i64 * ss[k];
        }
        pairs.push((target as usize, source as usize));
        for k in (0..id.len()).rev() {
            pos[k] += 1;
            if pos[k] < id[k] {
                break;
            }
            pos[k] = 0;
        }
    }
    let r = reduce.as_deref();
    if let Some(other) = r.filter(|r| !matches!(*r, "sum" | "add" | "mean" | "prod" | "multiply" | "amax" | "amin")) {
        return Err(unsupported(format!("scatter reduce {other:?}")));
    }
    let out = match (out, src_vals) {
        (Elems::I(o), Elems::I(v)) => Elems::I(scatter_into(o, &v, &pairs, r, include_self, |a, b, r| match r {
            "sum" | "add" | "mean" => a.wrapping_add(b),
            "prod" | "multiply" => a.wrapping_mul(b),
            "amax" => a.max(b),
            _ => a.min(b),
        }, |s, n| floor_div(s, n as i64).unwrap_or(s))),
        (o, v) => Elems::F(scatter_into(o.into_f64(), &v.into_f64(), &pairs, r, include_self, |a, b, r| match r {
            "sum" | "add" | "mean" => a + b,
            "prod" | "multiply" => a * b,
            // NaN wins, as torch's
            "amax" => if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) },
            _ => if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) },
        }, |s, n| s / n as f64)),
    };
    one(from_elems(out, &xd, x.dtype, ctx.device())?)
}

/// `out` with each source value put at its target, or combined there by
/// `reduce` (torch's `include_self`: whether the target's own value takes
/// part), a mean divided by `mean` (integers with floor, as torch).
fn scatter_into<T: Copy>(
    mut out: Vec<T>,
    src: &[T],
    pairs: &[(usize, usize)],
    reduce: Option<&str>,
    include_self: bool,
    combine: impl Fn(T, T, &str) -> T,
    mean: impl Fn(T, usize) -> T,
) -> Vec<T> {
    let mut counts = vec![0usize; out.len()];
    for &(t, s) in pairs {
        let v = src[s];
        match reduce {
            None => out[t] = v,
            Some(r) => {
                out[t] = if counts[t] == 0 && !include_self { v } else { combine(out[t], v, r) };
                counts[t] += 1;
            }
        }
    }
    if reduce == Some("mean") {
        for (i, c) in counts.iter().enumerate() {
            if *c > 0 {
                out[i] = mean(out[i], c + include_self as usize);
            }
        }
    }
    out
}

fn nonzero(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let dims = x.dims().to_vec();
    let vals = x.to_host()?.to_f64();
    let strides =
        crate::ir::contiguous_strides(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>());
    let mut out = Vec::new();
    for (flat, v) in vals.iter().enumerate() {
        if *v != 0.0 {
            let mut rem = flat as i64;
            for s in &strides {
                out.push(rem / s);
                rem %= s;
            }
        }
    }
    let rows = out.len() / dims.len().max(1);
    let t = CandleTensor::from_vec(out, (rows, dims.len()), ctx.device())?;
    one(Tensor::new(t, Dtype::Int64))
}

/// Where `self[indices]` (torch's advanced indexing) reads: the result
/// shape and, per result element in row-major order, the flat position in
/// `self`. Boolean masks stand for their nonzero positions; index tensors
/// broadcast together; their dims go where the first indexed dim was when
/// the indexed dims are adjacent, first otherwise.
fn advanced_positions(
    dims: &[usize],
    indices: &[Option<Tensor>],
) -> Result<(Vec<usize>, Vec<usize>)> {
    // expand masks into one long index per masked dim
    let mut per_dim: Vec<Option<(Vec<usize>, Vec<i64>)>> = Vec::new();
    for t in indices {
        match t {
            None => per_dim.push(None),
            Some(t) if matches!(t.dtype, Dtype::Bool | Dtype::Uint8) => {
                let m = t.rank();
                let at = per_dim.len();
                if dims.len() < at + m || t.dims() != &dims[at..at + m] {
                    return Err(Error::bad_input(format!(
                        "mask of shape {:?} does not match the indexed dims {:?}",
                        t.dims(),
                        &dims[at.min(dims.len())..]
                    )));
                }
                let strides = crate::ir::contiguous_strides(
                    &t.dims().iter().map(|&d| d as i64).collect::<Vec<_>>(),
                );
                let hits: Vec<i64> = host_f64(t)?
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| **v != 0.0)
                    .map(|(i, _)| i as i64)
                    .collect();
                if m == 0 {
                    // a 0-d mask adds a dim of size 1 (true) or 0 (false)
                    return Err(unsupported("indexing with a 0-d mask"));
                }
                for s in &strides {
                    let coords = hits
                        .iter()
                        .map(|h| (h / s) % (dims[per_dim.len()] as i64))
                        .collect();
                    per_dim.push(Some((vec![hits.len()], coords)));
                }
            }
            Some(t) => {
                if t.dtype.is_floating() {
                    return Err(Error::bad_input(
                        "tensors used as indices must be integer or bool",
                    ));
                }
                let v = host_f64(t)?.iter().map(|&f| f as i64).collect();
                per_dim.push(Some((t.dims().to_vec(), v)));
            }
        }
    }
    if per_dim.len() > dims.len() {
        return Err(Error::bad_input(format!(
            "too many indices ({}) for a tensor of rank {}",
            per_dim.len(),
            dims.len()
        )));
    }
    per_dim.resize(dims.len(), None);
    let indexed: Vec<usize> = (0..dims.len()).filter(|&d| per_dim[d].is_some()).collect();
    let strides: Vec<usize> =
        crate::ir::contiguous_strides(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>())
            .iter()
            .map(|&s| s as usize)
            .collect();
    if indexed.is_empty() {
        return Ok((dims.to_vec(), (0..dims.iter().product()).collect()));
    }
    let shapes: Vec<&[usize]> = indexed
        .iter()
        .map(|&d| per_dim[d].as_ref().unwrap().0.as_slice())
        .collect();
    let b = broadcast_shape(&shapes)?;
    let nb: usize = b.iter().product();
    // offset of each broadcast position over the indexed dims
    let mut off_b = vec![0usize; nb];
    for &d in &indexed {
        let (shape, vals) = per_dim[d].as_ref().unwrap();
        let bstrides = broadcast_strides(shape, &b);
        for (k, o) in off_b.iter_mut().enumerate() {
            let mut rem = k;
            let mut src = 0;
            for (axis, size) in b.iter().enumerate().rev() {
                src += (rem % size) * bstrides[axis];
                rem /= size;
            }
            let mut i = vals[src];
            if i < 0 {
                i += dims[d] as i64;
            }
            if i < 0 || i >= dims[d] as i64 {
                return Err(Error::bad_input(format!(
                    "index {} is out of bounds for dim {d} of size {}",
                    vals[src], dims[d]
                )));
            }
            *o += i as usize * strides[d];
        }
    }
    let adjacent = indexed.windows(2).all(|w| w[1] == w[0] + 1);
    let (before, after): (Vec<usize>, Vec<usize>) = if adjacent {
        (
            (0..indexed[0]).collect(),
            (indexed[indexed.len() - 1] + 1..dims.len()).collect(),
        )
    } else {
        (
            Vec::new(),
            (0..dims.len()).filter(|d| !indexed.contains(d)).collect(),
        )
    };
    let offsets = |ds: &[usize]| -> Vec<usize> {
        let mut offs = vec![0usize];
        for &d in ds {
            offs = offs
                .iter()
                .flat_map(|o| {
                    let step = strides[d];
                    (0..dims[d]).map(move |i| o + i * step)
                })
                .collect();
        }
        offs
    };
    let (ob, oa) = (offsets(&before), offsets(&after));
    let mut shape: Vec<usize> = before.iter().map(|&d| dims[d]).collect();
    shape.extend(&b);
    shape.extend(after.iter().map(|&d| dims[d]));
    let mut positions = Vec::with_capacity(ob.len() * nb * oa.len());
    for p in &ob {
        for q in &off_b {
            for r in &oa {
                positions.push(p + q + r);
            }
        }
    }
    Ok((shape, positions))
}

/// `index.Tensor` with boolean masks or non-adjacent index tensors.
fn index_host(ctx: &Ctx, x: &Tensor, indices: &[Option<Tensor>]) -> OpResult {
    let (shape, positions) = advanced_positions(x.dims(), indices)?;
    let out = elems(x)?.pick(positions.iter().copied());
    one(from_elems(out, &shape, x.dtype, ctx.device())?)
}

/// `index_put(self, indices, values, accumulate)`: `self[indices] = values`
/// (or `+=`), in order, so the last of repeated positions wins.
fn index_put(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let indices = ctx.tensors("indices")?;
    let values = ctx.tensor("values")?;
    let accumulate = ctx.opt_bool("accumulate", false)?;
    let given: Vec<usize> = (0..indices.len())
        .filter(|&i| indices[i].is_some())
        .collect();
    if let [d] = given[..] {
        let idx = indices[d].as_ref().unwrap();
        if d < x.rank() && idx.rank() == 1 && !matches!(idx.dtype, Dtype::Bool | Dtype::Uint8) {
            return index_put_dim(&x, d, idx, &values, accumulate);
        }
    }
    let (shape, positions) = advanced_positions(x.dims(), &indices)?;
    broadcast_shape(&[values.dims(), &shape]).and_then(|b| {
        if b == shape {
            Ok(())
        } else {
            Err(Error::bad_input(format!("index_put: values of {:?} for {shape:?}", values.dims())))
        }
    })?;
    let src = broadcast_elems(&elems(&values.cast(x.dtype)?)?, values.dims(), &shape);
    let pairs: Vec<(usize, usize)> = positions.iter().copied().zip(0..).collect();
    let mode = accumulate.then_some("sum");
    let out = match (elems(&x)?, src) {
        (Elems::I(o), Elems::I(v)) => Elems::I(scatter_into(o, &v, &pairs, mode, true, |a, b, _| a.wrapping_add(b), |s, _| s)),
        (o, v) => Elems::F(scatter_into(o.into_f64(), &v.into_f64(), &pairs, mode, true, |a, b, _| a + b, |s, _| s)),
    };
    one(from_elems(out, x.dims(), x.dtype, ctx.device())?)
}

/// `index_put` with one 1-D index tensor on dim `d` (KV-cache updates and
/// the like), on the device: a scatter along `d` (last write wins, as on
/// torch's CPU) or a scatter-add.
fn index_put_dim(
    x: &Tensor,
    d: usize,
    idx: &Tensor,
    values: &Tensor,
    accumulate: bool,
) -> OpResult {
    check_indices(&idx.t, x.dims()[d], true, "index_put")?;
    let n = x.dims()[d] as f64;
    let mut shape = x.dims().to_vec();
    shape[d] = idx.dims()[0];
    let mut idx_shape = vec![1usize; x.rank()];
    idx_shape[d] = shape[d];
    let values = values.cast(x.dtype)?;
    let run = || -> candle_core::Result<CandleTensor> {
        let i = idx.t.to_dtype(DType::I64)?;
        let i = i.lt(0f64)?.where_cond(&(&i + n)?, &i)?;
        let i = i
            .reshape(idx_shape.clone())?
            .broadcast_as(shape.clone())?
            .contiguous()?;
        let v = values.t.broadcast_as(shape.clone())?.contiguous()?;
        if accumulate {
            x.t.scatter_add(&i, &v, d)
        } else {
            x.t.scatter(&i, &v, d)
        }
    };
    one(Tensor::new(run()?, x.dtype))
}

/// `masked_scatter(self, mask, source)`: the positions where the mask
/// (broadcast to self) is true take source's elements in order.
fn masked_scatter(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let mask = broadcast_host(&ctx.tensor("mask")?, x.dims())?;
    let source = elems(&ctx.tensor("source")?.cast(x.dtype)?)?;
    let selected: Vec<usize> = (0..mask.len()).filter(|&i| mask[i] != 0.0).collect();
    if selected.len() > source.len() {
        return Err(Error::bad_input("masked_scatter: source has fewer elements than the mask selects"));
    }
    let pairs: Vec<(usize, usize)> = selected.into_iter().zip(0..).collect();
    let out = match (elems(&x)?, source) {
        (Elems::I(o), Elems::I(v)) => Elems::I(scatter_into(o, &v, &pairs, None, true, |a, _, _| a, |s, _| s)),
        (o, v) => Elems::F(scatter_into(o.into_f64(), &v.into_f64(), &pairs, None, true, |a, _, _| a, |s, _| s)),
    };
    one(from_elems(out, x.dims(), x.dtype, ctx.device())?)
}

/// `_embedding_bag`: sums (mode 0), means (1) or maxima (2) of the weight
/// rows of each bag, with the three bookkeeping outputs torch's CPU
/// kernel returns (offset2bag, bag_size, max_indices).
fn embedding_bag(ctx: &mut Ctx) -> OpResult {
    let w = ctx.tensor("weight")?;
    let idx_t = ctx.tensor("indices")?;
    let off_t = ctx.tensor("offsets")?;
    let mode = ctx.opt_int("mode")?.unwrap_or(0);
    let psw = ctx.opt_tensor("per_sample_weights")?;
    let include_last = ctx.opt_bool("include_last_offset", false)?;
    let padding_idx = ctx.opt_int("padding_idx")?.unwrap_or(-1);
    if w.rank() != 2 || idx_t.rank() != 1 || off_t.rank() != 1 {
        return Err(unsupported(
            "_embedding_bag with 2-D indices (torch flattens them before this op)",
        ));
    }
    if psw.is_some() && mode != 0 {
        return Err(Error::bad_input(
            "per_sample_weights are only supported for mode sum",
        ));
    }
    let (rows, width) = (w.dims()[0], w.dims()[1]);
    // sums and means stay on the device (the table may be large): only
    // the indices and offsets are read here; maxima are taken on the host
    let weights = if mode == 2 { host_f64(&w)? } else { Vec::new() };
    let indices: Vec<i64> = host_f64(&idx_t)?.iter().map(|&v| v as i64).collect();
    let offsets: Vec<i64> = host_f64(&off_t)?.iter().map(|&v| v as i64).collect();
    let scales = psw.map(|t| host_f64(&t)).transpose()?;
    let n = indices.len();
    let bags = offsets.len() - usize::from(include_last && !offsets.is_empty());
    let mut out = vec![0.0; if mode == 2 { bags * width } else { 0 }];
    let mut bag_size = vec![0i64; bags];
    let mut max_indices = vec![-1i64; if mode == 2 { bags * width } else { 0 }];
    // per used entry: its weight row, its bag, its scale
    let (mut picked, mut into, mut scale_of) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..bags {
        let start = offsets[b].clamp(0, n as i64) as usize;
        let end = if b + 1 < offsets.len() {
            offsets[b + 1].clamp(start as i64, n as i64) as usize
        } else {
            n
        };
        let mut count = 0;
        for (i, &ix) in indices.iter().enumerate().take(end).skip(start) {
            if ix < 0 || ix as usize >= rows {
                return Err(Error::bad_input(format!(
                    "_embedding_bag: index {ix} is out of range for {rows} rows"
                )));
            }
            if ix == padding_idx {
                continue;
            }
            count += 1;
            if mode != 2 {
                picked.push(ix);
                into.push(b as i64);
                scale_of.push(scales.as_ref().map_or(1.0, |s| s[i]));
                continue;
            }
            let src = &weights[ix as usize * width..(ix as usize + 1) * width];
            let row = &mut out[b * width..(b + 1) * width];
            for (j, (o, v)) in row.iter_mut().zip(src).enumerate() {
                if count == 1 || *v > *o {
                    *o = *v;
                    max_indices[b * width + j] = ix;
                }
            }
        }
        bag_size[b] = match mode {
            1 => count as i64,
            _ => (end - start) as i64,
        };
    }
    let fast_sum = mode == 0
        && padding_idx < 0
        && matches!(w.dtype, Dtype::Float32 | Dtype::Float16 | Dtype::BFloat16);
    let offset2bag: Vec<i64> = if fast_sum {
        Vec::new()
    } else {
        (0..n)
            .map(|i| offsets.iter().filter(|&&o| o <= i as i64).count() as i64 - 1)
            .collect()
    };
    let int = |v: Vec<i64>, shape: Vec<usize>| -> Result<Value> {
        let t = CandleTensor::from_vec(v, shape, ctx.device())?;
        Ok(Value::Tensor(
            Tensor::new(t, Dtype::Int64).cast(off_t.dtype)?,
        ))
    };
    // torch divides means by max(bag_size, 1)
    let counts: Vec<f64> = bag_size.iter().map(|&c| c.max(1) as f64).collect();
    let (bag_size, max_indices) = match mode {
        0 => (
            int(vec![0; offsets.len()], vec![offsets.len()])?,
            int(vec![0; offsets.len()], vec![offsets.len()])?,
        ),
        1 => (int(bag_size, vec![bags])?, int(vec![0; bags], vec![bags])?),
        _ => (
            int(bag_size, vec![bags])?,
            int(
                max_indices.iter().map(|&m| m.max(0)).collect(),
                vec![bags, width],
            )?,
        ),
    };
    let out = if mode == 2 {
        from_f64(&out, &[bags, width], w.dtype, ctx.device())?
    } else {
        let compute = if w.dtype == Dtype::Float64 {
            Dtype::Float64
        } else {
            Dtype::Float32
        };
        let dev = ctx.device();
        let zeros = CandleTensor::zeros((bags, width), storage_dtype(compute)?, dev)?;
        let sum = if picked.is_empty() {
            zeros
        } else {
            let k = picked.len();
            let rows = w
                .cast(compute)?
                .t
                .index_select(&CandleTensor::from_vec(picked, k, dev)?, 0)?;
            let rows = if scales.is_some() {
                let s = from_f64(&scale_of, &[k, 1], compute, dev)?;
                rows.broadcast_mul(&s.t)?
            } else {
                rows
            };
            zeros
                .index_add(&CandleTensor::from_vec(into, k, dev)?, &rows, 0)?
        };
        let sum = if mode == 1 {
            sum.broadcast_div(&from_f64(&counts, &[bags, 1], compute, dev)?.t)?
        } else {
            sum
        };
        Tensor::new(sum, compute).cast(w.dtype)?
    };
    Ok(vec![
        Value::Tensor(out),
        int(offset2bag.clone(), vec![offset2bag.len()])?,
        bag_size,
        max_indices,
    ])
}

/// This family's rows: op identity -> implementation.
/// Where these rows read a mapped weight in place (op, argument).
pub(super) const READS_MAPPED: &[(&str, &str)] = &[(aten::EMBEDDING, "weight")];

pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::EMBEDDING, embedding),
    (aten::INDEX_SELECT, index_select),
    (aten::INDEX_TENSOR, index),
    (aten::NONZERO, nonzero),
    (aten::SLICE_SCATTER, slice_scatter),
    (aten::SELECT_SCATTER, select_scatter),
    (aten::SCATTER_SRC, scatter),
    (aten::SCATTER_VALUE, scatter),
    (aten::SCATTER_ADD, scatter),
    (aten::SCATTER_REDUCE_TWO, scatter),
    (aten::INDEX_PUT, index_put),
    (aten::MASKED_SCATTER, masked_scatter),
    (aten::_EMBEDDING_BAG, embedding_bag),
    (aten::GATHER, gather),
];
