//! The executor on a GPU (`--device cuda`), against the same executor on
//! the CPU and against torch: every committed fixture (models, composite
//! ops, outside-model fixtures) and every op-conformance case.
//!
//! These tests need a GPU and a build with `--features cuda`; they are
//! `#[ignore]`d and run by `make test-cuda` on a machine that has one.
//! `make check-cuda` type-checks them everywhere (no GPU needed).

#![cfg(feature = "cuda")]

mod common;

use std::path::Path;

use common::*;
use pt2kit::exec::{self, DeviceKind, Executor};
use pt2kit::import::pt2::{read_pt2, ImportOptions};
use pt2kit::ir::Dtype;
use pt2kit::tensorfile::{read_npz, HostTensor};

type Outputs = Vec<(String, HostTensor)>;

fn run_on(
    kind: DeviceKind,
    pt2: &Path,
    inputs: &[(String, HostTensor)],
) -> Result<Outputs, String> {
    let program = read_pt2(pt2, &ImportOptions::default()).map_err(|e| format!("read: {e}"))?;
    let device = exec::device(kind).map_err(|e| e.to_string())?;
    let executor = Executor::new(&program, device).map_err(|e| e.to_string())?;
    executor.run(inputs).map_err(|e| e.to_string())
}

/// Per-dtype tolerances between the two devices (cuBLAS and candle's
/// kernels sum in other orders than the CPU's).
fn agree(cpu: &HostTensor, gpu: &HostTensor) -> Result<(), String> {
    if cpu.shape != gpu.shape || cpu.dtype != gpu.dtype {
        return Err(format!(
            "cpu {:?} {:?}, cuda {:?} {:?}",
            cpu.dtype, cpu.shape, gpu.dtype, gpu.shape
        ));
    }
    let (atol, rtol) = match cpu.dtype {
        Dtype::Float16 => (2e-3, 2e-3),
        Dtype::BFloat16 => (2e-2, 2e-2),
        d if d.is_floating() => (1e-4, 1e-4),
        _ => (0.0, 0.0),
    };
    for (i, (a, b)) in cpu.to_f64().iter().zip(gpu.to_f64()).enumerate() {
        let same = (a.is_nan() && b.is_nan()) || *a == b || (a - b).abs() <= atol + rtol * a.abs();
        if !same {
            return Err(format!("element {i}: cpu {a}, cuda {b}"));
        }
    }
    Ok(())
}

/// Runs one program on both devices: the GPU must succeed where the CPU
/// does, with the same outputs.
fn compare(pt2: &Path, inputs: &[(String, HostTensor)], failures: &mut Vec<String>) {
    let name = pt2.display();
    let Ok(cpu) = run_on(DeviceKind::Cpu, pt2, inputs) else {
        return; // what the CPU refuses is the CPU suites' business
    };
    match run_on(DeviceKind::Cuda, pt2, inputs) {
        Err(e) => failures.push(format!("{name}: cuda failed: {e}")),
        Ok(gpu) => {
            for ((n, a), (_, b)) in cpu.iter().zip(&gpu) {
                if let Err(e) = agree(a, b) {
                    failures.push(format!("{name}: {n}: {e}"));
                }
            }
        }
    }
}

fn named_inputs(npz: &Path) -> Vec<(String, HostTensor)> {
    read_npz(npz).unwrap().into_iter().collect()
}

#[test]
#[ignore = "needs a GPU and --features cuda: make test-cuda"]
fn every_fixture_agrees_on_cpu_and_cuda() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for dir in [
        "golden/models",
        "golden/composite",
        "golden/hop",
        "golden/fallback",
        "golden/moe",
    ] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let pt2 = entry.unwrap().path();
            if pt2.extension().is_none_or(|e| e != "pt2") || refused(&pt2) {
                continue;
            }
            for (_, inputs, _) in input_sets(&pt2) {
                compare(&pt2, &named_inputs(&inputs), &mut failures);
                runs += 1;
            }
        }
    }
    assert!(runs > 50, "only {runs} runs");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a GPU and --features cuda: make test-cuda"]
fn every_conformance_case_agrees_on_cpu_and_cuda() {
    let dir = repo().join("golden/ops");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let mut failures = Vec::new();
    let mut runs = 0;
    for case in manifest["cases"].as_array().unwrap() {
        // a case whose tensors cannot be read (complex ones) the CPU's
        // conformance suite reports
        let Ok(data) = read_npz(&dir.join(case["npz"].as_str().unwrap())) else {
            continue;
        };
        runs += 1;
        let inputs: Vec<(String, HostTensor)> = data
            .iter()
            .filter_map(|(k, t)| k.strip_prefix("in:").map(|n| (n.to_string(), t.clone())))
            .collect();
        compare(
            &dir.join(case["pt2"].as_str().unwrap()),
            &inputs,
            &mut failures,
        );
    }
    assert!(runs > 300, "only {runs} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// On a machine with the driver but no GPU, the device is refused with a
/// message, never a panic (with no driver the binary does not start: candle
/// links it).
#[test]
#[ignore = "needs a machine WITHOUT a GPU and a --features cuda build"]
fn no_gpu_is_a_clear_error() {
    let e = exec::device(DeviceKind::Cuda).unwrap_err();
    assert_eq!(e.kind, pt2kit::ErrorKind::BadInput, "{e}");
    assert!(e.to_string().contains("CUDA"), "{e}");
}
