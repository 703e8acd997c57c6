"""What users run: export a model, run an ONNX file in ONNX Runtime, make the Python environments."""
