//! `ir-diff`: compares two IR files structurally, or two tensor files
//! (.npz, .npy, .safetensors) numerically; exit 1 on a difference.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use pt2kit::cli::{self, CommonArgs};
use pt2kit::diff::{self, Tolerance};
use pt2kit::{Error, Result};

/// Compare two IR files (nodes, signature, weights) or two tensor files (per-tensor errors)
#[derive(Parser, Debug)]
#[command(name = "ir-diff", version, long_version = cli::long_version())]
#[command(
    after_help = "Examples:\n  ir-diff old.ir new.ir\n  ir-diff outputs.npz expected.npz --atol 1e-5\n  ir-diff out.safetensors expected.npz --by-position"
)]
pub struct Args {
    /// The first file (IR, .npz, .npy or .safetensors)
    pub a: Option<PathBuf>,
    /// The second file, of the same kind
    pub b: Option<PathBuf>,
    /// Absolute tolerance for tensors
    #[arg(long, default_value_t = 1e-4)]
    pub atol: f64,
    /// Relative tolerance for tensors
    #[arg(long, default_value_t = 1e-4)]
    pub rtol: f64,
    /// Pair tensors by position instead of by name
    #[arg(long)]
    pub by_position: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

fn is_tensor_file(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("npz" | "npy" | "safetensors")
    )
}

/// Ok(true) when the files agree.
pub fn run(args: Args) -> Result<bool> {
    let (Some(a_path), Some(b_path)) = (&args.a, &args.b) else {
        return Err(Error::usage("two files to compare are needed: ir-diff A B"));
    };
    let report: Vec<String>;
    let same;
    match (is_tensor_file(a_path), is_tensor_file(b_path)) {
        (true, true) => {
            let a = pt2kit::tensorfile::read_tensors(a_path, "a")?;
            let b = pt2kit::tensorfile::read_tensors(b_path, "b")?;
            let tol = Tolerance {
                atol: args.atol,
                rtol: args.rtol,
            };
            let (lines, ok) = diff::compare_tensors(&a, &b, tol, args.by_position);
            report = lines;
            same = ok;
        }
        (false, false) => {
            let a = cli::read_ir(Some(a_path))?;
            let b = cli::read_ir(Some(b_path))?;
            report = diff::diff_programs(&a, &b);
            same = report.is_empty();
        }
        _ => return Err(Error::usage(
            "compare two IR files or two tensor files (.npz, .npy, .safetensors), not one of each",
        )),
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
