"""Exports a model defined in a Python file to a .pt2 archive.

    python recipes/run/export_model.py my_model.py -o my_model.pt2 [--decompose]

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
ap.add_argument("--inputs", metavar="NPZ", help="also write the example inputs (by user input name)")
ap.add_argument("--expected", metavar="NPZ", help="also write torch's outputs on them (by output position)")
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
if args.inputs or args.expected:
    import numpy as np

    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    flat = [t for t in torch.utils._pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    if args.inputs:
        np.savez(args.inputs, **{n: t.numpy() for n, t in zip(names, flat)})
    if args.expected:
        with torch.no_grad():
            outs = torch.utils._pytree.tree_leaves(m(*inputs))
        np.savez(args.expected, **{f"output_{i}": o.detach().numpy() for i, o in enumerate(outs)})
print(f"{args.output}: {len(list(ep.graph.nodes))} nodes")
