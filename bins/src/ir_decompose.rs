//! `ir-decompose`: lowers a program to the core ATen opset (keeping what a
//! back end asks to keep) and runs cleanup passes.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use pt2kit::cli::{self, CommonArgs, ProgramOutput};
use pt2kit::decompose::{self, Policy};

/// The passes this build has: `fold` with the executor (the `exec`
/// feature), the decomposition's own without.
mod passes {
    #[cfg(not(feature = "exec"))]
    pub use pt2kit::decompose::passes::{all, run};
    #[cfg(feature = "exec")]
    pub use pt2kit::exec::fold::{passes as all, run};
}
use pt2kit::Error;

/// Lower a pt2ir program to core ATen ops and clean it up
#[derive(Parser, Debug)]
#[command(name = "ir-decompose", version, long_version = cli::long_version())]
#[command(
    after_help = "Examples:\n  pt2ir model.pt2 | ir-decompose | ir2onnx -o model.onnx\n  ir-decompose model.ir --keep 'aten.convolution*' --keep aten.native_layer_norm -o model.core.ir\n  ir-decompose model.ir --only aten.linear --passes dce --stats --emit text\n  ir-decompose model.ir --no-lower --passes cse,dce -o model.cse.ir\n  ir-decompose --list"
)]
pub struct Args {
    /// The IR file to read (- or absent for standard input)
    #[arg(value_name = "IR")]
    pub input: Option<PathBuf>,
    /// Leave ops matching PATTERN intact (repeatable; globs such as 'aten.convolution*'; 'aten.linear' means every overload)
    #[arg(long, value_name = "PATTERN")]
    pub keep: Vec<String>,
    /// Apply only the decompositions of ops matching PATTERN (repeatable)
    #[arg(long, value_name = "PATTERN")]
    pub only: Vec<String>,
    /// Cleanup passes to run after lowering, in order (comma-separated; see --list; 'none' for none)
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = default_passes())]
    pub passes: Vec<String>,
    /// Run only the passes: no functionalisation or decomposition
    #[arg(long)]
    pub no_lower: bool,
    /// Fail (exit 4) when an aten op that is neither core nor kept remains
    #[arg(long)]
    pub strict: bool,
    /// Print every decomposition (source op -> ops it emits) and every pass, then exit
    #[arg(long)]
    pub list: bool,
    /// Print per-op node counts before and after to standard error
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub output: ProgramOutput,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Every pass but the opt-in ones, in order, as `--passes` takes them
/// (`dce,fold,cse,bn-fold`).
fn default_passes() -> &'static str {
    static LIST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LIST.get_or_init(|| {
        pt2kit::decompose::passes::defaults(passes::all())
            .iter()
            .map(|(n, _, _)| *n)
            .collect::<Vec<_>>()
            .join(",")
    })
}

fn list() -> String {
    let mut s = String::from(
        "decompositions (source -> ops it emits; non-core results are lowered again):\n",
    );
    for (src, results) in decompose::list() {
        s.push_str(&format!("  {src} -> {}\n", results.join(", ")));
    }
    #[cfg(feature = "exec")]
    {
        let (with, without) = pt2kit::infer::coverage(pt2kit::exec::ops::supported());
        s.push_str(&format!(
            "shape rules (checked when a tool reads IR): {} of the executor's {} ops; without one:\n",
            with.len(),
            with.len() + without.len()
        ));
        for op in &without {
            s.push_str(&format!("  {op}\n"));
        }
    }
    s.push_str("passes:\n");
    for (name, what, _) in passes::all() {
        s.push_str(&format!("  {name:<8} {what}\n"));
    }
    s
}

pub fn run(args: Args) -> pt2kit::Result<()> {
    if args.list {
        print!("{}", list());
        return Ok(());
    }
    // The fold pass runs the executor: RAYON_NUM_THREADS checked first.
    #[cfg(feature = "exec")]
    pt2kit::exec::start_threads(None)?;
    decompose::check_patterns("--keep", &args.keep)?;
    decompose::check_patterns("--only", &args.only)?;
    let mut program = cli::read_ir(args.input.as_deref())?;
    let policy = Policy {
        keep: args.keep.clone(),
        only: (!args.only.is_empty()).then(|| args.only.clone()),
        ..Policy::default()
    };
    let start = std::time::Instant::now();
    let mut report = if args.no_lower {
        decompose::Report {
            before: decompose::histogram(&program),
            ..Default::default()
        }
    } else {
        decompose::lower(&mut program, &policy)?
    };
    let pass_names: Vec<String> = args
        .passes
        .iter()
        .filter(|p| *p != "none")
        .cloned()
        .collect();
    report.passes = passes::run(&mut program, &pass_names)?;
    report.after = decompose::histogram(&program);
    report.not_core = decompose::not_core(&program, &policy);
    pt2kit::ir::validate::validate(&program)
        .map_err(|e| Error::internal(format!("the rewritten program is not valid: {e}")))?;
    // The sizes the rewrites gave their new values, held to the same shape
    // rules as the program read: one place says what a shape is.
    pt2kit::infer::check(&program, &pt2kit::infer::Limits::default())
        .map_err(|e| Error::internal(format!("the rewritten program breaks a shape rule: {e}")))?;
    if !args.no_lower && !report.not_core.is_empty() {
        let list: Vec<String> = report
            .not_core
            .iter()
            .map(|(op, nodes)| format!("{op} (nodes {})", nodes.join(", ")))
            .collect();
        let msg = format!(
            "{} op(s) remain that are neither core ATen nor kept: {}",
            list.len(),
            list.join("; ")
        );
        if args.strict {
            return Err(Error::unsupported(msg));
        }
        cli::info(format!("ir-decompose: warning: {msg}"));
    }
    cli::verbose(format!(
        "ir-decompose: {} -> {} nodes in {:.1} ms",
        report.before.values().sum::<usize>(),
        report.after.values().sum::<usize>(),
        start.elapsed().as_secs_f64() * 1e3
    ));
    if args.stats {
        eprint!("{}", report.table());
    }
    cli::emit_program(&program, &args.output)
}

pub fn main() -> ExitCode {
    crate::init();
    cli::main(|a: &Args| &a.common, run)
}
