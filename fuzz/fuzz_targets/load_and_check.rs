//! A program as a tool loads it: the IR stream read and validated, then
//! every shape rule and limit (`infer::check`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| pt2kit::fuzzing::load_and_check(data));
