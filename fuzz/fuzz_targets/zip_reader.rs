//! The central-directory zip reader: any bytes index or are refused, and
//! every member listed reads or is refused.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| pt2kit::fuzzing::zip_reader(data));
