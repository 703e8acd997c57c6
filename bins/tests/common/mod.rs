//! Helpers for the tests of the tools that execute a program (`ir-run`,
//! `ir-bench`): fixtures, the real `pt2ir`, a tool run with a given stdin.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A fixture of golden/models converted by the real `pt2ir`.
pub fn ir(model: &str) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_pt2ir"))
        .current_dir(repo())
        .arg(format!("golden/models/{model}.pt2"))
        .output()
        .unwrap();
    succeeded(out, &format!("pt2ir {model}")).stdout
}

/// `cmd` run to its end (its output), which must have succeeded: else the
/// test fails with `what` and the command's standard error.
pub fn run_ok(cmd: &mut Command, what: &str) -> Output {
    succeeded(cmd.output().unwrap(), what)
}

/// A command's output, which must say success: else the test fails with
/// `what` and its standard error.
pub fn succeeded(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `exe` in the repository with `args` and `stdin`.
pub fn run_tool(exe: &str, stdin: &[u8], args: &[&str]) -> Output {
    let mut child = Command::new(exe)
        .current_dir(repo())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A tool that refuses its flags exits before it reads its input.
    match child.stdin.take().unwrap().write_all(stdin) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.unwrap(),
    }
    child.wait_with_output().unwrap()
}

/// Writes an .npz holding one float32 input of zeros named `name`.
pub fn zeros_npz(path: &Path, name: &str, shape: &[usize]) {
    let t = pt2kit::tensorfile::HostTensor {
        dtype: pt2kit::ir::Dtype::Float32,
        shape: shape.to_vec(),
        data: vec![0; 4 * shape.iter().product::<usize>()],
    };
    std::fs::write(
        path,
        pt2kit::tensorfile::write_npz(&[(name.into(), t)]).unwrap(),
    )
    .unwrap();
}
