//! The `.pt2` importer (zip, JSON, weights bound to the signature, views
//! checked against their storages).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| pt2kit::fuzzing::pt2_import(data));
