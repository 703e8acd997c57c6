//! Writers that take the IR out to other formats.

pub mod onnx;
