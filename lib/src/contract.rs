//! The exported shape contract: before anything runs, the user's inputs are
//! checked against what `torch.export` recorded (names, count, dtypes,
//! ranks, static dims, symbolic dims within their range constraints, one
//! symbol bound to one size across inputs). Running on an input outside the
//! contract would give an answer torch never promised, so it is an error.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::ir::{Argument, Dtype, InputKind, Program, Sym, ValueKind};

/// What the caller offers for one input.
pub struct GivenInput<'a> {
    pub name: &'a str,
    pub dtype: Dtype,
    pub shape: &'a [usize],
}

/// The user tensor inputs: (graph input position, name).
pub fn user_tensor_inputs(program: &Program) -> Vec<(usize, String)> {
    program
        .graph
        .inputs
        .iter()
        .enumerate()
        .filter(|(i, _)| program.input_kinds[*i] == InputKind::UserInput)
        .filter_map(|(i, a)| match a {
            Argument::Tensor(v) => Some((i, program.graph.value(*v).name.clone())),
            _ => None,
        })
        .collect()
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
    let expected = user_tensor_inputs(program);
    let names: Vec<&str> = expected.iter().map(|(_, n)| n.as_str()).collect();
    for g in given {
        if !names.contains(&g.name) {
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
                    Some(sym) => {
                        if let Some(r) = range_of(program, sym) {
                            if r.min.is_some_and(|m| size < m) || r.max.is_some_and(|m| size > m) {
                                return Err(Error::bad_input(format!(
                                    "input {name}: dim {d} is {size}, but {sym} must be in {}",
                                    range_text(r.min, r.max)
                                )));
                            }
                        }
                        match bindings.get(sym) {
                            Some(&prev) if prev != size => {
                                return Err(Error::bad_input(format!(
                                    "input {name}: dim {d} is {size}, but {sym} is {prev} (from {})",
                                    bound_by[sym]
                                )))
                            }
                            _ => {
                                bindings.insert(sym.to_string(), size);
                                bound_by.insert(sym.to_string(), format!("input {name} dim {d}"));
                            }
                        }
                    }
                    None => deferred.push((name.clone(), d, size, expr.clone())),
                },
                _ => {}
            }
        }
    }
    for (name, d, size, expr) in deferred {
        let value = expr.eval_int(&bindings).map_err(|e| {
            Error::bad_input(format!("input {name}: dim {d}: cannot check {expr}: {e}"))
        })?;
        if value != size {
            return Err(Error::bad_input(format!(
                "input {name}: dim {d} is {size}, but it must equal {expr} = {value}"
            )));
        }
        if let Some(r) = range_of(program, &expr.to_string()) {
            if r.min.is_some_and(|m| size < m) || r.max.is_some_and(|m| size > m) {
                return Err(Error::bad_input(format!(
                    "input {name}: dim {d} is {size}, but {expr} must be in {}",
                    range_text(r.min, r.max)
                )));
            }
        }
    }
    Ok(bindings)
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
