//! The exported shape contract: before anything runs, the user's inputs are
//! checked against what `torch.export` recorded (names, count, dtypes,
//! ranks, static dims, symbolic dims within their range constraints, one
//! symbol bound to one size across inputs). Running on an input outside the
//! contract would give an answer torch never promised, so it is an error.
//!
//! A symbolic scalar user input (`forward(self, x, n: int)` exported with
//! `Dim.DYNAMIC` for `n`: a SymInt, or a SymFloat or SymBool) is given as a
//! one-element array; a SymInt binds its symbol as a dim does. A derived
//! dim (`2*s`, `s + 1`) binds its symbol by solving the linear form.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::ir::{Argument, Dtype, Hint, InputKind, Program, Sym, SymExpr, SymRef, ValueKind};
use crate::tensorfile::HostTensor;

/// What the caller offers for one input.
pub struct GivenInput<'a> {
    pub name: &'a str,
    pub dtype: Dtype,
    pub shape: &'a [usize],
    /// The value of a one-element input ([`Scalar::of`]): what a SymInt,
    /// SymFloat or SymBool input is given as.
    pub scalar: Option<Scalar>,
}

/// The value of a one-element array, as a symbolic scalar input takes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    /// The one element of `t` (`None` for more or fewer, or a dtype no
    /// Python scalar has).
    pub fn of(t: &HostTensor) -> Option<Scalar> {
        if t.shape.iter().product::<usize>() != 1 || t.data.len() != t.dtype.size() {
            return None;
        }
        let b = &t.data[..];
        let int = |n: usize| -> Option<[u8; 8]> {
            let mut out = [0u8; 8];
            out[..n].copy_from_slice(b.get(..n)?);
            Some(out)
        };
        Some(match t.dtype {
            Dtype::Bool => Scalar::Bool(b[0] != 0),
            Dtype::Uint8 => Scalar::Int(b[0] as i64),
            Dtype::Int8 => Scalar::Int(b[0] as i8 as i64),
            Dtype::Int16 => Scalar::Int(i16::from_le_bytes([b[0], b[1]]) as i64),
            Dtype::Uint16 => Scalar::Int(u16::from_le_bytes([b[0], b[1]]) as i64),
            Dtype::Int32 => Scalar::Int(i32::from_le_bytes(b.try_into().ok()?) as i64),
            Dtype::Uint32 => Scalar::Int(u32::from_le_bytes(b.try_into().ok()?) as i64),
            Dtype::Int64 => Scalar::Int(i64::from_le_bytes(int(8)?)),
            Dtype::Uint64 => Scalar::Int(i64::try_from(u64::from_le_bytes(int(8)?)).ok()?),
            Dtype::Float32 => Scalar::Float(f32::from_le_bytes(b.try_into().ok()?) as f64),
            Dtype::Float64 => Scalar::Float(f64::from_le_bytes(b.try_into().ok()?)),
            Dtype::Float16 => Scalar::Float(half::f16::from_le_bytes([b[0], b[1]]).to_f64()),
            Dtype::BFloat16 => Scalar::Float(half::bf16::from_le_bytes([b[0], b[1]]).to_f64()),
            _ => return None,
        })
    }

    /// A 0-d array holding the value: int64, float64 or bool, as
    /// `np.asarray(value)` writes a Python scalar.
    pub fn to_host(self) -> HostTensor {
        let (dtype, data) = match self {
            Scalar::Int(i) => (Dtype::Int64, i.to_le_bytes().to_vec()),
            Scalar::Float(f) => (Dtype::Float64, f.to_le_bytes().to_vec()),
            Scalar::Bool(b) => (Dtype::Bool, vec![b as u8]),
        };
        HostTensor {
            dtype,
            shape: vec![],
            data,
        }
    }

    /// A literal as `-i n=5` gives it: an int, a float, or True/False.
    pub fn parse(text: &str) -> Option<Scalar> {
        let t = text.trim();
        match t {
            "True" | "true" => return Some(Scalar::Bool(true)),
            "False" | "false" => return Some(Scalar::Bool(false)),
            _ => {}
        }
        if let Ok(i) = t.parse::<i64>() {
            return Some(Scalar::Int(i));
        }
        let numeric = t
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
        match t.parse::<f64>() {
            Ok(f) if numeric || matches!(t, "inf" | "-inf" | "nan") => Some(Scalar::Float(f)),
            _ => None,
        }
    }
}

/// What kind of symbolic scalar a graph input is (`None` for a tensor).
fn scalar_kind(program: &Program, pos: usize) -> Option<(&'static str, &Sym)> {
    let v = match &program.graph.inputs[pos] {
        Argument::SymInt(SymRef::Value(v))
        | Argument::SymFloat(SymRef::Value(v))
        | Argument::SymBool(SymRef::Value(v)) => *v,
        _ => return None,
    };
    match &program.graph.value(v).kind {
        ValueKind::SymInt(s) => Some(("SymInt", s)),
        ValueKind::SymFloat(s) => Some(("SymFloat", s)),
        ValueKind::SymBool(s) => Some(("SymBool", s)),
        _ => None,
    }
}

/// The user inputs a caller provides: tensors and symbolic scalars (graph
/// input position, name), in graph order.
pub fn user_inputs(program: &Program) -> Vec<(usize, String)> {
    user_inputs_where(program, true)
}

/// The user inputs that are tensors, or with `scalars` symbolic scalars too.
fn user_inputs_where(program: &Program, scalars: bool) -> Vec<(usize, String)> {
    program
        .graph
        .inputs
        .iter()
        .enumerate()
        .filter(|(i, _)| program.input_kinds[*i] == InputKind::UserInput)
        .filter_map(|(i, a)| match a {
            Argument::Tensor(v) => Some((i, program.graph.value(*v).name.clone())),
            Argument::SymInt(SymRef::Value(v))
            | Argument::SymFloat(SymRef::Value(v))
            | Argument::SymBool(SymRef::Value(v))
                if scalars =>
            {
                Some((i, program.graph.value(*v).name.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The example value recorded at export of a symbolic scalar user input
/// (its hint; else the least value its range allows), for `--random`.
pub fn example_scalar(program: &Program, pos: usize) -> Option<Scalar> {
    let (kind, sym) = scalar_kind(program, pos)?;
    Some(match sym {
        Sym::Int(i) => Scalar::Int(*i),
        Sym::Float(f) => Scalar::Float(*f),
        Sym::Bool(b) => Scalar::Bool(*b),
        Sym::Expr { hint: Some(h), .. } => match h {
            Hint::Int(i) => Scalar::Int(*i),
            Hint::Float(f) => Scalar::Float(*f),
            Hint::Bool(b) => Scalar::Bool(*b),
        },
        Sym::Expr { expr, hint: None } => match kind {
            "SymInt" => {
                let r = expr.as_symbol().and_then(|s| range_of(program, s));
                Scalar::Int(r.and_then(|r| r.min).unwrap_or(2).max(0))
            }
            "SymFloat" => Scalar::Float(1.0),
            _ => Scalar::Bool(true),
        },
    })
}

/// The user tensor inputs: (graph input position, name).
pub fn user_tensor_inputs(program: &Program) -> Vec<(usize, String)> {
    user_inputs_where(program, false)
}

fn range_of<'a>(program: &'a Program, key: &str) -> Option<&'a crate::ir::RangeConstraint> {
    program.range_constraints.iter().find(|r| r.symbol == key)
}

fn range_text(min: Option<i64>, max: Option<i64>) -> String {
    format!(
        "[{}, {}]",
        min.map(|v| v.to_string()).unwrap_or("-inf".into()),
        max.map(|v| v.to_string()).unwrap_or("inf".into())
    )
}

/// Checks the inputs and returns the size bound to each symbol.
pub fn check_inputs(program: &Program, given: &[GivenInput]) -> Result<BTreeMap<String, i64>> {
    let expected = user_inputs(program);
    let names: Vec<&str> = expected.iter().map(|(_, n)| n.as_str()).collect();
    for g in given {
        if !names.contains(&g.name) {
            if let Some(c) = constant_scalar(program, g.name) {
                // A scalar argument the export made static: its value again,
                // or refused (the graph computes with that value only).
                let same = match (c, g.scalar) {
                    (Scalar::Float(a), Some(Scalar::Int(b))) => a == b as f64,
                    (a, Some(b)) => a == b,
                    (_, None) => false,
                };
                if same {
                    continue;
                }
                let given = match g.scalar {
                    Some(s) => scalar_text(s),
                    None => format!("an array of shape {:?}", g.shape),
                };
                return Err(Error::bad_input(format!(
                    "input {} is {given}, but the model was exported with {} = {} (static)",
                    g.name,
                    g.name,
                    scalar_text(c)
                )));
            }
            return Err(Error::bad_input(format!(
                "input '{}' is not an input of the model (its inputs: {})",
                g.name,
                names.join(", ")
            )));
        }
    }
    let mut bindings: BTreeMap<String, i64> = BTreeMap::new();
    let mut bound_by: BTreeMap<String, String> = BTreeMap::new();
    let mut deferred = Vec::new();
    for (pos, name) in &expected {
        let g = given.iter().find(|g| g.name == name).ok_or_else(|| {
            Error::bad_input(format!(
                "input '{name}' is missing (the model takes {})",
                names.join(", ")
            ))
        })?;
        if let Some((kind, sym)) = scalar_kind(program, *pos) {
            let value = given_scalar(name, kind, g)?;
            match (sym, value) {
                (Sym::Expr { expr, .. }, Scalar::Int(i)) => match expr.as_symbol() {
                    Some(s) => bind(program, &mut bindings, &mut bound_by, s, i, || {
                        format!("input {name} is {i}")
                    })?,
                    None => deferred.push((name.clone(), None, i, expr.clone())),
                },
                (Sym::Int(c), Scalar::Int(i)) if *c != i => {
                    return Err(Error::bad_input(format!(
                        "input {name} is {i}, but the model was exported with {name} = {c} (static)"
                    )))
                }
                (Sym::Float(c), Scalar::Float(x)) if *c != x => {
                    return Err(Error::bad_input(format!(
                        "input {name} is {x}, but the model was exported with {name} = {c} (static)"
                    )))
                }
                (Sym::Bool(c), Scalar::Bool(b)) if *c != b => {
                    return Err(Error::bad_input(format!(
                        "input {name} is {b}, but the model was exported with {name} = {c} (static)"
                    )))
                }
                _ => {}
            }
            continue;
        }
        let Argument::Tensor(v) = &program.graph.inputs[*pos] else {
            continue;
        };
        let ValueKind::Tensor(meta) = &program.graph.value(*v).kind else {
            continue;
        };
        if g.dtype != meta.dtype {
            return Err(Error::bad_input(format!(
                "input {name}: dtype is {}, the model was exported with {}",
                g.dtype.torch_name(),
                meta.dtype.torch_name()
            )));
        }
        if g.shape.len() != meta.sizes.len() {
            return Err(Error::bad_input(format!(
                "input {name}: rank is {} (shape {:?}), the model expects rank {}",
                g.shape.len(),
                g.shape,
                meta.sizes.len()
            )));
        }
        for (d, (size, dim)) in g.shape.iter().zip(&meta.sizes).enumerate() {
            let size = *size as i64;
            match dim {
                Sym::Int(n) if *n != size => {
                    return Err(Error::bad_input(format!(
                        "input {name}: dim {d} is {size}, but the model was exported with {n} there (static)"
                    )))
                }
                Sym::Expr { expr, .. } => match expr.as_symbol() {
                    Some(sym) => bind(program, &mut bindings, &mut bound_by, sym, size, || {
                        format!("input {name}: dim {d} is {size}")
                    })?,
                    None => deferred.push((name.clone(), Some(d), size, expr.clone())),
                },
                _ => {}
            }
        }
    }
    solve_deferred(program, deferred, &mut bindings, &mut bound_by)?;
    Ok(bindings)
}

/// Binds `sym` to `value` after checking its range and that no other
/// input bound it to another value; `what` says where the value came from
/// (`input x: dim 2 is 7`).
fn bind(
    program: &Program,
    bindings: &mut BTreeMap<String, i64>,
    bound_by: &mut BTreeMap<String, String>,
    sym: &str,
    value: i64,
    what: impl Fn() -> String,
) -> Result<()> {
    if let Some(r) = range_of(program, sym) {
        if r.min.is_some_and(|m| value < m) || r.max.is_some_and(|m| value > m) {
            return Err(Error::bad_input(format!(
                "{}, but {sym} must be in {}",
                what(),
                range_text(r.min, r.max)
            )));
        }
    }
    match bindings.get(sym) {
        Some(&prev) if prev != value => Err(Error::bad_input(format!(
            "{}, but {sym} is {prev} (from {})",
            what(),
            bound_by[sym]
        ))),
        Some(_) => Ok(()),
        None => {
            bindings.insert(sym.to_string(), value);
            bound_by.insert(sym.to_string(), what());
            Ok(())
        }
    }
}

/// A symbolic scalar input's value, of the kind it must be.
fn given_scalar(name: &str, kind: &str, g: &GivenInput) -> Result<Scalar> {
    let want = match kind {
        "SymInt" => "an int",
        "SymFloat" => "a float",
        _ => "a bool",
    };
    let value = g.scalar.ok_or_else(|| {
        Error::bad_input(format!(
            "input {name} is {want} ({kind}): give one value (a 0-d array, or -i {name}=VALUE), not an array of shape {:?}",
            g.shape
        ))
    })?;
    match (kind, value) {
        ("SymInt", Scalar::Int(_)) | ("SymBool", Scalar::Bool(_)) => Ok(value),
        ("SymFloat", Scalar::Float(_)) => Ok(value),
        ("SymFloat", Scalar::Int(i)) => Ok(Scalar::Float(i as f64)),
        _ => Err(Error::bad_input(format!(
            "input {name} is {want} ({kind}), but a {} value was given",
            g.dtype.torch_name()
        ))),
    }
}

/// The dims (and scalar inputs) whose recorded size is an expression:
/// evaluated once their symbols are bound, or, where the expression is
/// `a*s + b` in one symbol still unknown (a derived dim: `2*s`, `s + 1`),
/// solved for it: the size must be of that form and the symbol in range.
#[allow(clippy::type_complexity)]
fn solve_deferred(
    program: &Program,
    mut pending: Vec<(String, Option<usize>, i64, SymExpr)>,
    bindings: &mut BTreeMap<String, i64>,
    bound_by: &mut BTreeMap<String, String>,
) -> Result<()> {
    let place = |name: &str, d: Option<usize>| match d {
        Some(d) => format!("input {name}: dim {d}"),
        None => format!("input {name}"),
    };
    while !pending.is_empty() {
        let mut progressed = false;
        let mut still = Vec::new();
        for (name, d, size, expr) in pending {
            let at = place(&name, d);
            if let Ok(value) = expr.eval_int(bindings) {
                if value != size {
                    return Err(Error::bad_input(format!(
                        "{at} is {size}, but it must equal {expr} = {value}"
                    )));
                }
                if let Some(r) = range_of(program, &expr.to_string()) {
                    if r.min.is_some_and(|m| size < m) || r.max.is_some_and(|m| size > m) {
                        return Err(Error::bad_input(format!(
                            "{at} is {size}, but {expr} must be in {}",
                            range_text(r.min, r.max)
                        )));
                    }
                }
                progressed = true;
                continue;
            }
            match expr.linear(bindings) {
                Ok((a, b, Some(sym))) if a != 0 => {
                    let rest = size - b;
                    if rest % a != 0 {
                        return Err(Error::bad_input(format!(
                            "{at} is {size}, which is not of the form {expr} (for an integer {sym})"
                        )));
                    }
                    let value = rest / a;
                    bind(program, bindings, bound_by, &sym, value, || {
                        format!("{at} is {size}, so {sym} = {value} (from {expr})")
                    })?;
                    progressed = true;
                    still.push((name, d, size, expr));
                }
                _ => still.push((name, d, size, expr)),
            }
        }
        if !progressed {
            let (name, d, _, expr) = &still[0];
            let why = match (expr.eval_int(bindings), expr.linear(bindings)) {
                (Err(e), Err(l)) => format!("{e}, and {l}"),
                (Err(e), _) => e,
                (Ok(_), _) => "cannot be solved".into(),
            };
            return Err(Error::bad_input(format!(
                "{}: cannot check {expr}: {why}",
                place(name, *d)
            )));
        }
        pending = still;
    }
    Ok(())
}

/// Example shapes recorded at export (the hints), for `--random` inputs.
pub fn example_shape(program: &Program, pos: usize) -> Option<(Dtype, Vec<usize>)> {
    let Argument::Tensor(v) = &program.graph.inputs[pos] else {
        return None;
    };
    let ValueKind::Tensor(meta) = &program.graph.value(*v).kind else {
        return None;
    };
    let dims = meta
        .sizes
        .iter()
        .map(|s| match s {
            Sym::Int(n) => Some(*n as usize),
            Sym::Expr {
                hint: Some(crate::ir::Hint::Int(h)),
                ..
            } => Some(*h as usize),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some((meta.dtype, dims))
}

/// The value of a constant input named `name` (a scalar argument the
/// export specialised), if the program has one.
fn constant_scalar(program: &Program, name: &str) -> Option<Scalar> {
    let pos = program
        .input_kinds
        .iter()
        .position(|k| matches!(k, InputKind::ConstantInput(n) if n == name))?;
    match program.graph.inputs.get(pos)? {
        Argument::Int(i) => Some(Scalar::Int(*i)),
        Argument::Float(f) => Some(Scalar::Float(*f)),
        Argument::Bool(b) => Some(Scalar::Bool(*b)),
        _ => None,
    }
}

/// A scalar as Python writes it.
fn scalar_text(s: Scalar) -> String {
    match s {
        Scalar::Int(i) => i.to_string(),
        Scalar::Float(f) => format!("{f:?}"),
        Scalar::Bool(true) => "True".into(),
        Scalar::Bool(false) => "False".into(),
    }
}
