//! `./install.sh` into a temporary PREFIX installs binaries, man pages and
//! completions (using the binaries this test run built).

use std::path::Path;
use std::process::Command;

mod common;

#[test]
fn install_sh_installs_binaries_pages_and_completions() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_pt2ir")).parent().unwrap();
    let prefix = tempfile::tempdir().unwrap();
    let mut install = Command::new("bash");
    install
        .arg(repo.join("install.sh"))
        .arg("--prefix")
        .arg(prefix.path())
        .arg("--bin-dir")
        .arg(bin_dir);
    common::run_ok(&mut install, "install.sh");
    let p = prefix.path();
    for tool in [
        "pt2ir",
        "ts2ir",
        "ir-decompose",
        "ir2onnx",
        "ir-run",
        "ir-bench",
        "ir-diff",
    ] {
        let bin = p.join("bin").join(tool);
        assert!(bin.exists(), "{tool} not installed");
        let page = std::fs::read(p.join(format!("share/man/man1/{tool}.1"))).unwrap();
        assert_eq!(
            page,
            std::fs::read(repo.join(format!("man/{tool}.1"))).unwrap()
        );
        for f in [
            format!("share/bash-completion/completions/{tool}"),
            format!("share/zsh/site-functions/_{tool}"),
            format!("share/fish/vendor_completions.d/{tool}.fish"),
        ] {
            let text = std::fs::read_to_string(p.join(&f)).unwrap();
            assert!(text.contains(tool), "{f}");
        }
        let v = Command::new(&bin).arg("--version").output().unwrap();
        assert!(v.status.success());
    }
    let bad = Command::new("bash")
        .arg(repo.join("install.sh"))
        .arg("--bogus")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// A relative `--prefix` (and `--bin-dir`) is the caller's, not the
/// repository's; `--help` is the header and nothing else.
#[test]
fn relative_prefix_is_the_callers_and_help_is_clean() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_pt2ir")).parent().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .current_dir(cwd.path())
        .arg(repo.join("install.sh"))
        .args(["--prefix", "inst", "--bin-dir"])
        .arg(bin_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(cwd.path().join("inst/bin/pt2ir").exists());
    assert!(!repo.join("inst").exists());
    let help = Command::new("bash")
        .arg(repo.join("install.sh"))
        .arg("--help")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success());
    assert!(
        text.contains("PREFIX") && !text.contains("set -euo"),
        "{text}"
    );
}
