//! Readers that bring models into the IR. Only `pt2` today; the zip and
//! pickle readers serve it.

mod json;
pub mod torchscript;
pub mod pickle;
pub mod pt2;
