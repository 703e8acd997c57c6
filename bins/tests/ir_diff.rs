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
    // one tensor each: a pair whatever the names (linear_1 and out_0)
    let o = run(
        env!("CARGO_BIN_EXE_ir-diff"),
        &[out.to_str().unwrap(), "golden/models/mlp.expected.npz"],
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("linear_1 ~ out_0"));
    // several tensors pair by name: names only one side has are differences
    let dir2 = tempfile::tempdir().unwrap();
    let t = pt2kit::tensorfile::read_npz(&out).unwrap().remove(0).1;
    let two = |names: [&str; 2]| {
        let p = dir2.path().join(format!("{}.npz", names.join("_")));
        let bytes =
            write_npz(&[(names[0].into(), t.clone()), (names[1].into(), t.clone())]).unwrap();
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    };
    let o = run(
        env!("CARGO_BIN_EXE_ir-diff"),
        &[&two(["x", "y"]), &two(["x", "z"])],
    );
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("y: only in the first file") && text.contains("z: only in the second file"),
        "{text}"
    );
    // mixing kinds is a usage error
    let o = run(
        env!("CARGO_BIN_EXE_ir-diff"),
        &[&a, "golden/models/mlp.expected.npz"],
    );
    assert_eq!(o.status.code(), Some(2));
}

// ------------------------------------------------------------ exactness

use pt2kit::ir::Dtype;
use pt2kit::tensorfile::{write_npy, write_npz, write_safetensors, HostTensor};

fn f32s(v: &[f32], shape: &[usize]) -> HostTensor {
    HostTensor {
        dtype: Dtype::Float32,
        shape: shape.to_vec(),
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn put(dir: &Path, name: &str, bytes: Vec<u8>) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

fn npz(dir: &Path, name: &str, t: HostTensor) -> String {
    put(dir, name, write_npz(&[("out".into(), t)]).unwrap())
}

fn diff(args: &[&str]) -> (Option<i32>, String, String) {
    let o = run(env!("CARGO_BIN_EXE_ir-diff"), args);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn tolerances_must_be_finite_and_not_negative() {
    let dir = tempfile::tempdir().unwrap();
    let a = npz(dir.path(), "a.npz", f32s(&[1.0, 2.0], &[2]));
    let b = npz(dir.path(), "b.npz", f32s(&[100.0, 2.0], &[2]));
    for bad in [
        "--atol=nan",
        "--rtol=nan",
        "--atol=-1",
        "--rtol=-0.5",
        "--atol=inf",
        "--atol=x",
    ] {
        let (code, _, err) = diff(&[&a, &b, bad]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(
            err.contains("--atol") || err.contains("--rtol"),
            "{bad}: {err}"
        );
    }
    assert_eq!(diff(&[&a, &b, "--atol=0"]).0, Some(1));
    assert_eq!(diff(&[&a, &b, "--atol=99"]).0, Some(0));
}

#[test]
fn single_tensor_files_compare_whatever_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let t = f32s(&[1.0, -2.5], &[2]);
    let npy = put(dir.path(), "x.npy", write_npy(&t).unwrap());
    let (code, out, err) = diff(&[&npy, &npy]);
    assert_eq!(code, Some(0), "{out}{err}");
    let other = put(
        dir.path(),
        "y.safetensors",
        write_safetensors(&[("logits".into(), t.clone())]).unwrap(),
    );
    let named = npz(dir.path(), "z.npz", t);
    for (a, b) in [(&npy, &other), (&other, &named), (&named, &npy)] {
        let (code, out, err) = diff(&[a, b]);
        assert_eq!(code, Some(0), "{a} {b}: {out}{err}");
        assert!(out.contains("mismatches 0/2"), "{out}");
    }
}

#[test]
fn standard_input_is_sniffed_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let t = f32s(&[1.0, 2.0], &[2]);
    let npz_path = npz(dir.path(), "e.npz", t.clone());
    for bytes in [
        write_npz(&[("o".into(), t.clone())]).unwrap(),
        write_npy(&t).unwrap(),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ir-diff"))
            .args(["-", &npz_path])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&bytes).unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0));
    }
    let (code, _, err) = diff(&["-", "-"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn directories_and_mixed_pairs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let t = npz(dir.path(), "t.npz", f32s(&[1.0], &[1]));
    let m = ir(dir.path(), "mlp");
    let (code, _, err) = diff(&[dir.path().to_str().unwrap(), &t]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is a directory"), "{err}");
    let (code, _, err) = diff(&[&m, &t]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("is an IR stream and") && err.contains("is an .npz tensor file"),
        "{err}"
    );
    let text = put(dir.path(), "notes.npz", b"hello".to_vec());
    let (code, _, err) = diff(&[&text, &t]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is text"), "{err}");
}

/// NaN equals only NaN, inf only the same inf, -0.0 equals 0.0; empty
/// tensors agree; shapes and kinds of dtype must match; float16 and
/// bfloat16 compare by value with float32.
#[test]
fn special_values_shapes_and_dtypes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let case = |name: &str, a: HostTensor, b: HostTensor| {
        let pa = npz(d, &format!("{name}.a.npz"), a);
        let pb = npz(d, &format!("{name}.b.npz"), b);
        let (code, out, err) = diff(&[&pa, &pb]);
        (code.unwrap(), format!("{out}{err}"))
    };
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    assert_eq!(
        case("nan", f32s(&[nan, 1.0], &[2]), f32s(&[nan, 1.0], &[2])).0,
        0
    );
    assert_eq!(case("nan1", f32s(&[nan], &[1]), f32s(&[1.0], &[1])).0, 1);
    assert_eq!(case("nan2", f32s(&[1.0], &[1]), f32s(&[nan], &[1])).0, 1);
    assert_eq!(
        case("inf", f32s(&[inf, -inf], &[2]), f32s(&[inf, -inf], &[2])).0,
        0
    );
    assert_eq!(case("inf1", f32s(&[inf], &[1]), f32s(&[-inf], &[1])).0, 1);
    assert_eq!(case("inf2", f32s(&[inf], &[1]), f32s(&[3e38], &[1])).0, 1);
    assert_eq!(case("zero", f32s(&[-0.0], &[1]), f32s(&[0.0], &[1])).0, 0);
    let (code, out) = case("empty", f32s(&[], &[0, 3]), f32s(&[], &[0, 3]));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("mismatches 0/0"), "{out}");
    let (code, out) = case("shape", f32s(&[1.0, 2.0], &[2]), f32s(&[1.0, 2.0], &[1, 2]));
    assert_eq!(code, 1);
    assert!(out.contains("shape [2] vs [1, 2]"), "{out}");
    let ints = HostTensor {
        dtype: Dtype::Int64,
        shape: vec![2],
        data: [1i64, 2].iter().flat_map(|x| x.to_le_bytes()).collect(),
    };
    let (code, out) = case("kinds", f32s(&[1.0, 2.0], &[2]), ints);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("different kinds"), "{out}");
    let half = |d: Dtype, v: &[f32]| HostTensor {
        dtype: d,
        shape: vec![v.len()],
        data: v
            .iter()
            .flat_map(|x| match d {
                Dtype::Float16 => half_bits(*x).to_le_bytes(),
                _ => ((x.to_bits() >> 16) as u16).to_le_bytes(),
            })
            .collect(),
    };
    let (code, out) = case(
        "f16",
        half(Dtype::Float16, &[1.5, -2.0]),
        f32s(&[1.5, -2.0], &[2]),
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = case(
        "bf16",
        half(Dtype::BFloat16, &[1.5, -2.0]),
        f32s(&[1.5, -2.0], &[2]),
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = case("bf16x", half(Dtype::BFloat16, &[1.5]), f32s(&[1.6], &[1]));
    assert_eq!(code, 1, "{out}");
}

/// float16 bits of a value exactly representable in it (the test's values).
fn half_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let mant = ((b >> 13) & 0x3ff) as u16;
    sign | ((exp as u16) << 10) | mant
}

/// `ir-run --intermediates` dumps every node's tensor in node order;
/// `ir-diff --first` names the first one that differs, and only that.
#[test]
fn intermediates_and_the_first_value_to_differ() {
    use pt2kit::tensorfile::{read_npz, write_npz};
    let dir = tempfile::tempdir().unwrap();
    let m = ir(dir.path(), "mlp.decomp");
    let dump = dir.path().join("run.npz");
    let o = run(
        env!("CARGO_BIN_EXE_ir-run"),
        &[
            &m,
            "--inputs",
            "golden/models/mlp.inputs.npz",
            "--intermediates",
            dump.to_str().unwrap(),
            "-o",
            dir.path().join("out.npz").to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let values = read_npz(&dump).unwrap();
    let names: Vec<&str> = values.iter().map(|(n, _)| n.as_str()).collect();
    // the nodes of mlp.decomp that compute tensors, in graph order
    assert_eq!(names, ["permute", "addmm", "relu", "permute_1", "addmm_1"]);
    let out = read_npz(&dir.path().join("out.npz")).unwrap();
    assert_eq!(values.last().unwrap().1.data, out[0].1.data);

    let diff = |b: &Path| {
        let o = run(
            env!("CARGO_BIN_EXE_ir-diff"),
            &[dump.to_str().unwrap(), b.to_str().unwrap(), "--first"],
        );
        (o.status.code(), String::from_utf8(o.stdout).unwrap())
    };
    let (code, text) = diff(&dump);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.starts_with("all agree: 5 tensors in both files"),
        "{text}"
    );

    // relu made wrong (and everything after it, as a wrong node would):
    // relu is named, not the later ones, and not the one before it.
    let mut wrong = values.clone();
    for (name, t) in wrong.iter_mut().skip(2) {
        let mut v = t.to_f64();
        v.iter_mut().for_each(|x| *x += 0.5);
        t.data = v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect();
        assert_eq!(t.dtype, pt2kit::ir::Dtype::Float32, "{name}");
    }
    // one value only the other side has is counted, not compared
    wrong.remove(0);
    let b = dir.path().join("wrong.npz");
    std::fs::write(&b, write_npz(&wrong).unwrap()).unwrap();
    let (code, text) = diff(&b);
    assert_eq!(code, Some(1), "{text}");
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("first to differ, after 1 that agree: relu: f32[2, 16]"),
        "{text}"
    );
    assert!(
        text.contains("4 tensors in both files (1 only in the first, 0 only in the second)"),
        "{text}"
    );

    // nothing shared: nothing compared is no agreement
    let other = dir.path().join("other.npz");
    let renamed: Vec<_> = values
        .iter()
        .map(|(n, t)| (format!("x_{n}"), t.clone()))
        .collect();
    std::fs::write(&other, write_npz(&renamed).unwrap()).unwrap();
    let (code, text) = diff(&other);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("nothing to compare"), "{text}");

    // the order is the point: only .npz keeps it
    let o = run(
        env!("CARGO_BIN_EXE_ir-run"),
        &[
            &m,
            "--random",
            "--intermediates",
            dir.path().join("x.safetensors").to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("write them to an .npz file"));
}

/// Integers compare exactly, every bit of an int64 and a uint64 (not
/// through a float64, which holds 53); a value NaN on one side only makes
/// the summary's max abs error NaN and is counted; complex values compare
/// by the modulus of their difference.
#[test]
fn integers_exactly_nan_in_the_summary_and_complex_values() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tensor = |dtype: Dtype, shape: &[usize], data: Vec<u8>| HostTensor {
        dtype,
        shape: shape.to_vec(),
        data,
    };
    let i64s = |v: &[i64]| {
        tensor(
            Dtype::Int64,
            &[v.len()],
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
    };
    let u64s = |v: &[u64]| {
        tensor(
            Dtype::Uint64,
            &[v.len()],
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
    };
    let case = |name: &str, a: HostTensor, b: HostTensor| {
        let pa = npz(d, &format!("{name}.a.npz"), a);
        let pb = npz(d, &format!("{name}.b.npz"), b);
        let (code, out, err) = diff(&["--atol", "0", "--rtol", "0", &pa, &pb]);
        (code.unwrap(), format!("{out}{err}"))
    };
    let big = 1i64 << 60;
    let (code, out) = case("i64", i64s(&[big, 5]), i64s(&[big + 1, 5]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("mismatches 1/2"), "{out}");
    assert!(
        out.contains("1152921504606846976 vs 1152921504606846977"),
        "{out}"
    );
    assert_eq!(
        case(
            "i64same",
            i64s(&[big + 1, i64::MIN]),
            i64s(&[big + 1, i64::MIN])
        )
        .0,
        0
    );
    let (code, out) = case("u64", u64s(&[u64::MAX, 1]), u64s(&[u64::MAX - 1, 1]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("mismatches 1/2"), "{out}");
    // NaN on one side: the summary says so
    let nan = f32::NAN;
    let (code, out) = case(
        "nan",
        f32s(&[nan, nan, 1.0, 2.0], &[4]),
        f32s(&[0.5, nan, 1.0, 2.0000005], &[4]),
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("max abs NaN"), "{out}");
    assert!(out.contains("(1 NaN on one side only)"), "{out}");
    // complex64: (real, imaginary) pairs
    let c64 = |v: &[(f32, f32)]| {
        tensor(
            Dtype::Complex64,
            &[v.len()],
            v.iter()
                .flat_map(|(r, i)| [r.to_le_bytes(), i.to_le_bytes()])
                .flatten()
                .collect(),
        )
    };
    assert_eq!(
        case(
            "c",
            c64(&[(1.0, 2.0), (0.0, -1.0)]),
            c64(&[(1.0, 2.0), (0.0, -1.0)])
        )
        .0,
        0
    );
    let (code, out) = case("cx", c64(&[(1.0, 2.0)]), c64(&[(1.0, 2.5)]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("max abs 5.000e-1"), "{out}");
}
