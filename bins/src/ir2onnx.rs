//! `ir2onnx`: writes standard ONNX from the IR (work in progress).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use pt2kit::cli::{self, CommonArgs};

/// Convert pt2ir IR to an ONNX model
#[derive(Parser, Debug)]
#[command(name = "ir2onnx", version, long_version = cli::LONG_VERSION)]
pub struct Args {
    /// The IR file to read (- or absent for standard input)
    #[arg(value_name = "IR")]
    pub input: Option<PathBuf>,
    /// Write to FILE instead of standard output
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn run(_args: Args) -> pt2kit::Result<()> {
    Err(pt2kit::Error::unsupported("ir2onnx is not implemented yet"))
}

pub fn main() -> ExitCode {
    cli::main(|a: &Args| &a.common, run)
}
