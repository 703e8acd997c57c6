//! Every file a tool writes is opened here, and only here: IR streams,
//! listings, ONNX models and their external data, tensor files, reports.
//!
//! What `-o PATH` does depends on what `PATH` is (checked with `lstat`,
//! following symlinks one hop at a time):
//!
//! | `PATH` is | what is written |
//! |---|---|
//! | `-`, `/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1` | standard output |
//! | absent, or a regular file | a temporary file beside it (`.NAME.pt2kit-XXXXXX.tmp`), renamed over it once complete; an existing file keeps its permissions |
//! | a symlink | the same, at the link's final target: the link stays a link |
//! | a character or block device, a FIFO | the path itself, opened for writing: no temporary file, no rename |
//! | a Unix socket | a connection to it |
//! | a directory, or inside a missing directory | refused (exit 5) |
//!
//! A temporary file is removed when the write fails, when the tool is
//! interrupted (SIGINT, SIGTERM, SIGHUP: see [`signals`]), or, if the
//! process was killed outright, by the next run on the same target once it
//! is a day old. Several processes writing one target at once each write
//! their own temporary file, and each rename is atomic: the target ends as
//! one whole output, never a mixture.
//!
//! No output may be one of the tool's own inputs: every input file
//! opened (an IR file, a `.pt2` archive, the archive or IR file a stream's
//! weights point into, tensor files, standard input redirected from a
//! file) is noted by device and inode ([`inputs::note`]), and an output
//! that is the same file, directly, through a symlink or through a hard
//! link, is refused (exit 2) before anything is written
//! ([`refuse_clobbering`], which tools call once their inputs are read
//! and before they write; [`open`] checks again). Standard output
//! redirected to an input file (`>>`) is refused the same way.
//!
//! Before a staged output is renamed into place, every input file that
//! was memory-mapped is checked against the size and modification time it
//! had when it was opened ([`inputs`]): a result computed from an input
//! that changed underneath is refused, not written.
//!
//! Test hook: with `PT2KIT_TEST_HOLD=STAGE:FILE` in the environment
//! (`STAGE` is `mapped`, after an input is mapped, or `commit`, before a
//! staged output is renamed), the tool prints `pt2kit: holding at STAGE
//! (PATH)` on stderr and waits until `FILE` exists (60 s at most). The
//! fault tests use it to change an input, or send a signal, at a known
//! point; nothing else reads the variable.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::error::{Error, ErrorKind, Result};

/// A temporary file older than this, left by a killed run, is removed by
/// the next run on the same target.
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Where an output path leads, once resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Standard output (`-` or a name for fd 1).
    Stdout,
    /// A regular file (or one to be created) at this path, the symlinks
    /// leading to it resolved: written through a temporary file beside it.
    File(PathBuf),
    /// A device or a FIFO (or an fd other than 1 of this process): opened
    /// and written directly.
    Direct(PathBuf),
    /// A Unix socket: connected to and written.
    Socket(PathBuf),
}

impl Target {
    /// Whether the output is a regular file (so files beside it, such as
    /// ONNX external data, can be placed next to it).
    pub fn is_file(&self) -> bool {
        matches!(self, Target::File(_))
    }
}

/// The test hook of the module docs.
pub(crate) fn hold(stage: &str, path: &Path) {
    let Some(spec) = crate::knobs::value("PT2KIT_TEST_HOLD") else {
        return;
    };
    let spec = spec.to_string_lossy();
    let Some((at, release)) = spec.split_once(':') else {
        return;
    };
    if at != stage {
        return;
    }
    eprintln!("pt2kit: holding at {stage} ({})", path.display());
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !Path::new(release).exists() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Names of this process's standard output.
fn is_own_stdout(p: &Path) -> bool {
    let s = p.as_os_str();
    s == "/dev/stdout" || s == "/dev/fd/1" || s == "/proc/self/fd/1" || {
        let own = format!("/proc/{}/fd/1", std::process::id());
        s == own.as_str()
    }
}

/// `/proc/.../fd/N` and `/dev/fd/N` are links the kernel resolves to open
/// files (pipes, sockets, terminals) whose link text is not a path.
fn is_fd_link(p: &Path) -> bool {
    let s = p.to_string_lossy();
    s.starts_with("/dev/fd/") || (s.starts_with("/proc/") && s.contains("/fd/"))
}

fn io_err(what: impl std::fmt::Display, msg: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, format!("{what}: {msg}"))
}

/// Resolves `-o PATH`: what it is, and where the bytes must go.
pub fn resolve(path: &Path) -> Result<Target> {
    if path.as_os_str() == "-" || is_own_stdout(path) {
        return Ok(Target::Stdout);
    }
    let shown = path.display();
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        if is_own_stdout(&p) {
            return Ok(Target::Stdout);
        }
        if is_fd_link(&p) {
            return Ok(Target::Direct(p));
        }
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let dir = parent_dir(&p);
                return match std::fs::metadata(dir) {
                    Ok(m) if m.is_dir() => Ok(Target::File(p)),
                    Ok(_) => Err(io_err(
                        shown,
                        format!("{} is not a directory", dir.display()),
                    )),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Err(io_err(
                        shown,
                        format!("directory {} does not exist", dir.display()),
                    )),
                    Err(e) => Err(Error::io(shown, e)),
                };
            }
            Err(e) => return Err(Error::io(shown, e)),
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            let link = std::fs::read_link(&p).map_err(|e| Error::io(&shown, e))?;
            p = if link.is_absolute() {
                link
            } else {
                parent_dir(&p).join(link)
            };
            continue;
        }
        if ft.is_dir() {
            return Err(io_err(shown, "is a directory (give a file name)"));
        }
        if ft.is_file() {
            return Ok(Target::File(p));
        }
        if ft.is_socket() {
            return Ok(Target::Socket(p));
        }
        // Character and block devices, FIFOs.
        return Ok(Target::Direct(p));
    }
    Err(io_err(shown, "too many levels of symbolic links"))
}

/// The directory a path's file lives in (`.` for a bare name).
fn parent_dir(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ if matches!(p.components().next(), Some(Component::RootDir)) => Path::new("/"),
        _ => Path::new("."),
    }
}

/// The prefix of a target's temporary files (`.NAME.pt2kit-`).
fn temp_prefix(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Leave room under NAME_MAX for the random part and the suffix.
    let name: String = name.chars().take(200).collect();
    format!(".{name}.pt2kit-")
}

/// Removes temporary files of `path` left by killed runs (older than
/// [`STALE_AFTER`]); errors are ignored, since another run may be at it.
fn remove_stale(path: &Path) {
    let dir = parent_dir(path);
    let prefix = temp_prefix(path);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(&prefix) && name.ends_with(".tmp")) {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > STALE_AFTER);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A temporary file beside `path`, to be renamed onto it once complete.
/// Its mode is the existing target's, or 0666 less the umask.
fn temp_file_beside(path: &Path) -> Result<(tempfile::NamedTempFile, TempRegistration)> {
    remove_stale(path);
    let dir = parent_dir(path);
    let mode = std::fs::metadata(path).map_or(0o666, |m| m.permissions().mode() & 0o7777);
    let tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(path))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(|e| Error::io(format!("creating a temporary file in {}", dir.display()), e))?;
    let registered = TempRegistration(signals::register_temp(tmp.path()));
    Ok((tmp, registered))
}

/// A file's identity: its device and inode (`stat`, through symlinks).
fn identity(p: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// The identity of what a resolved target writes into, where it exists:
/// the file itself, or for standard output the file it was redirected to.
fn target_identity(target: &Target) -> Option<(u64, u64)> {
    match target {
        Target::Stdout => {
            // SAFETY: fstat on fd 1 into a zeroed stat buffer.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            let ok = unsafe { libc::fstat(1, &mut st) } == 0;
            (ok && (st.st_mode & libc::S_IFMT) == libc::S_IFREG).then_some((st.st_dev, st.st_ino))
        }
        Target::File(p) | Target::Direct(p) => identity(p),
        Target::Socket(_) => None,
    }
}

/// Refuses (exit 2) an output that is one of the tool's input files.
/// `flag` names the option in the message (`-o`, `--intermediates`).
fn refuse_input(target: &Target, shown: &str, flag: Option<&str>) -> Result<()> {
    let Some(id) = target_identity(target) else {
        return Ok(());
    };
    let Some(input) = inputs::noted(id) else {
        return Ok(());
    };
    let out = match (flag, target) {
        (_, Target::Stdout) => "standard output".to_string(),
        (Some(f), _) => format!("{f} {shown}"),
        (None, _) => shown.to_string(),
    };
    let how = if matches!(target, Target::Stdout) {
        "is redirected to"
    } else {
        "is the same file as"
    };
    Err(Error::usage(format!(
        "{out} {how} the input {input}: refusing to overwrite an input; nothing was written: write the output to another file"
    )))
}

/// Checks, before a tool writes anything, that none of its outputs is one
/// of its input files, and that no two outputs are one file: `(flag,
/// path)` pairs (`("-o", out)`, `("--intermediates", file)`); `-` and the
/// names of standard output stand for standard output. Exit 2, naming
/// both paths.
pub fn refuse_clobbering(outputs: &[(&str, &Path)]) -> Result<()> {
    let mut seen: Vec<(&str, &Path, PathBuf)> = Vec::new();
    for &(flag, path) in outputs {
        let target = resolve(path)?;
        refuse_input(&target, &path.display().to_string(), Some(flag))?;
        // Two outputs that are one file: the later rename would replace
        // the first output.
        let Target::File(real) = &target else {
            continue;
        };
        let real = match (parent_dir(real).canonicalize(), real.file_name()) {
            (Ok(dir), Some(name)) => dir.join(name),
            _ => real.clone(),
        };
        if let Some((f, p, _)) = seen.iter().find(|(_, _, r)| *r == real) {
            return Err(Error::usage(format!(
                "{flag} {} and {f} {} are the same file: give each output its own file",
                path.display(),
                p.display()
            )));
        }
        seen.push((flag, path, real));
    }
    Ok(())
}

enum Sink {
    Stdout(BufWriter<io::StdoutLock<'static>>),
    Staged {
        w: BufWriter<File>,
        tmp: tempfile::TempPath,
        target: PathBuf,
        _registered: TempRegistration,
    },
    Direct(BufWriter<File>),
    Socket(BufWriter<UnixStream>),
    /// The target already is the file a link was asked for: nothing to do.
    Nothing(io::Sink),
    /// A hard link to an existing file, under a temporary name beside the
    /// target until committed (nothing is written through it).
    Linked {
        sink: io::Sink,
        tmp: tempfile::TempPath,
        target: PathBuf,
        _registered: TempRegistration,
    },
}

/// An output being written. [`Output::commit`] finishes it (flush, and for
/// a regular file the rename); dropped without a commit, a staged file is
/// removed and the target is left as it was.
pub struct Output {
    sink: Sink,
    shown: String,
}

/// Opens an output: `path` as [`resolve`] says, or stdout for `None`.
/// Binary output to a terminal is refused.
pub fn open(path: Option<&Path>, binary: bool) -> Result<Output> {
    let target = match path {
        None => Target::Stdout,
        Some(p) => resolve(p)?,
    };
    let shown = match (&target, path) {
        (Target::Stdout, _) | (_, None) => "<stdout>".to_string(),
        (_, Some(p)) => p.display().to_string(),
    };
    refuse_input(&target, &shown, None)?;
    let sink = match target {
        Target::Stdout => {
            let stdout = io::stdout();
            if binary && stdout.is_terminal() {
                return Err(Error::usage(
                    "refusing to write binary output to a terminal: redirect it (> FILE), pipe it to another tool, or use -o FILE",
                ));
            }
            Sink::Stdout(BufWriter::with_capacity(64 << 10, stdout.lock()))
        }
        Target::File(target) => {
            let (tmp, registered) = temp_file_beside(&target)?;
            let (file, tmp) = tmp.into_parts();
            Sink::Staged {
                w: BufWriter::with_capacity(1 << 20, file),
                tmp,
                target,
                _registered: registered,
            }
        }
        Target::Direct(p) => {
            let f = OpenOptions::new()
                .write(true)
                .open(&p)
                .map_err(|e| Error::io(&shown, e))?;
            if binary && f.is_terminal() {
                return Err(Error::usage(format!(
                    "refusing to write binary output to a terminal ({shown})"
                )));
            }
            Sink::Direct(BufWriter::with_capacity(64 << 10, f))
        }
        Target::Socket(p) => {
            let s = UnixStream::connect(&p).map_err(|e| Error::io(&shown, e))?;
            Sink::Socket(BufWriter::with_capacity(64 << 10, s))
        }
    };
    Ok(Output { sink, shown })
}

impl Output {
    /// The writer, for the tool to write its bytes into.
    pub fn writer(&mut self) -> &mut dyn Write {
        match &mut self.sink {
            Sink::Stdout(w) => w,
            Sink::Staged { w, .. } => w,
            Sink::Direct(w) => w,
            Sink::Socket(w) => w,
            Sink::Linked { sink, .. } => sink,
            Sink::Nothing(sink) => sink,
        }
    }

    /// A staged regular file's writer flushed, and its file (whose offset
    /// is where the next byte goes), for a copy the kernel makes into it
    /// (`Blob::copy_to_file`); `None` for any other output.
    pub fn flushed_file(&mut self) -> Result<Option<&File>> {
        match &mut self.sink {
            Sink::Staged { w, .. } => {
                w.flush().map_err(|e| Error::io(&self.shown, e))?;
                Ok(Some(w.get_ref()))
            }
            _ => Ok(None),
        }
    }

    /// How the output is named in messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Whether this output is a regular file (renamed into place).
    pub fn is_file(&self) -> bool {
        matches!(
            self.sink,
            Sink::Staged { .. } | Sink::Linked { .. } | Sink::Nothing(_)
        )
    }

    /// Flushes, checks that no mapped input changed, and renames a staged
    /// file into place.
    pub fn commit(self) -> Result<()> {
        let shown = self.shown;
        let flush_err = |e: io::Error| {
            if e.kind() == io::ErrorKind::BrokenPipe {
                Error::new(ErrorKind::BrokenPipe, "broken pipe")
            } else {
                Error::io(&shown, e)
            }
        };
        match self.sink {
            Sink::Stdout(mut w) => w.flush().map_err(flush_err),
            Sink::Direct(mut w) => w.flush().map_err(flush_err),
            Sink::Socket(mut w) => w.flush().map_err(flush_err),
            Sink::Staged { w, tmp, target, .. } => {
                let file = w.into_inner().map_err(|e| flush_err(e.into_error()))?;
                drop(file);
                hold("commit", &tmp);
                inputs::check_unchanged()?;
                tmp.persist(&target)
                    .map_err(|e| Error::io(format!("renaming into {shown}"), e.error))
            }
            Sink::Nothing(_) => inputs::check_unchanged(),
            Sink::Linked { tmp, target, .. } => {
                inputs::check_unchanged()?;
                tmp.persist(&target)
                    .map_err(|e| Error::io(format!("renaming into {shown}"), e.error))
            }
        }
    }
}

/// Stages, at `path` (a regular file, as [`open`] resolves it), a hard link
/// to the file `existing`: the same bytes under a second name, nothing
/// copied (`ir2onnx --external-data-in-archive`, whose external data is
/// the archive itself). [`Output::commit`] renames it into place; dropped,
/// it is removed. Both must be on one file system.
pub fn stage_link(existing: &Path, path: &Path) -> Result<Output> {
    let shown = path.display().to_string();
    let Target::File(target) = resolve(path)? else {
        return Err(Error::usage(format!(
            "{shown}: a link to {} must be a regular file",
            existing.display()
        )));
    };
    // Already a link to that file (an earlier run's): nothing to write. A
    // rename of a link onto another link of the same file would do nothing
    // and leave the temporary name behind.
    if identity(&target).is_some() && identity(&target) == identity(existing) {
        return Ok(Output {
            sink: Sink::Nothing(io::sink()),
            shown,
        });
    }
    refuse_input(&Target::File(target.clone()), &shown, None)?;
    let (tmp, registered) = temp_file_beside(&target)?;
    let (file, tmp) = tmp.into_parts();
    drop(file);
    std::fs::remove_file(&tmp).map_err(|e| Error::io(&shown, e))?;
    std::fs::hard_link(existing, &tmp).map_err(|e| {
        if e.raw_os_error() == Some(libc::EXDEV) {
            Error::usage(format!(
                "{shown}: {} is on another file system, so it cannot be linked beside the model: write the model on its file system, or copy the weights (--external-data)",
                existing.display()
            ))
        } else {
            Error::io(format!("linking {} as {shown}", existing.display()), e)
        }
    })?;
    Ok(Output {
        sink: Sink::Linked {
            sink: io::sink(),
            tmp,
            target,
            _registered: registered,
        },
        shown,
    })
}

/// The staged file's name, known to the signal handler until dropped
/// (committed, or removed by `TempPath`'s own drop).
struct TempRegistration(Option<usize>);

impl Drop for TempRegistration {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            signals::unregister_temp(slot);
        }
    }
}

/// A writer that can seek: a zip (npz) is written in place into a staged
/// file, not built in memory first.
pub trait WriteSeek: Write + io::Seek {}
impl<T: Write + io::Seek + ?Sized> WriteSeek for T {}

/// As [`write_output`], for a format that seeks back into what it wrote
/// (a zip's headers): a regular file is written in place; stdout, a pipe
/// or a device gets the bytes made in memory first.
pub fn write_output_seekable(
    path: Option<&Path>,
    binary: bool,
    write: impl FnOnce(&mut dyn WriteSeek) -> Result<()>,
) -> Result<()> {
    let mut out = open(path, binary)?;
    if let Sink::Staged { w, .. } = &mut out.sink {
        write(w)?;
    } else {
        let mut buf = io::Cursor::new(Vec::new());
        write(&mut buf)?;
        let shown = out.shown.clone();
        out.writer()
            .write_all(buf.get_ref())
            .map_err(|e| Error::io(&shown, e))?;
    }
    out.commit()
}

/// Writes output to `path` (see the module docs) or stdout, through `write`.
pub fn write_output(
    path: Option<&Path>,
    binary: bool,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let mut out = open(path, binary)?;
    write(out.writer())?;
    out.commit()
}

/// Input files that are memory-mapped, with the size and modification time
/// they had when opened. A mapped file truncated by another process makes
/// the next touch of a vanished page fault (SIGBUS, caught in [`signals`]);
/// one rewritten in place would give wrong numbers silently. So a result is
/// checked against this list before it is committed, and `--no-mmap` reads
/// inputs into memory instead.
pub mod inputs {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    static NO_MMAP: AtomicBool = AtomicBool::new(false);

    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Stamp {
        len: u64,
        mtime: (i64, i64),
        ino: u64,
    }

    thread_local! {
        /// The inputs this thread mapped (a tool maps and commits on its
        /// main thread; tests in parallel threads see only their own).
        static MAPPED: std::cell::RefCell<Vec<(PathBuf, Stamp)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    fn stamp(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ino: m.ino(),
        }
    }

    /// `--no-mmap`: read input files into memory instead of mapping them.
    pub fn set_no_mmap(on: bool) {
        NO_MMAP.store(on, Ordering::Relaxed);
    }

    /// Whether `--no-mmap` is on (nothing is mapped, spooled weights
    /// included).
    pub fn no_mmap() -> bool {
        NO_MMAP.load(Ordering::Relaxed)
    }

    /// Every regular input file opened, by (device, inode), with how
    /// messages name it: no output may be one of them (see the module
    /// docs). Process-wide: a tool may read on one thread and write on
    /// another.
    static OPENED: std::sync::Mutex<Vec<((u64, u64), String)>> = std::sync::Mutex::new(Vec::new());

    fn note_meta(meta: &std::fs::Metadata, shown: &str) {
        if !meta.is_file() {
            return;
        }
        let id = (meta.dev(), meta.ino());
        let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
        if !opened.iter().any(|(i, _)| *i == id) {
            opened.push((id, shown.to_string()));
        }
    }

    /// Notes an open input file (a regular file; others are ignored).
    pub fn note(file: &File, shown: &str) {
        if let Ok(meta) = file.metadata() {
            note_meta(&meta, shown);
        }
    }

    /// Notes an input file by its path (through symlinks).
    pub fn note_path(path: &Path) {
        if let Ok(meta) = std::fs::metadata(path) {
            note_meta(&meta, &path.display().to_string());
        }
    }

    /// Forgets an input file read whole into memory that the tool means
    /// to replace (`ir-run --state FILE`: the state it read, written back
    /// updated, through a temporary file and a rename).
    pub fn forget_path(path: &Path) {
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        let id = (meta.dev(), meta.ino());
        let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
        opened.retain(|(i, _)| *i != id);
        MAPPED.with(|m| m.borrow_mut().retain(|(_, st)| st.ino != meta.ino()));
    }

    /// Notes standard input, when it is redirected from a regular file.
    pub fn note_stdin() {
        // SAFETY: fstat on fd 0 into a zeroed stat buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(0, &mut st) } == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFREG {
            let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
            let id = (st.st_dev, st.st_ino);
            if !opened.iter().any(|(i, _)| *i == id) {
                let shown = match std::fs::read_link("/proc/self/fd/0") {
                    Ok(p) => format!("<stdin> ({})", p.display()),
                    Err(_) => "<stdin>".to_string(),
                };
                opened.push((id, shown));
            }
        }
    }

    /// The input with this identity, as messages name it.
    pub(super) fn noted(id: (u64, u64)) -> Option<String> {
        let opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
        opened
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, s)| s.clone())
    }

    /// Maps `file` (at `path`), or with `--no-mmap` reads it into an
    /// anonymous read-only map; a mapped file is remembered for
    /// [`check_unchanged`], and noted as an input ([`note`]).
    pub fn map(file: &File, path: Option<&Path>, what: &str) -> Result<Arc<memmap2::Mmap>> {
        let meta = file.metadata().map_err(|e| Error::io(what, e))?;
        note_meta(
            &meta,
            &path.map_or_else(|| what.to_string(), |p| p.display().to_string()),
        );
        if NO_MMAP.load(Ordering::Relaxed) {
            use std::io::Read;
            let mut anon =
                memmap2::MmapMut::map_anon(meta.len() as usize).map_err(|e| Error::io(what, e))?;
            let mut f = file;
            f.read_exact(&mut anon[..])
                .map_err(|e| Error::io(what, e))?;
            return Ok(Arc::new(
                anon.make_read_only().map_err(|e| Error::io(what, e))?,
            ));
        }
        // SAFETY: the map is read-only. A file truncated by another process
        // while mapped faults on access (SIGBUS, reported by the handler in
        // `signals`); a file changed in place is caught by
        // `check_unchanged` before any output is committed.
        let map = Arc::new(unsafe { memmap2::Mmap::map(file) }.map_err(|e| Error::io(what, e))?);
        if let Some(p) = path {
            if meta.is_file() {
                MAPPED.with(|m| m.borrow_mut().push((p.to_path_buf(), stamp(&meta))));
                super::signals::note_mapped(p);
                super::hold("mapped", p);
            }
        }
        Ok(map)
    }

    /// Refuses to go on if a mapped input changed since it was opened.
    pub fn check_unchanged() -> Result<()> {
        let mapped = MAPPED.with(|m| m.borrow().clone());
        for (p, was) in mapped.iter() {
            let now = std::fs::metadata(p).ok().map(|m| stamp(&m));
            if now.as_ref() != Some(was) {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "{}: the input changed while it was read (size, time or file replaced); the result is not written: run again on a stable file, or with --no-mmap",
                        p.display()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Signal handling for every tool, installed by [`signals::install`]:
///
/// - SIGINT, SIGTERM, SIGHUP: the temporary file of the output being
///   written is removed, and the process exits 130, 143 or 129 (128 plus
///   the signal number, as a shell reports a process a signal ended);
///   a tool in [`signals::interruptible`] mode (`ir-bench`) instead sees
///   [`signals::interrupted`] on the first SIGINT, and stops at its next
///   iteration;
/// - SIGBUS (a mapped input truncated underneath): the temporary file is
///   removed, a message names the mapped inputs, exit 5;
/// - SIGPIPE stays ignored (Rust's default): a write into a closed pipe
///   fails with EPIPE, and the tool exits 0 quietly (see `cli::main`).
///
/// The handlers touch only atomics and call only async-signal-safe
/// functions (`unlink`, `write`, `_exit`).
pub mod signals {
    use std::ffi::CString;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
    use std::sync::Once;

    /// The temporary files being written (a model and its external data).
    static TEMPS: [AtomicPtr<libc::c_char>; 4] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; 4];
    /// A message naming the mapped inputs, for SIGBUS.
    static MAPPED_MSG: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());
    static INTERRUPTIBLE: AtomicBool = AtomicBool::new(false);
    static INTERRUPTED: AtomicBool = AtomicBool::new(false);
    static INSTALL: Once = Once::new();

    fn swap_in(slot: &AtomicPtr<libc::c_char>, s: Option<CString>) {
        let new = s.map_or(std::ptr::null_mut(), CString::into_raw);
        let old = slot.swap(new, Ordering::SeqCst);
        if !old.is_null() {
            // SAFETY: every non-null pointer stored came from a CString
            // (into_raw, or as_ptr and forget: the same allocation). The
            // handler may have read it just before the swap; it only passes
            // it to unlink or write, and a signal handler that raced with
            // this free would see a freed name: accepted for a temporary
            // file's last microseconds, as the handler ends the process.
            drop(unsafe { CString::from_raw(old) });
        }
    }

    /// Remembers a temporary file for the handlers; returns its slot (none
    /// when all are taken: the file is then left to the stale-file sweep).
    pub(super) fn register_temp(p: &Path) -> Option<usize> {
        use std::os::unix::ffi::OsStrExt;
        let name = CString::new(p.as_os_str().as_bytes()).ok()?;
        for (i, slot) in TEMPS.iter().enumerate() {
            let raw = name.as_ptr() as *mut libc::c_char;
            if slot
                .compare_exchange(
                    std::ptr::null_mut(),
                    raw,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_ok()
            {
                std::mem::forget(name);
                return Some(i);
            }
        }
        None
    }

    pub(super) fn unregister_temp(slot: usize) {
        swap_in(&TEMPS[slot], None);
    }

    pub(super) fn note_mapped(p: &Path) {
        let old = MAPPED_MSG.load(Ordering::SeqCst);
        let mut names = if old.is_null() {
            String::new()
        } else {
            // SAFETY: a pointer stored by this function, from into_raw.
            let s = unsafe { std::ffi::CStr::from_ptr(old) };
            let s = s.to_string_lossy();
            s.trim_start_matches("error: a memory-mapped input changed size while it was read (")
                .split(')')
                .next()
                .unwrap_or("")
                .to_string()
        };
        if !names.is_empty() {
            names.push_str(", ");
        }
        names.push_str(&p.display().to_string());
        let msg = format!(
            "error: a memory-mapped input changed size while it was read ({names}); nothing was written: run again on a stable file, or with --no-mmap\n"
        );
        swap_in(&MAPPED_MSG, CString::new(msg).ok());
    }

    /// `ir-bench`: the first SIGINT sets [`interrupted`] instead of ending
    /// the process.
    pub fn interruptible(on: bool) {
        INTERRUPTED.store(false, Ordering::SeqCst);
        INTERRUPTIBLE.store(on, Ordering::SeqCst);
    }

    /// Whether SIGINT came while [`interruptible`].
    pub fn interrupted() -> bool {
        INTERRUPTED.load(Ordering::SeqCst)
    }

    fn remove_temp() {
        for slot in &TEMPS {
            let p = slot.load(Ordering::SeqCst);
            if !p.is_null() {
                // SAFETY: a NUL-terminated name from a CString.
                unsafe { libc::unlink(p) };
            }
        }
    }

    extern "C" fn on_signal(sig: libc::c_int) {
        if sig == libc::SIGINT
            && INTERRUPTIBLE.load(Ordering::SeqCst)
            && !INTERRUPTED.swap(true, Ordering::SeqCst)
        {
            return;
        }
        remove_temp();
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(128 + sig) };
    }

    extern "C" fn on_sigbus(_sig: libc::c_int) {
        remove_temp();
        let msg = MAPPED_MSG.load(Ordering::SeqCst);
        // SAFETY: write and _exit are async-signal-safe; msg is a
        // NUL-terminated string from into_raw, or null.
        unsafe {
            if msg.is_null() {
                let m = b"error: bus error (a memory-mapped input changed while it was read?)\n";
                libc::write(2, m.as_ptr().cast(), m.len());
            } else {
                libc::write(2, msg.cast(), libc::strlen(msg));
            }
            libc::_exit(5);
        }
    }

    /// Installs the handlers (once per process).
    pub fn install() {
        INSTALL.call_once(|| {
            let set = |sig: libc::c_int, f: extern "C" fn(libc::c_int)| {
                // SAFETY: a plain sigaction with a handler that only touches
                // atomics and async-signal-safe calls.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = f as usize;
                    sa.sa_flags = libc::SA_RESTART;
                    libc::sigemptyset(&mut sa.sa_mask);
                    libc::sigaction(sig, &sa, std::ptr::null_mut());
                }
            };
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                set(sig, on_signal);
            }
            set(libc::SIGBUS, on_sigbus);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_each_kind() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.ir");
        assert_eq!(resolve(&f).unwrap(), Target::File(f.clone()));
        std::fs::write(&f, b"x").unwrap();
        assert_eq!(resolve(&f).unwrap(), Target::File(f.clone()));
        let l = d.path().join("link");
        std::os::unix::fs::symlink("a.ir", &l).unwrap();
        assert_eq!(resolve(&l).unwrap(), Target::File(d.path().join("a.ir")));
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink("sub/none.ir", &dangling).unwrap();
        let e = resolve(&dangling).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(e.message.contains("does not exist"), "{}", e.message);
        assert_eq!(resolve(Path::new("-")).unwrap(), Target::Stdout);
        assert_eq!(resolve(Path::new("/dev/stdout")).unwrap(), Target::Stdout);
        let e = resolve(d.path()).unwrap_err();
        assert!(e.message.contains("is a directory"), "{}", e.message);
        let e = resolve(&d.path().join("missing/x.ir")).unwrap_err();
        assert!(e.message.contains("does not exist"), "{}", e.message);
        let loop_a = d.path().join("la");
        std::os::unix::fs::symlink("la", &loop_a).unwrap();
        let e = resolve(&loop_a).unwrap_err();
        assert!(e.message.contains("symbolic links"), "{}", e.message);
    }

    #[test]
    fn stale_temps_only_go_when_old() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("m.onnx");
        let old = d.path().join(".m.onnx.pt2kit-abc.tmp");
        let fresh = d.path().join(".m.onnx.pt2kit-def.tmp");
        let other = d.path().join(".n.onnx.pt2kit-abc.tmp");
        for p in [&old, &fresh, &other] {
            std::fs::write(p, b"partial").unwrap();
        }
        let two_days = SystemTime::now() - Duration::from_secs(48 * 3600);
        for p in [&old, &other] {
            File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(two_days)
                .unwrap();
        }
        write_output(Some(&target), false, |w| {
            w.write_all(b"whole").map_err(|e| Error::io("w", e))
        })
        .unwrap();
        assert!(!old.exists());
        assert!(fresh.exists());
        assert!(
            other.exists(),
            "another target's temporary file is not ours"
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"whole");
    }

    #[test]
    fn failed_write_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("m.ir");
        let r = write_output(Some(&target), false, |w| {
            w.write_all(b"half").unwrap();
            Err(Error::bad_input("stop"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn keeps_the_mode_of_an_existing_file() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("m.ir");
        std::fs::write(&target, b"old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_output(Some(&target), false, |w| {
            w.write_all(b"new").map_err(|e| Error::io("w", e))
        })
        .unwrap();
        let m = std::fs::metadata(&target).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o640);
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }
}
