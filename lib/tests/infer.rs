//! The shape rules (`pt2kit::infer`) against what torch recorded: every
//! committed program, and every op-conformance case (OpInfo samples, whose
//! output shapes torch's own meta functions computed), passes the check; a
//! rule that disagreed with torch would refuse a valid graph.

mod common;

use common::*;
use pt2kit::import::pt2::{read_pt2, ImportOptions};
use pt2kit::infer::{check, Limits};

/// The archives under a folder, its subfolders included.
fn archives(dir: &str) -> Vec<std::path::PathBuf> {
    fn walk(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(d) else {
            return;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "pt2") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(&repo().join(dir), &mut v);
    v.sort();
    v
}

#[test]
fn every_committed_program_passes_the_rules() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for dir in [
        "golden/models",
        "golden/legacy",
        "golden/composite",
        "golden/hop",
        "golden/moe",
        "golden/tail",
        "golden/tail_random",
        "golden/fallback",
        "golden/numerics",
        "golden/symint",
        "golden/complex",
        "golden/quant",
        "golden/vision",
        "golden/state",
        "golden/ops",
        "golden/big",
        "golden/random",
    ] {
        for p in archives(dir) {
            let Ok(program) = read_pt2(&p, &ImportOptions::default()) else {
                continue; // unreadable fixtures are pt2ir's tests' business
            };
            checked += 1;
            if let Err(e) = check(&program, &Limits::default()) {
                failures.push(format!("{}: {e}", p.display()));
            }
        }
    }
    assert!(checked > 400, "only {checked} programs");
    assert!(
        failures.is_empty(),
        "{} of {checked}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
