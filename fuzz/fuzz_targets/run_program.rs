//! Small programs made from the bytes (hostile sizes, dtypes, arguments
//! and executor flags), loaded and run as `ir-run` loads and runs them.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| pt2kit::fuzzing::run_program(data));
