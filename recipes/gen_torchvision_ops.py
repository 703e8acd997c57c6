#!/usr/bin/env python3
"""Writes lib/data/torchvision_ops.txt: every op torchvision registers with
the dispatcher (torchvision::NAME.OVERLOAD, as op identities
torchvision.NAME.OVERLOAD), one per line, for the op-coverage test
(lib/tests/decompose.rs: each has an ir-run row, an ir2onnx conversion or
a refusal with its reason in lib/data/refusals.txt).

    .venv/bin/python recipes/gen_torchvision_ops.py [--out lib/data/torchvision_ops.txt]
"""
import argparse

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="lib/data/torchvision_ops.txt")
    a = ap.parse_args()
    ops = set()
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("torchvision::"):
            continue
        base, _, overload = name[len("torchvision::"):].partition(".")
        ops.add(f"torchvision.{base}.{overload or 'default'}")
    with open(a.out, "w") as f:
        f.write(f"# torchvision {torchvision.__version__}'s dispatcher ops (recipes/gen_torchvision_ops.py)\n")
        for op in sorted(ops):
            f.write(op + "\n")
    print(f"{len(ops)} ops -> {a.out}")


if __name__ == "__main__":
    main()
