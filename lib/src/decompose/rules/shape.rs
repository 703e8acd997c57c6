//! Shape ops that make new tensors (cat, split, flip, repeat, pad, ...) and views by shape (view, permute, expand, ...): the decomposition rules.

use crate::ir::op::aten;
use super::*;

fn transpose(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let r = em.rank(x)?;
    let (d0, d1) = (
        normalize_dim(a.int("dim0")?, r)?,
        normalize_dim(a.int("dim1")?, r)?,
    );
    let mut perm: Vec<usize> = (0..r).collect();
    if r > 0 {
        perm.swap(d0, d1);
    }
    Ok(vec![permute(em, x, &perm, Some(a.out(0)?))?])
}

pub(super) fn t(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    if em.rank(x)? < 2 {
        return Ok(vec![x]);
    }
    Ok(vec![permute(em, x, &[1, 0], Some(a.out(0)?))?])
}

fn reshape_rule(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![reshape(
        em,
        a.tensor("self")?,
        &a.syms("shape")?,
        Some(a.out(0)?),
    )?])
}

fn unsafe_view(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![view(
        em,
        a.tensor("self")?,
        &a.syms("size")?,
        Some(a.out(0)?),
    )?])
}

fn view_as(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let other = a.tensor("other")?;
    let sizes = em.size_refs(other)?;
    Ok(vec![view(em, a.tensor("self")?, &sizes, Some(a.out(0)?))?])
}

/// `reshape_as(self, other)`: `reshape` to `other`'s sizes (symbolic ones
/// read at run time), a view where the layout allows, else a copy.
fn reshape_as(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let sizes = em.size_refs(a.tensor("other")?)?;
    Ok(vec![reshape(em, a.tensor("self")?, &sizes, Some(a.out(0)?))?])
}

fn flatten(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let r = em.rank(x)?;
    if r == 0 {
        return Ok(vec![reshape(em, x, &[SymRef::Int(1)], Some(a.out(0)?))?]);
    }
    let (s, e) = (
        normalize_dim(a.int("start_dim")?, r)?,
        normalize_dim(a.int("end_dim")?, r)?,
    );
    if s == e {
        return Ok(vec![x]);
    }
    let sizes = em.size_refs(x)?;
    let mid = em.product(&sizes[s..=e])?;
    let mut new: Vec<SymRef> = sizes[..s].to_vec();
    new.push(mid);
    new.extend_from_slice(&sizes[e + 1..]);
    Ok(vec![reshape(em, x, &new, Some(a.out(0)?))?])
}

fn unflatten(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let r = em.rank(x)?;
    let d = normalize_dim(a.int("dim")?, r)?;
    let sizes = em.size_refs(x)?;
    let mut new: Vec<SymRef> = sizes[..d].to_vec();
    let mut inner = a.syms("sizes")?;
    // Resolve a -1 against the dim it splits.
    if let Some(pos) = inner.iter().position(|s| *s == SymRef::Int(-1)) {
        if let SymRef::Int(total) = sizes[d] {
            let known: i64 = inner
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != pos)
                .map(|(_, s)| if let SymRef::Int(v) = s { *v } else { 1 })
                .product();
            inner[pos] = SymRef::Int(total / known.max(1));
        }
    }
    new.extend(inner);
    new.extend_from_slice(&sizes[d + 1..]);
    Ok(vec![reshape(em, x, &new, Some(a.out(0)?))?])
}

fn squeeze_dim(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let d = normalize_dim(a.int("dim")?, em.rank(x)?)?;
    Ok(vec![squeeze_dims(em, x, &[d], Some(a.out(0)?))?])
}

fn squeeze_all(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let sizes = em.static_sizes(x, "squeeze() of every size-1 dim")?;
    let dims: Vec<usize> = (0..sizes.len()).filter(|&i| sizes[i] == 1).collect();
    Ok(vec![squeeze_dims(em, x, &dims, Some(a.out(0)?))?])
}

fn split_into(
    em: &mut Emitter,
    a: &NodeArgs,
    x: ValueId,
    dim: i64,
    sizes: Vec<i64>,
) -> Result<Vec<ValueId>> {
    let outs = a.outs();
    if outs.len() != sizes.len() {
        return Err(Error::bad_input(format!(
            "node {}: {} outputs, but the split makes {}",
            a.0.name,
            outs.len(),
            sizes.len()
        )));
    }
    em.call(
        aten::SPLIT_WITH_SIZES,
        vec![
            ("self", Argument::Tensor(x)),
            ("split_sizes", ints_arg(&sizes)),
            ("dim", Argument::Int(dim)),
        ],
        outs.iter().map(|o| Out::Into(*o)).collect(),
    )
}

fn split(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let d = normalize_dim(a.int("dim")?, em.rank(x)?)?;
    let n = em.static_dim(x, d, "split")?;
    let step = a.int("split_size")?.max(1);
    let mut sizes = Vec::new();
    let mut at = 0;
    while at < n || (n == 0 && sizes.is_empty()) {
        sizes.push(step.min(n - at));
        at += step;
    }
    split_into(em, a, x, a.int("dim")?, sizes)
}

fn chunk(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let d = normalize_dim(a.int("dim")?, em.rank(x)?)?;
    let n = em.static_dim(x, d, "chunk")?;
    let chunks = a.int("chunks")?.max(1);
    let step = (n + chunks - 1) / chunks;
    let mut sizes = Vec::new();
    let mut at = 0;
    while at < n {
        sizes.push(step.min(n - at));
        at += step;
    }
    split_into(em, a, x, a.int("dim")?, sizes)
}

fn unbind(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dim = a.int("dim")?;
    let mut out = Vec::new();
    for (i, o) in a.outs().into_iter().enumerate() {
        em.op_into(
            aten::SELECT_INT,
            vec![
                ("self", Argument::Tensor(x)),
                ("dim", Argument::Int(dim)),
                ("index", Argument::SymInt(SymRef::Int(i as i64))),
            ],
            o,
        )?;
        out.push(o);
    }
    Ok(out)
}

fn stack(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let xs = a.tensors("tensors")?;
    let r = em.rank(
        *xs.first()
            .ok_or_else(|| Error::bad_input("stack of no tensors"))?,
    )?;
    let d = normalize_dim(a.int("dim")?, r + 1)?;
    let parts: Vec<ValueId> = xs
        .iter()
        .map(|x| unsqueeze(em, *x, d))
        .collect::<Result<_>>()?;
    em.op_into(
        aten::CAT,
        vec![
            ("tensors", Argument::Tensors(parts)),
            ("dim", Argument::Int(d as i64)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn expand_as(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let sizes = em.size_refs(a.tensor("other")?)?;
    em.op_into(
        aten::EXPAND,
        vec![
            ("self", Argument::Tensor(a.tensor("self")?)),
            ("size", sym_ints_arg(&sizes)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn pad(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let out = a.out(0)?;
    let p = a.syms("pad")?;
    let mode = a.string("mode")?;
    if mode == "constant" {
        let value = a.opt_float("value")?.unwrap_or(0.0);
        let dtype = em.dtype(x)?;
        em.op_into(
            aten::CONSTANT_PAD_ND,
            vec![
                ("self", Argument::Tensor(x)),
                ("pad", sym_ints_arg(&p)),
                ("value", scalar(value, dtype)),
            ],
            out,
        )?;
        return Ok(vec![out]);
    }
    let dims = p.len() / 2;
    if mode == "circular" {
        return circular_pad(em, a, x, &p, out);
    }
    let op = match (mode.as_str(), dims) {
        ("reflect", 1..=3) => format!("aten.reflection_pad{dims}d.default"),
        ("replicate", 1..=3) => format!("aten.replication_pad{dims}d.default"),
        _ => {
            return Err(Error::unsupported(format!(
                "node {}: pad mode {mode:?} over {dims} dims has no core ATen form",
                a.0.name
            )))
        }
    };
    em.op_into(
        &op,
        vec![("self", Argument::Tensor(x)), ("padding", sym_ints_arg(&p))],
        out,
    )?;
    Ok(vec![out])
}

/// Circular padding, as torch's `_pad_circular`: per padded dim (the last
/// first), the input's last `left` entries, the input, its first `right`
/// entries, joined; a negative pad crops instead.
fn circular_pad(
    em: &mut Emitter,
    a: &NodeArgs,
    x: ValueId,
    pad: &[SymRef],
    out: ValueId,
) -> Result<Vec<ValueId>> {
    let pad: Vec<i64> = pad
        .iter()
        .map(|p| match p {
            SymRef::Int(i) => Ok(*i),
            _ => Err(Error::unsupported(format!(
                "node {}: circular padding by a symbolic amount",
                a.0.name
            ))),
        })
        .collect::<Result<_>>()?;
    let r = em.rank(x)?;
    let mut y = x;
    let pairs = pad.len() / 2;
    for (k, lr) in pad.chunks(2).enumerate() {
        let d = r - 1 - k;
        let n = em.static_dim(y, d, "circular padding")?;
        let (left, right) = (lr[0], lr[1]);
        if left > n || right > n {
            return Err(Error::bad_input(format!(
                "node {}: circular padding of {left}, {right} on a dim of {n} (at most its size)",
                a.0.name
            )));
        }
        let core = slice(em, y, d, (-left).max(0), n - (-right).max(0))?;
        let mut parts = Vec::new();
        if left > 0 {
            parts.push(slice(em, y, d, n - left, n)?);
        }
        parts.push(core);
        if right > 0 {
            parts.push(slice(em, y, d, 0, right)?);
        }
        let last = k + 1 == pairs;
        y = cat_op(em, &parts, d, last.then_some(out))?;
    }
    Ok(vec![y])
}

/// `replication_pad1d` (no core form) through `replication_pad2d` on a
/// unit height.
fn replication_pad1d(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let out = a.out(0)?;
    let r = em.rank(x)?;
    let x2 = unsqueeze(em, x, r - 1)?;
    let m = em.meta(out)?.clone();
    let mut sizes = m.sizes.clone();
    sizes.insert(r - 1, Sym::Int(1));
    let meta = em.meta_like(out, m.dtype, sizes)?;
    let p = a.syms("padding")?;
    let mut p2 = p.clone();
    p2.extend([SymRef::Int(0), SymRef::Int(0)]);
    let y = em.op(
        aten::REPLICATION_PAD2D,
        vec![
            ("self", Argument::Tensor(x2)),
            ("padding", sym_ints_arg(&p2)),
        ],
        meta,
    )?;
    Ok(vec![squeeze_dims(em, y, &[r - 1], Some(out))?])
}

fn diag(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let sizes = em.static_sizes(x, "diag")?;
    if sizes.len() != 2 {
        return Err(Error::unsupported(format!(
            "node {}: diag of a vector (building a matrix) has no decomposition here",
            a.0.name
        )));
    }
    let k = a.int("diagonal")?;
    let (r0, c0) = if k >= 0 { (0, k) } else { (-k, 0) };
    let len = (sizes[0] - r0).min(sizes[1] - c0).max(0);
    let rows = arange_from(em, x, r0, len)?;
    let cols = arange_from(em, x, c0, len)?;
    em.op_into(
        aten::INDEX_TENSOR,
        vec![
            ("self", Argument::Tensor(x)),
            (
                "indices",
                Argument::OptionalTensors(vec![Some(rows), Some(cols)]),
            ),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn mt_rule(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let r = em.rank(x)?;
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    Ok(vec![permute(em, x, &perm, Some(a.out(0)?))?])
}

fn movedim(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let r = em.rank(x)?;
    let (src, dst) = (
        normalize_dim(a.int("source")?, r)?,
        normalize_dim(a.int("destination")?, r)?,
    );
    let mut rest: Vec<usize> = (0..r).filter(|&d| d != src).collect();
    rest.insert(dst, src);
    Ok(vec![permute(em, x, &rest, Some(a.out(0)?))?])
}

fn swapaxes(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let r = em.rank(x)?;
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(
        normalize_dim(a.int("axis0")?, r)?,
        normalize_dim(a.int("axis1")?, r)?,
    );
    Ok(vec![permute(em, x, &perm, Some(a.out(0)?))?])
}

fn narrow(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let d = normalize_dim(a.int("dim")?, em.rank(x)?)?;
    // start and length may be symbolic (`narrow(x, 1, 1, n)`): the end is
    // their sum, computed at run time
    let (start, len) = (a.sym("start")?, a.sym("length")?);
    let start = match start {
        SymRef::Int(s) if s < 0 => {
            let n = em.size(x, d)?;
            em.add(n, SymRef::Int(s))?
        }
        s => s,
    };
    let end = em.add(start, len)?;
    em.op_into(
        aten::SLICE_TENSOR,
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(d as i64)),
            ("start", Argument::SymInt(start)),
            ("end", Argument::SymInt(end)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn pixel_shuffle(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let s = em.static_sizes(x, "pixel_shuffle")?;
    let r = s.len();
    let (lead, c, h, w) = (&s[..r - 3], s[r - 3], s[r - 2], s[r - 1]);
    let nl = lead.len();
    let (shape, perm): (Vec<i64>, Vec<usize>) = if a.0.target.name == "pixel_shuffle" {
        let f = a.int("upscale_factor")?;
        let shape = [lead, &[c / (f * f), f, f, h, w]].concat();
        (
            shape,
            (0..nl)
                .chain([nl, nl + 3, nl + 1, nl + 4, nl + 2])
                .collect(),
        )
    } else {
        let f = a.int("downscale_factor")?;
        let shape = [lead, &[c, h / f, f, w / f, f]].concat();
        (
            shape,
            (0..nl)
                .chain([nl, nl + 2, nl + 4, nl + 1, nl + 3])
                .collect(),
        )
    };
    let refs: Vec<SymRef> = shape.iter().map(|&v| SymRef::Int(v)).collect();
    let v = view(em, x, &refs, None)?;
    let p = permute(em, v, &perm, None)?;
    let out = a.out(0)?;
    let final_shape: Vec<SymRef> = em
        .static_sizes(out, "pixel_shuffle")?
        .into_iter()
        .map(SymRef::Int)
        .collect();
    Ok(vec![reshape(em, p, &final_shape, Some(out))?])
}

fn repeat_interleave(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let mut x = a.tensor("self")?;
    let n = a.int("repeats")?;
    let d = match a.opt_int("dim")? {
        Some(d) => normalize_dim(d, em.rank(x)?)?,
        None => {
            let total = em
                .static_sizes(x, "repeat_interleave")?
                .iter()
                .product::<i64>();
            x = reshape(em, x, &[SymRef::Int(total)], None)?;
            0
        }
    };
    let u = unsqueeze(em, x, d + 1)?;
    let mut sizes = em.size_refs(u)?;
    sizes[d + 1] = SymRef::Int(n);
    let e = expand(em, u, &sizes)?;
    let merged = em.mul(sizes[d], SymRef::Int(n))?;
    let mut shape: Vec<SymRef> = sizes[..d].to_vec();
    shape.push(merged);
    shape.extend_from_slice(&sizes[d + 2..]);
    Ok(vec![reshape(em, e, &shape, Some(a.out(0)?))?])
}

fn roll(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x0 = a.tensor("self")?;
    let shifts = a.ints("shifts")?;
    let dims = a.ints("dims")?;
    let out = a.out(0)?;
    let (mut x, dims) = if dims.is_empty() {
        let total = em.static_sizes(x0, "roll")?.iter().product::<i64>();
        (reshape(em, x0, &[SymRef::Int(total)], None)?, vec![0])
    } else {
        (x0, dims)
    };
    for (&shift, &dim) in shifts.iter().zip(&dims) {
        let d = normalize_dim(dim, em.rank(x)?)?;
        let n = em.static_dim(x, d, "roll")?;
        let s = shift.rem_euclid(n.max(1));
        if s == 0 {
            continue;
        }
        let tail = slice(em, x, d, n - s, n)?;
        let head = slice(em, x, d, 0, n - s)?;
        x = cat_op(em, &[tail, head], d, None)?;
    }
    if a.ints("dims")?.is_empty() {
        let shape = em.size_refs(x0)?;
        return Ok(vec![view(em, x, &shape, Some(out))?]);
    }
    Ok(vec![x])
}

fn broadcast_tensors(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let xs = a.tensors("tensors")?;
    let mut out = Vec::new();
    for (x, o) in xs.iter().zip(a.outs()) {
        let sizes = em.size_refs(o)?;
        em.op_into(
            aten::EXPAND,
            vec![
                ("self", Argument::Tensor(*x)),
                ("size", sym_ints_arg(&sizes)),
            ],
            o,
        )?;
        out.push(o);
    }
    Ok(out)
}

fn channel_shuffle(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let g = a.int("groups")?;
    let s = em.static_sizes(x, "channel_shuffle")?;
    let (n, c) = (s[0], s[1]);
    let mut shape = vec![n, g, c / g];
    shape.extend_from_slice(&s[2..]);
    let refs: Vec<SymRef> = shape.iter().map(|&v| SymRef::Int(v)).collect();
    let v = view(em, x, &refs, None)?;
    let mut perm: Vec<usize> = vec![0, 2, 1];
    perm.extend(3..shape.len());
    let p = permute(em, v, &perm, None)?;
    let back: Vec<SymRef> = s.iter().map(|&v| SymRef::Int(v)).collect();
    Ok(vec![reshape(em, p, &back, Some(a.out(0)?))?])
}

fn flip_lr_ud(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let d = if a.0.target.name == "fliplr" { 1 } else { 0 };
    em.op_into(
        aten::FLIP,
        vec![
            ("self", Argument::Tensor(a.tensor("self")?)),
            ("dims", ints_arg(&[d])),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn hvstack(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let mut xs = a.tensors("tensors")?;
    let out = a.out(0)?;
    let dim = if a.0.target.name == "hstack" {
        if em.rank(xs[0])? == 1 {
            0
        } else {
            1
        }
    } else {
        for x in xs.iter_mut() {
            if em.rank(*x)? == 1 {
                *x = unsqueeze(em, *x, 0)?;
            }
        }
        0
    };
    em.op_into(
        aten::CAT,
        vec![
            ("tensors", Argument::Tensors(xs)),
            ("dim", Argument::Int(dim)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn numpy_t(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let perm: Vec<usize> = (0..em.rank(x)?).rev().collect();
    Ok(vec![permute(em, x, &perm, Some(a.out(0)?))?])
}

fn rot90(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let r = em.rank(x)?;
    let dims = a.ints("dims")?;
    let (d0, d1) = (normalize_dim(dims[0], r)?, normalize_dim(dims[1], r)?);
    let k = a.int("k")?.rem_euclid(4);
    let out = a.out(0)?;
    let flip = |em: &mut Emitter, x: ValueId, ds: &[usize]| -> Result<ValueId> {
        let ds: Vec<i64> = ds.iter().map(|&d| d as i64).collect();
        same(
            em,
            aten::FLIP,
            vec![("self", Argument::Tensor(x)), ("dims", ints_arg(&ds))],
            x,
            None,
        )
    };
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(d0, d1);
    let y = match k {
        0 => return Ok(vec![clone(em, x, Some(out))?]),
        1 => {
            let f = flip(em, x, &[d1])?;
            permute(em, f, &perm, None)?
        }
        2 => flip(em, x, &[d0, d1])?,
        _ => {
            let f = flip(em, x, &[d0])?;
            permute(em, f, &perm, None)?
        }
    };
    Ok(vec![clone(em, y, Some(out))?])
}

fn tile(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let mut reps = a.syms("dims")?;
    let r = em.rank(x)?;
    while reps.len() < r {
        reps.insert(0, SymRef::Int(1));
    }
    em.op_into(
        aten::REPEAT,
        vec![
            ("self", Argument::Tensor(x)),
            ("repeats", sym_ints_arg(&reps)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

/// `x.unfold(dim, size, step)`: windows gathered with an index of
/// `step * i + j`, the window dim moved last.
fn unfold(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let r = em.rank(x)?.max(1);
    let d = normalize_dim(a.int("dimension")?, r)?;
    let (size, step) = (a.int("size")?, a.int("step")?);
    let n_in = em.static_sizes(x, "unfold")?.get(d).copied().unwrap_or(1);
    let n = (n_in - size) / step + 1;
    let starts = arange_col(em, x, n, true)?;
    let starts = with_scalar(em, aten::MUL_TENSOR, starts, Argument::Int(step))?;
    let offs = arange_col(em, x, size, false)?;
    let idx = binary(em, aten::ADD_TENSOR, starts, offs, Dtype::Int64, None)?;
    let mut indices: Vec<Option<ValueId>> = vec![None; d];
    indices.push(Some(idx));
    let mut sizes = em.sizes(x)?;
    sizes.splice(d..d + 1, [Sym::Int(n), Sym::Int(size)]);
    let meta = em.meta_like(x, em.dtype(x)?, sizes)?;
    let g = em.op(
        aten::INDEX_TENSOR,
        vec![
            ("self", Argument::Tensor(x)),
            ("indices", Argument::OptionalTensors(indices)),
        ],
        meta,
    )?;
    let mut perm: Vec<usize> = (0..=r).filter(|&i| i != d + 1).collect();
    perm.push(d + 1);
    Ok(vec![permute(em, g, &perm, Some(a.out(0)?))?])
}

fn block_diag(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let xs = a.tensors("tensors")?;
    let mut shapes = Vec::new();
    for x in &xs {
        let s = em.static_sizes(*x, "block_diag")?;
        shapes.push(match s.len() {
            0 => (1, 1),
            1 => (1, s[0]),
            _ => (s[0], s[1]),
        });
    }
    let total: i64 = shapes.iter().map(|s| s.1).sum();
    let mut rows = Vec::new();
    let mut left = 0;
    for (x, (r, c)) in xs.iter().zip(&shapes) {
        let x2 = reshape(em, *x, &[SymRef::Int(*r), SymRef::Int(*c)], None)?;
        let meta = em.meta_like(
            x2,
            em.dtype(a.out(0)?)?,
            vec![Sym::Int(*r), Sym::Int(total)],
        )?;
        rows.push(em.op(
            aten::CONSTANT_PAD_ND,
            vec![
                ("self", Argument::Tensor(x2)),
                ("pad", ints_arg(&[left, total - left - c])),
            ],
            meta,
        )?);
        left += c;
    }
    em.op_into(
        aten::CAT,
        vec![
            ("tensors", Argument::Tensors(rows)),
            ("dim", Argument::Int(0)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

/// column_stack (1-D and 0-D become columns, then cat on dim 1) and dstack
/// (each made at least 3-D, then cat on dim 2).
fn column_stack(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let col = a.0.target.name == "column_stack";
    let mut parts = Vec::new();
    for x in a.tensors("tensors")? {
        let s = em.static_sizes(x, "column_stack/dstack")?;
        let shape: Option<Vec<i64>> = match (col, s.len()) {
            (true, 0) => Some(vec![1, 1]),
            (true, 1) => Some(vec![s[0], 1]),
            (false, 0) => Some(vec![1, 1, 1]),
            (false, 1) => Some(vec![1, s[0], 1]),
            (false, 2) => Some(vec![s[0], s[1], 1]),
            _ => None,
        };
        parts.push(match shape {
            Some(sh) => reshape(
                em,
                x,
                &sh.into_iter().map(SymRef::Int).collect::<Vec<_>>(),
                None,
            )?,
            None => x,
        });
    }
    let dim = if col { 1 } else { 2 };
    em.op_into(
        aten::CAT,
        vec![
            ("tensors", Argument::Tensors(parts)),
            ("dim", Argument::Int(dim)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn diag_embed(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let (d1, d2) = (a.int("dim1")?, a.int("dim2")?);
    if (d1, d2) != (-2, -1) {
        return Err(Error::unsupported(format!(
            "node {}: diag_embed into dims other than the last two",
            a.0.name
        )));
    }
    let k = a.int("offset")?;
    let n = em
        .static_sizes(x, "diag_embed")?
        .last()
        .copied()
        .ok_or_else(|| Error::bad_input("diag_embed of a 0-d tensor"))?;
    let m = n + k.abs();
    let dtype = em.dtype(x)?;
    let rows = arange_col(em, x, m, true)?;
    let cols = arange_col(em, x, m, false)?;
    let diff = binary(em, aten::SUB_TENSOR, cols, rows, Dtype::Int64, None)?;
    let on = cmp(em, aten::EQ_SCALAR, diff, Argument::Int(k))?;
    // Values padded to m, laid along rows (k >= 0: row i holds x[i]) or
    // columns (k < 0: column j holds x[j]).
    let r = em.rank(x)?;
    let mut sizes = em.sizes(x)?;
    sizes[r - 1] = Sym::Int(m);
    let meta = em.meta_like(x, dtype, sizes)?;
    let padded = em.op(
        aten::CONSTANT_PAD_ND,
        vec![
            ("self", Argument::Tensor(x)),
            ("pad", ints_arg(&[0, k.abs()])),
        ],
        meta,
    )?;
    let vals = if k >= 0 {
        unsqueeze(em, padded, r)?
    } else {
        unsqueeze(em, padded, r - 1)?
    };
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    Ok(vec![where_(em, on, vals, zero, Some(a.out(0)?))?])
}

fn meshgrid(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let xs = a.tensors("tensors")?;
    let xy = a.0.target.overload == "indexing" && a.string("indexing")? == "xy";
    let outs = a.outs();
    let n = xs.len();
    let mut result = Vec::new();
    for (i, (x, o)) in xs.iter().zip(&outs).enumerate() {
        // With 'xy', the first two dims swap roles.
        let pos = if xy && n >= 2 && i < 2 { 1 - i } else { i };
        let mut shape = vec![SymRef::Int(1); n];
        shape[pos] = em.size(*x, 0)?;
        let v = view(em, *x, &shape, None)?;
        let full = em.size_refs(*o)?;
        em.op_into(
            aten::EXPAND,
            vec![("self", Argument::Tensor(v)), ("size", sym_ints_arg(&full))],
            *o,
        )?;
        result.push(*o);
    }
    Ok(result)
}

rules! {
    aten::TRANSPOSE_INT => [aten::PERMUTE] transpose;
    aten::T => [aten::PERMUTE] t;
    aten::RESHAPE => [aten::VIEW, aten::CLONE] reshape_rule;
    aten::_UNSAFE_VIEW => [aten::VIEW] unsafe_view;
    aten::VIEW_AS => [aten::VIEW] view_as;
    aten::RESHAPE_AS => [aten::VIEW, aten::CLONE] reshape_as;
    aten::FLATTEN_USING_INTS => [aten::VIEW, aten::CLONE] flatten;
    aten::UNFLATTEN_INT => [aten::VIEW, aten::CLONE] unflatten;
    aten::SQUEEZE_DIM => [aten::SQUEEZE_DIMS] squeeze_dim;
    aten::SQUEEZE => [aten::SQUEEZE_DIMS] squeeze_all;
    aten::SPLIT_TENSOR => [aten::SPLIT_WITH_SIZES] split;
    aten::CHUNK => [aten::SPLIT_WITH_SIZES] chunk;
    aten::UNBIND_INT => [aten::SELECT_INT] unbind;
    aten::STACK => [aten::UNSQUEEZE, aten::CAT] stack;
    aten::EXPAND_AS => [aten::EXPAND] expand_as;
    aten::PAD => [aten::CONSTANT_PAD_ND, aten::REFLECTION_PAD1D, aten::REFLECTION_PAD2D, aten::REFLECTION_PAD3D, aten::REPLICATION_PAD1D, aten::REPLICATION_PAD2D, aten::REPLICATION_PAD3D] pad;
    aten::REPLICATION_PAD1D => [aten::UNSQUEEZE, aten::REPLICATION_PAD2D, aten::SQUEEZE_DIMS] replication_pad1d;
    aten::BROADCAST_TENSORS => [aten::EXPAND] broadcast_tensors;
    aten::CHANNEL_SHUFFLE => [aten::VIEW, aten::PERMUTE, aten::CLONE] channel_shuffle;
    aten::FLIPLR => [aten::FLIP] flip_lr_ud;
    aten::FLIPUD => [aten::FLIP] flip_lr_ud;
    aten::HSTACK => [aten::CAT] hvstack;
    aten::VSTACK => [aten::UNSQUEEZE, aten::CAT] hvstack;
    aten::NUMPY_T => [aten::PERMUTE] numpy_t;
    aten::ROT90 => [aten::FLIP, aten::PERMUTE, aten::CLONE] rot90;
    aten::TILE => [aten::REPEAT] tile;
    aten::T_COPY => [aten::T, aten::CLONE] copy_variant;
    aten::TRANSPOSE_COPY_INT => [aten::TRANSPOSE_INT, aten::CLONE] copy_variant;
    aten::UNSQUEEZE_COPY => [aten::UNSQUEEZE, aten::CLONE] copy_variant;
    aten::SQUEEZE_COPY => [aten::SQUEEZE, aten::CLONE] copy_variant;
    aten::SQUEEZE_COPY_DIM => [aten::SQUEEZE_DIM, aten::CLONE] copy_variant;
    aten::SQUEEZE_COPY_DIMS => [aten::SQUEEZE_DIMS, aten::CLONE] copy_variant;
    aten::EXPAND_COPY => [aten::EXPAND, aten::CLONE] copy_variant;
    aten::PERMUTE_COPY => [aten::PERMUTE, aten::CLONE] copy_variant;
    aten::VIEW_COPY => [aten::VIEW, aten::CLONE] copy_variant;
    aten::SLICE_COPY_TENSOR => [aten::SLICE_TENSOR, aten::CLONE] copy_variant;
    aten::SELECT_COPY_INT => [aten::SELECT_INT, aten::CLONE] copy_variant;
    aten::UNFOLD_COPY => [aten::UNFOLD, aten::CLONE] copy_variant;
    aten::SPLIT_WITH_SIZES_COPY => [aten::SPLIT_WITH_SIZES, aten::CLONE] copy_variant;
    aten::UNFOLD => [aten::ARANGE_START_STEP, aten::MUL_TENSOR, aten::ADD_TENSOR, aten::UNSQUEEZE, aten::INDEX_TENSOR, aten::PERMUTE] unfold;
    aten::BLOCK_DIAG => [aten::CONSTANT_PAD_ND, aten::CAT] block_diag;
    aten::COLUMN_STACK => [aten::VIEW, aten::CAT] column_stack;
    aten::DSTACK => [aten::VIEW, aten::CAT] column_stack;
    aten::DIAG_EMBED => [aten::ARANGE_START_STEP, aten::SUB_TENSOR, aten::EQ_SCALAR, aten::CONSTANT_PAD_ND, aten::UNSQUEEZE, aten::WHERE_SELF] diag_embed;
    aten::MESHGRID_INDEXING => [aten::VIEW, aten::EXPAND] meshgrid;
    aten::MESHGRID => [aten::VIEW, aten::EXPAND] meshgrid;
    aten::DIAG => [aten::ARANGE_START_STEP, aten::INDEX_TENSOR] diag;
    aten::MT => [aten::PERMUTE] mt_rule;
    aten::MOVEDIM_INT => [aten::PERMUTE] movedim;
    aten::SWAPAXES => [aten::PERMUTE] swapaxes;
    aten::NARROW => [aten::SLICE_TENSOR] narrow;
    aten::PIXEL_SHUFFLE => [aten::VIEW, aten::PERMUTE, aten::CLONE] pixel_shuffle;
    aten::PIXEL_UNSHUFFLE => [aten::VIEW, aten::PERMUTE, aten::CLONE] pixel_shuffle;
    aten::REPEAT_INTERLEAVE_SELF_INT => [aten::UNSQUEEZE, aten::EXPAND, aten::CLONE, aten::VIEW] repeat_interleave;
    aten::ROLL => [aten::SLICE_TENSOR, aten::CAT, aten::VIEW] roll;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[
    (aten::CONCAT, aten::CAT),
    (aten::CONCATENATE, aten::CAT),
    (aten::UNSAFE_SPLIT_TENSOR, aten::SPLIT_TENSOR),
    (
        aten::UNSAFE_SPLIT_WITH_SIZES,
        aten::SPLIT_WITH_SIZES,
    ),
    (aten::ROW_STACK, aten::VSTACK),
    (
        aten::NATIVE_CHANNEL_SHUFFLE,
        aten::CHANNEL_SHUFFLE,
    ),
];
