//! The pickle subset that reads `torch.save` zips: interpreted, never
//! executed.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| pt2kit::fuzzing::torch_save_pickle(data));
