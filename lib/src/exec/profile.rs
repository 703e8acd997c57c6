//! `ir-bench --profile`: where a run's time goes, per node and per op
//! kind, from the executor's node timings ([`super::Executor::start_profile`]).
//!
//! Times are per run (the sum over the runs profiled, divided by their
//! number); shares are of the mean run time measured around whole runs, so
//! the nodes' shares leave the rest to what is not a node (binding inputs,
//! copying outputs out).

use super::NodeTime;

/// One op kind's time: how many nodes of it, their time per run, and their
/// share of the run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OpTime {
    pub op: String,
    pub nodes: usize,
    pub seconds: f64,
    pub share: f64,
}

/// One node's time per run and share of the run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeShare {
    pub node: String,
    pub op: String,
    pub seconds: f64,
    pub share: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Profile {
    /// Runs profiled.
    pub runs: usize,
    /// Mean time of a whole run.
    pub run_seconds: f64,
    /// The nodes' time per run, summed.
    pub node_seconds: f64,
    /// Op kinds, most time first.
    pub ops: Vec<OpTime>,
    /// Nodes, most time first.
    pub nodes: Vec<NodeShare>,
}

impl Profile {
    pub fn of(times: &[NodeTime], runs: usize, run_seconds: f64) -> Profile {
        let runs_f = runs.max(1) as f64;
        let share = |s: f64| {
            if run_seconds > 0.0 {
                s / run_seconds
            } else {
                0.0
            }
        };
        let mut nodes: Vec<NodeShare> = times
            .iter()
            .filter(|t| t.runs > 0)
            .map(|t| {
                let seconds = t.seconds / runs_f;
                NodeShare {
                    node: t.node.clone(),
                    op: t.op.clone(),
                    seconds,
                    share: share(seconds),
                }
            })
            .collect();
        let mut by_op: std::collections::BTreeMap<&str, (usize, f64)> = Default::default();
        for n in &nodes {
            let e = by_op.entry(n.op.as_str()).or_default();
            e.0 += 1;
            e.1 += n.seconds;
        }
        let mut ops: Vec<OpTime> = by_op
            .into_iter()
            .map(|(op, (count, seconds))| OpTime {
                op: op.to_string(),
                nodes: count,
                seconds,
                share: share(seconds),
            })
            .collect();
        ops.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        let node_seconds = nodes.iter().map(|n| n.seconds).sum();
        nodes.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        Profile {
            runs,
            run_seconds,
            node_seconds,
            ops,
            nodes,
        }
    }

    /// The top `n` op kinds and nodes as text tables.
    pub fn table(&self, n: usize) -> String {
        let ms = |s: f64| s * 1e3;
        let mut out = format!(
            "profile     {} runs: nodes {:.3} ms of {:.3} ms a run ({:.1}%)\n",
            self.runs,
            ms(self.node_seconds),
            ms(self.run_seconds),
            100.0 * self.node_seconds / self.run_seconds.max(f64::MIN_POSITIVE)
        );
        out += &format!("{:>10} {:>6} {:>6}  op\n", "ms/run", "share", "nodes");
        for o in self.ops.iter().take(n) {
            out += &format!(
                "{:>10.3} {:>5.1}% {:>6}  {}\n",
                ms(o.seconds),
                100.0 * o.share,
                o.nodes,
                o.op
            );
        }
        out += &format!("{:>10} {:>6}  node (op)\n", "ms/run", "share");
        for t in self.nodes.iter().take(n) {
            out += &format!(
                "{:>10.3} {:>5.1}%  {} ({})\n",
                ms(t.seconds),
                100.0 * t.share,
                t.node,
                t.op
            );
        }
        out
    }
}
