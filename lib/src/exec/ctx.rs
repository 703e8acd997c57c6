//! What an op implementation sees ([`Ctx`]): its node, its arguments by
//! schema name (typed accessors whose errors name the argument), the
//! executor and the device it runs on.

use std::collections::BTreeMap;

use candle_core::Device;

use super::{mapped, ops, resolve, sym, Epilogue, Executor, Tensor, Value};
use crate::error::{Error, Result};
use crate::ir::{Argument, Dtype, Graph, Node, ValueId};

/// What an op implementation sees: its node, the values, the executor.
pub struct Ctx<'a> {
    pub exec: &'a Executor<'a>,
    pub graph: &'a Graph,
    pub(super) env: &'a [Option<Value>],
    pub node: &'a Node,
    pub bindings: &'a BTreeMap<String, i64>,
    pub(super) last: &'a [usize],
    /// A fused group to run on the node's output as the op makes it
    /// (only a convolution or a product gets one: [`fuse::Role::Producer`]).
    pub(super) epilogue: Option<&'a Epilogue<'a>>,
    /// Where the node runs: the executor's device, or the host for a
    /// kernel that device lacks.
    pub(super) device: &'a Device,
}

impl Ctx<'_> {
    pub fn device(&self) -> &Device {
        self.device
    }

    /// Refuses an output of `dims` that this node is about to allocate
    /// where it passes the run's memory budget (or the address space):
    /// for sizes an op computes from its arguments at run time, which no
    /// recorded size bounds before the op runs ([`super::budget`]).
    pub fn check_alloc(&self, dims: &[usize], dtype: Dtype) -> Result<()> {
        super::budget::check_alloc(self.exec.max_memory, self.node, dims, dtype)
    }

    /// Whether every reader of this node's output reads it channels-last
    /// where it lies ([`layout::channels_last_readers`]; a subgraph's node: no).
    pub fn channels_last_readers(&self) -> bool {
        self.exec
            .own_index(self.graph, self.node)
            .and_then(|i| self.exec.channels_last_readers.get(i))
            .copied()
            .unwrap_or(false)
    }

    fn arg(&self, name: &str) -> Result<&Argument> {
        self.node
            .arg(name)
            .ok_or_else(|| Error::bad_input(format!("argument '{name}' is missing")))
    }

    pub fn has(&self, name: &str) -> bool {
        !matches!(self.node.arg(name), None | Some(Argument::None))
    }

    /// The i-th input, whatever its name (higher-order ops name none).
    pub fn input(&self, i: usize) -> Result<Value> {
        let a = self
            .node
            .inputs
            .get(i)
            .ok_or_else(|| Error::bad_input(format!("input {i} is missing")))?;
        self.copy_mapped(resolve(&a.arg, self.env)?)
    }

    pub fn input_arg(&self, i: usize) -> Option<&Argument> {
        self.node.inputs.get(i).map(|a| &a.arg)
    }

    /// An argument's value; a mapped weight comes as a copy (a tensor).
    pub fn value(&self, name: &str) -> Result<Value> {
        self.copy_mapped(resolve(self.arg(name)?, self.env)?)
    }

    /// The convolution's input as the plan folds it ([`fuse::Plan::scaled`]):
    /// `(x, s)` where its input `x * s` was not made (the plan in use; with
    /// every value recorded, the product ran and is read as it is).
    pub fn scaled_input(&self) -> Result<Option<(Tensor, Tensor)>> {
        let Some(&(x, s)) = self
            .exec
            .own_index(self.graph, self.node)
            .and_then(|i| self.exec.fusion.scaled.get(&i))
        else {
            return Ok(None);
        };
        if let Some(Argument::Tensor(v)) = self.node.arg("input") {
            if self.env[v.index()].is_some() {
                return Ok(None);
            }
        }
        let tensor = |v: ValueId| -> Result<Tensor> {
            match self.env[v.index()]
                .clone()
                .map(|v| self.copy_mapped(v))
                .transpose()?
            {
                Some(Value::Tensor(t)) => Ok(t),
                _ => Err(Error::internal("a folded scale's operand not set")),
            }
        };
        self.exec
            .scales_folded
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Some((tensor(x)?, tensor(s)?)))
    }

    /// A mapped weight as a tensor (a copy, counted: `Executor::mapped_copies`).
    fn copy_mapped(&self, v: Value) -> Result<Value> {
        if matches!(v, Value::Mapped(_)) {
            self.exec
                .mapped_copies
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        mapped::tensor_of(v, self.device())
    }

    /// A tensor argument that is a mapped weight, as it lies (rows that
    /// read weights in place ask for it first; `ops::READS_MAPPED`).
    pub fn mapped(&self, name: &str) -> Option<mapped::Mapped> {
        match self.node.arg(name)? {
            Argument::Tensor(v) => match &self.env[v.index()] {
                Some(Value::Mapped(m)) => Some((**m).clone()),
                _ => None,
            },
            _ => None,
        }
    }

    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        match self.value(name)? {
            Value::Tensor(t) => Ok(t),
            other => Err(Error::bad_input(format!(
                "argument '{name}': expected a tensor, found {other:?}"
            ))),
        }
    }

    pub fn opt_tensor(&self, name: &str) -> Result<Option<Tensor>> {
        match self.node.arg(name) {
            None | Some(Argument::None) | Some(Argument::OptionalTensor(None)) => Ok(None),
            Some(Argument::OptionalTensor(Some(v))) => match &self.env[v.index()] {
                Some(Value::Tensor(t)) => Ok(Some(t.clone())),
                Some(v @ Value::Mapped(_)) => match self.copy_mapped(v.clone())? {
                    Value::Tensor(t) => Ok(Some(t)),
                    _ => Err(Error::internal("a mapped weight copied to no tensor")),
                },
                _ => Err(Error::internal("optional tensor not set")),
            },
            Some(_) => self.tensor(name).map(Some),
        }
    }

    pub fn tensors(&self, name: &str) -> Result<Vec<Option<Tensor>>> {
        match self.value(name)? {
            Value::List(items) => Ok(items
                .into_iter()
                .map(|v| match v {
                    Value::Tensor(t) => Some(t),
                    _ => None,
                })
                .collect()),
            other => Err(Error::bad_input(format!(
                "argument '{name}': expected tensors, found {other:?}"
            ))),
        }
    }

    pub fn int(&self, name: &str) -> Result<i64> {
        match self.arg(name)? {
            Argument::Int(i) => Ok(*i),
            Argument::SymInt(r) => match sym(r, self.env)? {
                Value::Int(i) => Ok(i),
                other => Err(Error::bad_input(format!(
                    "argument '{name}': {other:?} is not an int"
                ))),
            },
            Argument::Bool(b) => Ok(*b as i64),
            other => Err(Error::bad_input(format!(
                "argument '{name}': expected an int, found {other:?}"
            ))),
        }
    }

    pub fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        if self.has(name) {
            self.int(name).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn ints(&self, name: &str) -> Result<Vec<i64>> {
        match self.arg(name)? {
            Argument::Ints(v) => Ok(v.clone()),
            Argument::Int(i) => Ok(vec![*i]),
            Argument::SymInts(rs) => rs
                .iter()
                .map(|r| match sym(r, self.env)? {
                    Value::Int(i) => Ok(i),
                    other => Err(Error::bad_input(format!(
                        "argument '{name}': {other:?} is not an int"
                    ))),
                })
                .collect(),
            Argument::None => Ok(Vec::new()),
            other => Err(Error::bad_input(format!(
                "argument '{name}': expected ints, found {other:?}"
            ))),
        }
    }

    pub fn float(&self, name: &str) -> Result<f64> {
        match self.value(name)? {
            Value::Float(f) => Ok(f),
            Value::Int(i) => Ok(i as f64),
            Value::Bool(b) => Ok(b as i64 as f64),
            other => Err(Error::bad_input(format!(
                "argument '{name}': expected a number, found {other:?}"
            ))),
        }
    }

    /// A number argument as torch's `Scalar` (an int keeps every bit).
    pub(crate) fn num(&self, name: &str) -> Result<ops::Num> {
        let v = self.value(name)?;
        ops::Num::of(&v).ok_or_else(|| {
            Error::bad_input(format!("argument '{name}': expected a number, found {v:?}"))
        })
    }

    pub(crate) fn opt_num(&self, name: &str) -> Result<Option<ops::Num>> {
        if self.has(name) {
            self.num(name).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn opt_float(&self, name: &str) -> Result<Option<f64>> {
        if self.has(name) {
            self.float(name).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn bool(&self, name: &str) -> Result<bool> {
        match self.value(name)? {
            Value::Bool(b) => Ok(b),
            Value::Int(i) => Ok(i != 0),
            other => Err(Error::bad_input(format!(
                "argument '{name}': expected a bool, found {other:?}"
            ))),
        }
    }

    pub fn opt_bool(&self, name: &str, default: bool) -> Result<bool> {
        if self.has(name) {
            self.bool(name)
        } else {
            Ok(default)
        }
    }

    pub fn string(&self, name: &str) -> Result<Option<String>> {
        match self.node.arg(name) {
            Some(Argument::String(s)) => Ok(Some(s.clone())),
            _ => Ok(None),
        }
    }

    pub fn dtype(&self, name: &str) -> Option<Dtype> {
        match self.node.arg(name) {
            Some(Argument::ScalarType(d)) => Some(*d),
            _ => None,
        }
    }

    /// The dtype the graph records for output `i` of this node (`None`
    /// where it is no tensor or unrecorded).
    pub fn recorded_dtype(&self, i: usize) -> Option<Dtype> {
        match self.node.outputs.get(i)? {
            Argument::Tensor(v) => match &self.graph.values.get(v.index())?.kind {
                crate::ir::ValueKind::Tensor(m) => Some(m.dtype),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether output `i` of this node is used by anything.
    pub fn output_used(&self, i: usize) -> bool {
        let mut refs = Vec::new();
        if let Some(a) = self.node.outputs.get(i) {
            a.value_refs(&mut refs);
        }
        refs.iter().any(|v| self.last[v.index()] != usize::MAX)
    }
}
