//! Weights passed on by reference between the tools of a pipeline: into
//! the IR file a tool read, or, for weights that came inline through a
//! pipe, into the spool of the tool that read them, handed over to the
//! next pt2kit tool (`lib/src/wire/refs.rs`). A spool is made at most once
//! per pipeline; a reader that is not a pt2kit tool gets the bytes
//! inline; a writer never waits on a reader that went away.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::repo;

const DECOMPOSE: &str = env!("CARGO_BIN_EXE_ir-decompose");
const IR2ONNX: &str = env!("CARGO_BIN_EXE_ir2onnx");

/// bert, its weights inline, as one stream.
fn bert() -> (pt2kit::ir::Program, Vec<u8>) {
    let p =
        pt2kit::import::pt2::read_pt2(&repo().join("golden/models/bert.pt2"), &Default::default())
            .unwrap();
    let bytes = pt2kit::wire::encode_program(&p).unwrap();
    (p, bytes)
}

fn weight_bytes(p: &pt2kit::ir::Program) -> usize {
    p.storages.iter().map(|s| s.len()).sum()
}

/// Reads and counts.
struct Counting<R> {
    inner: R,
    n: usize,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n += k;
        Ok(k)
    }
}

/// `ir-decompose` reading a pipe (its weights spooled: every stream is
/// spooled with PT2KIT_SPOOL_BYTES=0), its stdout a pipe; the program
/// passed on as it is (no lowering, no pass: no new weights made).
fn decompose(stdin: Stdio, tmpdir: &std::path::Path) -> Child {
    Command::new(DECOMPOSE)
        .args(["--no-lower", "--passes", "none"])
        .current_dir(repo())
        .env("PT2KIT_SPOOL_BYTES", "0")
        .env("TMPDIR", tmpdir)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn feed(child: &mut Child, bytes: Vec<u8>) -> std::thread::JoinHandle<()> {
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let _ = stdin.write_all(&bytes);
    })
}

fn finished(child: Child, what: &str) {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two tools in a row after a pipe of inline weights: the first spools
/// them and hands its spool to the second, which hands it on to this
/// test (a reader that takes hand-overs): references all the way, one
/// spool (the second tool has no TMPDIR to make one in), the same
/// weights, and they stay readable after both tools have exited.
#[test]
fn a_spool_is_handed_over_once_per_pipeline() {
    let (p, bytes) = bert();
    let tmp = tempfile::tempdir().unwrap();
    let mut first = decompose(Stdio::piped(), tmp.path());
    let fed = feed(&mut first, bytes.clone());
    let nowhere = tmp.path().join("no such dir");
    let mut second = decompose(Stdio::from(first.stdout.take().unwrap()), &nowhere);
    let stdout = second.stdout.take().unwrap();
    pt2kit::wire::offer_handover_on(stdout.as_fd());
    let mut r = Counting {
        inner: stdout,
        n: 0,
    };
    let inline = bytes.len();
    let back = pt2kit::wire::read_program(&mut r, "pipe");
    fed.join().unwrap();
    finished(first, "first ir-decompose");
    finished(second, "second ir-decompose (no TMPDIR: it must not spool)");
    let back = back.unwrap();
    assert!(
        r.n + weight_bytes(&p) * 3 / 4 < inline,
        "{} bytes through the pipe, {} inline ({} of weights)",
        r.n,
        inline,
        weight_bytes(&p)
    );
    assert_eq!(back.storages.len(), p.storages.len());
    for (a, b) in p.storages.iter().zip(&back.storages) {
        assert_eq!(&a[..], &b[..]);
    }
    assert_eq!(pt2kit::text::listing(&p), pt2kit::text::listing(&back));
}

/// A reader that is not a pt2kit tool (`cat`, `tee`; here, this test
/// without the lock) gets the weights inline, and the stream stands on
/// its own once the tool has exited.
#[test]
fn a_reader_that_takes_no_hand_over_gets_the_weights_inline() {
    let (p, bytes) = bert();
    let tmp = tempfile::tempdir().unwrap();
    let mut tool = decompose(Stdio::piped(), tmp.path());
    let fed = feed(&mut tool, bytes);
    let mut out = Vec::new();
    tool.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    fed.join().unwrap();
    finished(tool, "ir-decompose");
    assert!(out.len() > weight_bytes(&p));
    let back = pt2kit::wire::read_program(&mut out.as_slice(), "file").unwrap();
    assert_eq!(back.storages.len(), p.storages.len());
}

/// A reader that takes hand-overs but goes away before it opens the
/// spool: the tool does not wait for it (it ends at once, quietly, as on
/// any broken pipe).
#[test]
fn a_reader_that_goes_away_is_not_waited_for() {
    let (_, bytes) = bert();
    let tmp = tempfile::tempdir().unwrap();
    let mut tool = decompose(Stdio::piped(), tmp.path());
    let stdout = tool.stdout.take().unwrap();
    pt2kit::wire::offer_handover_on(stdout.as_fd());
    let fed = feed(&mut tool, bytes);
    std::thread::sleep(Duration::from_millis(200));
    drop(stdout);
    fed.join().unwrap();
    let start = Instant::now();
    loop {
        if let Some(st) = tool.try_wait().unwrap() {
            assert!(st.success(), "{st:?}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the tool still waits for a reader that is gone"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An IR file read through standard input redirected from it passes its
/// weights on by reference to that file: `ir-decompose < big.ir | ir2onnx
/// --external-data` copies them once (here the same ONNX as from the file
/// by path), and a stream of references written to a file reads back while
/// the IR file is unchanged.
#[test]
fn an_ir_file_passes_its_weights_on_by_reference() {
    let (p, bytes) = bert();
    let d = tempfile::tempdir().unwrap();
    let ir = d.path().join("bert.ir");
    std::fs::write(&ir, &bytes).unwrap();
    let refs = d.path().join("refs.ir");
    let o = Command::new(DECOMPOSE)
        .args([
            "--no-lower",
            "--passes",
            "none",
            "--weights",
            "reference",
            "-o",
        ])
        .arg(&refs)
        .stdin(std::fs::File::open(&ir).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let small = std::fs::metadata(&refs).unwrap().len() as usize;
    assert!(small + weight_bytes(&p) / 2 < bytes.len(), "{small}");
    let mut data = Vec::new();
    for (name, script) in [
        (
            "a",
            "ir-decompose < bert.ir | ir2onnx --external-data -o a.onnx",
        ),
        (
            "b",
            "ir-decompose bert.ir -o core.ir && ir2onnx core.ir --external-data -o b.onnx",
        ),
        ("c", "ir2onnx refs.ir --external-data -o c.onnx"),
        ("d", "ir2onnx bert.ir --external-data -o d.onnx"),
    ] {
        let bin = std::path::Path::new(IR2ONNX).parent().unwrap();
        let o = Command::new("bash")
            .arg("-c")
            .arg(format!("set -euo pipefail; {script}"))
            .current_dir(d.path())
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        data.push(std::fs::read(d.path().join(format!("{name}.onnx.data"))).unwrap());
    }
    assert!(data[0] == data[1], "external data by reference and by path");
    assert!(
        data[2] == data[3],
        "external data from a stream of references"
    );
}
