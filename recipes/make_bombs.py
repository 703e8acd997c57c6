#!/usr/bin/env python3
"""Export the run-time bombs of issue 53: valid programs whose sizes are
known only at run time, each small on its example input and huge (or
endless) on another. The tools must end them with a documented exit code
and a one-line message, never an abort (bins/tests/limits.rs).

Usage:
    python recipes/make_bombs.py --out golden/bombs

Files written (torch.export.save of each module; inputs are made by the
tests):
    outer.pt2       x[:, None] * x[None, :] over a dynamic dim n: an outer
                    product, n x n floats (n = 200,000: 149 GiB)
    ones_item.pt2   torch.ones(n.item()): a size from a tensor's value
                    (n = 2**40: 4 TiB)
    endless.pt2     while_loop(i >= 0, (i + 1, x + 1)): never ends (torch
                    runs it forever); the tests also edit its body into
                    one whose carry doubles every iteration, which torch's
                    export refuses to make
"""

import argparse
import os

import torch
from torch.export import Dim, export
from torch._higher_order_ops.while_loop import while_loop


class Outer(torch.nn.Module):
    def forward(self, x):
        return x[:, None] * x[None, :]


class OnesItem(torch.nn.Module):
    def forward(self, n):
        k = n.item()
        torch._check(k >= 0)
        return torch.ones(k)


class Endless(torch.nn.Module):
    def forward(self, i, x):
        def cond_fn(i, x):
            return i >= 0

        def body_fn(i, x):
            return i + 1, x + 1

        return while_loop(cond_fn, body_fn, (i, x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="golden/bombs")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    n = Dim("n", min=2)
    for name, m, args, dyn in [
        ("outer", Outer(), (torch.randn(8),), ({0: n},)),
        ("ones_item", OnesItem(), (torch.tensor(5),), None),
        ("endless", Endless(), (torch.tensor(0), torch.zeros(3)), None),
    ]:
        ep = export(m, args, dynamic_shapes=dyn)
        path = os.path.join(a.out, f"{name}.pt2")
        torch.export.save(ep, path)
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
