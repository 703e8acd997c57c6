//! `ir-decompose` as a user runs it: in a pipe between `pt2ir` and
//! `ir-run`, with its policy flags, reports and errors.

#![cfg(feature = "exec")]

mod common;

use common::{ir, repo, run_tool};

fn decompose(stdin: &[u8], args: &[&str]) -> std::process::Output {
    run_tool(env!("CARGO_BIN_EXE_ir-decompose"), stdin, args)
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn pipeline_output_runs_and_matches_torch() {
    let o = decompose(&ir("cnn"), &["--stats"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stderr(&o);
    // The per-op table: conv2d 2 in, 0 out; convolution 0 in, 1 out after
    // the batch norm is folded into the first.
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["aten.conv2d.default", "2", "0"]),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["aten.convolution.default", "0", "2"]),
        "{table}"
    );
    assert!(table.contains("bn-fold: 1"), "{table}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.npz");
    let run = run_tool(
        env!("CARGO_BIN_EXE_ir-run"),
        &o.stdout,
        &[
            "--inputs",
            "golden/models/cnn.inputs.npz",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let ours = pt2kit::tensorfile::read_npz(&out).unwrap();
    let theirs =
        pt2kit::tensorfile::read_npz(&repo().join("golden/models/cnn.expected.npz")).unwrap();
    let (a, b) = (ours[0].1.to_f64(), theirs[0].1.to_f64());
    assert!(a
        .iter()
        .zip(&b)
        .all(|(x, y)| (x - y).abs() <= 1e-4 + 1e-4 * y.abs()));
}

#[test]
fn keep_only_strict_and_text_output() {
    let o = decompose(
        &ir("cnn"),
        &["--keep", "aten.conv*", "--passes", "dce", "--emit", "text"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("aten.conv2d.default") && !text.contains("aten.linear.default"),
        "{text}"
    );
    assert!(text.contains("dialect ATEN"), "{text}");

    // --only linear leaves conv2d and batch_norm: a warning, or with
    // --strict exit 4 naming the ops and nodes.
    let o = decompose(&ir("cnn"), &["--only", "aten.linear", "--emit", "text"]);
    assert!(o.status.success());
    assert!(
        stderr(&o).contains("warning")
            && stderr(&o).contains("aten.conv2d.default (nodes conv2d, conv2d_1)"),
        "{}",
        stderr(&o)
    );
    let o = decompose(&ir("cnn"), &["--only", "aten.linear", "--strict"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .starts_with("ir-decompose: error: 5 op(s) remain that are neither core ATen nor kept"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn passes_alone_and_list() {
    let o = decompose(
        &ir("mlp"),
        &["--no-lower", "--passes", "cse,dce", "--stats"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("aten.linear.default       2       2"),
        "{}",
        stderr(&o)
    );
    let o = decompose(b"", &["--list"]);
    assert!(o.status.success());
    let list = String::from_utf8(o.stdout).unwrap();
    assert!(
        list.contains("aten.linear.default -> aten.permute.default, aten.addmm.default"),
        "{list}"
    );
    for pass in ["dce", "fold", "cse", "bn-fold"] {
        assert!(list.contains(&format!("  {pass} ")), "{list}");
    }
}

#[test]
fn errors_have_exit_codes_and_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model.core.ir");
    let o = decompose(b"not an IR stream", &["-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(!out.exists());
    let o = decompose(
        &ir("mlp"),
        &["--passes", "dce,nope", "-o", out.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown pass \"nope\""),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    let o = decompose(&ir("mlp"), &["-o", out.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(std::fs::read(&out).unwrap().starts_with(b"\x89PT2IR\r\n"));
}

/// Op patterns must name an op torch knows; a miss suggests names, and the
/// default --passes shown in --help can be pasted back.
#[test]
fn op_patterns_are_checked_and_the_default_passes_paste_back() {
    for (flag, pattern, hint) in [
        ("--keep", "linear", "did you mean"),
        ("--keep", "aten.[", "names no op"),
        ("--only", "aten.nonexistent", "names no op"),
    ] {
        let o = decompose(&ir("mlp"), &[flag, pattern, "-o", "-"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{pattern}: {err}");
        assert!(err.contains(hint) && err.contains(pattern), "{err}");
    }
    let o = decompose(
        &ir("mlp"),
        &[
            "--keep",
            "aten.conv*",
            "--only",
            "aten.linear",
            "--emit",
            "text",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_ir-decompose"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let default = help
        .split("[default: ")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .expect("a default for --passes");
    let o = decompose(&ir("mlp"), &["--passes", default, "--emit", "text"]);
    assert!(
        o.status.success(),
        "{default}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
