//! The fused epilogues as ops take them ([`Epilogue`], [`EpilogueArgs`]):
//! an element-wise group a convolution or product runs on each block of
//! its output as its kernel makes it, and the dead residual a kernel may
//! write its output over ([`Executor::overwritable`]).

use super::*;

impl Executor<'_> {
    /// The fused groups that run as a convolution's or product's epilogue: the
    /// producer's node name and the group's ops, in graph order.
    pub fn epilogues(&self) -> Vec<(String, Vec<String>)> {
        self.fusion
            .groups
            .iter()
            .zip(&self.fusion.epilogues)
            .filter_map(|(g, e)| {
                let (c, _) = (*e)?;
                let ops = g
                    .nodes
                    .iter()
                    .map(|&i| self.program.graph.nodes[i].target.to_string());
                Some((self.program.graph.nodes[c].name.clone(), ops.collect()))
            })
            .collect()
    }

    /// How many outputs were written over a dead residual
    /// ([`EpilogueArgs::into`]) since the executor was built.
    pub fn outputs_in_place(&self) -> usize {
        self.outputs_in_place
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many outputs were left channels-last (by depthwise
    /// convolutions, for the ops after them: [`ExecOptions::planes_only`])
    /// since the executor was built.
    pub fn outputs_channels_last(&self) -> usize {
        self.outputs_channels_last
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Which input of `group` (an epilogue of node `at`, its input `own`
    /// the node's output) the node may write its output over: one the
    /// group adds first (`x + r`) and reads nowhere else, a contiguous
    /// float32 host tensor dead after the group and no operand of the
    /// node, whose storage is no weight's (the executor keeps those; the
    /// other inputs are the run's, [`Executor::run_graph`]) and no other
    /// live value's (a view of it, of the node's input). Counted when the
    /// op does ([`Executor::outputs_in_place`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn overwritable(
        &self,
        node: &Node,
        group: &fuse::Group,
        own: usize,
        env: &[Option<Value>],
        last: &[usize],
        at: usize,
    ) -> Option<usize> {
        if !self.in_place {
            return None;
        }
        let steps = group.register_steps(own)?;
        let (first, rest) = steps.split_first()?;
        let sgemm::EpiSrc::Input(j) = first.b else {
            return None;
        };
        let v = group.inputs[j];
        let once = group.inputs.iter().filter(|&&u| u == v).count() == 1;
        if j == own || *first != residual_add(j) || rest.iter().any(|s| s.b == first.b) || !once {
            return None;
        }
        // the node's own operands are read while its output is written
        let mut read = Vec::new();
        node.inputs.iter().for_each(|a| a.arg.value_refs(&mut read));
        if read.contains(&v) {
            return None;
        }
        if last[v.index()] > at {
            return None;
        }
        let Some(Value::Tensor(t)) = &env[v.index()] else {
            return None;
        };
        let whole = t.t.layout().is_contiguous() && t.t.layout().start_offset() == 0;
        if t.dtype != Dtype::Float32 || !whole {
            return None;
        }
        let addr = storage_address(&t.t)?;
        // (nor over an input bound for many runs: each reads it)
        if self.packs.weights.contains(&addr)
            || self.bound.lock().map_or(true, |b| b.contains(&addr))
        {
            return None;
        }
        // (a weight's slot holds a weight's storage, which this is not)
        let mut shared = false;
        for (i, slot) in env.iter().enumerate() {
            let weight = self.weight_slots.get(i).is_some_and(|&w| w);
            if let (false, false, Some(value)) = (i == v.index(), weight, slot) {
                value.storages(&mut |a| shared |= a == addr);
            }
        }
        (!shared).then_some(j)
    }

    /// How many epilogues ([`Executor::epilogues`]) ran inside their
    /// producer's kernel, on each block of its output as it was made,
    /// over the runs so far (the others ran after it, as a pass of their
    /// own: a kernel that takes none, or an operand it cannot read).
    pub fn epilogues_in_kernels(&self) -> usize {
        self.epilogues_in_kernels
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many convolutions ran with their input's scale folded into
    /// their weight ([`fuse::Plan::scaled`]) over the runs so far.
    pub fn scales_folded(&self) -> usize {
        self.scales_folded
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The element-wise chains fused ([`fuse`]): each as its nodes' ops,
    /// in graph order.
    pub fn fused_groups(&self) -> Vec<Vec<String>> {
        self.fusion
            .groups
            .iter()
            .map(|g| {
                g.nodes
                    .iter()
                    .map(|&i| self.program.graph.nodes[i].target.to_string())
                    .collect()
            })
            .collect()
    }
}

/// A fused group a convolution or product runs on its output as its kernel makes it
/// ([`sgemm::Epilogue`], from [`fuse::Group::register_steps`]): the op
/// sets `applied` when it did, and its output is then the group's;
/// otherwise the executor runs the group right after it.
pub struct Epilogue<'a> {
    pub group: &'a fuse::Group,
    /// Which of the group's inputs the op's output is.
    pub own: usize,
    pub applied: std::cell::Cell<bool>,
    /// Which of the group's inputs the op may write its output over (the
    /// executor's `overwritable` decides), if any.
    pub into: Option<usize>,
    /// Set by the op where it did.
    pub overwrote: std::cell::Cell<bool>,
}

/// An epilogue as an op takes it: the group, which input the op's
/// output is, and the other inputs' elements (entry `own` empty).
pub struct EpilogueArgs<'a> {
    pub group: &'a fuse::Group,
    pub own: usize,
    pub inputs: &'a [&'a [f32]],
    pub applied: &'a std::cell::Cell<bool>,
    /// Where the op offered to take it ([`Ctx::with_epilogue_over`]): the
    /// input the group adds first (`x + r`, and reads nowhere else), dead
    /// after the group and sharing its storage with no other value, which
    /// the op may write its output over, adding `r` as it stores (its
    /// entry in `inputs` empty, its storage not locked). An op that does
    /// not, leaves the epilogue unapplied ([`EpilogueArgs::fits`] is
    /// false), and the executor runs the group after it on the intact `r`.
    pub into: Option<(usize, &'a CandleTensor)>,
    /// Set by the op where it wrote its output over `into` (with
    /// `applied`; the convolutions' `applied_over`).
    pub overwrote: &'a std::cell::Cell<bool>,
}

impl EpilogueArgs<'_> {
    /// Whether it fits an output of `len` elements: every other input
    /// has as many (and none is offered to be written over).
    pub fn fits(&self, len: usize) -> bool {
        self.into.is_none()
            && self
                .inputs
                .iter()
                .enumerate()
                .all(|(i, s)| i == self.own || s.len() == len)
    }

    /// The input to write an output of `len` elements over, with the
    /// steps after its add and the other inputs (see
    /// [`EpilogueArgs::into`]), where one is offered and fits.
    pub fn over(&self, len: usize) -> Option<Over<'_>> {
        let (j, r) = self.into?;
        let fits = r.elem_count() == len
            && self
                .inputs
                .iter()
                .enumerate()
                .all(|(i, s)| i == self.own || i == j || s.len() == len);
        let steps = self.group.register_steps(self.own).filter(|_| fits)?;
        match steps.split_first() {
            Some((first, rest)) if *first == residual_add(j) => {
                Some((r, rest.to_vec(), self.inputs))
            }
            _ => None,
        }
    }
}

/// What [`EpilogueArgs::over`] gives: the residual to write over, the
/// steps after its add, the epilogue's inputs (the residual's empty).
pub type Over<'b> = (&'b CandleTensor, Vec<sgemm::EpiStep>, &'b [&'b [f32]]);

/// The first step of an epilogue that adds input `j` (`x + r`).
fn residual_add(j: usize) -> sgemm::EpiStep {
    sgemm::EpiStep {
        op: sgemm::EpiOp::Add(1.0),
        b: sgemm::EpiSrc::Input(j),
    }
}

/// `f` on the float32 elements of `ids` (each a contiguous host tensor),
/// the entries `skip` names empty; on `None` where one is not.
fn with_f32_slices<R>(
    env: &[Option<Value>],
    ids: &[ValueId],
    skip: &[usize],
    f: impl FnOnce(Option<&[&[f32]]>) -> R,
) -> R {
    let mut guards = Vec::with_capacity(ids.len());
    for (i, v) in ids.iter().enumerate() {
        match &env[v.index()] {
            _ if skip.contains(&i) => guards.push(None),
            Some(Value::Tensor(t)) if t.dtype == Dtype::Float32 && t.t.device().is_cpu() => {
                guards.push(Some(t.t.storage_and_layout()))
            }
            _ => return f(None),
        }
    }
    let mut slices: Vec<&[f32]> = Vec::with_capacity(ids.len());
    for g in &guards {
        let Some((storage, layout)) = g else {
            slices.push(&[]);
            continue;
        };
        let candle_core::Storage::Cpu(cpu) = &**storage else {
            return f(None);
        };
        let (Ok(all), Some((a, z))) = (cpu.as_slice::<f32>(), layout.contiguous_offsets()) else {
            return f(None);
        };
        slices.push(&all[a..z]);
    }
    f(Some(&slices))
}

impl Ctx<'_> {
    /// `f` with the node's epilogue ([`Epilogue`]), when it has one whose
    /// other inputs are float32 host tensors; with `None` otherwise (the
    /// executor then runs the group after the op).
    pub fn with_epilogue<R>(&self, f: impl FnOnce(Option<&EpilogueArgs>) -> R) -> R {
        self.with_epilogue_over(false, f)
    }

    /// [`Ctx::with_epilogue`] from an op that can write its output over a
    /// dead residual ([`EpilogueArgs::into`]) where `over` says so and the
    /// executor found one.
    pub fn with_epilogue_over<R>(
        &self,
        over: bool,
        f: impl FnOnce(Option<&EpilogueArgs>) -> R,
    ) -> R {
        let Some(e) = self.epilogue else {
            return f(None);
        };
        let into =
            e.into
                .filter(|_| over)
                .and_then(|j| match &self.env[e.group.inputs[j].index()] {
                    Some(Value::Tensor(t)) => Some((j, &t.t)),
                    _ => None,
                });
        let skip = [Some(e.own), into.map(|(j, _)| j)];
        let skip: Vec<usize> = skip.into_iter().flatten().collect();
        with_f32_slices(self.env, &e.group.inputs, &skip, |inputs| match inputs {
            Some(inputs) => f(Some(&EpilogueArgs {
                group: e.group,
                own: e.own,
                inputs,
                applied: &e.applied,
                into,
                overwrote: &e.overwrote,
            })),
            None => f(None),
        })
    }
}
