//! Shape ops that make new tensors (cat, split, flip, repeat, pad, ...) and views by shape (view, permute, expand, ...): the ONNX emitters.

use crate::ir::op::aten;
use super::*;

/// `as_strided` with static shapes: the elements it reads, found from the
/// input's recorded storage layout, become one constant Gather.
fn as_strided(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let in_sizes = meta
        .static_sizes()
        .ok_or_else(|| Error::unsupported("as_strided on symbolic sizes"))?;
    let in_strides = meta
        .static_strides()
        .ok_or_else(|| Error::unsupported("as_strided on symbolic strides"))?;
    let in_offset = meta.storage_offset.as_int().unwrap_or(0);
    let size = cx.ints("size")?;
    let stride = cx.ints("stride")?;
    let offset = cx.opt_int("storage_offset")?.unwrap_or(in_offset);
    let idx =
        crate::ir::as_strided_gather(&in_sizes, &in_strides, in_offset, &size, &stride, offset)
            .ok_or_else(|| {
                Error::unsupported("as_strided reading storage the input does not cover")
            })?;
    let flat = cx.reshape_const(&x, &[-1])?;
    let y = if idx.iter().enumerate().all(|(i, &j)| i as i64 == j)
        && idx.len() as i64 == in_sizes.iter().product::<i64>()
    {
        flat
    } else {
        let indices = cx.const_i64s(&idx);
        cx.node("Gather", &[&flat, &indices], vec![])
    };
    let y = cx.reshape_const(&y, &size)?;
    cx.set(0, y);
    Ok(())
}

/// `diagonal(offset, dim1, dim2)`: the diagonal as a strided view of the
/// (logically contiguous) input, gathered from its flat form; the
/// diagonal's dim goes last, as in torch.
fn diagonal(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let sizes = meta
        .static_sizes()
        .ok_or_else(|| Error::unsupported("diagonal on symbolic sizes"))?;
    let rank = sizes.len() as i64;
    let norm = |d: i64| (if d < 0 { d + rank } else { d }) as usize;
    let off = cx.opt_int("offset")?.unwrap_or(0);
    let d1 = norm(cx.opt_int("dim1")?.unwrap_or(0));
    let d2 = norm(cx.opt_int("dim2")?.unwrap_or(1));
    if d1 >= sizes.len() || d2 >= sizes.len() || d1 == d2 {
        return Err(Error::bad_input(format!(
            "diagonal: dims {d1} and {d2} of a rank-{rank} tensor"
        )));
    }
    let mut strides = vec![1i64; sizes.len()];
    for i in (0..sizes.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * sizes[i + 1];
    }
    let len = if off >= 0 {
        sizes[d1].min(sizes[d2] - off)
    } else {
        (sizes[d1] + off).min(sizes[d2])
    }
    .max(0);
    let (mut size, mut stride): (Vec<i64>, Vec<i64>) = (0..sizes.len())
        .filter(|&i| i != d1 && i != d2)
        .map(|i| (sizes[i], strides[i]))
        .unzip();
    size.push(len);
    stride.push(strides[d1] + strides[d2]);
    let start = if len == 0 {
        0
    } else if off >= 0 {
        off * strides[d2]
    } else {
        -off * strides[d1]
    };
    let idx = crate::ir::as_strided_gather(&sizes, &strides, 0, &size, &stride, start)
        .ok_or_else(|| Error::internal("diagonal: indices outside the input"))?;
    let flat = cx.reshape_const(&x, &[-1])?;
    let indices = cx.const_i64s(&idx);
    let y = cx.node("Gather", &[&flat, &indices], vec![]);
    let y = cx.reshape_const(&y, &size)?;
    cx.set(0, y);
    Ok(())
}

// shape and layout

fn reshape(cx: &mut EmitNode, arg: &str) -> Result<()> {
    let (x, _) = first(cx)?;
    let zero = matches!(cx.arg(arg)?, Argument::Ints(v) if v.contains(&0))
        || matches!(cx.arg(arg)?, Argument::SymInts(v) if v.contains(&SymRef::Int(0)));
    let shape = cx.int_list(arg)?;
    let attrs = if zero {
        vec![attr_int("allowzero", 1)]
    } else {
        vec![]
    };
    let y = cx.node("Reshape", &[&x, &shape], attrs);
    cx.set(0, y);
    Ok(())
}

fn view_as(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let other = cx.input("other")?;
    let shape = cx.shape(&other);
    let y = cx.node("Reshape", &[&x, &shape], vec![]);
    cx.set(0, y);
    Ok(())
}

/// Reshapes to the output's recorded sizes (flatten, unflatten).
fn reshape_to_output(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let sizes = cx.out_meta(0)?.sizes.clone();
    if sizes == meta.sizes {
        cx.set(0, x);
        return Ok(());
    }
    let y = cx.reshape_to(&x, &sizes)?;
    cx.set(0, y);
    Ok(())
}

fn permute(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let perm: Vec<i64> = cx
        .ints("dims")?
        .iter()
        .map(|d| Ok(normalize_dim(*d, rank)? as i64))
        .collect::<Result<_>>()?;
    if perm.iter().enumerate().all(|(i, p)| *p == i as i64) {
        cx.set(0, x);
        return Ok(());
    }
    let y = cx.transpose(&x, &perm);
    cx.set(0, y);
    Ok(())
}

fn transpose(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let (a, b) = if cx.node.target.name == "transpose" {
        (
            (normalize_dim(cx.int("dim0")?, rank)? as i64),
            (normalize_dim(cx.int("dim1")?, rank)? as i64),
        )
    } else if rank < 2 {
        (0, 0)
    } else {
        (rank as i64 - 2, rank as i64 - 1)
    };
    if a == b || rank < 2 {
        cx.set(0, x);
        return Ok(());
    }
    let mut perm: Vec<i64> = (0..rank as i64).collect();
    if cx.node.target.name == "numpy_T" {
        perm.reverse();
    } else {
        perm.swap(a as usize, b as usize);
    }
    let y = cx.transpose(&x, &perm);
    cx.set(0, y);
    Ok(())
}

/// torch squeezes only dims of size 1; the recorded sizes say which.
fn squeeze(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let candidates: Vec<i64> = match cx.node.arg("dim") {
        None | Some(Argument::None) => (0..rank as i64).collect(),
        Some(_) => cx
            .ints("dim")?
            .iter()
            .map(|d| Ok(normalize_dim(*d, rank)? as i64))
            .collect::<Result<_>>()?,
    };
    let axes: Vec<i64> = candidates
        .into_iter()
        .filter(|d| meta.sizes.get(*d as usize).and_then(Sym::as_int) == Some(1))
        .collect();
    if axes.is_empty() || rank == 0 {
        cx.set(0, x);
        return Ok(());
    }
    let y = cx.squeeze(&x, &axes);
    cx.set(0, y);
    Ok(())
}

fn unsqueeze(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let dim = cx.int("dim")?;
    let dim = if dim < 0 {
        dim + meta.sizes.len() as i64 + 1
    } else {
        dim
    };
    let y = cx.unsqueeze(&x, &[dim]);
    cx.set(0, y);
    Ok(())
}

/// Expand with torch's -1 (keep) as ONNX's broadcasting 1.
fn expand(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let out = cx.out_meta(0)?;
    if out.sizes == meta.sizes {
        cx.set(0, x);
        return Ok(());
    }
    let size = match cx.arg("size")? {
        Argument::Ints(v) => v
            .iter()
            .map(|s| SymRef::Int(if *s == -1 { 1 } else { *s }))
            .collect::<Vec<_>>(),
        Argument::SymInts(v) => v
            .iter()
            .map(|s| {
                if *s == SymRef::Int(-1) {
                    SymRef::Int(1)
                } else {
                    *s
                }
            })
            .collect(),
        other => return Err(Error::bad_input(format!("expand size: {other:?}"))),
    };
    let shape = cx.sym_list(&size)?;
    // ONNX Runtime's CPU Expand has no bfloat16 kernel: through float32
    // (exact both ways)
    let c = cx.compute(meta.dtype);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let y = cx.node("Expand", &[&xs, &shape], vec![]);
    let y = cx.cast(&y, c, meta.dtype)?;
    cx.set(0, y);
    Ok(())
}

fn expand_as(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let other = cx.input("other")?;
    let shape = cx.shape(&other);
    let y = cx.node("Expand", &[&x, &shape], vec![]);
    cx.set(0, y);
    Ok(())
}

fn repeat(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let reps = match cx.arg("repeats")? {
        Argument::Ints(v) => v.iter().map(|r| SymRef::Int(*r)).collect::<Vec<_>>(),
        Argument::SymInts(v) => v.clone(),
        other => return Err(Error::bad_input(format!("repeats: {other:?}"))),
    };
    let rank = meta.sizes.len();
    let x = if reps.len() > rank {
        let axes: Vec<i64> = (0..(reps.len() - rank) as i64).collect();
        cx.unsqueeze(&x, &axes)
    } else {
        x
    };
    let r = cx.sym_list(&reps)?;
    let y = cx.node("Tile", &[&x, &r], vec![]);
    cx.set(0, y);
    Ok(())
}

fn cat(cx: &mut EmitNode) -> Result<()> {
    let tensors = cx.tensors("tensors")?;
    let out = cx.out_meta(0)?;
    let rank = out.sizes.len();
    let dim = normalize_dim(cx.opt_int("dim")?.unwrap_or(0), rank)? as i64;
    let dtype = out.dtype;
    let mut parts = Vec::new();
    for (name, meta) in tensors {
        // torch skips legacy empty 1-D tensors of another rank.
        if meta.sizes.len() != rank && meta.sizes.len() == 1 && meta.sizes[0].as_int() == Some(0) {
            continue;
        }
        parts.push(cx.cast(&name, meta.dtype, dtype)?);
    }
    let y = match parts.len() {
        0 => return Err(Error::unsupported("cat of nothing but empty tensors")),
        _ => cx.concat(&parts, dim),
    };
    cx.set(0, y);
    Ok(())
}

fn stack(cx: &mut EmitNode) -> Result<()> {
    let tensors = cx.tensors("tensors")?;
    let out = cx.out_meta(0)?;
    let rank = out.sizes.len();
    let dim = normalize_dim(cx.opt_int("dim")?.unwrap_or(0), rank)? as i64;
    let mut parts = Vec::new();
    for (name, meta) in tensors {
        let c = cx.cast(&name, meta.dtype, out.dtype)?;
        parts.push(cx.unsqueeze(&c, &[dim]));
    }
    let y = cx.concat(&parts, dim);
    cx.set(0, y);
    Ok(())
}

/// split / split_with_sizes / chunk / unbind: one Split with the output
/// sizes the graph recorded.
fn split(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let unbind = cx.node.target.name == "unbind";
    let dim = normalize_dim(cx.opt_int("dim")?.unwrap_or(0), rank)? as i64;
    let n = cx.out_count();
    if n == 0 {
        return Ok(());
    }
    let mut sizes = Vec::with_capacity(n);
    for i in 0..n {
        sizes.push(if unbind {
            Sym::Int(1)
        } else {
            cx.out_meta(i)?.sizes[dim as usize].clone()
        });
    }
    if n == 1 {
        let y = if unbind { cx.squeeze(&x, &[dim]) } else { x };
        cx.set(0, y);
        return Ok(());
    }
    let split = cx.sizes(&sizes)?;
    let ys = cx.node_n("Split", &[&x, &split], vec![attr_int("axis", dim)], n);
    for (i, y) in ys.into_iter().enumerate() {
        let y = if unbind { cx.squeeze(&y, &[dim]) } else { y };
        cx.set(i, y);
    }
    Ok(())
}

fn slice(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dim = normalize_dim(cx.opt_int("dim")?.unwrap_or(0), rank)? as i64;
    let out = cx.out_meta(0)?;
    if out.sizes == meta.sizes {
        // A slice of everything.
        cx.set(0, x);
        return Ok(());
    }
    let (start, end, step) = if cx.node.target.name == "narrow" {
        let start = sym_arg(cx, "start", 0)?;
        let length = sym_arg(cx, "length", 0)?;
        let end = cx.node("Add", &[&start, &length], vec![]);
        (start, end, cx.const_i64s(&[1]))
    } else {
        (
            sym_arg(cx, "start", 0)?,
            sym_arg(cx, "end", i64::MAX)?,
            sym_arg(cx, "step", 1)?,
        )
    };
    let axes = cx.const_i64s(&[dim]);
    let y = cx.node("Slice", &[&x, &start, &end, &axes, &step], vec![]);
    cx.set(0, y);
    Ok(())
}

fn select(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dim = normalize_dim(cx.int("dim")?, rank)? as i64;
    let index = match cx.arg("index")? {
        Argument::Int(v) => SymRef::Int(*v),
        Argument::SymInt(r) => *r,
        other => return Err(Error::bad_input(format!("select index: {other:?}"))),
    };
    let i = cx.sym_int(&index)?;
    let y = cx.node("Gather", &[&x, &i], vec![attr_int("axis", dim)]);
    cx.set(0, y);
    Ok(())
}

/// torch pads from the last dim backwards in (before, after) pairs.
fn pad(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let name = if cx.has("pad") { "pad" } else { "padding" };
    // a symbolic pad size (`F.pad(x, (0, n))`) is read at run time
    let pads: Vec<SymRef> = match cx.node.arg(name) {
        Some(Argument::SymInts(rs)) => rs.clone(),
        _ => cx.ints(name)?.into_iter().map(SymRef::Int).collect(),
    };
    if !pads.len().is_multiple_of(2) || pads.len() / 2 > rank {
        return Err(Error::bad_input(format!(
            "pad list {pads:?} for a rank-{rank} tensor"
        )));
    }
    let mut onnx = vec![SymRef::Int(0); 2 * rank];
    for (i, pair) in pads.chunks(2).enumerate() {
        let d = rank - 1 - i;
        onnx[d] = pair[0];
        onnx[rank + d] = pair[1];
    }
    let op_mode = match cx.node.target.name.as_str() {
        n if n.starts_with("reflection_pad") => Some("reflect".to_string()),
        n if n.starts_with("replication_pad") => Some("replicate".to_string()),
        _ => cx.opt_string("mode")?,
    };
    let mode = match op_mode.as_deref() {
        None | Some("constant") => "constant",
        Some("reflect") => "reflect",
        Some("replicate") => "edge",
        Some("circular") if cx.opset() >= 19 => "wrap",
        Some(m) => return Err(Error::unsupported(format!("pad mode {m:?}"))),
    };
    let value = if cx.node.target.name == "constant_pad_nd" {
        lit(cx, "value")?.unwrap_or(Lit::Int(0))
    } else {
        Lit::Float(cx.opt_float("value")?.unwrap_or(0.0))
    };
    let p = cx.sym_list(&onnx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        if mode == "constant" {
            let v = cx.scalar(value, c)?;
            Ok(cx.node("Pad", &[x, &p, &v], vec![attr_str("mode", mode)]))
        } else {
            Ok(cx.node("Pad", &[x, &p], vec![attr_str("mode", mode)]))
        }
    })
}

fn flip(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dims: Vec<i64> = cx
        .ints("dims")?
        .iter()
        .map(|d| Ok(normalize_dim(*d, rank)? as i64))
        .collect::<Result<_>>()?;
    if dims.is_empty() {
        cx.set(0, x);
        return Ok(());
    }
    let n = dims.len();
    let starts = cx.const_i64s(&vec![-1; n]);
    let ends = cx.const_i64s(&vec![i64::MIN; n]);
    let axes = cx.const_i64s(&dims);
    let steps = cx.const_i64s(&vec![-1; n]);
    let y = cx.node("Slice", &[&x, &starts, &ends, &axes, &steps], vec![]);
    cx.set(0, y);
    Ok(())
}

fn pixel_shuffle(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    if meta.sizes.len() != 4 {
        return Err(Error::unsupported(
            "pixel_shuffle of a tensor that is not 4-D",
        ));
    }
    let r = cx.int("upscale_factor")?;
    let y = cx.node(
        "DepthToSpace",
        &[&x],
        vec![attr_int("blocksize", r), attr_str("mode", "CRD")],
    );
    cx.set(0, y);
    Ok(())
}

// more indexing and creation

fn roll(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let shifts = cx.ints("shifts")?;
    let dims: Vec<i64> = cx.opt_ints("dims")?.unwrap_or_default();
    let (mut y, flat) = if dims.is_empty() {
        (cx.reshape_const(&x, &[-1])?, true)
    } else {
        (x.clone(), false)
    };
    let pairs: Vec<(i64, i64)> = if flat {
        vec![(shifts.first().copied().unwrap_or(0), 0)]
    } else {
        shifts
            .iter()
            .zip(&dims)
            .map(|(s, d)| Ok((*s, normalize_dim(*d, rank)? as i64)))
            .collect::<Result<_>>()?
    };
    for (shift, dim) in pairs {
        let size = if flat {
            meta.static_sizes().map(|s| s.iter().product::<i64>())
        } else {
            meta.sizes[dim as usize].as_int()
        };
        let shift = match size {
            Some(n) if n > 0 => shift.rem_euclid(n),
            _ => shift,
        };
        if shift == 0 {
            continue;
        }
        let axes = cx.const_i64s(&[dim]);
        let neg = cx.const_i64s(&[-shift]);
        let zero = cx.const_i64s(&[0]);
        let end = cx.const_i64s(&[i64::MAX]);
        let tail = cx.node("Slice", &[&y, &neg, &end, &axes], vec![]);
        let head = cx.node("Slice", &[&y, &zero, &neg, &axes], vec![]);
        y = cx.concat(&[tail, head], dim);
    }
    if flat {
        let shape = cx.shape(&x);
        y = cx.node("Reshape", &[&y, &shape], vec![]);
    }
    cx.set(0, y);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::AS_STRIDED, as_strided),
    (aten::DIAGONAL, diagonal),
    (aten::PIXEL_SHUFFLE, pixel_shuffle),
    (aten::VIEW, |cx| reshape(cx, "size")),
    (aten::_UNSAFE_VIEW, |cx| reshape(cx, "size")),
    (aten::RESHAPE, |cx| reshape(cx, "shape")),
    (aten::VIEW_AS, view_as),
    (aten::FLATTEN_USING_INTS, reshape_to_output),
    (aten::UNFLATTEN_INT, reshape_to_output),
    (aten::PERMUTE, permute),
    (aten::TRANSPOSE_INT, transpose),
    (aten::T, transpose),
    (aten::NUMPY_T, transpose),
    (aten::SQUEEZE, squeeze),
    (aten::SQUEEZE_DIM, squeeze),
    (aten::SQUEEZE_DIMS, squeeze),
    (aten::UNSQUEEZE, unsqueeze),
    (aten::EXPAND, expand),
    (aten::EXPAND_AS, expand_as),
    (aten::REPEAT, repeat),
    (aten::CAT, cat),
    (aten::CONCAT, cat),
    (aten::STACK, stack),
    (aten::SPLIT_TENSOR, split),
    (aten::SPLIT_WITH_SIZES, split),
    (aten::CHUNK, split),
    (aten::UNBIND_INT, split),
    (aten::SLICE_TENSOR, slice),
    (aten::NARROW, slice),
    (aten::SELECT_INT, select),
    (aten::CONSTANT_PAD_ND, pad),
    (aten::REFLECTION_PAD1D, pad),
    (aten::REFLECTION_PAD2D, pad),
    (aten::REFLECTION_PAD3D, pad),
    (aten::REPLICATION_PAD1D, pad),
    (aten::REPLICATION_PAD2D, pad),
    (aten::REPLICATION_PAD3D, pad),
    (aten::ROLL, roll),
    (aten::PAD, pad),
    (aten::FLIP, flip),
];
