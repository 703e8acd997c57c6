//! Man pages generated from the clap definitions, with the sections every
//! page shares: exit status, environment, see also.

use clap::CommandFactory;
use pt2kit::error::EXIT_CODES;

/// Every tool: its name and its clap command.
pub fn tools() -> Vec<clap::Command> {
    #[allow(unused_mut)]
    let mut tools = vec![
        crate::pt2ir::Args::command(),
        crate::ts2ir::Args::command(),
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
    "ts2ir",
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
    out.extend_from_slice(b".SH ENVIRONMENT\n");
    // the test suite's own, then what this tool reads (pt2kit::knobs)
    let knobs = pt2kit::knobs::KNOBS;
    let tests = knobs.iter().filter(|k| k.tools.is_empty());
    let tool = knobs.iter().filter(|k| k.tools.contains(&name.as_str()));
    for k in tests.chain(tool) {
        out.extend_from_slice(format!(".TP\n{}\n{}\n", k.name, roff_escape(k.doc)).as_bytes());
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
