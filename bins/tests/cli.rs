//! Conventions every tool shares, checked on every tool: parser errors in
//! the documented `TOOL: error:` form with exit 2.

use std::process::Command;

const TOOLS: &[(&str, &str)] = &[
    ("pt2ir", env!("CARGO_BIN_EXE_pt2ir")),
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
