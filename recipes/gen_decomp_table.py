"""Writes the ops of torch's `core_aten_decompositions()` table that an
inference graph can hold: forward, functional ATen overloads (no backward
ops, no in-place or out= variants, which functionalisation or export never
leave), one a line, for ir-decompose's coverage test.

    .venv/bin/python recipes/gen_decomp_table.py > lib/data/torch_decompositions.txt
"""
import torch
from torch._decomp import core_aten_decompositions


def keep(name):
    if not name.startswith("aten."):
        return False
    _, op, overload = name.split(".", 2)
    if "backward" in op or op.endswith("_") and not op.startswith("__"):
        return False
    return "out" not in overload.split("_")


names = sorted({str(k) for k in core_aten_decompositions().keys()})
print(f"# torch {torch.__version__}: core_aten_decompositions(), forward functional ops "
      "(recipes/gen_decomp_table.py)")
for n in names:
    if keep(n):
        print(n)
