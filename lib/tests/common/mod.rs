//! Test helpers: fixture paths and golden-file comparison
//! (`UPDATE_GOLDEN=1 cargo test` rewrites the goldens).

#![allow(dead_code)]

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
    ["", ".alt"]
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
