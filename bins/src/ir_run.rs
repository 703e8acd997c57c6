//! `ir-run`: executes the IR with candle, after checking the inputs
//! against the exported shape contract.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use pt2kit::cli::{self, CommonArgs};
use pt2kit::exec::{self, DeviceKind, Executor};
use pt2kit::ir::Dtype;
use pt2kit::tensorfile::{self, HostTensor};
use pt2kit::{Error, Result};

/// Run a pt2ir program on inputs, checked against its exported shape contract
#[derive(Parser, Debug)]
#[command(name = "ir-run", version, long_version = cli::LONG_VERSION)]
#[command(
    after_help = "Examples:\n  pt2ir model.pt2 | ir-run --inputs inputs.npz -o outputs.npz\n  ir-run model.ir -i x=x.npy\n  ir-run model.ir --random --seed 1 --stats"
)]
pub struct Args {
    /// The IR file to read (- or absent for standard input)
    #[arg(value_name = "IR")]
    pub input: Option<PathBuf>,
    /// Inputs by name, from an .npz or .safetensors file
    #[arg(long, value_name = "FILE")]
    pub inputs: Option<PathBuf>,
    /// One input from an .npy file (repeatable)
    #[arg(short = 'i', long = "input", value_name = "NAME=FILE.npy")]
    pub input_files: Vec<String>,
    /// Random inputs shaped like the example inputs recorded at export
    #[arg(long, conflicts_with_all = ["inputs", "input_files"])]
    pub random: bool,
    /// Seed for --random
    #[arg(long, default_value_t = 0, requires = "random")]
    pub seed: u64,
    /// Write the outputs to FILE (.npz or .safetensors) instead of printing a summary
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Where to run
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    pub device: DeviceArg,
    /// Print timing and peak memory to stderr
    #[arg(long)]
    pub stats: bool,
    /// Run N times after one warm-up run and report the median time with --stats
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: usize,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum DeviceArg {
    Cpu,
    Cuda,
}

/// Deterministic inputs for --random (xorshift; floats in [0, 1), ints in
/// [0, 2) so they are valid indices, bools half true).
fn random_tensor(dtype: Dtype, shape: Vec<usize>, state: &mut u64) -> HostTensor {
    let n: usize = shape.iter().product();
    let mut next = || {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    };
    let floats: Vec<f64> = (0..n)
        .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64)
        .collect();
    let data: Vec<u8> = match dtype {
        Dtype::Float32 => floats
            .iter()
            .flat_map(|v| (*v as f32).to_le_bytes())
            .collect(),
        Dtype::Float64 => floats.iter().flat_map(|v| v.to_le_bytes()).collect(),
        Dtype::Int64 => floats
            .iter()
            .flat_map(|v| ((v * 2.0) as i64).to_le_bytes())
            .collect(),
        Dtype::Int32 => floats
            .iter()
            .flat_map(|v| ((v * 2.0) as i32).to_le_bytes())
            .collect(),
        Dtype::Bool | Dtype::Uint8 => floats.iter().map(|v| (*v >= 0.5) as u8).collect(),
        _ => floats
            .iter()
            .flat_map(|v| (*v as f32).to_le_bytes())
            .collect(),
    };
    let dtype = match dtype {
        Dtype::Float32
        | Dtype::Float64
        | Dtype::Int64
        | Dtype::Int32
        | Dtype::Bool
        | Dtype::Uint8 => dtype,
        _ => Dtype::Float32,
    };
    HostTensor { dtype, shape, data }
}

fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
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
    let start = std::time::Instant::now();
    let program = cli::read_ir(args.input.as_deref())?;
    let device = exec::device(match args.device {
        DeviceArg::Cpu => DeviceKind::Cpu,
        DeviceArg::Cuda => DeviceKind::Cuda,
    })?;
    let user = pt2kit::contract::user_tensor_inputs(&program);
    let mut inputs: Vec<(String, HostTensor)> = Vec::new();
    if args.random {
        let mut state = args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for (pos, name) in &user {
            let (dtype, shape) =
                pt2kit::contract::example_shape(&program, *pos).ok_or_else(|| {
                    Error::unsupported(format!(
                        "input {name}: no example shape recorded, give inputs"
                    ))
                })?;
            inputs.push((name.clone(), random_tensor(dtype, shape, &mut state)));
        }
    } else {
        if let Some(path) = &args.inputs {
            inputs.extend(tensorfile::read_tensors(path, "x")?);
        }
        for spec in &args.input_files {
            let (name, file) = spec
                .split_once('=')
                .ok_or_else(|| Error::usage(format!("-i {spec}: expected NAME=FILE.npy")))?;
            let t = tensorfile::read_tensors(std::path::Path::new(file), name)?;
            inputs.extend(t.into_iter().map(|(_, t)| (name.to_string(), t)));
        }
        if inputs.is_empty() && !user.is_empty() {
            let names: Vec<&str> = user.iter().map(|(_, n)| n.as_str()).collect();
            return Err(Error::usage(format!(
                "no inputs given: the model takes {} (use --inputs FILE.npz, -i NAME=FILE.npy or --random)",
                names.join(", ")
            )));
        }
    }
    let loaded = start.elapsed();
    let executor = Executor::new(&program, device)?;
    let mut outputs = executor.run(&inputs)?;
    let mut times = Vec::new();
    for _ in 0..args.repeat.max(1) {
        let run_start = std::time::Instant::now();
        outputs = executor.run(&inputs)?;
        times.push(run_start.elapsed());
    }
    times.sort();
    let ran = times[times.len() / 2];
    match &args.output {
        Some(path) => {
            let bytes = tensorfile::encode_tensors(path, &outputs)?;
            cli::write_output(Some(path), true, |w| {
                w.write_all(&bytes)
                    .map_err(|e| Error::io(path.display(), e))
            })?;
        }
        None => {
            let text: String = outputs.iter().map(|(n, t)| summary(n, t) + "\n").collect();
            cli::write_output(None, false, |w| {
                w.write_all(text.as_bytes())
                    .map_err(|e| Error::io("<stdout>", e))
            })?;
        }
    }
    if args.stats {
        eprintln!(
            "ir-run: read {:.1} ms, run {:.3} ms (median of {}), peak RSS {:.1} MiB",
            loaded.as_secs_f64() * 1e3,
            ran.as_secs_f64() * 1e3,
            times.len(),
            peak_rss_bytes().unwrap_or(0) as f64 / (1 << 20) as f64
        );
    }
    Ok(())
}

pub fn main() -> ExitCode {
    crate::init();
    cli::main(|a: &Args| &a.common, run)
}
