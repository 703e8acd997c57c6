//! `ir-bench`: times the executor on a program: the load (IR read and
//! executor setup), the first run, then timed runs after a warm-up, and
//! reports their statistics as text, JSON or CSV.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use pt2kit::cli::{self, CommonArgs};
use pt2kit::exec::{self, Executor};
use pt2kit::{Error, Result};
use serde_json::{json, Value};

use crate::run_inputs::{self, DeviceArg, InputArgs};

/// Measure how long a pt2ir program takes to run with the executor
///
/// Reads the IR, builds the inputs (--inputs, -i, or random inputs shaped
/// like the example inputs recorded at export, the default), checks them
/// against the exported shape contract, then runs the program once (the
/// first run), --warmup more times untimed (and on until the warm-up has
/// taken --warmup-time seconds), and --iters times timed, going on until
/// the timed runs have taken --min-time seconds. A run is what
/// ir-run does once, the graph executed and its outputs copied back, on
/// inputs made into the executor's tensors once before the first run (as
/// a server's loop would, and as ONNX Runtime's Python binding reads a
/// NumPy array where it lies), which no run writes over. A progress bar
/// is drawn on standard error when it is a terminal (not with -q).
///
/// Report fields, in this order (the JSON keys and the CSV header): tool
/// ("ir-bench"), version, label (--label; null in JSON and empty in CSV
/// when not given), model (the IR file, - for standard input), device,
/// threads (CPU threads of the executor), precision (what the matrix
/// products computed in: f32, or bf16 where --precision bf16 found a
/// kernel), warmup (untimed runs made),
/// iters (timed runs made),
/// load_seconds (IR read, device and executor setup with the weights),
/// first_run_seconds, then over the timed runs min_seconds, median_seconds,
/// mean_seconds, p90_seconds (nearest rank), max_seconds, stddev_seconds
/// (sample standard deviation, 0 for one run), max_abs_error (with bf16:
/// the largest absolute difference of any floating output of one more run
/// from a float32 run's on the same inputs; null otherwise, and with
/// --carry-state), peak_rss_bytes (the
/// process's peak resident memory; null where /proc is missing),
/// peak_anon_bytes (the peak of its anonymous memory, RssAnon, sampled every
/// 10 ms: memory not backed by a file, so mapped weights are not in it; null
/// where /proc is missing), inputs (in
/// JSON a list of {name, dtype, shape}; in CSV NAME:DTYPE[SHAPE] joined by
/// spaces). CSV is one header line and one row, so reports of several runs
/// concatenate (drop the later headers).
#[derive(Parser, Debug)]
#[command(name = "ir-bench", version, long_version = cli::long_version())]
#[command(
    after_help = "Examples:\n  pt2ir model.pt2 | ir-bench\n  ir-bench model.ir --inputs inputs.npz --iters 100 --threads 1\n  ir-bench model.ir --min-time 5 --format json -o bench.json --label baseline\n  (ir-bench a.ir --format csv; ir-bench b.ir --format csv | tail -n +2) > runs.csv\n  ir-bench model.ir --iters 20 --profile\n  ir-bench decoder.ir --inputs step.npz --carry-state"
)]
#[command(mut_arg("random", |a| a.help(
    "Random inputs shaped like the example inputs recorded at export (the default when no inputs are given)"
)))]
pub struct Args {
    /// The IR file to read (- or absent for standard input)
    #[arg(value_name = "IR")]
    pub input: Option<PathBuf>,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Untimed runs after the first run
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub warmup: usize,
    /// Go on with untimed runs (after --warmup of them) until they have
    /// taken SECS in all: a fresh process's first runs are slower (its
    /// threads and memory settle over tens of runs on a small model)
    #[arg(long, value_name = "SECS", default_value_t = 0.0, value_parser = seconds)]
    pub warmup_time: f64,
    /// Timed runs (at least)
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: u64,
    /// Go on with timed runs until they have taken SECS in all
    #[arg(long, value_name = "SECS", default_value_t = 0.0, value_parser = seconds)]
    pub min_time: f64,
    /// Each run starts from the state the last run left (the buffers the program updates in place: a decode step over its KV cache), not from the weights; the updated user inputs are not carried
    #[arg(long)]
    pub carry_state: bool,
    /// Where to run
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    pub device: DeviceArg,
    /// CPU threads for the executor, 1 to 1024 (sets RAYON_NUM_THREADS; default: that variable, else the physical cores)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=exec::MAX_THREADS))]
    pub threads: Option<u64>,
    /// Report format [default: by the extension of -o (.json, .csv, .txt), else text]
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write the report to FILE instead of standard output (written to a temporary file, then renamed)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A name for this measurement, carried into the report
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// Time every node of the timed runs: per op kind and per node, with counts and shares of the run (a table in text, "profile" in JSON)
    #[arg(long)]
    pub profile: bool,
    #[command(flatten)]
    pub memory: run_inputs::MemoryArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// a short table, for people
    Text,
    /// one JSON object
    Json,
    /// a header line and one row
    Csv,
}

/// `--format`, or the one `-o`'s extension names; an extension that names
/// none is a usage error.
fn report_format(args: &Args) -> Result<Format> {
    if let Some(f) = args.format {
        return Ok(f);
    }
    let ext = args
        .output
        .as_deref()
        .filter(|p| p.as_os_str() != "-")
        .and_then(|p| p.extension())
        .map(|e| e.to_string_lossy().to_lowercase());
    match ext.as_deref() {
        None | Some("txt" | "text") => Ok(Format::Text),
        Some("json") => Ok(Format::Json),
        Some("csv") => Ok(Format::Csv),
        Some(other) => Err(Error::usage(format!(
            "-o: .{other} names no report format (.json, .csv or .txt; or give --format)"
        ))),
    }
}

fn seconds(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds (0 or more)")),
    }
}

/// Statistics of the timed runs, in seconds.
struct Stats {
    min: f64,
    median: f64,
    mean: f64,
    p90: f64,
    max: f64,
    stddev: f64,
}

impl Stats {
    /// Of at least one time.
    fn of(mut times: Vec<f64>) -> Stats {
        times.sort_by(f64::total_cmp);
        let n = times.len();
        let mean = times.iter().sum::<f64>() / n as f64;
        let median = if n % 2 == 1 {
            times[n / 2]
        } else {
            (times[n / 2 - 1] + times[n / 2]) / 2.0
        };
        // Nearest rank: the smallest time with at least 90% of the runs at
        // or below it.
        let p90 = times[(n * 9).div_ceil(10).max(1) - 1];
        let stddev = if n > 1 {
            (times.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Stats {
            min: times[0],
            median,
            mean,
            p90,
            max: times[n - 1],
            stddev,
        }
    }
}

struct Report {
    label: Option<String>,
    model: String,
    device: String,
    threads: usize,
    /// What the products computed in (`--precision`, where the CPU has it).
    precision: &'static str,
    /// bfloat16's largest difference from the float32 run.
    max_abs_error: Option<f64>,
    warmup: usize,
    iters: usize,
    load_seconds: f64,
    first_run_seconds: f64,
    stats: Stats,
    peak_rss_bytes: Option<u64>,
    peak_anon_bytes: Option<u64>,
    /// (name, dtype short name, shape)
    inputs: Vec<(String, &'static str, Vec<usize>)>,
    profile: Option<pt2kit::exec::profile::Profile>,
}

impl Report {
    /// Every field, in report order: the one list JSON and CSV are written from.
    fn fields(&self) -> Vec<(&'static str, Value)> {
        let s = &self.stats;
        let inputs: Vec<Value> = self
            .inputs
            .iter()
            .map(|(name, dtype, shape)| json!({"name": name, "dtype": dtype, "shape": shape}))
            .collect();
        vec![
            ("tool", json!("ir-bench")),
            ("version", json!(env!("CARGO_PKG_VERSION"))),
            ("label", json!(self.label)),
            ("model", json!(self.model)),
            ("device", json!(self.device)),
            ("threads", json!(self.threads)),
            ("precision", json!(self.precision)),
            ("warmup", json!(self.warmup)),
            ("iters", json!(self.iters)),
            ("load_seconds", json!(self.load_seconds)),
            ("first_run_seconds", json!(self.first_run_seconds)),
            ("min_seconds", json!(s.min)),
            ("median_seconds", json!(s.median)),
            ("mean_seconds", json!(s.mean)),
            ("p90_seconds", json!(s.p90)),
            ("max_seconds", json!(s.max)),
            ("stddev_seconds", json!(s.stddev)),
            ("max_abs_error", json!(self.max_abs_error)),
            ("peak_rss_bytes", json!(self.peak_rss_bytes)),
            ("peak_anon_bytes", json!(self.peak_anon_bytes)),
            ("inputs", Value::Array(inputs)),
            ("profile", json!(self.profile)),
        ]
    }

    fn inputs_text(&self) -> String {
        let shapes: Vec<String> = self
            .inputs
            .iter()
            .map(|(name, dtype, shape)| format!("{name}:{dtype}{shape:?}"))
            .collect();
        shapes.join(" ")
    }

    fn json(&self) -> String {
        // By hand, to keep the fields in report order (serde_json's map
        // sorts its keys).
        let lines: Vec<String> = self
            .fields()
            .iter()
            .map(|(key, value)| format!("  \"{key}\": {value}"))
            .collect();
        format!("{{\n{}\n}}\n", lines.join(",\n"))
    }

    fn csv(&self) -> String {
        // one row: the profile (a table of its own) is JSON's and text's
        let fields: Vec<_> = self
            .fields()
            .into_iter()
            .filter(|(key, _)| *key != "profile")
            .collect();
        let header: Vec<&str> = fields.iter().map(|(key, _)| *key).collect();
        let row: Vec<String> = fields
            .iter()
            .map(|(key, value)| match value {
                _ if *key == "inputs" => csv_cell(&self.inputs_text()),
                Value::Null => String::new(),
                Value::String(s) => csv_cell(s),
                other => other.to_string(),
            })
            .collect();
        format!("{}\n{}\n", header.join(","), row.join(","))
    }

    fn text(&self) -> String {
        let s = &self.stats;
        let (unit, scale) = time_unit(s.median);
        let mut out = format!("ir-bench {}", env!("CARGO_PKG_VERSION"));
        if let Some(label) = &self.label {
            out += &format!(": {label}");
        }
        out += &format!("\nmodel       {}\n", self.model);
        let plural = if self.threads == 1 { "" } else { "s" };
        out += &format!(
            "device      {}, {} thread{plural}\n",
            self.device, self.threads
        );
        out += &format!("precision   {}\n", self.precision);
        out += &format!("inputs      {}\n", self.inputs_text());
        out += &format!("load        {}\n", time_text(self.load_seconds));
        out += &format!("first run   {}\n", time_text(self.first_run_seconds));
        out += &format!("timed runs  {} after {} warm-up\n", self.iters, self.warmup);
        out += &format!(
            "            {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
            "min", "median", "mean", "p90", "max", "stddev"
        );
        let row: Vec<String> = [s.min, s.median, s.mean, s.p90, s.max, s.stddev]
            .iter()
            .map(|t| format!("{:>10.3}", t * scale))
            .collect();
        out += &format!("{:<12}{}\n", format!("time ({unit})"), row.join(" "));
        if let Some(e) = self.max_abs_error {
            out += &format!("max error   {e:.3e} (against float32, largest absolute)\n");
        }
        if let Some(bytes) = self.peak_rss_bytes {
            out += &format!("peak RSS    {:.1} MiB\n", bytes as f64 / (1 << 20) as f64);
        }
        if let Some(bytes) = self.peak_anon_bytes {
            out += &format!("peak anon   {:.1} MiB\n", bytes as f64 / (1 << 20) as f64);
        }
        if let Some(p) = &self.profile {
            out += &p.table(15);
        }
        out
    }
}

/// The unit that shows `seconds` with a few digits before the point.
fn time_unit(seconds: f64) -> (&'static str, f64) {
    if seconds < 1e-3 {
        ("us", 1e6)
    } else if seconds < 1.0 {
        ("ms", 1e3)
    } else {
        ("s", 1.0)
    }
}

fn time_text(seconds: f64) -> String {
    let (unit, scale) = time_unit(seconds);
    format!("{:.3} {unit}", seconds * scale)
}

/// A CSV cell, quoted when it holds a comma, a quote or a line break.
fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// On standard error, over every run; hidden with -q or when standard
/// error is not a terminal.
fn progress_bar(runs: u64, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template("ir-bench {msg:10} [{bar:30}] {pos}/{len} runs")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    ProgressBar::new(runs).with_style(style)
}

/// One run, timed; the outputs are dropped (and with `carry`, the state
/// it left made the next run's) outside the timing.
fn timed_run(executor: &Executor, bound: &exec::BoundInputs, carry: bool) -> Result<f64> {
    let start = Instant::now();
    let outputs = executor.run_bound(bound)?;
    let seconds = start.elapsed().as_secs_f64();
    drop(std::hint::black_box(outputs));
    if carry {
        executor.carry_state()?;
    }
    Ok(seconds)
}

/// The largest absolute difference of any floating output of one more
/// run of `executor` (bfloat16 products) from a float32 executor's run on
/// the same inputs (NaN where one is NaN and the other not).
fn error_against_f32(
    program: &pt2kit::ir::Program,
    args: &Args,
    executor: &Executor,
    bound: &exec::BoundInputs,
    inputs: &[(String, pt2kit::tensorfile::HostTensor)],
) -> Result<f64> {
    let got = executor.run_bound(bound)?;
    let mut opts = args.memory.exec_options();
    opts.precision = exec::Precision::F32;
    let f32_run = Executor::with_options(program, exec::device(args.device.kind())?, opts)?;
    let want = f32_run.run(inputs)?;
    let mut worst = 0f64;
    for ((name, g), (_, w)) in got.iter().zip(&want) {
        if !g.dtype.is_floating() {
            continue;
        }
        let (g, w) = (g.to_f64(), w.to_f64());
        if g.len() != w.len() {
            return Err(Error::internal(format!(
                "output {name}: {} values in bfloat16, {} in float32",
                g.len(),
                w.len()
            )));
        }
        for (a, b) in g.iter().zip(&w) {
            let d = match (a.is_nan(), b.is_nan()) {
                (false, false) if a == b => 0.0, // equal infinities too
                (false, false) => (a - b).abs(),
                (true, true) => 0.0,
                _ => f64::NAN,
            };
            worst = if d.is_nan() || worst.is_nan() {
                f64::NAN
            } else {
                worst.max(d)
            };
        }
    }
    Ok(worst)
}

pub fn run(args: Args) -> Result<()> {
    // candle and rayon read RAYON_NUM_THREADS whenever they size a thread
    // pool or a matmul's parallelism, and no pool exists yet: the tool has
    // started no thread, so --threads can set it here. Both are bounded.
    exec::start_threads(args.threads)?;
    // Everything on a thread of the executor's pool: no hand-off per run.
    pt2kit::exec::in_pool(move || bench(args))
}

fn bench(args: Args) -> Result<()> {
    // The report format is settled before anything runs.
    let format = report_format(&args)?;
    let anon = run_inputs::AnonPeak::start();
    let model = match &args.input {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "-".to_string(),
    };
    let start = Instant::now();
    let program = run_inputs::read_program(args.input.as_deref(), &args.memory)?;
    let device = exec::device(args.device.kind())?;
    let mut load = start.elapsed();
    let inputs = run_inputs::checked_inputs(&program, &args.inputs, true)?;
    if let Some(p) = args.output.as_deref() {
        pt2kit::output::refuse_clobbering(&[("-o", p)])?;
    }
    let setup = Instant::now();
    let executor = Executor::with_options(&program, device, args.memory.exec_options())?;
    cli::fallback_report("ir-bench", &executor.fallback);
    if let Some(note) = executor.precision_note() {
        cli::verbose(format!("ir-bench: {note}"));
    }
    if args.carry_state && executor.state_names().is_empty() {
        return Err(Error::usage(
            "--carry-state: the program updates no buffer in place (it has no state to carry)",
        ));
    }
    let bound = executor.bind(&inputs)?;
    load += setup.elapsed();
    cli::verbose(format!(
        "ir-bench: {} nodes, {} inputs, ready in {:.1} ms; {} threads",
        executor.program.graph.nodes.len(),
        inputs.len(),
        load.as_secs_f64() * 1e3,
        candle_core::utils::get_num_threads()
    ));

    let iters = args.iters as usize;
    let bar = progress_bar(
        (args.warmup as u64)
            .saturating_add(args.iters)
            .saturating_add(1),
        args.common.quiet,
    );
    // Ctrl-C stops at the next run; the report covers the runs finished.
    pt2kit::output::signals::interruptible(true);
    bar.set_message("first");
    let first_run = timed_run(&executor, &bound, args.carry_state)?;
    bar.inc(1);
    bar.set_message("warm-up");
    let warming = Instant::now();
    let mut warmup = 0;
    while warmup < args.warmup || warming.elapsed().as_secs_f64() < args.warmup_time {
        if pt2kit::output::signals::interrupted() {
            break;
        }
        timed_run(&executor, &bound, args.carry_state)?;
        warmup += 1;
        if warmup > args.warmup {
            bar.inc_length(1);
        }
        bar.inc(1);
    }
    bar.set_message("timed");
    if args.profile {
        executor.start_profile();
    }
    let mut times = Vec::with_capacity(iters);
    let timed = Instant::now();
    while times.len() < iters || timed.elapsed().as_secs_f64() < args.min_time {
        if pt2kit::output::signals::interrupted() {
            break;
        }
        times.push(timed_run(&executor, &bound, args.carry_state)?);
        if times.len() > iters {
            // Past --iters only --min-time is left: show its progress.
            bar.inc_length(1);
            let elapsed = timed.elapsed().as_secs_f64();
            bar.set_message(format!("{elapsed:.1}/{} s", args.min_time));
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    cli::verbose(format!(
        "ir-bench: first run {:.3} ms, {} warm-up, {} timed runs in {:.2} s",
        first_run * 1e3,
        warmup,
        times.len(),
        timed.elapsed().as_secs_f64()
    ));
    let interrupted = pt2kit::output::signals::interrupted();
    pt2kit::output::signals::interruptible(false);
    // bfloat16's error: one more run of each precision on the same
    // inputs, untimed
    let bf16 = executor.bf16_kernel().is_some();
    let max_abs_error = if bf16 && !interrupted && !args.carry_state {
        Some(error_against_f32(
            &program, &args, &executor, &bound, &inputs,
        )?)
    } else {
        None
    };
    if interrupted && times.is_empty() {
        // The first run is a measurement too: report it alone.
        times.push(first_run);
    }

    let report = Report {
        label: args.label.clone(),
        model,
        device: args.device.name(),
        threads: candle_core::utils::get_num_threads(),
        precision: if bf16 { "bf16" } else { "f32" },
        max_abs_error,
        warmup,
        iters: times.len(),
        load_seconds: load.as_secs_f64(),
        first_run_seconds: first_run,
        stats: Stats::of(times),
        peak_rss_bytes: run_inputs::peak_rss_bytes(),
        peak_anon_bytes: anon.peak(),
        inputs: inputs
            .iter()
            .map(|(name, t)| (name.clone(), t.dtype.short_name(), t.shape.clone()))
            .collect(),
        profile: None,
    };
    let mut report = report;
    if args.profile {
        report.profile = Some(pt2kit::exec::profile::Profile::of(
            &executor.profile(),
            report.iters,
            report.stats.mean,
        ));
    }
    let text = match format {
        Format::Text => report.text(),
        Format::Json => report.json(),
        Format::Csv => report.csv(),
    };
    let shown = match &args.output {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "<stdout>".to_string(),
    };
    cli::write_output(args.output.as_deref(), false, |w| {
        w.write_all(text.as_bytes())
            .map_err(|e| Error::io(&shown, e))
    })?;
    if interrupted {
        return Err(Error::new(
            pt2kit::error::ErrorKind::Interrupted,
            format!(
                "interrupted: the report covers the {} run(s) finished",
                report.iters
            ),
        ));
    }
    Ok(())
}

pub fn main() -> ExitCode {
    crate::init();
    cli::main(|a: &Args| &a.common, run)
}
