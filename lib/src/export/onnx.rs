//! IR -> ONNX: one [`Program`] becomes one standard ONNX model.
//!
//! - Every IR op maps to ONNX nodes through one table (`onnx/ops.rs`, op
//!   identity to emitter); emitters read arguments by name and build nodes
//!   through [`builder::EmitNode`], which knows the opset, names, constants and
//!   symbolic sizes.
//! - Weights become initializers under their state-dict names, deduplicated
//!   by storage and view; user inputs and outputs keep their IR names;
//!   symbolic dims become `dim_param`s named after the IR's symbols.
//! - Ops that cannot be converted are all collected with their node names
//!   before anything is written; `allow_custom` writes them as nodes of a
//!   `pt2kit.<namespace>` domain instead.
//! - Weight bytes are never copied into the model message: the model is
//!   written around them, streaming each weight from its storage, either
//!   inline or into an external data file beside the model (ONNX's external
//!   data convention), which is chosen above the protobuf 2 GiB limit.
//!
//! Decisions worth knowing:
//! - `onnx-protobuf` 0.2.3 provides the messages (generated for protobuf
//!   3.4.0, IR version 10 at most); its tensor helpers `todo!()` on most
//!   dtypes, so every `TensorProto` here is built by hand with `raw_data`.
//! - float16 and bfloat16 math runs in float32 and is rounded back after
//!   each op: that is what torch's CPU kernels do (so results match torch's
//!   bit for bit where ONNX Runtime's float16 kernels differ in the last
//!   place), and ONNX Runtime's CPU provider has no bfloat16 kernels.
//!   `native_low_precision` computes them in their own dtype instead.

mod builder;
mod ops;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use onnx_protobuf::{
    tensor_proto::{DataLocation, DataType},
    ModelProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
};
use protobuf::{EnumOrUnknown, Message};

use crate::error::{Error, ErrorKind, Result};
use crate::ir::{Dtype, Program, Weight};

pub use onnx_protobuf as proto;

/// The opsets the emitters support.
pub const OPSETS: std::ops::RangeInclusive<i64> = 17..=21;
pub const DEFAULT_OPSET: i64 = 18;
/// The largest protobuf message (and so inline ONNX model).
pub const PROTOBUF_LIMIT: u64 = (1 << 31) - 1;
/// Weights above this many bytes go to external data unless asked for
/// earlier: the protobuf limit less room for the graph itself.
pub const DEFAULT_EXTERNAL_THRESHOLD: u64 = PROTOBUF_LIMIT - (64 << 20);
/// With external data in the archive, a weight that lies in no archive and
/// has at most this many bytes goes inline in the model (larger: refused).
pub const INLINE_BESIDE_ARCHIVE: u64 = 64 << 20;
/// Custom-domain nodes (`allow_custom`) live in `pt2kit.<namespace>`.
pub const CUSTOM_DOMAIN_PREFIX: &str = "pt2kit.";

#[derive(Clone, Debug)]
pub struct OnnxOptions {
    pub opset: i64,
    /// Write ops without a conversion as custom-domain nodes instead of failing.
    pub allow_custom: bool,
    /// Compute float16/bfloat16 ops in their own dtype instead of float32
    /// (faster on accelerators; ONNX Runtime's CPU provider has no
    /// bfloat16 kernels, and rounds float16 differently from torch).
    pub native_low_precision: bool,
    /// Always write weights as external data.
    pub external_data: bool,
    /// Write weights as external data when they add up to more than this.
    pub external_threshold: u64,
    /// The external data file, relative to the model file (`model.onnx.data`).
    /// Required when external data is used.
    pub external_location: Option<String>,
    /// External data that points into the `.pt2` archive the weights came
    /// from (by reference): the external data file is that archive (a hard
    /// link), and each initializer its offset in it; nothing is copied.
    pub external_in_archive: bool,
    /// The directory the model is written to (with `external_in_archive`,
    /// a model beside its archive names it directly, with no link).
    pub model_dir: Option<std::path::PathBuf>,
    /// Also make graph outputs of the tensors that top-level nodes define,
    /// under their IR names, for these names (`ir2onnx --intermediates`:
    /// ONNX Runtime then returns every intermediate value, to compare
    /// node by node with `ir-run --intermediates`). `None`: none.
    pub intermediates: Option<std::collections::HashSet<String>>,
    /// Mutated buffers (program state) also as graph inputs, each with
    /// its initializer as the initial value (`ir2onnx --state-inputs`);
    /// the updated state is always an output, `present.<name>`.
    pub state_inputs: bool,
}

impl Default for OnnxOptions {
    fn default() -> Self {
        OnnxOptions {
            opset: DEFAULT_OPSET,
            allow_custom: false,
            native_low_precision: false,
            external_data: false,
            external_threshold: DEFAULT_EXTERNAL_THRESHOLD,
            external_location: None,
            external_in_archive: false,
            model_dir: None,
            intermediates: None,
            state_inputs: false,
        }
    }
}

/// The ONNX IR version that goes with an opset (the oldest that has it).
pub fn ir_version_for(opset: i64) -> i64 {
    match opset {
        ..=18 => 8,
        19 | 20 => 9,
        _ => 10,
    }
}

/// What the conversion did, for `--stats`.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// IR op identity -> (nodes, ONNX nodes they became).
    pub ir_ops: BTreeMap<String, (usize, usize)>,
    /// ONNX op type (with its domain when not the default) -> nodes.
    pub onnx_ops: BTreeMap<String, usize>,
    pub initializers: usize,
    pub initializer_bytes: u64,
    /// Weights no node reads, left out of the model.
    pub unused_weights: Vec<String>,
    /// Nodes written as custom-domain nodes (`allow_custom`): (node, op).
    pub custom_nodes: Vec<(String, String)>,
}

/// A converted model: the message (initializers without their bytes) and
/// where each initializer's bytes come from.
pub struct OnnxModel<'p> {
    pub model: ModelProto,
    program: &'p Program,
    /// Parallel to `model.graph.initializer`.
    weights: Vec<&'p Weight>,
    /// External data: the location and each initializer's offset.
    external: Option<(String, Vec<u64>)>,
    /// With `external_in_archive`: the archive the external data file is.
    archive: Option<std::path::PathBuf>,
    pub stats: Stats,
}

/// Maps an IR dtype to ONNX's, for the given opset.
pub fn onnx_dtype(dtype: Dtype, opset: i64) -> Result<DataType> {
    use DataType as D;
    let float8 = |d: D| {
        if opset >= 19 {
            Ok(d)
        } else {
            Err(Error::unsupported(format!(
                "dtype {} needs ONNX opset 19 or newer (this is {opset})",
                dtype.torch_name()
            )))
        }
    };
    Ok(match dtype {
        Dtype::Uint8 => D::UINT8,
        Dtype::Int8 => D::INT8,
        Dtype::Int16 => D::INT16,
        Dtype::Int32 => D::INT32,
        Dtype::Int64 => D::INT64,
        Dtype::Float16 => D::FLOAT16,
        Dtype::Float32 => D::FLOAT,
        Dtype::Float64 => D::DOUBLE,
        Dtype::Complex64 => D::COMPLEX64,
        Dtype::Complex128 => D::COMPLEX128,
        Dtype::Bool => D::BOOL,
        Dtype::BFloat16 => D::BFLOAT16,
        Dtype::Uint16 => D::UINT16,
        Dtype::Uint32 => D::UINT32,
        Dtype::Uint64 => D::UINT64,
        Dtype::Float8E4M3Fn => float8(D::FLOAT8E4M3FN)?,
        Dtype::Float8E5M2 => float8(D::FLOAT8E5M2)?,
        Dtype::Float8E4M3Fnuz => float8(D::FLOAT8E4M3FNUZ)?,
        Dtype::Float8E5M2Fnuz => float8(D::FLOAT8E5M2FNUZ)?,
        Dtype::Unknown | Dtype::Complex32 | Dtype::Float8E8M0Fnu => {
            return Err(Error::unsupported(format!(
                "dtype {} has no ONNX equivalent at opset {opset}",
                dtype.torch_name()
            )))
        }
    })
}

/// Every op identity with a conversion, sorted (in-place variants such as
/// `aten.add_.Tensor` convert through their functional form).
pub fn supported_ops() -> Vec<&'static str> {
    ops::supported_ops()
}

/// Every op the table converts, with the family whose file holds its row:
/// (family, op identity).
pub fn op_families() -> Vec<(&'static str, &'static str)> {
    ops::rows().map(|(family, op, _)| (family, op)).collect()
}

/// Converts a program. Nothing is written: see [`OnnxModel::write_model`].
/// Whether the emitter table converts a node. In-place ops are not
/// converted as they stand: a write through a view must reach its base,
/// so `ir2onnx` functionalises a program that has any (through
/// `decompose::fallback`), and converts the functional ops.
pub fn converts(node: &crate::ir::Node, reads: &crate::ir::Reads) -> bool {
    ops::lookup(&node.target).is_some_and(|(_, in_place)| !in_place)
        && !crate::schema::mutates(&node.target)
        && !crate::decompose::fallback::declined(
            ops::DECLINES,
            &node.target.to_string(),
            node,
            reads,
        )
}

/// Complex values convert inside a model (as real pairs, `pt2kit.dft` as
/// ONNX `DFT`), but not at its inputs and outputs: ONNX Runtime's kernels
/// take no complex tensors, and a real-pair input would be another
/// contract than the program's. A program with any is refused, naming
/// them.
fn refuse_complex_boundary(program: &Program) -> Result<()> {
    use crate::ir::{InputKind, OutputKind, ValueKind};
    let g = &program.graph;
    let complex = |a: &crate::ir::Argument| -> Option<(String, Dtype)> {
        let mut refs = Vec::new();
        a.value_refs(&mut refs);
        refs.iter().find_map(|v| match &g.value(*v).kind {
            ValueKind::Tensor(m) if m.dtype.is_complex() => {
                Some((g.value(*v).name.clone(), m.dtype))
            }
            _ => None,
        })
    };
    let mut found = Vec::new();
    for (a, kind) in g.inputs.iter().zip(&program.input_kinds) {
        if let (InputKind::UserInput, Some((name, d))) = (kind, complex(a)) {
            found.push(format!("input '{name}' is {}", d.torch_name()));
        }
    }
    for (a, kind) in g.outputs.iter().zip(&program.output_kinds) {
        if let (OutputKind::UserOutput, Some((name, d))) = (kind, complex(a)) {
            found.push(format!("output '{name}' is {}", d.torch_name()));
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    Err(Error::unsupported(format!(
        "{}: ONNX Runtime's kernels take no complex tensors; ir2onnx converts complex values \
         inside a model as real pairs (a trailing dim of 2), but a model's inputs and outputs \
         must be real (export it with torch.view_as_real at its boundary)",
        found.join(", ")
    )))
}

pub fn to_onnx<'p>(program: &'p Program, opts: &OnnxOptions) -> Result<OnnxModel<'p>> {
    if !OPSETS.contains(&opts.opset) {
        return Err(Error::usage(format!(
            "opset {} is not supported: choose {} to {}",
            opts.opset,
            OPSETS.start(),
            OPSETS.end()
        )));
    }
    refuse_complex_boundary(program)?;
    let converted = builder::convert(program, opts, ops::lookup)?;
    let builder::Converted {
        mut graph,
        weights,
        custom_domains,
        mut stats,
    } = converted;

    let total: u64 = weights.iter().map(|w| weight_nbytes(w)).sum();
    stats.initializers = weights.len();
    stats.initializer_bytes = total;
    let mut archive: Option<std::path::PathBuf> = None;
    let external = if opts.external_data
        || opts.external_in_archive
        || total > opts.external_threshold
    {
        let mut location = opts.external_location.clone().ok_or_else(|| {
            Error::usage(format!(
                "the weights ({}) must go to an external data file beside the model{}: write the model to a regular file (-o FILE; not stdout, a device or a FIFO)",
                human_bytes(total),
                if opts.external_data || opts.external_in_archive {
                    ""
                } else {
                    " (they exceed the 2 GiB protobuf limit)"
                }
            ))
        })?;
        let mut offsets = Vec::with_capacity(weights.len());
        let mut at = 0u64;
        for (tensor, w) in graph.initializer.iter_mut().zip(&weights) {
            let len = weight_nbytes(w);
            if len == 0 {
                offsets.push(u64::MAX);
                continue;
            }
            if opts.external_in_archive {
                // where the weight's bytes lie in the archive; a small one
                // that lies in none (a constant a pass folded) is inline
                let (path, offset) = match archive_place(program, w) {
                    Ok(place) => place,
                    Err(_) if len <= INLINE_BESIDE_ARCHIVE => {
                        tensor.raw_data = program.weight_bytes(w).into_owned();
                        offsets.push(u64::MAX);
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                match &archive {
                    Some(a) if *a != path => {
                        return Err(Error::usage(format!(
                            "weight '{}' lies in {}, others in {}: external data can point into one archive",
                            w.name,
                            path.display(),
                            a.display()
                        )))
                    }
                    Some(_) => {}
                    None => {
                        // beside the archive, the location is its name;
                        // elsewhere, a hard link to it (ONNX Runtime takes
                        // one; ONNX's checker refuses links of any kind)
                        let dir = path.parent().map(std::path::Path::to_path_buf);
                        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
                        if let (Some(model_dir), Some(dir), Some(name)) = (&opts.model_dir, dir, name) {
                            if std::fs::canonicalize(model_dir).ok() == std::fs::canonicalize(dir).ok() {
                                location = name;
                            }
                        }
                        archive = Some(path);
                    }
                }
                at = offset;
            } else if len >= 1 << 20 {
                // Large tensors start on a 64 KiB boundary so a reader can
                // map them (the alignment onnx.save uses).
                at = at.div_ceil(1 << 16) << 16;
            }
            tensor.data_location = EnumOrUnknown::new(DataLocation::EXTERNAL);
            for (key, value) in [
                ("location", location.clone()),
                ("offset", at.to_string()),
                ("length", len.to_string()),
            ] {
                tensor.external_data.push(StringStringEntryProto {
                    key: key.into(),
                    value,
                    ..Default::default()
                });
            }
            offsets.push(at);
            at += len;
        }
        Some((location, offsets))
    } else {
        None
    };

    let mut model = ModelProto {
        ir_version: ir_version_for(opts.opset),
        producer_name: "pt2kit".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        doc_string: format!(
            "Converted by pt2kit from a torch {} export ({} dialect)",
            program.info.torch_version,
            program.dialect()
        ),
        ..Default::default()
    };
    model.opset_import.push(OperatorSetIdProto {
        domain: String::new(),
        version: opts.opset,
        ..Default::default()
    });
    for domain in custom_domains {
        model.opset_import.push(OperatorSetIdProto {
            domain,
            version: 1,
            ..Default::default()
        });
    }
    let mut meta = vec![
        (
            "pt2.torch_version".to_string(),
            program.info.torch_version.clone(),
        ),
        ("pt2.dialect".to_string(), program.dialect().to_string()),
    ];
    if !program.range_constraints.is_empty() {
        let text: Vec<String> = program
            .range_constraints
            .iter()
            .map(|r| {
                let bound = |b: Option<i64>| b.map_or("inf".to_string(), |v| v.to_string());
                format!("{} in [{}, {}]", r.symbol, bound(r.min), bound(r.max))
            })
            .collect();
        meta.push(("pt2.range_constraints".into(), text.join("; ")));
    }
    for (key, value) in meta {
        model.metadata_props.push(StringStringEntryProto {
            key,
            value,
            ..Default::default()
        });
    }
    graph.name = "main".into();
    model.graph = protobuf::MessageField::some(graph);
    Ok(OnnxModel {
        model,
        program,
        weights,
        external,
        archive,
        stats,
    })
}

/// Where a weight's bytes lie in the archive it came from by reference:
/// (the archive's path, the offset of its first byte).
fn archive_place(program: &Program, w: &Weight) -> Result<(std::path::PathBuf, u64)> {
    let place = program
        .weight_blob(w)
        .and_then(|b| b.file_ref())
        .filter(|r| r.origin.kind == crate::blob::OriginKind::Archive)
        .map(|r| (r.origin.path.clone(), r.offset));
    place.ok_or_else(|| {
        Error::usage(format!(
            "weight '{}' does not lie in a .pt2 archive (external data can point into one only for weights that came from it by reference: pt2ir model.pt2 | ir2onnx ...; here use --external-data, which copies them)",
            w.name
        ))
    })
}

fn weight_nbytes(w: &Weight) -> u64 {
    w.nbytes()
}

pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} bytes")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

fn encode_err(e: protobuf::Error) -> Error {
    Error::internal(format!("encoding the ONNX model: {e}"))
}

fn write_err(e: std::io::Error) -> Error {
    Error::io("writing the ONNX model", e)
}

use crate::wire::push_varint;

fn varint_len(v: u64) -> u64 {
    let mut n = 1;
    let mut v = v >> 7;
    while v != 0 {
        n += 1;
        v >>= 7;
    }
    n
}

// Field numbers of onnx.proto that the streaming writer frames by hand.
const MODEL_GRAPH: u8 = 7 << 3 | 2;
const GRAPH_INITIALIZER: u8 = 5 << 3 | 2;
const TENSOR_RAW_DATA: u8 = 9 << 3 | 2;

impl<'p> OnnxModel<'p> {
    /// The external data file (relative to the model), when weights go there.
    pub fn external_location(&self) -> Option<&str> {
        self.external.as_ref().map(|(l, _)| l.as_str())
    }

    /// Whether [`OnnxModel::stage_external_data`] writes bytes of its own
    /// (not a link to the archive the weights came from, nor nothing).
    pub fn writes_external_data(&self) -> bool {
        self.external.is_some() && self.archive.is_none()
    }

    /// Writes the `.onnx` file. Inline weights are streamed from their
    /// storages into the message framing, never copied into the message.
    pub fn write_model(&self, w: &mut dyn Write) -> Result<()> {
        if self.external.is_some() {
            // Every byte of weights is elsewhere: the message is small.
            let bytes = self.model.write_to_bytes().map_err(encode_err)?;
            return w.write_all(&bytes).map_err(write_err);
        }
        let mut head = self.model.clone();
        let mut graph = head.graph.take().unwrap_or_default();
        let initializers = std::mem::take(&mut graph.initializer);
        let head_bytes = head.write_to_bytes().map_err(encode_err)?;
        let graph_bytes = graph.write_to_bytes().map_err(encode_err)?;
        // Each initializer: its fields but raw_data, then raw_data framed
        // around the weight's bytes.
        let mut frames = Vec::with_capacity(initializers.len());
        let mut graph_len = graph_bytes.len() as u64;
        for (tensor, weight) in initializers.iter().zip(&self.weights) {
            let data_len = weight_nbytes(weight);
            let mut fields = tensor.write_to_bytes().map_err(encode_err)?;
            fields.push(TENSOR_RAW_DATA);
            push_varint(&mut fields, data_len);
            let tensor_len = fields.len() as u64 + data_len;
            let mut frame = vec![GRAPH_INITIALIZER];
            push_varint(&mut frame, tensor_len);
            frame.extend_from_slice(&fields);
            graph_len += frame.len() as u64 + data_len;
            frames.push(frame);
        }
        let total = head_bytes.len() as u64 + 1 + varint_len(graph_len) + graph_len;
        if total > PROTOBUF_LIMIT {
            return Err(Error::unsupported(format!(
                "the model would be {} in one file, over the 2 GiB protobuf limit: use external data",
                human_bytes(total)
            )));
        }
        w.write_all(&head_bytes).map_err(write_err)?;
        let mut prefix = vec![MODEL_GRAPH];
        push_varint(&mut prefix, graph_len);
        w.write_all(&prefix).map_err(write_err)?;
        w.write_all(&graph_bytes).map_err(write_err)?;
        let mut progress =
            crate::progress::Progress::bytes("weights", self.stats.initializer_bytes);
        let mut w = crate::progress::CountingWriter {
            inner: w,
            progress: &mut progress,
        };
        for (frame, weight) in frames.iter().zip(&self.weights) {
            w.write_all(frame).map_err(write_err)?;
            self.write_weight(weight, &mut w)?;
        }
        Ok(())
    }

    /// A weight's bytes, streamed from its storage (`pread` from a file:
    /// memory bounded by one buffer, whatever the weight's size).
    fn write_weight(&self, weight: &Weight, w: &mut dyn Write) -> Result<()> {
        match self.program.weight_blob(weight) {
            Some(blob) => blob.write_range_to(0..blob.len(), w, &mut crc32fast::Hasher::new()),
            None => w
                .write_all(&self.program.weight_bytes(weight))
                .map_err(write_err),
        }
    }

    /// Writes the external data into a staged output: a weight that is a
    /// window of an open file (an archive, an IR file, a spool) copied by
    /// the kernel (`Blob::copy_to_file`), the rest written.
    fn write_external_data_into(&self, out: &mut crate::output::Output) -> Result<()> {
        let Some((_, offsets)) = &self.external else {
            return Ok(());
        };
        if self.archive.is_some() {
            return Ok(());
        }
        let mut at = 0u64;
        let zeros = [0u8; 4096];
        let mut progress =
            crate::progress::Progress::bytes("weights", self.stats.initializer_bytes);
        for (weight, &offset) in self.weights.iter().zip(offsets) {
            if offset == u64::MAX {
                continue;
            }
            while at < offset {
                let n = (offset - at).min(zeros.len() as u64);
                out.writer()
                    .write_all(&zeros[..n as usize])
                    .map_err(write_err)?;
                at += n;
            }
            let n = weight_nbytes(weight);
            let copied = match self.program.weight_blob(weight) {
                Some(blob) if blob.file().is_some() => match out.flushed_file()? {
                    Some(file) => blob.copy_to_file(file)?,
                    None => false,
                },
                _ => false,
            };
            if !copied {
                self.write_weight(weight, out.writer())?;
            }
            progress.inc(n);
            at += n;
        }
        Ok(())
    }

    /// Writes the external data file (nothing when weights are inline).
    pub fn write_external_data(&self, w: &mut dyn Write) -> Result<()> {
        let Some((_, offsets)) = &self.external else {
            return Ok(());
        };
        if self.archive.is_some() {
            // the external data file is the archive itself
            return Ok(());
        }
        let mut at = 0u64;
        let zeros = [0u8; 4096];
        let mut progress =
            crate::progress::Progress::bytes("weights", self.stats.initializer_bytes);
        let mut w = crate::progress::CountingWriter {
            inner: w,
            progress: &mut progress,
        };
        for (weight, &offset) in self.weights.iter().zip(offsets) {
            if offset == u64::MAX {
                continue;
            }
            while at < offset {
                let n = (offset - at).min(zeros.len() as u64);
                w.write_all(&zeros[..n as usize]).map_err(write_err)?;
                at += n;
            }
            self.write_weight(weight, &mut w)?;
            at += weight_nbytes(weight);
        }
        Ok(())
    }

    /// Writes the external data (if any) to a temporary file beside `path`;
    /// [`StagedFile::commit`] renames it into place once the model is
    /// written, so a failure never leaves a model without its data.
    pub fn stage_external_data(&self, path: &Path) -> Result<Option<StagedFile>> {
        if self.external.is_none() {
            return Ok(None);
        }
        if let Some(archive) = &self.archive {
            if self.external_location() == archive.file_name().and_then(|n| n.to_str()) {
                // beside the archive, which is the external data file
                return Ok(None);
            }
            return Ok(Some(StagedFile(crate::output::stage_link(archive, path)?)));
        }
        let mut out = crate::output::open(Some(path), true)?;
        if !out.is_file() {
            return Err(Error::usage(format!(
                "{}: external data must be a regular file beside the model",
                path.display()
            )));
        }
        self.write_external_data_into(&mut out)?;
        Ok(Some(StagedFile(out)))
    }

    /// The whole model in memory, weights inline or not (tests, small models).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.write_model(&mut out)?;
        Ok(out)
    }

    /// Per-op counts as a table, for `--stats`.
    pub fn stats_table(&self) -> String {
        let s = &self.stats;
        let ir_nodes: usize = s.ir_ops.values().map(|(n, _)| n).sum();
        let onnx_nodes: usize = s.onnx_ops.values().sum();
        let opset = self
            .model
            .opset_import
            .iter()
            .find(|o| o.domain.is_empty())
            .map_or(0, |o| o.version);
        let mut out = format!(
            "{ir_nodes} IR nodes -> {onnx_nodes} ONNX nodes (opset {opset}, IR version {}); {} initializers, {} ({})\n",
            self.model.ir_version,
            s.initializers,
            human_bytes(s.initializer_bytes),
            match self.external_location() {
                Some(l) => format!("external data in {l}"),
                None => "inline".into(),
            }
        );
        let width = s.ir_ops.keys().map(|k| k.len()).max().unwrap_or(0).max(7);
        out.push_str(&format!(
            "{:<width$}  {:>5}  {:>5}\n",
            "IR op", "nodes", "ONNX"
        ));
        for (op, (n, m)) in &s.ir_ops {
            out.push_str(&format!("{op:<width$}  {n:>5}  {m:>5}\n"));
        }
        let width = s.onnx_ops.keys().map(|k| k.len()).max().unwrap_or(0).max(7);
        out.push_str(&format!("{:<width$}  {:>5}\n", "ONNX op", "nodes"));
        for (op, n) in &s.onnx_ops {
            out.push_str(&format!("{op:<width$}  {n:>5}\n"));
        }
        if !s.unused_weights.is_empty() {
            out.push_str(&format!(
                "weights no node reads (left out): {}\n",
                s.unused_weights.join(", ")
            ));
        }
        for (node, op) in &s.custom_nodes {
            out.push_str(&format!("custom node: {node} ({op})\n"));
        }
        out
    }
}

/// A file written under a temporary name, renamed by [`StagedFile::commit`]
/// (dropped uncommitted, it is removed).
pub struct StagedFile(crate::output::Output);

impl StagedFile {
    pub fn commit(self) -> Result<()> {
        self.0.commit()
    }
}

/// A `TensorProto` with the given bytes inline (constants).
pub(crate) fn tensor_proto(name: &str, dtype: DataType, dims: &[i64], raw: Vec<u8>) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: dtype as i32,
        raw_data: raw,
        ..Default::default()
    }
}

/// Every failure in one error: (node, op, reason).
pub(crate) fn failures_error(
    failures: &[(String, String, String)],
    opset: i64,
    kind: ErrorKind,
) -> Error {
    let ops: std::collections::BTreeSet<&str> = failures.iter().map(|f| f.1.as_str()).collect();
    let mut msg = format!(
        "cannot convert {} node{} ({} op{}) to ONNX opset {opset}; nothing was written (--allow-custom writes unsupported ops as custom-domain nodes):",
        failures.len(),
        if failures.len() == 1 { "" } else { "s" },
        ops.len(),
        if ops.len() == 1 { "" } else { "s" },
    );
    for (node, op, reason) in failures {
        msg.push_str(&format!("\n  node '{node}' ({op}): {reason}"));
    }
    Error::new(kind, msg)
}
