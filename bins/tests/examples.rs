//! What the docs say is what the tools do: every command example in
//! README.md, in docs/*.md and in each tool's `--help` (the man pages' EXAMPLES are the
//! same text, rendered from the same clap definitions) runs here, as
//! written, in a directory holding files under the names the examples use
//! (`model.pt2` is the shipped MLP, `inputs.npz` its inputs, ...), with the
//! tools of this build first on PATH. Each must exit 0 (or the status its
//! comment names: `# ... exit 1 ...`); an example shown with its output
//! (`$ command` then the lines it prints) must print them.
//!
//! A few examples are not run here, each for a reason printed by the test
//! and listed in [`NOT_HERE`]: they install, recurse into `make test`, or
//! change the shell. Examples that need torch run in `make test-recipes`.

#![cfg(feature = "exec")]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Examples not run by this test, and where they are checked instead.
const NOT_HERE: &[(&str, &str)] = &[
    (
        "./install.sh",
        "installs into ~/.local: bins/tests/install.rs runs install.sh into a temporary prefix",
    ),
    (
        "export PATH=",
        "changes the shell, nothing to run: the examples here have this build's tools on PATH",
    ),
    ("make test", "the test command itself"),
    ("make ", "a make target: CI and make test run them"),
    ("python ", "needs torch: make test-recipes"),
];

const TOOLS: &[&str] = &[
    "pt2ir",
    "ts2ir",
    "ir-decompose",
    "ir2onnx",
    "ir-run",
    "ir-bench",
    "ir-diff",
];

/// A directory with every file the examples name.
fn sandbox() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r = repo();
    for link in ["golden", "recipes"] {
        std::os::unix::fs::symlink(r.join(link), d.join(link)).unwrap();
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_pt2ir")).parent().unwrap();
    let models = r.join("golden/models");
    std::fs::copy(models.join("mlp.pt2"), d.join("model.pt2")).unwrap();
    // a traced TorchScript archive and its example inputs (ts2ir)
    let ts = r.join("golden/ts");
    std::fs::copy(ts.join("mlp_traced.pt"), d.join("model.pt")).unwrap();
    std::fs::copy(ts.join("mlp_traced.inputs.npz"), d.join("model.inputs.npz")).unwrap();
    let pt2ir = |from: &Path, to: &str| {
        let ok = Command::new(bin.join("pt2ir"))
            .arg(from)
            .arg("-o")
            .arg(d.join(to))
            .status()
            .unwrap()
            .success();
        assert!(ok, "{to}");
    };
    for name in ["model.ir", "m.ir", "old.ir", "a.ir", "b.ir", "big.ir"] {
        pt2ir(&models.join("mlp.pt2"), name);
    }
    pt2ir(&models.join("mlp.decomp.pt2"), "new.ir");
    // a decoder with its KV cache in buffers (program state), and a step's inputs
    let state = r.join("golden/state");
    pt2ir(&state.join("hf_llama_static_cache.pt2"), "decoder.ir");
    std::fs::copy(
        state.join("hf_llama_static_cache.step0.inputs.npz"),
        d.join("step.npz"),
    )
    .unwrap();
    let inputs = pt2kit::tensorfile::read_npz(&models.join("mlp.inputs.npz")).unwrap();
    let expected = pt2kit::tensorfile::read_npz(&models.join("mlp.expected.npz")).unwrap();
    let write = |name: &str, bytes: Vec<u8>| std::fs::write(d.join(name), bytes).unwrap();
    write(
        "inputs.npz",
        pt2kit::tensorfile::write_npz(&inputs).unwrap(),
    );
    write(
        "in.safetensors",
        pt2kit::tensorfile::write_safetensors(&inputs).unwrap(),
    );
    write(
        "x.npy",
        pt2kit::tensorfile::write_npy(&inputs[0].1).unwrap(),
    );
    write(
        "expected.npz",
        pt2kit::tensorfile::write_npz(&expected).unwrap(),
    );
    write(
        "outputs.npz",
        pt2kit::tensorfile::write_npz(&expected).unwrap(),
    );
    write(
        "out.safetensors",
        pt2kit::tensorfile::write_safetensors(&expected).unwrap(),
    );
    // ONNX Runtime's intermediates (recipes/run/ort_run.py, a python line not
    // run here): ir-run's stand in, so that `ir-diff run.npz ort.npz
    // --first` has its file; make test compares the real ones
    // (recipes/checks/check_intermediates.py).
    let ok = Command::new(bin.join("ir-run"))
        .arg(d.join("m.ir"))
        .arg("--inputs")
        .arg(d.join("inputs.npz"))
        .arg("--intermediates")
        .arg(d.join("ort.npz"))
        .arg("-q")
        .status()
        .unwrap()
        .success();
    assert!(ok, "ort.npz");
    // the dynamic model's batch dim is in [1, 64]: 128 rows break its contract
    let big = pt2kit::tensorfile::HostTensor {
        dtype: pt2kit::ir::Dtype::Float32,
        shape: vec![128, 4],
        data: vec![0; 128 * 4 * 4],
    };
    write("x_128.npy", pt2kit::tensorfile::write_npy(&big).unwrap());
    dir
}

struct Example {
    source: String,
    command: String,
    /// Lines the command prints (on stdout or stderr), for `$ ` examples.
    prints: Vec<String>,
}

/// The Markdown files whose examples run: README.md and docs/*.md.
fn documents() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".to_string());
    docs
}

/// The examples of the README and docs/: indented code lines that start
/// with a tool (or `cat`, `$ `); a `$ ` line's following lines are its
/// output.
fn readme_examples() -> Vec<Example> {
    documents()
        .iter()
        .flat_map(|doc| examples_of(doc))
        .collect()
}

/// The examples of one Markdown file (`doc`, relative to the repository).
fn examples_of(doc: &str) -> Vec<Example> {
    let text = std::fs::read_to_string(repo().join(doc)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let starts = |t: &str| {
        TOOLS
            .iter()
            .any(|tool| t.starts_with(&format!("{tool} ")) || t == *tool)
            || t.starts_with("cat ")
            || t.starts_with("./install.sh")
            || t.starts_with("export PATH=")
            || t.starts_with("make ")
            || t.starts_with("python ")
            || t.starts_with("PREFIX=")
    };
    while i < lines.len() {
        let line = lines[i];
        if let Some(code) = line.strip_prefix("    ") {
            let code = code.trim();
            if let Some(cmd) = code.strip_prefix("$ ") {
                let mut prints = Vec::new();
                while i + 1 < lines.len()
                    && lines[i + 1].starts_with("    ")
                    && !lines[i + 1].trim().starts_with("$ ")
                    && !lines[i + 1].trim().is_empty()
                {
                    i += 1;
                    prints.push(lines[i].trim().to_string());
                }
                out.push(Example {
                    source: format!("{doc}:{}", i + 1),
                    command: cmd.to_string(),
                    prints,
                });
            } else if starts(code) {
                out.push(Example {
                    source: format!("{doc}:{}", i + 1),
                    command: code.to_string(),
                    prints: Vec::new(),
                });
            }
        }
        i += 1;
    }
    out
}

/// Each tool's `--help` examples (the man pages' EXAMPLES too).
fn help_examples() -> Vec<Example> {
    let bin = Path::new(env!("CARGO_BIN_EXE_pt2ir")).parent().unwrap();
    let mut out = Vec::new();
    for tool in TOOLS {
        let help = Command::new(bin.join(tool)).arg("--help").output().unwrap();
        let text = String::from_utf8(help.stdout).unwrap();
        let examples = text
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{tool} --help has no examples"));
        for line in examples.lines().filter(|l| l.starts_with("  ")) {
            out.push(Example {
                source: format!("{tool} --help"),
                command: line.trim().to_string(),
                prints: Vec::new(),
            });
        }
    }
    out
}

fn run(example: &Example, dir: &Path) -> Result<(), String> {
    let bin = Path::new(env!("CARGO_BIN_EXE_pt2ir")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // `dot` (graphviz) draws the DOT output where it is installed; without
    // it the example's own part (the DOT text) is what is checked.
    let mut command = example.command.clone();
    let no_dot = Command::new("sh")
        .args(["-c", "command -v dot"])
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true);
    if no_dot {
        command = command.replace("| dot -Tsvg > model.svg", "> model.dot");
    }
    let out = Command::new("bash")
        .args(["-o", "pipefail", "-c", &command])
        .current_dir(dir)
        .env("PATH", path)
        .env("PAGER", "cat")
        .env_remove("RUST_BACKTRACE")
        .output()
        .map_err(|e| e.to_string())?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // `# ... exit N ...` in the example's comment: the status it documents.
    let want = example
        .command
        .split_once('#')
        .and_then(|(_, note)| note.split("exit ").nth(1))
        .and_then(|n| n.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .unwrap_or(0);
    if example.prints.is_empty() {
        if out.status.code() != Some(want) {
            return Err(format!("exit {:?}, not {want}: {said}", out.status.code()));
        }
    } else {
        for line in &example.prints {
            if !said.contains(line.as_str()) {
                return Err(format!("does not print {line:?}: {said}"));
            }
        }
    }
    Ok(())
}

#[test]
fn every_documented_example_runs_as_written() {
    let dir = sandbox();
    let mut failures = Vec::new();
    let mut ran = 0;
    for example in readme_examples().into_iter().chain(help_examples()) {
        if let Some((_, why)) = NOT_HERE
            .iter()
            .find(|(start, _)| example.command.starts_with(start))
        {
            println!(
                "not run here: {} ({}): {why}",
                example.command, example.source
            );
            continue;
        }
        ran += 1;
        if let Err(e) = run(&example, dir.path()) {
            failures.push(format!("{}: {}\n  {e}", example.source, example.command));
        }
    }
    println!("{ran} examples ran");
    assert!(ran >= 40, "only {ran} examples found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
