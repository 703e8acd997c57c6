//! The npy, npz and safetensors readers, told apart by content.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| pt2kit::fuzzing::tensor_files(data));
