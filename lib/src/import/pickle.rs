//! A safe reader for `torch.save` zips (legacy weight layouts): the pickle
//! in `data.pkl` is *interpreted* as data, never executed.
//!
//! Only what a state dict needs is understood: dicts (`OrderedDict`),
//! tuples, lists, scalars, strings, storages (persistent ids pointing at
//! `data/<key>` members) and tensors rebuilt by `torch._utils`
//! (`_rebuild_tensor_v2`, `_rebuild_parameter`). Any other global (a class,
//! a function) is refused with its name: nothing outside this list is
//! ever constructed.
//!
//! TorchScript archives (`torch.jit.save`) pickle their module tree too:
//! [`unpickle_torchscript`] also takes the `__torch__.*` module classes
//! (an object is its class name and its attribute dict, nothing runs) and
//! `torch.jit._pickle`'s typed-list and type-tag helpers, as data.

use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::ir::{Device, Dtype, Layout, Sym, TensorMeta};
use crate::zip::Archive;

/// A tensor found in a `torch.save` pickle.
pub struct SavedTensor {
    pub name: String,
    pub meta: TensorMeta,
    pub storage: Blob,
    /// Which `data/<key>` storage it views (aliases share one).
    pub storage_key: String,
}

/// A pickled value, as data.
#[derive(Clone, Debug)]
pub enum Py {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Tuple(Vec<Py>),
    List(Vec<Py>),
    Dict(Vec<(Py, Py)>),
    Global(String),
    Storage {
        dtype: Dtype,
        key: String,
    },
    Tensor(Box<TensorRec>),
    /// An instance of a TorchScript class (`__torch__.M`): its class and
    /// the attribute dict its BUILD gave it.
    Object {
        class: String,
        attrs: Vec<(String, Py)>,
    },
    Mark,
}

/// A tensor a pickle rebuilds: a view of the storage `key`.
#[derive(Clone, Debug)]
pub struct TensorRec {
    pub dtype: Dtype,
    pub key: String,
    pub offset: i64,
    pub sizes: Vec<i64>,
    pub strides: Vec<i64>,
}

impl TensorRec {
    /// Its view as IR metadata (static sizes, on the CPU).
    pub fn meta(&self) -> TensorMeta {
        TensorMeta {
            dtype: self.dtype,
            sizes: self.sizes.iter().map(|&s| Sym::Int(s)).collect(),
            strides: self.strides.iter().map(|&s| Sym::Int(s)).collect(),
            storage_offset: Sym::Int(self.offset),
            device: Device::default(),
            layout: Layout::Strided,
            requires_grad: false,
        }
    }
}

/// The globals a TorchScript pickle may name besides
/// [`ALLOWED_GLOBALS`] and the storage classes.
const TORCHSCRIPT_GLOBALS: &[&str] = &[
    "torch.jit._pickle.restore_type_tag",
    "torch.jit._pickle.build_intlist",
    "torch.jit._pickle.build_doublelist",
    "torch.jit._pickle.build_boollist",
    "torch.jit._pickle.build_tensorlist",
    "torch.jit._pickle.build_tensor_from_id",
];

/// Interprets a TorchScript archive's pickle (`data.pkl`,
/// `constants.pkl`): module objects, tensors, lists, dicts, scalars.
pub fn unpickle_torchscript(data: &[u8]) -> Result<Py> {
    let mut u = Unpickler::new(data);
    u.torchscript = true;
    u.run()
}

const ALLOWED_GLOBALS: &[&str] = &[
    "collections.OrderedDict",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
];

fn storage_dtype(class: &str) -> Option<Dtype> {
    Some(match class.strip_prefix("torch.")? {
        "FloatStorage" => Dtype::Float32,
        "DoubleStorage" => Dtype::Float64,
        "HalfStorage" => Dtype::Float16,
        "BFloat16Storage" => Dtype::BFloat16,
        "LongStorage" => Dtype::Int64,
        "IntStorage" => Dtype::Int32,
        "ShortStorage" => Dtype::Int16,
        "CharStorage" => Dtype::Int8,
        "ByteStorage" => Dtype::Uint8,
        "BoolStorage" => Dtype::Bool,
        _ => return None,
    })
}

/// Reads the tensors of a `torch.save`d dict (a state dict or constants).
pub fn read_torch_save(zip_bytes: Blob, what: &str) -> Result<Vec<SavedTensor>> {
    let archive = Archive::from_blob(what.to_string(), zip_bytes)
        .map_err(|e| e.at("a torch.save zip was expected"))?;
    let pkl_name = archive
        .entries()
        .iter()
        .map(|e| e.name.clone())
        .find(|n| n.ends_with("/data.pkl") || n == "data.pkl")
        .ok_or_else(|| Error::bad_input(format!("{what}: no data.pkl in this torch.save zip")))?;
    let root = pkl_name.strip_suffix("data.pkl").unwrap_or("").to_string();
    let pkl = archive.member(&pkl_name)?;
    let value = Unpickler::new(&pkl)
        .run()
        .map_err(|e| e.at(format!("{what}: member '{pkl_name}'")))?;
    let entries = match value {
        Py::Dict(entries) => entries,
        other => {
            return Err(Error::unsupported(format!(
                "{what}: expected a dict of tensors, found {}",
                describe(&other)
            )))
        }
    };
    let mut out = Vec::new();
    for (k, v) in entries {
        let name = match k {
            Py::Str(s) => s,
            other => {
                return Err(Error::bad_input(format!(
                    "{what}: dict key is {}, expected a string",
                    describe(&other)
                )))
            }
        };
        let t = match v {
            Py::Tensor(t) => t,
            other => {
                return Err(Error::unsupported(format!(
                    "{what}: entry '{name}' is {}, expected a tensor",
                    describe(&other)
                )))
            }
        };
        let storage = archive.member(&format!("{root}data/{}", t.key))?;
        let meta = t.meta();
        crate::ir::validate::check_view(&meta, storage.len())
            .map_err(|msg| Error::bad_input(format!("{what}: tensor '{name}': {msg}")))?;
        out.push(SavedTensor {
            name,
            meta,
            storage,
            storage_key: t.key.clone(),
        });
    }
    Ok(out)
}

fn describe(v: &Py) -> String {
    match v {
        Py::None => "None".into(),
        Py::Bool(_) => "a bool".into(),
        Py::Int(_) => "an int".into(),
        Py::Float(_) => "a float".into(),
        Py::Str(_) => "a string".into(),
        Py::Tuple(_) => "a tuple".into(),
        Py::List(_) => "a list".into(),
        Py::Dict(_) => "a dict".into(),
        Py::Global(g) => format!("the global {g}"),
        Py::Storage { .. } => "a storage".into(),
        Py::Tensor(_) => "a tensor".into(),
        Py::Object { class, .. } => format!("an object of class {class}"),
        Py::Mark => "a mark".into(),
    }
}

impl Py {
    /// What kind of value this is, for messages.
    pub fn describe(&self) -> String {
        describe(self)
    }
}

struct Unpickler<'a> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<Py>,
    memo: std::collections::HashMap<u32, Py>,
    /// Whether TorchScript's classes and helpers are read as data.
    torchscript: bool,
}

impl<'a> Unpickler<'a> {
    fn new(data: &'a [u8]) -> Self {
        Unpickler {
            data,
            pos: 0,
            stack: Vec::new(),
            memo: Default::default(),
            torchscript: false,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| Error::bad_input(format!("pickle is truncated at byte {}", self.pos)))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn line(&mut self) -> Result<String> {
        let start = self.pos;
        while self.pos < self.data.len() && self.data[self.pos] != b'\n' {
            self.pos += 1;
        }
        let s = String::from_utf8_lossy(&self.data[start..self.pos]).into_owned();
        self.take(1)?;
        Ok(s)
    }

    fn pop(&mut self) -> Result<Py> {
        self.stack
            .pop()
            .ok_or_else(|| Error::bad_input("pickle stack underflow"))
    }

    fn pop_mark(&mut self) -> Result<Vec<Py>> {
        let at = self
            .stack
            .iter()
            .rposition(|v| matches!(v, Py::Mark))
            .ok_or_else(|| Error::bad_input("pickle has no MARK"))?;
        let items = self.stack.split_off(at + 1);
        self.stack.pop();
        Ok(items)
    }

    fn top_mut(&mut self) -> Result<&mut Py> {
        self.stack
            .last_mut()
            .ok_or_else(|| Error::bad_input("pickle stack underflow"))
    }

    fn run(mut self) -> Result<Py> {
        loop {
            let op = self.u8()?;
            match op {
                0x80 => {
                    self.u8()?; // PROTO
                }
                0x95 => {
                    self.take(8)?; // FRAME
                }
                b'.' => return self.pop(),
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let full = format!("{module}.{name}");
                    let torchscript = self.torchscript
                        && (full.starts_with("__torch__.")
                            || TORCHSCRIPT_GLOBALS.contains(&full.as_str()));
                    if !torchscript
                        && !ALLOWED_GLOBALS.contains(&full.as_str())
                        && storage_dtype(&full).is_none()
                    {
                        return Err(Error::unsupported(format!(
                            "the pickle refers to {full}, which this reader does not rebuild (it reads dicts of plain tensors only; pickled code is never run)"
                        )));
                    }
                    self.stack.push(Py::Global(full));
                }
                b'q' => {
                    let k = self.u8()? as u32;
                    let v = self.top_mut()?.clone();
                    self.memo.insert(k, v);
                }
                b'r' => {
                    let k = self.u32()?;
                    let v = self.top_mut()?.clone();
                    self.memo.insert(k, v);
                }
                0x94 => {
                    let k = self.memo.len() as u32;
                    let v = self.top_mut()?.clone();
                    self.memo.insert(k, v);
                }
                b'h' | b'j' => {
                    let k = if op == b'h' {
                        self.u8()? as u32
                    } else {
                        self.u32()?
                    };
                    let v = self
                        .memo
                        .get(&k)
                        .cloned()
                        .ok_or_else(|| Error::bad_input(format!("pickle memo {k} is unset")))?;
                    self.stack.push(v);
                }
                b'}' => self.stack.push(Py::Dict(Vec::new())),
                b']' => self.stack.push(Py::List(Vec::new())),
                b')' => self.stack.push(Py::Tuple(Vec::new())),
                b'(' => self.stack.push(Py::Mark),
                b't' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Py::Tuple(items));
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    if self.stack.len() < n {
                        return Err(Error::bad_input("pickle stack underflow"));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.stack.push(Py::Tuple(items));
                }
                b'X' => {
                    let n = self.u32()? as usize;
                    let s = String::from_utf8_lossy(self.take(n)?).into_owned();
                    self.stack.push(Py::Str(s));
                }
                0x8c => {
                    let n = self.u8()? as usize;
                    let s = String::from_utf8_lossy(self.take(n)?).into_owned();
                    self.stack.push(Py::Str(s));
                }
                b'T' => {
                    let n = self.u32()? as usize;
                    let s = String::from_utf8_lossy(self.take(n)?).into_owned();
                    self.stack.push(Py::Str(s));
                }
                b'U' => {
                    let n = self.u8()? as usize;
                    let s = String::from_utf8_lossy(self.take(n)?).into_owned();
                    self.stack.push(Py::Str(s));
                }
                b'J' => {
                    let v = self.u32()? as i32 as i64;
                    self.stack.push(Py::Int(v));
                }
                b'K' => {
                    let v = self.u8()? as i64;
                    self.stack.push(Py::Int(v));
                }
                b'M' => {
                    let b = self.take(2)?;
                    self.stack
                        .push(Py::Int(u16::from_le_bytes([b[0], b[1]]) as i64));
                }
                0x8a => {
                    let n = self.u8()? as usize;
                    let b = self.take(n)?;
                    if n > 8 {
                        return Err(Error::unsupported("pickle integer wider than 64 bits"));
                    }
                    let mut buf = if b.last().is_some_and(|x| x & 0x80 != 0) {
                        [0xff; 8]
                    } else {
                        [0; 8]
                    };
                    buf[..n].copy_from_slice(b);
                    self.stack.push(Py::Int(i64::from_le_bytes(buf)));
                }
                b'G' => {
                    let b = self.take(8)?;
                    let v = f64::from_be_bytes(b.try_into().unwrap_or([0; 8]));
                    self.stack.push(Py::Float(v));
                }
                0x88 => self.stack.push(Py::Bool(true)),
                0x89 => self.stack.push(Py::Bool(false)),
                b'N' => self.stack.push(Py::None),
                b'Q' => {
                    let pid = self.pop()?;
                    self.stack.push(persistent_load(pid)?);
                }
                b'R' => {
                    let args = self.pop()?;
                    let func = self.pop()?;
                    self.stack.push(reduce(func, args)?);
                }
                0x81 => {
                    let args = self.pop()?;
                    let class = self.pop()?;
                    match class {
                        Py::Global(c) if c.starts_with("__torch__.") => {
                            self.stack.push(Py::Object {
                                class: c,
                                attrs: Vec::new(),
                            })
                        }
                        class => self.stack.push(reduce(class, args)?),
                    }
                }
                b'b' => {
                    // BUILD: state for the object below. A TorchScript
                    // object takes its attribute dict; tensors and dicts
                    // carry nothing a state dict needs in it.
                    let state = self.pop()?;
                    if let Py::Object { attrs, class } = self.top_mut()? {
                        match state {
                            Py::Dict(entries) => {
                                for (k, v) in entries {
                                    let Py::Str(k) = k else {
                                        return Err(Error::bad_input(format!(
                                            "object of class {class}: an attribute name is not a string"
                                        )));
                                    };
                                    attrs.push((k, v));
                                }
                            }
                            Py::None => {}
                            other => {
                                return Err(Error::unsupported(format!(
                                    "object of class {class}: its state is {}, not an attribute dict (a class with __setstate__ is not read)",
                                    describe(&other)
                                )))
                            }
                        }
                    }
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    match self.top_mut()? {
                        Py::Dict(d) => d.push((k, v)),
                        _ => return Err(Error::bad_input("pickle SETITEM on a non-dict")),
                    }
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    let mut pairs = Vec::new();
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    match self.top_mut()? {
                        Py::Dict(d) => d.extend(pairs),
                        _ => return Err(Error::bad_input("pickle SETITEMS on a non-dict")),
                    }
                }
                b'a' => {
                    let v = self.pop()?;
                    match self.top_mut()? {
                        Py::List(l) => l.push(v),
                        _ => return Err(Error::bad_input("pickle APPEND on a non-list")),
                    }
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    match self.top_mut()? {
                        Py::List(l) => l.extend(items),
                        _ => return Err(Error::bad_input("pickle APPENDS on a non-list")),
                    }
                }
                other => {
                    return Err(Error::unsupported(format!(
                        "pickle opcode 0x{other:02x} at byte {} is not read by this reader",
                        self.pos - 1
                    )))
                }
            }
        }
    }
}

fn ints(v: &Py, what: &str) -> Result<Vec<i64>> {
    match v {
        Py::Tuple(items) | Py::List(items) => items
            .iter()
            .map(|x| match x {
                Py::Int(i) => Ok(*i),
                _ => Err(Error::bad_input(format!("{what}: expected ints"))),
            })
            .collect(),
        _ => Err(Error::bad_input(format!("{what}: expected a tuple"))),
    }
}

fn persistent_load(pid: Py) -> Result<Py> {
    let Py::Tuple(items) = pid else {
        return Err(Error::bad_input("persistent id is not a tuple"));
    };
    match items.as_slice() {
        [Py::Str(tag), Py::Global(class), Py::Str(key), ..] if tag == "storage" => {
            let dtype = storage_dtype(class)
                .ok_or_else(|| Error::unsupported(format!("storage class {class} is not read")))?;
            Ok(Py::Storage {
                dtype,
                key: key.clone(),
            })
        }
        _ => Err(Error::unsupported("persistent id of an unknown form")),
    }
}

fn reduce(func: Py, args: Py) -> Result<Py> {
    let Py::Global(name) = func else {
        return Err(Error::bad_input("pickle REDUCE on a non-callable"));
    };
    let args = match args {
        Py::Tuple(a) => a,
        _ => return Err(Error::bad_input("pickle REDUCE arguments are not a tuple")),
    };
    match name.as_str() {
        "collections.OrderedDict" => Ok(Py::Dict(Vec::new())),
        "torch._utils._rebuild_tensor_v2" => {
            let (storage, offset, sizes, strides) = match args.as_slice() {
                [s, Py::Int(o), size, stride, ..] => (s, *o, size, stride),
                _ => {
                    return Err(Error::bad_input(
                        "_rebuild_tensor_v2 with unexpected arguments",
                    ))
                }
            };
            let Py::Storage { dtype, key } = storage else {
                return Err(Error::bad_input("_rebuild_tensor_v2 without a storage"));
            };
            Ok(Py::Tensor(Box::new(TensorRec {
                dtype: *dtype,
                key: key.clone(),
                offset,
                sizes: ints(sizes, "tensor sizes")?,
                strides: ints(strides, "tensor strides")?,
            })))
        }
        "torch.jit._pickle.restore_type_tag"
        | "torch.jit._pickle.build_intlist"
        | "torch.jit._pickle.build_doublelist"
        | "torch.jit._pickle.build_boollist"
        | "torch.jit._pickle.build_tensorlist" => args
            .into_iter()
            .next()
            .ok_or_else(|| Error::bad_input(format!("{name} without an argument"))),
        "torch._utils._rebuild_parameter" | "torch._utils._rebuild_parameter_with_state" => {
            match args.into_iter().next() {
                Some(t @ Py::Tensor(_)) => Ok(t),
                _ => Err(Error::bad_input("_rebuild_parameter without a tensor")),
            }
        }
        other => Err(Error::unsupported(format!(
            "the pickle calls {other}, which this reader does not rebuild"
        ))),
    }
}
