//! Typed access to a node's arguments and outputs, with errors that name
//! the node and the argument: the one argument reader of the shape rules
//! (`infer`) and the decomposition rules (`decompose`).

use super::{Argument, Dtype, Node, SymRef, ValueId};
use crate::{Error, Result};

/// A node's arguments, read by schema name with errors that name the
/// node and the argument.
pub struct NodeArgs<'n>(pub &'n Node);

impl<'n> NodeArgs<'n> {
    fn err(&self, name: &str, want: &str) -> Error {
        Error::bad_input(format!(
            "node {} ({}): argument '{name}' should be {want}",
            self.0.name, self.0.target
        ))
    }

    pub fn arg(&self, name: &str) -> Argument {
        self.0.arg(name).cloned().unwrap_or(Argument::None)
    }

    pub fn has(&self, name: &str) -> bool {
        !matches!(self.0.arg(name), None | Some(Argument::None))
    }

    pub fn tensor(&self, name: &str) -> Result<ValueId> {
        match self.0.arg(name) {
            Some(Argument::Tensor(v)) | Some(Argument::OptionalTensor(Some(v))) => Ok(*v),
            _ => Err(self.err(name, "a tensor")),
        }
    }

    pub fn opt_tensor(&self, name: &str) -> Result<Option<ValueId>> {
        match self.0.arg(name) {
            None | Some(Argument::None) | Some(Argument::OptionalTensor(None)) => Ok(None),
            _ => self.tensor(name).map(Some),
        }
    }

    pub fn tensors(&self, name: &str) -> Result<Vec<ValueId>> {
        match self.0.arg(name) {
            Some(Argument::Tensors(v)) => Ok(v.clone()),
            Some(Argument::OptionalTensors(v)) => v
                .iter()
                .map(|t| t.ok_or_else(|| self.err(name, "a list of tensors without None")))
                .collect(),
            _ => Err(self.err(name, "a list of tensors")),
        }
    }

    pub fn int(&self, name: &str) -> Result<i64> {
        match self.0.arg(name) {
            Some(Argument::Int(i)) | Some(Argument::SymInt(SymRef::Int(i))) => Ok(*i),
            Some(Argument::Bool(b)) => Ok(*b as i64),
            _ => Err(self.err(name, "a constant int")),
        }
    }

    pub fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        if self.has(name) {
            self.int(name).map(Some)
        } else {
            Ok(None)
        }
    }

    /// An int or symbolic int, as a reference.
    pub fn sym(&self, name: &str) -> Result<SymRef> {
        match self.0.arg(name) {
            Some(Argument::Int(i)) => Ok(SymRef::Int(*i)),
            Some(Argument::SymInt(r)) => Ok(*r),
            _ => Err(self.err(name, "an int")),
        }
    }

    pub fn ints(&self, name: &str) -> Result<Vec<i64>> {
        match self.0.arg(name) {
            Some(Argument::Ints(v)) => Ok(v.clone()),
            Some(Argument::Int(i)) => Ok(vec![*i]),
            Some(Argument::SymInts(v)) => v
                .iter()
                .map(|r| match r {
                    SymRef::Int(i) => Ok(*i),
                    _ => Err(self.err(name, "constant ints")),
                })
                .collect(),
            _ => Err(self.err(name, "a list of ints")),
        }
    }

    pub fn opt_ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        if self.has(name) {
            self.ints(name).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A list of ints or symbolic ints.
    pub fn syms(&self, name: &str) -> Result<Vec<SymRef>> {
        match self.0.arg(name) {
            Some(Argument::Ints(v)) => Ok(v.iter().map(|i| SymRef::Int(*i)).collect()),
            Some(Argument::SymInts(v)) => Ok(v.clone()),
            Some(Argument::Int(i)) => Ok(vec![SymRef::Int(*i)]),
            Some(Argument::SymInt(r)) => Ok(vec![*r]),
            _ => Err(self.err(name, "a list of ints")),
        }
    }

    pub fn float(&self, name: &str) -> Result<f64> {
        match self.0.arg(name) {
            Some(Argument::Float(f)) | Some(Argument::SymFloat(SymRef::Float(f))) => Ok(*f),
            Some(Argument::Int(i)) | Some(Argument::SymInt(SymRef::Int(i))) => Ok(*i as f64),
            Some(Argument::Bool(b)) => Ok(*b as i64 as f64),
            _ => Err(self.err(name, "a constant number")),
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
        match self.0.arg(name) {
            Some(Argument::Bool(b)) | Some(Argument::SymBool(SymRef::Bool(b))) => Ok(*b),
            Some(Argument::Int(i)) => Ok(*i != 0),
            None | Some(Argument::None) => Ok(false),
            _ => Err(self.err(name, "a constant bool")),
        }
    }

    pub fn string(&self, name: &str) -> Result<String> {
        match self.0.arg(name) {
            Some(Argument::String(s)) => Ok(s.clone()),
            _ => Err(self.err(name, "a string")),
        }
    }

    pub fn opt_string(&self, name: &str) -> Result<Option<String>> {
        if self.has(name) {
            self.string(name).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn dtype(&self, name: &str) -> Option<Dtype> {
        match self.0.arg(name) {
            Some(Argument::ScalarType(d)) => Some(*d),
            _ => None,
        }
    }

    /// Every tensor value the node defines, lists flattened, in order.
    pub fn outs(&self) -> Vec<ValueId> {
        node_outputs(self.0)
    }

    pub fn out(&self, i: usize) -> Result<ValueId> {
        self.outs().get(i).copied().ok_or_else(|| {
            Error::bad_input(format!(
                "node {} ({}): output {i} is missing",
                self.0.name, self.0.target
            ))
        })
    }
}

/// Every value a node defines (tensors, lists of tensors, symbolic scalars).
pub fn node_outputs(node: &Node) -> Vec<ValueId> {
    let mut out = Vec::new();
    for o in &node.outputs {
        match o {
            Argument::Tensor(v) => out.push(*v),
            Argument::Tensors(vs) => out.extend(vs.iter().copied()),
            Argument::OptionalTensor(Some(v)) => out.push(*v),
            Argument::OptionalTensors(vs) => out.extend(vs.iter().flatten().copied()),
            Argument::SymInt(SymRef::Value(v))
            | Argument::SymFloat(SymRef::Value(v))
            | Argument::SymBool(SymRef::Value(v)) => out.push(*v),
            _ => {}
        }
    }
    out
}
