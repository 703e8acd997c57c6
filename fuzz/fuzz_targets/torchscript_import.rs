//! The TorchScript importer (ts2ir): archives and code/ source, read as
//! data, never run.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| pt2kit::fuzzing::torchscript_import(data));
