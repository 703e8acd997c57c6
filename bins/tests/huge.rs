//! Models bigger than a window of memory: a program made here (no torch),
//! one linear layer whose weight is over 2 GiB of patterned float32, run
//! through every tool from a file and through pipes. Each process's peak
//! anonymous memory (RssAnon, sampled from /proc every 2 ms) stays within a
//! bounded window whatever the weight's size; the weights reach ONNX's
//! external data byte for byte; `ir-run` computes the product with the
//! weight mapped. `#[ignore]`d: it writes about 12 GB to the temporary
//! directory and takes a minute (`make test-big` runs it).

#![cfg(feature = "exec")]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use pt2kit::blob::Blob;
use pt2kit::decompose::edit::{Emitter, Names};
use pt2kit::ir::*;

/// Rows x columns of the weight: 2.06 GiB of float32.
const ROWS: usize = 33_000;
const COLS: usize = 16_768;
/// What a process may hold in anonymous memory: its own code and the
/// program, a few buffers, never the weight.
const WINDOW: u64 = 256 << 20;

/// The weight's element (i, j): small integers over 1024, exact in float32
/// and in any sum the test makes.
fn w(i: usize, j: usize) -> f32 {
    ((i * 7 + j * 13) % 17) as f32 / 1024.0
}

fn meta(sizes: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(Dtype::Float32, sizes)
}

/// The weight's bytes in a file of their own, mapped (this test holds no
/// copy of them either).
fn weight_blob(dir: &Path) -> Blob {
    let path = dir.join("weight.bin");
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
    let mut row = Vec::with_capacity(COLS * 4);
    for i in 0..ROWS {
        row.clear();
        for j in 0..COLS {
            row.extend_from_slice(&w(i, j).to_le_bytes());
        }
        f.write_all(&row).unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: the test's own file, not changed while mapped.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let len = map.len();
    Blob::mapped(Arc::new(map), Some(Arc::new(file)), 0..len)
}

/// `y = x W^T` (`linear`, no bias), `x: [1, COLS]`.
fn program(weight: Blob) -> Program {
    let mut p = Program::default();
    p.info.verifiers = vec!["TRAINING".into()];
    p.info.torch_version = "2.15.0".into();
    p.info.schema_major = 8;
    let input = |p: &mut Program, name: &str, m: TensorMeta, kind: InputKind| {
        p.graph.values.push(Value {
            name: name.into(),
            kind: ValueKind::Tensor(m),
        });
        let v = ValueId(p.graph.values.len() as u32 - 1);
        p.graph.inputs.push(Argument::Tensor(v));
        p.input_kinds.push(kind);
        v
    };
    let wm = meta(&[ROWS as i64, COLS as i64]);
    let wv = input(
        &mut p,
        "p_weight",
        wm.clone(),
        InputKind::Parameter("weight".into()),
    );
    p.storages.push(weight);
    p.weights.push(Weight {
        name: "weight".into(),
        kind: WeightKind::Parameter,
        meta: wm,
        storage: 0,
    });
    let xv = input(&mut p, "x", meta(&[1, COLS as i64]), InputKind::UserInput);
    let mut names = Names::of(&p.graph);
    let mut em = Emitter::new(&mut p.graph.values, &mut names, NodeMeta::default());
    let y = em
        .op(
            "aten.linear.default",
            vec![
                ("input", Argument::Tensor(xv)),
                ("weight", Argument::Tensor(wv)),
            ],
            meta(&[1, ROWS as i64]),
        )
        .unwrap();
    let nodes = em.nodes;
    p.graph.nodes.extend(nodes);
    p.graph.outputs.push(Argument::Tensor(y));
    p.output_kinds.push(OutputKind::UserOutput);
    p
}

/// Runs a shell pipeline, sampling every process's RssAnon; returns the
/// largest any one of them had. Fails the test if the pipeline fails.
fn peak_anon(script: &str, dir: &Path) -> u64 {
    let bin = Path::new(env!("CARGO_BIN_EXE_pt2ir")).parent().unwrap();
    let child = Command::new("bash")
        .arg("-c")
        .arg(format!("set -euo pipefail; {script}"))
        .current_dir(dir)
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("TMPDIR", dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (done, peak) = (done.clone(), peak.clone());
        let root = child.id();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                // bash may exec its one command: the root is a tool too
                for pid in std::iter::once(root).chain(descendants(root)) {
                    if let Some(v) = rss_anon(pid) {
                        peak.fetch_max(v, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    let out = child.wait_with_output().unwrap();
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    peak.load(Ordering::Relaxed)
}

fn rss_anon(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// A process's descendants (the tools of a pipeline), itself excluded.
fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                // the parent pid is the 2nd field after the ")" of the name
                if let Some(ppid) = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    .and_then(|s| s.parse::<u32>().ok())
                {
                    parent_of.push((pid, ppid));
                }
            }
        }
    }
    let mut out = vec![];
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(c, pp) in &parent_of {
            if pp == p && !out.contains(&c) {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

/// The weight in the external data file, byte for byte (CRC-32 of the
/// pattern against the file's bytes at the initializer's offset).
fn check_external_data(onnx: &Path) {
    use protobuf::Message;
    let model =
        pt2kit::export::onnx::proto::ModelProto::parse_from_bytes(&std::fs::read(onnx).unwrap())
            .unwrap();
    let init = &model.graph.initializer;
    assert_eq!(init.len(), 1, "one initializer");
    let loc: std::collections::HashMap<String, String> = init[0]
        .external_data
        .iter()
        .map(|e| (e.key.clone(), e.value.clone()))
        .collect();
    let offset: u64 = loc.get("offset").map_or(0, |v| v.parse().unwrap());
    let length: u64 = loc["length"].parse().unwrap();
    assert_eq!(length, (ROWS * COLS * 4) as u64);
    let data = onnx.parent().unwrap().join(&loc["location"]);
    let f = std::fs::File::open(&data).unwrap();
    let mut want = crc32fast::Hasher::new();
    let mut got = crc32fast::Hasher::new();
    let mut buf = vec![0u8; COLS * 4];
    use std::os::unix::fs::FileExt;
    for i in 0..ROWS {
        f.read_exact_at(&mut buf, offset + (i * COLS * 4) as u64)
            .unwrap();
        got.update(&buf);
        let row: Vec<u8> = (0..COLS).flat_map(|j| w(i, j).to_le_bytes()).collect();
        want.update(&row);
    }
    assert_eq!(
        got.finalize(),
        want.finalize(),
        "external data differs from the weight"
    );
}

#[test]
#[ignore]
fn a_model_over_2_gib_streams_through_every_tool_in_a_bounded_window() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = program(weight_blob(d));
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(d.join("big.ir")).unwrap());
        pt2kit::wire::write_program(&p, &mut f).unwrap();
        f.flush().unwrap();
    }
    drop(p);
    std::fs::remove_file(d.join("weight.bin")).unwrap();
    // x: ones over the first 64 columns: y[i] = sum_{j<64} w(i, j)
    let mut x = vec![0f32; COLS];
    x[..64].fill(1.0);
    let xin = pt2kit::tensorfile::HostTensor {
        dtype: Dtype::Float32,
        shape: vec![1, COLS],
        data: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    std::fs::write(
        d.join("x.npy"),
        pt2kit::tensorfile::write_npy(&xin).unwrap(),
    )
    .unwrap();

    let cases = [
        // a file, mapped
        ("ir-decompose big.ir -o core.ir", "ir-decompose of a file"),
        (
            "ir2onnx big.ir --external-data -o a.onnx",
            "ir2onnx of a file",
        ),
        // pipes: the weights spooled to a temporary file, mapped
        (
            "cat big.ir | ir-decompose | ir2onnx --external-data -o b.onnx",
            "cat | ir-decompose | ir2onnx",
        ),
        (
            "ir-decompose < core.ir > again.ir",
            "ir-decompose < file (stdin mapped)",
        ),
        // ir-run: the weight read in place
        ("ir-run big.ir -i x=x.npy -o y.npz", "ir-run of a file"),
        ("cat core.ir | ir-run -i x=x.npy -o y2.npz", "cat | ir-run"),
    ];
    let mut report = Vec::new();
    for (script, what) in cases {
        let peak = peak_anon(script, d);
        report.push(format!("{what}: peak RssAnon {} MiB", peak >> 20));
        assert!(
            peak < WINDOW,
            "{what}: {} MiB anonymous, over {} MiB\n{}",
            peak >> 20,
            WINDOW >> 20,
            report.join("\n")
        );
    }
    eprintln!("{}", report.join("\n"));
    progress_bars(d);
    check_external_data(&d.join("a.onnx"));
    check_external_data(&d.join("b.onnx"));
    for y in ["y.npz", "y2.npz"] {
        let out = pt2kit::tensorfile::read_npz(&d.join(y)).unwrap();
        let got = out[0].1.to_f64();
        assert_eq!(got.len(), ROWS);
        for (i, g) in got.iter().enumerate() {
            let want: f64 = (0..64).map(|j| w(i, j) as f64).sum();
            assert_eq!(*g, want, "{y}: row {i}");
        }
    }
}

/// On a terminal (a pty from `script`), a tool streaming gigabytes draws
/// a bar on standard error after a second; with `-q`, or off a terminal
/// (every other run of this test), none.
fn progress_bars(d: &Path) {
    let bin = Path::new(env!("CARGO_BIN_EXE_pt2ir")).parent().unwrap();
    let on_pty = |quiet: &str| {
        // a pipe: the weights spooled, then written (a few seconds)
        let cmd = format!(
            "cat big.ir | {}/ir2onnx --external-data {quiet} -o pty.onnx",
            bin.display()
        );
        let mut script = Command::new("script");
        script.args(["-qfec", &cmd, "/dev/null"]).current_dir(d);
        String::from_utf8_lossy(&common::run_ok(&mut script, &cmd).stdout).into_owned()
    };
    let shown = on_pty("");
    assert!(
        shown.contains("weights [") && shown.contains("GiB"),
        "no bar on a terminal: {shown:?}"
    );
    let quiet = on_pty("-q");
    assert!(!quiet.contains("weights ["), "a bar with -q: {quiet:?}");
    let piped = Command::new(bin.join("ir2onnx"))
        .args(["big.ir", "--external-data", "-o", "pipe.onnx"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert!(
        piped.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
}
