//! Storages passed by reference (`StorageRef` records): where the bytes a
//! record points at may lie, how a reader checks them, and the hand-over
//! of a spool between two tools of one pipeline.
//!
//! A reference names a file by path, with the size and modification time
//! the writer saw, and a window of it. Three kinds of file are accepted,
//! each only where the window is data a writer put there, so that a
//! stream cannot point a tool at arbitrary bytes of an arbitrary file:
//!
//! - a `.pt2` archive: the window lies in a stored member
//!   (`zip::Archive::stored_window`);
//! - an IR file: the window lies in the data of a storage chunk record
//!   (the file's records are walked once, [`IrFile`]). A tool that reads
//!   an IR file by path (or from standard input redirected from one)
//!   passes its weights on this way into a pipe, so `ir-decompose <
//!   big.ir | ir2onnx --external-data` copies them once, from the page
//!   cache, at disk speed;
//! - a spool: weights a tool read inline from a pipe and wrote to an
//!   unlinked temporary file of its own (`.pt2kit-spool-*`, named so only
//!   until it is unlinked, right after it is made). Another process
//!   reaches it as `/proc/PID/fd/N` while the tool lives; so a spool is
//!   passed on by reference only in a hand-over: to standard output that
//!   is a pipe whose reader is a pt2kit tool (it holds a shared `flock`
//!   on the pipe, [`offer_handover`]: `cat` or `tee` take none, and get
//!   the bytes inline), and the writer, after its end record, waits until
//!   that reader has opened the spool (the reader holds a shared `flock`
//!   on its own open file of it) or has gone away (its end of the pipe
//!   closed). The reader then holds the file open itself, maps it, and
//!   hands it over in turn. So a pipe of inline weights is spooled at most
//!   once per pipeline, no file outlives its last reader (the spool is
//!   unlinked from the start; the kernel frees it when the last process
//!   holding it closes it), and no reference is ever written where no
//!   live process can resolve it.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use super::pb;
use crate::blob::{Blob, FileOrigin, OriginKind};
use crate::error::{Error, Result};

/// The file name prefix of a spool while it has a name (microseconds).
pub(super) const SPOOL_PREFIX: &str = ".pt2kit-spool-";

/// Files that references of one stream point into, each opened once.
#[derive(Default)]
pub(super) struct Resolver {
    files: HashMap<String, Referred>,
}

enum Referred {
    Archive(crate::zip::Archive),
    Ir(IrFile),
    Spool(Blob),
}

/// An IR file that references point into: mapped, with the data of its
/// storage chunks (file offsets, sorted).
struct IrFile {
    whole: Blob,
    spans: Vec<(u64, u64)>,
}

impl Resolver {
    /// The bytes a `StorageRef` points at.
    pub(super) fn resolve(&mut self, r: &pb::StorageRef) -> Result<Blob> {
        let path = Path::new(&r.path);
        if !path.is_absolute() {
            return Err(Error::bad_input(format!(
                "refers to a relative path {:?}",
                r.path
            )));
        }
        if !self.files.contains_key(&r.path) {
            let referred = if spool_pid(&r.path).is_some() {
                open_spool(r)?
            } else {
                open_file(r)?
            };
            self.files.insert(r.path.clone(), referred);
        }
        let window = |start: u64, len: u64, end: u64| -> Option<std::ops::Range<usize>> {
            let stop = start.checked_add(len)?;
            (stop <= end).then_some(usize::try_from(start).ok()?..usize::try_from(stop).ok()?)
        };
        let outside = || {
            Error::bad_input(format!(
                "bytes {}..{} of {} are not the data of a stored archive member, nor of a storage chunk",
                r.offset,
                r.offset.saturating_add(r.length),
                r.path
            ))
        };
        match &self.files[&r.path] {
            Referred::Archive(a) => a.stored_window(r.offset, r.length).ok_or_else(outside),
            Referred::Ir(f) => {
                // the span that holds the window's start, if it holds all
                let at = f.spans.partition_point(|&(s, _)| s <= r.offset);
                let inside = at
                    .checked_sub(1)
                    .map(|i| f.spans[i])
                    .and_then(|(s, n)| window(r.offset, r.length, s + n));
                inside.map(|w| f.whole.slice(w)).ok_or_else(outside)
            }
            Referred::Spool(whole) => window(r.offset, r.length, whole.len() as u64)
                .map(|w| whole.slice(w))
                .ok_or_else(|| {
                    Error::bad_input(format!(
                        "bytes {}..{} are outside the {} bytes of the spool {}",
                        r.offset,
                        r.offset.saturating_add(r.length),
                        whole.len(),
                        r.path
                    ))
                }),
        }
    }
}

/// The process whose spool a path names (`/proc/PID/fd/N`), if it does.
fn spool_pid(path: &str) -> Option<u32> {
    let rest = path.strip_prefix("/proc/")?;
    let (pid, fd) = rest.split_once("/fd/")?;
    fd.parse::<u32>().ok()?;
    pid.parse().ok()
}

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.mtime() * 1_000_000_000 + meta.mtime_nsec()
}

/// An archive or an IR file a reference points into, unchanged since the
/// writer saw it.
fn open_file(r: &pb::StorageRef) -> Result<Referred> {
    let path = Path::new(&r.path);
    let meta = std::fs::metadata(path).map_err(|e| {
        Error::bad_input(format!(
            "refers to {}, which cannot be read ({e}); the stream was written by reference: write it again, or with --weights inline",
            r.path
        ))
    })?;
    if meta.len() != r.file_size || mtime_ns(&meta) != r.mtime_ns {
        return Err(Error::bad_input(format!(
            "refers to {}, which has changed since the stream was written: write the stream again",
            r.path
        )));
    }
    let mut head = [0u8; 8];
    let n = {
        use std::io::Read;
        File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|e| Error::io(&r.path, e))?
    };
    if head[..n] == super::MAGIC[..] {
        return open_ir(path).map(Referred::Ir);
    }
    let archive = crate::zip::Archive::open(path)
        .map_err(|e| e.at(format!("the archive it refers to, {}", r.path)))?;
    Ok(Referred::Archive(archive))
}

/// An IR file, mapped (noted as an input, checked for changes before a
/// commit: `output::inputs`), and the data of its storage chunks.
fn open_ir(path: &Path) -> Result<IrFile> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|e| Error::io(&shown, e))?;
    let map = crate::output::inputs::map(&file, Some(path), &shown)?;
    let spans = chunk_data(&map).ok_or_else(|| {
        Error::bad_input(format!(
            "{shown}: an IR file that references point into, whose records do not parse"
        ))
    })?;
    let origin = FileOrigin::of_kind(path, &file, OriginKind::IrFile).map(Arc::new);
    let n = map.len();
    Ok(IrFile {
        whole: Blob::mapped_from(map, Some(Arc::new(file)), 0..n, origin),
        spans,
    })
}

/// A varint at `*at` of `b`, moving past it.
fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The file offsets and lengths of the data of every storage chunk of an
/// IR stream (`None` where its framing does not parse). Only the records'
/// top-level fields are read; the program record is skipped whole.
fn chunk_data(b: &[u8]) -> Option<Vec<(u64, u64)>> {
    if !b.starts_with(super::MAGIC) {
        return None;
    }
    let mut spans = Vec::new();
    let mut at = super::MAGIC.len();
    let mut header = true;
    while at < b.len() {
        let len = usize::try_from(varint(b, &mut at)?).ok()?;
        let end = at.checked_add(len).filter(|&e| e <= b.len())?;
        // the stream header is the first record: its fields are no
        // Record's, and none is a storage
        let mut p = if std::mem::take(&mut header) { end } else { at };
        while p < end {
            let tag = varint(b, &mut p)?;
            match (tag >> 3, tag & 7) {
                (2, 2) => {
                    // Record.storage: a StorageChunk; its field 3 is data
                    let n = usize::try_from(varint(b, &mut p)?).ok()?;
                    let inner_end = p.checked_add(n).filter(|&e| e <= end)?;
                    while p < inner_end {
                        let t = varint(b, &mut p)?;
                        match t & 7 {
                            0 => {
                                varint(b, &mut p)?;
                            }
                            2 => {
                                let m = usize::try_from(varint(b, &mut p)?).ok()?;
                                let stop = p.checked_add(m).filter(|&e| e <= inner_end)?;
                                if t >> 3 == 3 {
                                    spans.push((p as u64, m as u64));
                                }
                                p = stop;
                            }
                            1 => p = p.checked_add(8)?,
                            5 => p = p.checked_add(4)?,
                            _ => return None,
                        }
                        if p > inner_end {
                            return None;
                        }
                    }
                    if p != inner_end {
                        return None;
                    }
                }
                (_, 0) => {
                    varint(b, &mut p)?;
                }
                (_, 2) => {
                    let n = usize::try_from(varint(b, &mut p)?).ok()?;
                    p = p.checked_add(n).filter(|&e| e <= end)?;
                }
                (_, 1) => p = p.checked_add(8)?,
                (_, 5) => p = p.checked_add(4)?,
                _ => return None,
            }
        }
        if p != end {
            return None;
        }
        at = end;
    }
    spans.sort_unstable();
    Some(spans)
}

/// Another tool's spool, handed over: checked to be one (its name, size
/// and time), opened, locked shared (the writer waits for that), mapped.
fn open_spool(r: &pb::StorageRef) -> Result<Referred> {
    let gone = |why: String| {
        Error::bad_input(format!(
            "refers to the spooled weights of another process ({}), which {why}: a stream that refers to a spool is read only through a pipe, from the tool that wrote it",
            r.path
        ))
    };
    let link = std::fs::read_link(&r.path).map_err(|e| gone(format!("cannot be reached ({e})")))?;
    let name = link
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !(name.starts_with(SPOOL_PREFIX) && name.ends_with(" (deleted)")) {
        return Err(Error::bad_input(format!(
            "refers to {} ({}), which is no spool of a pt2kit tool",
            r.path,
            link.display()
        )));
    }
    let file = File::open(&r.path).map_err(|e| gone(format!("cannot be opened ({e})")))?;
    let meta = file.metadata().map_err(|e| Error::io(&r.path, e))?;
    if meta.len() != r.file_size || mtime_ns(&meta) != r.mtime_ns {
        return Err(gone("is not the file the stream was written with".into()));
    }
    // SAFETY: flock on an open file; blocks only while the writer probes.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) } != 0 {
        return Err(Error::io(
            format!("locking {}", r.path),
            std::io::Error::last_os_error(),
        ));
    }
    let map = if crate::output::inputs::no_mmap() {
        let mut anon =
            memmap2::MmapMut::map_anon(meta.len() as usize).map_err(|e| Error::io(&r.path, e))?;
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut anon[..], 0)
            .map_err(|e| Error::io(&r.path, e))?;
        anon.make_read_only().map_err(|e| Error::io(&r.path, e))?
    } else {
        // SAFETY: a spool is never written once handed over: its writer
        // finished it before it wrote the reference, and nobody else can
        // open it for writing (it has no name).
        unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(&r.path, e))?
    };
    let origin = FileOrigin::spool(&file).map(Arc::new);
    let n = map.len();
    Ok(Referred::Spool(Blob::mapped_from(
        Arc::new(map),
        Some(Arc::new(file)),
        0..n,
        origin,
    )))
}

/// The origin of an IR file read through a map, whose windows can then be
/// passed on by reference: `path`, or for standard input redirected from
/// a file the path it was opened at (`/proc/self/fd/0`), where that still
/// names the same file.
pub(super) fn ir_file_origin(file: &File, path: Option<&Path>) -> Option<Arc<FileOrigin>> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => {
            let p = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()?;
            let (a, b) = (std::fs::metadata(&p).ok()?, file.metadata().ok()?);
            if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
                return None;
            }
            p
        }
    };
    if !file.metadata().ok()?.is_file() || crate::output::inputs::no_mmap() {
        return None;
    }
    FileOrigin::of_kind(&path, file, OriginKind::IrFile).map(Arc::new)
}

/// A reader of an IR stream on standard input (a pipe) says it takes
/// spools by hand-over: a shared `flock` on the pipe, held until it exits
/// (the writer looks for it, [`reader_takes_handover`]). Not with
/// `--no-mmap`.
pub fn offer_handover() {
    offer_handover_on(std::io::stdin().as_fd());
}

/// [`offer_handover`] on the read end of a pipe other than standard
/// input (a test reading a tool's output itself).
pub fn offer_handover_on(fd: std::os::fd::BorrowedFd) {
    if crate::output::inputs::no_mmap() {
        return;
    }
    let fd = fd.as_raw_fd();
    // SAFETY: fstat into a zeroed stat buffer; flock on an open fd,
    // non-blocking, its result only informs.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFIFO {
            libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB);
        }
    }
}

/// Whether the reader of standard output (a pipe) is a pt2kit tool that
/// takes spools by hand-over: it holds a shared `flock` on the pipe.
/// A process with spooled weights asks for a while (the reader, started
/// beside it by the shell, may not have reached its lock yet on a loaded
/// machine); one without asks once.
pub fn reader_takes_handover() -> bool {
    let patience = if crate::blob::SPOOLED.load(std::sync::atomic::Ordering::Relaxed) {
        HANDOVER_OFFER_WAIT
    } else {
        std::time::Duration::ZERO
    };
    let start = std::time::Instant::now();
    loop {
        // SAFETY: flock on fd 1. Where no reader holds it, the exclusive
        // lock taken is dropped at once.
        let held = unsafe {
            if libc::flock(1, libc::LOCK_EX | libc::LOCK_NB) == 0 {
                libc::flock(1, libc::LOCK_UN);
                false
            } else {
                std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
            }
        };
        if held || start.elapsed() >= patience {
            return held;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// How long a tool with spooled weights waits for its pipe's reader to say
/// it takes a hand-over before it writes them inline.
const HANDOVER_OFFER_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// How long a writer waits for its reader to open the spools it handed
/// over before it exits anyway (the reader then says the spool is gone).
const HANDOVER_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// After a stream that handed over `spools` has been written and flushed:
/// waits until the reader of standard output holds each open (a shared
/// lock of its own) or has closed its end of the pipe.
pub(super) fn wait_for_handover(spools: &[Arc<File>]) {
    let start = std::time::Instant::now();
    for f in spools {
        let fd = f.as_raw_fd();
        loop {
            // SAFETY: flock on an open file: an exclusive lock fails while
            // another open file of it holds a shared one; taken, it goes
            // back to shared at once (this process may be a reader of it
            // in turn).
            let free = unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0;
            if !free {
                break;
            }
            unsafe { libc::flock(fd, libc::LOCK_SH) };
            let mut p = libc::pollfd {
                fd: 1,
                events: 0,
                revents: 0,
            };
            // SAFETY: poll on one pollfd, no wait.
            let n = unsafe { libc::poll(&mut p, 1, 0) };
            if n > 0 && p.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                return; // the reader went away
            }
            if start.elapsed() > HANDOVER_WAIT {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_data_finds_every_storage_and_nothing_else() {
        let p = crate::ir::Program {
            storages: vec![Blob::owned(vec![7u8; 10]), Blob::owned(vec![9u8; 3])],
            ..Default::default()
        };
        let mut out = Vec::new();
        super::super::write_program_chunked(&p, &mut out, super::super::Weights::Inline, 4)
            .unwrap();
        let spans = chunk_data(&out).unwrap();
        let lens: Vec<u64> = spans.iter().map(|s| s.1).collect();
        assert_eq!(lens, vec![4, 4, 2, 3]);
        for (s, n) in &spans {
            let bytes = &out[*s as usize..(*s + *n) as usize];
            assert!(bytes.iter().all(|&b| b == 7) || bytes.iter().all(|&b| b == 9));
        }
        assert!(chunk_data(&out[..out.len() - 1]).is_none());
        assert!(chunk_data(b"PK\x03\x04").is_none());
    }

    #[test]
    fn spool_paths() {
        assert_eq!(spool_pid("/proc/12/fd/3"), Some(12));
        assert_eq!(spool_pid("/proc/self/fd/3"), None);
        assert_eq!(spool_pid("/tmp/x"), None);
    }
}
