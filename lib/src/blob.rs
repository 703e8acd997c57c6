//! Byte buffers that are either owned or a window into a memory-mapped
//! file, so weights flow from a `.pt2` archive to the output without a copy.
//!
//! A window of an archive also remembers the file and the CRC-32 the zip
//! directory promised: [`Blob::write_to`] streams it with `pread` (like
//! `cat`, no page faults on the map, memory bounded by one buffer) and
//! checks the CRC on the way; [`Blob::verify`] checks it in place.

use std::fs::File;
use std::io::Write;
use std::ops::{Deref, Range};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::error::{Error, Result};

#[derive(Clone)]
pub struct Blob {
    source: Source,
    range: Range<usize>,
    /// CRC-32 the bytes must have, not yet checked, and what to call them.
    pending_crc: Option<(u32, Arc<str>)>,
}

#[derive(Clone)]
enum Source {
    Owned(Arc<Vec<u8>>),
    Mapped(
        Arc<memmap2::Mmap>,
        Option<Arc<File>>,
        Option<Arc<FileOrigin>>,
    ),
}

/// The file a mapped blob is a window of, as another process can find it
/// again: an absolute path, and the size and modification time it had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOrigin {
    pub path: std::path::PathBuf,
    pub size: u64,
    pub mtime_ns: i64,
    pub kind: OriginKind,
}

/// What kind of file a blob's origin is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginKind {
    /// A `.pt2` (zip) archive: the blob is (part of) a stored member.
    Archive,
    /// An IR file: the blob is the data of a storage chunk.
    IrFile,
    /// A tool's spool file: weights it read from a pipe, in an unlinked
    /// temporary file that lives as long as the tool (and whoever opened
    /// it): reachable by another process only as `/proc/PID/fd/N`, and
    /// passed on only to a reader that opens it before the tool exits
    /// (`wire`'s hand-over).
    Spool,
}

impl FileOrigin {
    /// The origin of an open archive (`None` when its path cannot be made
    /// absolute or it has no modification time).
    pub fn of(path: &std::path::Path, file: &File) -> Option<FileOrigin> {
        FileOrigin::of_kind(path, file, OriginKind::Archive)
    }

    /// The origin of an open file of the given kind, at `path`.
    pub fn of_kind(path: &std::path::Path, file: &File, kind: OriginKind) -> Option<FileOrigin> {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata().ok()?;
        Some(FileOrigin {
            path: std::fs::canonicalize(path).ok()?,
            size: meta.len(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            kind,
        })
    }

    /// The origin of this process's spool file `file`: `/proc/PID/fd/N`.
    pub fn spool(file: &File) -> Option<FileOrigin> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        SPOOLED.store(true, std::sync::atomic::Ordering::Relaxed);
        let meta = file.metadata().ok()?;
        Some(FileOrigin {
            path: format!("/proc/{}/fd/{}", std::process::id(), file.as_raw_fd()).into(),
            size: meta.len(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            kind: OriginKind::Spool,
        })
    }
}

/// Whether this process has spooled weights (something it could hand over).
pub(crate) static SPOOLED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// A window of a file another tool can map itself: where it is, and the
/// CRC-32 its bytes must have, if one is known.
pub struct FileRef {
    pub origin: Arc<FileOrigin>,
    pub offset: u64,
    pub len: u64,
    pub crc32: Option<u32>,
}

impl Blob {
    pub fn owned(bytes: Vec<u8>) -> Blob {
        let len = bytes.len();
        Blob {
            source: Source::Owned(Arc::new(bytes)),
            range: 0..len,
            pending_crc: None,
        }
    }

    /// Whether the bytes are this process's own (not a window of a
    /// mapped file): dropping the last handle frees them.
    pub fn is_owned(&self) -> bool {
        matches!(self.source, Source::Owned(_))
    }

    pub fn mapped(map: Arc<memmap2::Mmap>, file: Option<Arc<File>>, range: Range<usize>) -> Blob {
        Blob::mapped_from(map, file, range, None)
    }

    /// A window of a mapped file whose origin is known (it can be passed
    /// by reference: see [`Blob::file_ref`]).
    pub fn mapped_from(
        map: Arc<memmap2::Mmap>,
        file: Option<Arc<File>>,
        range: Range<usize>,
        origin: Option<Arc<FileOrigin>>,
    ) -> Blob {
        Blob {
            source: Source::Mapped(map, file, origin),
            range,
            pending_crc: None,
        }
    }

    /// The open file a mapped blob is a window of, if it has one.
    pub fn file(&self) -> Option<&Arc<File>> {
        match &self.source {
            Source::Mapped(_, file, _) => file.as_ref(),
            Source::Owned(_) => None,
        }
    }

    /// Where these bytes lie in a file of known origin, if they do.
    pub fn file_ref(&self) -> Option<FileRef> {
        match &self.source {
            Source::Mapped(_, _, Some(origin)) => Some(FileRef {
                origin: origin.clone(),
                offset: self.range.start as u64,
                len: self.range.len() as u64,
                crc32: self.pending_crc.as_ref().map(|(c, _)| *c),
            }),
            _ => None,
        }
    }

    /// A sub-window of this blob (any pending CRC applies to the whole).
    pub fn slice(&self, range: Range<usize>) -> Blob {
        let start = self.range.start + range.start;
        Blob {
            source: self.source.clone(),
            range: start..start + range.len(),
            pending_crc: None,
        }
    }

    /// Defers a CRC check to [`Blob::verify`] or [`Blob::write_to`].
    pub fn with_pending_crc(mut self, crc: u32, what: &str) -> Blob {
        self.pending_crc = Some((crc, what.into()));
        self
    }

    pub fn without_pending_crc(mut self) -> Blob {
        self.pending_crc = None;
        self
    }

    /// CRC-32 of the bytes, as listings show it.
    pub fn crc32(&self) -> u32 {
        crc32fast::hash(self)
    }

    fn crc_error(expected: u32, got: u32, what: &str) -> Error {
        Error::bad_input(format!(
            "{what}: CRC mismatch (0x{got:08x}, the zip directory says 0x{expected:08x}): corrupt archive"
        ))
    }

    /// Checks a pending CRC.
    pub fn verify(&self) -> Result<()> {
        if let Some((expected, what)) = &self.pending_crc {
            let got = self.crc32();
            if got != *expected {
                return Err(Blob::crc_error(*expected, got, what));
            }
        }
        Ok(())
    }

    /// Writes `range` of the bytes; a file-backed window is read with
    /// `pread` into a small buffer instead of faulting in the map. When the
    /// whole blob is written in order, a pending CRC is checked at its end
    /// (`crc` carries the running state between calls).
    pub fn write_range_to(
        &self,
        range: Range<usize>,
        w: &mut (impl Write + ?Sized),
        crc: &mut crc32fast::Hasher,
    ) -> Result<()> {
        let io = |e| Error::io("writing the IR stream", e);
        match &self.source {
            Source::Mapped(_, Some(file), _) => {
                // One cache-sized buffer per thread, reused: allocating per
                // call costs a page fault per page.
                thread_local! {
                    static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 256 << 10]);
                }
                BUF.with(|buf| -> Result<()> {
                    let mut buf = buf.borrow_mut();
                    let mut at = range.start;
                    while at < range.end {
                        let n = buf.len().min(range.end - at);
                        let pos = (self.range.start + at) as u64;
                        file.read_exact_at(&mut buf[..n], pos)
                            .map_err(|e| Error::io("reading the archive", e))?;
                        if self.pending_crc.is_some() {
                            crc.update(&buf[..n]);
                        }
                        w.write_all(&buf[..n]).map_err(io)?;
                        at += n;
                    }
                    Ok(())
                })?;
            }
            _ => {
                let bytes = &self[range.clone()];
                if self.pending_crc.is_some() {
                    crc.update(bytes);
                }
                w.write_all(bytes).map_err(io)?;
            }
        }
        if range.end == self.len() {
            if let Some((expected, what)) = &self.pending_crc {
                let got = std::mem::take(crc).finalize();
                if got != *expected {
                    return Err(Blob::crc_error(*expected, got, what));
                }
            }
        }
        Ok(())
    }
}

impl Blob {
    /// Copies the bytes of a window of an open file into `dst`, at `dst`'s
    /// file offset (which it advances), with `copy_file_range`: in the
    /// kernel, page cache to page cache, never through this process's
    /// memory (3 GB here: 1.9 s against 5 to 8 s through a buffer). A
    /// pending CRC is checked first, through the map. `Ok(false)`, and
    /// nothing written, where the blob is no window of an open file or the
    /// kernel cannot copy between the two (another file system, an old
    /// kernel): then write it with [`Blob::write_range_to`].
    pub fn copy_to_file(&self, dst: &File) -> Result<bool> {
        use std::os::fd::AsRawFd;
        let Source::Mapped(_, Some(src), _) = &self.source else {
            return Ok(false);
        };
        if crate::output::inputs::no_mmap() {
            return Ok(false);
        }
        self.verify()?;
        let mut off_in = self.range.start as libc::loff_t;
        let mut left = self.range.len();
        let mut first = true;
        while left > 0 {
            // SAFETY: two open fds; the offset of the source is ours, the
            // destination's file offset is used and advanced.
            let n = unsafe {
                libc::copy_file_range(
                    src.as_raw_fd(),
                    &mut off_in,
                    dst.as_raw_fd(),
                    std::ptr::null_mut(),
                    left.min(1 << 30),
                    0,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                let cannot = matches!(
                    e.raw_os_error(),
                    Some(
                        libc::EXDEV | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EBADF
                    )
                );
                if first && cannot {
                    return Ok(false);
                }
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::io("copying weights into the output", e));
            }
            if n == 0 {
                return Err(Error::io(
                    "copying weights into the output",
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the input file ended early (truncated while read?)",
                    ),
                ));
            }
            first = false;
            left -= n as usize;
        }
        Ok(true)
    }

    /// Drops the pages of a window of a mapped file from this process's
    /// memory (`madvise(MADV_DONTNEED)`): the page cache keeps the bytes
    /// and the next read faults them back, so a weight read once (packed,
    /// say) stops counting in the process's resident memory. Owned bytes,
    /// and maps that are copies in anonymous memory (`--no-mmap`), are left
    /// alone (dropping those pages would zero them).
    pub fn release(&self) {
        if crate::output::inputs::no_mmap() {
            return;
        }
        if let Source::Mapped(map, Some(_), _) = &self.source {
            let page = 4096;
            let start = self.range.start.div_ceil(page) * page;
            let end = self.range.end / page * page;
            if end > start {
                // SAFETY: a read-only shared map of a file: dropping its
                // pages cannot change what a later read of them returns.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        start,
                        end - start,
                    )
                };
            }
        }
    }
}

impl Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.source {
            Source::Owned(v) => &v[self.range.clone()],
            Source::Mapped(m, _, _) => &m[self.range.clone()],
        }
    }
}

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Blob({} bytes)", self.len())
    }
}

impl Default for Blob {
    fn default() -> Self {
        Blob::owned(Vec::new())
    }
}
