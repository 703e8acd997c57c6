//! The bodies of the fuzz targets (`fuzz/`, cargo-fuzz): each takes any
//! bytes and returns, whatever they are; a panic, an abort or a hang is a
//! bug. They live here, in one place, so that `lib/tests/fuzz.rs` replays
//! the seeds and every committed crash input (`golden/fuzz/<target>/`)
//! through the very code the fuzzer ran, on every `cargo test`.

use crate::blob::Blob;

/// The central-directory zip reader: any bytes index or are refused, and
/// every member listed reads or is refused.
pub fn zip_reader(data: &[u8]) {
    if let Ok(a) = crate::zip::Archive::from_blob("fuzz.zip".into(), Blob::owned(data.to_vec())) {
        let names: Vec<String> = a.entries().iter().map(|e| e.name.clone()).collect();
        for n in names {
            let _ = a.member(&n);
        }
    }
}

/// The `.pt2` importer (zip, JSON, weights bound to the signature, views
/// checked against their storages).
pub fn pt2_import(data: &[u8]) {
    use crate::import::pt2::{read_pt2_bytes, ImportOptions};
    let _ = read_pt2_bytes("fuzz.pt2", data.to_vec(), &ImportOptions::default());
}

/// The pickle subset that reads `torch.save` zips: interpreted, never
/// executed.
pub fn torch_save_pickle(data: &[u8]) {
    let _ = crate::import::pickle::read_torch_save(Blob::owned(data.to_vec()), "fuzz.pt");
}

/// The TorchScript importer (`ts2ir`): bytes read as an archive and
/// lowered with the shape rules, and as `code/` source (tokenizer and
/// parser alone).
pub fn torchscript_import(data: &[u8]) {
    use crate::import::torchscript::{parse_source, read_archive, TsOptions};
    let shapes = |g: &crate::ir::Graph, n: &crate::ir::Node| {
        crate::infer::outputs_of(g, n)
            .map(|r| r.map(|outs| outs.into_iter().map(|o| (o.dims, o.dtype)).collect()))
    };
    if let Ok(a) = crate::zip::Archive::from_blob("fuzz.pt".into(), Blob::owned(data.to_vec())) {
        let _ = read_archive(&a, &TsOptions::default(), &shapes);
    }
    let _ = parse_source("fuzz.py", &String::from_utf8_lossy(data));
}

/// The IR stream reader (header, records, storage chunks and references,
/// then validation).
pub fn ir_stream(data: &[u8]) {
    let _ = crate::wire::read_program(&mut &data[..], "fuzz.ir");
}

/// The npy, npz and safetensors readers, told apart by content.
pub fn tensor_files(data: &[u8]) {
    let _ = crate::tensorfile::read_tensor_bytes(data.to_vec(), "fuzz", "x");
}

/// A program as a tool loads it: the IR stream read and validated, then
/// every shape rule and limit (`infer::check`).
pub fn load_and_check(data: &[u8]) {
    if let Ok(p) = crate::wire::read_program(&mut &data[..], "fuzz.ir") {
        let _ = crate::infer::check(&p, &Default::default());
    }
}

/// A target's body: any bytes in, nothing out.
pub type Body = fn(&[u8]);

/// Every target by the name of its `fuzz/fuzz_targets/<name>.rs`.
pub const TARGETS: &[(&str, Body)] = &[
    ("zip_reader", zip_reader),
    ("pt2_import", pt2_import),
    ("torch_save_pickle", torch_save_pickle),
    ("torchscript_import", torchscript_import),
    ("ir_stream", ir_stream),
    ("tensor_files", tensor_files),
    ("load_and_check", load_and_check),
    #[cfg(feature = "exec")]
    ("run_program", run_program),
];

/// Small programs made from the bytes, with hostile sizes, dtypes,
/// arguments and executor flags, loaded and run as `ir-run` loads and runs
/// them: written and read back as an IR stream, validated, checked against
/// the shape rules and the limits (a memory cap of [`RUN_BUDGET`]), then
/// run on the CPU with a memory budget and a loop bound. Whatever the
/// program, every step returns: an error, or outputs.
#[cfg(feature = "exec")]
pub fn run_program(data: &[u8]) {
    let Some((program, inputs, opts)) = maker::make(data) else {
        return;
    };
    let Ok(bytes) = crate::wire::encode_program(&program) else {
        return;
    };
    let Ok(program) = crate::wire::read_program(&mut bytes.as_slice(), "fuzz.ir") else {
        return;
    };
    let limits = crate::infer::Limits {
        max_bytes: Some(RUN_BUDGET),
        ..Default::default()
    };
    if crate::infer::check(&program, &limits).is_err() {
        return;
    }
    let Ok(device) = crate::exec::device(crate::exec::DeviceKind::Cpu) else {
        return;
    };
    let Ok(executor) = crate::exec::Executor::with_options(&program, device, opts) else {
        return;
    };
    let _ = executor.run(&inputs);
}

/// The memory cap and budget of [`run_program`]'s runs.
#[cfg(feature = "exec")]
pub const RUN_BUDGET: u64 = 64 << 20;

#[cfg(feature = "exec")]
mod maker {
    //! Programs from bytes: inputs (user inputs and weights) of chosen
    //! dtypes and sizes, then nodes of a table of ops with arguments read
    //! from the bytes (value references, ints from a table of hostile
    //! ones), each node's recorded output as its shape rule infers it (a
    //! node its rule refuses is dropped, now and then kept).
    use crate::ir::op::aten;

    use crate::blob::Blob;
    use crate::decompose::edit::{Emitter, Names};
    use crate::exec::ExecOptions;
    use crate::ir::*;
    use crate::tensorfile::HostTensor;

    struct Bytes<'a> {
        data: &'a [u8],
        at: usize,
    }

    impl Bytes<'_> {
        fn u8(&mut self) -> u8 {
            let b = self.data.get(self.at).copied().unwrap_or(0);
            self.at += 1;
            b
        }
        fn pick<T: Copy>(&mut self, table: &[T]) -> T {
            table[self.u8() as usize % table.len()]
        }
        fn done(&self) -> bool {
            self.at >= self.data.len()
        }
    }

    const DTYPES: &[Dtype] = &[
        Dtype::Float32,
        Dtype::Float32,
        Dtype::Float64,
        Dtype::Int64,
        Dtype::Int32,
        Dtype::Bool,
        Dtype::Uint8,
        Dtype::Float16,
        Dtype::BFloat16,
        Dtype::Int8,
        Dtype::Int16,
    ];

    /// Sizes: mostly small, some hostile.
    const DIMS: &[i64] = &[
        1,
        2,
        3,
        4,
        5,
        0,
        1,
        2,
        3,
        7,
        16,
        1 << 20,
        1 << 31,
        1 << 40,
        -1,
    ];

    /// Ints for arguments (dims, starts, pads, sizes, counts).
    const INTS: &[i64] = &[
        0,
        1,
        2,
        3,
        -1,
        -2,
        4,
        5,
        -3,
        7,
        8,
        1 << 16,
        (1 << 31) - 1,
        1 << 31,
        1 << 32,
        1 << 40,
        i64::MAX,
        i64::MIN,
        -(1 << 31),
        100,
    ];

    const UNARY: &[&str] = &[
        aten::NEG,
        aten::ABS,
        aten::EXP,
        aten::RELU,
        aten::SIGMOID,
        aten::FLOOR,
        aten::SQRT,
        aten::BITWISE_NOT,
        aten::LOGICAL_NOT,
        aten::SIGN,
        aten::CLONE,
    ];

    const BINARY: &[&str] = &[
        aten::ADD_TENSOR,
        aten::SUB_TENSOR,
        aten::MUL_TENSOR,
        aten::DIV_TENSOR,
        aten::REMAINDER_TENSOR,
        aten::POW_TENSOR_TENSOR,
        aten::EQ_TENSOR,
        aten::LT_TENSOR,
        aten::BITWISE_AND_TENSOR,
        aten::MAXIMUM,
        aten::MINIMUM,
        aten::FLOOR_DIVIDE,
        aten::MM,
        aten::BMM,
        aten::MATMUL,
    ];

    const REDUCE: &[&str] = &[
        aten::SUM_DIM_INTLIST,
        aten::MEAN_DIM,
        aten::AMAX,
        aten::AMIN,
    ];

    /// A program, its user inputs and the executor's flags.
    pub(super) type Made = (Program, Vec<(String, HostTensor)>, ExecOptions);

    /// A program, its user inputs, and the executor's flags; `None` where
    /// the bytes make none.
    pub(super) fn make(data: &[u8]) -> Option<Made> {
        let mut b = Bytes { data, at: 0 };
        let mut p = Program::default();
        p.info.verifiers = vec!["ATEN".into()];
        let mut inputs = Vec::new();
        let mut tensors: Vec<ValueId> = Vec::new();
        let n_inputs = 1 + b.u8() % 3;
        for i in 0..n_inputs {
            let dtype = b.pick(DTYPES);
            let rank = b.u8() % 4;
            let sizes: Vec<i64> = (0..rank).map(|_| b.pick(DIMS)).collect();
            let numel = sizes
                .iter()
                .try_fold(1i64, |n, &s| n.checked_mul(s.max(0)))
                .unwrap_or(i64::MAX);
            let nbytes = numel.saturating_mul(dtype.size() as i64);
            let weight = b.u8().is_multiple_of(4);
            let name = format!("x{i}");
            p.graph.values.push(Value {
                name: name.clone(),
                kind: ValueKind::Tensor(TensorMeta::contiguous(dtype, &sizes)),
            });
            let v = ValueId(p.graph.values.len() as u32 - 1);
            p.graph.inputs.push(Argument::Tensor(v));
            tensors.push(v);
            // bytes for it: the fuzzer's, cycled (a huge input is left to
            // the contract and the limits: given empty, it is refused)
            let fill = |n: usize, b: &mut Bytes| -> Vec<u8> { (0..n).map(|_| b.u8()).collect() };
            let data = if (0..=(1 << 16)).contains(&nbytes) {
                fill(nbytes as usize, &mut b)
            } else {
                Vec::new()
            };
            if weight {
                p.storages.push(Blob::owned(data));
                p.weights.push(Weight {
                    name: name.clone(),
                    kind: WeightKind::Parameter,
                    meta: TensorMeta::contiguous(dtype, &sizes),
                    storage: p.storages.len() as u32 - 1,
                });
                p.input_kinds.push(InputKind::Parameter(name));
            } else {
                p.input_kinds.push(InputKind::UserInput);
                let shape = sizes.iter().map(|&s| s.max(0) as usize).collect();
                inputs.push((name, HostTensor { dtype, shape, data }));
            }
        }
        let n_nodes = 1 + b.u8() % 8;
        let mut syms = 0;
        for _ in 0..n_nodes {
            if b.done() {
                break;
            }
            add_node(&mut p, &mut b, &mut tensors, &mut syms);
        }
        let last = *tensors.last()?;
        p.graph.outputs.push(Argument::Tensor(last));
        p.output_kinds.push(OutputKind::UserOutput);
        let opts = ExecOptions {
            map_weights: b.pick(&[
                crate::exec::mapped::MapWeights::Auto,
                crate::exec::mapped::MapWeights::Always,
                crate::exec::mapped::MapWeights::Never,
            ]),
            no_fusion: b.u8().is_multiple_of(2),
            planes_only: b.u8().is_multiple_of(2),
            max_memory: Some(super::RUN_BUDGET),
            max_iterations: Some(64),
            precision: Default::default(),
            as_given: false,
        };
        Some((p, inputs, opts))
    }

    fn t(v: ValueId) -> Argument {
        Argument::Tensor(v)
    }

    /// One node from the bytes, appended with its inferred output (or not
    /// at all).
    fn add_node(p: &mut Program, b: &mut Bytes, tensors: &mut Vec<ValueId>, syms: &mut usize) {
        let x = tensors[b.u8() as usize % tensors.len()];
        let y = tensors[b.u8() as usize % tensors.len()];
        let int = |b: &mut Bytes| b.pick(INTS);
        let ints =
            |b: &mut Bytes, n: u8| -> Vec<i64> { (0..b.u8() % n).map(|_| b.pick(INTS)).collect() };
        let kind = b.u8() % 16;
        // `.item()` of a tensor as a size: an unbacked symbol
        if kind == 15 {
            let name = format!("u{}", *syms);
            *syms += 1;
            let sym = Sym::Expr {
                expr: crate::ir::SymExpr::symbol(&name),
                hint: None,
            };
            p.graph.values.push(Value {
                name: format!("item{}", *syms),
                kind: ValueKind::SymInt(sym.clone()),
            });
            let s = ValueId(p.graph.values.len() as u32 - 1);
            let Ok(target) = Target::parse("torch.ops.aten.item.default").ok_or(()) else {
                return;
            };
            let Ok(inputs) = crate::decompose::edit::named_args(&target, vec![("self", t(x))])
            else {
                return;
            };
            p.graph.nodes.push(Node {
                name: format!("item_{}", *syms),
                target,
                inputs,
                outputs: vec![Argument::SymInt(SymRef::Value(s))],
                meta: NodeMeta::default(),
                is_hop_single_tensor_return: None,
            });
            let op = b.pick(&[aten::ONES, aten::ZEROS, aten::EMPTY_MEMORY_FORMAT]);
            let mut sizes = vec![SymRef::Value(s)];
            let mut recorded = vec![sym];
            for _ in 0..b.u8() % 2 {
                let n = b.pick(DIMS);
                sizes.push(SymRef::Int(n));
                recorded.push(Sym::Int(n));
            }
            let meta = TensorMeta {
                dtype: Dtype::Float32,
                sizes: recorded,
                strides: Vec::new(),
                storage_offset: Sym::Int(0),
                device: Device::default(),
                layout: Layout::Strided,
                requires_grad: false,
            };
            let mut meta = meta;
            meta.strides = crate::decompose::edit::contiguous_sym_strides(&meta.sizes);
            emit(
                p,
                tensors,
                op,
                vec![("size", Argument::SymInts(sizes))],
                Some(meta),
                b,
            );
            return;
        }
        let (op, args): (&str, Vec<(&str, Argument)>) = match kind {
            0 | 1 => (b.pick(UNARY), vec![("self", t(x))]),
            2..=4 => {
                let op = b.pick(BINARY);
                let other = if op.contains("pow") {
                    "exponent"
                } else {
                    "other"
                };
                let second = if op.contains("mm") || op.contains("matmul") {
                    "mat2"
                } else {
                    other
                };
                let second = if op.contains("matmul") {
                    "other"
                } else {
                    second
                };
                (op, vec![("self", t(x)), (second, t(y))])
            }
            5 => (
                aten::VIEW,
                vec![("self", t(x)), ("size", Argument::Ints(ints(b, 4)))],
            ),
            6 => (
                aten::PERMUTE,
                vec![("self", t(x)), ("dims", Argument::Ints(ints(b, 4)))],
            ),
            7 => (
                aten::EXPAND,
                vec![("self", t(x)), ("size", Argument::Ints(ints(b, 4)))],
            ),
            8 => (
                aten::CAT,
                vec![
                    ("tensors", Argument::Tensors(vec![x, y])),
                    ("dim", Argument::Int(int(b))),
                ],
            ),
            9 => (
                aten::SLICE_TENSOR,
                vec![
                    ("self", t(x)),
                    ("dim", Argument::Int(int(b))),
                    ("start", Argument::Int(int(b))),
                    ("end", Argument::Int(int(b))),
                    ("step", Argument::Int(int(b))),
                ],
            ),
            10 => (
                aten::CONSTANT_PAD_ND,
                vec![("self", t(x)), ("pad", Argument::Ints(ints(b, 5)))],
            ),
            11 => (
                aten::REPEAT,
                vec![("self", t(x)), ("repeats", Argument::Ints(ints(b, 4)))],
            ),
            12 => (
                b.pick(REDUCE),
                vec![
                    ("self", t(x)),
                    ("dim", Argument::Ints(ints(b, 3))),
                    ("keepdim", Argument::Bool(b.u8().is_multiple_of(2))),
                ],
            ),
            13 => (
                aten::FULL,
                vec![
                    ("size", Argument::Ints(ints(b, 3))),
                    ("fill_value", Argument::Float(int(b) as f64)),
                ],
            ),
            _ => (
                aten::INDEX_SELECT,
                vec![
                    ("self", t(x)),
                    ("dim", Argument::Int(int(b))),
                    ("index", t(y)),
                ],
            ),
        };
        emit(p, tensors, op, args, None, b);
    }

    /// Appends `op` with `args`; its output recorded as `meta`, or as its
    /// rule infers it. A node the rule refuses is dropped (but one in 16
    /// is kept, for the load to refuse).
    fn emit(
        p: &mut Program,
        tensors: &mut Vec<ValueId>,
        op: &str,
        args: Vec<(&str, Argument)>,
        meta: Option<TensorMeta>,
        b: &mut Bytes,
    ) {
        let keep_refused = b.u8().is_multiple_of(16);
        let first = args.iter().find_map(|(_, a)| match a {
            Argument::Tensor(v) => Some(*v),
            Argument::Tensors(vs) => vs.first().copied(),
            _ => None,
        });
        let dtype = first
            .and_then(|v| match &p.graph.values[v.index()].kind {
                ValueKind::Tensor(m) => Some(m.dtype),
                _ => None,
            })
            .unwrap_or(Dtype::Float32);
        let given = meta.is_some();
        let meta = meta.unwrap_or_else(|| TensorMeta::contiguous(dtype, &[]));
        let mut names = Names::of(&p.graph);
        let mut em = Emitter::new(&mut p.graph.values, &mut names, NodeMeta::default());
        let Ok(v) = em.op(op, args, meta) else {
            return;
        };
        let nodes = em.nodes;
        p.graph.nodes.extend(nodes);
        if !given {
            let Some(node) = p.graph.nodes.last() else {
                return;
            };
            let out = match crate::infer::outputs_of(&p.graph, node) {
                Some(Ok(outs)) => outs.into_iter().next(),
                _ => None,
            };
            let dims: Option<Vec<i64>> = out
                .as_ref()
                .and_then(|o| o.dims.as_ref())
                .and_then(|d| d.iter().copied().collect());
            match dims {
                Some(dims) => {
                    let dtype = out.and_then(|o| o.dtype).unwrap_or(dtype);
                    p.graph.values[v.index()].kind =
                        ValueKind::Tensor(TensorMeta::contiguous(dtype, &dims));
                }
                None if keep_refused => {}
                None => {
                    p.graph.nodes.pop();
                    return;
                }
            }
        }
        tensors.push(v);
    }
}
