//! `ir-run`: executes the IR with candle, after checking the inputs
//! against the exported shape contract.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use pt2kit::cli::{self, CommonArgs};
use pt2kit::exec::{self, Executor};
use pt2kit::tensorfile::TensorFormat;
use pt2kit::tensorfile::{self, HostTensor};
use pt2kit::{output, Error, Result};

use crate::run_inputs::{self, DeviceArg, InputArgs};

/// Run a pt2ir program on inputs, checked against its exported shape contract
#[derive(Parser, Debug)]
#[command(name = "ir-run", version, long_version = cli::long_version())]
#[command(
    after_help = "Examples:\n  pt2ir model.pt2 | ir-run --inputs inputs.npz -o outputs.npz\n  ir-run model.ir -i x=x.npy\n  ir-run model.ir --random --seed 1 --stats\n  ir-run decoder.ir --inputs step.npz --state kv.npz -o logits.npz"
)]
pub struct Args {
    /// The IR file to read (- or absent for standard input)
    #[arg(value_name = "IR")]
    pub input: Option<PathBuf>,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Write the outputs to FILE (.npz or .safetensors) instead of printing a summary
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write every tensor a top-level node computes to FILE (.npz or .safetensors), named by IR value, in the order they ran: ir-diff --first against ONNX Runtime's (ir2onnx --intermediates) names the first node that differs
    #[arg(long, value_name = "FILE")]
    pub intermediates: Option<PathBuf>,
    /// Carry the program's state (the buffers and inputs it updates in place: a KV cache, running statistics) through FILE (.npz or .safetensors): read from FILE when it exists (instead of the weights), written back updated after the run
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Where to run
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    pub device: DeviceArg,
    /// Print timing, peak memory and the kernels' fusions to stderr
    #[arg(long)]
    pub stats: bool,
    /// Run N more times after the first (a warm-up) and report the median time with --stats
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub repeat: Option<u64>,
    /// Output format [default: by the extension of -o; npz for -]
    #[arg(long, value_enum)]
    pub format: Option<OutputFormat>,
    #[command(flatten)]
    pub memory: run_inputs::MemoryArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum OutputFormat {
    Npz,
    /// one output only
    Npy,
    Safetensors,
}

impl From<OutputFormat> for tensorfile::TensorFormat {
    fn from(f: OutputFormat) -> Self {
        match f {
            OutputFormat::Npz => tensorfile::TensorFormat::Npz,
            OutputFormat::Npy => tensorfile::TensorFormat::Npy,
            OutputFormat::Safetensors => tensorfile::TensorFormat::Safetensors,
        }
    }
}

fn summary(name: &str, t: &HostTensor) -> String {
    let vals = t.to_f64();
    let head: Vec<String> = vals.iter().take(6).map(|v| format!("{v:.6}")).collect();
    format!(
        "{name}: {}{:?} [{}{}]",
        t.dtype.short_name(),
        t.shape,
        head.join(", "),
        if vals.len() > 6 { ", ..." } else { "" }
    )
}

pub fn run(args: Args) -> Result<()> {
    // RAYON_NUM_THREADS checked and the threads started (exit 2 if they
    // cannot be), before anything else.
    exec::start_threads(None)?;
    // Everything on a thread of the executor's pool: no hand-off per run.
    exec::in_pool(move || run_here(args))
}

fn run_here(args: Args) -> Result<()> {
    // The output format is settled before anything runs.
    let format = match (args.format, &args.output) {
        (Some(f), _) => Some(TensorFormat::from(f)),
        (None, Some(path)) => Some(TensorFormat::of_path(path)?),
        (None, None) => None,
    };
    // The intermediates keep their order only in an npz (zip members).
    if let Some(path) = &args.intermediates {
        if !matches!(TensorFormat::of_path(path), Ok(TensorFormat::Npz)) {
            return Err(Error::usage(format!(
                "--intermediates {}: write them to an .npz file (it keeps their order)",
                path.display()
            )));
        }
    }
    let anon = args.stats.then(run_inputs::AnonPeak::start);
    let start = std::time::Instant::now();
    let program = run_inputs::read_program(args.input.as_deref(), &args.memory)?;
    let device = exec::device(args.device.kind())?;
    // The state read whole first (it is written back over itself).
    let state = match &args.state {
        // read, then replaced through a rename: a regular file (or none yet)
        Some(path) if path.exists() && !path.is_file() => {
            return Err(Error::usage(format!(
            "--state {}: not a regular file (the state is read from it and written back over it)",
            path.display()
        )))
        }
        Some(path) if path.exists() => {
            let t = tensorfile::read_tensors(path, "state")?;
            output::inputs::forget_path(path);
            t
        }
        _ => Vec::new(),
    };
    // a user input the program updates, carried in the state file, is an
    // input (that each entry names state is checked with the executor)
    let user = pt2kit::contract::user_tensor_inputs(&program);
    let carried: Vec<(String, HostTensor)> = state
        .iter()
        .filter(|(n, _)| user.iter().any(|(_, u)| u == n))
        .cloned()
        .collect();
    let (inputs, given_twice) =
        run_inputs::checked_inputs_with(&program, &args.inputs, false, carried)?;
    // Every input is read: no output may be one of them.
    let mut outputs = Vec::new();
    if let Some(p) = args.output.as_deref() {
        outputs.push(("-o", p));
    }
    if let Some(p) = args.intermediates.as_deref() {
        outputs.push(("--intermediates", p));
    }
    if let Some(p) = args.state.as_deref() {
        outputs.push(("--state", p));
    }
    output::refuse_clobbering(&outputs)?;
    let loaded = start.elapsed();
    let prepared = std::time::Instant::now();
    let opts = pt2kit::exec::ExecOptions {
        // the intermediates are named by the values of the program as given
        as_given: args.intermediates.is_some(),
        ..args.memory.exec_options()
    };
    let executor = Executor::with_options(&program, device, opts)?;
    cli::fallback_report("ir-run", &executor.fallback);
    if let Some(note) = executor.precision_note() {
        cli::verbose(format!("ir-run: {note}"));
    }
    let (mapped, mapped_bytes) = executor.mapped_weights();
    if mapped > 0 {
        cli::verbose(format!(
            "ir-run: {mapped} weights ({}) read where they lie, not copied",
            pt2kit::export::onnx::human_bytes(mapped_bytes)
        ));
    }
    cli::verbose(format!(
        "ir-run: read the program and {} inputs in {:.1} ms; {} nodes ready in {:.1} ms",
        inputs.len(),
        loaded.as_secs_f64() * 1e3,
        executor.program.graph.nodes.len(),
        prepared.elapsed().as_secs_f64() * 1e3
    ));
    if args.intermediates.is_some() {
        executor.start_recording();
    }
    if let Some(path) = &args.state {
        if executor.state_names().is_empty() {
            return Err(Error::usage(format!(
                "--state {}: the program updates no buffer or input in place (it has no state to carry)",
                path.display()
            )));
        }
        executor
            .set_state(&state)
            .map_err(|e| e.at(format!("--state {}", path.display())))?;
        // (every entry names state: set_state checked it)
        if let Some(name) = given_twice.first() {
            return Err(Error::usage(format!(
                "input {name} is given with the inputs and carried in --state {} (the program updates it): give it once",
                path.display()
            )));
        }
    }
    // One run, timed; with --repeat N, N more after it (a warm-up).
    let first = std::time::Instant::now();
    let mut outputs = executor.run_outputs(&inputs)?;
    let mut times = vec![first.elapsed()];
    if let Some(n) = args.repeat {
        times.clear();
        for _ in 0..n.max(1) {
            let run_start = std::time::Instant::now();
            outputs.clear(); // the last run's outputs freed before the next
            outputs = executor.run_outputs(&inputs)?;
            times.push(run_start.elapsed());
        }
    }
    times.sort();
    let ran = times[times.len() / 2];
    cli::verbose(format!(
        "ir-run: ran in {:.3} ms (median of {}), {} outputs",
        ran.as_secs_f64() * 1e3,
        times.len(),
        outputs.len()
    ));
    if let Some(path) = &args.intermediates {
        let recorded = executor.recorded();
        let shown = path.display().to_string();
        output::write_output_seekable(Some(path), true, |w| {
            tensorfile::write_npz_into(w, &recorded, &shown)
        })?;
    }
    if let Some(path) = &args.state {
        let state = executor.last_state()?;
        let shown = path.display().to_string();
        let format = TensorFormat::of_path(path)?;
        output::write_output_seekable(Some(path), true, |w| {
            tensorfile::encode_tensors_into(format, &state, w, &shown)
        })?;
    }
    match &args.output {
        Some(path) => {
            // An npz goes into the staged file as it is made: the outputs
            // are not held a second time as the archive's bytes.
            let format = format.unwrap_or(TensorFormat::Npz);
            let shown = path.display().to_string();
            output::write_output_seekable(Some(path), true, |w| {
                tensorfile::encode_tensors_into(format, &outputs, w, &shown)
            })?;
        }
        None => {
            let text = outputs
                .iter()
                .map(|(n, t)| Ok(summary(n, &t.to_host()?) + "\n"))
                .collect::<Result<String>>()?;
            cli::write_output(None, false, |w| {
                w.write_all(text.as_bytes())
                    .map_err(|e| Error::io("<stdout>", e))
            })?;
        }
    }
    if args.stats {
        let mib = |b: Option<u64>| b.unwrap_or(0) as f64 / (1 << 20) as f64;
        eprintln!(
            "ir-run: read {:.1} ms, run {:.3} ms (median of {}), peak RSS {:.1} MiB, peak anonymous {:.1} MiB",
            loaded.as_secs_f64() * 1e3,
            ran.as_secs_f64() * 1e3,
            times.len(),
            mib(run_inputs::peak_rss_bytes()),
            mib(anon.as_ref().and_then(|a| a.peak())),
        );
        // the counts are the executor's since it was built: the warm-up
        // and the timed runs
        let runs = 1 + args.repeat.map_or(0, |n| n.max(1)) as usize;
        eprintln!(
            "ir-run: per run, {} fused chains in their kernels, {} outputs written over a dead residual, {} left channels-last",
            executor.epilogues_in_kernels() / runs,
            executor.outputs_in_place() / runs,
            executor.outputs_channels_last() / runs,
        );
        if !executor.device.is_cpu() {
            let copies = executor.host_copies();
            let list: Vec<String> = copies.iter().map(|(op, n)| format!("{op} {n}")).collect();
            eprintln!(
                "ir-run: copies between the device and the host in op rows, per run: {} ({})",
                copies.values().sum::<usize>(),
                if list.is_empty() {
                    "none".to_string()
                } else {
                    list.join(", ")
                }
            );
        }
    }
    Ok(())
}

pub fn main() -> ExitCode {
    crate::init();
    cli::main(|a: &Args| &a.common, run)
}
