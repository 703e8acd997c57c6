//! Conventions every tool shares, in one place: file-or-stdin input, `-o`
//! or stdout output written through a temporary file and a rename, refusal
//! to write binary to a terminal, `--emit`, `-q`/`-v`, `--completions`,
//! `--version`, one error format on stderr, one exit-code table, and a
//! broken pipe ending quietly.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};

use clap::{Args, Parser, ValueEnum};

use crate::error::{Error, ErrorKind, Result};
use crate::ir::Program;

#[cfg(feature = "cuda")]
macro_rules! features {
    () => {
        "exec (candle, CPU), cuda"
    };
}
#[cfg(all(feature = "exec", not(feature = "cuda")))]
macro_rules! features {
    () => {
        "exec (candle, CPU)"
    };
}
#[cfg(not(feature = "exec"))]
macro_rules! features {
    () => {
        "none (built without exec)"
    };
}

/// What `--version` prints after the version number; the IR stream
/// format is the one the writer emits (`wire::FORMAT_MAJOR.FORMAT_MINOR`).
pub fn long_version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{}\nIR stream format: {}.{}{}",
            env!("CARGO_PKG_VERSION"),
            crate::wire::FORMAT_MAJOR,
            crate::wire::FORMAT_MINOR,
            concat!(
                "\nPT2 archives: archive version 0; export schema major 8 (and unversioned 0.0)",
                "\nPT2 layouts: raw weights + config (torch >= 2.9), pickled weights (data/weights/model.pt), legacy zip (torch <= 2.7)",
                "\nONNX opsets: 17-21 (default 18), IR versions 8-10",
                "\nfeatures: ",
                features!(),
            )
        )
    })
}

static VERBOSITY: AtomicU8 = AtomicU8::new(1);

/// Flags every tool has.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// Print nothing but errors
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Say what was done and its timings (-v); -vv also shows the backtraces of dependency errors
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print a shell completion script and exit
    #[arg(long, value_name = "SHELL", value_enum)]
    pub completions: Option<clap_complete::Shell>,
    /// Read input files into memory instead of mapping them (for inputs on network file systems, or that may change while read)
    #[arg(long, global = true)]
    pub no_mmap: bool,
}

/// `-o` and `--emit`, for tools that write a program.
#[derive(Args, Debug, Clone)]
pub struct ProgramOutput {
    /// Write to FILE instead of standard output (written to a temporary file, then renamed)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// What to write: the binary IR stream (for other tools), a text listing, YAML or Graphviz DOT (for people)
    #[arg(long, value_enum, default_value_t = Emit::Ir)]
    pub emit: Emit,
    /// How the IR stream carries weights that lie in a file (a .pt2 archive, an IR file read by path): by reference to it (the next tool maps it; nothing is copied through the pipe), inline, or auto: by reference into a pipe, inline into a file. Into a pipe to another pt2kit tool, weights this tool spooled from a pipe are handed over by reference too
    #[arg(long, value_enum, default_value_t = WeightsArg::Auto, value_name = "HOW")]
    pub weights: WeightsArg,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightsArg {
    /// by reference into a pipe or socket, inline into a file or terminal
    Auto,
    /// always in the stream
    Inline,
    /// by reference where the bytes are a stored member of an archive on disk
    Reference,
}

/// Whether standard output is a pipe or a socket (the next tool of a
/// pipeline is reading it, now).
fn stdout_is_pipe() -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata("/proc/self/fd/1")
        .is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
}

impl ProgramOutput {
    /// The weight mode `--weights` and the output give: by reference into
    /// a pipe (and this tool's spools too where the pipe's reader is a
    /// pt2kit tool, which takes them by hand-over: `wire::refs`).
    pub fn weights(&self) -> crate::wire::Weights {
        let to_pipe =
            self.output.as_deref().is_none_or(|p| p.as_os_str() == "-") && stdout_is_pipe();
        match self.weights {
            WeightsArg::Reference | WeightsArg::Auto
                if to_pipe && crate::wire::reader_takes_handover() =>
            {
                crate::wire::Weights::Handover
            }
            WeightsArg::Reference => crate::wire::Weights::Reference,
            WeightsArg::Auto if to_pipe => crate::wire::Weights::Reference,
            _ => crate::wire::Weights::Inline,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    /// the binary IR stream
    Ir,
    /// the text listing
    Text,
    /// a YAML dump
    Yaml,
    /// Graphviz DOT (pipe to `dot -Tsvg`)
    Dot,
}

/// Prints a progress or diagnostic line on stderr unless `-q`.
pub fn info(msg: impl std::fmt::Display) {
    if VERBOSITY.load(Ordering::Relaxed) >= 1 {
        eprintln!("{msg}");
    }
}

/// How much to say: 0 with `-q`, 1 by default, 2 with `-v`, 3 with `-vv`.
pub fn verbosity() -> u8 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Prints only with `-v` (and `-vv`).
pub fn verbose(msg: impl std::fmt::Display) {
    if VERBOSITY.load(Ordering::Relaxed) >= 2 {
        eprintln!("{msg}");
    }
}

/// With `-v`: what a back end lowered through the decomposition table.
pub fn fallback_report(tool: &str, report: &crate::decompose::fallback::Fallback) {
    for note in &report.notes {
        verbose(format!("{tool}: {note}"));
    }
    if report.functionalized > 0 {
        verbose(format!(
            "{tool}: functionalized {} in-place op(s) first",
            report.functionalized
        ));
    }
    for l in &report.lowered {
        verbose(format!("{tool}: {l}"));
    }
}

/// Parses flags, handles `--completions`, runs the tool, and turns its
/// result into an exit code and at most one error line on stderr.
pub fn main<P: Parser>(
    common: impl Fn(&P) -> &CommonArgs,
    run: impl FnOnce(P) -> Result<()>,
) -> ExitCode {
    main_from(std::env::args_os(), common, run)
}

pub fn main_from<P: Parser>(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    common: impl Fn(&P) -> &CommonArgs,
    run: impl FnOnce(P) -> Result<()>,
) -> ExitCode {
    let parsed = match P::try_parse_from(args) {
        Ok(p) => p,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // The documented form, `TOOL: error: ...`, then clap's tip and
            // usage lines.
            let name = P::command().get_name().to_string();
            let text = e.render().to_string();
            let text = text.strip_prefix("error: ").unwrap_or(&text);
            eprint!("{name}: error: {text}");
            return ExitCode::from(ErrorKind::Usage.exit_code() as u8);
        }
    };
    let c = common(&parsed);
    crate::output::signals::install();
    crate::output::inputs::set_no_mmap(c.no_mmap);
    VERBOSITY.store(if c.quiet { 0 } else { 1 + c.verbose }, Ordering::Relaxed);
    crate::progress::set_quiet(c.quiet);
    if let Some(shell) = c.completions {
        let mut cmd = P::command();
        let name = cmd.get_name().to_string();
        clap_complete::generate(shell, &mut cmd, name, &mut io::stdout());
        return ExitCode::SUCCESS;
    }
    let name = P::command().get_name().to_string();
    // A result computed from a mapped input that changed underneath is an
    // error even when it went to stdout (a file output was refused before
    // its rename).
    match run(parsed).and_then(|()| crate::output::inputs::check_unchanged()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind == ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: error: {e}");
            if let (Some(d), true) = (&e.detail, verbosity() >= 3) {
                eprintln!("{d}");
            }
            ExitCode::from(e.kind.exit_code() as u8)
        }
    }
}

/// How an input argument is shown in messages.
pub fn input_name(path: Option<&Path>) -> String {
    match path {
        None => "<stdin>".into(),
        Some(p) if p.as_os_str() == "-" => "<stdin>".into(),
        Some(p) => p.display().to_string(),
    }
}

/// Opens a file argument, or stdin for `-` or none.
pub fn open_input(path: Option<&Path>) -> Result<Box<dyn Read>> {
    match path {
        Some(p) if p.as_os_str() != "-" => {
            let f = File::open(p).map_err(|e| Error::io(p.display(), e))?;
            Ok(Box::new(BufReader::with_capacity(1 << 20, f)))
        }
        _ => Ok(Box::new(BufReader::with_capacity(
            1 << 20,
            io::stdin().lock(),
        ))),
    }
}

/// Reads the binary IR from a file or stdin, and checks it: every node's
/// arguments and recorded shapes against its op's shape rules, every value
/// against the limits (`infer::check`).
pub fn read_ir(path: Option<&Path>) -> Result<Program> {
    let program = read_ir_unchecked(path)?;
    crate::infer::check(&program, &crate::infer::Limits::default())
        .map_err(|e| e.at(input_name(path)))?;
    Ok(program)
}

/// Reads the binary IR from a file or stdin (structurally validated only).
pub fn read_ir_unchecked(path: Option<&Path>) -> Result<Program> {
    let name = input_name(path);
    if path.is_none_or(|p| p.as_os_str() == "-") {
        crate::output::inputs::note_stdin();
    }
    if path.is_none_or(|p| p.as_os_str() == "-") && io::stdin().is_terminal() {
        return Err(Error::usage(
            "no input: give an IR file, or pipe one in (pt2ir model.pt2 | ...)",
        ));
    }
    // A regular file is memory-mapped: its weights become windows of the
    // map, never copied (nor fresh pages zeroed for them). Stdin, pipes,
    // FIFOs and devices are streamed.
    if let Some(p) = path.filter(|p| p.as_os_str() != "-") {
        let f = File::open(p).map_err(|e| Error::io(p.display(), e))?;
        let meta = f.metadata().map_err(|e| Error::io(p.display(), e))?;
        if meta.is_file() {
            return crate::wire::read_program_file(f, Some(p), &name);
        }
        let mut input = BufReader::with_capacity(1 << 20, f);
        return crate::wire::read_program(&mut input, &name);
    }
    // Standard input redirected from a regular file (`tool < model.ir`) is
    // mapped too.
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let stdin = io::stdin();
        if let Ok(fd) = stdin.as_fd().try_clone_to_owned() {
            let f = File::from(fd);
            if f.metadata().is_ok_and(|m| m.is_file()) {
                use std::io::Seek;
                let mut f = f;
                // from where the reader of stdin stands (usually its start)
                let at = f.stream_position().unwrap_or(0);
                if at == 0 {
                    return crate::wire::read_program_file(f, None, &name);
                }
            }
        }
    }
    // A pipe: this tool takes spools by hand-over from its writer.
    crate::wire::offer_handover();
    let mut input = open_input(path)?;
    crate::wire::read_program(&mut input, &name)
}

pub use crate::output::write_output;

/// Writes a program in the chosen form.
pub fn emit_program(program: &Program, out: &ProgramOutput) -> Result<()> {
    if let Some(p) = out.output.as_deref() {
        crate::output::refuse_clobbering(&[("-o", p)])?;
    }
    match out.emit {
        Emit::Ir => write_output(out.output.as_deref(), true, |w| {
            crate::wire::write_program_with(program, w, out.weights())
        }),
        Emit::Text => write_output(out.output.as_deref(), false, |w| {
            program.storages.iter().try_for_each(|s| s.verify())?;
            w.write_all(crate::text::listing(program).as_bytes())
                .map_err(|e| Error::io("writing the listing", e))
        }),
        Emit::Dot => write_output(out.output.as_deref(), false, |w| {
            w.write_all(crate::text::dot(program).as_bytes())
                .map_err(|e| Error::io("writing DOT", e))
        }),
        Emit::Yaml => {
            program.storages.iter().try_for_each(|s| s.verify())?;
            let text = crate::text::yaml(program)?;
            write_output(out.output.as_deref(), false, |w| {
                w.write_all(text.as_bytes())
                    .map_err(|e| Error::io("writing YAML", e))
            })
        }
    }
}
