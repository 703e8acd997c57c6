//! `ir-diff`: compares two IR files structurally, or two tensor files
//! (.npz, .npy, .safetensors) numerically; exit 1 on a difference. Files
//! are told apart by content, and either may be standard input (`-`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use pt2kit::cli::{self, CommonArgs};
use pt2kit::diff::{self, Tolerance};
use pt2kit::tensorfile::{sniff, FileKind, HostTensor};
use pt2kit::{Error, Result};
use std::io::Read;

/// Compare two IR files (nodes, signature, weights) or two tensor files (per-tensor errors)
#[derive(Parser, Debug)]
#[command(name = "ir-diff", version, long_version = cli::long_version())]
#[command(
    after_help = "Examples:\n  ir-diff old.ir new.ir     # exit 1 when they differ\n  ir-diff outputs.npz expected.npz --atol 1e-5\n  ir-diff out.safetensors expected.npz --by-position"
)]
pub struct Args {
    /// The first file: IR, .npz, .npy or .safetensors, told by content; - for standard input
    pub a: Option<PathBuf>,
    /// The second file, of the same kind (IR or tensors); - for standard input
    pub b: Option<PathBuf>,
    /// Absolute tolerance for tensors (a finite number, zero or more)
    #[arg(long, default_value = "1e-4", value_parser = tolerance)]
    pub atol: f64,
    /// Relative tolerance for tensors (a finite number, zero or more)
    #[arg(long, default_value = "1e-4", value_parser = tolerance)]
    pub rtol: f64,
    /// Pair tensors by position instead of by name
    #[arg(long)]
    pub by_position: bool,
    /// Report only the first tensor, in the first file's order, that differs (two dumps of intermediate values: the first node where they part); names on one side only are counted, not compared
    #[arg(long, conflicts_with = "by_position")]
    pub first: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// A tolerance: a finite number, zero or more.
fn tolerance(s: &str) -> std::result::Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{s} is not a finite number >= 0"));
    }
    Ok(v)
}

/// One argument, read and told apart by its content, not its name.
enum Side {
    Program(Box<pt2kit::ir::Program>),
    Tensors(Vec<(String, HostTensor)>),
}

fn read_side(path: &Path, label: &str) -> Result<(Side, FileKind)> {
    let shown = path.display().to_string();
    let bytes = if path.as_os_str() == "-" {
        pt2kit::output::inputs::note_stdin();
        let mut all = Vec::new();
        std::io::stdin()
            .read_to_end(&mut all)
            .map_err(|e| Error::io("<stdin>", e))?;
        all
    } else {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(&shown, e))?;
        if meta.is_dir() {
            return Err(Error::usage(format!(
                "{shown} is a directory: ir-diff compares two files (IR or tensors)"
            )));
        }
        let mut head = [0u8; 8];
        let n = std::fs::File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|e| Error::io(&shown, e))?;
        if sniff(&head[..n]) == FileKind::IrStream {
            // IR files are mapped, not read
            return Ok((
                Side::Program(Box::new(cli::read_ir_unchecked(Some(path))?)),
                FileKind::IrStream,
            ));
        }
        pt2kit::output::inputs::note_path(path);
        std::fs::read(path).map_err(|e| Error::io(&shown, e))?
    };
    let what = if path.as_os_str() == "-" {
        "<stdin>".to_string()
    } else {
        shown
    };
    match sniff(&bytes) {
        FileKind::IrStream => {
            let program = pt2kit::wire::read_program(&mut bytes.as_slice(), &what)?;
            Ok((Side::Program(Box::new(program)), FileKind::IrStream))
        }
        kind if kind.is_tensors() => Ok((
            Side::Tensors(pt2kit::tensorfile::read_tensor_bytes(bytes, &what, label)?),
            kind,
        )),
        kind => Err(Error::usage(format!(
            "{what} is {}: ir-diff compares two IR files or two tensor files (.npz, .npy, .safetensors)",
            kind.describe()
        ))),
    }
}

/// Ok(true) when the files agree.
pub fn run(args: Args) -> Result<bool> {
    let (Some(a_path), Some(b_path)) = (&args.a, &args.b) else {
        return Err(Error::usage("two files to compare are needed: ir-diff A B"));
    };
    if a_path.as_os_str() == "-" && b_path.as_os_str() == "-" {
        return Err(Error::usage(
            "only one of the two files can be standard input (-)",
        ));
    }
    let start = std::time::Instant::now();
    let (a, a_kind) = read_side(a_path, "a")?;
    let (b, b_kind) = read_side(b_path, "b")?;
    cli::verbose(format!(
        "ir-diff: {} is {}, {} is {}; read in {:.1} ms",
        a_path.display(),
        a_kind.describe(),
        b_path.display(),
        b_kind.describe(),
        start.elapsed().as_secs_f64() * 1e3
    ));
    let report: Vec<String>;
    let same;
    match (a, b) {
        (Side::Tensors(a), Side::Tensors(b)) => {
            let tol = Tolerance {
                atol: args.atol,
                rtol: args.rtol,
            };
            // Two single tensors are one pair, whatever their names.
            let by_position = args.by_position || (a.len() == 1 && b.len() == 1);
            cli::verbose(format!(
                "ir-diff: {} and {} tensors, paired by {}, atol {} rtol {}",
                a.len(),
                b.len(),
                if by_position { "position" } else { "name" },
                args.atol,
                args.rtol
            ));
            let (lines, ok) = if args.first {
                diff::first_divergence(&a, &b, tol)
            } else {
                diff::compare_tensors(&a, &b, tol, by_position)
            };
            report = lines;
            same = ok;
        }
        (Side::Program(a), Side::Program(b)) => {
            report = diff::diff_programs(&a, &b);
            same = report.is_empty();
        }
        _ => {
            return Err(Error::usage(format!(
                "{} is {} and {} is {}: compare two IR files or two tensor files",
                a_path.display(),
                a_kind.describe(),
                b_path.display(),
                b_kind.describe()
            )))
        }
    }
    let text: String = report.iter().map(|l| format!("{l}\n")).collect();
    let written = cli::write_output(None, false, |w| {
        w.write_all(text.as_bytes())
            .map_err(|e| Error::io("<stdout>", e))
    });
    match written {
        // The reader went away (`ir-diff a b | head`): the verdict stands.
        Err(e) if e.kind == pt2kit::error::ErrorKind::BrokenPipe => Ok(same),
        Err(e) => Err(e),
        Ok(()) => Ok(same),
    }
}

pub fn main() -> ExitCode {
    crate::init();
    let mut differs = false;
    let code = cli::main(
        |a: &Args| &a.common,
        |args| {
            differs = !run(args)?;
            Ok(())
        },
    );
    if differs && code == ExitCode::SUCCESS {
        return ExitCode::from(1);
    }
    code
}
