//! Test helpers: fixture paths and golden-file comparison
//! (`UPDATE_GOLDEN=1 cargo test` rewrites the goldens).

#![allow(dead_code)]

pub mod build;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The committed fixtures: every archive in golden/models and golden/legacy.
pub fn fixtures() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["golden/models", "golden/legacy"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "pt2") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 24,
        "expected the committed fixtures, found {}",
        out.len()
    );
    out
}

/// The committed fixtures of golden/models (both dialects).
pub fn model_fixtures() -> Vec<PathBuf> {
    let dir = repo().join("golden/models");
    fixtures()
        .into_iter()
        .filter(|p| p.starts_with(&dir))
        .collect()
}

/// The input sets recorded for a fixture (`mlp.pt2` or `mlp.decomp.pt2`):
/// (suffix, inputs .npz, torch's outputs .npz), the example and, where
/// there is one, the alternate (`.alt`).
pub fn input_sets(pt2: &Path) -> Vec<(String, PathBuf, PathBuf)> {
    let name = stem(pt2);
    let model = name.trim_end_matches(".decomp");
    let dir = pt2.parent().unwrap();
    ["", ".alt", ".alt2"]
        .iter()
        .map(|set| {
            (
                set.to_string(),
                dir.join(format!("{model}{set}.inputs.npz")),
                dir.join(format!("{model}{set}.expected.npz")),
            )
        })
        .filter(|(_, inputs, _)| inputs.exists())
        .collect()
}

/// The models `make big` exports into golden/big (not committed).
pub const BIG_MODELS: &[&str] = &[
    "resnet18",
    "resnet50",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "convnext_tiny",
];

/// Archives made by `make big` (not committed).
pub fn big_fixtures() -> Vec<PathBuf> {
    let dir = repo().join("golden/big");
    let mut out: Vec<PathBuf> = BIG_MODELS
        .iter()
        .flat_map(|m| [format!("{m}.pt2"), format!("{m}.decomp.pt2")])
        .map(|n| dir.join(n))
        .collect();
    for p in &out {
        assert!(
            p.exists(),
            "{} is missing: run `make big` first",
            p.display()
        );
    }
    out.sort();
    out
}

/// `mlp.decomp.pt2` -> `mlp.decomp`
pub fn stem(p: &Path) -> String {
    p.file_name()
        .unwrap()
        .to_string_lossy()
        .trim_end_matches(".pt2")
        .to_string()
}

/// Compares text with a golden file, or rewrites it under UPDATE_GOLDEN.
/// Returns a description of the mismatch, if any.
pub fn check_golden(rel: &str, actual: &str) -> Option<String> {
    let path = repo().join(rel);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return None;
    }
    let expected = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(_) => {
            return Some(format!(
                "{rel}: golden file missing (UPDATE_GOLDEN=1 cargo test writes it)"
            ))
        }
    };
    if expected == actual {
        return None;
    }
    let line = expected
        .lines()
        .zip(actual.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(expected.lines().count().min(actual.lines().count()));
    Some(format!(
        "{rel}: differs from line {}:\n  golden: {:?}\n  actual: {:?}",
        line + 1,
        expected.lines().nth(line),
        actual.lines().nth(line)
    ))
}

pub fn read(p: &Path) -> pt2kit::ir::Program {
    pt2kit::import::pt2::read_pt2(p, &pt2kit::import::pt2::ImportOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Tolerances: float32/float64 atol = rtol = 1e-4; half precision is
/// compared after rounding, so its tolerance is its own resolution.
pub fn tolerance(dtype: pt2kit::ir::Dtype) -> f64 {
    use pt2kit::ir::Dtype;
    match dtype {
        Dtype::BFloat16 => 1e-2,
        Dtype::Float16 => 1e-3,
        d if d.is_floating() => 1e-4,
        _ => 0.0,
    }
}

/// Our outputs against torch's, in order: shapes, integer dtypes exactly,
/// values within [`tolerance`], NaN where torch has NaN.
pub fn compare(
    what: &str,
    ours: &[(String, pt2kit::tensorfile::HostTensor)],
    expected: &[(String, pt2kit::tensorfile::HostTensor)],
) -> Vec<String> {
    compare_with_steps(what, ours, expected, &BTreeMap::new())
}

/// The quantization step of each output of a PT2E int8 fixture that a
/// dequantize makes (`quant_steps` in its meta.json, by output key
/// `out_0`, ...; `recipes/fixtures/zoo.py`): none for other fixtures.
pub fn quant_steps(pt2: &Path) -> BTreeMap<String, f64> {
    let name = stem(pt2);
    let meta = pt2
        .parent()
        .unwrap()
        .join(format!("{}.meta.json", name.trim_end_matches(".decomp")));
    let Ok(text) = std::fs::read_to_string(meta) else {
        return BTreeMap::new();
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.get("quant_steps")
        .and_then(|s| s.as_object())
        .map(|m| {
            m.iter()
                .map(|(k, s)| (k.clone(), s.as_f64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

/// [`compare`], where a float output that a PT2E model dequantizes
/// (`steps`, by output key) may also be one quantization step away: a
/// value on a rounding tie goes either way under float32 ulps (a
/// summation order), and moves its output one step.
pub fn compare_with_steps(
    what: &str,
    ours: &[(String, pt2kit::tensorfile::HostTensor)],
    expected: &[(String, pt2kit::tensorfile::HostTensor)],
    steps: &BTreeMap<String, f64>,
) -> Vec<String> {
    let mut failures = Vec::new();
    if ours.len() != expected.len() {
        failures.push(format!(
            "{what}: {} outputs, torch has {}",
            ours.len(),
            expected.len()
        ));
        return failures;
    }
    for ((name, a), (key, b)) in ours.iter().zip(expected) {
        if a.shape != b.shape {
            failures.push(format!(
                "{what}: {name} ({key}): shape {:?}, torch {:?}",
                a.shape, b.shape
            ));
            continue;
        }
        if a.dtype.is_complex() || b.dtype.is_complex() {
            // complex: the same dtype, each value within the tolerance of
            // its parts' dtype by the modulus of the difference
            if a.dtype != b.dtype {
                failures.push(format!(
                    "{what}: {name}: dtype {}, torch {}",
                    a.dtype.torch_name(),
                    b.dtype.torch_name()
                ));
                continue;
            }
            let tol = tolerance(a.dtype.real_part());
            let (x, y) = (a.complex_parts(), b.complex_parts());
            let worst = x
                .chunks_exact(2)
                .zip(y.chunks_exact(2))
                .map(|(p, q)| {
                    let d = (p[0] - q[0]).hypot(p[1] - q[1]);
                    (d - tol * q[0].hypot(q[1]), d)
                })
                .fold((f64::MIN, 0.0), |acc, v| if v.0 > acc.0 { v } else { acc });
            let nan = |v: &[f64]| v[0].is_nan() || v[1].is_nan();
            if worst.0 > tol
                || x.chunks_exact(2)
                    .zip(y.chunks_exact(2))
                    .any(|(p, q)| nan(p) != nan(q))
            {
                failures.push(format!(
                    "{what}: {name}: max abs error {:.3e} (tolerance {tol:e})",
                    worst.1
                ));
            }
            continue;
        }
        let tol = tolerance(a.dtype);
        let step = steps.get(key).copied().unwrap_or(0.0);
        if !a.dtype.is_floating() && a.dtype != b.dtype {
            failures.push(format!(
                "{what}: {name}: dtype {}, torch {}",
                a.dtype.torch_name(),
                b.dtype.torch_name()
            ));
        }
        if !a.dtype.is_floating() {
            // integers exactly (a float64 holds 53 bits of an int64)
            if let Some(i) = (0..a.numel()).find(|&i| a.int_at(i) != b.int_at(i)) {
                failures.push(format!(
                    "{what}: {name}: element {i} is {}, torch {}",
                    a.int_at(i),
                    b.int_at(i)
                ));
            }
            continue;
        }
        let (x, y) = (a.to_f64(), b.to_f64());
        let worst = x
            .iter()
            .zip(&y)
            .map(|(p, q)| ((p - q).abs() - tol * q.abs(), (p - q).abs()))
            .fold((f64::MIN, 0.0), |acc, v| if v.0 > acc.0 { v } else { acc });
        if worst.0 > tol + step || x.iter().zip(&y).any(|(p, q)| p.is_nan() != q.is_nan()) {
            let plus = if step > 0.0 {
                format!(" + one quantization step {step:e}")
            } else {
                String::new()
            };
            failures.push(format!(
                "{what}: {name}: max abs error {:.3e} (tolerance {tol:e}{plus})",
                worst.1
            ));
        }
    }
    failures
}

/// Runs a program on every input set recorded for the fixture `pt2` and
/// compares with torch's outputs: (runs, failures).
#[cfg(feature = "exec")]
pub fn run_against_torch(
    name: &str,
    pt2: &Path,
    program: &pt2kit::ir::Program,
) -> (usize, Vec<String>) {
    run_against_torch_with(name, pt2, program, Default::default()).0
}

/// [`run_against_torch`] with executor options; also how many weights the
/// executor left mapped.
#[cfg(feature = "exec")]
pub fn run_against_torch_with(
    name: &str,
    pt2: &Path,
    program: &pt2kit::ir::Program,
    opts: pt2kit::exec::ExecOptions,
) -> ((usize, Vec<String>), usize) {
    use pt2kit::exec::{self, DeviceKind, Executor};
    let executor =
        match Executor::with_options(program, exec::device(DeviceKind::Cpu).unwrap(), opts) {
            Ok(e) => e,
            Err(e) => return ((0, vec![format!("{name}: {e}")]), 0),
        };
    let mapped = executor.mapped_weights().0;
    let copies = || executor.mapped_copies();
    let mut failures = Vec::new();
    let mut runs = 0;
    for (set, inputs, expected) in input_sets(pt2) {
        let inputs = pt2kit::tensorfile::read_npz(&inputs).unwrap();
        let expected = pt2kit::tensorfile::read_npz(&expected).unwrap();
        match executor.run(&inputs) {
            Ok(outs) => failures.extend(compare_with_steps(
                &format!("{name}{set}"),
                &outs,
                &expected,
                &quant_steps(pt2),
            )),
            Err(e) => failures.push(format!("{name}{set}: {e}")),
        }
        runs += 1;
    }
    if copies() > 0 {
        failures.push(format!(
            "{name}: {} copies of mapped weights (an op that reads one in place took a copy)",
            copies()
        ));
    }
    ((runs, failures), mapped)
}

/// Fixtures that no back end here runs, by design, with the reason; their
/// refusals are tested where they are skipped. None today: the FFT of
/// `fb_fft` runs since complex values run as real pairs (`golden/complex`;
/// what stays refused is tested by name in `exec.rs` and `bins/tests/onnx.rs`).
pub const REFUSED: &[(&str, &str)] = &[];

/// Whether a fixture archive is one of [`REFUSED`].
pub fn refused(pt2: &Path) -> bool {
    let name = stem(pt2);
    let model = name.trim_end_matches(".decomp");
    REFUSED.iter().any(|(m, _)| *m == model)
}

/// `n` values spread over [-1, 1] by seed `s` (no two neighbours alike:
/// inputs for tests against a float64 reference).
pub fn spread(n: usize, s: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + s * 104729) % 2001) as f32 / 1000.0) - 1.0)
        .collect()
}

/// A xorshift generator from `seed`: each call a number below `n`
/// (tests of random geometry, the same draws on every run).
pub fn draws(seed: u64) -> impl FnMut(u64) -> usize {
    let mut seed = seed;
    move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n) as usize
    }
}
