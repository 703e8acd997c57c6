//! Tensor files users hand to and get from the tools: `.npy`, `.npz`
//! (numpy) and `.safetensors`. Tensors here are plain host data
//! ([`HostTensor`]: dtype, shape, little-endian bytes), independent of any
//! executor.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::ir::Dtype;
use crate::zip::Archive;

#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    /// Row-major, little-endian elements.
    pub data: Vec<u8>,
}

impl HostTensor {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Every element as f64 (bool as 0/1), for comparisons and summaries.
    /// Element `i` of an integer or bool tensor, exactly (uint64 as its
    /// two's-complement bits); floats truncated toward zero.
    pub fn int_at(&self, i: usize) -> i64 {
        let d = &self.data;
        let at = |size: usize| &d[i * size..(i + 1) * size];
        match self.dtype {
            Dtype::Int64 | Dtype::Uint64 => i64::from_le_bytes(at(8).try_into().unwrap_or([0; 8])),
            Dtype::Int32 => i32::from_le_bytes(at(4).try_into().unwrap_or([0; 4])) as i64,
            Dtype::Uint32 => u32::from_le_bytes(at(4).try_into().unwrap_or([0; 4])) as i64,
            Dtype::Int16 => i16::from_le_bytes(at(2).try_into().unwrap_or([0; 2])) as i64,
            Dtype::Uint16 => u16::from_le_bytes(at(2).try_into().unwrap_or([0; 2])) as i64,
            Dtype::Int8 => d[i] as i8 as i64,
            Dtype::Uint8 | Dtype::Bool => d[i] as i64,
            _ => self.to_f64().get(i).map_or(0, |v| *v as i64),
        }
    }

    /// A complex tensor's values as (real, imaginary) pairs, flattened;
    /// a real tensor's with imaginary parts 0.
    pub fn complex_parts(&self) -> Vec<f64> {
        let d = &self.data;
        match self.dtype {
            Dtype::Complex64 => d
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            Dtype::Complex128 => d
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
            _ => self.to_f64().into_iter().flat_map(|v| [v, 0.0]).collect(),
        }
    }

    pub fn to_f64(&self) -> Vec<f64> {
        let d = &self.data;
        let n = self.numel();
        let f = |i: usize, size: usize| &d[i * size..(i + 1) * size];
        (0..n)
            .map(|i| match self.dtype {
                Dtype::Float32 => f32::from_le_bytes(f(i, 4).try_into().unwrap()) as f64,
                Dtype::Float64 => f64::from_le_bytes(f(i, 8).try_into().unwrap()),
                Dtype::Float16 => half::f16::from_le_bytes(f(i, 2).try_into().unwrap()).to_f64(),
                Dtype::BFloat16 => half::bf16::from_le_bytes(f(i, 2).try_into().unwrap()).to_f64(),
                Dtype::Int64 => i64::from_le_bytes(f(i, 8).try_into().unwrap()) as f64,
                Dtype::Int32 => i32::from_le_bytes(f(i, 4).try_into().unwrap()) as f64,
                Dtype::Int16 => i16::from_le_bytes(f(i, 2).try_into().unwrap()) as f64,
                Dtype::Int8 => d[i] as i8 as f64,
                Dtype::Uint8 | Dtype::Bool => d[i] as f64,
                Dtype::Uint16 => u16::from_le_bytes(f(i, 2).try_into().unwrap()) as f64,
                Dtype::Uint32 => u32::from_le_bytes(f(i, 4).try_into().unwrap()) as f64,
                Dtype::Uint64 => u64::from_le_bytes(f(i, 8).try_into().unwrap()) as f64,
                _ => f64::NAN,
            })
            .collect()
    }
}

// ---------------------------------------------------------------- npy

const NPY_DTYPES: &[(&str, Dtype)] = &[
    ("<f4", Dtype::Float32),
    ("<f8", Dtype::Float64),
    ("<f2", Dtype::Float16),
    ("<i8", Dtype::Int64),
    ("<i4", Dtype::Int32),
    ("<i2", Dtype::Int16),
    ("|i1", Dtype::Int8),
    ("|u1", Dtype::Uint8),
    ("|b1", Dtype::Bool),
    ("<u2", Dtype::Uint16),
    ("<u4", Dtype::Uint32),
    ("<u8", Dtype::Uint64),
    // ml_dtypes' bfloat16 is a 2-byte void type to numpy (`np.save` of an
    // `ml_dtypes.bfloat16` array writes '<V2'): read as bfloat16
    ("<V2", Dtype::BFloat16),
    ("<c8", Dtype::Complex64),
    ("<c16", Dtype::Complex128),
];

/// The header of an `.npy` file: a Python dict literal (`{'descr':
/// '<f4', 'fortran_order': False, 'shape': (2, 3), }`), parsed as one by
/// `py_literal` (the parser ndarray-npy uses), not searched as text.
struct NpyHeader {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// The longest header read (numpy writes under 200 bytes, and its reader
/// refuses more than 10000 unless told otherwise).
const NPY_MAX_HEADER: usize = 1 << 16;

/// How deep brackets may nest in a header: `{...: (...)}` is 2; a list of
/// fields (a structured dtype, refused below) 3.
const NPY_MAX_NESTING: usize = 3;

fn parse_npy_header(text: &str) -> std::result::Result<NpyHeader, String> {
    use py_literal::Value;
    // py_literal's parser backtracks exponentially on nested brackets (30
    // levels in a 133-byte header took over 20 s, found by the fuzzer):
    // a header is flat, so depth and length are checked before it parses.
    if text.len() > NPY_MAX_HEADER {
        return Err(format!(
            "header of {} bytes (at most {NPY_MAX_HEADER} are read)",
            text.len()
        ));
    }
    // Brackets inside strings count too (a numpy header has none there),
    // so that no quoting or escaping can hide a nest from this count.
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in text.bytes() {
        match c {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > NPY_MAX_NESTING {
        return Err(format!(
            "brackets nested {deepest} deep (a numpy header nests {NPY_MAX_NESTING} at most)"
        ));
    }
    let value: Value = text
        .trim()
        .parse()
        .map_err(|e| format!("header is not a Python literal: {e}"))?;
    let Value::Dict(items) = value else {
        return Err("header is not a dict".into());
    };
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    for (k, v) in items {
        let key = match &k {
            Value::String(s) => s.as_str(),
            _ => return Err(format!("header key {k} is not a string")),
        };
        match (key, v) {
            ("descr", Value::String(d)) => descr = Some(d),
            ("descr", v) => {
                return Err(format!(
                    "descr {v} is not a plain dtype (structured arrays are not read)"
                ))
            }
            ("fortran_order", Value::Boolean(b)) => fortran_order = Some(b),
            ("shape", Value::Tuple(dims)) => {
                let dims = dims
                    .iter()
                    .map(|d| match d {
                        Value::Integer(n) => {
                            usize::try_from(n).map_err(|_| format!("shape has a size of {n}"))
                        }
                        other => Err(format!("shape has {other}")),
                    })
                    .collect::<std::result::Result<Vec<usize>, String>>()?;
                shape = Some(dims);
            }
            (k, v) => return Err(format!("unexpected header entry '{k}': {v}")),
        }
    }
    Ok(NpyHeader {
        descr: descr.ok_or("no descr in the header")?,
        fortran_order: fortran_order.ok_or("no fortran_order in the header")?,
        shape: shape.ok_or("no shape in the header")?,
    })
}

/// Parses one `.npy` file.
pub fn read_npy(bytes: &[u8], what: &str) -> Result<HostTensor> {
    let bad = |m: &str| Error::bad_input(format!("{what}: {m}"));
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy file (no \\x93NUMPY magic)"));
    }
    let (hlen, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
        v => return Err(bad(&format!("unsupported .npy version {v}"))),
    };
    let header = bytes
        .get(start..start.saturating_add(hlen))
        .ok_or_else(|| bad("truncated .npy header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad(".npy header is not text"))?;
    let header = parse_npy_header(header).map_err(|m| bad(&format!("bad .npy header: {m}")))?;
    // numpy writes one-byte types with either byte-order mark
    let descr = match header.descr.as_str() {
        "<b1" | "|b1" => "|b1",
        "<i1" => "|i1",
        "<u1" => "|u1",
        "|V2" => "<V2",
        d => d,
    };
    let dtype = NPY_DTYPES
        .iter()
        .find(|(d, _)| *d == descr)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            Error::unsupported(format!(
                "{what}: numpy dtype '{descr}' is not supported (big-endian, object and string arrays are not)"
            ))
        })?;
    let shape = header.shape;
    if header.fortran_order && shape.iter().filter(|&&s| s > 1).count() > 1 {
        return Err(Error::unsupported(format!(
            "{what}: Fortran-ordered arrays are not supported (save with np.ascontiguousarray)"
        )));
    }
    let need = shape
        .iter()
        .try_fold(dtype.size(), |n, &s| n.checked_mul(s))
        .ok_or_else(|| bad(&format!("shape {shape:?} is too large")))?;
    let data = &bytes[start + hlen..];
    if data.len() < need {
        return Err(bad(&format!(
            "data is {} bytes, shape {shape:?} of {} needs {need}: truncated file",
            data.len(),
            dtype.torch_name()
        )));
    }
    Ok(HostTensor {
        dtype,
        shape,
        data: data[..need].to_vec(),
    })
}

/// Writes one `.npy` file (bf16 is written as float32: numpy has no bf16).
pub fn write_npy(t: &HostTensor) -> Result<Vec<u8>> {
    let mut out = npy_header(t.dtype, &t.shape)?;
    out.reserve(t.data.len());
    npy_data(t, &mut |b| {
        out.extend_from_slice(b);
        Ok(())
    })?;
    Ok(out)
}

/// A tensor as a writer of tensor files sees it: dtype, shape, and its
/// row-major little-endian bytes lent to a callback (borrowed where they
/// lie: an executor's output is written without a copy of it first).
pub trait TensorBytes {
    fn dtype(&self) -> Dtype;
    fn shape(&self) -> &[usize];
    /// Calls `f` once with all the bytes.
    fn with_bytes(&self, f: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()>;
}

impl TensorBytes for HostTensor {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn with_bytes(&self, f: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        f(&self.data)
    }
}

/// The `.npy` dtype string a tensor is written as (bf16 as float32).
fn npy_descr(d: Dtype) -> Result<&'static str> {
    if d == Dtype::BFloat16 {
        return Ok("<f4");
    }
    NPY_DTYPES
        .iter()
        .find(|(_, t)| *t == d)
        .map(|(s, _)| *s)
        .ok_or_else(|| Error::unsupported(format!("cannot write {} to .npy", d.torch_name())))
}

/// An `.npy` file's header (magic, version, the dict padded to 64 bytes).
fn npy_header(dtype: Dtype, dims: &[usize]) -> Result<Vec<u8>> {
    let descr = npy_descr(dtype)?;
    let shape = match dims.len() {
        0 => "()".to_string(),
        1 => format!("({},)", dims[0]),
        _ => format!(
            "({})",
            dims.iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    Ok(out)
}

/// The bytes of an `.npy` file after its header, given to `write` as they
/// lie (every dtype but bf16, widened to float32 block by block).
fn npy_data(t: &dyn TensorBytes, write: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
    if t.dtype() != Dtype::BFloat16 {
        return t.with_bytes(write);
    }
    t.with_bytes(&mut |b| {
        for block in b.chunks(2 << 16) {
            let wide: Vec<u8> = block
                .chunks_exact(2)
                .flat_map(|c| {
                    half::bf16::from_le_bytes([c[0], c[1]])
                        .to_f32()
                        .to_le_bytes()
                })
                .collect();
            write(&wide)?;
        }
        Ok(())
    })
}

// ---------------------------------------------------------------- npz

/// Reads every array of an `.npz`, in archive order.
pub fn read_npz(path: &Path) -> Result<Vec<(String, HostTensor)>> {
    let archive = Archive::open(path)?;
    npz_members(&archive, &path.display().to_string())
}

fn npz_members(archive: &Archive, what: &str) -> Result<Vec<(String, HostTensor)>> {
    let names: Vec<String> = archive.entries().iter().map(|e| e.name.clone()).collect();
    let mut out = Vec::new();
    for name in names {
        let key = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        let bytes = archive.member(&name)?;
        out.push((
            key.clone(),
            read_npy(&bytes, &format!("{what}: array '{key}'"))?,
        ));
    }
    Ok(out)
}

/// Every array as a member `NAME.npy` of a stored (uncompressed) zip, as
/// `np.savez` writes: each array's bytes copied once, into the zip (no
/// `.npy` of it made first).
pub fn write_npz(tensors: &[(String, HostTensor)]) -> Result<Vec<u8>> {
    let total: usize = tensors
        .iter()
        .map(|(k, t)| t.data.len() + k.len() + 256)
        .sum();
    let mut out = std::io::Cursor::new(Vec::with_capacity(total));
    write_npz_into(&mut out, tensors, "npz")?;
    Ok(out.into_inner())
}

/// An npz of `tensors` written into `out` (a staged file: no copy of the
/// whole archive in memory; [`crate::output::write_output_seekable`]);
/// `what` names it in errors.
pub fn write_npz_into<T: TensorBytes>(
    out: &mut dyn crate::output::WriteSeek,
    tensors: &[(String, T)],
    what: &str,
) -> Result<()> {
    use zip::write::SimpleFileOptions;
    let fail = |e: zip::result::ZipError| match e {
        zip::result::ZipError::Io(e) => Error::io(what, e),
        e => Error::internal(format!("{what}: writing npz: {e}")),
    };
    let mut w = zip::ZipWriter::new(out);
    for (k, t) in tensors {
        let header = npy_header(t.dtype(), t.shape())?;
        let width = if t.dtype() == Dtype::BFloat16 {
            4
        } else {
            t.dtype().size()
        };
        let len = header.len() + t.shape().iter().product::<usize>() * width;
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(len as u64 >= u32::MAX as u64);
        w.start_file(format!("{k}.npy"), options).map_err(fail)?;
        w.write_all(&header).map_err(|e| Error::io(what, e))?;
        npy_data(t, &mut |b| w.write_all(b).map_err(|e| Error::io(what, e)))?;
    }
    w.finish().map_err(fail)?;
    Ok(())
}

// ---------------------------------------------------------------- safetensors

// Read and written by Hugging Face's own `safetensors` crate (header
// limits, offsets that tile the data, no overlap: its checks, fuzzed
// upstream). A safetensors file is a dict: tensors come back in the
// order of their data, and the crate writes them by alignment and name.

const ST_DTYPES: &[(safetensors::Dtype, Dtype)] = {
    use safetensors::Dtype as S;
    &[
        (S::F32, Dtype::Float32),
        (S::F64, Dtype::Float64),
        (S::F16, Dtype::Float16),
        (S::BF16, Dtype::BFloat16),
        (S::I64, Dtype::Int64),
        (S::I32, Dtype::Int32),
        (S::I16, Dtype::Int16),
        (S::I8, Dtype::Int8),
        (S::U8, Dtype::Uint8),
        (S::BOOL, Dtype::Bool),
        (S::U16, Dtype::Uint16),
        (S::U32, Dtype::Uint32),
        (S::U64, Dtype::Uint64),
    ]
};

pub fn read_safetensors(bytes: &[u8], what: &str) -> Result<Vec<(String, HostTensor)>> {
    use safetensors::SafeTensors;
    let bad = |e: safetensors::SafeTensorError| Error::bad_input(format!("{what}: {e}"));
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(bad)?;
    let st = SafeTensors::deserialize(bytes).map_err(bad)?;
    meta.offset_keys()
        .into_iter()
        .map(|name| {
            let v = st.tensor(&name).map_err(bad)?;
            let dtype = ST_DTYPES
                .iter()
                .find(|(s, _)| *s == v.dtype())
                .map(|(_, d)| *d)
                .ok_or_else(|| {
                    Error::unsupported(format!("{what}: tensor '{name}': dtype {:?}", v.dtype()))
                })?;
            let t = HostTensor {
                dtype,
                shape: v.shape().to_vec(),
                data: v.data().to_vec(),
            };
            Ok((name, t))
        })
        .collect()
}

/// A host tensor as the safetensors writer sees it.
struct StView<'a>(&'a HostTensor, safetensors::Dtype);

impl safetensors::View for StView<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        self.1
    }
    fn shape(&self) -> &[usize] {
        &self.0.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self.0.data)
    }
    fn data_len(&self) -> usize {
        self.0.data.len()
    }
}

pub fn write_safetensors(tensors: &[(String, HostTensor)]) -> Result<Vec<u8>> {
    let views = tensors
        .iter()
        .map(|(name, t)| {
            let dt = ST_DTYPES
                .iter()
                .find(|(_, d)| *d == t.dtype)
                .map(|(s, _)| *s)
                .ok_or_else(|| {
                    Error::unsupported(format!(
                        "cannot write {} to safetensors",
                        t.dtype.torch_name()
                    ))
                })?;
            Ok((name.as_str(), StView(t, dt)))
        })
        .collect::<Result<Vec<_>>>()?;
    safetensors::serialize(views, None).map_err(|e| Error::bad_input(format!("safetensors: {e}")))
}

/// Reads tensors by file extension: `.npz`, `.npy` (one tensor, named by
/// `name`), `.safetensors`.
pub fn read_tensors(path: &Path, npy_name: &str) -> Result<Vec<(String, HostTensor)>> {
    let shown = path.display().to_string();
    crate::output::inputs::note_path(path); // no output may overwrite it
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "npz" => read_npz(path),
        "npy" | "safetensors" => {
            let bytes = std::fs::read(path).map_err(|e| Error::io(&shown, e))?;
            if ext == "npy" {
                Ok(vec![(npy_name.to_string(), read_npy(&bytes, &shown)?)])
            } else {
                read_safetensors(&bytes, &shown)
            }
        }
        _ => Err(Error::usage(format!(
            "{shown}: unknown tensor file type (expected .npz, .npy or .safetensors)"
        ))),
    }
}

/// What a file holds, told by its first bytes (never by its name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    IrStream,
    Npz,
    Npy,
    Safetensors,
    /// A zip that is not an `.npz` (a `.pt2` archive, say).
    Zip,
    Onnx,
    Text,
    Empty,
    Unknown,
}

impl FileKind {
    pub fn is_tensors(self) -> bool {
        matches!(self, FileKind::Npz | FileKind::Npy | FileKind::Safetensors)
    }

    /// How a message names it.
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::IrStream => "an IR stream",
            FileKind::Npz => "an .npz tensor file",
            FileKind::Npy => "an .npy tensor file",
            FileKind::Safetensors => "a .safetensors tensor file",
            FileKind::Zip => "a zip archive that is no .npz (a .pt2? convert it with pt2ir)",
            FileKind::Onnx => "an ONNX or other protobuf file",
            FileKind::Text => "text",
            FileKind::Empty => "empty",
            FileKind::Unknown => "of no kind ir-diff reads",
        }
    }
}

/// Tells a file's kind from its bytes (the whole file, or at least its
/// first 64 KiB: a zip is told from its member names when they are there).
pub fn sniff(bytes: &[u8]) -> FileKind {
    let safetensors = bytes.len() > 8
        && bytes[8] == b'{'
        && u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8])) as usize <= bytes.len() - 8;
    if bytes.is_empty() {
        FileKind::Empty
    } else if bytes.starts_with(crate::wire::MAGIC) {
        FileKind::IrStream
    } else if bytes.starts_with(b"\x93NUMPY") {
        FileKind::Npy
    } else if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        // an .npz holds only .npy members
        let names = Archive::from_blob(String::new(), Blob::owned(bytes.to_vec()))
            .map(|a| a.entries().iter().all(|e| e.name.ends_with(".npy")));
        match names {
            Ok(true) => FileKind::Npz,
            _ => FileKind::Zip,
        }
    } else if safetensors {
        FileKind::Safetensors
    } else if bytes.starts_with(b"\x08") {
        FileKind::Onnx
    } else if std::str::from_utf8(&bytes[..bytes.len().min(512)]).is_ok() {
        FileKind::Text
    } else {
        FileKind::Unknown
    }
}

/// Reads a tensor file of any kind from its bytes (`what` names it in
/// errors); a single `.npy` array takes the name `npy_name`.
pub fn read_tensor_bytes(
    bytes: Vec<u8>,
    what: &str,
    npy_name: &str,
) -> Result<Vec<(String, HostTensor)>> {
    match sniff(&bytes) {
        FileKind::Npy => Ok(vec![(npy_name.to_string(), read_npy(&bytes, what)?)]),
        FileKind::Safetensors => read_safetensors(&bytes, what),
        FileKind::Npz => {
            let archive = Archive::from_blob(what.to_string(), Blob::owned(bytes))?;
            npz_members(&archive, what)
        }
        other => Err(Error::bad_input(format!(
            "{what}: {}, not a tensor file (.npz, .npy, .safetensors)",
            other.describe()
        ))),
    }
}

/// A tensor file format to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorFormat {
    Npz,
    Npy,
    Safetensors,
}

impl TensorFormat {
    /// The format an output path's extension names. What is no file of
    /// its own (`-`, a device, a FIFO: `/dev/stdout`) takes npz; so does a
    /// path the output cannot be made at (a directory, a missing one),
    /// which the writer then refuses by name.
    pub fn of_path(path: &Path) -> Result<TensorFormat> {
        let ext = path.extension().and_then(|e| e.to_str());
        let not_a_new_file = match std::fs::metadata(path) {
            Ok(m) => !m.is_file(),
            Err(_) => path
                .parent()
                .is_some_and(|d| !d.as_os_str().is_empty() && !d.is_dir()),
        };
        if path.as_os_str() == "-" || (ext.is_none() && not_a_new_file) {
            return Ok(TensorFormat::Npz);
        }
        match ext {
            Some("npz") => Ok(TensorFormat::Npz),
            Some("npy") => Ok(TensorFormat::Npy),
            Some("safetensors") => Ok(TensorFormat::Safetensors),
            other => Err(Error::usage(format!(
                "{}: {} names no tensor format (.npz, .npy or .safetensors; or give --format)",
                path.display(),
                other.map_or("no extension".to_string(), |e| format!(".{e}"))
            ))),
        }
    }
}

/// Encodes tensors in a format; `.npy` takes exactly one tensor.
/// As [`encode_tensors`], into `out`; an npz is written in place.
pub fn encode_tensors_into<T: TensorBytes>(
    format: TensorFormat,
    tensors: &[(String, T)],
    out: &mut dyn crate::output::WriteSeek,
    what: &str,
) -> Result<()> {
    if format == TensorFormat::Npz {
        return write_npz_into(out, tensors, what);
    }
    let host = tensors
        .iter()
        .map(|(name, t)| {
            let mut data = Vec::new();
            t.with_bytes(&mut |b| {
                data.extend_from_slice(b);
                Ok(())
            })?;
            Ok((
                name.clone(),
                HostTensor {
                    dtype: t.dtype(),
                    shape: t.shape().to_vec(),
                    data,
                },
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let bytes = encode_tensors(format, &host)?;
    out.write_all(&bytes).map_err(|e| Error::io(what, e))
}

pub fn encode_tensors(format: TensorFormat, tensors: &[(String, HostTensor)]) -> Result<Vec<u8>> {
    match format {
        TensorFormat::Npz => write_npz(tensors),
        TensorFormat::Safetensors => write_safetensors(tensors),
        TensorFormat::Npy => match tensors {
            [(_, t)] => write_npy(t),
            _ => Err(Error::usage(format!(
                ".npy holds one tensor and there are {}: write .npz or .safetensors",
                tensors.len()
            ))),
        },
    }
}

/// Keeps a map type for callers that want name lookup.
pub fn by_name(tensors: Vec<(String, HostTensor)>) -> BTreeMap<String, HostTensor> {
    tensors.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npz_round_trip() {
        let t = HostTensor {
            dtype: Dtype::Float32,
            shape: vec![2, 3],
            data: (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect(),
        };
        let b = HostTensor {
            dtype: Dtype::Bool,
            shape: vec![],
            data: vec![1],
        };
        let bytes = write_npz(&[("x".into(), t.clone()), ("flag".into(), b.clone())]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.npz");
        std::fs::write(&p, bytes).unwrap();
        let back = read_npz(&p).unwrap();
        assert_eq!(
            back,
            vec![("x".to_string(), t.clone()), ("flag".to_string(), b)]
        );
        let st = write_safetensors(&[("x".into(), t.clone())]).unwrap();
        assert_eq!(
            read_safetensors(&st, "t").unwrap(),
            vec![("x".to_string(), t)]
        );
    }

    /// bfloat16 has no numpy dtype: written as float32, exactly, by the
    /// npz writer and by `.npy` alike.
    #[test]
    fn bfloat16_is_written_as_float32() {
        let vals = [1.5f32, -2.0, 0.0078125, 3.0e38];
        let t = HostTensor {
            dtype: Dtype::BFloat16,
            shape: vec![2, 2],
            data: vals
                .iter()
                .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
                .collect(),
        };
        let npy = read_npy(&write_npy(&t).unwrap(), "t").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.npz");
        std::fs::write(&p, write_npz(&[("t".into(), t.clone())]).unwrap()).unwrap();
        let npz = read_npz(&p).unwrap().remove(0).1;
        for back in [npy, npz] {
            assert_eq!(
                (back.dtype, back.shape.clone()),
                (Dtype::Float32, vec![2, 2])
            );
            assert_eq!(back.to_f64(), t.to_f64());
        }
    }

    #[test]
    fn npy_headers_are_python_literals() {
        let h = parse_npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }")
            .unwrap();
        assert_eq!(
            (h.descr.as_str(), h.fortran_order, h.shape),
            ("<f4", false, vec![2, 3])
        );
        // key order, spacing, a one-element tuple and a 0-d shape
        let h = parse_npy_header("{'shape':(7,),'fortran_order':True,'descr':'|b1'}").unwrap();
        assert_eq!(
            (h.descr.as_str(), h.fortran_order, h.shape),
            ("|b1", true, vec![7])
        );
        assert_eq!(
            parse_npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': ()}")
                .unwrap()
                .shape,
            vec![0usize; 0]
        );
        // what text search took: a key inside a string, a negative size, structured dtypes
        for bad in [
            "{'descr': \"'shape': (1,)\", 'fortran_order': False}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)",
        ] {
            assert!(parse_npy_header(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn half_and_bfloat16_read_as_numbers() {
        let t = HostTensor {
            dtype: Dtype::Float16,
            shape: vec![4],
            data: [0x3c00u16, 0xc000, 0x0001, 0x7c00]
                .iter()
                .flat_map(|h| h.to_le_bytes())
                .collect(),
        };
        let v = t.to_f64();
        assert_eq!(&v[..3], &[1.0, -2.0, 5.960_464_477_539_063e-8]);
        assert!(v[3].is_infinite());
        let b = HostTensor {
            dtype: Dtype::BFloat16,
            shape: vec![1],
            data: 0x3f80u16.to_le_bytes().to_vec(),
        };
        assert_eq!(b.to_f64(), vec![1.0]);
    }
}
