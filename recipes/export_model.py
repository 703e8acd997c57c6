"""Exports a model defined in a Python file to a .pt2 archive.

    python recipes/export_model.py my_model.py -o my_model.pt2 [--decompose]

The file defines `model()` returning an nn.Module and `example_inputs()`
returning a tuple of inputs; optionally `dynamic_shapes()` (as
torch.export.export takes it). The model is put in eval mode. With
--decompose the ATEN dialect (run_decompositions()) is saved instead of the
TRAINING dialect.
"""
import argparse
import importlib.util
import sys

import torch

ap = argparse.ArgumentParser()
ap.add_argument("script")
ap.add_argument("-o", "--output", required=True)
ap.add_argument("--decompose", action="store_true")
args = ap.parse_args()

spec = importlib.util.spec_from_file_location("user_model", args.script)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
for name in ("model", "example_inputs"):
    if not hasattr(mod, name):
        sys.exit(f"{args.script}: defines no {name}()")
m = mod.model().eval()
inputs = tuple(mod.example_inputs())
dyn = mod.dynamic_shapes() if hasattr(mod, "dynamic_shapes") else None
ep = torch.export.export(m, inputs, dynamic_shapes=dyn)
if args.decompose:
    ep = ep.run_decompositions()
torch.export.save(ep, args.output)
print(f"{args.output}: {len(list(ep.graph.nodes))} nodes")
