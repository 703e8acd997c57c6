//! Writes through views. An in-place op on a view (`x[0:2].fill_(1)`,
//! `y = x.view(-1); y.add_(1)`) changes its base in torch, and every other
//! view of that base. The lowering is functional: the written view gets
//! its new value, each base up the chain the new view scattered back into
//! it (`slice_scatter`, `select_scatter`, or the view's inverse), and every
//! other view of the root is made again from the root's new value, so a
//! later read sees the write as torch's would.
//!
//! Only views that are views whatever the strides are written through or
//! made again: `slice`, `select`, `view`, `unsqueeze`, `squeeze`,
//! `transpose`, `permute`, `t`, `alias`, `detach`, and the pieces of
//! `chunk`, `split` and `unbind` (each the `slice` or `select` it is). A
//! write that would need another (a `reshape` or `contiguous`, which copy
//! or not depending on the strides, an `expand`) is refused by name.

use std::collections::HashSet;

use super::ops::{At, Builder, ViewOf, V};
use crate::error::Result;
use crate::ir::{ArgKind, Argument, NamedArg, Node, Sym, SymRef, Target, ValueId};
use crate::schema;

/// Ops whose output is a view of their first input whatever its strides
/// (so a write through one is a write into the base, and the view can be
/// made again from the base's new value).
fn exact_view(node: &Node) -> bool {
    node.target.namespace == "aten"
        && matches!(
            (node.target.name.as_str(), node.target.overload.as_str()),
            ("slice", "Tensor")
                | ("select", "int")
                | ("view", "default")
                | ("unsqueeze", "default")
                | ("squeeze", _)
                | ("transpose", "int")
                | ("permute", "default")
                | ("t", "default")
                | ("alias", "default")
                | ("detach", "default")
        )
}

fn arg_v(a: Argument) -> V {
    match a {
        Argument::Int(i) | Argument::SymInt(SymRef::Int(i)) => V::Int(i),
        Argument::SymInt(SymRef::Value(v)) => V::SymInt(v),
        Argument::Ints(v) => V::list(v.into_iter().map(V::Int).collect()),
        Argument::Bool(b) => V::Bool(b),
        _ => V::None,
    }
}

impl Builder<'_> {
    /// Records the views a node just emitted made (by `emit`).
    pub(super) fn record_views(&mut self, node: &Node, outs: &[ValueId], single: bool) {
        let Some(Argument::Tensor(base)) = node.inputs.first().map(|a| a.arg.clone()) else {
            return;
        };
        let pieces = if single {
            vec![(outs.len() == 1 && exact_view(node)).then(|| node.clone()); outs.len()]
        } else {
            self.pieces(node, base, outs)
        };
        for (v, piece) in outs.iter().zip(pieces) {
            let exact = piece.is_some();
            self.views.insert(
                *v,
                ViewOf {
                    base,
                    node: piece.unwrap_or_else(|| node.clone()),
                    exact,
                },
            );
        }
    }

    /// The pieces of `chunk`, `split` or `unbind`, each as the `slice`
    /// (`select`) of the base it is, where its sizes are known; `None`
    /// for the others.
    fn pieces(&self, node: &Node, base: ValueId, outs: &[ValueId]) -> Vec<Option<Node>> {
        let name = node.target.name.as_str();
        let rank = self.meta(base).sizes.len() as i64;
        let dim = match node.arg("dim") {
            Some(Argument::Int(d)) => *d,
            _ => 0,
        };
        let dim = if dim < 0 { dim + rank } else { dim };
        if node.target.namespace != "aten"
            || !matches!(name, "chunk" | "split" | "split_with_sizes" | "unbind")
            || !(0..rank).contains(&dim)
        {
            return vec![None; outs.len()];
        }
        let arg = |name: &str, arg: Argument| NamedArg {
            name: name.into(),
            arg,
            kind: ArgKind::Positional,
            defaulted: false,
        };
        let mut start = 0;
        let mut known = true;
        outs.iter()
            .enumerate()
            .map(|(k, v)| {
                let mut piece = node.clone();
                piece.outputs = vec![Argument::Tensor(*v)];
                if name == "unbind" {
                    piece.target = Target::op("aten", "select", "int");
                    piece.inputs = vec![
                        arg("self", Argument::Tensor(base)),
                        arg("dim", Argument::Int(dim)),
                        arg("index", Argument::Int(k as i64)),
                    ];
                    return Some(piece);
                }
                let len = self.meta(*v).sizes.get(dim as usize).and_then(Sym::as_int);
                known &= len.is_some();
                let len = len.filter(|_| known)?;
                piece.target = Target::op("aten", "slice", "Tensor");
                piece.inputs = vec![
                    arg("self", Argument::Tensor(base)),
                    arg("dim", Argument::Int(dim)),
                    arg("start", Argument::Int(start)),
                    arg("end", Argument::Int(start + len)),
                    arg("step", Argument::Int(1)),
                ];
                start += len;
                Some(piece)
            })
            .collect()
    }

    /// The chain from `v` up to its root: `v`, its base, the base's base...
    fn chain(&self, v: ValueId) -> Vec<ValueId> {
        let mut out = vec![v];
        let mut cur = v;
        while let Some(view) = self.views.get(&cur) {
            cur = view.base;
            out.push(cur);
        }
        out
    }

    /// After `target` (a view, or a tensor with views) got the value `new`
    /// in place: the new value of each base up the chain, and every other
    /// current view of the root made again; `replaced` records them all.
    pub(super) fn write_through(
        &mut self,
        target: ValueId,
        new: ValueId,
        what: &str,
        at: &At,
    ) -> Result<()> {
        let chain = self.chain(target);
        let root = *chain.last().unwrap_or(&target);
        if let Some((_, kind)) = self.weight_inputs.iter().find(|(v, _)| *v == root) {
            return Err(at.refuse(format!(
                "{what} writes through a view into {} (program state is not lowered from TorchScript)",
                kind.weight_name().unwrap_or("a weight")
            )));
        }
        // Every current view of the root besides the chain: made again
        // after the write, so each must be exact and still in the graph
        // (a view made inside a branch of a cond is not reachable here).
        let mut present: Option<HashSet<&str>> = None;
        let mut others: Vec<(ValueId, ViewOf)> = Vec::new();
        for (v, view) in &self.views {
            if chain.contains(v)
                || self.replaced.contains_key(v)
                || *self.chain(*v).last().unwrap_or(v) != root
            {
                continue;
            }
            let present = present
                .get_or_insert_with(|| self.graph.nodes.iter().map(|n| n.name.as_str()).collect());
            if present.contains(view.node.name.as_str()) {
                others.push((*v, view.clone()));
            }
        }
        for (_, view) in chain
            .iter()
            .filter_map(|v| self.views.get(v).map(|x| (v, x)))
            .chain(others.iter().map(|(v, x)| (v, x)))
        {
            if !view.exact {
                return Err(at.refuse(format!(
                    "{what} writes in place into a tensor that shares memory with a view made by {} (a copy or a view depending on strides, or one of several pieces): not lowered",
                    view.node.target
                )));
            }
        }
        // The new value of each base, from the view below it.
        let mut value = new;
        for pair in chain.windows(2) {
            let (v, base) = (pair[0], pair[1]);
            let view = self.views[&v].clone();
            self.replaced.insert(v, value);
            value = self.unview(&view, base, value, at)?;
        }
        self.replaced.insert(root, value);
        // The other views, in the order they were made (a view's base first).
        others.sort_by_key(|(v, _)| v.index());
        for (v, view) in others {
            let base = self.current_id(view.base);
            let mut inputs = view.node.inputs.clone();
            inputs[0].arg = Argument::Tensor(base);
            let t = &view.node.target;
            let Some(schema) = schema::lookup(&t.namespace, &t.name, &t.overload) else {
                return Err(at.refuse(format!("{t} has no schema")));
            };
            let V::Tensor(again) = self.emit(t.clone(), inputs, &schema, at)? else {
                return Err(at.refuse(format!("{t} made again gives several values")));
            };
            self.replaced.insert(v, again);
        }
        Ok(())
    }

    /// A value's current version.
    fn current_id(&self, mut v: ValueId) -> ValueId {
        while let Some(n) = self.replaced.get(&v) {
            v = *n;
        }
        v
    }

    /// The base `base` with its view (`view`'s node) replaced by `value`.
    fn unview(&mut self, view: &ViewOf, base: ValueId, value: ValueId, at: &At) -> Result<ValueId> {
        let n = &view.node;
        let arg = |name: &str| arg_v(n.arg(name).cloned().unwrap_or(Argument::None));
        let (b, val) = (V::Tensor(base), V::Tensor(value));
        let out = match (n.target.name.as_str(), n.target.overload.as_str()) {
            ("slice", _) => self.call(
                "aten",
                "slice_scatter",
                &[b, val, arg("dim"), arg("start"), arg("end"), arg("step")],
                &[],
                at,
            )?,
            ("select", _) => self.call(
                "aten",
                "select_scatter",
                &[b, val, arg("dim"), arg("index")],
                &[],
                at,
            )?,
            ("transpose", _) => self.call(
                "aten",
                "transpose",
                &[val, arg("dim0"), arg("dim1")],
                &[],
                at,
            )?,
            ("t", _) => self.call("aten", "t", &[val], &[], at)?,
            ("permute", _) => {
                let dims = n
                    .arg("dims")
                    .and_then(|a| match a {
                        Argument::Ints(v) => Some(v.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                let rank = dims.len() as i64;
                let mut inverse = vec![0i64; dims.len()];
                for (i, d) in dims.iter().enumerate() {
                    inverse[(if *d < 0 { d + rank } else { *d }) as usize] = i as i64;
                }
                self.call(
                    "aten",
                    "permute",
                    &[val, V::list(inverse.into_iter().map(V::Int).collect())],
                    &[],
                    at,
                )?
            }
            ("alias" | "detach", _) => val,
            // view, unsqueeze, squeeze: the same elements in the base's shape
            _ => {
                let sizes: Option<Vec<V>> = self
                    .meta(base)
                    .sizes
                    .iter()
                    .map(|s| match s {
                        Sym::Int(i) => Some(V::Int(*i)),
                        _ => None,
                    })
                    .collect();
                let Some(sizes) = sizes else {
                    return Err(at.refuse(format!(
                        "a write through {} of a tensor with symbolic sizes: not lowered",
                        n.target
                    )));
                };
                self.call("aten", "view", &[val, V::list(sizes)], &[], at)?
            }
        };
        match out {
            V::Tensor(t) => Ok(t),
            other => Err(at.refuse(format!(
                "writing through {} gave {}",
                n.target,
                other.kind()
            ))),
        }
    }
}
