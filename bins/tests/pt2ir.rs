//! `pt2ir` as a user runs it: the real binary, its exit codes, its error
//! messages (goldens under golden/errors/), and the Unix conventions.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn pt2ir() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pt2ir"));
    c.current_dir(repo());
    c
}

fn golden(rel: &str, actual: &str) {
    let path = repo().join(rel);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{rel} missing: UPDATE_GOLDEN=1 cargo test writes it"));
    assert_eq!(expected, actual, "{rel}");
}

/// Every broken archive fails with its documented exit code and a message
/// naming the file and member, and leaves no output file behind.
#[test]
fn bad_archives_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut names: Vec<_> = std::fs::read_dir(repo().join("golden/bad"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(names.len(), 13);
    for name in names {
        let out_file = dir.path().join("out.ir");
        let out = pt2ir()
            .arg(format!("golden/bad/{name}"))
            .arg("-o")
            .arg(&out_file)
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        let code = out.status.code().unwrap();
        assert!(code == 3 || code == 4, "{name}: exit {code}\n{stderr}");
        assert!(
            stderr.starts_with(&format!("pt2ir: error: golden/bad/{name}")),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        golden(
            &format!("golden/errors/{}.txt", name.trim_end_matches(".pt2")),
            &format!("exit {code}\n{stderr}"),
        );
        assert!(!out_file.exists(), "{name}: output written");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{name}: temp file left"
        );
    }
}

#[test]
fn missing_file_is_an_io_error_and_bad_flags_a_usage_error() {
    let out = pt2ir().arg("no/such.pt2").output().unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such.pt2"));
    let out = pt2ir().arg("--no-such-flag").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = pt2ir()
        .args(["golden/models/mlp.pt2", "--emit", "pdf"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn writes_ir_file_text_and_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let ir = dir.path().join("mlp.ir");
    let st = pt2ir()
        .args(["golden/models/mlp.pt2", "-o"])
        .arg(&ir)
        .status()
        .unwrap();
    assert!(st.success());
    let bytes = std::fs::read(&ir).unwrap();
    assert!(bytes.starts_with(b"\x89PT2IR\r\n"));
    let out = pt2ir()
        .args(["golden/models/mlp.pt2", "--emit", "text"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let listing = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        listing,
        std::fs::read_to_string(repo().join("golden/listings/mlp.txt")).unwrap()
    );
    let out = pt2ir()
        .args(["golden/models/mlp.pt2", "--emit", "yaml"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let yaml = String::from_utf8(out.stdout).unwrap();
    assert!(
        yaml.contains("torch_version:") && yaml.contains("crc32:"),
        "{yaml}"
    );
}

fn pt2ir_stdin(args: &[&str], bytes: &[u8]) -> std::process::Output {
    let mut child = pt2ir()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    child.wait_with_output().unwrap()
}

/// Standard input, named `-` or not named at all.
#[test]
fn reads_standard_input() {
    let bytes = std::fs::read(repo().join("golden/models/cnn.pt2")).unwrap();
    for args in [&["-", "--emit", "text"][..], &["--emit", "text"][..]] {
        let out = pt2ir_stdin(args, &bytes);
        assert!(out.status.success(), "{args:?}");
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            std::fs::read_to_string(repo().join("golden/listings/cnn.txt")).unwrap()
        );
    }
}

/// What is no archive is named for what it is, and the tool that reads it.
#[test]
fn other_files_are_named_for_what_they_are() {
    let ir = pt2ir()
        .args(["golden/models/mlp.pt2"])
        .output()
        .unwrap()
        .stdout;
    let out = pt2ir_stdin(&[], &ir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("not a .pt2 archive but an IR stream"), "{err}");
    for (file, says) in [
        ("golden/models/mlp.inputs.npz", "an .npz tensor file"),
        ("golden/bad/not_a_zip.pt2", "text"),
    ] {
        let out = pt2ir().arg(file).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains(says), "{file}: {err}");
    }
}

/// `pt2ir big.pt2 | head -c 10`: the reader leaves early, pt2ir exits 0 quietly.
#[test]
fn broken_pipe_ends_quietly() {
    let mut child = pt2ir()
        .arg("golden/models/transformer.decomp.pt2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 10];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut head)
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn version_names_formats_and_completions_generate() {
    let out = pt2ir().arg("--version").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    // The format the writer puts in every stream header, not a literal.
    let format = format!(
        "IR stream format: {}.{}\n",
        pt2kit::wire::FORMAT_MAJOR,
        pt2kit::wire::FORMAT_MINOR
    );
    assert!(
        text.contains("export schema major 8") && text.contains(&format),
        "{text}"
    );
    assert!(!text.contains("IR stream format: 1.0\n"), "{text}");
    assert!(text.contains("features:"), "{text}");
    for shell in ["bash", "zsh", "fish"] {
        let out = pt2ir().args(["--completions", shell]).output().unwrap();
        assert!(out.status.success());
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains("pt2ir") && script.contains("emit"),
            "{shell}"
        );
    }
}

#[test]
fn quiet_and_verbose() {
    let out = pt2ir()
        .args(["golden/models/mlp.pt2", "-v", "--emit", "text"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("3 nodes"));
    let out = pt2ir()
        .args(["golden/models/mlp.pt2", "-q", "--emit", "text"])
        .output()
        .unwrap();
    assert!(out.stderr.is_empty());
}

/// `--emit dot` draws the graph: every node, subgraphs as clusters
/// (golden/dot/cond.dot), module paths as clusters.
#[test]
fn emits_graphviz() {
    let out = pt2ir()
        .args(["golden/models/cond.pt2", "--emit", "dot"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("digraph program {") && text.trim_end().ends_with('}'));
    assert_eq!(text.matches('{').count(), text.matches('}').count());
    assert!(text.contains("subgraph cluster_g_n2_true_graph_0"));
    golden("golden/dot/cond.dot", &text);
    let out = pt2ir()
        .args(["golden/models/cnn.pt2", "--emit", "dot"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("label=\"conv\"; style=dashed;"),
        "module clusters"
    );
    assert_eq!(text.matches("\\naten.").count(), 8, "one box per node");
}

/// A weight byte flipped inside an otherwise valid archive: sizes still
/// agree, so only the CRC tells; `--verify` catches it (exit 3, no file),
/// the default (like torch's reader) does not check payload CRCs.
#[test]
fn verify_catches_corrupt_weights() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(repo().join("golden/models/mlp.pt2")).unwrap();
    let archive = pt2kit::zip::Archive::open(&repo().join("golden/models/mlp.pt2")).unwrap();
    let entry = archive
        .entries()
        .iter()
        .find(|e| e.name.ends_with("data/weights/weight_0"))
        .unwrap()
        .clone();
    let h = entry.header_offset as usize;
    let name_len = u16::from_le_bytes([bytes[h + 26], bytes[h + 27]]) as usize;
    let extra_len = u16::from_le_bytes([bytes[h + 28], bytes[h + 29]]) as usize;
    bytes[h + 30 + name_len + extra_len] ^= 0x55;
    let corrupt = dir.path().join("corrupt.pt2");
    std::fs::write(&corrupt, &bytes).unwrap();
    let out_file = dir.path().join("out.ir");
    let out = pt2ir()
        .arg(&corrupt)
        .arg("--verify")
        .arg("-o")
        .arg(&out_file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("member 'mlp/data/weights/weight_0': CRC mismatch"),
        "{stderr}"
    );
    assert!(!out_file.exists());
    let out = pt2ir()
        .arg(&corrupt)
        .arg("-o")
        .arg(&out_file)
        .output()
        .unwrap();
    assert!(out.status.success());
}
