//! Linear algebra (mm, bmm, addmm, linear, matmul, distances, ...): the decomposition rules.

use super::*;

fn linear(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, w, b) = (a.t("input")?, a.t("weight")?, a.ot("bias")?);
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
            Ok(vec![binary(em, "aten.add.Tensor", r, b, dtype, Some(out))?])
        }
    }
}

fn matmul_rule(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![matmul(
        em,
        a.t("self")?,
        a.t("other")?,
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
        prod = with_scalar(em, "aten.mul.Tensor", prod, scalar(alpha, dtype))?;
    }
    if beta == 0.0 {
        return Ok(vec![prod]);
    }
    let mut s = a.t("self")?;
    if beta != 1.0 {
        s = with_scalar(em, "aten.mul.Tensor", s, scalar(beta, dtype))?;
    }
    Ok(vec![binary(em, "aten.add.Tensor", s, prod, dtype, Some(out))?])
}

fn baddbmm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, dtype, m.sizes)?;
    let prod = em.op(
        "aten.bmm.default",
        vec![
            ("self", Argument::Tensor(a.t("batch1")?)),
            ("mat2", Argument::Tensor(a.t("batch2")?)),
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
    let sq = binary(em, "aten.mul.Tensor", x, x, dtype, None)?;
    let s = sum_dims(em, sq, dims, keepdim, dtype, None)?;
    same(
        em,
        "aten.sqrt.default",
        vec![("self", Argument::Tensor(s))],
        s,
        out,
    )
}

fn cosine_similarity(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x1, x2) = (a.t("x1")?, a.t("x2")?);
    let d = a.int("dim")?;
    let eps = a.float("eps")?;
    let dtype = em.dtype(x1)?;
    let mut unit = Vec::new();
    for x in [x1, x2] {
        let n = norm2(em, x, &[d], true, None)?;
        let n = same(
            em,
            "aten.clamp.default",
            vec![("self", Argument::Tensor(n)), ("min", Argument::Float(eps))],
            n,
            None,
        )?;
        unit.push(binary(em, "aten.div.Tensor", x, n, dtype, None)?);
    }
    let p = binary(em, "aten.mul.Tensor", unit[0], unit[1], dtype, None)?;
    Ok(vec![sum_dims(em, p, &[d], false, dtype, Some(a.out(0)?))?])
}

fn vector_norm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let mut x = a.t("self")?;
    let out = a.out(0)?;
    if let Some(d) = a.dtype("dtype") {
        x = to_copy(em, x, d, None)?;
    }
    let dtype = em.dtype(out)?;
    let dims = a.opt_ints("dim")?.unwrap_or_default();
    let keepdim = a.bool("keepdim")?;
    let ord = a.float("ord")?;
    let ab = unary(em, "aten.abs.default", x)?;
    let r = if ord == 2.0 {
        norm2(em, x, &dims, keepdim, Some(out))?
    } else if ord == 1.0 {
        sum_dims(em, ab, &dims, keepdim, dtype, Some(out))?
    } else if ord == f64::INFINITY {
        reduce(
            em,
            "aten.amax.default",
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
            "aten.amin.default",
            ab,
            &dims,
            keepdim,
            vec![],
            dtype,
            Some(out),
        )?
    } else if ord == 0.0 {
        let nz = cmp(em, "aten.ne.Scalar", x, Argument::Int(0))?;
        let nz = to_copy(em, nz, dtype, None)?;
        sum_dims(em, nz, &dims, keepdim, dtype, Some(out))?
    } else {
        let p = same(
            em,
            "aten.pow.Tensor_Scalar",
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
            "aten.pow.Tensor_Scalar",
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
    let xs = a.ts("tensors")?;
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
                "aten.diagonal.default",
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
            "aten.bmm.default",
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
    let (v1, v2) = (a.t("vec1")?, a.t("vec2")?);
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, dtype, m.sizes)?;
    let o = em.op(
        "aten.outer.default",
        vec![
            ("self", Argument::Tensor(v1)),
            ("vec2", Argument::Tensor(v2)),
        ],
        meta,
    )?;
    beta_self_plus_alpha(em, a, o, dtype, out)
}

fn dot(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("self")?, a.t("tensor")?);
    let dtype = em.dtype(a.out(0)?)?;
    let p = binary(em, "aten.mul.Tensor", x, y, dtype, None)?;
    Ok(vec![sum_dims(em, p, &[0], false, dtype, Some(a.out(0)?))?])
}

fn mv(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![matmul(
        em,
        a.t("self")?,
        a.t("vec")?,
        Some(a.out(0)?),
    )?])
}

fn outer(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("self")?, a.t("vec2")?);
    let col = unsqueeze(em, x, 1)?;
    let dtype = em.dtype(a.out(0)?)?;
    binary_into(em, a, "aten.mul.Tensor", col, y, dtype)
}

fn trace(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let s = em.static_sizes(x, "trace")?;
    let n = s[0].min(s[1]);
    let dtype = em.dtype(a.out(0)?)?;
    let meta = em.meta_like(x, em.dtype(x)?, vec![Sym::Int(n)])?;
    let d = em.op(
        "aten.diag.default",
        vec![("self", Argument::Tensor(x))],
        meta,
    )?;
    Ok(vec![sum_dims(em, d, &[0], false, dtype, Some(a.out(0)?))?])
}

fn chain_matmul(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let ms = a.ts("matrices")?;
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
    let (x, y) = (a.t("self")?, a.t("other")?);
    let out = a.out(0)?;
    let (rx, ry) = (em.rank(x)?, em.rank(y)?);
    if rx == 0 || ry == 0 {
        let dtype = em.dtype(out)?;
        return Ok(vec![binary(em, "aten.mul.Tensor", x, y, dtype, Some(out))?]);
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
    let (x, y) = (a.t("self")?, a.t("other")?);
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
    let (x, y) = (a.t("self")?, a.t("other")?);
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
    let p = binary(em, "aten.mul.Tensor", x2, y2, dtype, None)?;
    let shape: Vec<SymRef> = (0..r).map(|d| SymRef::Int(xs[d] * ys[d])).collect();
    Ok(vec![reshape(em, p, &shape, Some(a.out(0)?))?])
}

fn cross(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("self")?, a.t("other")?);
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
        let p = binary(em, "aten.mul.Tensor", xi, yj, dtype, None)?;
        let q = binary(em, "aten.mul.Tensor", xj, yi, dtype, None)?;
        comps.push(binary(em, "aten.sub.Tensor", p, q, dtype, None)?);
    }
    em.op_into(
        "aten.cat.default",
        vec![
            ("tensors", Argument::Tensors(comps)),
            ("dim", Argument::Int(d as i64)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn pairwise_distance(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("x1")?, a.t("x2")?);
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let d = binary(em, "aten.sub.Tensor", x, y, dtype, None)?;
    let d = with_scalar(em, "aten.add.Tensor", d, Argument::Float(a.float("eps")?))?;
    em.op_into(
        "aten.linalg_vector_norm.default",
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
    let (x1, x2, w) = (a.t("input1")?, a.t("input2")?, a.t("weight")?);
    let bias = a.ot("bias")?;
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
        "aten.einsum.default",
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
            binary_into(em, a, "aten.add.Tensor", y, b, dtype)
        }
    }
}

/// `_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)`: each input
/// widened by size-1 dims at its `expand` positions, the three multiplied
/// and summed over `sumdim` (those dims dropped), as ATen's kernel: one
/// einsum, a letter per dim of the widened rank.
fn trilinear(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let xs = [a.t("i1")?, a.t("i2")?, a.t("i3")?];
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
        "aten.einsum.default",
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
    "aten.fft_fft.default" => ["aten._fft_c2c.default", "aten._fft_r2c.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::fft;
    "aten.fft_ifft.default" => ["aten._fft_c2c.default", "aten._fft_r2c.default", "aten._conj.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::fft;
    "aten.fft_rfft.default" => ["aten._fft_r2c.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::rfft;
    "aten.fft_ihfft.default" => ["aten._fft_r2c.default", "aten._conj.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::rfft;
    "aten.fft_irfft.default" => ["aten._fft_c2r.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::irfft;
    "aten.fft_hfft.default" => ["aten._fft_c2r.default", "aten._conj.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::irfft;
    "aten.fft_fftn.default" => ["aten._fft_c2c.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::fftn;
    "aten.fft_fft2.default" => ["aten._fft_c2c.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::fftn;
    "aten.fft_ifftn.default" => ["aten._fft_c2c.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::fftn;
    "aten.fft_ifft2.default" => ["aten._fft_c2c.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::fftn;
    "aten.fft_rfftn.default" => ["aten._fft_r2c.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::rfftn;
    "aten.fft_rfft2.default" => ["aten._fft_r2c.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::rfftn;
    "aten.fft_irfftn.default" => ["aten._fft_c2r.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::irfftn;
    "aten.fft_irfft2.default" => ["aten._fft_c2r.default", "aten._to_copy.default", "aten.slice.Tensor", "aten.constant_pad_nd.default"] spectral::irfftn;
    "aten.fft_fftshift.default" => ["aten.roll.default"] spectral::fftshift;
    "aten.fft_ifftshift.default" => ["aten.roll.default"] spectral::fftshift;
    "aten.stft.default" => ["aten.unsqueeze.default", "aten.full.default", "aten.constant_pad_nd.default", "aten.unfold.default", "aten.mul.Tensor", "aten._fft_r2c.default", "aten._fft_c2c.default", "aten._to_copy.default", "aten.permute.default", "aten.squeeze.dims", "aten.view_as_real.default"] spectral::stft;
    "aten.stft.center" => ["aten.unsqueeze.default", "aten.view.default", "aten.pad.default", "aten.full.default", "aten.constant_pad_nd.default", "aten.unfold.default", "aten.mul.Tensor", "aten._fft_r2c.default", "aten._fft_c2c.default", "aten._to_copy.default", "aten.permute.default", "aten.squeeze.dims", "aten.view_as_real.default"] spectral::stft;
    "aten.istft.default" => ["aten.unsqueeze.default", "aten.full.default", "aten.constant_pad_nd.default", "aten.permute.default", "aten.slice.Tensor", "aten._fft_c2r.default", "aten._fft_c2c.default", "aten.view.default", "aten.mul.Tensor", "aten.select.int", "aten.add.Tensor", "aten.expand.default", "aten.abs.default", "aten.amin.default", "aten.ge.Scalar", "aten._assert_async.msg", "aten.div.Tensor", "aten.squeeze.dims"] spectral::istft;
    "aten.linear.default" => ["aten.permute.default", "aten.addmm.default", "aten.mm.default", "aten.view.default", "aten.matmul.default", "aten.add.Tensor"] linear;
    "aten.matmul.default" => ["aten.mm.default", "aten.bmm.default", "aten.view.default", "aten.expand.default", "aten.unsqueeze.default", "aten.squeeze.dims", "aten.clone.default", "aten.mul.Tensor", "aten.sum.dim_IntList"] matmul_rule;
    "aten.baddbmm.default" => ["aten.bmm.default", "aten.mul.Tensor", "aten.add.Tensor"] baddbmm;
    "aten.cdist.default" => ["aten._cdist_forward.default"] same_args;
    "aten.pdist.default" => ["aten._pdist_forward.default"] same_args;
    "aten.addr.default" => ["aten.outer.default", "aten.mul.Tensor", "aten.add.Tensor"] addr;
    "aten.dot.default" => ["aten.mul.Tensor", "aten.sum.dim_IntList"] dot;
    "aten.mv.default" => ["aten.matmul.default"] mv;
    "aten.outer.default" => ["aten.unsqueeze.default", "aten.mul.Tensor"] outer;
    "aten.trace.default" => ["aten.diag.default", "aten.sum.dim_IntList"] trace;
    "aten.chain_matmul.default" => ["aten.mm.default"] chain_matmul;
    "aten.inner.default" => ["aten.matmul.default", "aten.permute.default", "aten.view.default"] inner;
    "aten.tensordot.default" => ["aten.permute.default", "aten.view.default", "aten.mm.default"] tensordot;
    "aten.kron.default" => ["aten.unsqueeze.default", "aten.mul.Tensor", "aten.view.default"] kron;
    "aten.linalg_cross.default" => ["aten.slice.Tensor", "aten.mul.Tensor", "aten.sub.Tensor", "aten.cat.default"] cross;
    "aten.pairwise_distance.default" => ["aten.sub.Tensor", "aten.add.Tensor", "aten.linalg_vector_norm.default"] pairwise_distance;
    "aten.einsum.default" => ["aten.diagonal.default", "aten.sum.dim_IntList", "aten.permute.default", "aten.view.default", "aten.bmm.default", "aten.clone.default"] einsum;
    "aten.bilinear.default" => ["aten.view.default", "aten.clone.default", "aten.einsum.default", "aten.add.Tensor"] bilinear;
    "aten._trilinear.default" => ["aten.einsum.default"] trilinear;
    "aten.cosine_similarity.default" => ["aten.mul.Tensor", "aten.sum.dim_IntList", "aten.sqrt.default", "aten.clamp.default", "aten.div.Tensor"] cosine_similarity;
    "aten.linalg_vector_norm.default" => ["aten.abs.default", "aten.mul.Tensor", "aten.pow.Tensor_Scalar", "aten.sum.dim_IntList", "aten.sqrt.default", "aten.amax.default", "aten.amin.default", "aten.ne.Scalar", "aten._to_copy.default"] vector_norm;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[
    ("aten.ger.default", "aten.outer.default"),
    ("aten.vdot.default", "aten.dot.default"),
];
