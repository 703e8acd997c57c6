//! The executor: runs a program on candle tensors (CPU; CUDA behind the
//! `cuda` feature), after checking the inputs against the exported shape
//! contract ([`crate::contract`]).
//!
//! candle has no bool or int8 storage; a [`Tensor`] carries the logical IR dtype
//! beside the candle tensor (bool and uint8 live in U8, int8 in I16, uint16
//! in I32, uint32/uint64 in I64), and the ops apply PyTorch's type
//! promotion on logical dtypes ([`promote`]).
//!
//! Op implementations live in one table ([`ops`]) keyed by op identity;
//! unsupported ops are all reported, with node names, before anything runs.
//! A value is dropped after its last use (liveness per graph).

pub mod backend;
mod ctx;
mod epilogue;
pub use ctx::Ctx;
pub mod fold;
pub mod fuse;
pub mod int8;
pub mod lowering;
pub mod mapped;
pub mod ops;
mod packs;
pub mod profile;
mod tensor;

use std::collections::BTreeMap;

use candle_core::{Device, Tensor as CandleTensor};

use crate::contract::Scalar;
use crate::error::{Cause, Error, Result};
use crate::ir::{
    Argument, Dtype, Graph, InputKind, Node, OutputKind, Program, SymRef, ValueId, ValueKind,
};
use crate::tensorfile::HostTensor;
pub use epilogue::{Epilogue, EpilogueArgs};
use tensor::host_copies_so_far;
pub use tensor::{storage_dtype, RunOutput, Tensor};
pub mod budget;
mod layout;
mod state;
mod thread_count;
use crate::kernels::lowp;
pub use crate::kernels::lowp::Precision;
use crate::kernels::sgemm;
pub use crate::kernels::threads::in_pool;
use crate::kernels::threads::KeepAwake;
use packs::PackCache;
pub use thread_count::{start_threads, MAX_THREADS};

/// A runtime value.
#[derive(Clone, Debug)]
pub enum Value {
    Tensor(Tensor),
    /// A weight's bytes where they lie (see [`mapped`]): only views and the
    /// ops that read it in place see one; any other use gets a copy.
    Mapped(Box<mapped::Mapped>),
    Int(i64),
    Float(f64),
    Bool(bool),
    None,
    List(Vec<Value>),
}

impl Value {
    /// `f` on the storage address of each host tensor it holds (a list's
    /// included).
    fn storages(&self, f: &mut impl FnMut(usize)) {
        match self {
            Value::Tensor(t) => {
                if let Some(a) = storage_address(&t.t) {
                    f(a)
                }
            }
            Value::List(vs) => vs.iter().for_each(|v| v.storages(f)),
            _ => {}
        }
    }
}

/// Whether an error is a kernel refusing a strided layout (which the
/// shared contiguous step below fixes).
fn is_layout_error(e: &Error) -> bool {
    e.cause == Some(Cause::Layout)
}

/// Whether an error on a device other than the host is a kernel that
/// device lacks, which running the node on the host fixes: candle's
/// ([`Cause::NoDeviceKernel`], decided in [`backend`]), or this toolkit's
/// kernel for a variant that runs on the host only (`Unsupported`).
fn is_missing_kernel(e: &Error, device: &Device) -> bool {
    !device.is_cpu()
        && (e.kind == crate::error::ErrorKind::Unsupported
            || e.cause == Some(Cause::NoDeviceKernel))
}

/// A value with every tensor in it on `device` (each copy counted by
/// candle's device transfers: [`tensor::note_host_copy`]).
fn value_on(v: &Value, device: &Device) -> Result<Value> {
    Ok(match v {
        Value::Tensor(t) if !t.t.device().same_device(device) => {
            tensor::note_host_copy(if device.is_cpu() {
                t.t.device()
            } else {
                device
            });
            Value::Tensor(Tensor::new(t.t.to_device(device)?, t.dtype))
        }
        Value::List(items) => Value::List(
            items
                .iter()
                .map(|i| value_on(i, device))
                .collect::<Result<_>>()?,
        ),
        other => other.clone(),
    })
}

/// A value with every tensor in it made contiguous.
fn contiguous_value(v: &Value) -> Result<Value> {
    Ok(match v {
        Value::Tensor(t) if !t.t.is_contiguous() => {
            Value::Tensor(Tensor::new(ops::contiguous(&t.t)?, t.dtype))
        }
        Value::List(items) => {
            Value::List(items.iter().map(contiguous_value).collect::<Result<_>>()?)
        }
        other => other.clone(),
    })
}

/// Which execution device to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Cuda,
}

pub fn device(kind: DeviceKind) -> Result<Device> {
    match kind {
        DeviceKind::Cpu => Ok(Device::Cpu),
        DeviceKind::Cuda => {
            if !cfg!(feature = "cuda") {
                return Err(Error::unsupported(
                    "this build has no CUDA support: rebuild with --features cuda",
                ));
            }
            // candle links the driver (cudarc's dynamic linking), so a build
            // with the feature does not start where there is none (the
            // loader refuses it); a panic in candle's device set-up is
            // still told as a missing driver, never a panic.
            let hook = std::panic::take_hook();
            std::panic::set_hook(Box::new(|_| {}));
            let made = std::panic::catch_unwind(|| Device::new_cuda(0));
            std::panic::set_hook(hook);
            match made {
                Ok(Ok(d)) => Ok(d),
                Ok(Err(e)) => Err(Error::bad_input(format!(
                    "--device cuda: no usable CUDA device: {}",
                    e.to_string().lines().next().unwrap_or("")
                ))),
                Err(_) => Err(Error::bad_input(
                    "--device cuda: no CUDA driver (libcuda.so) on this machine",
                )),
            }
        }
    }
}

/// The node outputs and graph outputs each value is last used by, so
/// values are freed as soon as nothing needs them.
fn last_uses(graph: &Graph, read_at: Option<&[usize]>) -> Vec<usize> {
    let mut last = vec![usize::MAX; graph.values.len()];
    let mut refs = Vec::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        // where the node reads (a fused group's member: where the group runs)
        let at = read_at.map_or(i, |r| r[i]);
        refs.clear();
        node.inputs.iter().for_each(|a| a.arg.value_refs(&mut refs));
        for v in &refs {
            let l = &mut last[v.index()];
            *l = if *l == usize::MAX { at } else { (*l).max(at) };
        }
    }
    refs.clear();
    graph.outputs.iter().for_each(|a| a.value_refs(&mut refs));
    for v in &refs {
        last[v.index()] = usize::MAX - 1; // kept to the end
    }
    last
}

/// The values dead after each node (`last` of them there): what the
/// executor drops once the node has run.
fn dead_after(graph: &Graph, last: &[usize]) -> Vec<Vec<ValueId>> {
    let mut dead = vec![Vec::new(); graph.nodes.len()];
    for (v, &at) in last.iter().enumerate() {
        if let Some(d) = dead.get_mut(at) {
            d.push(ValueId(v as u32));
        }
    }
    dead
}

/// How an executor is set up.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecOptions {
    /// Whether weights stay where they lie (see [`mapped`]).
    pub map_weights: mapped::MapWeights,
    /// Run every node by itself: no element-wise chain fused ([`fuse`];
    /// also set by the environment variable `PT2KIT_NO_FUSION`, for
    /// timing a run both ways).
    pub no_fusion: bool,
    /// Keep every convolution's output in planes (`[b, c, h, w]` as it
    /// lies): no depthwise output left channels-last for the ops after it
    /// (see `ops::channels_last_dims`; also set by the environment
    /// variable `PT2KIT_PLANES_ONLY`, for timing a run both ways).
    pub planes_only: bool,
    /// The run-time memory budget: the most bytes a value whose size is
    /// known only at run time may take ([`budget`]; `None`: no budget).
    pub max_memory: Option<u64>,
    /// The most iterations a `while_loop` may run (`None`: no bound).
    pub max_iterations: Option<u64>,
    /// The precision products compute in ([`lowp`]; bfloat16 only on a
    /// CPU with a kernel for it, float32 otherwise: [`Executor::precision_note`]).
    pub precision: lowp::Precision,
    /// Run the program as given: not lowered at load the way
    /// `ir-decompose` lowers it ([`lowering`]; its missing ops are still
    /// lowered). For runs that name the values of the program as given
    /// (`ir-run --intermediates`).
    pub as_given: bool,
}

pub struct Executor<'p> {
    /// The program as run: the one given, or a copy with the nodes the
    /// executor has no row for lowered through the decomposition table
    /// (weights shared, not copied).
    pub program: std::borrow::Cow<'p, Program>,
    /// What was lowered for the executor (`-v` prints it).
    pub fallback: crate::decompose::fallback::Fallback,
    pub device: Device,
    weights: BTreeMap<usize, Value>,
    /// Per op, the copies between the device and the host its rows made
    /// in the last run (none on the CPU device): `ir-run --stats`.
    host_copies: std::sync::Mutex<BTreeMap<String, usize>>,
    /// With profiling on: per node of the top-level graph, (name, op,
    /// seconds, runs), summed over the runs since it was turned on.
    profile: std::sync::Mutex<Option<Vec<NodeTime>>>,
    profiling: std::sync::atomic::AtomicBool,
    /// With recording on: every tensor a top-level node defined in the
    /// last run, by value name, in the order the nodes ran
    /// (`ir-run --intermediates`).
    recorded: std::sync::Mutex<Option<Vec<(String, HostTensor)>>>,
    recording: std::sync::atomic::AtomicBool,
    /// Copies made of mapped weights for ops that do not read them in place.
    mapped_copies: std::sync::atomic::AtomicUsize,
    /// Epilogues run inside their producer's kernel since the executor
    /// was built ([`Executor::epilogues_in_kernels`]).
    epilogues_in_kernels: std::sync::atomic::AtomicUsize,
    /// Convolutions run with their input's scale folded into their weight
    /// since the executor was built ([`Executor::scales_folded`]).
    scales_folded: std::sync::atomic::AtomicUsize,
    /// Names of the values that the fallback lowering made (not in the
    /// program as given): never recorded, since another back end's
    /// lowering may give the same fresh name to another value.
    made_by_lowering: std::collections::HashSet<String>,
    /// Weights packed for the matrix kernel ([`sgemm`]), by where they lie:
    /// packed on first use, kept for the executor's life.
    packs: PackCache,
    /// The program's own nodes' ops (and views of a mapped weight), looked
    /// up once ([`Executor::node_ops`]).
    node_ops: Vec<(Option<ops::OpFn>, Option<ops::MappedViewFn>)>,
    /// Where each value of the program's own graph is read last under the
    /// fusion plan (`last_uses`), found once.
    last_planned: Vec<usize>,
    /// The values dead after each node of it under the plan (`dead_after`).
    dead_planned: Vec<Vec<ValueId>>,
    /// The top-level graph's element-wise chains, each run as one pass
    /// ([`fuse`]).
    fusion: fuse::Plan,
    /// Whether a kernel may write its output over a dead residual
    /// ([`EpilogueArgs::into`]).
    in_place: bool,
    /// Whether a depthwise convolution may leave its output channels-last
    /// for the ops after it that read it so (see [`ExecOptions::planes_only`]).
    pub(crate) channels_last: bool,
    /// Outputs left channels-last since the executor was built
    /// ([`Executor::outputs_channels_last`]).
    pub(crate) outputs_channels_last: std::sync::atomic::AtomicUsize,
    /// Per node of the program's own graph, whether every reader of its
    /// output reads it channels-last where it lies
    /// ([`layout::channels_last_readers`]).
    channels_last_readers: Vec<bool>,
    /// Outputs written over a dead residual since the executor was built
    /// ([`Executor::outputs_in_place`]).
    outputs_in_place: std::sync::atomic::AtomicUsize,
    /// Per value of the top-level graph, whether it is a weight (an input
    /// bound to one of `weights`).
    weight_slots: Vec<bool>,
    /// Where the tensors of [`Executor::bind`] lie: read by every run on
    /// them, so never written over ([`Executor::overwritable`]). Kept for
    /// the executor's life (an address left after its inputs are dropped
    /// only keeps a later value from being written over).
    bound: std::sync::Mutex<std::collections::HashSet<usize>>,
    /// [`ExecOptions::max_memory`].
    pub(crate) max_memory: Option<u64>,
    /// [`ExecOptions::max_iterations`].
    pub(crate) max_iterations: Option<u64>,
    /// Program state given for the next runs, and the last run's.
    state: state::StateSlots,
}

/// User inputs made into the executor's tensors once, for many runs
/// ([`Executor::bind`], [`Executor::run_bound`]): a benchmark's or a
/// server's loop, which [`Executor::run`] would copy from the host on
/// every run (MobileNetV3's images at batch 8, 4.8 MB: 3.7% of a run's
/// samples; `ir-bench` on bound inputs ran it in 0.92x of its time, the
/// MLP at batch 8 in 0.90x).
pub struct BoundInputs {
    inputs: Vec<BoundInput>,
}

/// One bound input: name, dtype, shape, the tensor, and its value when it
/// has one element (what a symbolic scalar input is given as).
type BoundInput = (String, Dtype, Vec<usize>, Tensor, Option<Scalar>);

/// The user inputs of a run: host tensors, copied in, or bound ones.
#[derive(Clone, Copy)]
enum Given<'a> {
    Host(&'a [(String, HostTensor)]),
    Bound(&'a BoundInputs),
}

impl<'a> Given<'a> {
    fn contract(self) -> Vec<crate::contract::GivenInput<'a>> {
        let input = |name, dtype, shape, scalar| crate::contract::GivenInput {
            name,
            dtype,
            shape,
            scalar,
        };
        match self {
            Given::Host(h) => h
                .iter()
                .map(|(n, t)| input(n, t.dtype, &t.shape, Scalar::of(t)))
                .collect(),
            Given::Bound(b) => b
                .inputs
                .iter()
                .map(|(n, d, s, _, v)| input(n, *d, s, *v))
                .collect(),
        }
    }

    /// A symbolic scalar input's value (`n` of `forward(self, x, n: int)`),
    /// as the contract check took it.
    fn scalar(self, name: &str, kind: &ValueKind) -> Result<Value> {
        let given = self
            .contract()
            .into_iter()
            .find(|g| g.name == name)
            .and_then(|g| g.scalar);
        Ok(match (kind, given) {
            (ValueKind::SymFloat(_), Some(Scalar::Float(f))) => Value::Float(f),
            (ValueKind::SymFloat(_), Some(Scalar::Int(i))) => Value::Float(i as f64),
            (_, Some(Scalar::Int(i))) => Value::Int(i),
            (_, Some(Scalar::Float(f))) => Value::Float(f),
            (_, Some(Scalar::Bool(b))) => Value::Bool(b),
            (_, None) => {
                return Err(Error::bad_input(format!(
                    "input {name}: expected one value (a symbolic scalar input)"
                )))
            }
        })
    }

    fn value(self, name: &str, device: &Device) -> Result<Value> {
        let missing = || Error::bad_input(format!("input '{name}' is missing"));
        Ok(Value::Tensor(match self {
            Given::Host(h) => Tensor::from_host(
                &h.iter().find(|(n, _)| n == name).ok_or_else(missing)?.1,
                device,
            )?,
            Given::Bound(b) => b
                .inputs
                .iter()
                .find(|(n, ..)| n == name)
                .ok_or_else(missing)?
                .3
                .clone(),
        }))
    }
}

/// The address of a CPU float32 tensor's storage (`None` otherwise).
fn storage_address(t: &CandleTensor) -> Option<usize> {
    let (storage, _) = t.storage_and_layout();
    match &*storage {
        candle_core::Storage::Cpu(cpu) => cpu.as_slice::<f32>().ok().map(|v| v.as_ptr() as usize),
        _ => None,
    }
}

/// One node's share of the runs profiled (`ir-bench --profile`).
#[derive(Clone, Debug)]
pub struct NodeTime {
    pub node: String,
    pub op: String,
    pub seconds: f64,
    pub runs: usize,
}

/// Whether the executor runs a node: a row for its op, and arguments that
/// row accepts (`ops::DECLINES`).
pub fn executes(node: &crate::ir::Node, reads: &crate::ir::Reads) -> bool {
    let op = node.target.to_string();
    ops::lookup(&op).is_some()
        && !crate::decompose::fallback::declined(ops::DECLINES, &op, node, reads)
}

/// Every op of a graph (and its subgraphs) with no implementation.
/// A complex value makes the op impossible here, whatever its row (but for
/// the boundary views `decompose::complex` leaves: the executor holds a
/// complex tensor as its real pairs); the listing says so.
pub fn missing_ops(graph: &Graph) -> Vec<(String, String)> {
    let mut missing = Vec::new();
    graph.visit_nodes_read(&mut |g, reads, n| {
        let complex = g.complex_dtype(n).is_some()
            && !crate::decompose::complex::BOUNDARY_OPS.contains(&n.target.to_string().as_str());
        if complex || !executes(n, reads) {
            let op = match g.complex_dtype(n) {
                Some(d) => format!(
                    "{} [{} values: complex values run as real pairs, and this op has none]",
                    n.target,
                    d.short_name()
                ),
                None => n.target.to_string(),
            };
            missing.push((op, n.name.clone()));
        }
    });
    missing
}

impl<'p> Executor<'p> {
    /// Lowers the ops it has no row for through the decomposition table,
    /// checks op coverage, and loads the weights onto the device.
    pub fn new(program: &'p Program, device: Device) -> Result<Executor<'p>> {
        Executor::with_options(program, device, ExecOptions::default())
    }

    /// [`Executor::new`] with options (whether weights are mapped).
    pub fn with_options(
        program: &'p Program,
        device: Device,
        opts: ExecOptions,
    ) -> Result<Executor<'p>> {
        let original = program;
        let (planned, refused) = match opts.as_given || !device.is_cpu() {
            true => (lowering::Planned::AsGiven, None),
            false => match lowering::plan(program) {
                lowering::Planned::Refused(why) => (lowering::Planned::AsGiven, Some(why)),
                planned => (planned, None),
            },
        };
        let (program, mut fallback) = match planned {
            lowering::Planned::Lowered(lowered, notes) => {
                let (lowered, mut report) =
                    match crate::decompose::fallback::lower_unsupported(&lowered, executes)? {
                        Some((again, report)) => (again, report),
                        None => (*lowered, Default::default()),
                    };
                report.notes.splice(0..0, notes);
                (std::borrow::Cow::Owned(lowered), report)
            }
            _ => match crate::decompose::fallback::lower_unsupported(program, executes)? {
                Some((lowered, report)) => (std::borrow::Cow::Owned(lowered), report),
                None => (std::borrow::Cow::Borrowed(program), Default::default()),
            },
        };
        if let Some(why) = refused {
            fallback.notes.insert(0, why);
        }
        let missing = missing_ops(&program.graph);
        if !missing.is_empty() {
            let mut by_op: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (op, node) in missing {
                by_op.entry(op).or_default().push(node);
            }
            let list: Vec<String> = by_op
                .iter()
                .map(|(op, nodes)| format!("{op} (nodes {})", nodes.join(", ")))
                .collect();
            return Err(Error::unsupported(format!(
                "{} op(s) have no implementation in the executor: {}",
                by_op.len(),
                list.join("; ")
            )));
        }
        let made_by_lowering = match &program {
            std::borrow::Cow::Owned(lowered) => lowered_names(original, lowered),
            std::borrow::Cow::Borrowed(_) => Default::default(),
        };
        let mut program = program;
        let mut weights = BTreeMap::new();
        // Per storage, the weights in it not yet loaded: a storage of the
        // lowered copy's own (a folded batch norm's weight) is dropped once
        // every weight in it has its copy in the executor.
        let mut unloaded = vec![0usize; program.storages.len()];
        for w in &program.weights {
            if let Some(n) = unloaded.get_mut(w.storage as usize) {
                *n += 1;
            }
        }
        // Weights left where they lie (unless asked not to): each weight
        // large enough (or any, with MapWeights::Always) whose every use is
        // a view or an op that reads it in place.
        let map = opts.map_weights != mapped::MapWeights::Never;
        for pos in 0..program.graph.inputs.len() {
            let input = &program.graph.inputs[pos];
            if let (true, Some(w), Argument::Tensor(v)) =
                (map, program.weight_for_input(pos), input)
            {
                let big = program.weight_bytes_len(w) >= mapped::MAP_MIN_BYTES as u64;
                let in_place = (big || opts.map_weights == mapped::MapWeights::Always)
                    && device.is_cpu()
                    && mapped::only_read_in_place(
                        &program.graph,
                        *v,
                        &|op| ops::mapped_view(op).is_some(),
                        ops::reads_mapped(),
                    );
                if let Some(m) = in_place.then(|| mapped::of_weight(&program, w)).flatten() {
                    weights.insert(pos, Value::Mapped(Box::new(m)));
                    continue;
                }
            }
            if let Some(w) = program.weight_for_input(pos) {
                let shape: Vec<usize> = w
                    .meta
                    .static_sizes()
                    .unwrap_or_default()
                    .iter()
                    .map(|&s| s as usize)
                    .collect();
                let t = Tensor::from_bytes(w.meta.dtype, &shape, &program.weight_bytes(w), &device)
                    .map_err(|e| e.at(format!("weight '{}'", w.name)))?;
                weights.insert(pos, Value::Tensor(t));
                // the executor has its own copy: the mapped file's pages
                // of it leave this process's resident memory (a later
                // read, a weight sharing the storage, faults them back)
                let storage = w.storage as usize;
                if let Some(blob) = program.storages.get(storage) {
                    blob.release();
                }
                if let (std::borrow::Cow::Owned(q), Some(n)) =
                    (&mut program, unloaded.get_mut(storage))
                {
                    *n = n.saturating_sub(1);
                    if *n == 0 && q.storages[storage].is_owned() {
                        q.storages[storage] = crate::blob::Blob::owned(Vec::new());
                    }
                }
            } else if program.input_kinds[pos].weight_name().is_some() {
                return Err(Error::bad_input(format!("graph input {pos} has no weight")));
            }
        }
        let mapped_total: u64 = weights
            .values()
            .filter_map(|v| match v {
                Value::Mapped(m) => Some(m.nbytes()),
                _ => None,
            })
            .sum();
        let packs = PackCache::new(
            weights
                .values()
                .filter_map(|v| match v {
                    Value::Tensor(t) => storage_address(&t.t),
                    _ => None,
                })
                .collect(),
            mapped_total <= mapped::PACK_CACHE_BYTES,
            mapped::releases_after_use(mapped_total),
            opts.precision,
            match opts.precision {
                lowp::Precision::Bf16 if device.is_cpu() => lowp::kernel(),
                _ => None,
            },
        );
        let fusion = if opts.no_fusion || crate::knobs::is_set("PT2KIT_NO_FUSION") {
            fuse::Plan::default()
        } else {
            // PT2KIT_NO_EPILOGUE: the chains after convolutions and products as passes
            // of their own (for timing a run both ways)
            fuse::Plan::new(&program.graph, !crate::knobs::is_set("PT2KIT_NO_EPILOGUE"))
        };
        let node_ops = program
            .graph
            .nodes
            .iter()
            .map(|n| {
                let name = n.target.to_string();
                (ops::lookup(&name), ops::mapped_view(&name))
            })
            .collect();
        // (no plan: the nodes read where they are)
        let read_at =
            (fusion.read_at.len() == program.graph.nodes.len()).then_some(&fusion.read_at[..]);
        let last_planned = last_uses(&program.graph, read_at);
        let dead_planned = dead_after(&program.graph, &last_planned);
        let mut weight_slots = vec![false; program.graph.values.len()];
        for (pos, arg) in program.graph.inputs.iter().enumerate() {
            if let (true, Argument::Tensor(v)) = (weights.contains_key(&pos), arg) {
                weight_slots[v.index()] = true;
            }
        }
        let channels_last_readers = layout::channels_last_readers(&program.graph, &fusion);
        let executor = Executor {
            fusion,
            // PT2KIT_NO_IN_PLACE: every output fresh (for timing both ways)
            in_place: !crate::knobs::is_set("PT2KIT_NO_IN_PLACE"),
            channels_last: !opts.planes_only && !crate::knobs::is_set("PT2KIT_PLANES_ONLY"),
            channels_last_readers,
            weight_slots,
            bound: Default::default(),
            outputs_in_place: Default::default(),
            outputs_channels_last: Default::default(),
            program,
            fallback,
            device,
            weights,
            host_copies: Default::default(),
            profile: Default::default(),
            profiling: Default::default(),
            recorded: Default::default(),
            recording: Default::default(),
            mapped_copies: Default::default(),
            epilogues_in_kernels: Default::default(),
            scales_folded: Default::default(),
            made_by_lowering,
            packs,
            node_ops,
            last_planned,
            dead_planned,
            max_memory: opts.max_memory,
            max_iterations: opts.max_iterations,
            state: Default::default(),
        };
        executor.prepack_bf16();
        Ok(executor)
    }

    /// Runs on named user inputs; returns the user outputs, named by their
    /// graph values, in output order.
    pub fn run(&self, inputs: &[(String, HostTensor)]) -> Result<Vec<(String, HostTensor)>> {
        // On a thread of the pool that the kernels split their work over:
        // the caller sleeps meanwhile instead of making one thread more
        // than there are cores (the ops between parallel kernels run on
        // the pool thread, not beside it).
        self.run_to_host(Given::Host(inputs))
    }

    /// The named user inputs made into the executor's tensors once, for
    /// [`Executor::run_bound`]; checked against the shape contract on
    /// each run, as [`Executor::run`]'s.
    pub fn bind(&self, inputs: &[(String, HostTensor)]) -> Result<BoundInputs> {
        let mut bound = Vec::with_capacity(inputs.len());
        for (name, host) in inputs {
            let t = Tensor::from_host(host, &self.device)?;
            if let (Some(at), Ok(mut kept)) = (storage_address(&t.t), self.bound.lock()) {
                kept.insert(at);
            }
            bound.push((
                name.clone(),
                host.dtype,
                host.shape.clone(),
                t,
                Scalar::of(host),
            ));
        }
        Ok(BoundInputs { inputs: bound })
    }

    /// As [`Executor::run`], on inputs bound once: nothing is copied in,
    /// and nothing is written over them (a second run reads what the first
    /// did).
    pub fn run_bound(&self, inputs: &BoundInputs) -> Result<Vec<(String, HostTensor)>> {
        self.run_to_host(Given::Bound(inputs))
    }

    /// A run on the pool, its outputs copied to the host.
    fn run_to_host(&self, inputs: Given) -> Result<Vec<(String, HostTensor)>> {
        let outputs = in_pool(|| self.run_here(inputs))?;
        outputs
            .into_iter()
            .map(|(name, out)| Ok((name, out.into_host()?)))
            .collect()
    }

    /// As [`Executor::run`], the outputs left where the executor made them
    /// (a writer reads their bytes in place: [`RunOutput`]).
    pub fn run_outputs(&self, inputs: &[(String, HostTensor)]) -> Result<Vec<(String, RunOutput)>> {
        in_pool(|| self.run_here(Given::Host(inputs)))
    }

    fn run_here(&self, inputs: Given) -> Result<Vec<(String, RunOutput)>> {
        // (on a GPU the host threads mostly wait: none kept awake)
        let _awake = self.device.is_cpu().then(KeepAwake::start);
        if let Ok(mut copies) = self.host_copies.lock() {
            copies.clear();
        }
        let given = inputs.contract();
        let bindings = crate::contract::check_inputs(&self.program, &given)?;
        let g = &self.program.graph;
        let mut args = Vec::with_capacity(g.inputs.len());
        for (pos, input) in g.inputs.iter().enumerate() {
            let v = match (&self.program.input_kinds[pos], input) {
                (_, _) if self.weights.contains_key(&pos) => self
                    .state_override(pos)
                    .unwrap_or_else(|| self.weights[&pos].clone()),
                (InputKind::UserInput, Argument::Tensor(v)) => {
                    inputs.value(&g.value(*v).name, &self.device)?
                }
                // a string the graph was specialised on (ExportDB's
                // setattr by name): nodes hold it as a literal, no value
                // reads it
                (_, Argument::String(_)) => Value::None,
                (
                    InputKind::UserInput,
                    Argument::SymInt(SymRef::Value(v))
                    | Argument::SymFloat(SymRef::Value(v))
                    | Argument::SymBool(SymRef::Value(v)),
                ) => inputs.scalar(&g.value(*v).name, &g.value(*v).kind)?,
                (_, a) => literal(a).ok_or_else(|| {
                    Error::unsupported(format!("graph input {pos} ({a:?}) cannot be provided"))
                })?,
            };
            args.push(v);
        }
        if let Ok(mut r) = self.recorded.lock() {
            if let Some(kept) = r.as_mut() {
                kept.clear();
            }
        }
        let outs = self.run_graph(g, args, &bindings)?;
        let mut result = Vec::new();
        let mut state = Vec::new();
        for ((out, kind), value) in g.outputs.iter().zip(&self.program.output_kinds).zip(outs) {
            if let Some(name) = kind.state_name() {
                state.push((name.to_string(), value));
                continue;
            }
            if *kind != OutputKind::UserOutput {
                continue;
            }
            let mut name = match out {
                Argument::Tensor(v) => g.value(*v).name.clone(),
                _ => format!("output_{}", result.len()),
            };
            // A value returned twice (`return y, y`) names two outputs:
            // the second is `y_1`, so that every output has its own member.
            let base = name.clone();
            let mut k = 0;
            while result.iter().any(|(n, _): &(String, RunOutput)| *n == name) {
                k += 1;
                name = format!("{base}_{k}");
            }
            let host = match value {
                Value::Tensor(t) => {
                    result.push((name, RunOutput::Tensor(t)));
                    continue;
                }
                Value::Int(i) => HostTensor {
                    dtype: Dtype::Int64,
                    shape: vec![],
                    data: i.to_le_bytes().to_vec(),
                },
                Value::Float(f) => HostTensor {
                    dtype: Dtype::Float64,
                    shape: vec![],
                    data: f.to_le_bytes().to_vec(),
                },
                Value::Bool(b) => HostTensor {
                    dtype: Dtype::Bool,
                    shape: vec![],
                    data: vec![b as u8],
                },
                other => return Err(Error::unsupported(format!("output {name} is {other:?}"))),
            };
            result.push((name, RunOutput::Host(host)));
        }
        if !state.is_empty() {
            self.keep_state(state);
        }
        Ok(result)
    }

    /// Runs a graph (the top level or a subgraph) on its input values,
    /// which are the run's: a tensor among them that is no weight may be
    /// written over once nothing reads it ([`Executor::overwritable`]).
    pub(crate) fn run_graph(
        &self,
        graph: &Graph,
        inputs: Vec<Value>,
        bindings: &BTreeMap<String, i64>,
    ) -> Result<Vec<Value>> {
        // the fusion plan: the top-level graph's, unless every node's value
        // is being recorded
        let top = std::ptr::eq(graph, &self.program.graph);
        let plan = (top
            && !self.fusion.is_empty()
            && !self.recording.load(std::sync::atomic::Ordering::Relaxed))
        .then_some(&self.fusion);
        let mut env: Vec<Option<Value>> = vec![None; graph.values.len()];
        for (arg, value) in graph.inputs.iter().zip(inputs) {
            bind_output(arg, value, &mut env)?;
        }
        // The symbols known so far, for the memory budget ([`budget`]).
        let mut known = Some(budget::Known::new(bindings));
        if let Some(k) = known.as_mut() {
            k.learn(graph, &graph.inputs, &env);
        }
        // (the program's own under its plan: found once)
        let fresh;
        let (last, dead) = if plan.is_some() || (top && self.fusion.is_empty()) {
            (&self.last_planned[..], &self.dead_planned[..])
        } else {
            let last = last_uses(graph, None);
            fresh = (dead_after(graph, &last), last);
            (&fresh.1[..], &fresh.0[..])
        };
        let mut refs = Vec::new();
        let profiling = self.profiling.load(std::sync::atomic::Ordering::Relaxed) && top;
        for (i, node) in graph.nodes.iter().enumerate() {
            let started = profiling.then(std::time::Instant::now);
            if let (Some(budget), Some(k)) = (self.max_memory, known.as_ref()) {
                budget::check_node(budget, graph, node, k)?;
            }
            match plan.map(|p| p.roles[i]) {
                Some(fuse::Role::Member) => continue,
                Some(fuse::Role::Producer(g)) => {
                    let group = &self.fusion.groups[g];
                    let own = self.fusion.epilogues[g].map_or(0, |(_, own)| own);
                    let epilogue = Epilogue {
                        group,
                        own,
                        applied: std::cell::Cell::new(false),
                        into: self.overwritable(node, group, own, &env, last, i),
                        overwrote: std::cell::Cell::new(false),
                    };
                    self.run_node(
                        graph,
                        node,
                        &mut env,
                        bindings,
                        last,
                        &mut refs,
                        Some(&epilogue),
                    )?;
                    // the views between the output and the group
                    let bridges = &self.fusion.bridges[g];
                    for &b in bridges {
                        let node = &graph.nodes[b];
                        self.run_node(graph, node, &mut env, bindings, last, &mut refs, None)?;
                    }
                    if epilogue.applied.get() {
                        self.epilogues_in_kernels
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if epilogue.overwrote.get() {
                            self.outputs_in_place
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        // the kernel made the group's output: what the
                        // group reads of it
                        let made = env[group.inputs[own].index()].clone();
                        env[group.output.index()] = made;
                    } else {
                        // not applied by the kernel: the group on the output
                        self.run_group(graph, group, &mut env, bindings, last, &mut refs)?;
                    }
                }
                Some(fuse::Role::Root(g)) => {
                    let group = &self.fusion.groups[g];
                    self.run_group(graph, group, &mut env, bindings, last, &mut refs)?;
                }
                _ => self.run_node(graph, node, &mut env, bindings, last, &mut refs, None)?,
            }
            if let Some(k) = known.as_mut() {
                k.learn(graph, &node.outputs, &env);
                budget::check_outputs(graph, node, &env, k)?;
            }
            // the values read last here (by the node, or by the views and
            // the group that run here)
            for v in &dead[i] {
                env[v.index()] = None;
            }
            // A node's time: from its lookup to its dead inputs freed (a
            // group's, at its last node).
            if let Some(started) = started {
                self.note_time(i, node, started.elapsed().as_secs_f64());
            }
        }
        graph
            .outputs
            .iter()
            .map(|a| resolve(a, &env).map_err(|e| e.at("graph output")))
            .collect()
    }
}

impl Executor<'_> {
    /// The op of `node` of `graph` and its view of a mapped weight: looked
    /// up once at load for the program's own nodes, by name otherwise (a
    /// subgraph's).
    fn node_ops(
        &self,
        graph: &Graph,
        node: &Node,
    ) -> (Option<ops::OpFn>, Option<ops::MappedViewFn>) {
        if let Some(ops) = self
            .own_index(graph, node)
            .and_then(|i| self.node_ops.get(i))
        {
            return *ops;
        }
        let name = node.target.to_string();
        (ops::lookup(&name), ops::mapped_view(&name))
    }

    /// Where `node` lies in the program's own graph (`None` for a
    /// subgraph's node).
    fn own_index(&self, graph: &Graph, node: &Node) -> Option<usize> {
        if !std::ptr::eq(graph, &self.program.graph) {
            return None;
        }
        let (at, start) = (node as *const Node as usize, graph.nodes.as_ptr() as usize);
        let i = at.wrapping_sub(start) / std::mem::size_of::<Node>().max(1);
        graph
            .nodes
            .get(i)
            .filter(|n| std::ptr::eq(*n, node))
            .map(|_| i)
    }

    /// Runs one node: its row (a view of a mapped weight where the op is a
    /// view), its inputs made contiguous once where the kernel refuses a
    /// layout, its outputs bound (and recorded when recording).
    #[allow(clippy::too_many_arguments)]
    fn run_node(
        &self,
        graph: &Graph,
        node: &Node,
        env: &mut Vec<Option<Value>>,
        bindings: &BTreeMap<String, i64>,
        last: &[usize],
        refs: &mut Vec<ValueId>,
        epilogue: Option<&Epilogue>,
    ) -> Result<()> {
        let (f, mapped_view) = self.node_ops(graph, node);
        let f = f.ok_or_else(|| {
            Error::unsupported(format!(
                "node '{}': op {} has no implementation",
                node.name, node.target
            ))
        })?;
        let copies_before = host_copies_so_far();
        // float16 and bfloat16 compute in float32 (torch's `opmath`), each
        // output rounded once to the dtype the graph records for it
        if let Some(widened) = self.widened_halves(node, env, refs)? {
            return self.run_widened(graph, node, env, widened, bindings, last, f);
        }
        let mut ctx = Ctx {
            exec: self,
            graph,
            env,
            node,
            bindings,
            last,
            epilogue,
            device: &self.device,
        };
        // A view of a mapped weight is one too (only its layout changes).
        let mapped_in = ctx.mapped("self").or_else(|| ctx.mapped("input"));
        let view = match (mapped_view, mapped_in) {
            (Some(g), Some(m)) => g(&ctx, &m)
                .map_err(|e| e.at(format!("node '{}' ({})", node.name, node.target)))?
                .map(|m| vec![Value::Mapped(Box::new(m))]),
            _ => None,
        };
        // Any strided layout: a kernel that refuses one gets its inputs
        // made contiguous, once, in this one shared step. A kernel the
        // device lacks: the node runs on the host, its inputs copied there
        // and its outputs back (counted: `ir-run --stats`).
        let outs = match view.map(Ok).unwrap_or_else(|| f(&mut ctx)) {
            Err(e) if is_layout_error(&e) || is_missing_kernel(&e, &self.device) => {
                let on_host = !is_layout_error(&e);
                let device = if on_host { &Device::Cpu } else { &self.device };
                let mut moved = env.clone();
                refs.clear();
                node.inputs.iter().for_each(|a| a.arg.value_refs(refs));
                for v in refs.iter() {
                    if let Some(value) = &env[v.index()] {
                        moved[v.index()] = Some(if on_host {
                            value_on(value, device)?
                        } else {
                            contiguous_value(value)?
                        });
                    }
                }
                let mut ctx = Ctx {
                    exec: self,
                    graph,
                    env: &moved,
                    node,
                    bindings,
                    last,
                    // (on the host, none: the group runs after the node)
                    epilogue: if on_host { None } else { epilogue },
                    device,
                };
                match f(&mut ctx) {
                    Ok(outs) if on_host => outs.iter().map(|o| value_on(o, &self.device)).collect(),
                    // the device's own error says more than the host's
                    Err(_) if on_host => Err(e),
                    r => r,
                }
            }
            r => r,
        }
        .map_err(|e| e.at(format!("node '{}' ({})", node.name, node.target)))?;
        let copies = host_copies_so_far() - copies_before;
        if copies > 0 {
            if let Ok(mut map) = self.host_copies.lock() {
                *map.entry(node.target.to_string()).or_default() += copies;
            }
        }
        if outs.len() != node.outputs.len() {
            return Err(Error::internal(format!(
                "node '{}': {} produced {} outputs, the graph has {}",
                node.name,
                node.target,
                outs.len(),
                node.outputs.len()
            )));
        }
        // In-place ops (TRAINING dialect) also update their `self`
        // (`add_`, `__iand__`; not `__and__`, which only ends like one),
        // in its dtype (torch writes `half.add_(float)` as half; the row
        // computed the functional op, whose result promotes), and return it.
        let mut outs = outs;
        if node.target.name.ends_with('_') && crate::schema::mutates(&node.target) {
            if let (Some(Argument::Tensor(self_id)), Some(Value::Tensor(t))) =
                (node.arg("self"), outs.first())
            {
                let written = match &env[self_id.index()] {
                    Some(Value::Tensor(old)) if old.dtype != t.dtype => t.cast(old.dtype)?,
                    _ => t.clone(),
                };
                outs[0] = Value::Tensor(written.clone());
                env[self_id.index()] = Some(Value::Tensor(written));
            }
        }
        for (arg, value) in node.outputs.iter().zip(outs) {
            bind_output(arg, value, env)?;
        }
        if self.recording.load(std::sync::atomic::Ordering::Relaxed)
            && std::ptr::eq(graph, &self.program.graph)
        {
            self.record(graph, node, env)?;
        }
        Ok(())
    }

    /// Where `node` computes (its family is no data movement, control or
    /// size arithmetic) and reads a float16 or bfloat16 tensor: a copy of
    /// `env` with those inputs widened to float32, as torch's CPU kernels
    /// compute them (products and convolutions accumulate in float32,
    /// reductions, softmax and norms too). `None` otherwise.
    fn widened_halves(
        &self,
        node: &Node,
        env: &[Option<Value>],
        refs: &mut Vec<ValueId>,
    ) -> Result<Option<Vec<Option<Value>>>> {
        let half = |d: Dtype| matches!(d, Dtype::Float16 | Dtype::BFloat16);
        refs.clear();
        node.inputs.iter().for_each(|a| a.arg.value_refs(refs));
        let reads_half = |v: &Value| -> bool {
            match v {
                Value::Tensor(t) => half(t.dtype),
                Value::Mapped(m) => half(m.dtype),
                Value::List(items) => items
                    .iter()
                    .any(|i| matches!(i, Value::Tensor(t) if half(t.dtype))),
                _ => false,
            }
        };
        if !refs
            .iter()
            .any(|r| env[r.index()].as_ref().is_some_and(reads_half))
        {
            return Ok(None);
        }
        let computes = matches!(
            crate::schema::family_of(&node.target.to_string()),
            Some(
                "pointwise"
                    | "activation"
                    | "reduce"
                    | "linalg"
                    | "conv"
                    | "pool"
                    | "resample"
                    | "norm"
                    | "rnn"
                    | "attention"
            )
        );
        if !computes {
            return Ok(None);
        }
        fn widen(v: &Value, device: &Device) -> Result<Value> {
            Ok(match v {
                Value::Tensor(t) if matches!(t.dtype, Dtype::Float16 | Dtype::BFloat16) => {
                    Value::Tensor(t.cast(Dtype::Float32)?)
                }
                Value::Mapped(m) if matches!(m.dtype, Dtype::Float16 | Dtype::BFloat16) => {
                    match mapped::tensor_of(v.clone(), device)? {
                        Value::Tensor(t) => Value::Tensor(t.cast(Dtype::Float32)?),
                        other => other,
                    }
                }
                Value::List(items) => Value::List(
                    items
                        .iter()
                        .map(|i| widen(i, device))
                        .collect::<Result<_>>()?,
                ),
                other => other.clone(),
            })
        }
        let mut moved = env.to_vec();
        for r in refs.iter() {
            if let Some(v) = &env[r.index()] {
                moved[r.index()] = Some(widen(v, &self.device)?);
            }
        }
        Ok(Some(moved))
    }

    /// Runs `node` over `widened` ([`Executor::widened_halves`]): each
    /// float32 output rounded to the floating dtype the graph records for
    /// it, then bound in `env`.
    #[allow(clippy::too_many_arguments)]
    fn run_widened(
        &self,
        graph: &Graph,
        node: &Node,
        env: &mut [Option<Value>],
        widened: Vec<Option<Value>>,
        bindings: &BTreeMap<String, i64>,
        last: &[usize],
        f: ops::OpFn,
    ) -> Result<()> {
        let mut ctx = Ctx {
            exec: self,
            graph,
            env: &widened,
            node,
            bindings,
            last,
            epilogue: None,
            device: &self.device,
        };
        let outs =
            f(&mut ctx).map_err(|e| e.at(format!("node '{}' ({})", node.name, node.target)))?;
        drop(widened);
        if outs.len() != node.outputs.len() {
            return Err(Error::internal(format!(
                "node '{}': {} produced {} outputs, the graph has {}",
                node.name,
                node.target,
                outs.len(),
                node.outputs.len()
            )));
        }
        let recorded = |arg: &Argument| -> Option<Dtype> {
            match arg {
                Argument::Tensor(v) => match &graph.values[v.index()].kind {
                    crate::ir::ValueKind::Tensor(m) => Some(m.dtype),
                    _ => None,
                },
                _ => None,
            }
        };
        for (arg, value) in node.outputs.iter().zip(outs) {
            let value = match (value, recorded(arg)) {
                (Value::Tensor(t), Some(d))
                    if t.dtype == Dtype::Float32 && d != Dtype::Float32 && d.is_floating() =>
                {
                    Value::Tensor(t.cast(d)?)
                }
                (v, _) => v,
            };
            bind_output(arg, value, env)?;
        }
        if node.target.name.ends_with('_') && crate::schema::mutates(&node.target) {
            if let (Some(Argument::Tensor(self_id)), Some(Argument::Tensor(out))) =
                (node.arg("self"), node.outputs.first())
            {
                env[self_id.index()] = env[out.index()].clone();
            }
        }
        if self.recording.load(std::sync::atomic::Ordering::Relaxed)
            && std::ptr::eq(graph, &self.program.graph)
        {
            self.record(graph, node, env)?;
        }
        Ok(())
    }

    /// Runs a fused group ([`fuse`]) as one pass, or its nodes one by one
    /// where an input is not one the pass takes.
    fn run_group(
        &self,
        graph: &Graph,
        group: &fuse::Group,
        env: &mut Vec<Option<Value>>,
        bindings: &BTreeMap<String, i64>,
        last: &[usize],
        refs: &mut Vec<ValueId>,
    ) -> Result<()> {
        if !self.run_fused(group, env)? {
            for &m in &group.nodes {
                self.run_node(graph, &graph.nodes[m], env, bindings, last, refs, None)?;
            }
        }
        Ok(())
    }

    /// Runs a fused group ([`fuse`]) into its output: false (nothing done)
    /// where an input is not a float32 host tensor of the group's one
    /// shape.
    fn run_fused(&self, group: &fuse::Group, env: &mut [Option<Value>]) -> Result<bool> {
        let mut dims: Option<Vec<usize>> = None;
        for v in &group.inputs {
            match &env[v.index()] {
                Some(Value::Tensor(t))
                    if t.dtype == Dtype::Float32
                        && t.t.device().is_cpu()
                        && t.t.is_contiguous()
                        && dims.as_deref().is_none_or(|d| d == t.dims()) =>
                {
                    dims = Some(t.dims().to_vec())
                }
                _ => return Ok(false),
            }
        }
        let Some(dims) = dims else {
            return Ok(false);
        };
        let len: usize = dims.iter().product();
        let guards: Vec<_> = group
            .inputs
            .iter()
            .map(|v| match &env[v.index()] {
                Some(Value::Tensor(t)) => t.t.storage_and_layout(),
                _ => unreachable!("checked above"),
            })
            .collect();
        let mut slices: Vec<&[f32]> = Vec::with_capacity(guards.len());
        for (storage, layout) in &guards {
            let candle_core::Storage::Cpu(cpu) = &**storage else {
                return Ok(false);
            };
            let (Ok(all), Some((a, z))) = (cpu.as_slice::<f32>(), layout.contiguous_offsets())
            else {
                return Ok(false);
            };
            slices.push(&all[a..z]);
        }
        if slices.iter().any(|s| s.len() != len) {
            return Ok(false);
        }
        let out = group.eval(&slices, len);
        drop(slices);
        drop(guards);
        let t = CandleTensor::from_vec(out, dims, &Device::Cpu)?;
        env[group.output.index()] = Some(Value::Tensor(Tensor::new(t, Dtype::Float32)));
        Ok(true)
    }

    /// Starts (or restarts) timing every node of the top-level graph; the
    /// times sum over the runs until [`Executor::profile`] reads them.
    pub fn start_profile(&self) {
        if let Ok(mut p) = self.profile.lock() {
            *p = Some(Vec::new());
        }
        self.profiling
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The node times summed over the runs since [`Executor::start_profile`]
    /// (a subgraph's nodes count in the node that runs it), in graph order.
    pub fn profile(&self) -> Vec<NodeTime> {
        self.profile
            .lock()
            .ok()
            .and_then(|p| p.clone())
            .unwrap_or_default()
    }

    /// Per op, the copies between the device and the host that its rows
    /// made in the last run: empty on the CPU, and on a GPU the ops that
    /// fall back to host code (nothing falls back silently).
    pub fn host_copies(&self) -> BTreeMap<String, usize> {
        self.host_copies
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }
}

impl Executor<'_> {
    /// How many copies of mapped weights ops that do not read them in place
    /// have made since the executor was built (0 when mapping went as
    /// planned: a copy per run is slow, never wrong).
    pub fn mapped_copies(&self) -> usize {
        self.mapped_copies
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts keeping every tensor the top-level nodes define (each run
    /// replaces the last run's): [`Executor::recorded`] reads them.
    pub fn start_recording(&self) {
        if let Ok(mut r) = self.recorded.lock() {
            *r = Some(Vec::new());
        }
        self.recording
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The tensors the top-level nodes defined in the last run, by value
    /// name, in the order they were computed (values the fallback lowering
    /// made are left out).
    pub fn recorded(&self) -> Vec<(String, HostTensor)> {
        self.recorded
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .unwrap_or_default()
    }

    fn record(&self, graph: &Graph, node: &Node, env: &[Option<Value>]) -> Result<()> {
        let Ok(mut guard) = self.recorded.lock() else {
            return Ok(());
        };
        let Some(kept) = guard.as_mut() else {
            return Ok(());
        };
        for v in crate::ir::defined_tensors(node) {
            let name = &graph.value(v).name;
            if self.made_by_lowering.contains(name) {
                continue;
            }
            if let Some(Value::Tensor(t)) = &env[v.index()] {
                kept.push((name.clone(), t.to_host()?));
            }
        }
        Ok(())
    }

    fn note_time(&self, i: usize, node: &Node, seconds: f64) {
        let Ok(mut guard) = self.profile.lock() else {
            return;
        };
        let Some(times) = guard.as_mut() else {
            return;
        };
        if times.len() <= i {
            times.resize_with(i + 1, || NodeTime {
                node: String::new(),
                op: String::new(),
                seconds: 0.0,
                runs: 0,
            });
        }
        let t = &mut times[i];
        if t.runs == 0 {
            t.node = node.name.clone();
            t.op = node.target.to_string();
        }
        t.seconds += seconds;
        t.runs += 1;
    }
}

/// The names of the top-level values of `lowered` that `original` has not.
fn lowered_names(original: &Program, lowered: &Program) -> std::collections::HashSet<String> {
    let before: std::collections::HashSet<&str> = original
        .graph
        .values
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    lowered
        .graph
        .values
        .iter()
        .filter(|v| !before.contains(v.name.as_str()))
        .map(|v| v.name.clone())
        .collect()
}

fn literal(a: &Argument) -> Option<Value> {
    Some(match a {
        Argument::None => Value::None,
        Argument::Int(i) => Value::Int(*i),
        Argument::Float(f) => Value::Float(*f),
        Argument::Bool(b) => Value::Bool(*b),
        _ => return None,
    })
}

fn bind_output(arg: &Argument, value: Value, env: &mut [Option<Value>]) -> Result<()> {
    match (arg, value) {
        (Argument::Tensor(v), value) => env[v.index()] = Some(value),
        (
            Argument::SymInt(SymRef::Value(v))
            | Argument::SymBool(SymRef::Value(v))
            | Argument::SymFloat(SymRef::Value(v)),
            value,
        ) => env[v.index()] = Some(value),
        (Argument::Tensors(vs), Value::List(items)) => {
            for (v, item) in vs.iter().zip(items) {
                env[v.index()] = Some(item);
            }
        }
        (Argument::OptionalTensors(vs), Value::List(items)) => {
            for (v, item) in vs.iter().zip(items) {
                if let Some(v) = v {
                    env[v.index()] = Some(item);
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn resolve(a: &Argument, env: &[Option<Value>]) -> Result<Value> {
    let get = |v: &ValueId| {
        env[v.index()].clone().ok_or_else(|| {
            Error::internal(format!(
                "value {} used after it was freed or before it was set",
                v.0
            ))
        })
    };
    Ok(match a {
        Argument::Tensor(v) => get(v)?,
        Argument::SymInt(r) | Argument::SymFloat(r) | Argument::SymBool(r) => sym(r, env)?,
        Argument::Tensors(vs) => Value::List(vs.iter().map(get).collect::<Result<_>>()?),
        Argument::OptionalTensors(vs) => Value::List(
            vs.iter()
                .map(|v| v.as_ref().map(get).unwrap_or(Ok(Value::None)))
                .collect::<Result<_>>()?,
        ),
        other => literal(other)
            .ok_or_else(|| Error::unsupported(format!("argument {other:?} as a value")))?,
    })
}

fn sym(r: &SymRef, env: &[Option<Value>]) -> Result<Value> {
    Ok(match r {
        SymRef::Int(i) => Value::Int(*i),
        SymRef::Float(f) => Value::Float(*f),
        SymRef::Bool(b) => Value::Bool(*b),
        SymRef::Value(v) => env[v.index()]
            .clone()
            .ok_or_else(|| Error::internal(format!("symbolic value {} is not set", v.0)))?,
    })
}
