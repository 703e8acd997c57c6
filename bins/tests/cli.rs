//! Conventions every tool shares, checked on every tool: parser errors in
//! the documented `TOOL: error:` form with exit 2.

use std::process::Command;

const TOOLS: &[(&str, &str)] = &[
    ("pt2ir", env!("CARGO_BIN_EXE_pt2ir")),
    ("ts2ir", env!("CARGO_BIN_EXE_ts2ir")),
    ("ir-decompose", env!("CARGO_BIN_EXE_ir-decompose")),
    ("ir2onnx", env!("CARGO_BIN_EXE_ir2onnx")),
    ("ir-diff", env!("CARGO_BIN_EXE_ir-diff")),
    ("ir-run", env!("CARGO_BIN_EXE_ir-run")),
    ("ir-bench", env!("CARGO_BIN_EXE_ir-bench")),
];

#[test]
fn parser_errors_have_the_documented_form() {
    for (name, exe) in TOOLS {
        let out = Command::new(exe).arg("--no-such-flag").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.starts_with(&format!(
                "{name}: error: unexpected argument '--no-such-flag'"
            )),
            "{name}: {err}"
        );
        assert!(err.contains("Usage:"), "{name}: {err}");
        // --help still goes to stdout with exit 0
        let out = Command::new(exe).arg("--help").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage:"),
            "{name}"
        );
    }
}

/// `-v` says what was done and its timings, in every tool, on stderr.
#[test]
fn verbose_says_more_in_every_tool() {
    let dir = tempfile::tempdir().unwrap();
    let ir = dir.path().join("m.ir");
    let out = Command::new(TOOLS[0].1)
        .current_dir(repo())
        .args(["golden/models/mlp.pt2", "-o", ir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let ir = ir.to_str().unwrap();
    let o = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "pt2ir",
            vec!["golden/models/mlp.pt2".into(), "-o".into(), o("a.ir")],
        ),
        ("ir-decompose", vec![ir.into(), "-o".into(), o("b.ir")]),
        ("ir2onnx", vec![ir.into(), "-o".into(), o("c.onnx")]),
        ("ir-diff", vec![ir.into(), ir.into()]),
        (
            "ir-run",
            vec![ir.into(), "--random".into(), "-o".into(), o("d.npz")],
        ),
        (
            "ir-bench",
            vec![
                ir.into(),
                "--iters".into(),
                "1".into(),
                "-o".into(),
                o("e.json"),
            ],
        ),
    ];
    for (name, args) in cases {
        let exe = TOOLS.iter().find(|(n, _)| *n == name).unwrap().1;
        let plain = Command::new(exe)
            .current_dir(repo())
            .args(&args)
            .output()
            .unwrap();
        let loud = Command::new(exe)
            .current_dir(repo())
            .args(&args)
            .arg("-v")
            .output()
            .unwrap();
        assert!(plain.status.success() && loud.status.success(), "{name}");
        let (p, l) = (
            String::from_utf8_lossy(&plain.stderr),
            String::from_utf8_lossy(&loud.stderr),
        );
        assert!(l.len() > p.len(), "{name}: -v added nothing: {l}");
        assert!(l.contains(&format!("{name}: ")), "{name}: {l}");
    }
}

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}
