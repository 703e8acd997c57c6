//! Progress on long work: a bar on standard error (indicatif) for bytes of
//! weights streamed, shown only when the work has taken more than a second,
//! standard error is a terminal and the tool is not quiet (`-q`); never
//! in a pipe, a log or a test.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long work goes on before its bar appears.
const DELAY: Duration = Duration::from_secs(1);

/// Off with `-q` (the tools' flags set it: `cli`).
static QUIET: AtomicBool = AtomicBool::new(false);

/// No bars at all (`-q`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// A bar counting bytes, hidden until [`DELAY`] has passed; cleared when
/// dropped.
pub struct Progress {
    bar: ProgressBar,
    start: Instant,
    drawable: bool,
    shown: bool,
}

impl Progress {
    /// A bar for `total` bytes of `what` (`"weights"`, say).
    pub fn bytes(what: &str, total: u64) -> Progress {
        use std::io::IsTerminal;
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_string());
        Progress {
            bar,
            start: Instant::now(),
            drawable: std::io::stderr().is_terminal() && !QUIET.load(Ordering::Relaxed),
            shown: false,
        }
    }

    /// `n` more bytes done.
    pub fn inc(&mut self, n: u64) {
        self.bar.inc(n);
        if self.drawable && !self.shown && self.start.elapsed() >= DELAY {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
    }

    /// Whether the bar has been drawn (tests: never off a terminal).
    pub fn shown(&self) -> bool {
        self.shown
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// A writer that counts what goes through it into a [`Progress`].
pub struct CountingWriter<'a, W: Write + ?Sized> {
    pub inner: &'a mut W,
    pub progress: &'a mut Progress,
}

impl<W: Write + ?Sized> Write for CountingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.progress.inc(n as u64);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that counts what comes through it into a [`Progress`].
pub struct CountingReader<R: Read> {
    pub inner: R,
    pub progress: Progress,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.inc(n as u64);
        Ok(n)
    }
}
