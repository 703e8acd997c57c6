//! `ir2onnx`: writes standard ONNX from the IR.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use pt2kit::cli::{self, CommonArgs};
use pt2kit::export::onnx::{self, OnnxOptions};

/// Convert pt2ir IR to an ONNX model
#[derive(Parser, Debug)]
#[command(name = "ir2onnx", version, long_version = cli::long_version())]
#[command(
    after_help = "Examples:\n  pt2ir model.pt2 | ir2onnx -o model.onnx\n  ir2onnx model.ir -o model.onnx --opset 21 --stats\n  ir2onnx big.ir -o big.onnx --external-data   # weights in big.onnx.data\n  ir2onnx decoder.ir --state-inputs -o decoder.onnx   # the KV cache as inputs, present.* outputs"
)]
pub struct Args {
    /// The IR file to read (- or absent for standard input)
    #[arg(value_name = "IR")]
    pub input: Option<PathBuf>,
    /// Write to FILE instead of standard output (written to a temporary file, then renamed)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The ONNX opset to write (17 to 21)
    #[arg(long, value_name = "N", default_value_t = onnx::DEFAULT_OPSET,
          value_parser = clap::value_parser!(i64).range(*onnx::OPSETS.start()..=*onnx::OPSETS.end()))]
    pub opset: i64,
    /// Write the weights to FILE.data beside the model (ONNX external data); done anyway above 2 GiB
    #[arg(long)]
    pub external_data: bool,
    /// Point the external data into the .pt2 archive the weights came from (pt2ir model.pt2 | ir2onnx ...): nothing is copied. Beside the archive the model names it; elsewhere FILE.data is a hard link to it (ONNX Runtime loads it; ONNX's checker refuses links). The ONNX then needs that archive's bytes
    #[arg(long)]
    pub external_data_in_archive: bool,
    /// Use external data when the weights exceed BYTES (for tests)
    #[arg(long, value_name = "BYTES", hide = true, default_value_t = onnx::DEFAULT_EXTERNAL_THRESHOLD)]
    pub external_data_threshold: u64,
    /// Write ops without an ONNX conversion as nodes of a pt2kit.<namespace> custom domain instead of failing
    #[arg(long)]
    pub allow_custom: bool,
    /// Compute float16/bfloat16 ops in their own dtype (default: in float32, rounded back after each op, as torch on CPU)
    #[arg(long)]
    pub native_low_precision: bool,
    /// Also return every tensor a top-level node computes, as an extra graph output under its IR name (to compare node by node with ir-run --intermediates)
    #[arg(long)]
    pub intermediates: bool,
    /// Make each mutated buffer (program state: a KV cache, running statistics) also a graph input of the same name, whose initializer is its initial value; the updated state is always an output, present.<name>, after the user outputs
    #[arg(long)]
    pub state_inputs: bool,
    /// Print per-op counts (IR ops, the ONNX nodes they became) to standard error
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The external data file of a model file: `model.onnx.data` beside it.
fn data_path(model: &Path) -> Option<(PathBuf, String)> {
    let name = model.file_name()?.to_string_lossy().to_string();
    let location = format!("{name}.data");
    Some((model.with_file_name(&location), location))
}

pub fn run(args: Args) -> pt2kit::Result<()> {
    let mut program = cli::read_ir(args.input.as_deref())?;
    // Only values of the program as given are exposed: the fallback
    // lowering's fresh names mean nothing to another back end.
    let intermediates = args.intermediates.then(|| {
        program
            .graph
            .values
            .iter()
            .map(|v| v.name.clone())
            .collect()
    });
    // Ops with no emitter are lowered through the decomposition table first.
    if let Some((lowered, report)) =
        pt2kit::decompose::fallback::lower_unsupported(&program, onnx::converts)?
    {
        cli::fallback_report("ir2onnx", &report);
        program = lowered;
    }
    let output = args.output.filter(|p| p.as_os_str() != "-");
    // External data goes beside the file the model lands in: beside a
    // symlink's target, never beside a device, a FIFO or stdout.
    let target = output.as_deref().map(pt2kit::output::resolve).transpose()?;
    let data = match &target {
        Some(pt2kit::output::Target::File(real)) => data_path(real),
        _ => None,
    };
    let opts = OnnxOptions {
        opset: args.opset,
        allow_custom: args.allow_custom,
        native_low_precision: args.native_low_precision,
        external_data: args.external_data,
        external_threshold: args.external_data_threshold,
        external_location: data.as_ref().map(|(_, l)| l.clone()),
        external_in_archive: args.external_data_in_archive,
        model_dir: match &target {
            Some(pt2kit::output::Target::File(real)) => real
                .parent()
                .map(|d| {
                    if d.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        d
                    }
                })
                .map(Path::to_path_buf),
            _ => None,
        },
        intermediates,
        state_inputs: args.state_inputs,
    };
    let model = onnx::to_onnx(&program, &opts)?;
    // Nothing is written over an input (a link to the archive is checked
    // where it is made).
    let mut outputs = Vec::new();
    if let Some(p) = output.as_deref() {
        outputs.push(("-o", p));
    }
    if let Some((p, _)) = data.as_ref().filter(|_| model.writes_external_data()) {
        outputs.push(("--external-data", p.as_path()));
    }
    pt2kit::output::refuse_clobbering(&outputs)?;
    for (node, op) in &model.stats.custom_nodes {
        cli::info(format!(
            "ir2onnx: warning: node '{node}' ({op}) written as a custom-domain node"
        ));
    }
    // External data goes to a temporary file first, renamed beside the
    // model only once the model itself is in place.
    let staged = match &data {
        Some((path, _)) => model.stage_external_data(path)?,
        None => None,
    };
    cli::write_output(output.as_deref(), true, |w| model.write_model(w))?;
    if let Some(staged) = staged {
        staged.commit()?;
    }
    if args.stats {
        eprint!("{}", model.stats_table());
    }
    cli::verbose(format!(
        "ir2onnx: {} IR nodes, {} initializers ({}), opset {}",
        program.graph.nodes.len(),
        model.stats.initializers,
        onnx::human_bytes(model.stats.initializer_bytes),
        args.opset
    ));
    Ok(())
}

pub fn main() -> ExitCode {
    crate::init();
    cli::main(|a: &Args| &a.common, run)
}
