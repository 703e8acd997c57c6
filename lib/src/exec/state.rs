//! Program state: the buffers, parameters and inputs a program updates in
//! place (a KV cache, running statistics, a step counter). The fallback
//! functionalises such a program at load, so each update is a mutation
//! output; the executor hands those back after a run
//! ([`Executor::last_state`]) and can start a run from given state instead
//! of the weights ([`Executor::set_state`], [`Executor::carry_state`]):
//! `ir-run --state FILE` carries it from one call to the next, so a decode
//! loop runs from the shell.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::{Executor, Tensor, Value};
use crate::ir::{InputKind, Sym};
use crate::tensorfile::HostTensor;
use crate::{Error, Result};

/// One executor's state between runs.
#[derive(Default)]
pub(crate) struct StateSlots {
    /// Input position -> the value a run uses instead of its weight.
    pub overrides: Mutex<BTreeMap<usize, Value>>,
    /// (state name, value) as the last run left them, in output order.
    pub last: Mutex<Vec<(String, Value)>>,
}

impl Executor<'_> {
    /// The names of the program's state, in output order: each mutated
    /// buffer or parameter by its state-dict name, each mutated user input
    /// by its input name.
    pub fn state_names(&self) -> Vec<String> {
        self.program
            .output_kinds
            .iter()
            .filter_map(|k| k.state_name().map(str::to_string))
            .collect()
    }

    /// Whether the state named `name` is a user input (given with the
    /// inputs, not set here).
    pub fn state_is_user_input(&self, name: &str) -> bool {
        self.program
            .output_kinds
            .iter()
            .any(|k| matches!(k, crate::ir::OutputKind::UserInputMutation(n) if n == name))
    }

    /// The graph input a buffer or parameter of that name is bound to.
    fn state_input(&self, name: &str) -> Option<usize> {
        self.program.input_kinds.iter().position(|k| {
            matches!(k, InputKind::Buffer(n) | InputKind::NonPersistentBuffer(n) | InputKind::Parameter(n) | InputKind::TensorConstant(n) if n == name)
        })
    }

    /// Runs from now on start from this state instead of the weights: each
    /// entry names a buffer or parameter the program updates, with its
    /// declared dtype and shape.
    pub fn set_state(&self, entries: &[(String, HostTensor)]) -> Result<()> {
        let names = self.state_names();
        let mut set = BTreeMap::new();
        for (name, host) in entries {
            if !names.contains(name) {
                return Err(Error::bad_input(format!(
                    "state '{name}': the program updates no buffer of that name (its state: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
            if self.state_is_user_input(name) {
                // given with the inputs (ir-run merges it there)
                continue;
            }
            let pos = self.state_input(name).ok_or_else(|| {
                Error::bad_input(format!("state '{name}': no graph input is bound to it"))
            })?;
            let w = self.program.weight_for_input(pos).ok_or_else(|| {
                Error::bad_input(format!(
                    "state '{name}': the program has no weight of that name"
                ))
            })?;
            let want: Option<Vec<i64>> = w.meta.sizes.iter().map(Sym::as_int).collect();
            let shape: Vec<i64> = host.shape.iter().map(|&d| d as i64).collect();
            if host.dtype != w.meta.dtype || want.as_ref() != Some(&shape) {
                return Err(Error::bad_input(format!(
                    "state '{name}': {}{:?} given, the program's buffer is {}{:?}",
                    host.dtype.short_name(),
                    host.shape,
                    w.meta.dtype.short_name(),
                    want.unwrap_or_default()
                )));
            }
            set.insert(pos, Value::Tensor(Tensor::from_host(host, &self.device)?));
        }
        if let Ok(mut o) = self.state.overrides.lock() {
            o.extend(set);
        }
        Ok(())
    }

    /// The state the last run computed, on the host, in output order
    /// (empty before a run, or for a program without state).
    pub fn last_state(&self) -> Result<Vec<(String, HostTensor)>> {
        let last = self
            .state
            .last
            .lock()
            .map_err(|_| Error::internal("state lock poisoned"))?;
        last.iter()
            .map(|(n, v)| match v {
                Value::Tensor(t) => Ok((n.clone(), t.to_host()?)),
                other => Err(Error::internal(format!("state '{n}' is {other:?}"))),
            })
            .collect()
    }

    /// The next run starts from the state the last one left (a decode
    /// loop: `ir-bench --carry-state`). Mutated user inputs are the
    /// caller's to pass again.
    pub fn carry_state(&self) -> Result<()> {
        let last = match self.state.last.lock() {
            Ok(l) => l.clone(),
            Err(_) => return Err(Error::internal("state lock poisoned")),
        };
        let mut o = self
            .state
            .overrides
            .lock()
            .map_err(|_| Error::internal("state lock poisoned"))?;
        for (name, v) in last {
            if let Some(pos) = self.state_input(&name) {
                o.insert(pos, v);
            }
        }
        Ok(())
    }

    /// The value a run uses for graph input `pos`: given state, when set.
    pub(crate) fn state_override(&self, pos: usize) -> Option<Value> {
        self.state.overrides.lock().ok()?.get(&pos).cloned()
    }

    /// Keeps what a run computed for the state.
    pub(crate) fn keep_state(&self, computed: Vec<(String, Value)>) {
        if let Ok(mut l) = self.state.last.lock() {
            *l = computed;
        }
    }
}
