//! IR -> ONNX (work in progress).
