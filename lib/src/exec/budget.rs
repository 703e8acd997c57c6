//! The run-time limits of a run: a memory budget for every value whose
//! size is known only at run time, and a bound on a `while_loop`'s
//! iterations (`ir-run` and `ir-bench`: `--max-memory`,
//! `--max-iterations`).
//!
//! Sizes that are constants were held to the budget when the program was
//! loaded (`infer::Limits::max_bytes`). The others are symbolic: dims of
//! the inputs (`s0`), bound by the input contract, and unbacked symbols
//! (`u0`: an `.item()`, a `nonzero`'s count), learned as the run makes
//! them, from the value of a SymInt a node returns or from the dims of a
//! tensor whose recorded size is that symbol alone. Before each node
//! runs, its recorded output sizes are evaluated with what is known so
//! far, and a value over the budget is refused (exit 3) before it is
//! made: the node, the size, and the flag that raises the budget. Views
//! allocate nothing and are not held to it.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::ir::{Argument, Graph, Node, Sym, SymRef, ValueKind};

use super::Value;

/// Symbols known in one graph's run: the input contract's bindings, and
/// the unbacked ones learned so far.
pub(crate) struct Known(BTreeMap<String, i64>);

impl Known {
    pub(crate) fn new(bindings: &BTreeMap<String, i64>) -> Known {
        Known(bindings.clone())
    }

    /// The value of a recorded size, when it evaluates.
    fn eval(&self, s: &Sym) -> Option<i64> {
        match s {
            Sym::Int(n) => Some(*n),
            Sym::Expr { expr, .. } => expr.eval_int(&self.0).ok(),
            _ => None,
        }
    }

    /// Learns the unbacked symbols that `args` (a graph's inputs, a node's
    /// outputs) give values to, from the values just bound in `env`.
    pub(crate) fn learn(&mut self, graph: &Graph, args: &[Argument], env: &[Option<Value>]) {
        for a in args {
            match a {
                Argument::Tensor(v) => self.learn_tensor(graph, v.index(), env),
                Argument::Tensors(vs) => {
                    for v in vs {
                        self.learn_tensor(graph, v.index(), env);
                    }
                }
                Argument::SymInt(SymRef::Value(v)) => {
                    let (
                        Some(ValueKind::SymInt(Sym::Expr { expr, .. })),
                        Some(Some(Value::Int(n))),
                    ) = (
                        graph.values.get(v.index()).map(|x| &x.kind),
                        env.get(v.index()),
                    )
                    else {
                        continue;
                    };
                    if let Some(name) = expr.as_symbol() {
                        self.0.entry(name.to_string()).or_insert(*n);
                    }
                }
                _ => {}
            }
        }
    }

    fn learn_tensor(&mut self, graph: &Graph, v: usize, env: &[Option<Value>]) {
        let (Some(ValueKind::Tensor(m)), Some(Some(Value::Tensor(t)))) =
            (graph.values.get(v).map(|x| &x.kind), env.get(v))
        else {
            return;
        };
        // (a complex tensor's logical shape: its real pairs' less the pair dim)
        if m.sizes.iter().all(|s| matches!(s, Sym::Int(_))) || m.sizes.len() != t.shape().len() {
            return;
        }
        for (s, &d) in m.sizes.iter().zip(t.shape()) {
            if let Sym::Expr { expr, .. } = s {
                if let Some(name) = expr.as_symbol() {
                    self.0.entry(name.to_string()).or_insert(d as i64);
                }
            }
        }
    }
}

/// The memory available now: `MemAvailable` of /proc/meminfo, or less
/// where this process is held to less: the room left under its cgroup's
/// memory limit (`memory.max`, cgroup v2) and under its address-space
/// limit (`RLIMIT_AS`, `ulimit -v`, `prlimit --as`), whose allocations
/// past it would fail (an abort, not an error).
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut room = kib * 1024;
    // cgroup v2: the process's group, its limit and what it uses
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok();
    if let Some(dir) = cgroup
        .as_deref()
        .and_then(|c| c.lines().find_map(|l| l.strip_prefix("0::")))
    {
        let at = |f: &str| {
            std::fs::read_to_string(format!("/sys/fs/cgroup{}/{f}", dir.trim_end_matches('/')))
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
        };
        if let (Some(max), Some(current)) = (at("memory.max"), at("memory.current")) {
            room = room.min(max.saturating_sub(current));
        }
    }
    // SAFETY: getrlimit into a zeroed rlimit.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0
        && lim.rlim_cur != libc::RLIM_INFINITY
    {
        let used = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|t| {
                let line = t.lines().find(|l| l.starts_with("VmSize:"))?.to_string();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .map_or(0, |kib| kib * 1024);
        room = room.min((lim.rlim_cur as u64).saturating_sub(used));
    }
    Some(room)
}

/// Holds the tensors `node` just made to the sizes the program records
/// for them (where they evaluate with what is `known`): a program whose
/// recorded sizes lie (an op without a shape rule, a hand-edited stream)
/// is refused at the node where they first part, so that the budget,
/// which reads recorded sizes, is never misled by more than one node.
pub(crate) fn check_outputs(
    graph: &Graph,
    node: &Node,
    env: &[Option<Value>],
    known: &Known,
) -> Result<()> {
    let mut outs = Vec::new();
    for a in &node.outputs {
        match a {
            Argument::Tensor(v) => outs.push(*v),
            Argument::Tensors(vs) => outs.extend(vs.iter().copied()),
            _ => {}
        }
    }
    for v in outs {
        let (Some(ValueKind::Tensor(m)), Some(Some(Value::Tensor(t)))) = (
            graph.values.get(v.index()).map(|x| &x.kind),
            env.get(v.index()),
        ) else {
            continue;
        };
        let dims = t.shape();
        let differs = m.sizes.len() != dims.len()
            || m.sizes
                .iter()
                .zip(dims)
                .any(|(s, &d)| known.eval(s).is_some_and(|n| n != d as i64));
        if differs {
            let recorded: Vec<String> = m
                .sizes
                .iter()
                .map(|s| known.eval(s).map_or("?".into(), |n| n.to_string()))
                .collect();
            return Err(Error::bad_input(format!(
                "node '{}' ({}): its output {} is {:?} at run time, but the program records [{}]",
                node.name,
                node.target,
                graph.values[v.index()].name,
                dims,
                recorded.join(", ")
            )));
        }
    }
    Ok(())
}

/// Bytes as people read them.
fn human(b: u128) -> String {
    crate::infer::human_bytes(b.min(u64::MAX as u128) as u64)
}

/// Refuses `node` of `graph` when a tensor it returns, as its recorded
/// sizes evaluate with what is `known`, needs more than `budget` bytes.
pub(crate) fn check_node(budget: u64, graph: &Graph, node: &Node, known: &Known) -> Result<()> {
    let mut view: Option<bool> = None;
    let mut outs = Vec::new();
    for a in &node.outputs {
        match a {
            Argument::Tensor(v) => outs.push(*v),
            Argument::Tensors(vs) => outs.extend(vs.iter().copied()),
            _ => {}
        }
    }
    for v in outs {
        let Some(ValueKind::Tensor(m)) = graph.values.get(v.index()).map(|x| &x.kind) else {
            continue;
        };
        // constant sizes were held to the budget at load
        if m.sizes.iter().all(|s| matches!(s, Sym::Int(_))) {
            continue;
        }
        let mut dims = Vec::with_capacity(m.sizes.len());
        for s in &m.sizes {
            match known.eval(s) {
                Some(n) if n >= 0 => dims.push(n as u128),
                _ => {
                    dims.clear();
                    break;
                }
            }
        }
        if dims.len() != m.sizes.len() {
            continue; // not known before the op runs
        }
        let bytes = dims
            .iter()
            .fold(1u128, |acc, &d| acc.saturating_mul(d))
            .saturating_mul(m.dtype.size() as u128);
        if bytes <= budget as u128 {
            continue;
        }
        if *view.get_or_insert_with(|| crate::schema::is_view(&node.target)) {
            return Ok(()); // a view allocates nothing
        }
        let shown: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        return Err(Error::bad_input(format!(
            "node '{}' ({}): its output {} is {}[{}] at run time, {}: more than the run's memory budget of {} (raise it with --max-memory SIZE)",
            node.name,
            node.target,
            graph.values[v.index()].name,
            m.dtype.short_name(),
            shown.join(", "),
            human(bytes),
            human(budget as u128)
        )));
    }
    Ok(())
}

/// Refuses an output of `dims` x `dtype` that `node` is about to
/// allocate where it needs more than `budget` bytes (more than the address
/// space without one): [`super::Ctx::check_alloc`].
pub(crate) fn check_alloc(
    budget: Option<u64>,
    node: &Node,
    dims: &[usize],
    dtype: crate::ir::Dtype,
) -> Result<()> {
    let bytes = dims
        .iter()
        .fold(1u128, |a, &d| a.saturating_mul(d as u128))
        .saturating_mul(dtype.size() as u128);
    let limit = budget.map_or(isize::MAX as u128, |b| b as u128);
    if bytes <= limit {
        return Ok(());
    }
    let shown: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    Err(Error::bad_input(format!(
        "node '{}' ({}): its output is {}[{}] at run time, {}: more than the run's memory budget of {} (raise it with --max-memory SIZE)",
        node.name,
        node.target,
        dtype.short_name(),
        shown.join(", "),
        human(bytes),
        human(limit)
    )))
}

/// Refuses a `while_loop` carry that needs more than `budget` bytes in
/// all (checked after every iteration, before the next).
pub(crate) fn check_carry(
    budget: u64,
    node: &Node,
    carried: &[Value],
    iteration: u64,
) -> Result<()> {
    let bytes: u128 = carried
        .iter()
        .map(|v| match v {
            Value::Tensor(t) => {
                t.shape()
                    .iter()
                    .fold(1u128, |a, &d| a.saturating_mul(d as u128))
                    * t.dtype.size() as u128
            }
            _ => 0,
        })
        .sum();
    if bytes > budget as u128 {
        return Err(Error::bad_input(format!(
            "node '{}' ({}): its carried values need {} after iteration {iteration}: more than the run's memory budget of {} (raise it with --max-memory SIZE)",
            node.name,
            node.target,
            human(bytes),
            human(budget as u128)
        )));
    }
    Ok(())
}
