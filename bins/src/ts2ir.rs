//! `ts2ir`: reads a TorchScript archive (`torch.jit.save`) into the IR,
//! without Python.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use pt2kit::cli::{self, CommonArgs, ProgramOutput};
use pt2kit::import::torchscript::{read_torchscript, ShapeOut, TsOptions};

/// Read a TorchScript archive (torch.jit.save) into the pt2ir graph IR
#[derive(Parser, Debug)]
#[command(name = "ts2ir", version, long_version = cli::long_version())]
#[command(
    after_help = "Examples:\n  ts2ir model.pt --example-inputs model.inputs.npz > traced.ir\n  ts2ir model.pt --example-inputs model.inputs.npz --emit text | less\n  ts2ir model.pt | ir-run --inputs model.inputs.npz"
)]
pub struct Args {
    /// The TorchScript archive to read (.pt, written by torch.jit.save)
    #[arg(value_name = "MODEL")]
    pub archive: Option<PathBuf>,
    /// Example values of the method's arguments by name (.npz or .safetensors; keys arr_0, arr_1, ... give them in order): tensors bind their input's dtype and sizes, one-element arrays are the example values of int, float and bool arguments, which become graph inputs (SymInt, SymFloat, SymBool); an argument left out takes its default, an Optional one without a default is None. Without it, a traced archive's recorded examples give each input its rank and dtype, every dim a fresh symbol
    #[arg(long, value_name = "FILE")]
    pub example_inputs: Option<PathBuf>,
    /// With --example-inputs: every tensor dim of the examples (but those of size 0 or 1) a fresh symbol, the example's size its hint, so the graph takes other sizes the code allows
    #[arg(long, requires = "example_inputs")]
    pub dynamic: bool,
    /// The method of the root module to read
    #[arg(long, default_value = "forward", value_name = "NAME")]
    pub method: String,
    #[command(flatten)]
    pub output: ProgramOutput,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The shape rules, as the importer takes them.
fn shapes(
    graph: &pt2kit::ir::Graph,
    node: &pt2kit::ir::Node,
) -> Option<pt2kit::Result<Vec<ShapeOut>>> {
    pt2kit::infer::outputs_of(graph, node)
        .map(|r| r.map(|outs| outs.into_iter().map(|o| (o.dims, o.dtype)).collect()))
}

pub fn run(args: Args) -> pt2kit::Result<()> {
    let Some(archive) = args.archive else {
        return Err(pt2kit::Error::usage(
            "no archive given: ts2ir MODEL.pt (a zip is read from its end, so not from a pipe)",
        ));
    };
    let start = std::time::Instant::now();
    let example_inputs = match &args.example_inputs {
        Some(p) => Some(pt2kit::tensorfile::read_tensors(p, "input")?),
        None => None,
    };
    let opts = TsOptions {
        example_inputs,
        dynamic: args.dynamic,
        method: args.method,
    };
    let program = read_torchscript(&archive, &opts, &shapes)?;
    pt2kit::infer::check(&program, &Default::default())?;
    cli::verbose(format!(
        "ts2ir: {}: {} nodes, {} weights, read in {:.1} ms",
        archive.display(),
        program.graph.nodes.len(),
        program.weights.len(),
        start.elapsed().as_secs_f64() * 1e3
    ));
    cli::emit_program(&program, &args.output)
}

pub fn main() -> ExitCode {
    crate::init();
    cli::main(|a: &Args| &a.common, run)
}
