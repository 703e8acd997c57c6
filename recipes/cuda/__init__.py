"""The GPU build (type-checked against a CUDA toolkit from PyPI) and its runs on a GPU machine."""
