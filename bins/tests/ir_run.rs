//! `ir-run` as a user runs it: the real binaries in a pipe, input and
//! output files, soundness errors with their exit codes.

#![cfg(feature = "exec")]

mod common;

use common::{ir, repo};

fn ir_run(stdin: &[u8], args: &[&str]) -> std::process::Output {
    common::run_tool(env!("CARGO_BIN_EXE_ir-run"), stdin, args)
}

#[test]
fn npz_in_npz_out_matches_torch() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.npz");
    let o = ir_run(
        &ir("cnn.decomp"),
        &[
            "--inputs",
            "golden/models/cnn.inputs.npz",
            "-o",
            out.to_str().unwrap(),
            "--stats",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("peak RSS"));
    let ours = pt2kit::tensorfile::read_npz(&out).unwrap();
    let theirs =
        pt2kit::tensorfile::read_npz(&repo().join("golden/models/cnn.expected.npz")).unwrap();
    let (a, b) = (ours[0].1.to_f64(), theirs[0].1.to_f64());
    assert_eq!(ours[0].1.shape, theirs[0].1.shape);
    assert!(a
        .iter()
        .zip(&b)
        .all(|(x, y)| (x - y).abs() <= 1e-4 + 1e-4 * y.abs()));
}

#[test]
fn npy_inputs_safetensors_outputs_and_summary() {
    let dir = tempfile::tempdir().unwrap();
    let inputs =
        pt2kit::tensorfile::read_npz(&repo().join("golden/models/mlp.inputs.npz")).unwrap();
    let npy = dir.path().join("x.npy");
    std::fs::write(&npy, pt2kit::tensorfile::write_npy(&inputs[0].1).unwrap()).unwrap();
    let st = dir.path().join("out.safetensors");
    let arg = format!("x={}", npy.display());
    let o = ir_run(&ir("mlp"), &["-i", &arg, "-o", st.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let back = pt2kit::tensorfile::read_safetensors(&std::fs::read(&st).unwrap(), "st").unwrap();
    assert_eq!(back[0].0, "linear_1");
    let o = ir_run(&ir("mlp"), &["-i", &arg]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.starts_with("linear_1: f32[2, 3] [-0.559154"), "{text}");
}

#[test]
fn random_inputs_use_the_example_shapes() {
    let o = ir_run(&ir("dynseq"), &["--random", "--seed", "3"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8(o.stdout)
        .unwrap()
        .starts_with("sum_1: f32[2, 8]"));
}

#[test]
fn contract_violations_exit_3_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in.npz");
    common::zeros_npz(&inputs, "x", &[128, 4]);
    let out = dir.path().join("out.npz");
    let o = ir_run(
        &ir("dynamic"),
        &[
            "--inputs",
            inputs.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "ir-run: error: input x: dim 0 is 128, but s77 must be in [1, 64]\n"
    );
    assert!(!out.exists());
}

#[test]
fn bad_files_and_usage() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.npz");
    std::fs::write(&junk, b"not a zip").unwrap();
    let o = ir_run(&ir("mlp"), &["--inputs", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("junk.npz: not a zip archive"));
    let o = ir_run(&ir("mlp"), &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the model takes x"));
    let o = ir_run(b"# pt2ir listing\n", &["--random"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("a text listing"));
    let o = ir_run(&ir("mlp"), &["--random", "--device", "cuda"]);
    if !cfg!(feature = "cuda") {
        assert_eq!(o.status.code(), Some(4));
    }
}

/// One rule for where inputs come from: `--inputs` and `-i` together, each
/// name once; positional npz keys (`np.savez(f, x)`) give the inputs in
/// order; counts must be positive.
#[test]
fn input_flags_have_one_rule() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inputs =
        pt2kit::tensorfile::read_npz(&repo().join("golden/models/mlp.inputs.npz")).unwrap();
    let x = inputs[0].1.clone();
    let npy = d.join("x.npy");
    std::fs::write(&npy, pt2kit::tensorfile::write_npy(&x).unwrap()).unwrap();
    let spec = format!("x={}", npy.display());
    let mlp = ir("mlp");
    // the same name twice
    let o = ir_run(&mlp, &["-i", &spec, "-i", &spec]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("input x is given twice: by -i x="), "{err}");
    let o = ir_run(
        &mlp,
        &["--inputs", "golden/models/mlp.inputs.npz", "-i", &spec],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("by --inputs golden/models/mlp.inputs.npz and by -i"),
        "{err}"
    );
    // positional keys
    let positional = d.join("pos.npz");
    std::fs::write(
        &positional,
        pt2kit::tensorfile::write_npz(&[("arr_0".into(), x)]).unwrap(),
    )
    .unwrap();
    let o = ir_run(&mlp, &["--inputs", positional.to_str().unwrap(), "-v"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("input x is arr_0 of"), "{err}");
    // counts
    let o = ir_run(
        &mlp,
        &["--inputs", "golden/models/mlp.inputs.npz", "--repeat", "0"],
    );
    assert_eq!(o.status.code(), Some(2));
}

/// Output formats come from the extension (or --format), are settled
/// before the run, and an extension that names none is an error.
#[test]
fn output_formats_by_extension_or_flag() {
    let dir = tempfile::tempdir().unwrap();
    let mlp = ir("mlp");
    let run_to = |name: &str, extra: &[&str]| {
        let path = dir.path().join(name);
        let mut args = vec![
            "--inputs",
            "golden/models/mlp.inputs.npz",
            "-o",
            path.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = ir_run(&mlp, &args);
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            path,
        )
    };
    let (code, err, path) = run_to("out", &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no extension names no tensor format"), "{err}");
    assert!(!path.exists());
    let (code, err, _) = run_to("out.bin", &[]);
    assert_eq!(code, Some(2), "{err}");
    let (code, err, path) = run_to("out.npy", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        pt2kit::tensorfile::sniff(&std::fs::read(&path).unwrap()),
        pt2kit::tensorfile::FileKind::Npy
    );
    let (code, err, path) = run_to("out.bin", &["--format", "safetensors"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        pt2kit::tensorfile::sniff(&std::fs::read(&path).unwrap()),
        pt2kit::tensorfile::FileKind::Safetensors
    );
}

/// Inputs a valid graph cannot take: an id beyond the vocabulary (or
/// negative), an integer divisor of 0. Exit 3 with torch's meaning, never
/// a crash.
#[test]
fn impossible_inputs_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, t: pt2kit::tensorfile::HostTensor| {
        let p = dir.path().join(name);
        std::fs::write(&p, pt2kit::tensorfile::write_npy(&t).unwrap()).unwrap();
        p.to_str().unwrap().to_string()
    };
    let ints = |v: &[i64], shape: &[usize]| pt2kit::tensorfile::HostTensor {
        dtype: pt2kit::ir::Dtype::Int64,
        shape: shape.to_vec(),
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    };
    let emb = ir("embedding");
    for (id, says) in [
        (99i64, "index 99 is out of range for a dim of size 50"),
        (-1, "index -1 is out of range"),
    ] {
        let ids = write(
            &format!("ids{id}.npy"),
            ints(&[1, 2, 3, 4, 5, 6, id, 1, 2, 3, 4, 5, 6, 7], &[2, 7]),
        );
        let o = ir_run(&emb, &["-i", &format!("ids={ids}")]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert!(
            err.contains("node 'embedding'") && err.contains(says),
            "{err}"
        );
    }
    let div = std::fs::read(repo().join("golden/fallback/fb_intdiv.pt2")).unwrap();
    let ir_div = {
        let p = dir.path().join("div.pt2");
        std::fs::write(&p, div).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pt2ir"))
            .arg(&p)
            .output()
            .unwrap();
        out.stdout
    };
    let a = write("a.npy", ints(&[7, -7, 9, 5, 1], &[5]));
    let b = write("b.npy", ints(&[2, 0, 3, 1, 1], &[5]));
    let o = ir_run(&ir_div, &["-i", &format!("a={a}"), "-i", &format!("b={b}")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("integer division by zero"), "{err}");
}

/// `ir-run --state FILE` as a decode loop runs it from the shell: the
/// first call starts from the weights and writes the state, each later
/// call reads and rewrites it; after two calls the cache and the outputs
/// are torch's after two calls of the module (golden/state,
/// recipes/fixtures/state_cases.py). Misuse is refused before anything is written.
#[test]
fn state_file_carries_a_cache_across_calls() {
    let dir = tempfile::tempdir().unwrap();
    let program = common::run_ok(
        std::process::Command::new(env!("CARGO_BIN_EXE_pt2ir"))
            .current_dir(repo())
            .arg("golden/state/kv_slice.pt2"),
        "pt2ir kv_slice",
    )
    .stdout;
    let state = dir.path().join("kv.npz");
    let s = state.to_str().unwrap();
    for k in 0..2 {
        let out = dir.path().join(format!("out{k}.npz"));
        let inputs = format!("golden/state/kv_slice.step{k}.inputs.npz");
        let o = ir_run(
            &program,
            &[
                "--inputs",
                &inputs,
                "--state",
                s,
                "-o",
                out.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let close = |ours: &[(String, pt2kit::tensorfile::HostTensor)], file: &str| {
            let want = pt2kit::tensorfile::read_npz(&repo().join(file)).unwrap();
            assert_eq!(ours.len(), want.len(), "{file}");
            for ((_, a), (n, b)) in ours.iter().zip(&want) {
                assert_eq!(a.shape, b.shape, "{file} {n}");
                for (x, y) in a.to_f64().iter().zip(b.to_f64()) {
                    assert!(
                        (x - y).abs() <= 1e-5 + 1e-5 * y.abs(),
                        "{file} {n}: {x} {y}"
                    );
                }
            }
        };
        close(
            &pt2kit::tensorfile::read_npz(&out).unwrap(),
            &format!("golden/state/kv_slice.step{k}.expected.npz"),
        );
        let kept = pt2kit::tensorfile::read_npz(&state).unwrap();
        assert_eq!(kept[0].0, "cache");
        close(&kept, &format!("golden/state/kv_slice.step{k}.state.npz"));
    }
    let inputs = "golden/state/kv_slice.step0.inputs.npz";
    // the state file as the output too: exit 2, nothing written
    let before = std::fs::read(&state).unwrap();
    let o = ir_run(&program, &["--inputs", inputs, "--state", s, "-o", s]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read(&state).unwrap(), before);
    // a state of another shape, or naming no state of the program: exit 3
    let wrong = dir.path().join("wrong.npz");
    common::zeros_npz(&wrong, "cache", &[2, 4, 3]);
    let o = ir_run(
        &program,
        &["--inputs", inputs, "--state", wrong.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(3));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("state 'cache'") && e.contains("[2, 5, 3]"),
        "{e}"
    );
    common::zeros_npz(&wrong, "kache", &[2, 5, 3]);
    let o = ir_run(
        &program,
        &["--inputs", inputs, "--state", wrong.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("its state: cache"));
    // a state path that is no regular file (a directory): exit 2
    let o = ir_run(
        &program,
        &["--inputs", inputs, "--state", dir.path().to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a regular file"));
    // a program without state
    let o = ir_run(
        &ir("mlp"),
        &["--inputs", "golden/models/mlp.inputs.npz", "--state", s],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no state to carry"));
}
