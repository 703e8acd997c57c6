"""Writes lib/data/op_schemas.txt: every registered operator schema of torch,
one per line, sorted, as torch prints it
(`aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`).

The Rust library parses these lines to fill in the arguments that
`torch.export.save` omits because they hold their default value.

    python recipes/gen_schemas.py [--out lib/data/op_schemas.txt]
"""
import argparse
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers quantized_decomposed:: (PT2E int8)

ap = argparse.ArgumentParser()
ap.add_argument("--out", default="lib/data/op_schemas.txt")
args = ap.parse_args()

lines = set()
for s in torch._C._jit_get_all_schemas():
    if s.name.startswith(("aten::", "prims::", "quantized::", "_quantized::", "quantized_decomposed::", "torchvision::")):
        lines.add(str(s))
with open(args.out, "w") as f:
    f.write(f"# op schemas of torch {torch.__version__.split('+')[0]} (recipes/gen_schemas.py)\n")
    for line in sorted(lines):
        f.write(line + "\n")
print(f"{len(lines)} schemas -> {args.out}")
