//! `pt2ir`: reads a `.pt2` archive written by `torch.export.save` into the
//! IR, without Python.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use pt2kit::cli::{self, CommonArgs, ProgramOutput};
use std::io::{IsTerminal, Read};

use pt2kit::import::pt2::{read_pt2, read_pt2_bytes, ImportOptions};

/// Read a torch.export .pt2 archive into the pt2ir graph IR
#[derive(Parser, Debug)]
#[command(name = "pt2ir", version, long_version = cli::long_version())]
#[command(
    after_help = "Examples:\n  pt2ir model.pt2 > model.ir\n  pt2ir model.pt2 --emit text | less\n  pt2ir model.pt2 | ir-run --random"
)]
pub struct Args {
    /// The .pt2 archive to read (standard input when it is - or absent; an archive from a pipe is read into memory, since a zip is read from its end)
    #[arg(value_name = "ARCHIVE")]
    pub archive: Option<PathBuf>,
    /// Which model of the archive to read (models/NAME.json)
    #[arg(long, default_value = "model", value_name = "NAME")]
    pub model: String,
    /// Check the CRC-32 of every weight payload while it streams out (torch's own reader does not; JSON and configs are always checked)
    #[arg(long)]
    pub verify: bool,
    #[command(flatten)]
    pub output: ProgramOutput,
    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn run(args: Args) -> pt2kit::Result<()> {
    // No archive named: standard input, unless it is a terminal.
    let archive = match args.archive {
        Some(a) => a,
        None if std::io::stdin().is_terminal() => {
            return Err(pt2kit::Error::usage(
                "no archive given: pt2ir MODEL.pt2, or pipe one in",
            ))
        }
        None => PathBuf::from("-"),
    };
    let start = std::time::Instant::now();
    let opts = ImportOptions {
        model: args.model,
        verify_weights: args.verify,
    };
    let program = if archive.as_os_str() == "-" {
        pt2kit::output::inputs::note_stdin();
        let mut bytes = Vec::new();
        cli::open_input(None)?
            .read_to_end(&mut bytes)
            .map_err(|e| pt2kit::Error::io("<stdin>", e))?;
        read_pt2_bytes("<stdin>", bytes, &opts)?
    } else {
        read_pt2(&archive, &opts)?
    };
    cli::verbose(format!(
        "pt2ir: {}: {} nodes, {} weights, read in {:.1} ms",
        archive.display(),
        program.graph.nodes.len(),
        program.weights.len(),
        start.elapsed().as_secs_f64() * 1e3
    ));
    let start = std::time::Instant::now();
    cli::emit_program(&program, &args.output)?;
    cli::verbose(format!(
        "pt2ir: written in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    ));
    Ok(())
}

pub fn main() -> ExitCode {
    crate::init();
    cli::main(|a: &Args| &a.common, run)
}
