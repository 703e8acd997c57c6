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
    pub fn to_f64(&self) -> Vec<f64> {
        let d = &self.data;
        let n = self.numel();
        let f = |i: usize, size: usize| &d[i * size..(i + 1) * size];
        (0..n)
            .map(|i| match self.dtype {
                Dtype::Float32 => f32::from_le_bytes(f(i, 4).try_into().unwrap()) as f64,
                Dtype::Float64 => f64::from_le_bytes(f(i, 8).try_into().unwrap()),
                Dtype::Float16 => {
                    f16_to_f32(u16::from_le_bytes(f(i, 2).try_into().unwrap())) as f64
                }
                Dtype::BFloat16 => {
                    f32::from_bits((u16::from_le_bytes(f(i, 2).try_into().unwrap()) as u32) << 16)
                        as f64
                }
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

/// IEEE half to single.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x3ff) as u32;
    let bits = match exp {
        0 if mant == 0 => sign,
        0 => {
            // subnormal: normalise
            let mut e = 127 - 15 + 1;
            let mut m = mant;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
        }
        31 => sign | 0x7f80_0000 | (mant << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (mant << 13),
    };
    f32::from_bits(bits)
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
];

fn header_field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    Some(rest)
}

/// Parses one `.npy` file.
pub fn read_npy(bytes: &[u8], what: &str) -> Result<HostTensor> {
    let bad = |m: &str| Error::bad_input(format!("{what}: {m}"));
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy file (no \\x93NUMPY magic)"));
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
        v => return Err(bad(&format!("unsupported .npy version {v}"))),
    };
    let header = bytes
        .get(start..start + hlen)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| bad("truncated .npy header"))?;
    let descr = header_field(header, "descr")
        .and_then(|r| r.strip_prefix('\''))
        .and_then(|r| r.split('\'').next())
        .ok_or_else(|| bad("no descr in the .npy header"))?;
    let descr = if descr == "<b1" || descr == "|b1" {
        "|b1"
    } else {
        descr
    };
    let descr = match descr {
        "<i1" => "|i1",
        "<u1" => "|u1",
        d => d,
    };
    let dtype = NPY_DTYPES
        .iter()
        .find(|(d, _)| *d == descr)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            Error::unsupported(format!(
                "{what}: numpy dtype '{descr}' is not supported (big-endian, object, string and complex arrays are not)"
            ))
        })?;
    if header_field(header, "fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(Error::unsupported(format!(
            "{what}: Fortran-ordered arrays are not supported (save with np.ascontiguousarray)"
        )));
    }
    let shape_text = header_field(header, "shape")
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.split(')').next())
        .ok_or_else(|| bad("no shape in the .npy header"))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| bad(&format!("bad shape ({shape_text})")))?;
    let n: usize = shape.iter().product();
    let data = &bytes[start + hlen..];
    let need = n * dtype.size();
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
    let (descr, data) = match t.dtype {
        Dtype::BFloat16 => (
            "<f4",
            t.to_f64()
                .iter()
                .flat_map(|v| (*v as f32).to_le_bytes())
                .collect(),
        ),
        d => (
            NPY_DTYPES
                .iter()
                .find(|(_, t)| *t == d)
                .map(|(s, _)| *s)
                .ok_or_else(|| {
                    Error::unsupported(format!("cannot write {} to .npy", d.torch_name()))
                })?,
            t.data.clone(),
        ),
    };
    let shape = match t.shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", t.shape[0]),
        _ => format!(
            "({})",
            t.shape
                .iter()
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
    let mut out = Vec::with_capacity(10 + header.len() + data.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&data);
    Ok(out)
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

/// A stored (uncompressed) zip, as `np.savez` writes.
pub fn write_npz(tensors: &[(String, HostTensor)]) -> Result<Vec<u8>> {
    let files = tensors
        .iter()
        .map(|(k, t)| Ok((format!("{k}.npy"), write_npy(t)?)))
        .collect::<Result<Vec<_>>>()?;
    write_zip(&files)
}

fn write_zip(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in files {
        if data.len() as u64 >= u32::MAX as u64 || out.len() as u64 >= u32::MAX as u64 {
            return Err(Error::unsupported(
                "npz output above 4 GiB (use safetensors)",
            ));
        }
        let crc = crc32fast::hash(data);
        let offset = out.len() as u32;
        let mut local = Vec::new();
        local.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        local.extend_from_slice(&20u16.to_le_bytes()); // version needed
        local.extend_from_slice(&0u16.to_le_bytes()); // flags
        local.extend_from_slice(&0u16.to_le_bytes()); // stored
        local.extend_from_slice(&0u16.to_le_bytes()); // time
        local.extend_from_slice(&0x21u16.to_le_bytes()); // 1980-01-01
        local.extend_from_slice(&crc.to_le_bytes());
        local.extend_from_slice(&(data.len() as u32).to_le_bytes());
        local.extend_from_slice(&(data.len() as u32).to_le_bytes());
        local.extend_from_slice(&(name.len() as u16).to_le_bytes());
        local.extend_from_slice(&0u16.to_le_bytes());
        local.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&local);
        out.extend_from_slice(data);
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes()); // made by
        central.extend_from_slice(&local[4..30]);
        central.extend_from_slice(&0u16.to_le_bytes()); // comment
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attrs
        central.extend_from_slice(&0u32.to_le_bytes()); // external attrs
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    Ok(out)
}

// ---------------------------------------------------------------- safetensors

const ST_DTYPES: &[(&str, Dtype)] = &[
    ("F32", Dtype::Float32),
    ("F64", Dtype::Float64),
    ("F16", Dtype::Float16),
    ("BF16", Dtype::BFloat16),
    ("I64", Dtype::Int64),
    ("I32", Dtype::Int32),
    ("I16", Dtype::Int16),
    ("I8", Dtype::Int8),
    ("U8", Dtype::Uint8),
    ("BOOL", Dtype::Bool),
    ("U16", Dtype::Uint16),
    ("U32", Dtype::Uint32),
    ("U64", Dtype::Uint64),
];

pub fn read_safetensors(bytes: &[u8], what: &str) -> Result<Vec<(String, HostTensor)>> {
    let bad = |m: String| Error::bad_input(format!("{what}: {m}"));
    if bytes.len() < 8 {
        return Err(bad("not a safetensors file (too short)".into()));
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = bytes
        .get(8..8usize.saturating_add(n))
        .ok_or_else(|| bad("truncated safetensors header".into()))?;
    let json: serde_json::Value = serde_json::from_slice(header)
        .map_err(|e| bad(format!("malformed safetensors header: {e}")))?;
    let data = &bytes[8 + n..];
    let map = json
        .as_object()
        .ok_or_else(|| bad("header is not an object".into()))?;
    let mut entries = Vec::new();
    for (name, v) in map {
        if name == "__metadata__" {
            continue;
        }
        let dt = v["dtype"].as_str().unwrap_or("");
        let dtype = ST_DTYPES
            .iter()
            .find(|(s, _)| *s == dt)
            .map(|(_, d)| *d)
            .ok_or_else(|| Error::unsupported(format!("{what}: tensor '{name}': dtype {dt:?}")))?;
        let shape: Vec<usize> = v["shape"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_u64().map(|x| x as usize))
                    .collect()
            })
            .ok_or_else(|| bad(format!("tensor '{name}': no shape")))?;
        let offs: Vec<usize> = v["data_offsets"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_u64().map(|x| x as usize))
                    .collect()
            })
            .unwrap_or_default();
        let (b, e) = match offs.as_slice() {
            [b, e] if b <= e && *e <= data.len() => (*b, *e),
            _ => return Err(bad(format!("tensor '{name}': data offsets out of range"))),
        };
        let need = shape.iter().product::<usize>() * dtype.size();
        if e - b != need {
            return Err(bad(format!(
                "tensor '{name}': {} bytes for shape {shape:?} of {} ({need} needed)",
                e - b,
                dtype.torch_name()
            )));
        }
        entries.push((
            b,
            name.clone(),
            HostTensor {
                dtype,
                shape,
                data: data[b..e].to_vec(),
            },
        ));
    }
    entries.sort_by_key(|(b, _, _)| *b);
    Ok(entries.into_iter().map(|(_, n, t)| (n, t)).collect())
}

pub fn write_safetensors(tensors: &[(String, HostTensor)]) -> Result<Vec<u8>> {
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for (name, t) in tensors {
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
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dt, "shape": t.shape, "data_offsets": [offset, offset + t.data.len()]}),
        );
        offset += t.data.len();
    }
    let mut text = serde_json::to_string(&header).map_err(|e| Error::internal(e.to_string()))?;
    while text.len() % 8 != 0 {
        text.push(' ');
    }
    let mut out = Vec::with_capacity(8 + text.len() + offset);
    out.write_all(&(text.len() as u64).to_le_bytes()).ok();
    out.extend_from_slice(text.as_bytes());
    for (_, t) in tensors {
        out.extend_from_slice(&t.data);
    }
    Ok(out)
}

/// Reads tensors by file extension: `.npz`, `.npy` (one tensor, named by
/// `name`), `.safetensors`.
pub fn read_tensors(path: &Path, npy_name: &str) -> Result<Vec<(String, HostTensor)>> {
    let shown = path.display().to_string();
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

    #[test]
    fn half_conversion() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert!(f16_to_f32(0x7c00).is_infinite());
    }
}
