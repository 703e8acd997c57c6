//! `ts2ir`'s library: a TorchScript archive (`torch.jit.save`: `code/`,
//! `data.pkl`, `constants.pkl`, storages) read into the IR without Python.
//!
//! - `lexer.rs`, `parser.rs`: the Python subset of `code/*.py`, with
//!   indentation, into statements and expressions that keep their lines.
//! - `tree.rs`: the module tree of `data.pkl` (objects of `__torch__`
//!   classes, read as data by [`crate::import::pickle`]), the classes of
//!   `code/`, the constants, and the weights they hold.
//! - `lower.rs`: an evaluator over `forward` that inlines methods and
//!   submodule calls, runs Python-level values (ints, lists, tuples, dicts,
//!   `range`) at import time, unrolls loops whose trip count it knows, and
//!   emits every tensor op as a node.
//! - `builtins.rs`: `range`, `len`, `ops.prim.*`, the ATen builtins on
//!   Python values, and expression operators.
//! - `control.rs`: an `if` on tensor data as a `cond` of two subgraphs, a
//!   `while` on tensor data as a `while_loop`.
//! - `symbolic.rs`: `int` / `float` / `bool` arguments as SymInt / SymFloat /
//!   SymBool graph inputs, sizes of symbolic dims, and the Python arithmetic
//!   on them as `_operator.*` nodes; where import needs such a value, its
//!   example value, the inputs it depends on made static.
//! - `ops.rs`: a call of `torch.*` / `ops.aten.*`: its overload resolved
//!   against `lib/data/op_schemas.txt`, its arguments converted to the
//!   schema's kinds, its outputs' sizes and dtypes from the shape rules the
//!   caller passes in ([`ShapeFn`]: `infer` sits above `import`).
//! - `views.rs`: an in-place write through a view (or into a tensor with
//!   views) as torch sees it: the bases get the view scattered back, the
//!   other views are made again from them.
//!
//! Nothing in the archive runs: pickles are interpreted as data, code is
//! parsed and evaluated over abstract values. What cannot be lowered is
//! refused with the construct and its `code/` file and line.

mod builtins;
mod control;
mod lexer;
mod lower;
mod ops;
mod parser;
mod symbolic;
mod tree;
mod views;

use std::path::Path;

use crate::error::{Error, Result};
use crate::ir::{Dtype, Graph, Node, Program};
use crate::tensorfile::HostTensor;
use crate::zip::Archive;

/// What a shape rule infers of a node's outputs: per output, its dims
/// (`None` for the list: not inferred; `None` for a dim: symbolic) and
/// dtype. `None` when the op has no rule.
pub type ShapeOut = (Option<Vec<Option<i64>>>, Option<Dtype>);
pub type ShapeFn<'a> = &'a dyn Fn(&Graph, &Node) -> Option<Result<Vec<ShapeOut>>>;

/// How to read an archive.
#[derive(Default)]
pub struct TsOptions {
    /// Example values of `forward`'s arguments, by name: tensors bind their
    /// input's dtype and sizes; one-element arrays are the example values
    /// of `int`, `float` and `bool` arguments (graph inputs of their own).
    /// An `Optional` argument the file leaves out is `None`.
    pub example_inputs: Option<Vec<(String, HostTensor)>>,
    /// Every tensor dim of the examples (but 0 and 1) a fresh symbol, the
    /// example's size its hint, rather than static.
    pub dynamic: bool,
    /// The method to read.
    pub method: String,
}

/// Reads a TorchScript archive from a file.
pub fn read_torchscript(path: &Path, opts: &TsOptions, shapes: ShapeFn) -> Result<Program> {
    let archive = Archive::open(path)?;
    read_archive(&archive, opts, shapes)
}

/// Reads an archive already opened (bytes from a pipe).
pub fn read_archive(archive: &Archive, opts: &TsOptions, shapes: ShapeFn) -> Result<Program> {
    let tree = tree::Tree::read(archive)?;
    let method = if opts.method.is_empty() {
        "forward"
    } else {
        opts.method.as_str()
    };
    lower::lower(&tree, method, opts, shapes)
}

/// Tokenizes and parses one `code/` file (what `ts2ir` reads of it),
/// returning how many top-level statements it has.
pub fn parse_source(file: &str, text: &str) -> Result<usize> {
    let tokens = lexer::tokenize(file, text)?;
    Ok(parser::parse(file, tokens)?.len())
}

/// A refusal that points into the archive's source.
pub(crate) fn refuse_at(file: &str, line: u32, msg: impl std::fmt::Display) -> Error {
    Error::unsupported(format!("{file}:{line}: {msg}"))
}
