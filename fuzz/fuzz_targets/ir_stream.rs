//! The IR stream reader (header, records, storage chunks and references,
//! then validation).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| pt2kit::fuzzing::ir_stream(data));
