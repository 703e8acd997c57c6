//! Linear algebra (mm, bmm, addmm, linear, matmul, distances, ...): the decomposition rules.

use crate::ir::op::aten;
use super::*;

fn linear(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, w, b) = (a.tensor("input")?, a.tensor("weight")?, a.opt_tensor("bias")?);
    let out = a.out(0)?;
    let wt = permute(em, w, &[1, 0], None)?;
    let rank = em.rank(x)?;
    if rank == 2 {
        return Ok(vec![mm(em, x, wt, b, Some(out))?]);
    }
    if rank >= 3 && b.is_some() && is_contiguous(em.meta(x)?) {
        let lead: Vec<SymRef> = (0..rank - 1)
            .map(|d| em.size(x, d))
            .collect::<Result<_>>()?;
        let k = em.size(x, rank - 1)?;
        let rows = em.product(&lead)?;
        let x2 = view(em, x, &[rows, k], None)?;
        let r = mm(em, x2, wt, b, None)?;
        let mut sizes = lead;
        sizes.push(em.size(w, 0)?);
        return Ok(vec![view(em, r, &sizes, Some(out))?]);
    }
    match b {
        None => Ok(vec![matmul(em, x, wt, Some(out))?]),
        Some(b) => {
            let r = matmul(em, x, wt, None)?;
            let dtype = em.dtype(r)?;
            Ok(vec![binary(em, aten::ADD_TENSOR, r, b, dtype, Some(out))?])
        }
    }
}

fn matmul_rule(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![matmul(
        em,
        a.tensor("self")?,
        a.tensor("other")?,
        Some(a.out(0)?),
    )?])
}

/// `beta * self + alpha * prod` into `out`, as the `add*` ops define it
/// (`self` is not read when beta is 0).
fn beta_self_plus_alpha(
    em: &mut Emitter,
    a: &NodeArgs,
    mut prod: ValueId,
    dtype: Dtype,
    out: ValueId,
) -> Result<Vec<ValueId>> {
    let (alpha, beta) = (a.float("alpha")?, a.float("beta")?);
    if alpha != 1.0 {
        prod = with_scalar(em, aten::MUL_TENSOR, prod, scalar(alpha, dtype))?;
    }
    if beta == 0.0 {
        return Ok(vec![prod]);
    }
    let mut s = a.tensor("self")?;
    if beta != 1.0 {
        s = with_scalar(em, aten::MUL_TENSOR, s, scalar(beta, dtype))?;
    }
    Ok(vec![binary(em, aten::ADD_TENSOR, s, prod, dtype, Some(out))?])
}

fn baddbmm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, dtype, m.sizes)?;
    let prod = em.op(
        aten::BMM,
        vec![
            ("self", Argument::Tensor(a.tensor("batch1")?)),
            ("mat2", Argument::Tensor(a.tensor("batch2")?)),
        ],
        meta,
    )?;
    beta_self_plus_alpha(em, a, prod, dtype, out)
}

/// sqrt(sum(x * x, dim, keepdim)) for the 2-norm.
fn norm2(
    em: &mut Emitter,
    x: ValueId,
    dims: &[i64],
    keepdim: bool,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let dtype = em.dtype(x)?;
    let sq = binary(em, aten::MUL_TENSOR, x, x, dtype, None)?;
    let s = sum_dims(em, sq, dims, keepdim, dtype, None)?;
    same(
        em,
        aten::SQRT,
        vec![("self", Argument::Tensor(s))],
        s,
        out,
    )
}

fn cosine_similarity(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x1, x2) = (a.tensor("x1")?, a.tensor("x2")?);
    let d = a.int("dim")?;
    let eps = a.float("eps")?;
    let dtype = em.dtype(x1)?;
    let mut unit = Vec::new();
    for x in [x1, x2] {
        let n = norm2(em, x, &[d], true, None)?;
        let n = same(
            em,
            aten::CLAMP,
            vec![("self", Argument::Tensor(n)), ("min", Argument::Float(eps))],
            n,
            None,
        )?;
        unit.push(binary(em, aten::DIV_TENSOR, x, n, dtype, None)?);
    }
    let p = binary(em, aten::MUL_TENSOR, unit[0], unit[1], dtype, None)?;
    Ok(vec![sum_dims(em, p, &[d], false, dtype, Some(a.out(0)?))?])
}

fn vector_norm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let mut x = a.tensor("self")?;
    let out = a.out(0)?;
    if let Some(d) = a.dtype("dtype") {
        x = to_copy(em, x, d, None)?;
    }
    let dtype = em.dtype(out)?;
    let dims = a.opt_ints("dim")?.unwrap_or_default();
    let keepdim = a.bool("keepdim")?;
    let ord = a.float("ord")?;
    let ab = unary(em, aten::ABS, x)?;
    let r = if ord == 2.0 {
        norm2(em, x, &dims, keepdim, Some(out))?
    } else if ord == 1.0 {
        sum_dims(em, ab, &dims, keepdim, dtype, Some(out))?
    } else if ord == f64::INFINITY {
        reduce(
            em,
            aten::AMAX,
            ab,
            &dims,
            keepdim,
            vec![],
            dtype,
            Some(out),
        )?
    } else if ord == f64::NEG_INFINITY {
        reduce(
            em,
            aten::AMIN,
            ab,
            &dims,
            keepdim,
            vec![],
            dtype,
            Some(out),
        )?
    } else if ord == 0.0 {
        let nz = cmp(em, aten::NE_SCALAR, x, Argument::Int(0))?;
        let nz = to_copy(em, nz, dtype, None)?;
        sum_dims(em, nz, &dims, keepdim, dtype, Some(out))?
    } else {
        let p = same(
            em,
            aten::POW_TENSOR_SCALAR,
            vec![
                ("self", Argument::Tensor(ab)),
                ("exponent", Argument::Float(ord)),
            ],
            ab,
            None,
        )?;
        let s = sum_dims(em, p, &dims, keepdim, dtype, None)?;
        same(
            em,
            aten::POW_TENSOR_SCALAR,
            vec![
                ("self", Argument::Tensor(s)),
                ("exponent", Argument::Float(1.0 / ord)),
            ],
            s,
            Some(out),
        )?
    };
    Ok(vec![r])
}

/// The first two positions of a letter that repeats in one operand's spec.
fn repeated_pair(spec: &[char]) -> Option<(usize, usize)> {
    spec.iter().enumerate().find_map(|(p, c)| {
        spec[p + 1..]
            .iter()
            .position(|d| d == c)
            .map(|q| (p, p + 1 + q))
    })
}

/// Contracts einsum operands pairwise (left to right) with bmm, after
/// summing out letters only one operand has; letters that a later operand
/// or the output needs are kept. A letter repeated in one operand takes
/// its diagonal first.
fn einsum(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let eq = a.string("equation")?.replace(' ', "");
    let xs = a.tensors("tensors")?;
    let (lhs, out_spec) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), r.to_string()),
        None => {
            // Implicit output: letters seen once, in alphabetical order.
            let l = eq.clone();
            let mut once: Vec<char> = l
                .chars()
                .filter(|c| c.is_alphabetic() && l.matches(*c).count() == 1)
                .collect();
            once.sort();
            (l, once.into_iter().collect())
        }
    };
    let specs: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    let bad = |why: &str| Error::unsupported(format!("node {}: einsum {eq:?}: {why}", a.0.name));
    if eq.contains('.') {
        return Err(bad("ellipses are not supported"));
    }
    if specs.len() != xs.len() {
        return Err(bad(&format!(
            "{} operand spec(s) for {} tensor(s)",
            specs.len(),
            xs.len()
        )));
    }
    let out: Vec<char> = out_spec.chars().collect();
    if out
        .iter()
        .any(|c| out.iter().filter(|d| *d == c).count() > 1)
    {
        return Err(bad("a letter repeats in the output"));
    }
    let dtype = em.dtype(a.out(0)?)?;
    // A letter repeated in one operand takes that operand's diagonal over
    // those dims first (as torch's einsum does): `diagonal` drops both
    // dims and appends the diagonal as the last dim.
    let mut xs = xs;
    let mut specs = specs;
    for (x, spec) in xs.iter_mut().zip(specs.iter_mut()) {
        while let Some((p, q)) = repeated_pair(spec) {
            let (rank, sizes) = (em.rank(*x)?, em.sizes(*x)?);
            if spec.len() != rank {
                return Err(bad(&format!(
                    "operand spec {:?} for a tensor of rank {rank}",
                    spec.iter().collect::<String>()
                )));
            }
            if let (Sym::Int(m), Sym::Int(n)) = (&sizes[p], &sizes[q]) {
                if m != n {
                    return Err(bad(&format!(
                        "letter {:?} has sizes {m} and {n} in one operand",
                        spec[p]
                    )));
                }
            }
            let mut dims: Vec<Sym> = sizes
                .iter()
                .enumerate()
                .filter(|(d, _)| *d != p && *d != q)
                .map(|(_, s)| s.clone())
                .collect();
            dims.push(sizes[p].clone());
            let meta = em.meta_like(*x, em.dtype(*x)?, dims)?;
            *x = em.op(
                aten::DIAGONAL,
                vec![
                    ("self", Argument::Tensor(*x)),
                    ("offset", Argument::Int(0)),
                    ("dim1", Argument::Int(p as i64)),
                    ("dim2", Argument::Int(q as i64)),
                ],
                meta,
            )?;
            let c = spec[p];
            spec.remove(q);
            spec.remove(p);
            spec.push(c);
        }
    }
    // Each operand with its letters; sum out letters nobody else needs.
    let mut ops: Vec<(ValueId, Vec<char>)> = Vec::new();
    for (i, (x, spec)) in xs.iter().zip(&specs).enumerate() {
        let needed = |c: &char| {
            out.contains(c)
                || specs
                    .iter()
                    .enumerate()
                    .any(|(j, s)| j != i && s.contains(c))
        };
        let drop: Vec<i64> = spec
            .iter()
            .enumerate()
            .filter(|(_, c)| !needed(c))
            .map(|(d, _)| d as i64)
            .collect();
        let kept: Vec<char> = spec.iter().copied().filter(|c| needed(c)).collect();
        let v = if drop.is_empty() {
            *x
        } else {
            sum_dims(em, *x, &drop, false, dtype, None)?
        };
        ops.push((v, kept));
    }
    let mut acc = ops.remove(0);
    for (k, (b, bspec)) in ops.iter().enumerate() {
        let later: Vec<char> = ops[k + 1..]
            .iter()
            .flat_map(|(_, s)| s.clone())
            .chain(out.iter().copied())
            .collect();
        let (x, xspec) = (acc.0, acc.1.clone());
        let batch: Vec<char> = xspec
            .iter()
            .copied()
            .filter(|c| bspec.contains(c) && later.contains(c))
            .collect();
        let contract: Vec<char> = xspec
            .iter()
            .copied()
            .filter(|c| bspec.contains(c) && !later.contains(c))
            .collect();
        let xfree: Vec<char> = xspec
            .iter()
            .copied()
            .filter(|c| !bspec.contains(c))
            .collect();
        let bfree: Vec<char> = bspec
            .iter()
            .copied()
            .filter(|c| !xspec.contains(c))
            .collect();
        let pos = |spec: &[char], c: char| spec.iter().position(|d| *d == c).unwrap();
        let size = |em: &mut Emitter, v: ValueId, spec: &[char], c: char| em.size(v, pos(spec, c));
        let group = |em: &mut Emitter, v: ValueId, spec: &[char], cs: &[char]| -> Result<SymRef> {
            let refs: Vec<SymRef> = cs
                .iter()
                .map(|c| size(em, v, spec, *c))
                .collect::<Result<_>>()?;
            em.product(&refs)
        };
        let (nb, nc, nx, ny) = (
            group(em, x, &xspec, &batch)?,
            group(em, x, &xspec, &contract)?,
            group(em, x, &xspec, &xfree)?,
            group(em, *b, bspec, &bfree)?,
        );
        let xperm: Vec<usize> = batch
            .iter()
            .chain(&xfree)
            .chain(&contract)
            .map(|c| pos(&xspec, *c))
            .collect();
        let bperm: Vec<usize> = batch
            .iter()
            .chain(&contract)
            .chain(&bfree)
            .map(|c| pos(bspec, *c))
            .collect();
        let xp = permute(em, x, &xperm, None)?;
        let xp = reshape(em, xp, &[nb, nx, nc], None)?;
        let bp = permute(em, *b, &bperm, None)?;
        let bp = reshape(em, bp, &[nb, nc, ny], None)?;
        let meta = em.meta_like(x, dtype, syms(em, &[nb, nx, ny]))?;
        let r = em.op(
            aten::BMM,
            vec![
                ("self", Argument::Tensor(xp)),
                ("mat2", Argument::Tensor(bp)),
            ],
            meta,
        )?;
        let mut shape = Vec::new();
        for c in batch.iter().chain(&xfree) {
            shape.push(size(em, x, &xspec, *c)?);
        }
        for c in &bfree {
            shape.push(size(em, *b, bspec, *c)?);
        }
        let r = view(em, r, &shape, None)?;
        acc = (
            r,
            batch.iter().chain(&xfree).chain(&bfree).copied().collect(),
        );
    }
    let (v, spec) = acc;
    let perm: Vec<usize> = out
        .iter()
        .map(|c| {
            spec.iter()
                .position(|d| d == c)
                .ok_or_else(|| bad("an output letter is in no operand"))
        })
        .collect::<Result<_>>()?;
    if perm.iter().enumerate().all(|(i, p)| i == *p) && perm.len() == spec.len() {
        return Ok(vec![v]);
    }
    Ok(vec![permute(em, v, &perm, Some(a.out(0)?))?])
}

fn addr(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let (v1, v2) = (a.tensor("vec1")?, a.tensor("vec2")?);
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, dtype, m.sizes)?;
    let o = em.op(
        aten::OUTER,
        vec![
            ("self", Argument::Tensor(v1)),
            ("vec2", Argument::Tensor(v2)),
        ],
        meta,
    )?;
    beta_self_plus_alpha(em, a, o, dtype, out)
}

fn dot(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.tensor("self")?, a.tensor("tensor")?);
    let dtype = em.dtype(a.out(0)?)?;
    let p = binary(em, aten::MUL_TENSOR, x, y, dtype, None)?;
    Ok(vec![sum_dims(em, p, &[0], false, dtype, Some(a.out(0)?))?])
}

fn mv(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![matmul(
        em,
        a.tensor("self")?,
        a.tensor("vec")?,
        Some(a.out(0)?),
    )?])
}

fn outer(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.tensor("self")?, a.tensor("vec2")?);
    let col = unsqueeze(em, x, 1)?;
    let dtype = em.dtype(a.out(0)?)?;
    binary_into(em, a, aten::MUL_TENSOR, col, y, dtype)
}

fn trace(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let s = em.static_sizes(x, "trace")?;
    let n = s[0].min(s[1]);
    let dtype = em.dtype(a.out(0)?)?;
    let meta = em.meta_like(x, em.dtype(x)?, vec![Sym::Int(n)])?;
    let d = em.op(
        aten::DIAG,
        vec![("self", Argument::Tensor(x))],
        meta,
    )?;
    Ok(vec![sum_dims(em, d, &[0], false, dtype, Some(a.out(0)?))?])
}

fn chain_matmul(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let ms = a.tensors("matrices")?;
    let out = a.out(0)?;
    let mut acc = ms[0];
    for (i, m) in ms.iter().enumerate().skip(1) {
        acc = mm(
            em,
            acc,
            *m,
            None,
            if i + 1 == ms.len() { Some(out) } else { None },
        )?;
    }
    Ok(vec![acc])
}

pub(super) fn inner(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.tensor("self")?, a.tensor("other")?);
    let out = a.out(0)?;
    let (rx, ry) = (em.rank(x)?, em.rank(y)?);
    if rx == 0 || ry == 0 {
        let dtype = em.dtype(out)?;
        return Ok(vec![binary(em, aten::MUL_TENSOR, x, y, dtype, Some(out))?]);
    }
    // inner(x, y) = x @ y^T with y flattened to [-1, K]
    let ys = em.static_sizes(y, "inner")?;
    let k = ys[ry - 1];
    let rows: i64 = ys[..ry - 1].iter().product();
    let y2 = reshape(em, y, &[SymRef::Int(rows), SymRef::Int(k)], None)?;
    let yt = permute(em, y2, &[1, 0], None)?;
    let p = matmul(em, x, yt, None)?;
    let shape = em.size_refs(out)?;
    Ok(vec![view(em, p, &shape, Some(out))?])
}

fn tensordot(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.tensor("self")?, a.tensor("other")?);
    let (dx, dy) = (a.ints("dims_self")?, a.ints("dims_other")?);
    let (xs, ys) = (
        em.static_sizes(x, "tensordot")?,
        em.static_sizes(y, "tensordot")?,
    );
    let cx: Vec<usize> = dx
        .iter()
        .map(|d| normalize_dim(*d, xs.len()))
        .collect::<Result<_>>()?;
    let cy: Vec<usize> = dy
        .iter()
        .map(|d| normalize_dim(*d, ys.len()))
        .collect::<Result<_>>()?;
    let fx: Vec<usize> = (0..xs.len()).filter(|d| !cx.contains(d)).collect();
    let fy: Vec<usize> = (0..ys.len()).filter(|d| !cy.contains(d)).collect();
    let k: i64 = cx.iter().map(|&d| xs[d]).product();
    let m: i64 = fx.iter().map(|&d| xs[d]).product();
    let n: i64 = fy.iter().map(|&d| ys[d]).product();
    let xp = permute(
        em,
        x,
        &fx.iter().chain(&cx).copied().collect::<Vec<_>>(),
        None,
    )?;
    let x2 = reshape(em, xp, &[SymRef::Int(m), SymRef::Int(k)], None)?;
    let yp = permute(
        em,
        y,
        &cy.iter().chain(&fy).copied().collect::<Vec<_>>(),
        None,
    )?;
    let y2 = reshape(em, yp, &[SymRef::Int(k), SymRef::Int(n)], None)?;
    let p = mm(em, x2, y2, None, None)?;
    let shape: Vec<SymRef> = fx
        .iter()
        .map(|&d| xs[d])
        .chain(fy.iter().map(|&d| ys[d]))
        .map(SymRef::Int)
        .collect();
    Ok(vec![view(em, p, &shape, Some(a.out(0)?))?])
}

fn kron(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.tensor("self")?, a.tensor("other")?);
    let (xs, ys) = (em.static_sizes(x, "kron")?, em.static_sizes(y, "kron")?);
    if xs.len() != ys.len() {
        return Err(Error::unsupported(format!(
            "node {}: kron of tensors of different ranks",
            a.0.name
        )));
    }
    let r = xs.len();
    // x[i0, 1, i1, 1, ...] * y[1, j0, 1, j1, ...], then merge each pair.
    let mut xv = Vec::new();
    let mut yv = Vec::new();
    for d in 0..r {
        xv.extend([xs[d], 1]);
        yv.extend([1, ys[d]]);
    }
    let x2 = reshape(
        em,
        x,
        &xv.iter().map(|v| SymRef::Int(*v)).collect::<Vec<_>>(),
        None,
    )?;
    let y2 = reshape(
        em,
        y,
        &yv.iter().map(|v| SymRef::Int(*v)).collect::<Vec<_>>(),
        None,
    )?;
    let dtype = em.dtype(a.out(0)?)?;
    let p = binary(em, aten::MUL_TENSOR, x2, y2, dtype, None)?;
    let shape: Vec<SymRef> = (0..r).map(|d| SymRef::Int(xs[d] * ys[d])).collect();
    Ok(vec![reshape(em, p, &shape, Some(a.out(0)?))?])
}

fn cross(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.tensor("self")?, a.tensor("other")?);
    let out = a.out(0)?;
    let r = em.rank(out)?;
    let d = normalize_dim(a.int("dim")?, r)?;
    let dtype = em.dtype(out)?;
    let part = |em: &mut Emitter, t: ValueId, i: i64| -> Result<ValueId> {
        let dt = d - (r - em.rank(t)?).min(d);
        slice(em, t, dt, i, i + 1)
    };
    let mut comps = Vec::new();
    for (i, j) in [(1, 2), (2, 0), (0, 1)] {
        let (xi, yj, xj, yi) = (
            part(em, x, i)?,
            part(em, y, j)?,
            part(em, x, j)?,
            part(em, y, i)?,
        );
        let p = binary(em, aten::MUL_TENSOR, xi, yj, dtype, None)?;
        let q = binary(em, aten::MUL_TENSOR, xj, yi, dtype, None)?;
        comps.push(binary(em, aten::SUB_TENSOR, p, q, dtype, None)?);
    }
    em.op_into(
        aten::CAT,
        vec![
            ("tensors", Argument::Tensors(comps)),
            ("dim", Argument::Int(d as i64)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn pairwise_distance(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.tensor("x1")?, a.tensor("x2")?);
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let d = binary(em, aten::SUB_TENSOR, x, y, dtype, None)?;
    let d = with_scalar(em, aten::ADD_TENSOR, d, Argument::Float(a.float("eps")?))?;
    em.op_into(
        aten::LINALG_VECTOR_NORM,
        vec![
            ("self", Argument::Tensor(d)),
            ("ord", Argument::Float(a.float("p")?)),
            ("dim", Argument::Ints(vec![-1])),
            ("keepdim", Argument::Bool(a.bool("keepdim")?)),
        ],
        out,
    )?;
    Ok(vec![out])
}

/// `bilinear(input1, input2, weight, bias)`: `y[..., o] = x1[..., i]
/// W[o, i, j] x2[..., j] (+ b[o])`, as torch's `bilinear` (which runs
/// `_trilinear` on the inputs flattened to 2-D): an einsum over the
/// flattened inputs, viewed back to the leading dims.
fn bilinear(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x1, x2, w) = (a.tensor("input1")?, a.tensor("input2")?, a.tensor("weight")?);
    let bias = a.opt_tensor("bias")?;
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let r = em.rank(x1)?;
    if r == 0 || em.rank(x2)? != r || em.rank(w)? != 3 {
        return Err(Error::bad_input(format!(
            "node {}: bilinear takes two inputs of one rank (1 or more) and a 3-D weight, not ranks {}, {} and {}",
            a.0.name,
            r,
            em.rank(x2)?,
            em.rank(w)?
        )));
    }
    let (s1, s2) = (em.size_refs(x1)?, em.size_refs(x2)?);
    let lead = em.product(&s1[..r - 1])?;
    let f1 = reshape(em, x1, &[lead, s1[r - 1]], None)?;
    let f2 = reshape(em, x2, &[lead, s2[r - 1]], None)?;
    let o = em.size(w, 0)?;
    let meta = em.meta_like(x1, dtype, syms(em, &[lead, o]))?;
    let y = em.op(
        aten::EINSUM,
        vec![
            ("equation", Argument::String("ni,oij,nj->no".into())),
            ("tensors", Argument::Tensors(vec![f1, w, f2])),
        ],
        meta,
    )?;
    let mut shape = s1[..r - 1].to_vec();
    shape.push(o);
    match bias {
        None => Ok(vec![reshape(em, y, &shape, Some(out))?]),
        Some(b) => {
            let y = reshape(em, y, &shape, None)?;
            binary_into(em, a, aten::ADD_TENSOR, y, b, dtype)
        }
    }
}

/// `_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)`: each input
/// widened by size-1 dims at its `expand` positions, the three multiplied
/// and summed over `sumdim` (those dims dropped), as ATen's kernel: one
/// einsum, a letter per dim of the widened rank.
fn trilinear(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let xs = [a.tensor("i1")?, a.tensor("i2")?, a.tensor("i3")?];
    let expands = [a.ints("expand1")?, a.ints("expand2")?, a.ints("expand3")?];
    let sumdim = a.ints("sumdim")?;
    let total = em.rank(xs[0])? + expands[0].len();
    let bad = |why: String| Error::bad_input(format!("node {}: _trilinear: {why}", a.0.name));
    if total > 26 {
        return Err(bad(format!("{total} dims (26 at most)")));
    }
    let letter = |d: usize| (b'a' + d as u8) as char;
    let mut specs = Vec::new();
    for (x, e) in xs.iter().zip(&expands) {
        let spec: String = (0..total)
            .filter(|d| !e.contains(&(*d as i64)))
            .map(letter)
            .collect();
        if spec.len() != em.rank(*x)? || e.iter().any(|&d| d < 0 || d as usize >= total) {
            return Err(bad(format!(
                "expand dims {e:?} for an input of rank {} in rank {total}",
                em.rank(*x)?
            )));
        }
        specs.push(spec);
    }
    let out_spec: String = (0..total)
        .filter(|d| !sumdim.contains(&(*d as i64)))
        .map(letter)
        .collect();
    let out = a.out(0)?;
    em.op_into(
        aten::EINSUM,
        vec![
            (
                "equation",
                Argument::String(format!("{}->{out_spec}", specs.join(","))),
            ),
            ("tensors", Argument::Tensors(xs.to_vec())),
        ],
        out,
    )?;
    Ok(vec![out])
}

rules! {
    aten::FFT_FFT => [aten::_FFT_C2C, aten::_FFT_R2C, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::fft;
    aten::FFT_IFFT => [aten::_FFT_C2C, aten::_FFT_R2C, aten::_CONJ, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::fft;
    aten::FFT_RFFT => [aten::_FFT_R2C, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::rfft;
    aten::FFT_IHFFT => [aten::_FFT_R2C, aten::_CONJ, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::rfft;
    aten::FFT_IRFFT => [aten::_FFT_C2R, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::irfft;
    aten::FFT_HFFT => [aten::_FFT_C2R, aten::_CONJ, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::irfft;
    aten::FFT_FFTN => [aten::_FFT_C2C, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::fftn;
    aten::FFT_FFT2 => [aten::_FFT_C2C, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::fftn;
    aten::FFT_IFFTN => [aten::_FFT_C2C, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::fftn;
    aten::FFT_IFFT2 => [aten::_FFT_C2C, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::fftn;
    aten::FFT_RFFTN => [aten::_FFT_R2C, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::rfftn;
    aten::FFT_RFFT2 => [aten::_FFT_R2C, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::rfftn;
    aten::FFT_IRFFTN => [aten::_FFT_C2R, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::irfftn;
    aten::FFT_IRFFT2 => [aten::_FFT_C2R, aten::_TO_COPY, aten::SLICE_TENSOR, aten::CONSTANT_PAD_ND] spectral::irfftn;
    aten::FFT_FFTSHIFT => [aten::ROLL] spectral::fftshift;
    aten::FFT_IFFTSHIFT => [aten::ROLL] spectral::fftshift;
    aten::STFT => [aten::UNSQUEEZE, aten::FULL, aten::CONSTANT_PAD_ND, aten::UNFOLD, aten::MUL_TENSOR, aten::_FFT_R2C, aten::_FFT_C2C, aten::_TO_COPY, aten::PERMUTE, aten::SQUEEZE_DIMS, aten::VIEW_AS_REAL] spectral::stft;
    aten::STFT_CENTER => [aten::UNSQUEEZE, aten::VIEW, aten::PAD, aten::FULL, aten::CONSTANT_PAD_ND, aten::UNFOLD, aten::MUL_TENSOR, aten::_FFT_R2C, aten::_FFT_C2C, aten::_TO_COPY, aten::PERMUTE, aten::SQUEEZE_DIMS, aten::VIEW_AS_REAL] spectral::stft;
    aten::ISTFT => [aten::UNSQUEEZE, aten::FULL, aten::CONSTANT_PAD_ND, aten::PERMUTE, aten::SLICE_TENSOR, aten::_FFT_C2R, aten::_FFT_C2C, aten::VIEW, aten::MUL_TENSOR, aten::SELECT_INT, aten::ADD_TENSOR, aten::EXPAND, aten::ABS, aten::AMIN, aten::GE_SCALAR, aten::_ASSERT_ASYNC_MSG, aten::DIV_TENSOR, aten::SQUEEZE_DIMS] spectral::istft;
    aten::LINEAR => [aten::PERMUTE, aten::ADDMM, aten::MM, aten::VIEW, aten::MATMUL, aten::ADD_TENSOR] linear;
    aten::MATMUL => [aten::MM, aten::BMM, aten::VIEW, aten::EXPAND, aten::UNSQUEEZE, aten::SQUEEZE_DIMS, aten::CLONE, aten::MUL_TENSOR, aten::SUM_DIM_INTLIST] matmul_rule;
    aten::BADDBMM => [aten::BMM, aten::MUL_TENSOR, aten::ADD_TENSOR] baddbmm;
    aten::CDIST => [aten::_CDIST_FORWARD] same_args;
    aten::PDIST => [aten::_PDIST_FORWARD] same_args;
    aten::ADDR => [aten::OUTER, aten::MUL_TENSOR, aten::ADD_TENSOR] addr;
    aten::DOT => [aten::MUL_TENSOR, aten::SUM_DIM_INTLIST] dot;
    aten::MV => [aten::MATMUL] mv;
    aten::OUTER => [aten::UNSQUEEZE, aten::MUL_TENSOR] outer;
    aten::TRACE => [aten::DIAG, aten::SUM_DIM_INTLIST] trace;
    aten::CHAIN_MATMUL => [aten::MM] chain_matmul;
    aten::INNER => [aten::MATMUL, aten::PERMUTE, aten::VIEW] inner;
    aten::TENSORDOT => [aten::PERMUTE, aten::VIEW, aten::MM] tensordot;
    aten::KRON => [aten::UNSQUEEZE, aten::MUL_TENSOR, aten::VIEW] kron;
    aten::LINALG_CROSS => [aten::SLICE_TENSOR, aten::MUL_TENSOR, aten::SUB_TENSOR, aten::CAT] cross;
    aten::PAIRWISE_DISTANCE => [aten::SUB_TENSOR, aten::ADD_TENSOR, aten::LINALG_VECTOR_NORM] pairwise_distance;
    aten::EINSUM => [aten::DIAGONAL, aten::SUM_DIM_INTLIST, aten::PERMUTE, aten::VIEW, aten::BMM, aten::CLONE] einsum;
    aten::BILINEAR => [aten::VIEW, aten::CLONE, aten::EINSUM, aten::ADD_TENSOR] bilinear;
    aten::_TRILINEAR => [aten::EINSUM] trilinear;
    aten::COSINE_SIMILARITY => [aten::MUL_TENSOR, aten::SUM_DIM_INTLIST, aten::SQRT, aten::CLAMP, aten::DIV_TENSOR] cosine_similarity;
    aten::LINALG_VECTOR_NORM => [aten::ABS, aten::MUL_TENSOR, aten::POW_TENSOR_SCALAR, aten::SUM_DIM_INTLIST, aten::SQRT, aten::AMAX, aten::AMIN, aten::NE_SCALAR, aten::_TO_COPY] vector_norm;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[
    (aten::GER, aten::OUTER),
    (aten::VDOT, aten::DOT),
];
