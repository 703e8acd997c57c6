//! The binary IR stream that flows through pipes between the tools.
//!
//! Layout (see `lib/proto/pt2ir.proto` for the messages):
//!
//! ```text
//! "\x89PT2IR\r\n"            8-byte magic (the \r\n catches text-mode mangling)
//! varint len, StreamHeader   format major.minor, producer
//! varint len, Record{program}
//! varint len, Record{storage chunk} ...   tensor bytes, <= 1 GiB a chunk
//! varint len, Record{end}    counts, so truncation is detected
//! ```
//!
//! A reader refuses a newer major version; a newer minor is read (fields it
//! does not know are skipped by protobuf). Nothing may follow the end
//! record (two streams concatenated are refused, not read as the first). A stream's storages are read
//! into one allocation when they are small; above [`SPOOL_BYTES`] they are
//! written, as they arrive, to an unlinked temporary file that is then
//! mapped, so a reader of a pipe holds a bounded window of weight bytes in
//! its own memory whatever the model's size (the page cache holds the
//! rest, and gives it back under pressure).
//!
//! [`read_program_file`] reads a regular file through a memory map instead:
//! a storage written as one chunk becomes a [`Blob`] window of the map (its
//! bytes are never copied, nor fresh pages zeroed for them); a storage
//! split over several chunks is not contiguous in the file (chunk headers
//! sit between its pieces; this writer splits only storages over 1 GiB),
//! so it is gathered into a spooled temporary file, as from a large
//! stream. Every check
//! of the stream path (framing, order, counts, truncation) is the same code.

mod convert;
mod refs;

pub use refs::{offer_handover, offer_handover_on, reader_takes_handover};

use std::fs::File;
use std::io::{Read, Write};
use std::sync::Arc;

use protobuf::Message;

use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::ir::Program;

#[allow(
    clippy::all,
    unused,
    renamed_and_removed_lints,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals
)]
pub(crate) mod generated {
    include!(concat!(env!("OUT_DIR"), "/proto/mod.rs"));
}
pub(crate) use generated::pt2ir as pb;

pub const MAGIC: &[u8; 8] = b"\x89PT2IR\r\n";
pub const FORMAT_MAJOR: u32 = 1;
/// Minor 1: storages may be passed by reference (`StorageRef`).
/// Minor 2: a reference may point into an IR file's storage chunk, or into
/// another tool's spool (handed over through a pipe: `refs`).
pub const FORMAT_MINOR: u32 = 2;
/// Storage bytes per chunk record: one chunk per storage up to 1 GiB, so
/// that a reader of an IR file maps each storage as one window of the file
/// (a storage split over chunks is not contiguous there: chunk headers sit
/// between its pieces). Readers and writers hold no chunk whole: the bytes
/// go straight between the storage and the stream.
const CHUNK: usize = 1 << 30;
/// Storage bytes above which a stream's weights are spooled to an unlinked
/// temporary file and mapped, instead of read into memory
/// (`PT2KIT_SPOOL_BYTES` overrides it; 0 spools every stream).
pub const SPOOL_BYTES: u64 = 256 << 20;
const MAX_RECORD: u64 = (1 << 31) - 1;

fn write_err(e: std::io::Error) -> Error {
    Error::io("writing the IR stream", e)
}

fn write_record<W: Write + ?Sized>(w: &mut W, bytes: &[u8]) -> Result<()> {
    let mut len = bytes.len() as u64;
    let mut buf = [0u8; 10];
    let mut n = 0;
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        buf[n] = if len == 0 { byte } else { byte | 0x80 };
        n += 1;
        if len == 0 {
            break;
        }
    }
    w.write_all(&buf[..n]).map_err(write_err)?;
    w.write_all(bytes).map_err(write_err)
}

fn encode<M: Message>(m: &M) -> Result<Vec<u8>> {
    m.write_to_bytes()
        .map_err(|e| Error::internal(format!("encoding the IR: {e}")))
}

/// Writes a program as an IR stream.
/// How a stream carries weight bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    /// In the stream, in chunks.
    Inline,
    /// By reference where a storage is a stored member of a `.pt2` archive
    /// on disk, or the data of a storage chunk of an IR file (the reader
    /// maps the file itself); inline otherwise.
    Reference,
    /// As `Reference`, and a storage in this process's spool (weights it
    /// read from a pipe) by reference too: only into a pipe whose reader
    /// takes a hand-over ([`reader_takes_handover`]; see `refs`), which
    /// the writer waits for after its end record.
    Handover,
}

impl Weights {
    /// Where a storage goes by reference, if it does.
    fn reference(self, storage: &Blob) -> Option<crate::blob::FileRef> {
        let r = storage.file_ref()?;
        match (self, r.origin.kind) {
            (Weights::Inline, _) => None,
            (Weights::Reference, crate::blob::OriginKind::Spool) => None,
            _ => Some(r),
        }
    }
}

/// Writes a program with its weights inline.
pub fn write_program<W: Write + ?Sized>(program: &Program, w: &mut W) -> Result<()> {
    write_program_with(program, w, Weights::Inline)
}

/// Writes a program, its weights inline or by reference.
pub fn write_program_with<W: Write + ?Sized>(
    program: &Program,
    w: &mut W,
    weights: Weights,
) -> Result<()> {
    write_program_chunked(program, w, weights, CHUNK)
}

/// [`write_program_with`] in chunks of at most `chunk` bytes (tests make
/// storages span several chunks without gigabytes of them).
#[doc(hidden)]
pub fn write_program_chunked<W: Write + ?Sized>(
    program: &Program,
    w: &mut W,
    weights: Weights,
    chunk: usize,
) -> Result<()> {
    let spools = write_program_unwaited(program, w, weights, chunk)?;
    if !spools.is_empty() {
        refs::wait_for_handover(&spools);
    }
    Ok(())
}

/// [`write_program_chunked`] without the wait for a hand-over: returns the
/// spools it handed over (tests write hostile streams with it).
#[doc(hidden)]
pub fn write_program_unwaited<W: Write + ?Sized>(
    program: &Program,
    w: &mut W,
    weights: Weights,
    chunk: usize,
) -> Result<Vec<Arc<File>>> {
    let chunk = chunk.clamp(1, CHUNK);
    w.write_all(MAGIC).map_err(write_err)?;
    let header = pb::StreamHeader {
        format_major: FORMAT_MAJOR,
        format_minor: FORMAT_MINOR,
        producer: format!("pt2kit {}", env!("CARGO_PKG_VERSION")),
        ..Default::default()
    };
    write_record(w, &encode(&header)?)?;
    let record = pb::Record {
        kind: Some(pb::record::Kind::Program(convert::program_to_pb(program))),
        ..Default::default()
    };
    let bytes = encode(&record)?;
    if bytes.len() as u64 > MAX_RECORD {
        return Err(Error::unsupported(
            "the graph message exceeds protobuf's 2 GiB limit",
        ));
    }
    write_record(w, &bytes)?;
    drop(bytes);
    let inline_bytes: u64 = program
        .storages
        .iter()
        .filter(|s| weights.reference(s).is_none())
        .map(|s| s.len() as u64)
        .sum();
    // The spools handed over, to wait for once the stream is written.
    let mut spools: Vec<Arc<File>> = Vec::new();
    let mut progress = crate::progress::Progress::bytes("weights", inline_bytes);
    let w = &mut crate::progress::CountingWriter {
        inner: w,
        progress: &mut progress,
    };
    let mut total = 0u64;
    for (index, storage) in program.storages.iter().enumerate() {
        if let Some(r) = weights.reference(storage) {
            if r.origin.kind == crate::blob::OriginKind::Spool {
                if let Some(f) = storage.file() {
                    if !spools.iter().any(|s| Arc::ptr_eq(s, f)) {
                        spools.push(f.clone());
                    }
                }
            }
            let record = pb::Record {
                kind: Some(pb::record::Kind::StorageRef(pb::StorageRef {
                    index: index as u32,
                    path: r.origin.path.to_string_lossy().into_owned(),
                    offset: r.offset,
                    length: r.len,
                    file_size: r.origin.size,
                    mtime_ns: r.origin.mtime_ns,
                    ..Default::default()
                })),
                ..Default::default()
            };
            write_record(w, &encode(&record)?)?;
            total += storage.len() as u64;
            continue;
        }
        let mut crc = crc32fast::Hasher::new();
        let mut offset = 0;
        while offset < storage.len() {
            let len = chunk.min(storage.len() - offset);
            // The chunk record is framed by hand so its bytes go straight
            // from the archive to the output, never into a message.
            let head = pb::StorageChunk {
                index: index as u32,
                offset: offset as u64,
                ..Default::default()
            };
            let mut inner = encode(&head)?;
            inner.push(0x1a); // field 3 (data), length-delimited
            push_varint(&mut inner, len as u64);
            let inner_len = inner.len() + len;
            let mut outer = vec![0x12]; // Record field 2 (storage)
            push_varint(&mut outer, inner_len as u64);
            let mut prefix = Vec::new();
            push_varint(&mut prefix, (outer.len() + inner_len) as u64);
            w.write_all(&prefix).map_err(write_err)?;
            w.write_all(&outer).map_err(write_err)?;
            w.write_all(&inner).map_err(write_err)?;
            storage.write_range_to(offset..offset + len, w, &mut crc)?;
            offset += len;
        }
        total += storage.len() as u64;
    }
    let end = pb::Record {
        kind: Some(pb::record::Kind::End(pb::End {
            storages: program.storages.len() as u64,
            bytes: total,
            ..Default::default()
        })),
        ..Default::default()
    };
    write_record(w, &encode(&end)?)?;
    w.flush().map_err(write_err)?;
    Ok(spools)
}

/// Appends a protobuf varint (also used by the ONNX writer's framing).
pub(crate) fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The whole stream in memory (tests, small graphs).
pub fn encode_program(program: &Program) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write_program(program, &mut out)?;
    Ok(out)
}

/// Where records come from: a stream, or a mapped file that can also hand
/// out windows of itself.
trait Input: Read {
    /// Whether [`Input::window`] hands out windows.
    fn is_mapped(&self) -> bool {
        false
    }

    /// The next `n` bytes as a window of the mapped file, consumed; `None`
    /// for a stream. `Some(None)` when fewer than `n` bytes are left.
    fn window(&mut self, _n: u64) -> Option<Option<Blob>> {
        None
    }
}

struct Stream<R>(R);

impl<R: Read> Read for Stream<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
    fn read_exact(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_exact(buf)
    }
}

impl<R: Read> Input for Stream<R> {}

/// A memory-mapped file read from `pos` on.
struct Mapped {
    map: Arc<memmap2::Mmap>,
    file: Arc<File>,
    pos: usize,
    /// The file as other processes can find it (its windows may then be
    /// passed on by reference).
    origin: Option<Arc<crate::blob::FileOrigin>>,
}

impl Read for Mapped {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = &self.map[self.pos.min(self.map.len())..];
        let n = buf.len().min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

impl Input for Mapped {
    fn is_mapped(&self) -> bool {
        true
    }

    fn window(&mut self, n: u64) -> Option<Option<Blob>> {
        let left = self.map.len().saturating_sub(self.pos) as u64;
        if n > left {
            return Some(None);
        }
        let range = self.pos..self.pos + n as usize;
        self.pos = range.end;
        Some(Some(Blob::mapped_from(
            self.map.clone(),
            Some(self.file.clone()),
            range,
            self.origin.clone(),
        )))
    }
}

struct RecordReader<'a, R: Input> {
    r: &'a mut R,
    what: &'a str,
}

impl<R: Input> RecordReader<'_, R> {
    fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::bad_input(format!("{}: {msg}", self.what))
    }

    fn byte(&mut self) -> Result<Option<u8>> {
        let mut b = [0u8];
        loop {
            match self.r.read(&mut b) {
                Ok(0) => return Ok(None),
                Ok(_) => return Ok(Some(b[0])),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(self.what, e)),
            }
        }
    }

    /// A varint; `None` only at a clean end of input before its first byte.
    fn varint(&mut self, consumed: &mut u64) -> Result<Option<u64>> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let Some(b) = self.byte()? else {
                if shift == 0 {
                    return Ok(None);
                }
                return Err(self.err("truncated IR stream (inside a varint)"));
            };
            *consumed += 1;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(Some(v));
            }
            shift += 7;
            if shift > 63 {
                return Err(self.err("corrupt IR stream (bad varint)"));
            }
        }
    }

    fn varint_req(&mut self, consumed: &mut u64) -> Result<u64> {
        self.varint(consumed)?
            .ok_or_else(|| self.err("truncated IR stream (inside a record)"))
    }

    fn fill(&mut self, buf: &mut [u8], consumed: &mut u64) -> Result<()> {
        self.r.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                self.err(format!(
                    "truncated IR stream ({} bytes missing in a record)",
                    buf.len()
                ))
            } else {
                Error::io(self.what, e)
            }
        })?;
        *consumed += buf.len() as u64;
        Ok(())
    }

    /// The next record's length, or `None` at a clean end of input.
    fn record_len(&mut self) -> Result<Option<u64>> {
        let mut n = 0;
        let len = self.varint(&mut n)?;
        if let Some(len) = len {
            if len > MAX_RECORD {
                return Err(self.err(format!("corrupt IR stream (record of {len} bytes)")));
            }
        }
        Ok(len)
    }

    /// The rest of a record whose first `done` bytes were read.
    fn rest(&mut self, len: u64, done: u64, prefix: &[u8]) -> Result<Vec<u8>> {
        if done > len {
            return Err(self.err(format!(
                "corrupt IR stream (a record of {len} bytes whose first field takes {done})"
            )));
        }
        let mut buf = Vec::with_capacity(len as usize);
        buf.extend_from_slice(prefix);
        buf.resize(len as usize, 0);
        let mut n = 0;
        self.fill(&mut buf[done as usize..], &mut n)?;
        Ok(buf)
    }

    /// Skips one field of the given wire type.
    fn skip_field(&mut self, tag: u64, consumed: &mut u64) -> Result<()> {
        match tag & 7 {
            0 => {
                self.varint_req(consumed)?;
            }
            2 => {
                let mut n = self.varint_req(consumed)?;
                if n > MAX_RECORD {
                    return Err(self.err(format!("corrupt IR stream (a field of {n} bytes)")));
                }
                // read and dropped in pieces: the length is not trusted
                let mut sink = [0u8; 4096];
                while n > 0 {
                    let k = n.min(sink.len() as u64) as usize;
                    self.fill(&mut sink[..k], consumed)?;
                    n -= k as u64;
                }
            }
            1 => self.fill(&mut [0u8; 8], consumed)?,
            5 => self.fill(&mut [0u8; 4], consumed)?,
            w => return Err(self.err(format!("corrupt IR stream (wire type {w})"))),
        }
        Ok(())
    }
}

/// A zeroed buffer of `n` bytes, or `None` where the allocator refuses
/// (a size read from a stream is not trusted: `vec![0; n]` would abort).
/// Fresh pages from the allocator, no memset.
fn try_zeroed(n: usize) -> Option<Vec<u8>> {
    if n == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(n).ok()?;
    // SAFETY: the layout's size is not zero; a non-null pointer is a fresh
    // allocation of `n` zeroed bytes, aligned for u8, from the global
    // allocator, which the Vec owns from here on (capacity = length = n).
    unsafe {
        let p = std::alloc::alloc_zeroed(layout);
        if p.is_null() {
            return None;
        }
        Some(Vec::from_raw_parts(p, n, n))
    }
}

/// What a non-IR input looks like, for the refusal message.
fn sniff(head: &[u8]) -> &'static str {
    if head.starts_with(b"PK\x03\x04") {
        "a zip archive (a .pt2? convert it with pt2ir first)"
    } else if head.starts_with(b"# pt2ir") || head.starts_with(b"program") {
        "a text listing (tools read only the binary IR; listings are for people and goldens)"
    } else if head.starts_with(b"---") || head.starts_with(b"info:") {
        "YAML (tools read only the binary IR; YAML is for people)"
    } else if head.starts_with(b"\x08") {
        "an ONNX or other protobuf file"
    } else if head.is_empty() {
        "empty"
    } else {
        "not a pt2ir stream"
    }
}

/// Reads a whole IR stream and validates the program.
pub fn read_program<R: Read>(r: &mut R, what: &str) -> Result<Program> {
    read_input(&mut Stream(r), what)
}

/// Reads an IR file through a memory map: storages written as one chunk
/// (all of them, from this writer, up to 16 MiB each) are windows of the
/// map, not copies. Same checks and errors as [`read_program`]. A file
/// truncated or rewritten while mapped is caught as `output::inputs`
/// describes (SIGBUS message, or a refused result); `--no-mmap` reads it
/// into memory instead.
pub fn read_program_file(
    file: File,
    path: Option<&std::path::Path>,
    what: &str,
) -> Result<Program> {
    let map = crate::output::inputs::map(&file, path, what)?;
    let origin = refs::ir_file_origin(&file, path);
    let mut input = Mapped {
        map,
        file: Arc::new(file),
        pos: 0,
        origin,
    };
    read_input(&mut input, what)
}

fn read_input<R: Input>(r: &mut R, what: &str) -> Result<Program> {
    let mut magic = Vec::with_capacity(8);
    r.by_ref()
        .take(8)
        .read_to_end(&mut magic)
        .map_err(|e| Error::io(what, e))?;
    if magic.as_slice() != MAGIC {
        return Err(Error::bad_input(format!(
            "{what}: not a pt2ir stream: the input is {}",
            sniff(&magic)
        )));
    }
    let mut rr = RecordReader { r, what };
    let header_len = rr
        .record_len()?
        .ok_or_else(|| rr.err("truncated IR stream (no header)"))?;
    let header_bytes = rr.rest(header_len, 0, &[])?;
    let header = pb::StreamHeader::parse_from_bytes(&header_bytes)
        .map_err(|e| rr.err(format!("corrupt stream header: {e}")))?;
    if header.format_major > FORMAT_MAJOR {
        return Err(Error::unsupported(format!(
            "{what}: IR format {}.{} (written by {}) is newer than this tool's {FORMAT_MAJOR}.{FORMAT_MINOR}: upgrade the toolkit",
            header.format_major, header.format_minor, header.producer
        )));
    }
    let mut program: Option<Program> = None;
    // From a stream, all storages live in one zeroed allocation (fresh
    // pages, no memset), each at its offset: one allocation however many
    // weights there are; above the spool threshold, in a temporary file
    // instead. From a mapped file, a storage in one chunk is a window of
    // the map (`windows`); only one split over several chunks is gathered,
    // into a temporary file (`split`).
    let mapped = rr.r.is_mapped();
    let mut arena: Vec<u8> = Vec::new();
    // Or, for a large stream, the storages in a temporary file.
    let mut spool: Option<Spool> = None;
    // Whether the storages go to a spool: made at the first chunk (a
    // stream whose weights all come by reference makes none).
    let mut spool_total: Option<u64> = None;
    // Bytes of weights read from a stream (a file's are mapped, not read).
    let mut progress: Option<crate::progress::Progress> = None;
    let mut windows: Vec<Option<Blob>> = Vec::new();
    // (a mapped file's storages split over chunks, gathered in a spool file)
    let mut split: Option<Spool> = None;
    let mut gathered: Vec<bool> = Vec::new();
    let mut bases: Vec<usize> = Vec::new();
    let mut sizes: Vec<u64> = Vec::new();
    let mut filled: Vec<u64> = Vec::new();
    // Storages passed by reference, and the files they point into.
    let mut by_ref: Vec<Option<Blob>> = Vec::new();
    let mut resolver = refs::Resolver::default();
    loop {
        let len = rr
            .record_len()?
            .ok_or_else(|| rr.err("truncated IR stream (no end record)"))?;
        let mut consumed = 0u64;
        let first = rr.varint_req(&mut consumed)?;
        if first == 0x12 && program.is_some() {
            // A storage chunk: read its bytes straight into the storage,
            // with no intermediate message (the writer frames it by hand).
            let inner = rr.varint_req(&mut consumed)?;
            let inner_start = consumed;
            let (mut index, mut offset) = (0u64, 0u64);
            let mut data_len = None;
            if inner_start + inner != len {
                return Err(rr.err("corrupt storage record"));
            }
            while consumed - inner_start < inner {
                if consumed > len {
                    return Err(rr.err("corrupt storage record"));
                }
                let tag = rr.varint_req(&mut consumed)?;
                match tag {
                    0x08 => index = rr.varint_req(&mut consumed)?,
                    0x10 => offset = rr.varint_req(&mut consumed)?,
                    0x1a if data_len.is_none() => {
                        let n = rr.varint_req(&mut consumed)?;
                        let i = index as usize;
                        if consumed + n > len {
                            return Err(rr.err("corrupt storage record"));
                        }
                        if i >= sizes.len() || offset != filled[i] || filled[i] + n > sizes[i] {
                            return Err(rr.err(format!("storage {i}: chunk at offset {offset} out of order or out of range")));
                        }
                        if let (None, Some(total)) = (&spool, spool_total) {
                            spool = Some(Spool::new(total).map_err(|e| e.at(what))?);
                        }
                        if let Some(spool) = spool.as_mut() {
                            let start = (bases[i] as u64) + offset;
                            spool.copy(&mut rr, start, n, &mut consumed, progress.as_mut())?;
                        } else if !mapped {
                            let start = bases[i] + offset as usize;
                            rr.fill(&mut arena[start..start + n as usize], &mut consumed)?;
                            if let Some(p) = progress.as_mut() {
                                p.inc(n);
                            }
                        } else if offset == 0 && n == sizes[i] {
                            // The whole storage in one chunk: contiguous in
                            // the file, so a window of the map, no copy.
                            let blob = rr.r.window(n).flatten().ok_or_else(|| {
                                rr.err(format!(
                                    "truncated IR stream ({n} bytes missing in a record)"
                                ))
                            })?;
                            consumed += n;
                            windows[i] = Some(blob);
                        } else {
                            // Split over several chunks: its pieces are not
                            // contiguous in the file (chunk headers between
                            // them), so it is gathered into the spool file
                            // (never into memory: such a storage is over 1 GiB).
                            if split.is_none() {
                                let total = sizes.iter().sum();
                                split = Some(Spool::new(total).map_err(|e| e.at(what))?);
                            }
                            if let Some(spool) = split.as_mut() {
                                let start = bases[i] as u64 + offset;
                                spool.copy(&mut rr, start, n, &mut consumed, None)?;
                            }
                            gathered[i] = true;
                        }
                        filled[i] += n;
                        data_len = Some(n);
                    }
                    other => rr.skip_field(other, &mut consumed)?,
                }
            }
            if data_len.is_none() || consumed != len {
                return Err(rr.err("corrupt storage record"));
            }
            continue;
        }
        let mut prefix = Vec::new();
        push_varint(&mut prefix, first);
        let bytes = rr.rest(len, consumed, &prefix)?;
        let record = pb::Record::parse_from_bytes(&bytes)
            .map_err(|e| rr.err(format!("corrupt record: {e}")))?;
        drop(bytes);
        match record.kind {
            Some(pb::record::Kind::Program(p)) => {
                if program.is_some() {
                    return Err(rr.err("two programs in one stream"));
                }
                let (prog, storage_sizes) = convert::program_from_pb(&p).map_err(|e| e.at(what))?;
                let total = storage_sizes
                    .iter()
                    .try_fold(0u64, |a, &n| a.checked_add(n))
                    .filter(|&t| t <= isize::MAX as u64)
                    .ok_or_else(|| rr.err("storage sizes are corrupt"))?;
                bases = storage_sizes
                    .iter()
                    .scan(0usize, |at, &n| {
                        let base = *at;
                        *at += n as usize;
                        Some(base)
                    })
                    .collect();
                if mapped {
                    windows = vec![None; storage_sizes.len()];
                    gathered = vec![false; storage_sizes.len()];
                } else if total > spool_bytes() && !crate::output::inputs::no_mmap() {
                    spool_total = Some(total);
                } else {
                    arena = try_zeroed(total as usize).ok_or_else(|| {
                        rr.err(format!(
                            "storages of {total} bytes: more than can be allocated"
                        ))
                    })?;
                }
                if !mapped {
                    progress = Some(crate::progress::Progress::bytes("weights", total));
                }
                filled = vec![0; storage_sizes.len()];
                by_ref = vec![None; storage_sizes.len()];
                sizes = storage_sizes;
                program = Some(prog);
            }
            Some(pb::record::Kind::Storage(chunk)) => {
                // Storage records are read in place above once the program
                // is known; one before it is out of order.
                return Err(rr.err(format!("storage chunk {} before its program", chunk.index)));
            }
            Some(pb::record::Kind::StorageRef(r)) => {
                if program.is_none() {
                    return Err(rr.err(format!("storage {} before its program", r.index)));
                }
                let i = r.index as usize;
                if i >= sizes.len() || filled[i] != 0 || r.length != sizes[i] {
                    return Err(rr.err(format!(
                        "storage {i}: reference out of order or of the wrong size"
                    )));
                }
                by_ref[i] = Some(
                    resolver
                        .resolve(&r)
                        .map_err(|e| e.at(format!("{what}: storage {i}")))?,
                );
                filled[i] = r.length;
            }
            Some(pb::record::Kind::End(end)) => {
                let mut program =
                    program.ok_or_else(|| rr.err("stream ended before its program"))?;
                let total: u64 = filled.iter().sum();
                if end.storages != sizes.len() as u64 || end.bytes != total || filled != sizes {
                    return Err(rr.err("truncated IR stream (storage bytes missing)"));
                }
                // Nothing may follow the end record: two streams
                // concatenated would otherwise be read as the first alone.
                if rr.byte()?.is_some() {
                    return Err(rr.err(
                        "bytes after the end record (two IR streams concatenated?): a stream holds one program",
                    ));
                }
                let storages: Vec<Blob> = if spool.is_none() && spool_total.is_some() {
                    // every storage came by reference (or is empty)
                    vec![Blob::default(); sizes.len()]
                } else if let Some(spool) = spool.take() {
                    let (map, file, origin) = spool.finish().map_err(|e| e.at(what))?;
                    bases
                        .iter()
                        .zip(&sizes)
                        .map(|(&b, &n)| {
                            Blob::mapped_from(
                                map.clone(),
                                Some(file.clone()),
                                b..b + n as usize,
                                origin.clone(),
                            )
                        })
                        .collect()
                } else if mapped {
                    let split = split
                        .take()
                        .map(|s| s.finish())
                        .transpose()
                        .map_err(|e| e.at(what))?;
                    windows
                        .into_iter()
                        .enumerate()
                        .map(|(i, w)| match (w, &split) {
                            (Some(w), _) => w,
                            (None, Some((map, file, origin))) if gathered[i] => Blob::mapped_from(
                                map.clone(),
                                Some(file.clone()),
                                bases[i]..bases[i] + sizes[i] as usize,
                                origin.clone(),
                            ),
                            // an empty storage (no chunk)
                            _ => Blob::default(),
                        })
                        .collect()
                } else {
                    let arena = Blob::owned(std::mem::take(&mut arena));
                    bases
                        .iter()
                        .zip(&sizes)
                        .map(|(&b, &n)| arena.slice(b..b + n as usize))
                        .collect()
                };
                program.storages = storages
                    .into_iter()
                    .zip(by_ref)
                    .map(|(inline, by_ref)| by_ref.unwrap_or(inline))
                    .collect();
                crate::ir::validate::validate(&program).map_err(|e| e.at(what))?;
                return Ok(program);
            }
            None => {} // a record kind from a newer minor version
        }
    }
}

/// The storage-size threshold for spooling ([`SPOOL_BYTES`], or the
/// `PT2KIT_SPOOL_BYTES` environment variable).
fn spool_bytes() -> u64 {
    crate::knobs::value("PT2KIT_SPOOL_BYTES")
        .and_then(|v| v.to_str()?.trim().parse().ok())
        .unwrap_or(SPOOL_BYTES)
}

/// A stream's storages on their way into an unlinked temporary file
/// (`$TMPDIR`), through one bounded buffer.
struct Spool {
    file: File,
    buf: Vec<u8>,
}

impl Spool {
    fn new(total: u64) -> Result<Spool> {
        let dir = std::env::temp_dir();
        // Named (`.pt2kit-spool-*`) only until unlinked, right here: its
        // name in /proc tells a reader it is a spool (see `refs`).
        let file = tempfile::Builder::new()
            .prefix(refs::SPOOL_PREFIX)
            .tempfile_in(&dir)
            .and_then(|t| {
                let (file, path) = t.into_parts();
                path.close()?;
                Ok(file)
            })
            .map_err(|e| {
                Error::io(
                    format!("a temporary file in {} for the weights", dir.display()),
                    e,
                )
            })?;
        file.set_len(total).map_err(|e| {
            Error::io(
                format!(
                    "a temporary file of {total} bytes in {} for the weights (set TMPDIR elsewhere?)",
                    dir.display()
                ),
                e,
            )
        })?;
        Ok(Spool {
            file,
            buf: vec![0u8; 4 << 20],
        })
    }

    /// `n` bytes from the stream to the file at `at`.
    fn copy<R: Input>(
        &mut self,
        rr: &mut RecordReader<R>,
        mut at: u64,
        mut n: u64,
        consumed: &mut u64,
        mut progress: Option<&mut crate::progress::Progress>,
    ) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let whole = n;
        while n > 0 {
            let k = n.min(self.buf.len() as u64) as usize;
            if let Err(e) = rr.fill(&mut self.buf[..k], consumed) {
                // as a reader of the whole chunk would say it
                return Err(match e.kind {
                    crate::error::ErrorKind::BadInput => rr.err(format!(
                        "truncated IR stream ({whole} bytes missing in a record)"
                    )),
                    _ => e,
                });
            }
            if let Some(p) = progress.as_mut() {
                p.inc(k as u64);
            }
            self.file.write_all_at(&self.buf[..k], at).map_err(|e| {
                Error::io(
                    "writing the weights to a temporary file (set TMPDIR elsewhere?)",
                    e,
                )
            })?;
            at += k as u64;
            n -= k as u64;
        }
        Ok(())
    }

    /// The spool mapped, with its origin (a reader of this tool's output
    /// may be handed it).
    #[allow(clippy::type_complexity)]
    fn finish(
        self,
    ) -> Result<(
        Arc<memmap2::Mmap>,
        Arc<File>,
        Option<Arc<crate::blob::FileOrigin>>,
    )> {
        // SAFETY: the file is this process's own, unlinked: nothing else
        // can change it while it is mapped.
        let map = unsafe { memmap2::Mmap::map(&self.file) }
            .map_err(|e| Error::io("mapping the spooled weights", e))?;
        let origin = crate::blob::FileOrigin::spool(&self.file).map(Arc::new);
        Ok((Arc::new(map), Arc::new(self.file), origin))
    }
}
