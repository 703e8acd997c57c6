//! Where `-o` writes, and the faults of the output path, for every tool
//! that writes a file: devices, FIFOs, symlinks, `/dev/stdout`, stdout,
//! directories, a full file system, signals, a broken pipe, concurrent
//! writers and readers, and inputs that change underneath.
//!
//! No test touches a system device: devices are made by the test itself
//! (`mknod` in a temporary directory, as root), or `/dev/null` is used
//! after checking that it is still a character device.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::repo;

const PT2IR: &str = env!("CARGO_BIN_EXE_pt2ir");
const IR2ONNX: &str = env!("CARGO_BIN_EXE_ir2onnx");
const DECOMPOSE: &str = env!("CARGO_BIN_EXE_ir-decompose");
const RUN: &str = env!("CARGO_BIN_EXE_ir-run");
const BENCH: &str = env!("CARGO_BIN_EXE_ir-bench");
const DIFF: &str = env!("CARGO_BIN_EXE_ir-diff");

fn tool(exe: &str, args: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.current_dir(repo()).args(args).stdin(Stdio::null());
    c
}

fn run(exe: &str, args: &[&str]) -> Output {
    tool(exe, args).output().unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The MLP fixture as an IR file in `dir`.
fn mlp_ir(dir: &Path) -> PathBuf {
    let p = dir.join("mlp.ir");
    let o = run(PT2IR, &["golden/models/mlp.pt2", "-o", s(&p)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    p
}

/// What each tool writes with `-o`, given the MLP IR: (tool, args before
/// `-o`). The reference bytes come from the same command into a regular file.
/// The name of each entry is also the file extension its output takes.
fn writers(ir: &Path) -> Vec<(&'static str, &'static str, Vec<String>)> {
    let ir = s(ir).to_string();
    vec![
        (
            "pt2ir.txt",
            PT2IR,
            vec![
                "golden/models/mlp.pt2".into(),
                "--emit".into(),
                "text".into(),
            ],
        ),
        ("ir2onnx.onnx", IR2ONNX, vec![ir.clone()]),
        (
            "ir-decompose.txt",
            DECOMPOSE,
            vec![ir.clone(), "--emit".into(), "text".into()],
        ),
        (
            "ir-run.npz",
            RUN,
            vec![
                ir.clone(),
                "--inputs".into(),
                "golden/models/mlp.inputs.npz".into(),
            ],
        ),
    ]
}

fn reference(exe: &str, args: &[String], dir: &Path, name: &str) -> Vec<u8> {
    let p = dir.join(format!("ref-{name}"));
    let _ = std::fs::remove_file(&p);
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.extend(["-o", s(&p)]);
    let o = run(exe, &a);
    assert!(
        o.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read(&p).unwrap()
}

/// A character device made by the test (a twin of /dev/null or /dev/full),
/// or None when not root.
fn make_device(dir: &Path, name: &str, minor: u32) -> Option<PathBuf> {
    let p = dir.join(name);
    let ok = Command::new("mknod")
        .args([s(&p), "c", "1", &minor.to_string()])
        .status()
        .is_ok_and(|st| st.success());
    ok.then_some(p)
}

fn is_char_device(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_char_device())
}

#[test]
fn a_device_is_written_through_and_stays_a_device() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    let null = match make_device(d.path(), "null", 3) {
        Some(p) => p,
        None => {
            assert!(
                is_char_device(Path::new("/dev/null")),
                "/dev/null is not a device"
            );
            eprintln!("not root: testing with /dev/null itself (checked to be a device)");
            PathBuf::from("/dev/null")
        }
    };
    for (name, exe, args) in writers(&ir) {
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.extend(["-o", s(&null)]);
        let o = run(exe, &a);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(is_char_device(&null), "{name} replaced the device");
    }
    // A full device: the write fails with exit 5, and it is still a device.
    if let Some(full) = make_device(d.path(), "full", 7) {
        for (name, exe, args) in writers(&ir) {
            let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
            a.extend(["-o", s(&full)]);
            let o = run(exe, &a);
            assert_eq!(o.status.code(), Some(5), "{name}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("No space left on device"), "{name}: {err}");
            assert!(is_char_device(&full), "{name} replaced the device");
        }
    } else {
        eprintln!("skipped the /dev/full twin: mknod needs root");
    }
    // Nothing else was left in the directory.
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_fifo_gets_the_bytes_and_stays_a_fifo() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    let fifo = d.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (name, exe, args) in writers(&ir) {
        let expected = reference(exe, &args, d.path(), name);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                std::fs::File::open(&fifo)
                    .unwrap()
                    .read_to_end(&mut got)
                    .unwrap();
                got
            })
        };
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.extend(["-o", s(&fifo)]);
        let o = run(exe, &a);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            reader.join().unwrap(),
            expected,
            "{name}: the reader's bytes"
        );
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo(),
            "{name} replaced the FIFO"
        );
    }
}

#[test]
fn a_symlink_stays_a_link_and_its_target_is_written() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    std::fs::create_dir(d.path().join("real")).unwrap();
    for (name, exe, args) in writers(&ir) {
        let expected = reference(exe, &args, d.path(), name);
        let link = d.path().join(format!("link-{name}"));
        let target = d.path().join("real").join(format!("{name}.out"));
        // A dangling link to a file that does not exist yet, then a link to
        // an existing file, through a second link.
        std::os::unix::fs::symlink(format!("real/{name}.out"), &link).unwrap();
        let link2 = d.path().join(format!("link2-{name}"));
        std::os::unix::fs::symlink(&link, &link2).unwrap();
        for l in [&link, &link2] {
            let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
            a.extend(["-o", s(l)]);
            let o = run(exe, &a);
            assert!(
                o.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(std::fs::symlink_metadata(l)
                .unwrap()
                .file_type()
                .is_symlink());
            assert!(std::fs::symlink_metadata(&target).unwrap().is_file());
            assert_eq!(std::fs::read(&target).unwrap(), expected, "{name}");
        }
    }
}

#[test]
fn external_data_goes_beside_a_symlinks_target() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    std::fs::create_dir(d.path().join("real")).unwrap();
    let link = d.path().join("m.onnx");
    std::os::unix::fs::symlink("real/model.onnx", &link).unwrap();
    let o = run(IR2ONNX, &[s(&ir), "--external-data", "-o", s(&link)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(d.path().join("real/model.onnx.data").is_file());
    assert!(!d.path().join("m.onnx.data").exists());
    // Not beside a device or a FIFO: refused, with the reason.
    let fifo = d.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let o = run(IR2ONNX, &[s(&ir), "--external-data", "-o", s(&fifo)]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("regular file"), "{err}");
}

#[test]
fn dev_stdout_and_dash_write_to_stdout() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    for (name, exe, args) in writers(&ir) {
        let expected = reference(exe, &args, d.path(), name);
        for o in ["/dev/stdout", "-"] {
            let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
            a.extend(["-o", o]);
            let out = run(exe, &a);
            assert!(
                out.status.success(),
                "{name} -o {o}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.stdout, expected, "{name} -o {o}");
        }
    }
    assert!(std::fs::symlink_metadata("/dev/stdout")
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_directory_or_a_missing_one_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    let missing = d.path().join("no/such/dir/out");
    for (name, exe, args) in writers(&ir) {
        for (target, says) in [
            (d.path().to_path_buf(), "is a directory"),
            (missing.clone(), "does not exist"),
        ] {
            let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
            a.extend(["-o", s(&target)]);
            let o = run(exe, &a);
            assert_eq!(o.status.code(), Some(5), "{name} -o {}", target.display());
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains(says), "{name}: {err}");
            assert!(err.contains(s(&target)), "{name}: {err}");
        }
    }
}

/// A 2 MiB tmpfs (needs root and a kernel that lets this process mount).
#[test]
fn a_full_file_system_leaves_nothing_behind() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    let bert = d.path().join("bert.ir");
    let o = run(
        PT2IR,
        &[
            "golden/models/bert.pt2",
            "--weights",
            "inline",
            "-o",
            s(&bert),
        ],
    );
    assert!(o.status.success());
    let mnt = d.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs", s(&mnt)])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|st| st.success());
    if !mounted {
        eprintln!("skipped: mounting a tmpfs needs root (and a mount namespace that allows it)");
        return;
    }
    let _ = ir;
    let cases: [(&str, Vec<&str>); 3] = [
        (PT2IR, vec!["golden/models/bert.pt2", "--weights", "inline"]),
        (IR2ONNX, vec![s(&bert)]),
        (DECOMPOSE, vec![s(&bert)]),
    ];
    for (exe, args) in cases {
        let out = mnt.join("out");
        let mut a = args.clone();
        a.extend(["-o", s(&out)]);
        let o = run(exe, &a);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        let empty = std::fs::read_dir(&mnt).unwrap().count() == 0;
        let _ = Command::new("umount").arg(&mnt).status();
        assert_eq!(o.status.code(), Some(5), "{exe}: {err}");
        assert!(err.contains("No space left on device"), "{exe}: {err}");
        assert!(empty, "{exe} left a file behind");
        assert!(Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs", s(&mnt)])
            .status()
            .unwrap()
            .success());
    }
    let _ = Command::new("umount").arg(&mnt).status();
    // A read-only file system: exit 5, the message names the directory
    // the temporary file was to go to.
    assert!(Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", s(&mnt)])
        .status()
        .unwrap()
        .success());
    let out = mnt.join("out.ir");
    let o = run(PT2IR, &["golden/models/mlp.pt2", "-o", s(&out)]);
    let _ = Command::new("umount").arg(&mnt).status();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(
        err.contains("creating a temporary file in")
            && err.contains(s(&mnt))
            && err.contains("Read-only file system"),
        "{err}"
    );
}

/// Starts `cmd` held at `stage` (the test hook of `pt2kit::output`);
/// returns the child and the path it announced.
// The caller waits for the child; a failed assertion ends the test process.
#[allow(clippy::zombie_processes)]
fn held(mut cmd: Command, stage: &str, release: &Path) -> (Child, PathBuf) {
    cmd.env("PT2KIT_TEST_HOLD", format!("{stage}:{}", release.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "no hold announced");
        if let Some(rest) = line
            .trim()
            .strip_prefix(&format!("pt2kit: holding at {stage} ("))
        {
            let path = PathBuf::from(rest.trim_end_matches(')'));
            // Keep draining stderr so the child never blocks on it.
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
            return (child, path);
        }
    }
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < until, "the tool did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_signal_during_a_write_removes_the_temporary_file() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    for (sig, code) in [
        (libc_sig::INT, 130),
        (libc_sig::TERM, 143),
        (libc_sig::HUP, 129),
    ] {
        for (name, exe, args) in writers(&ir) {
            let out = d.path().join(format!("{sig}-{name}"));
            std::fs::write(&out, b"the old output").unwrap();
            let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
            a.extend(["-o", s(&out)]);
            let (mut child, tmp) = held(tool(exe, &a), "commit", &d.path().join("never"));
            assert!(tmp.exists(), "{name}: the temporary file {tmp:?}");
            assert!(tmp
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!(".{sig}-{name}.pt2kit-")));
            assert!(Command::new("kill")
                .args([format!("-{sig}"), child.id().to_string()])
                .status()
                .unwrap()
                .success());
            let st = wait(&mut child);
            assert_eq!(st.code(), Some(code), "{name} on signal {sig}");
            assert!(!tmp.exists(), "{name}: {tmp:?} left behind on signal {sig}");
            assert_eq!(std::fs::read(&out).unwrap(), b"the old output");
        }
    }
}

/// Signal numbers (Linux), without a libc dependency in the tests.
mod libc_sig {
    pub const HUP: i32 = 1;
    pub const INT: i32 = 2;
    pub const TERM: i32 = 15;
}

#[test]
fn ir_bench_stops_on_sigint_and_reports_what_it_ran() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    let mut child = tool(
        BENCH,
        &[s(&ir), "--iters", "100000000", "--format", "json", "-q"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let st = wait(&mut child);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(st.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let iters = report["iters"].as_u64().unwrap();
    assert!((1..100_000_000).contains(&iters), "{iters}");
}

#[test]
fn a_broken_pipe_ends_every_tool_quietly_with_status_0() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    let big = d.path().join("bert.ir");
    assert!(run(
        PT2IR,
        &[
            "golden/models/bert.pt2",
            "--weights",
            "inline",
            "-o",
            s(&big)
        ]
    )
    .status
    .success());
    let expected = d.path().join("e.npz");
    std::fs::copy(repo().join("golden/models/mlp.expected.npz"), &expected).unwrap();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (PT2IR, vec!["golden/models/bert.pt2", "--weights", "inline"]),
        (PT2IR, vec!["golden/models/bert.pt2", "--emit", "yaml"]),
        (IR2ONNX, vec![s(&big)]),
        (DECOMPOSE, vec![s(&big), "--emit", "text"]),
        (
            RUN,
            vec![
                s(&ir),
                "--inputs",
                "golden/models/mlp.inputs.npz",
                "-o",
                "-",
            ],
        ),
        (BENCH, vec![s(&ir), "--iters", "3", "-q"]),
        (DIFF, vec![s(&big), s(&ir)]),
    ];
    for (exe, args) in cases {
        let mut child = tool(exe, &args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the tool writes.
        drop(child.stdout.take());
        let st = wait(&mut child);
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(err.is_empty(), "{exe} {args:?}: {err}");
        // ir-diff exits 1 on a difference, whether or not its report was read.
        let want = if exe == DIFF { 1 } else { 0 };
        assert_eq!(st.code(), Some(want), "{exe} {args:?}");
    }
}

#[test]
fn eight_concurrent_writers_leave_one_whole_file() {
    let d = tempfile::tempdir().unwrap();
    let models = [
        "mlp",
        "cnn",
        "bert",
        "embedding",
        "dynamic",
        "bufconst",
        "cond",
        "gpt2",
    ];
    let wholes: Vec<Vec<u8>> = models
        .iter()
        .map(|m| {
            let o = run(
                PT2IR,
                &[
                    &format!("golden/models/{m}.pt2"),
                    "--weights",
                    "inline",
                    "-o",
                    "-",
                ],
            );
            assert!(o.status.success());
            o.stdout
        })
        .collect();
    let target = d.path().join("same.ir");
    for _round in 0..3 {
        let children: Vec<Child> = models
            .iter()
            .map(|m| {
                tool(
                    PT2IR,
                    &[
                        &format!("golden/models/{m}.pt2"),
                        "--weights",
                        "inline",
                        "-o",
                        s(&target),
                    ],
                )
                .spawn()
                .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(wait(&mut c).success());
        }
        let got = std::fs::read(&target).unwrap();
        assert!(wholes.contains(&got), "the target is not one whole output");
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }
    // Eight readers of one IR file at once.
    let children: Vec<Child> = (0..8)
        .map(|_| {
            tool(IR2ONNX, &[s(&target), "-o", "-"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for o in &outs {
        assert!(o.status.success());
        assert_eq!(o.stdout, outs[0].stdout);
    }
}

#[test]
fn an_input_changed_underneath_is_refused_or_read_whole() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    let expected = run(IR2ONNX, &[s(&ir), "-o", "-"]);
    assert!(expected.status.success());
    let release = d.path().join("go");
    // Rewritten (same size, new time) while the result waits to be
    // committed: the result is refused, nothing is written.
    let out = d.path().join("m.onnx");
    let (mut child, _) = held(tool(IR2ONNX, &[s(&ir), "-o", s(&out)]), "commit", &release);
    let bytes = std::fs::read(&ir).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&ir, &bytes).unwrap();
    std::fs::write(&release, b"").unwrap();
    assert_eq!(wait(&mut child).code(), Some(5));
    assert!(!out.exists());
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "only mlp.ir and the release file: {left:?}");
    std::fs::remove_file(&release).unwrap();

    // Truncated while mapped, before it is read: a clear message, exit 5,
    // no file.
    let mut cmd = tool(IR2ONNX, &[s(&ir), "-o", s(&out)]);
    cmd.env("PT2KIT_TEST_HOLD", format!("mapped:{}", release.display()))
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("holding at mapped"), "{line}");
    std::fs::File::options()
        .write(true)
        .open(&ir)
        .unwrap()
        .set_len(0)
        .unwrap();
    std::fs::write(&release, b"").unwrap();
    let st = wait(&mut child);
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert_eq!(st.code(), Some(5), "{rest}");
    assert!(
        rest.contains("changed size while it was read") && rest.contains("--no-mmap"),
        "{rest}"
    );
    assert!(!out.exists());
    std::fs::remove_file(&release).unwrap();

    // With --no-mmap the file is read whole first: a change after that
    // does not touch the result.
    std::fs::write(&ir, &bytes).unwrap();
    let (mut child, _) = held(
        tool(IR2ONNX, &[s(&ir), "--no-mmap", "-o", s(&out)]),
        "commit",
        &release,
    );
    std::fs::write(&ir, b"gone").unwrap();
    std::fs::write(&release, b"").unwrap();
    assert!(wait(&mut child).success());
    assert_eq!(std::fs::read(&out).unwrap(), expected.stdout);
}

/// How an output names an input in [`clobber_case`].
#[derive(Clone, Copy, Debug)]
enum Alias {
    /// The input's own path.
    Same,
    /// A symlink to it.
    Symlink,
    /// A hard link to it.
    HardLink,
}

/// Every file in `dir` with its bytes (symlinks as their text).
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let bytes = if m.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .to_string_lossy()
                    .as_bytes()
                    .to_vec()
            } else {
                std::fs::read(&p).unwrap()
            };
            (name, bytes)
        })
        .collect();
    v.sort();
    v
}

/// One case: `exe` with `args`, where `{OUT}` is replaced by the output's
/// name, which is `input` itself or a link to it (created beside it as
/// `alias_name`); standard input from `stdin` if given. The tool must exit
/// 2 with one line naming both files, and leave the directory as it was,
/// byte for byte (the input intact, no temporary file, no other output).
#[allow(clippy::too_many_arguments)]
fn clobber_case(
    dir: &Path,
    what: &str,
    exe: &str,
    args: &[&str],
    stdin: Option<&Path>,
    input: &Path,
    alias: Alias,
    alias_name: &str,
) {
    let out = match alias {
        Alias::Same => input.to_path_buf(),
        Alias::Symlink => {
            let l = dir.join(alias_name);
            std::os::unix::fs::symlink(input, &l).unwrap();
            l
        }
        Alias::HardLink => {
            let l = dir.join(alias_name);
            std::fs::hard_link(input, &l).unwrap();
            l
        }
    };
    let before = snapshot(dir);
    let args: Vec<String> = args.iter().map(|a| a.replace("{OUT}", s(&out))).collect();
    let mut cmd = tool(exe, &args.iter().map(String::as_str).collect::<Vec<_>>());
    if let Some(f) = stdin {
        cmd.stdin(std::fs::File::open(f).unwrap());
    }
    let o = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let case = format!("{what} ({alias:?}): {args:?}");
    assert_eq!(o.status.code(), Some(2), "{case}: {err}");
    assert_eq!(err.lines().count(), 1, "{case}: one line: {err}");
    assert!(
        err.contains(s(&out)) && err.contains(input.file_name().unwrap().to_str().unwrap()),
        "{case}: names both files: {err}"
    );
    assert!(err.contains("nothing was written"), "{case}: {err}");
    assert_eq!(snapshot(dir), before, "{case}: the directory changed");
    if !matches!(alias, Alias::Same) {
        std::fs::remove_file(&out).unwrap();
    }
}

/// Every output-writing flag of every tool, aimed at one of the tool's
/// own inputs, directly, through a symlink and through a hard link: the
/// tool refuses before writing anything, and the input stays as it was.
#[test]
fn no_tool_writes_over_its_own_input() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let archive = dir.join("m.pt2");
    std::fs::copy(repo().join("golden/models/mlp.pt2"), &archive).unwrap();
    let ir = mlp_ir(dir);
    // A stream whose weights are references into the archive.
    let by_ref = dir.join("byref.ir");
    let o = run(
        PT2IR,
        &[s(&archive), "--weights", "reference", "-o", s(&by_ref)],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Tensor inputs: npz, npy and safetensors.
    let npz = dir.join("in.npz");
    std::fs::copy(repo().join("golden/models/mlp.inputs.npz"), &npz).unwrap();
    let tensors = pt2kit::tensorfile::read_tensors(&npz, "x").unwrap();
    let npy = dir.join("x.npy");
    std::fs::write(&npy, pt2kit::tensorfile::write_npy(&tensors[0].1).unwrap()).unwrap();
    let st = dir.join("in.safetensors");
    std::fs::write(
        &st,
        pt2kit::tensorfile::write_safetensors(&tensors).unwrap(),
    )
    .unwrap();
    // ir2onnx's external data is the input: the IR named like the data
    // file of the model written.
    let data_ir = dir.join("w.onnx.data");
    std::fs::copy(&ir, &data_ir).unwrap();
    let w_onnx = dir.join("w.onnx");

    let (a, i, r, n, y, t) = (s(&archive), s(&ir), s(&by_ref), s(&npz), s(&npy), s(&st));
    let npy_in = format!("x={y}");
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, &str, Vec<&str>, Option<&Path>, &Path)> = vec![
        ("pt2ir -o", PT2IR, vec![a, "-o", "{OUT}"], None, &archive),
        (
            "pt2ir --weights reference -o",
            PT2IR,
            vec![a, "--weights", "reference", "-o", "{OUT}"],
            None,
            &archive,
        ),
        (
            "pt2ir - -o",
            PT2IR,
            vec!["-", "-o", "{OUT}"],
            Some(&archive),
            &archive,
        ),
        (
            "pt2ir --emit text -o",
            PT2IR,
            vec![a, "--emit", "text", "-o", "{OUT}"],
            None,
            &archive,
        ),
        (
            "ir-decompose -o",
            DECOMPOSE,
            vec![i, "-o", "{OUT}"],
            None,
            &ir,
        ),
        (
            "ir-decompose < IR -o",
            DECOMPOSE,
            vec!["-o", "{OUT}"],
            Some(&ir),
            &ir,
        ),
        (
            "ir-decompose -o (the archive a reference points into)",
            DECOMPOSE,
            vec![r, "-o", "{OUT}"],
            None,
            &archive,
        ),
        ("ir2onnx -o", IR2ONNX, vec![i, "-o", "{OUT}"], None, &ir),
        (
            "ir2onnx -o (the archive a reference points into)",
            IR2ONNX,
            vec![r, "-o", "{OUT}"],
            None,
            &archive,
        ),
        (
            "ir2onnx --external-data",
            IR2ONNX,
            vec!["{OUT}", "--external-data", "-o", s(&w_onnx)],
            None,
            &data_ir,
        ),
        (
            "ir-run -o (the IR)",
            RUN,
            vec![i, "--inputs", n, "--format", "npz", "-o", "{OUT}"],
            None,
            &ir,
        ),
        (
            "ir-run -o (the archive a reference points into)",
            RUN,
            vec![r, "--inputs", n, "--format", "npz", "-o", "{OUT}"],
            None,
            &archive,
        ),
        (
            "ir-run -o (--inputs npz)",
            RUN,
            vec![i, "--inputs", n, "-o", "{OUT}"],
            None,
            &npz,
        ),
        (
            "ir-run -o (--inputs safetensors)",
            RUN,
            vec![i, "--inputs", t, "-o", "{OUT}"],
            None,
            &st,
        ),
        (
            "ir-run -o (-i npy)",
            RUN,
            vec![i, "-i", &npy_in, "--format", "npy", "-o", "{OUT}"],
            None,
            &npy,
        ),
        (
            "ir-run --intermediates",
            RUN,
            vec![i, "--inputs", n, "--intermediates", "{OUT}"],
            None,
            &npz,
        ),
        (
            "ir-bench -o (the IR)",
            BENCH,
            vec![
                i, "--iters", "1", "--warmup", "0", "--format", "json", "-o", "{OUT}",
            ],
            None,
            &ir,
        ),
        (
            "ir-bench -o (--inputs npz)",
            BENCH,
            vec![
                i, "--inputs", n, "--iters", "1", "--format", "json", "-o", "{OUT}",
            ],
            None,
            &npz,
        ),
    ];
    for (what, exe, args, stdin, input) in &cases {
        for alias in [Alias::Same, Alias::Symlink, Alias::HardLink] {
            // The alias takes the input's extension (a tool may choose its
            // format by it).
            let ext = input.extension().unwrap().to_str().unwrap();
            let alias_name = format!("alias.{ext}");
            clobber_case(dir, what, exe, args, *stdin, input, alias, &alias_name);
        }
    }
    // Nothing was written in front of the refusal: no model beside the
    // external data, no intermediates beside a refused -o.
    assert!(!w_onnx.exists());
    let inter = dir.join("inter.npz");
    let o = run(
        RUN,
        &[i, "--inputs", n, "--intermediates", s(&inter), "-o", n],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        !inter.exists(),
        "the intermediates were written before -o was refused"
    );
    // Two outputs that are one file.
    let both = dir.join("both.npz");
    let o = run(
        RUN,
        &[
            i,
            "--inputs",
            n,
            "--intermediates",
            s(&both),
            "-o",
            s(&both),
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("are the same file"), "{err}");
    assert!(!both.exists());
}

/// Standard output appended to one of the tool's inputs (`>> input`) is
/// refused too, and the input is left as it was.
#[test]
fn standard_output_appended_to_an_input_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let ir = mlp_ir(d.path());
    let before = std::fs::read(&ir).unwrap();
    for (exe, args) in [
        (DECOMPOSE, vec![s(&ir)]),
        (IR2ONNX, vec![s(&ir)]),
        (DIFF, vec![s(&ir), s(&ir)]),
    ] {
        let append = std::fs::File::options().append(true).open(&ir).unwrap();
        let o = tool(exe, &args).stdout(append).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{exe}: {err}");
        assert!(
            err.contains("standard output is redirected to the input"),
            "{err}"
        );
        assert_eq!(std::fs::read(&ir).unwrap(), before, "{exe}");
    }
}

/// `ir2onnx --external-data-in-archive` run again where its link to the
/// archive already is: nothing to do, and no temporary link left behind.
#[test]
fn a_link_to_the_archive_made_again_is_left_alone() {
    let d = tempfile::tempdir().unwrap();
    let archive = d.path().join("m.pt2");
    std::fs::copy(repo().join("golden/models/mlp.pt2"), &archive).unwrap();
    let out_dir = d.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let model = out_dir.join("m.onnx");
    for _ in 0..2 {
        let stream = run(PT2IR, &[s(&archive), "--weights", "reference", "-o", "-"]);
        assert!(stream.status.success());
        let mut child = tool(
            IR2ONNX,
            &[
                "--external-data",
                "--external-data-in-archive",
                "-o",
                s(&model),
            ],
        )
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), &stream.stdout).unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(out_dir.join("m.onnx.data"))
            .unwrap()
            .ino(),
        std::fs::metadata(&archive).unwrap().ino()
    );
}
