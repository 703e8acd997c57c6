//! Man pages generated from the clap definitions, with the sections every
//! page shares: exit status, environment, see also.

use clap::CommandFactory;
use pt2kit::error::EXIT_CODES;

/// Every tool: its name and its clap command.
pub fn tools() -> Vec<clap::Command> {
    #[allow(unused_mut)]
    let mut tools = vec![
        crate::pt2ir::Args::command(),
        crate::ir_decompose::Args::command(),
        crate::ir2onnx::Args::command(),
        crate::ir_diff::Args::command(),
    ];
    #[cfg(feature = "exec")]
    tools.extend([
        crate::ir_run::Args::command(),
        crate::ir_bench::Args::command(),
    ]);
    tools
}

/// Variables some tools read besides UPDATE_GOLDEN: (variable, the tools
/// that read it, meaning).
const TOOL_ENVIRONMENT: &[(&str, &[&str], &str)] = &[
    (
        "RAYON_NUM_THREADS",
        &["ir-run", "ir-bench"],
        "How many CPU threads the executor's kernels split their work over; by default the physical cores. ir-bench --threads sets it.",
    ),
    (
        "PT2KIT_SPOOL_BYTES",
        &["ir-decompose", "ir2onnx", "ir-run", "ir-bench", "ir-diff"],
        "Weights read from a pipe above this many bytes (default 256 MiB) go to an unlinked temporary file in TMPDIR, mapped, not into memory.",
    ),
    (
        "TMPDIR",
        &["ir-decompose", "ir2onnx", "ir-run", "ir-bench", "ir-diff"],
        "Where weights read from a pipe are spooled (see PT2KIT_SPOOL_BYTES).",
    ),
    (
        "CANDLE_NUM_THREADS",
        &["ir-run", "ir-bench"],
        "Threads of candle's own element-wise ops; 1 unless set (its spinning workers took cores from the executor's kernels).",
    ),
    (
        "PT2KIT_NO_FUSION",
        &["ir-run", "ir-bench"],
        "Set: every node runs by itself (no element-wise chain fused into one pass, none into a convolution or a matrix product, no scale folded into a convolution's weight), for timing a run both ways. The results are the same bits but where a scale was folded (see PT2KIT_NO_SCALE_FOLD).",
    ),
    (
        "PT2KIT_NO_SCALE_FOLD",
        &["ir-run", "ir-bench"],
        "Set: a convolution whose input is scaled per channel at batch 1 (a squeeze-and-excitation's x * s) reads the product as it is made, not x with its weight's input channels scaled (which rounds differently, within 1e-6 relative).",
    ),
    (
        "PT2KIT_NO_EPILOGUE",
        &["ir-run", "ir-bench"],
        "Set: element-wise chains after a convolution or a linear layer's matrix product run as passes of their own, not inside its kernel. The results are the same bits.",
    ),
    (
        "PT2KIT_NO_SPIN",
        &["ir-run", "ir-bench"],
        "Set: the executor's threads sleep between parallel ops instead of spinning through a run.",
    ),
    (
        "PT2KIT_NO_AVX512",
        &["ir-run", "ir-bench"],
        "Set: the AVX2 + FMA kernels (or, without those, the baseline ones) even on a CPU with AVX-512F.",
    ),
    (
        "PT2KIT_NO_AVX2",
        &["ir-run", "ir-bench"],
        "Set: the baseline kernels (no AVX-512, no AVX2: the gemm crate and candle's loops), as on a CPU without either. Much slower; for testing.",
    ),
];

/// What `-o PATH` does with each kind of path, and the faults of the
/// output path (the same in every tool: `pt2kit::output`).
const OUTPUT_FILES: &[(&str, &str)] = &[
    ("-, /dev/stdout", "Standard output."),
    ("a new or regular file", "Written to a temporary file beside it (.NAME.pt2kit-XXXXXX.tmp), renamed over it once complete: a failure never leaves a partial file. An existing file keeps its permissions."),
    ("a symlink", "The same, at the link's final target; the link stays a link. ONNX external data goes beside the target."),
    ("a device or a FIFO", "Opened and written directly, never replaced. ONNX external data cannot go beside one (exit 2)."),
    ("a Unix socket", "Connected to and written."),
    ("a directory, or a path in a missing directory", "Refused, exit 5."),
    ("a full disk", "Exit 5 with the system's message (No space left on device); nothing is left behind."),
    ("SIGINT, SIGTERM, SIGHUP", "The temporary file is removed; exit 130, 143, 129. One left by SIGKILL is removed by the next run on the same target once it is a day old."),
    ("a broken pipe", "The tool ends quietly with status 0 (ir-diff still exits 1 on a difference)."),
    ("concurrent writers", "Each writes its own temporary file; the target ends as one whole output."),
    ("an input changed while read", "Input files are memory-mapped. One changed (size, time or replaced) while read makes the result refused before it is written (exit 5); one truncated underneath ends the tool with a message naming it (exit 5). --no-mmap reads inputs into memory first."),
];

pub const TOOL_NAMES: &[&str] = &[
    "pt2ir",
    "ir-decompose",
    "ir2onnx",
    "ir-run",
    "ir-bench",
    "ir-diff",
];

/// The roff text of one tool's man page.
pub fn render(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let name = cmd.get_name().to_string();
    let man = clap_mangen::Man::new(cmd.clone()).date("");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    if let Some(after) = cmd.get_after_help() {
        out.extend_from_slice(b".SH EXAMPLES\n.nf\n");
        for line in after.to_string().lines().skip(1) {
            out.extend_from_slice(roff_escape(line.trim()).as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(b".fi\n");
    }
    out.extend_from_slice(b".SH \"OUTPUT FILES\"\n");
    for (what, meaning) in OUTPUT_FILES {
        out.extend_from_slice(
            format!(".TP\n{}\n{}\n", roff_escape(what), roff_escape(meaning)).as_bytes(),
        );
    }
    out.extend_from_slice(b".SH \"EXIT STATUS\"\n");
    for (code, meaning) in EXIT_CODES {
        out.extend_from_slice(format!(".TP\n{code}\n{}\n", roff_escape(meaning)).as_bytes());
    }
    out.extend_from_slice(b".SH ENVIRONMENT\n.TP\nUPDATE_GOLDEN\nOnly for the test suite: rewrite golden files instead of comparing.\n.TP\nPT2KIT_TEST_HOLD\nOnly for the test suite: stop while writing an output (STAGE:FILE), to check what an interrupted write leaves.\n");
    for (var, tools, meaning) in TOOL_ENVIRONMENT {
        if tools.contains(&name.as_str()) {
            out.extend_from_slice(format!(".TP\n{var}\n{}\n", roff_escape(meaning)).as_bytes());
        }
    }
    out.extend_from_slice(
        b".PP\nNo other variables are read. Errors go to standard error as \\fINAME: error: MESSAGE\\fR, naming the file, archive member, node or weight concerned.\n",
    );
    out.extend_from_slice(b".SH \"SEE ALSO\"\n");
    let others: Vec<String> = TOOL_NAMES
        .iter()
        .filter(|t| **t != name)
        .map(|t| format!("\\fB{t}\\fR(1)"))
        .collect();
    out.extend_from_slice(others.join(", ").as_bytes());
    out.push(b'\n');
    man.render_version_section(&mut out)?;
    Ok(out)
}

fn roff_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('-', "\\-")
}
