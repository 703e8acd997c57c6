"""Checks: the tools' numbers against torch and ONNX Runtime (make test, make zoo, fuzzing)."""
