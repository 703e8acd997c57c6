//! The bodies of the fuzz targets (`fuzz/`, cargo-fuzz): each takes any
//! bytes and returns, whatever they are; a panic, an abort or a hang is a
//! bug. They live here, in one place, so that `lib/tests/fuzz.rs` replays
//! the seeds and every committed crash input (`golden/fuzz/<target>/`)
//! through the very code the fuzzer ran, on every `cargo test`.

use crate::blob::Blob;

/// The central-directory zip reader: any bytes index or are refused, and
/// every member listed reads or is refused.
pub fn zip_reader(data: &[u8]) {
    if let Ok(a) = crate::zip::Archive::from_blob("fuzz.zip".into(), Blob::owned(data.to_vec())) {
        let names: Vec<String> = a.entries().iter().map(|e| e.name.clone()).collect();
        for n in names {
            let _ = a.member(&n);
        }
    }
}

/// The `.pt2` importer (zip, JSON, weights bound to the signature, views
/// checked against their storages).
pub fn pt2_import(data: &[u8]) {
    use crate::import::pt2::{read_pt2_bytes, ImportOptions};
    let _ = read_pt2_bytes("fuzz.pt2", data.to_vec(), &ImportOptions::default());
}

/// The pickle subset that reads `torch.save` zips: interpreted, never
/// executed.
pub fn torch_save_pickle(data: &[u8]) {
    let _ = crate::import::pickle::read_torch_save(Blob::owned(data.to_vec()), "fuzz.pt");
}

/// The IR stream reader (header, records, storage chunks and references,
/// then validation).
pub fn ir_stream(data: &[u8]) {
    let _ = crate::wire::read_program(&mut &data[..], "fuzz.ir");
}

/// The npy, npz and safetensors readers, told apart by content.
pub fn tensor_files(data: &[u8]) {
    let _ = crate::tensorfile::read_tensor_bytes(data.to_vec(), "fuzz", "x");
}

/// A program as a tool loads it: the IR stream read and validated, then
/// every shape rule and limit (`infer::check`).
pub fn load_and_check(data: &[u8]) {
    if let Ok(p) = crate::wire::read_program(&mut &data[..], "fuzz.ir") {
        let _ = crate::infer::check(&p, &Default::default());
    }
}

/// A target's body: any bytes in, nothing out.
pub type Body = fn(&[u8]);

/// Every target by the name of its `fuzz/fuzz_targets/<name>.rs`.
pub const TARGETS: &[(&str, Body)] = &[
    ("zip_reader", zip_reader),
    ("pt2_import", pt2_import),
    ("torch_save_pickle", torch_save_pickle),
    ("ir_stream", ir_stream),
    ("tensor_files", tensor_files),
    ("load_and_check", load_and_check),
];
