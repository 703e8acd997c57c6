//! The decomposition table: each rule rewrites one op into core ATen ops,
//! to the same result as torch's own decomposition
//! (`torch._decomp.core_aten_decompositions()` and the CompositeImplicit
//! kernels `run_decompositions()` traces through). Results that are not
//! core themselves are decomposed again by the driver.
//!
//! A rule returns, for each value the node defines, the value that now
//! holds it: the same id when the rule wrote into it, another value when
//! the op was an identity (a no-op `to`, dropout in eval mode).
//!
//! The rules live in their family's file (`shape.rs`, `norm.rs`, ...; the
//! families of `lib/data/op_families.txt`), each ending with its `rules!`
//! table and its aliases; [`FAMILIES`] joins them. This file holds the
//! emit helpers the families share.

use super::args::NodeArgs;
use super::edit::{
    ints_arg, is_contiguous, scalar, sym_add, sym_div_exact, sym_ints_arg, syms, Emitter, Out,
};
use crate::ir::op::aten;
use crate::ir::{normalize_dim, Argument, Dtype, MemoryFormat, Sym, SymRef, TensorMeta, ValueId};
use crate::{Error, Result};
use std::collections::HashMap;
use std::sync::OnceLock;

macro_rules! rules {
    ($( $src:path => [$($res:path),*] $f:expr ;)*) => {
        pub(super) const RULES: &[Rule] = &[ $( Rule { source: $src, results: &[$($res),*], apply: $f } ),* ];
        /// This family's rules and aliases.
        pub(super) const ROWS: (&[Rule], &[(&str, &str)]) = (RULES, ALIASES);
    };
}

op_families!((&[Rule], &[(&str, &str)]));
mod spectral;

pub type RuleFn = fn(&mut Emitter, &NodeArgs) -> Result<Vec<ValueId>>;

pub struct Rule {
    /// The op it rewrites (`aten.linear.default`).
    pub source: &'static str,
    /// The ops it may emit (for `--list`; the driver lowers them further).
    pub results: &'static [&'static str],
    pub apply: RuleFn,
}

/// The rules the families' aliases make: each calls its op by the other
/// name (built once).
fn alias_rules() -> &'static [(&'static str, Rule)] {
    static R: OnceLock<Vec<(&'static str, Rule)>> = OnceLock::new();
    R.get_or_init(|| {
        FAMILIES
            .iter()
            .flat_map(|(family, (_, aliases))| {
                aliases.iter().map(move |(source, op)| {
                    let rule = Rule {
                        source,
                        results: std::slice::from_ref(op),
                        apply: alias,
                    };
                    (*family, rule)
                })
            })
            .collect()
    })
}

/// Every rule with its family: the families' tables, then their aliases.
pub fn rules_by_family() -> impl Iterator<Item = (&'static str, &'static Rule)> {
    FAMILIES
        .iter()
        .flat_map(|(family, (rules, _))| rules.iter().map(move |r| (*family, r)))
        .chain(alias_rules().iter().map(|(family, r)| (*family, r)))
}

/// Every rule: the tables, then the aliases.
pub fn all_rules() -> impl Iterator<Item = &'static Rule> {
    rules_by_family().map(|(_, r)| r)
}

/// The rule for an op identity (`aten.linear.default`), if there is one.
pub fn rule_for(op: &str) -> Option<&'static Rule> {
    static MAP: OnceLock<HashMap<&'static str, &'static Rule>> = OnceLock::new();
    MAP.get_or_init(|| all_rules().map(|r| (r.source, r)).collect())
        .get(op)
        .copied()
}

fn alias(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let src = a.0.target.to_string();
    let op = rule_for(&src)
        .and_then(|r| r.results.first())
        .ok_or_else(|| Error::internal(format!("{src} is no alias")))?;
    let target = crate::ir::Target::parse(&format!("torch.ops.{op}"))
        .ok_or_else(|| Error::internal(format!("alias target {op} does not parse")))?;
    let args = super::edit::args_for(a.0, &target)?;
    let outs = a.outs();
    em.call(
        op,
        super::edit::borrow_args(&args),
        outs.iter().map(|o| Out::Into(*o)).collect(),
    )?;
    // Outputs exactly as the alias had them (lists, symbolic ints).
    if let Some(n) = em.nodes.last_mut() {
        n.outputs = a.0.outputs.clone();
    }
    Ok(outs)
}

fn unary(em: &mut Emitter, op: &str, x: ValueId) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let meta = em.meta_like(x, m.dtype, m.sizes)?;
    em.op(op, vec![("self", Argument::Tensor(x))], meta)
}

/// A binary op on a tensor and a scalar, keeping the tensor's meta.
fn with_scalar(em: &mut Emitter, op: &str, x: ValueId, other: Argument) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let meta = em.meta_like(x, m.dtype, m.sizes)?;
    em.op(
        op,
        vec![("self", Argument::Tensor(x)), ("other", other)],
        meta,
    )
}

/// Broadcast sizes (numpy rules) of two metas.
fn broadcast(a: &[Sym], b: &[Sym]) -> Vec<Sym> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let x = (i + a.len()).checked_sub(n).map(|j| &a[j]);
            let y = (i + b.len()).checked_sub(n).map(|j| &b[j]);
            match (x, y) {
                (Some(x), None) => x.clone(),
                (None, Some(y)) => y.clone(),
                (Some(Sym::Int(1)), Some(y)) => y.clone(),
                (Some(x), _) => x.clone(),
                (None, None) => Sym::Int(1),
            }
        })
        .collect()
}

/// `op(a, b)` on two tensors with a result dtype.
fn binary(
    em: &mut Emitter,
    op: &str,
    a: ValueId,
    b: ValueId,
    dtype: Dtype,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let sizes = broadcast(&em.sizes(a)?, &em.sizes(b)?);
    let meta = em.meta_like(a, dtype, sizes)?;
    em.op_to(
        op,
        vec![
            ("self", Argument::Tensor(a)),
            ("other", Argument::Tensor(b)),
        ],
        out,
        meta,
    )
}

/// A bool-valued unary op (`isnan`, `isinf`) on `x`.
fn predicate(em: &mut Emitter, op: &str, x: ValueId) -> Result<ValueId> {
    let meta = em.meta_like(x, Dtype::Bool, em.sizes(x)?)?;
    em.op(op, vec![("self", Argument::Tensor(x))], meta)
}

/// A binary op writing the node's one output: a whole rule's result.
fn binary_into(
    em: &mut Emitter,
    a: &NodeArgs,
    op: &str,
    x: ValueId,
    y: ValueId,
    dtype: Dtype,
) -> Result<Vec<ValueId>> {
    Ok(vec![binary(em, op, x, y, dtype, Some(a.out(0)?))?])
}

fn permute(em: &mut Emitter, x: ValueId, perm: &[usize], out: Option<ValueId>) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let meta = TensorMeta {
        sizes: perm.iter().map(|&p| m.sizes[p].clone()).collect(),
        strides: perm.iter().map(|&p| m.strides[p].clone()).collect(),
        ..m
    };
    let dims: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
    em.op_to(
        aten::PERMUTE,
        vec![("self", Argument::Tensor(x)), ("dims", ints_arg(&dims))],
        out,
        meta,
    )
}

/// Resolves a `-1` in view sizes: from the input's static numel, else by
/// cancelling symbolic factors (`[s0, s1, 32]` viewed as `[s0, -1, 2, 16]`
/// gives `s1`), else from the sizes torch recorded for the node's output.
fn view_syms(em: &Emitter, x: ValueId, sizes: &[SymRef], out: Option<ValueId>) -> Result<Vec<Sym>> {
    let mut new = syms(em, sizes);
    let Some(pos) = new.iter().position(|s| *s == Sym::Int(-1)) else {
        return Ok(new);
    };
    let others: Vec<Sym> = (0..new.len())
        .filter(|i| *i != pos)
        .map(|i| new[i].clone())
        .collect();
    let recorded = match out {
        Some(o) => em.meta(o)?.sizes.get(pos).cloned(),
        None => None,
    }
    .filter(|_| out.is_some_and(|o| em.rank(o).ok() == Some(new.len())));
    new[pos] = sym_div_exact(&em.sizes(x)?, &others)
        .or(recorded)
        .ok_or_else(|| {
            let show = |v: &[Sym]| {
                let parts: Vec<String> = v.iter().map(ToString::to_string).collect();
                format!("[{}]", parts.join(", "))
            };
            Error::unsupported(format!(
                "a view of {} as {}: the -1 over symbolic sizes does not resolve",
                em.sizes(x).map(|s| show(&s)).unwrap_or_default(),
                show(&new)
            ))
        })?;
    Ok(new)
}

/// The strides of `x.view(new)` when the view needs no copy (torch's
/// `computeStride`), for static sizes; `None` when a copy is needed or a
/// size is symbolic.
fn view_strides(m: &TensorMeta, new: &[Sym]) -> Option<Vec<i64>> {
    let old = m.static_sizes()?;
    let stride = m.static_strides()?;
    let new: Vec<i64> = new.iter().map(Sym::as_int).collect::<Option<_>>()?;
    if old.is_empty() {
        return Some(vec![1; new.len()]);
    }
    let numel: i64 = old.iter().product();
    if numel == 0 {
        return (old == new)
            .then(|| stride.clone())
            .or_else(|| Some(crate::ir::contiguous_strides(&new)));
    }
    let mut out = vec![0i64; new.len()];
    let mut view_d = new.len() as i64 - 1;
    let mut chunk_base = *stride.last()?;
    let (mut tensor_numel, mut view_numel) = (1i64, 1i64);
    for d in (0..old.len()).rev() {
        tensor_numel *= old[d];
        if d == 0 || (old[d - 1] != 1 && stride[d - 1] != tensor_numel * chunk_base) {
            while view_d >= 0 && (view_numel < tensor_numel || new[view_d as usize] == 1) {
                out[view_d as usize] = view_numel * chunk_base;
                view_numel *= new[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if d > 0 {
                chunk_base = stride[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == -1).then_some(out)
}

fn view(em: &mut Emitter, x: ValueId, sizes: &[SymRef], out: Option<ValueId>) -> Result<ValueId> {
    let dtype = em.dtype(x)?;
    let new = view_syms(em, x, sizes, out)?;
    let mut meta = em.meta_like(x, dtype, new.clone())?;
    if let Some(st) = view_strides(em.meta(x)?, &new) {
        meta.strides = st.into_iter().map(Sym::Int).collect();
    }
    em.op_to(
        aten::VIEW,
        vec![("self", Argument::Tensor(x)), ("size", sym_ints_arg(sizes))],
        out,
        meta,
    )
}

fn clone(em: &mut Emitter, x: ValueId, out: Option<ValueId>) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let meta = em.meta_like(x, m.dtype, m.sizes)?;
    em.op_to(
        aten::CLONE,
        vec![
            ("self", Argument::Tensor(x)),
            (
                "memory_format",
                Argument::MemoryFormat(MemoryFormat::Contiguous),
            ),
        ],
        out,
        meta,
    )
}

/// `reshape`: a view when one is possible without a copy, else a copy then
/// a view (torch's `reshape` / `_reshape_copy`).
fn reshape(
    em: &mut Emitter,
    x: ValueId,
    sizes: &[SymRef],
    out: Option<ValueId>,
) -> Result<ValueId> {
    let m = em.meta(x)?;
    let viewable = match view_strides(m, &view_syms(em, x, sizes, out)?) {
        Some(_) => true,
        None => m.static_sizes().is_none() && is_contiguous(m),
    };
    let src = if viewable { x } else { clone(em, x, None)? };
    view(em, src, sizes, out)
}

fn expand(em: &mut Emitter, x: ValueId, sizes: &[SymRef]) -> Result<ValueId> {
    let dtype = em.dtype(x)?;
    let mut meta = em.meta_like(x, dtype, syms(em, sizes))?;
    // An expanded tensor is not contiguous where it broadcasts.
    let in_meta = em.meta(x)?.clone();
    let off = sizes.len() - in_meta.sizes.len();
    for (i, s) in meta.sizes.clone().iter().enumerate() {
        meta.strides[i] = if i < off || (in_meta.sizes[i - off] == Sym::Int(1) && *s != Sym::Int(1))
        {
            Sym::Int(0)
        } else {
            in_meta.strides[i - off].clone()
        };
    }
    em.op(
        aten::EXPAND,
        vec![("self", Argument::Tensor(x)), ("size", sym_ints_arg(sizes))],
        meta,
    )
}

fn unsqueeze(em: &mut Emitter, x: ValueId, dim: usize) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let mut sizes = m.sizes.clone();
    sizes.insert(dim, Sym::Int(1));
    let meta = em.meta_like(x, m.dtype, sizes)?;
    em.op(
        aten::UNSQUEEZE,
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(dim as i64)),
        ],
        meta,
    )
}

fn squeeze_dims(
    em: &mut Emitter,
    x: ValueId,
    dims: &[usize],
    out: Option<ValueId>,
) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let sizes: Vec<Sym> = m
        .sizes
        .iter()
        .enumerate()
        .filter(|(i, s)| !(dims.contains(i) && **s == Sym::Int(1)))
        .map(|(_, s)| s.clone())
        .collect();
    let meta = em.meta_like(x, m.dtype, sizes)?;
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    em.op_to(
        aten::SQUEEZE_DIMS,
        vec![("self", Argument::Tensor(x)), ("dim", ints_arg(&dims))],
        out,
        meta,
    )
}

fn mm(
    em: &mut Emitter,
    a: ValueId,
    b: ValueId,
    bias: Option<ValueId>,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let (sa, sb) = (em.sizes(a)?, em.sizes(b)?);
    let meta = em.meta_like(a, em.dtype(a)?, vec![sa[0].clone(), sb[1].clone()])?;
    match bias {
        Some(c) => em.op_to(
            aten::ADDMM,
            vec![
                ("self", Argument::Tensor(c)),
                ("mat1", Argument::Tensor(a)),
                ("mat2", Argument::Tensor(b)),
            ],
            out,
            meta,
        ),
        None => em.op_to(
            aten::MM,
            vec![("self", Argument::Tensor(a)), ("mat2", Argument::Tensor(b))],
            out,
            meta,
        ),
    }
}

/// Whether `x.view(-1, x.size(-1))` needs no copy (torch's `should_fold`).
fn foldable(m: &TensorMeta) -> bool {
    let n = m.sizes.len();
    (0..n.saturating_sub(2))
        .all(|i| m.strides[i] == super::edit::sym_mul(&m.strides[i + 1], &m.sizes[i + 1]))
}

/// torch's `matmul`, op for op (`at::native::_matmul_impl`).
fn matmul(em: &mut Emitter, a: ValueId, b: ValueId, out: Option<ValueId>) -> Result<ValueId> {
    let (da, db) = (em.rank(a)?, em.rank(b)?);
    let dtype = em.dtype(a)?;
    match (da, db) {
        (1, 1) => {
            let prod = binary(em, aten::MUL_TENSOR, a, b, dtype, None)?;
            let meta = em.meta_like(a, dtype, vec![])?;
            return em.op_to(
                aten::SUM_DIM_INTLIST,
                vec![("self", Argument::Tensor(prod)), ("dim", ints_arg(&[0]))],
                out,
                meta,
            );
        }
        (2, 1) => {
            let b2 = unsqueeze(em, b, 1)?;
            let r = mm(em, a, b2, None, None)?;
            return squeeze_dims(em, r, &[1], out);
        }
        (1, 2) => {
            let a2 = unsqueeze(em, a, 0)?;
            let r = mm(em, a2, b, None, None)?;
            return squeeze_dims(em, r, &[0], out);
        }
        (2, 2) => return mm(em, a, b, None, out),
        _ => {}
    }
    if da >= 3 && (db == 1 || db == 2) && foldable(em.meta(a)?) {
        let lead: Vec<SymRef> = (0..da - 1).map(|d| em.size(a, d)).collect::<Result<_>>()?;
        let k = em.size(a, da - 1)?;
        let rows = em.product(&lead)?;
        let a2 = view(em, a, &[rows, k], None)?;
        let b2 = if db == 1 { unsqueeze(em, b, 1)? } else { b };
        let r = mm(em, a2, b2, None, None)?;
        let mut sizes = lead;
        if db == 2 {
            sizes.push(em.size(b, 1)?);
        }
        return view(em, r, &sizes, out);
    }
    // Batched: expand both to the broadcast batch, fold it, bmm, unfold.
    let a_ = if da == 1 { unsqueeze(em, a, 0)? } else { a };
    let b_ = if db == 1 { unsqueeze(em, b, 1)? } else { b };
    let (ra, rb) = (em.rank(a_)?, em.rank(b_)?);
    let sa = em.size_refs(a_)?;
    let sb = em.size_refs(b_)?;
    let (n, m1) = (sa[ra - 2], sa[ra - 1]);
    let (m2, p) = (sb[rb - 2], sb[rb - 1]);
    let batch_a = &sa[..ra - 2];
    let batch_b = &sb[..rb - 2];
    let nb = batch_a.len().max(batch_b.len());
    let mut batch = Vec::new();
    for i in 0..nb {
        let x = (i + batch_a.len()).checked_sub(nb).map(|j| batch_a[j]);
        let y = (i + batch_b.len()).checked_sub(nb).map(|j| batch_b[j]);
        batch.push(match (x, y) {
            (Some(x), None) => x,
            (None, Some(y)) => y,
            (Some(SymRef::Int(1)), Some(y)) => y,
            (Some(x), _) => x,
            (None, None) => SymRef::Int(1),
        });
    }
    let bp = em.product(&batch)?;
    let ea: Vec<SymRef> = batch.iter().copied().chain([n, m1]).collect();
    let eb: Vec<SymRef> = batch.iter().copied().chain([m2, p]).collect();
    let xa = expand(em, a_, &ea)?;
    let xa = reshape(em, xa, &[bp, n, m1], None)?;
    let xb = expand(em, b_, &eb)?;
    let xb = reshape(em, xb, &[bp, m2, p], None)?;
    let meta = em.meta_like(a, dtype, syms(em, &[bp, n, p]))?;
    let r = em.op(
        aten::BMM,
        vec![
            ("self", Argument::Tensor(xa)),
            ("mat2", Argument::Tensor(xb)),
        ],
        meta,
    )?;
    let mut shape = batch;
    if da > 1 {
        shape.push(n);
    }
    if db > 1 {
        shape.push(p);
    }
    view(em, r, &shape, out)
}

fn full_like(
    em: &mut Emitter,
    x: ValueId,
    value: Argument,
    dtype: Dtype,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, dtype, sizes)?;
    em.op_to(
        aten::FULL_LIKE,
        vec![
            ("self", Argument::Tensor(x)),
            ("fill_value", value),
            ("dtype", Argument::ScalarType(dtype)),
            (
                "memory_format",
                Argument::MemoryFormat(MemoryFormat::Preserve),
            ),
        ],
        out,
        meta,
    )
}

/// `gather(x, dim, index)`: `x`'s elements at `index` along `dim` (into
/// `out` when given).
fn gather(
    em: &mut Emitter,
    x: ValueId,
    dim: usize,
    index: ValueId,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let meta = em.meta_like(index, em.dtype(x)?, em.sizes(index)?)?;
    em.op_to(
        aten::GATHER,
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(dim as i64)),
            ("index", Argument::Tensor(index)),
        ],
        out,
        meta,
    )
}

/// `full(sizes, value)` of `dtype` on `like`'s device.
fn full(
    em: &mut Emitter,
    like: ValueId,
    sizes: &[SymRef],
    value: Argument,
    dtype: Dtype,
) -> Result<ValueId> {
    let meta = em.meta_like(like, dtype, syms(em, sizes))?;
    let device = Argument::Device(meta.device.clone());
    em.op(
        aten::FULL,
        vec![
            ("size", sym_ints_arg(sizes)),
            ("fill_value", value),
            ("dtype", Argument::ScalarType(dtype)),
            ("device", device),
            ("pin_memory", Argument::Bool(false)),
        ],
        meta,
    )
}

fn scalar_tensor(
    em: &mut Emitter,
    like: ValueId,
    value: Argument,
    dtype: Dtype,
) -> Result<ValueId> {
    let meta = em.meta_like(like, dtype, vec![])?;
    em.op(
        aten::SCALAR_TENSOR,
        vec![("s", value), ("dtype", Argument::ScalarType(dtype))],
        meta,
    )
}

fn where_(
    em: &mut Emitter,
    c: ValueId,
    x: ValueId,
    y: ValueId,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let dtype = if em.dtype(x)?.is_floating() {
        em.dtype(x)?
    } else {
        em.dtype(y)?
    };
    let s = broadcast(&broadcast(&em.sizes(c)?, &em.sizes(x)?), &em.sizes(y)?);
    let meta = em.meta_like(x, dtype, s)?;
    em.op_to(
        aten::WHERE_SELF,
        vec![
            ("condition", Argument::Tensor(c)),
            ("self", Argument::Tensor(x)),
            ("other", Argument::Tensor(y)),
        ],
        out,
        meta,
    )
}

fn to_copy(em: &mut Emitter, x: ValueId, dtype: Dtype, out: Option<ValueId>) -> Result<ValueId> {
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, dtype, sizes)?;
    em.op_to(
        aten::_TO_COPY,
        vec![
            ("self", Argument::Tensor(x)),
            ("dtype", Argument::ScalarType(dtype)),
        ],
        out,
        meta,
    )
}

fn slice(em: &mut Emitter, x: ValueId, dim: usize, start: i64, end: i64) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let mut sizes = m.sizes.clone();
    sizes[dim] = match &sizes[dim] {
        Sym::Int(n) => {
            let clamp = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(*n) };
            Sym::Int((clamp(end) - clamp(start)).max(0))
        }
        // A symbolic dim, sliced from a fixed start to its end or to a
        // fixed distance before it (the ranges torch's guards allow).
        s if start >= 0 && end == i64::MAX => sym_add(s, &Sym::Int(-start)),
        s if start >= 0 && end < 0 => sym_add(s, &Sym::Int(end - start)),
        s => {
            return Err(Error::unsupported(format!(
                "a slice [{start}:{end}] of symbolic dim {dim} ({s})"
            )))
        }
    };
    let meta = em.meta_like(x, m.dtype, sizes)?;
    em.op(
        aten::SLICE_TENSOR,
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(dim as i64)),
            ("start", Argument::SymInt(SymRef::Int(start))),
            ("end", Argument::SymInt(SymRef::Int(end))),
        ],
        meta,
    )
}

/// `arange(0, end, step)` of `dtype`.
fn arange_to(
    em: &mut Emitter,
    like: ValueId,
    end: i64,
    step: i64,
    dtype: Dtype,
) -> Result<ValueId> {
    let len = if step > 0 { (end + step - 1) / step } else { 0 };
    let meta = em.meta_like(like, dtype, vec![Sym::Int(len.max(0))])?;
    em.op(
        aten::ARANGE_START_STEP,
        vec![
            ("start", Argument::Int(0)),
            ("end", Argument::Int(end)),
            ("step", Argument::Int(step)),
            ("dtype", Argument::ScalarType(dtype)),
        ],
        meta,
    )
}

/// `arange(start, start + len)` of int64: the rows or columns of a
/// diagonal.
fn arange_from(em: &mut Emitter, like: ValueId, start: i64, len: i64) -> Result<ValueId> {
    let meta = em.meta_like(like, Dtype::Int64, vec![Sym::Int(len)])?;
    em.op(
        aten::ARANGE_START_STEP,
        vec![
            ("start", Argument::Int(start)),
            ("end", Argument::Int(start + len)),
            ("step", Argument::Int(1)),
            ("dtype", Argument::ScalarType(Dtype::Int64)),
        ],
        meta,
    )
}

/// `arange(size of dim d of x)` of int64, shaped as a column or a row; the
/// size may be symbolic (the end is then a `sym_size` of `x`).
fn arange_dim(em: &mut Emitter, x: ValueId, d: usize, column: bool) -> Result<ValueId> {
    let n = em.size(x, d)?;
    let r = match n {
        SymRef::Int(n) => arange_to(em, x, n, 1, Dtype::Int64)?,
        _ => {
            let meta = em.meta_like(x, Dtype::Int64, vec![em.sym_of(n)])?;
            em.op(
                aten::ARANGE_START_STEP,
                vec![
                    ("start", Argument::Int(0)),
                    ("end", Argument::SymInt(n)),
                    ("step", Argument::Int(1)),
                    ("dtype", Argument::ScalarType(Dtype::Int64)),
                ],
                meta,
            )?
        }
    };
    if column {
        unsqueeze(em, r, 1)
    } else {
        Ok(r)
    }
}

/// `arange(n)` shaped as a column (`[n, 1]`) or a row (`[n]`).
fn arange_col(em: &mut Emitter, like: ValueId, n: i64, column: bool) -> Result<ValueId> {
    let r = arange_to(em, like, n, 1, Dtype::Int64)?;
    if column {
        unsqueeze(em, r, 1)
    } else {
        Ok(r)
    }
}

/// Ops that are another op under a public name, with the same arguments
/// and outputs (`cdist` is `_cdist_forward`, ...).
fn same_args(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let op = match a.0.target.to_string().as_str() {
        aten::CDIST => aten::_CDIST_FORWARD,
        aten::PDIST => aten::_PDIST_FORWARD,
        aten::EMBEDDING_BAG_PADDING_IDX => aten::_EMBEDDING_BAG,
        other => {
            return Err(Error::internal(format!(
                "same_args has no target for {other}"
            )))
        }
    };
    let args =
        a.0.inputs
            .iter()
            .map(|n| {
                let arg = match (n.name.as_str(), &n.arg) {
                    // `int? padding_idx` (None: no padding row) is `int padding_idx=-1` there.
                    ("padding_idx", Argument::None) => Argument::Int(-1),
                    _ => n.arg.clone(),
                };
                (n.name.as_str(), arg)
            })
            .collect();
    let outs = a.outs();
    em.call(op, args, outs.iter().map(|&o| Out::Into(o)).collect())?;
    Ok(outs)
}

/// `source -> result, ...` (for `--list`).
pub fn describe(rule: &Rule) -> String {
    format!("{} -> {}", rule.source, rule.results.join(", "))
}

/// `cat` of `xs` along `dim` into `out` when given.
fn cat_op(em: &mut Emitter, xs: &[ValueId], dim: usize, out: Option<ValueId>) -> Result<ValueId> {
    let mut sizes = em.sizes(xs[0])?;
    let mut total = 0;
    for x in xs {
        total += em.sizes(*x)?[dim]
            .as_int()
            .ok_or_else(|| Error::unsupported(format!("cat along symbolic dim {dim}")))?;
    }
    sizes[dim] = Sym::Int(total);
    let meta = em.meta_like(xs[0], em.dtype(xs[0])?, sizes)?;
    em.op_to(
        aten::CAT,
        vec![
            ("tensors", Argument::Tensors(xs.to_vec())),
            ("dim", Argument::Int(dim as i64)),
        ],
        out,
        meta,
    )
}

/// `sum.dim_IntList` over `dims` (normalised; empty = every dim).
fn sum_dims(
    em: &mut Emitter,
    x: ValueId,
    dims: &[i64],
    keepdim: bool,
    dtype: Dtype,
    out: Option<ValueId>,
) -> Result<ValueId> {
    reduce(
        em,
        aten::SUM_DIM_INTLIST,
        x,
        dims,
        keepdim,
        vec![],
        dtype,
        out,
    )
}

/// A reduction over `dims` (normalised; empty = every dim) with its meta;
/// the arguments mirror the reduction ops' own.
#[allow(clippy::too_many_arguments)]
fn reduce(
    em: &mut Emitter,
    op: &str,
    x: ValueId,
    dims: &[i64],
    keepdim: bool,
    extra: Vec<(&str, Argument)>,
    dtype: Dtype,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let sizes = em.sizes(x)?;
    let r = sizes.len();
    let all: Vec<usize> = if dims.is_empty() {
        (0..r).collect()
    } else {
        dims.iter()
            .map(|&d| normalize_dim(d, r))
            .collect::<Result<_>>()?
    };
    let new: Vec<Sym> = sizes
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match (all.contains(&i), keepdim) {
            (true, true) => Some(Sym::Int(1)),
            (true, false) => None,
            (false, _) => Some(s.clone()),
        })
        .collect();
    let meta = em.meta_like(x, dtype, new)?;
    let dim_arg = Argument::Ints(all.iter().map(|&d| d as i64).collect());
    let mut args = vec![
        ("self", Argument::Tensor(x)),
        ("dim", dim_arg),
        ("keepdim", Argument::Bool(keepdim)),
    ];
    args.extend(extra);
    em.op_to(op, args, out, meta)
}

fn cmp(em: &mut Emitter, op: &str, x: ValueId, other: Argument) -> Result<ValueId> {
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, Dtype::Bool, sizes)?;
    em.op(
        op,
        vec![("self", Argument::Tensor(x)), ("other", other)],
        meta,
    )
}

fn same(
    em: &mut Emitter,
    op: &str,
    args: Vec<(&str, Argument)>,
    like: ValueId,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let m = em.meta(like)?.clone();
    let meta = em.meta_like(like, m.dtype, m.sizes)?;
    em.op_to(op, args, out, meta)
}

/// `op_copy(...)`: the view `op(...)`, then a copy of each result.
fn copy_variant(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let t = &a.0.target;
    let base = crate::ir::Target::op(&t.namespace, t.name.trim_end_matches("_copy"), &t.overload);
    let args = super::edit::args_for(a.0, &base)?;
    let outs = a.outs();
    let metas: Vec<Out> = outs
        .iter()
        .map(|o| em.meta(*o).cloned().map(Out::New))
        .collect::<Result<_>>()?;
    let views = em.call(&base.to_string(), super::edit::borrow_args(&args), metas)?;
    views
        .iter()
        .zip(&outs)
        .map(|(v, o)| clone(em, *v, Some(*o)))
        .collect()
}
