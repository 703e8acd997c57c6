//! `.pt2` archives (written by `torch.export.save`) into the IR.
//!
//! Layouts read (see the table in docs/formats.md):
//! - the PT2 archive with raw weight payloads and `*_weights_config.json`
//!   (torch 2.9 and newer);
//! - the PT2 archive with weights pickled as `data/weights/<model>.pt`;
//! - the torch <= 2.7 plain zip with a root-level
//!   `serialized_exported_program.json` and `serialized_state_dict.pt`.
//!
//! Pickles are parsed by [`super::pickle`], never executed.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;

use serde_json::Value as Json;

use super::json::{arr, boolean, float, int, name_field, obj, opt, req, string, union};
use super::pickle;
use crate::blob::Blob;
use crate::error::{Context, Error, Result};
use crate::ir::validate::check_view;
use crate::ir::*;
use crate::schema;
use crate::zip::Archive;

/// Schema majors this reader understands (0.0 is torch's "unversioned").
pub const SUPPORTED_SCHEMA_MAJOR: u32 = 8;

#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// Which `models/<name>.json` to read (`torch.export.save` writes `model`).
    pub model: String,
    /// Check the CRC-32 of every weight payload (while it streams out).
    /// Off by default, like torch's own reader (built with
    /// MINIZ_DISABLE_ZIP_READER_CRC32_CHECKS); sizes and bounds are always
    /// checked, and small members (JSON, configs) always have their CRC checked.
    pub verify_weights: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            model: "model".into(),
            verify_weights: false,
        }
    }
}

/// Reads a `.pt2` file into a validated program.
pub fn read_pt2(path: &Path, opts: &ImportOptions) -> Result<Program> {
    let archive = Archive::open(path).map_err(|e| {
        if e.kind == crate::error::ErrorKind::Io {
            return e;
        }
        let mut head = Vec::new();
        let _ = std::fs::File::open(path)
            .and_then(|f| std::io::Read::take(f, 4096).read_to_end(&mut head));
        what_it_is(&path.display().to_string(), &head).unwrap_or(e)
    })?;
    read_pt2_archive(&archive, opts)
}

/// Reads archive bytes already in memory (`pt2ir -` reading stdin).
pub fn read_pt2_bytes(name: &str, bytes: Vec<u8>, opts: &ImportOptions) -> Result<Program> {
    if let Some(e) = what_it_is(name, &bytes[..bytes.len().min(4096)]) {
        return Err(e);
    }
    read_pt2_archive(
        &Archive::from_blob(name.to_string(), Blob::owned(bytes))?,
        opts,
    )
}

/// A file that is no zip, named for what it is and the tool that reads it.
fn what_it_is(name: &str, head: &[u8]) -> Option<Error> {
    use crate::tensorfile::{sniff, FileKind};
    let says = match sniff(head) {
        FileKind::IrStream => {
            "an IR stream (pt2ir's own output): ir-decompose, ir2onnx, ir-run and ir-bench read it"
        }
        FileKind::Onnx => {
            "an ONNX (or other protobuf) file: pt2ir reads the archive torch.export.save writes"
        }
        FileKind::Npz | FileKind::Npy | FileKind::Safetensors => {
            "a tensor file: ir-run --inputs reads it"
        }
        FileKind::Text => "text (a listing?): pt2ir reads the archive torch.export.save writes",
        FileKind::Empty => "empty",
        FileKind::Zip | FileKind::Unknown => return None,
    };
    Some(Error::bad_input(format!(
        "{name}: not a .pt2 archive but {says}"
    )))
}

fn read_pt2_archive(archive: &Archive, opts: &ImportOptions) -> Result<Program> {
    let entries = archive.entries();
    if !entries.is_empty() && entries.iter().all(|e| e.name.ends_with(".npy")) {
        return Err(Error::bad_input(format!(
            "{}: not a .pt2 archive but an .npz tensor file: ir-run --inputs reads it",
            archive.path
        )));
    }
    let program = if archive.contains("serialized_exported_program.json") {
        read_legacy_zip(archive)?
    } else {
        read_archive(archive, opts)?
    };
    crate::ir::validate::validate(&program).at(|| archive.path.clone())?;
    Ok(program)
}

fn text_member(archive: &Archive, name: &str) -> Result<String> {
    let blob = archive.member(name)?;
    String::from_utf8(blob.to_vec())
        .map_err(|_| Error::bad_input(format!("{}: member '{name}' is not UTF-8", archive.path)))
}

fn json_member(archive: &Archive, name: &str) -> Result<Json> {
    let blob = archive.member(name)?;
    serde_json::from_slice(&blob).map_err(|e| {
        Error::bad_input(format!(
            "{}: member '{name}': malformed JSON: {e}",
            archive.path
        ))
    })
}

fn read_archive(archive: &Archive, opts: &ImportOptions) -> Result<Program> {
    let path = &archive.path;
    let root = archive
        .entries()
        .iter()
        .find_map(|e| e.name.split_once('/').map(|(r, _)| r.to_string()))
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{path}: not a PT2 archive: its entries are not in a root folder"
            ))
        })?;
    let member = |rel: &str| format!("{root}/{rel}");

    let format_name = member("archive_format");
    if !archive.contains(&format_name) {
        return Err(Error::bad_input(format!(
            "{path}: not a PT2 archive: member '{format_name}' is missing"
        )));
    }
    let format = text_member(archive, &format_name)?;
    if format.trim() != "pt2" {
        return Err(Error::bad_input(format!(
            "{path}: member '{format_name}' says {:?}, expected \"pt2\"",
            format.trim()
        )));
    }
    let version_name = member("archive_version");
    if archive.contains(&version_name) {
        let v = text_member(archive, &version_name)?;
        if v.trim() != "0" {
            return Err(Error::unsupported(format!(
                "{path}: member '{version_name}': PT2 archive version {:?} is not supported (this reader knows version 0)",
                v.trim()
            )));
        }
    }
    let big_endian = {
        let name = member("byteorder");
        archive.contains(&name) && text_member(archive, &name)?.trim() == "big"
    };

    let model_name = member(&format!("models/{}.json", opts.model));
    let aoti = member("data/aotinductor/");
    if !archive.contains(&model_name) && archive.entries().iter().any(|e| e.name.starts_with(&aoti))
    {
        return Err(Error::unsupported(format!(
            "{path}: an AOTInductor package (compiled code under '{aoti}', written by torch._inductor.aoti_compile_and_package), not an exported program: save the ExportedProgram itself with torch.export.save(ep, \"model.pt2\") and read that"
        )));
    }
    if !archive.contains(&model_name) {
        let models: Vec<&str> = archive
            .entries()
            .iter()
            .filter_map(|e| e.name.strip_prefix(&member("models/")))
            .filter_map(|n| n.strip_suffix(".json"))
            .collect();
        return Err(Error::bad_input(format!(
            "{path}: member '{model_name}' is missing (models in the archive: {})",
            if models.is_empty() {
                "none".to_string()
            } else {
                models.join(", ")
            }
        )));
    }
    let weights_config = member(&format!("data/weights/{}_weights_config.json", opts.model));
    let constants_config = member(&format!(
        "data/constants/{}_constants_config.json",
        opts.model
    ));
    let legacy_weights = member(&format!("data/weights/{}.pt", opts.model));
    let legacy_constants = member(&format!("data/constants/{}.pt", opts.model));
    let read_payloads = || -> Result<(Payloads, &'static str)> {
        let mut payloads = Payloads::default();
        if archive.contains(&weights_config) || archive.contains(&constants_config) {
            for (config, dir) in [
                (&weights_config, member("data/weights")),
                (&constants_config, member("data/constants")),
            ] {
                if archive.contains(config) {
                    read_payload_config(
                        archive,
                        config,
                        &dir,
                        big_endian,
                        opts.verify_weights,
                        &mut payloads,
                    )?;
                }
            }
            Ok((payloads, "pt2 archive v0, raw weights"))
        } else if archive.contains(&legacy_weights) || archive.contains(&legacy_constants) {
            for name in [&legacy_weights, &legacy_constants] {
                if archive.contains(name) {
                    let blob = archive.member(name)?;
                    let tensors =
                        pickle::read_torch_save(blob, &format!("{path}: member '{name}'"))?;
                    payloads.add_pickled(tensors);
                }
            }
            Ok((payloads, "pt2 archive v0, pickled weights"))
        } else {
            Ok((payloads, "pt2 archive v0, no weights"))
        }
    };
    let read_graph = || -> Result<Program> {
        let json = json_member(archive, &model_name)?;
        let program = convert_program(&json).at(|| format!("{path}: member '{model_name}'"))?;
        // Freeing a large JSON tree takes a few ms: do it off the critical path.
        std::thread::spawn(move || drop(json));
        Ok(program)
    };
    // The graph and the weight configs are independent: read them at once.
    let (program, payloads) = std::thread::scope(|scope| {
        let payloads = scope.spawn(read_payloads);
        let program = read_graph();
        let payloads = payloads
            .join()
            .unwrap_or_else(|_| Err(Error::internal("the weight reader panicked")));
        (program, payloads)
    });
    let mut program = program?;
    let (payloads, layout) = payloads?;
    program.info.archive_layout = layout.into();
    for entry in archive.entries() {
        if let Some(extra) = entry.name.strip_prefix(&member("extra/")) {
            let text = text_member(archive, &entry.name)?;
            program.info.extra_files.push((extra.to_string(), text));
        }
    }
    payloads.bind(&mut program).at(|| path.clone())?;
    Ok(program)
}

/// The torch <= 2.7 layout: entries at the zip root.
fn read_legacy_zip(archive: &Archive) -> Result<Program> {
    let path = &archive.path;
    let name = "serialized_exported_program.json";
    let json = json_member(archive, name)?;
    let mut program = convert_program(&json).at(|| format!("{path}: member '{name}'"))?;
    program.info.archive_layout = "legacy zip (torch <= 2.7)".into();
    let mut payloads = Payloads::default();
    for member in ["serialized_state_dict.pt", "serialized_constants.pt"] {
        if archive.contains(member) {
            let blob = archive.member(member)?;
            if blob.is_empty() {
                continue;
            }
            let tensors = pickle::read_torch_save(blob, &format!("{path}: member '{member}'"))?;
            payloads.add_pickled(tensors);
        }
    }
    payloads.bind(&mut program).at(|| path.clone())?;
    Ok(program)
}

/// Weight payloads found in the archive, before they are matched to the
/// signature.
#[derive(Default)]
struct Payloads {
    storages: Vec<Blob>,
    by_name: BTreeMap<String, (TensorMeta, u32)>,
}

impl Payloads {
    fn add_pickled(&mut self, tensors: Vec<pickle::SavedTensor>) {
        let mut storage_ids: HashMap<String, u32> = HashMap::new();
        for t in tensors {
            let id = *storage_ids.entry(t.storage_key.clone()).or_insert_with(|| {
                self.storages.push(t.storage.clone());
                (self.storages.len() - 1) as u32
            });
            self.by_name.insert(t.name, (t.meta, id));
        }
    }

    /// Orders weights by the signature and gives each its kind.
    fn bind(self, program: &mut Program) -> Result<()> {
        let mut by_name = self.by_name;
        let mut weights = Vec::new();
        for kind in &program.input_kinds {
            let (name, weight_kind) = match kind {
                InputKind::Parameter(n) => (n, WeightKind::Parameter),
                InputKind::Buffer(n) | InputKind::NonPersistentBuffer(n) => (n, WeightKind::Buffer),
                InputKind::TensorConstant(n) => (n, WeightKind::Constant),
                _ => continue,
            };
            if weights.iter().any(|w: &Weight| &w.name == name) {
                continue;
            }
            let (meta, storage) = by_name.remove(name).ok_or_else(|| {
                Error::bad_input(format!(
                    "{} '{name}' has no payload in the archive's weights or constants",
                    match weight_kind {
                        WeightKind::Parameter => "parameter",
                        WeightKind::Buffer => "buffer",
                        WeightKind::Constant => "tensor constant",
                    }
                ))
            })?;
            weights.push(Weight {
                name: name.clone(),
                kind: weight_kind,
                meta,
                storage,
            });
        }
        // Payloads the signature does not use (kept: the IR is a container).
        for (name, (meta, storage)) in by_name {
            weights.push(Weight {
                name,
                kind: WeightKind::Constant,
                meta,
                storage,
            });
        }
        program.weights = weights;
        program.storages = self.storages;
        Ok(())
    }
}

fn read_payload_config(
    archive: &Archive,
    config_name: &str,
    dir: &str,
    big_endian: bool,
    verify: bool,
    payloads: &mut Payloads,
) -> Result<()> {
    let path = &archive.path;
    let json = json_member(archive, config_name)?;
    let at = || format!("{path}: member '{config_name}'");
    let config = obj(
        req(obj(&json, "payload config").at(at)?, "config").at(at)?,
        "config",
    )
    .at(at)?;
    let mut storage_ids: HashMap<String, u32> = HashMap::new();
    for (fqn, entry) in config {
        let what = || format!("{path}: member '{config_name}': weight '{fqn}'");
        let entry = obj(entry, "payload").at(what)?;
        let file = string(req(entry, "path_name").at(what)?, "path_name").at(what)?;
        let member_name = format!("{dir}/{file}");
        if opt(entry, "use_pickle").and_then(Json::as_bool) == Some(true) {
            return Err(Error::unsupported(format!(
                "{path}: member '{member_name}': weight '{fqn}' is pickled (use_pickle: true, a tensor subclass such as a quantized or wrapper tensor); pickled payloads are parsed, never executed, and this one cannot be rebuilt without running Python code"
            )));
        }
        let meta_json = opt(entry, "tensor_meta")
            .ok_or_else(|| Error::bad_input("tensor_meta is missing"))
            .at(what)?;
        let meta = convert_tensor_meta(meta_json).at(what)?;
        let id = match storage_ids.get(file) {
            Some(id) => *id,
            None => {
                let mut blob = if verify {
                    archive.member_deferred(&member_name)?
                } else {
                    archive.member_unverified(&member_name)?
                };
                let elem = meta.dtype.size().max(1);
                if blob.len() % elem != 0 {
                    return Err(Error::bad_input(format!(
                        "weight '{fqn}': member '{member_name}' has {} bytes, not a multiple of the {elem}-byte {} element",
                        blob.len(),
                        meta.dtype
                    ))
                    .at(path.clone()));
                }
                if big_endian && elem > 1 {
                    blob.verify()?;
                    let mut bytes = blob.to_vec();
                    bytes.chunks_exact_mut(elem).for_each(|c| c.reverse());
                    blob = Blob::owned(bytes);
                }
                payloads.storages.push(blob);
                let id = (payloads.storages.len() - 1) as u32;
                storage_ids.insert(file.to_string(), id);
                id
            }
        };
        check_view(&meta, payloads.storages[id as usize].len()).map_err(|msg| {
            Error::bad_input(format!("weight '{fqn}': {msg} (member '{member_name}')"))
                .at(path.clone())
        })?;
        payloads.by_name.insert(fqn.clone(), (meta, id));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// model.json

fn convert_program(json: &Json) -> Result<Program> {
    let top = obj(json, "exported program")?;
    let mut info = ProgramInfo::default();
    let (major, minor) = match opt(top, "schema_version") {
        Some(v) => {
            let m = obj(v, "schema_version")?;
            (
                int(req(m, "major")?, "schema_version.major")? as u32,
                int(req(m, "minor")?, "schema_version.minor")? as u32,
            )
        }
        None => (0, 0),
    };
    if !(major == SUPPORTED_SCHEMA_MAJOR || (major, minor) == (0, 0)) {
        return Err(Error::unsupported(format!(
            "export schema version {major}.{minor} is not supported (this reader reads major {SUPPORTED_SCHEMA_MAJOR})"
        )));
    }
    info.schema_major = major;
    info.schema_minor = minor;
    info.torch_version = match opt(top, "torch_version") {
        Some(v) => string(v, "torch_version")?.to_string(),
        None => "<=2.4".into(),
    };
    if let Some(v) = opt(top, "verifiers") {
        for x in arr(v, "verifiers")? {
            info.verifiers.push(string(x, "verifiers")?.to_string());
        }
    } else if let Some(v) = opt(top, "dialect") {
        info.verifiers.push(string(v, "dialect")?.to_string());
    }
    if let Some(v) = opt(top, "opset_version") {
        for (k, x) in obj(v, "opset_version")? {
            info.opset_version.push((k.clone(), x.to_string()));
        }
    }
    if let Some(v) = opt(top, "guards_code") {
        for x in arr(v, "guards_code")? {
            info.guards_code.push(string(x, "guards_code")?.to_string());
        }
    }
    let gm = obj(req(top, "graph_module")?, "graph_module")?;
    if let Some(v) = opt(gm, "metadata") {
        for (k, x) in obj(v, "graph_module.metadata")? {
            info.metadata.push((
                k.clone(),
                x.as_str()
                    .map(String::from)
                    .unwrap_or_else(|| x.to_string()),
            ));
        }
    }
    if let Some(v) = opt(gm, "module_call_graph") {
        for entry in arr(v, "module_call_graph")? {
            let e = obj(entry, "module_call_graph entry")?;
            if opt(e, "fqn").and_then(Json::as_str) != Some("") {
                continue;
            }
            if let Some(sig) = opt(e, "signature") {
                let sig = obj(sig, "module_call_graph signature")?;
                if let Some(s) = opt(sig, "in_spec").and_then(Json::as_str) {
                    info.in_spec = s.to_string();
                }
                if let Some(s) = opt(sig, "out_spec").and_then(Json::as_str) {
                    info.out_spec = s.to_string();
                }
                if let Some(names) = opt(sig, "forward_arg_names") {
                    for n in arr(names, "forward_arg_names")? {
                        info.forward_arg_names
                            .push(string(n, "forward_arg_names")?.to_string());
                    }
                }
            }
        }
    }
    let graph = convert_graph(req(gm, "graph")?).at(|| "graph")?;
    let signature = obj(req(gm, "signature")?, "signature")?;
    let mut input_kinds = Vec::new();
    for (i, spec) in arr(req(signature, "input_specs")?, "input_specs")?
        .iter()
        .enumerate()
    {
        input_kinds.push(convert_input_spec(spec).at(|| format!("signature input {i}"))?);
    }
    let mut output_kinds = Vec::new();
    for (i, spec) in arr(req(signature, "output_specs")?, "output_specs")?
        .iter()
        .enumerate()
    {
        output_kinds.push(convert_output_spec(spec).at(|| format!("signature output {i}"))?);
    }
    if input_kinds.len() != graph.inputs.len() {
        return Err(Error::bad_input(format!(
            "the signature has {} input specs but the graph has {} inputs",
            input_kinds.len(),
            graph.inputs.len()
        )));
    }
    if output_kinds.len() != graph.outputs.len() {
        return Err(Error::bad_input(format!(
            "the signature has {} output specs but the graph has {} outputs",
            output_kinds.len(),
            graph.outputs.len()
        )));
    }
    let mut range_constraints = Vec::new();
    if let Some(v) = opt(top, "range_constraints") {
        for (symbol, r) in obj(v, "range_constraints")? {
            let r = obj(r, "range constraint").at(|| format!("range constraint '{symbol}'"))?;
            let bound = |key: &str| -> Result<Option<i64>> {
                match opt(r, key) {
                    None => Ok(None),
                    Some(Json::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64()),
                    // Python ints beyond i64 (int_oo stand-ins): unbounded.
                    Some(Json::Number(_)) => Ok(None),
                    Some(other) => Err(Error::bad_input(format!(
                        "range constraint '{symbol}': {key} is {other}, expected an integer or null"
                    ))),
                }
            };
            range_constraints.push(RangeConstraint {
                symbol: symbol.clone(),
                min: bound("min_val")?,
                max: bound("max_val")?,
            });
        }
    }
    Ok(Program {
        info,
        graph,
        input_kinds,
        output_kinds,
        range_constraints,
        weights: Vec::new(),
        storages: Vec::new(),
    })
}

fn convert_input_spec(spec: &Json) -> Result<InputKind> {
    let (tag, body) = union(spec, "input spec")?;
    let b = obj(body, tag)?;
    let s = |key: &str| -> Result<String> { Ok(string(req(b, key)?, key)?.to_string()) };
    Ok(match tag {
        "user_input" => InputKind::UserInput,
        "parameter" => InputKind::Parameter(s("parameter_name")?),
        "buffer" => {
            let persistent = opt(b, "persistent").and_then(Json::as_bool).unwrap_or(true);
            if persistent {
                InputKind::Buffer(s("buffer_name")?)
            } else {
                InputKind::NonPersistentBuffer(s("buffer_name")?)
            }
        }
        "tensor_constant" => InputKind::TensorConstant(s("tensor_constant_name")?),
        "custom_obj" => InputKind::CustomObj(s("custom_obj_name")?),
        "token" => InputKind::Token,
        "constant_input" => InputKind::ConstantInput(s("name")?),
        other => {
            return Err(Error::unsupported(format!(
                "input spec kind '{other}' is not known to this reader"
            )))
        }
    })
}

fn convert_output_spec(spec: &Json) -> Result<OutputKind> {
    let (tag, body) = union(spec, "output spec")?;
    let b = obj(body, tag)?;
    let s = |key: &str| -> Result<String> { Ok(string(req(b, key)?, key)?.to_string()) };
    Ok(match tag {
        "user_output" => OutputKind::UserOutput,
        "loss_output" => OutputKind::LossOutput,
        "buffer_mutation" => OutputKind::BufferMutation(s("buffer_name")?),
        "gradient_to_parameter" => OutputKind::GradientToParameter(s("parameter_name")?),
        "gradient_to_user_input" => OutputKind::GradientToUserInput(s("user_input_name")?),
        "user_input_mutation" => OutputKind::UserInputMutation(s("user_input_name")?),
        "token" => OutputKind::Token,
        "parameter_mutation" => OutputKind::ParameterMutation(s("parameter_name")?),
        other => {
            return Err(Error::unsupported(format!(
                "output spec kind '{other}' is not known to this reader"
            )))
        }
    })
}

fn convert_sym(v: &Json, what: &str) -> Result<Sym> {
    let (tag, body) = union(v, what)?;
    match tag {
        "as_int" => Ok(Sym::Int(int(body, what)?)),
        "as_float" => Ok(Sym::Float(float(body, what)?)),
        "as_bool" => Ok(Sym::Bool(boolean(body, what)?)),
        "as_expr" => {
            let e = obj(body, what)?;
            let text = string(req(e, "expr_str")?, "expr_str")?;
            let expr = SymExpr::parse(text).map_err(Error::bad_input)?;
            let hint = match opt(e, "hint") {
                None => None,
                Some(h) => {
                    let (htag, hv) = union(h, "hint")?;
                    Some(match htag {
                        "as_int" => Hint::Int(int(hv, "hint")?),
                        "as_float" => Hint::Float(float(hv, "hint")?),
                        "as_bool" => Hint::Bool(boolean(hv, "hint")?),
                        other => {
                            return Err(Error::bad_input(format!(
                                "{what}: unknown hint kind '{other}'"
                            )))
                        }
                    })
                }
            };
            Ok(Sym::Expr { expr, hint })
        }
        other => Err(Error::bad_input(format!(
            "{what}: unknown symbolic value kind '{other}'"
        ))),
    }
}

fn convert_tensor_meta(v: &Json) -> Result<TensorMeta> {
    let m = obj(v, "tensor meta")?;
    let code = int(req(m, "dtype")?, "dtype")?;
    let dtype = u32::try_from(code)
        .ok()
        .and_then(Dtype::from_code)
        .ok_or_else(|| Error::bad_input(format!("dtype {code} is not a known ScalarType")))?;
    let syms = |key: &str| -> Result<Vec<Sym>> {
        match opt(m, key) {
            None => Ok(Vec::new()),
            Some(list) => arr(list, key)?
                .iter()
                .map(|d| convert_sym(d, key))
                .collect(),
        }
    };
    let sizes = syms("sizes")?;
    let strides = syms("strides")?;
    let storage_offset = match opt(m, "storage_offset") {
        Some(o) => convert_sym(o, "storage_offset")?,
        None => Sym::Int(0),
    };
    let device = match opt(m, "device") {
        Some(d) => convert_device(d)?,
        None => Device::default(),
    };
    let layout_code = opt(m, "layout")
        .map(|l| int(l, "layout"))
        .transpose()?
        .unwrap_or(7);
    let layout = u32::try_from(layout_code)
        .ok()
        .and_then(Layout::from_code)
        .ok_or_else(|| Error::bad_input(format!("layout {layout_code} is not a known Layout")))?;
    Ok(TensorMeta {
        dtype,
        sizes,
        strides,
        storage_offset,
        device,
        layout,
        requires_grad: opt(m, "requires_grad")
            .and_then(Json::as_bool)
            .unwrap_or(false),
    })
}

fn convert_device(v: &Json) -> Result<Device> {
    let d = obj(v, "device")?;
    Ok(Device {
        kind: string(req(d, "type")?, "device type")?.to_string(),
        index: opt(d, "index")
            .map(|i| int(i, "device index").map(|i| i as i32))
            .transpose()?,
    })
}

/// One graph's scope: value names to ids, and the metadata maps.
struct Scope<'a> {
    ids: HashMap<String, ValueId>,
    values: Vec<Value>,
    tensor_meta: Option<&'a serde_json::Map<String, Json>>,
    sym_ints: Option<&'a serde_json::Map<String, Json>>,
    sym_bools: Option<&'a serde_json::Map<String, Json>>,
    sym_floats: Option<&'a serde_json::Map<String, Json>>,
    custom_objs: Option<&'a serde_json::Map<String, Json>>,
}

impl Scope<'_> {
    /// Defines a value (idempotent), looking up its metadata by name.
    fn define(&mut self, name: &str) -> Result<ValueId> {
        if let Some(id) = self.ids.get(name) {
            return Ok(*id);
        }
        let kind = if let Some(m) = self.tensor_meta.and_then(|m| m.get(name)) {
            ValueKind::Tensor(convert_tensor_meta(m).at(|| format!("tensor value '{name}'"))?)
        } else if let Some(s) = self.sym_ints.and_then(|m| m.get(name)) {
            ValueKind::SymInt(convert_sym(s, name)?)
        } else if let Some(s) = self.sym_bools.and_then(|m| m.get(name)) {
            ValueKind::SymBool(convert_sym(s, name)?)
        } else if let Some(s) = self.sym_floats.and_then(|m| m.get(name)) {
            ValueKind::SymFloat(convert_sym(s, name)?)
        } else if let Some(c) = self.custom_objs.and_then(|m| m.get(name)) {
            let class = opt(obj(c, name)?, "class_fqn")
                .and_then(Json::as_str)
                .unwrap_or("")
                .to_string();
            ValueKind::CustomObj(class)
        } else {
            return Err(Error::bad_input(format!(
                "value '{name}' is not defined in the graph (no tensor or symbolic metadata)"
            )));
        };
        let id = ValueId(self.values.len() as u32);
        self.values.push(Value {
            name: name.to_string(),
            kind,
        });
        self.ids.insert(name.to_string(), id);
        Ok(id)
    }

    fn define_token(&mut self, name: &str) -> ValueId {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = ValueId(self.values.len() as u32);
        self.values.push(Value {
            name: name.to_string(),
            kind: ValueKind::Token,
        });
        self.ids.insert(name.to_string(), id);
        id
    }

    fn lookup(&self, name: &str) -> Result<ValueId> {
        self.ids.get(name).copied().ok_or_else(|| {
            Error::bad_input(format!(
                "refers to value '{name}', which the graph does not define"
            ))
        })
    }
}

/// Names a graph argument defines when it appears as a graph input or a
/// node output.
fn defined_names<'a>(arg: &'a Json, out: &mut Vec<&'a str>) {
    let Ok((tag, body)) = union(arg, "argument") else {
        return;
    };
    match tag {
        "as_tensor" | "as_custom_obj" => {
            if let Some(n) = body.get("name").and_then(Json::as_str) {
                out.push(n)
            }
        }
        "as_tensors" => {
            if let Some(list) = body.as_array() {
                out.extend(
                    list.iter()
                        .filter_map(|t| t.get("name").and_then(Json::as_str)),
                )
            }
        }
        "as_optional_tensors" => {
            if let Some(list) = body.as_array() {
                for t in list {
                    if let Some(n) = t
                        .get("as_tensor")
                        .and_then(|t| t.get("name"))
                        .and_then(Json::as_str)
                    {
                        out.push(n)
                    }
                }
            }
        }
        "as_sym_int" | "as_sym_bool" | "as_sym_float" => {
            if let Some(n) = body.get("as_name").and_then(Json::as_str) {
                out.push(n)
            }
        }
        "as_sym_ints" | "as_sym_bools" | "as_sym_floats" => {
            if let Some(list) = body.as_array() {
                out.extend(
                    list.iter()
                        .filter_map(|t| t.get("as_name").and_then(Json::as_str)),
                )
            }
        }
        _ => {}
    }
}

fn convert_graph(v: &Json) -> Result<Graph> {
    let g = obj(v, "graph")?;
    let map = |key: &str| -> Result<Option<&serde_json::Map<String, Json>>> {
        opt(g, key).map(|m| obj(m, key)).transpose()
    };
    let mut scope = Scope {
        ids: HashMap::new(),
        values: Vec::new(),
        tensor_meta: map("tensor_values")?,
        sym_ints: map("sym_int_values")?,
        sym_bools: map("sym_bool_values")?,
        sym_floats: map("sym_float_values")?,
        custom_objs: map("custom_obj_values")?,
    };
    let inputs_json = arr(req(g, "inputs")?, "graph inputs")?;
    let nodes_json = arr(req(g, "nodes")?, "graph nodes")?;
    let outputs_json = arr(req(g, "outputs")?, "graph outputs")?;

    // Definitions first (graph inputs, then node outputs in order), so ids
    // follow definition order.
    for (i, input) in inputs_json.iter().enumerate() {
        let mut names = Vec::new();
        defined_names(input, &mut names);
        for n in names {
            match scope.define(n) {
                Ok(_) => {}
                Err(_) if input.get("as_token").is_some() => {
                    scope.define_token(n);
                }
                Err(e) => return Err(e.at(format!("graph input {i}"))),
            }
        }
    }
    for node in nodes_json {
        let n = obj(node, "node")?;
        let node_name = node_display_name(n);
        if let Some(outs) = opt(n, "outputs") {
            for out in arr(outs, "node outputs")? {
                let mut names = Vec::new();
                defined_names(out, &mut names);
                for name in names {
                    scope
                        .define(name)
                        .at(|| format!("node '{node_name}' output '{name}'"))?;
                }
            }
        }
    }
    // Metadata for names nothing defines (kept: a faithful container).
    for m in [
        scope.tensor_meta,
        scope.sym_ints,
        scope.sym_bools,
        scope.sym_floats,
    ]
    .into_iter()
    .flatten()
    {
        for name in m.keys() {
            scope.define(name)?;
        }
    }

    let mut inputs = Vec::new();
    for (i, input) in inputs_json.iter().enumerate() {
        inputs.push(convert_argument(input, &scope).at(|| format!("graph input {i}"))?);
    }
    let mut nodes = Vec::new();
    for node in nodes_json {
        let n = obj(node, "node")?;
        let name = node_display_name(n);
        nodes.push(convert_node(n, &name, &scope).at(|| format!("node '{name}'"))?);
    }
    let mut outputs = Vec::new();
    for (i, out) in outputs_json.iter().enumerate() {
        outputs.push(convert_argument(out, &scope).at(|| format!("graph output {i}"))?);
    }
    Ok(Graph {
        values: scope.values,
        inputs,
        nodes,
        outputs,
        is_single_tensor_return: opt(g, "is_single_tensor_return")
            .and_then(Json::as_bool)
            .unwrap_or(false),
    })
}

/// The node's name, or (older files) its first output's name.
fn node_display_name(n: &serde_json::Map<String, Json>) -> String {
    if let Some(name) = opt(n, "name").and_then(Json::as_str) {
        return name.to_string();
    }
    let mut names = Vec::new();
    if let Some(outs) = opt(n, "outputs").and_then(Json::as_array) {
        outs.iter().for_each(|o| defined_names(o, &mut names));
    }
    names.first().map(|s| s.to_string()).unwrap_or_else(|| {
        opt(n, "target")
            .and_then(Json::as_str)
            .unwrap_or("node")
            .to_string()
    })
}

fn convert_node(n: &serde_json::Map<String, Json>, name: &str, scope: &Scope) -> Result<Node> {
    let target_text = string(req(n, "target")?, "target")?;
    let target = Target::parse(target_text)
        .ok_or_else(|| Error::bad_input(format!("target {target_text:?} is not understood")))?;
    let mut inputs = Vec::new();
    for input in arr(req(n, "inputs")?, "inputs")? {
        let a = obj(input, "named argument")?;
        let arg_name = opt(a, "name")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string();
        let arg = convert_argument(req(a, "arg")?, scope).at(|| {
            if arg_name.is_empty() {
                "input".to_string()
            } else {
                format!("input '{arg_name}'")
            }
        })?;
        let kind = match opt(a, "kind").and_then(Json::as_i64) {
            Some(1) => ArgKind::Positional,
            Some(2) => ArgKind::Keyword,
            _ => ArgKind::Unknown,
        };
        inputs.push(NamedArg {
            name: arg_name,
            arg,
            kind,
            defaulted: false,
        });
    }
    if target.kind == TargetKind::Op {
        if let Some(schema) = schema::lookup(&target.namespace, &target.name, &target.overload) {
            inputs = schema::fill_defaults(inputs, &schema);
        }
    }
    let mut outputs = Vec::new();
    if let Some(outs) = opt(n, "outputs") {
        for (i, out) in arr(outs, "outputs")?.iter().enumerate() {
            outputs.push(convert_argument(out, scope).at(|| format!("output {i}"))?);
        }
    }
    let mut meta = NodeMeta::default();
    if let Some(m) = opt(n, "metadata") {
        for (k, v) in obj(m, "metadata")? {
            let text = v
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| v.to_string());
            match k.as_str() {
                "stack_trace" => meta.stack_trace = Some(text),
                "nn_module_stack" => meta.module_stack = Some(text),
                _ => meta.other.push((k.clone(), text)),
            }
        }
    }
    Ok(Node {
        name: name.to_string(),
        target,
        inputs,
        outputs,
        meta,
        is_hop_single_tensor_return: opt(n, "is_hop_single_tensor_return").and_then(Json::as_bool),
    })
}

fn convert_sym_ref(v: &Json, scope: &Scope, literal: &str, what: &str) -> Result<SymRef> {
    let (tag, body) = union(v, what)?;
    match tag {
        "as_name" => Ok(SymRef::Value(scope.lookup(string(body, what)?)?)),
        t if t == literal => Ok(match literal {
            "as_int" => SymRef::Int(int(body, what)?),
            "as_float" => SymRef::Float(float(body, what)?),
            _ => SymRef::Bool(boolean(body, what)?),
        }),
        other => Err(Error::bad_input(format!("{what}: unknown kind '{other}'"))),
    }
}

fn scalar_enum<T>(body: &Json, what: &str, from: fn(u32) -> Option<T>) -> Result<T> {
    let code = int(body, what)?;
    u32::try_from(code)
        .ok()
        .and_then(from)
        .ok_or_else(|| Error::bad_input(format!("{what} {code} is not a known value")))
}

fn convert_argument(v: &Json, scope: &Scope) -> Result<Argument> {
    let (tag, body) = union(v, "argument")?;
    let tensor = |t: &Json| -> Result<ValueId> { scope.lookup(name_field(t, "tensor")?) };
    let list = |what: &str| arr(body, what);
    Ok(match tag {
        "as_none" => Argument::None,
        "as_tensor" => Argument::Tensor(tensor(body)?),
        "as_tensors" => Argument::Tensors(list(tag)?.iter().map(tensor).collect::<Result<_>>()?),
        "as_int" => Argument::Int(int(body, tag)?),
        "as_ints" => Argument::Ints(list(tag)?.iter().map(|x| int(x, tag)).collect::<Result<_>>()?),
        "as_float" => Argument::Float(float(body, tag)?),
        "as_floats" => {
            Argument::Floats(list(tag)?.iter().map(|x| float(x, tag)).collect::<Result<_>>()?)
        }
        "as_string" => Argument::String(string(body, tag)?.to_string()),
        "as_strings" => Argument::Strings(
            list(tag)?
                .iter()
                .map(|x| string(x, tag).map(String::from))
                .collect::<Result<_>>()?,
        ),
        "as_sym_int" => Argument::SymInt(convert_sym_ref(body, scope, "as_int", tag)?),
        "as_sym_ints" => Argument::SymInts(
            list(tag)?
                .iter()
                .map(|x| convert_sym_ref(x, scope, "as_int", tag))
                .collect::<Result<_>>()?,
        ),
        "as_sym_float" => Argument::SymFloat(convert_sym_ref(body, scope, "as_float", tag)?),
        "as_sym_floats" => Argument::SymFloats(
            list(tag)?
                .iter()
                .map(|x| convert_sym_ref(x, scope, "as_float", tag))
                .collect::<Result<_>>()?,
        ),
        "as_sym_bool" => Argument::SymBool(convert_sym_ref(body, scope, "as_bool", tag)?),
        "as_sym_bools" => Argument::SymBools(
            list(tag)?
                .iter()
                .map(|x| convert_sym_ref(x, scope, "as_bool", tag))
                .collect::<Result<_>>()?,
        ),
        "as_scalar_type" => Argument::ScalarType(scalar_enum(body, "scalar type", Dtype::from_code)?),
        "as_memory_format" => {
            Argument::MemoryFormat(scalar_enum(body, "memory format", MemoryFormat::from_code)?)
        }
        "as_layout" => Argument::Layout(scalar_enum(body, "layout", Layout::from_code)?),
        "as_device" => Argument::Device(convert_device(body)?),
        "as_bool" => Argument::Bool(boolean(body, tag)?),
        "as_bools" => {
            Argument::Bools(list(tag)?.iter().map(|x| boolean(x, tag)).collect::<Result<_>>()?)
        }
        "as_optional_tensor" => Argument::OptionalTensor(optional_tensor(body, scope)?),
        "as_optional_tensors" => Argument::OptionalTensors(
            list(tag)?
                .iter()
                .map(|x| optional_tensor(x, scope))
                .collect::<Result<_>>()?,
        ),
        "as_graph" => {
            let g = obj(body, tag)?;
            let name = string(req(g, "name")?, "graph name")?.to_string();
            let graph = convert_graph(req(g, "graph")?).at(|| format!("subgraph '{name}'"))?;
            Argument::Graph(Subgraph {
                name,
                graph: Box::new(graph),
            })
        }
        "as_custom_obj" => Argument::CustomObj(tensor(body)?),
        "as_operator" => Argument::Operator(string(body, tag)?.to_string()),
        "as_complex" => {
            let c = obj(body, tag)?;
            Argument::Complex {
                real: float(req(c, "real")?, "real")?,
                imag: float(req(c, "imag")?, "imag")?,
            }
        }
        "as_nested_tensors" => Argument::NestedTensors(
            list(tag)?
                .iter()
                .map(|inner| arr(inner, tag)?.iter().map(tensor).collect::<Result<Vec<_>>>())
                .collect::<Result<_>>()?,
        ),
        "as_int_lists" => Argument::IntLists(
            list(tag)?
                .iter()
                .map(|inner| arr(inner, tag)?.iter().map(|x| int(x, tag)).collect::<Result<Vec<_>>>())
                .collect::<Result<_>>()?,
        ),
        "as_float_lists" => Argument::FloatLists(
            list(tag)?
                .iter()
                .map(|inner| arr(inner, tag)?.iter().map(|x| float(x, tag)).collect::<Result<Vec<_>>>())
                .collect::<Result<_>>()?,
        ),
        "as_string_to_argument" => Argument::StringToArgument(
            obj(body, tag)?
                .iter()
                .map(|(k, a)| Ok((k.clone(), convert_argument(a, scope).at(|| format!("key '{k}'"))?)))
                .collect::<Result<_>>()?,
        ),
        "as_token" => Argument::Tensor(scope.lookup(name_field(body, "token")?)?),
        other => {
            return Err(Error::unsupported(format!(
                "argument kind '{other}' is not part of the export schema this reader knows (schema 8.x)"
            )))
        }
    })
}

fn optional_tensor(v: &Json, scope: &Scope) -> Result<Option<ValueId>> {
    let (tag, body) = union(v, "optional tensor")?;
    match tag {
        "as_none" => Ok(None),
        "as_tensor" => Ok(Some(scope.lookup(name_field(body, "tensor")?)?)),
        other => Err(Error::bad_input(format!(
            "optional tensor: unknown kind '{other}'"
        ))),
    }
}
