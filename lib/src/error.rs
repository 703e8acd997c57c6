//! One error type for the whole library: a kind that decides the exit
//! code, a message, and the places it happened (file, archive member, node,
//! weight), outermost first when printed.

use std::fmt;

/// What went wrong, as far as a caller (and an exit code) cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad flags or arguments.
    Usage,
    /// The input file is malformed, truncated or inconsistent.
    BadInput,
    /// Valid input that this toolkit cannot handle (an op, a layout, a
    /// pickled payload, a newer format).
    Unsupported,
    /// Reading or writing a file failed.
    Io,
    /// A bug in this toolkit.
    Internal,
    /// The reader of our output went away (`| head`): not a failure.
    BrokenPipe,
    /// Stopped by SIGINT after finishing what it could (`ir-bench`).
    Interrupted,
}

/// Exit codes, the same in every tool (documented in every man page).
pub const EXIT_CODES: &[(i32, &str)] = &[
    (
        0,
        "success; also when the reader of standard output goes away early (a broken pipe ends a tool quietly)",
    ),
    (1, "the comparison found a difference (ir-diff)"),
    (2, "usage error: bad flags or arguments"),
    (
        3,
        "bad input: a malformed, truncated or inconsistent file; also a run that would pass --max-memory or --max-iterations (ir-run, ir-bench)",
    ),
    (
        4,
        "unsupported: valid input this tool cannot handle (an op, a layout, a format version)",
    ),
    (5, "I/O error: a file could not be read or written"),
    (70, "internal error: a bug in this toolkit"),
    (
        129,
        "ended by SIGHUP; the temporary file of an output being written is removed",
    ),
    (
        130,
        "ended by SIGINT (Ctrl-C); the temporary output file is removed (ir-bench first prints the report of the runs it finished)",
    ),
    (143, "ended by SIGTERM; the temporary output file is removed"),
];

impl ErrorKind {
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Usage => 2,
            ErrorKind::BadInput => 3,
            ErrorKind::Unsupported => 4,
            ErrorKind::Io => 5,
            ErrorKind::Internal => 70,
            ErrorKind::BrokenPipe => 0,
            ErrorKind::Interrupted => 130,
        }
    }
}

#[derive(Debug)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    /// Where it happened, innermost first (each `context` call appends).
    pub context: Vec<String>,
    /// More than the message says, for `-vv` (a dependency's full report:
    /// candle's backtrace); the caller that prints decides whether to.
    pub detail: Option<String>,
    /// Why a dependency failed, where a caller can act on it (retry on a
    /// contiguous copy, or on the host). Set once, where the dependency's
    /// error type is converted (`exec/backend.rs` for candle's), from that
    /// type, never from message text.
    pub cause: Option<Cause>,
}

/// A dependency's failure a caller can act on (see [`Error::cause`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// A kernel refused a strided (non-contiguous) layout: a contiguous
    /// copy of the inputs runs it.
    Layout,
    /// The device lacks a kernel for this op or dtype (or launched one it
    /// cannot run): the host runs it.
    NoDeviceKernel,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            context: Vec::new(),
            detail: None,
            cause: None,
        }
    }
    pub fn bad_input(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::BadInput, message)
    }
    pub fn unsupported(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Unsupported, message)
    }
    pub fn usage(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Usage, message)
    }
    pub fn internal(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Internal, message)
    }
    pub fn io(what: impl fmt::Display, err: std::io::Error) -> Error {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            return Error::new(ErrorKind::BrokenPipe, "broken pipe");
        }
        Error::new(ErrorKind::Io, format!("{what}: {err}"))
    }

    /// With `detail` (see the field).
    pub fn with_detail(mut self, detail: impl Into<String>) -> Error {
        self.detail = Some(detail.into());
        self
    }

    /// With `cause` (see the field).
    pub fn with_cause(mut self, cause: Cause) -> Error {
        self.cause = Some(cause);
        self
    }

    /// Adds an outer place (`member 'mlp/models/model.json'`).
    pub fn at(mut self, place: impl Into<String>) -> Error {
        self.context.push(place.into());
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for place in self.context.iter().rev() {
            write!(f, "{place}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// `.at(...)` on results, with the place computed only on error.
pub trait Context<T> {
    fn at<S: Into<String>>(self, place: impl FnOnce() -> S) -> Result<T>;
}

impl<T> Context<T> for Result<T> {
    fn at<S: Into<String>>(self, place: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| e.at(place()))
    }
}

/// Shorthand: `bail!(BadInput, "expected {}", x)`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($fmt:tt)*) => {
        return Err($crate::error::Error::new($crate::error::ErrorKind::$kind, format!($($fmt)*)))
    };
}
