//! The fuzz targets' bodies (`pt2kit::fuzzing`, run by `make fuzz`) on
//! every crash input the fuzzer found (`golden/fuzz/<target>/`, each fixed
//! since) and on the seeds the fuzzer starts from: none may panic.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn files(dir: &Path, ext: Option<&str>) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut v: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && ext.is_none_or(|x| p.extension().is_some_and(|e| e == x)))
        .collect();
    v.sort();
    v
}

/// The seeds `recipes/checks/fuzz.sh` gives a target (those made by a tool
/// aside), and every input committed under golden/fuzz/<target>/.
fn inputs(target: &str) -> Vec<PathBuf> {
    let g = root().join("golden");
    let mut v = files(&g.join("fuzz").join(target), None);
    match target {
        "zip_reader" | "pt2_import" => {
            v.extend(files(&g.join("bad"), Some("pt2")));
            v.extend(files(&g.join("legacy"), Some("pt2")));
            v.extend(files(&g.join("models"), Some("pt2")).into_iter().take(8));
        }
        "torch_save_pickle" => v.extend(files(&g.join("legacy"), Some("pt2"))),
        "torchscript_import" => v.extend(files(&g.join("ts"), Some("pt"))),
        "tensor_files" => v.extend(files(&g.join("models"), Some("npz"))),
        _ => {}
    }
    v
}

#[test]
fn fuzz_targets_survive_their_seeds_and_every_crash_found() {
    let mut total = 0;
    for (name, body) in pt2kit::fuzzing::TARGETS {
        let found = inputs(name);
        for path in &found {
            let bytes = std::fs::read(path).unwrap();
            // whole, and cut in two (a truncated file is the commonest bad input)
            let run = std::panic::catch_unwind(|| {
                body(&bytes);
                body(&bytes[..bytes.len() / 2]);
            });
            assert!(
                run.is_ok(),
                "fuzz target {name} panicked on {}",
                path.display()
            );
        }
        total += found.len();
    }
    assert!(total > 20, "only {total} inputs found under golden/");
}

#[test]
fn every_fuzz_target_has_its_binary() {
    let dir = root().join("fuzz/fuzz_targets");
    for (name, _) in pt2kit::fuzzing::TARGETS {
        let src = std::fs::read_to_string(dir.join(format!("{name}.rs")))
            .unwrap_or_else(|e| panic!("fuzz/fuzz_targets/{name}.rs: {e}"));
        assert!(
            src.contains(&format!("pt2kit::fuzzing::{name}(")),
            "{name}.rs runs another body"
        );
    }
    let manifest = std::fs::read_to_string(root().join("fuzz/Cargo.toml")).unwrap();
    // run_program needs the executor: its body is in TARGETS only with it
    let without_exec = usize::from(cfg!(not(feature = "exec")));
    assert_eq!(
        manifest.matches("[[bin]]").count(),
        pt2kit::fuzzing::TARGETS.len() + without_exec,
        "fuzz/Cargo.toml lists other targets than pt2kit::fuzzing::TARGETS"
    );
}

/// The executor's target on random bytes (deterministic; `PT2KIT_FUZZ_RUNS`
/// sets how many, 300 by default): none may panic. Between fuzzing
/// sessions this keeps the program maker and the executor honest.
#[cfg(feature = "exec")]
#[test]
fn run_program_survives_random_bytes() {
    let runs: u64 = std::env::var("PT2KIT_FUZZ_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for run in 0..runs {
        let len = (next() % 200) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let r = std::panic::catch_unwind(|| pt2kit::fuzzing::run_program(&bytes));
        assert!(r.is_ok(), "run {run} panicked on {bytes:?}");
    }
}
