//! `ir-diff` for users' regression tests: structural diffs of IR files and
//! tolerance reports on tensor files, exit 1 on a difference.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .current_dir(repo())
        .args(args)
        .output()
        .unwrap()
}

fn ir(dir: &Path, model: &str) -> String {
    let out = dir.join(format!("{model}.ir"));
    let o = run(
        env!("CARGO_BIN_EXE_pt2ir"),
        &[
            &format!("golden/models/{model}.pt2"),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success());
    out.to_str().unwrap().to_string()
}

#[test]
fn structural_diff_of_two_programs() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (ir(dir.path(), "mlp"), ir(dir.path(), "mlp.decomp"));
    let o = run(env!("CARGO_BIN_EXE_ir-diff"), &[&a, &a]);
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stdout.is_empty());
    let o = run(env!("CARGO_BIN_EXE_ir-diff"), &[&a, &b]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("- node linear: %linear = aten.linear.default"),
        "{text}"
    );
    assert!(
        text.contains("+ node addmm: %addmm = aten.addmm.default"),
        "{text}"
    );
    assert!(text.contains("~ node relu:"), "{text}");
    assert!(
        text.contains("dialect TRAINING") && text.contains("dialect ATEN"),
        "{text}"
    );
}

#[test]
fn weight_changes_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (ir(dir.path(), "mlp"), ir(dir.path(), "dynamic"));
    let o = run(env!("CARGO_BIN_EXE_ir-diff"), &[&a, &b]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8(o.stdout).unwrap();
    // same architecture and seed: same weights, but a symbolic batch
    assert!(!text.contains("weight fc1.weight"), "{text}");
    assert!(text.contains("s77 in [1, 64]"), "{text}");
    let (c, d) = (ir(dir.path(), "embedding"), ir(dir.path(), "cnn"));
    let text = String::from_utf8(run(env!("CARGO_BIN_EXE_ir-diff"), &[&c, &d]).stdout).unwrap();
    assert!(
        text.contains("- weight emb.weight: f32[50, 16] crc32="),
        "{text}"
    );
}

#[test]
fn tensor_reports_with_tolerances() {
    let dir = tempfile::tempdir().unwrap();
    let a = ir(dir.path(), "mlp");
    let out = dir.path().join("out.npz");
    let o = run(
        env!("CARGO_BIN_EXE_ir-run"),
        &[
            &a,
            "--inputs",
            "golden/models/mlp.inputs.npz",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success());
    let o = run(
        env!("CARGO_BIN_EXE_ir-diff"),
        &[
            out.to_str().unwrap(),
            "golden/models/mlp.expected.npz",
            "--by-position",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("mismatches 0/6"));
    // a tolerance tighter than float32 noise finds mismatches, with the worst index
    let o = run(
        env!("CARGO_BIN_EXE_ir-diff"),
        &[
            out.to_str().unwrap(),
            "golden/models/mlp.expected.npz",
            "--by-position",
            "--atol",
            "0",
            "--rtol",
            "1e-12",
        ],
    );
    let text = String::from_utf8(o.stdout).unwrap();
    if text.contains("mismatches 0/6") {
        assert_eq!(o.status.code(), Some(0));
    } else {
        assert_eq!(o.status.code(), Some(1));
        assert!(text.contains("worst at ["), "{text}");
    }
    // by name: the names differ (linear_1 vs out_0)
    let o = run(
        env!("CARGO_BIN_EXE_ir-diff"),
        &[out.to_str().unwrap(), "golden/models/mlp.expected.npz"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("linear_1: only in the first file"));
    // mixing kinds is a usage error
    let o = run(
        env!("CARGO_BIN_EXE_ir-diff"),
        &[&a, "golden/models/mlp.expected.npz"],
    );
    assert_eq!(o.status.code(), Some(2));
}
