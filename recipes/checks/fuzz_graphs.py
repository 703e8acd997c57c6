#!/usr/bin/env python3
"""Random-program differential testing of pt2kit, in the spirit of NNSmith.

Each program is a small torch.nn.Module built op by op: chains of views
(permute, transpose, stepped slices, select, narrow, expand, flip,
(un)squeeze, reshape/view/flatten/unflatten, movedim, diagonal, mT, split
and chunk items, None-indexing) feeding compute ops (unary and binary
pointwise ops with broadcasting and Python scalars, comparisons, logical
and bitwise ops, where, masked_fill, clamp, casts, reductions with keepdim,
argmax/max.dim, cumsum, softmax/log_softmax, layer_norm, matmul/mm/bmm/
linear, conv1d/2d (and transposed), max/avg/adaptive pooling, cat/stack,
index_select/gather, roll, tril, topk/sort values, in-place updates of a
clone through views) in float32, float16, int64 and bool, mixed where
torch promotes. Every op is run eagerly while the program is built, so an
op torch refuses is never kept; values stay small (at most 256 elements),
finite and below 1e4 in magnitude. Inputs and weights are multiples of
1/16 (ties for max, argmax and rounding are on purpose).

A program is kept when torch eager runs it and torch.export.export
reproduces it (the exported module's outputs equal eager's: ints and bools
exactly, floats within 1e-6, float16 within 1e-3). Kept programs are
saved (torch.export.save) with their inputs and eager outputs and checked
in three stages (recipes/checks/check_random.py): B ir-run as exported, C
ir-decompose then ir-run, D ir2onnx --opset 18 then ONNX Runtime. A
failing program is shrunk (an output at a time, ops bypassed where an
argument has the output's shape and dtype, a value cut into a new input
holding its eager value, views replaced by a reshape) while it still fails
the same stage the same way, and written out as a Python snippet plus its
.pt2 and .npz.

Batch mode (make fuzz-graphs N=5000 SEED=1):

  python recipes/checks/fuzz_graphs.py --bin target/release -n 5000 --seed 1 --out fuzz-out

writes fuzz-out/failures/ (one reproducer per failing program and stage:
NAME-STAGE.py, .pt2, .npz, .prog.json, and a manifest.json, so
`check_random.py --dir fuzz-out/failures` checks them all again) and
fuzz-out/summary.txt, and prints a summary by stage and error.

Golden mode (regenerates golden/random/, the seed set make test checks):

  python recipes/checks/fuzz_graphs.py --bin target/release --golden golden/random --count 330 --seed 0

checks the first --count programs torch keeps (p0000, p0001, ... of that
seed) and writes those that pass every stage; those that fail go to
KNOWN_FAILURES.md with their shrunk reproducers and are left out. Every
golden/random/fixtures/NAME.prog.json (a reproducer from a batch's
failures/, for a fixed bug) joins the set as fix_NAME. The set only grows
as bugs are fixed: a program's bytes do not depend on the others.

One program's Python source: `--show SEED:INDEX`.

Wide dtypes (--wide-dtypes, in any mode; the environment variable
PT2KIT_FUZZ_WIDE_DTYPES=1 carries it to the worker processes): programs
over float32, float16, bfloat16, float64, int64, int32, int8, uint8 and
bool values, and inputs and weights holding edge values among the grid's
(about one element in seven): NaN, inf, -inf and -0.0 in the float types,
the smallest subnormal, the int types' min and max, and +-(2^53+1) and
2^62 in int64. Values are then not kept finite or small: an op is kept
whenever torch runs it. bfloat16 inputs and outputs travel in .npz as
ml_dtypes writes them (descr '<V2'). Float outputs computed from float16
or bfloat16 values compare at that dtype's loose tolerance
(check_random.py). Without the flag, programs are the same as ever (the
seed set in golden/random/ does not change).
"""

import argparse
import collections
import copy
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
import types
import zipfile
from pathlib import Path

import numpy as np

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recipes.checks import check_random  # noqa: E402  (the stage runner, shared with the checker)

torch = None
F = None

MAX_NUMEL = 256
MAX_RANK = 5
MAX_ABS = 1e4

DTYPE_NAMES = ["float32", "float16", "int64", "bool"]

# --wide-dtypes (see the module docstring); read at import, so that the
# spawned workers of a batch see it too
WIDE = os.environ.get("PT2KIT_FUZZ_WIDE_DTYPES") == "1"
FLOATS = ("float32", "float16", "bfloat16", "float64")
INTS = ("int64", "int32", "int8", "uint8")
WIDE_DTYPES = ["float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool"]
METHOD = {"float32": "float", "float16": "half", "bfloat16": "bfloat16", "float64": "double", "int64": "long",
          "int32": "int", "int8": "char", "uint8": "byte", "bool": "bool"}
EDGE_FREQ = 1 / 7


def cast_names():
    return WIDE_DTYPES if WIDE else DTYPE_NAMES


def np_dtype(name):
    """A numpy dtype by torch's name (bfloat16: ml_dtypes')."""
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def to_torch(a):
    """A numpy array as a torch tensor (bfloat16 from ml_dtypes' by its bits)."""
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.copy(order="C").view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def edge_values(dtype):
    """The edge values of a dtype (the --wide-dtypes inputs mix them in)."""
    if dtype in FLOATS:
        fi = np.finfo(np.float32) if dtype == "bfloat16" else np.finfo(dtype)
        sub = {"bfloat16": 9.183549615799121e-41}.get(dtype, float(getattr(fi, "smallest_subnormal", 0.0)))
        return [float("nan"), float("inf"), float("-inf"), -0.0, sub]
    if dtype in INTS:
        ii = np.iinfo(dtype)
        vals = [int(ii.min), int(ii.max)]
        if dtype == "int64":
            vals += [2 ** 53 + 1, -(2 ** 53 + 1), 2 ** 62]
        return vals
    return []


def _import_torch():
    global torch, F
    if torch is None:
        import torch as _torch
        import torch.nn.functional as _F

        torch = _torch
        F = _F
        torch.set_num_threads(1)
    return torch


def tdtype(name):
    return getattr(torch, name)


def dname(t):
    return str(t.dtype).replace("torch.", "")


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------


class Stmt:
    """One statement: `lines` define `out` (one value) from `args` (value
    names) and `params` (self.<name> weights)."""

    def __init__(self, out, lines, args, kind, view=False, params=()):
        self.out = out
        self.lines = list(lines)
        self.args = list(dict.fromkeys(args))
        self.kind = kind
        self.view = view
        self.params = list(dict.fromkeys(params))

    def to_json(self):
        return {"out": self.out, "lines": self.lines, "args": self.args, "kind": self.kind,
                "view": self.view, "params": self.params}

    @staticmethod
    def from_json(d):
        return Stmt(d["out"], d["lines"], d["args"], d["kind"], d["view"], d["params"])

    def rename(self, old, new):
        pat = re.compile(rf"\b{re.escape(old)}\b")
        s = Stmt(self.out, [pat.sub(new, line) for line in self.lines],
                 [new if a == old else a for a in self.args], self.kind, self.view, self.params)
        return s


class Prog:
    """inputs: names in order; data: name -> np.ndarray (inputs);
    params: name -> np.ndarray (weights, nn.Parameter or buffer);
    stmts; outputs: value names."""

    def __init__(self):
        self.inputs = []
        self.data = {}
        self.params = {}
        self.stmts = []
        self.outputs = []

    def copy(self):
        p = Prog()
        p.inputs = list(self.inputs)
        p.data = dict(self.data)
        p.params = dict(self.params)
        p.stmts = list(self.stmts)
        p.outputs = list(self.outputs)
        return p

    def ops(self):
        return [s.kind for s in self.stmts]

    def to_json(self):
        def arr(a):
            vals = a.reshape(-1)
            if a.dtype.name == "bfloat16":
                vals = vals.astype(np.float64)
            return {"dtype": str(a.dtype), "shape": list(a.shape), "values": vals.tolist()}

        return {"inputs": [{"name": n, **arr(self.data[n])} for n in self.inputs],
                "params": [{"name": n, **arr(a)} for n, a in self.params.items()],
                "stmts": [s.to_json() for s in self.stmts], "outputs": self.outputs}

    @staticmethod
    def from_json(d):
        def arr(e):
            if e["dtype"] == "bfloat16":
                return np.array(e["values"], dtype=np.float32).astype(np_dtype("bfloat16")).reshape(e["shape"])
            return np.array(e["values"], dtype=e["dtype"]).reshape(e["shape"])

        p = Prog()
        for e in d["inputs"]:
            p.inputs.append(e["name"])
            p.data[e["name"]] = arr(e)
        for e in d["params"]:
            p.params[e["name"]] = arr(e)
        p.stmts = [Stmt.from_json(s) for s in d["stmts"]]
        p.outputs = list(d["outputs"])
        return p


def _num(v):
    if isinstance(v, (bool, np.bool_)):
        return "True" if v else "False"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    v = float(v)
    if v != v:
        return "float('nan')"
    if v in (float("inf"), float("-inf")):
        return "float('inf')" if v > 0 else "-float('inf')"
    return repr(v)


def _nested(a):
    if a.ndim == 0:
        return _num(a[()])
    return "[" + ", ".join(_nested(a[i]) for i in range(a.shape[0])) + "]"


def literal(a):
    """A torch expression that makes exactly this array."""
    dt = {"float32": "float32", "float16": "float16", "int64": "int64", "bool": "bool"}.get(str(a.dtype))
    if dt is None and WIDE and str(a.dtype) in WIDE_DTYPES:
        dt = str(a.dtype)
    if dt is None:
        raise KeyError(str(a.dtype))
    if a.size == 0:
        return f"torch.zeros({tuple(a.shape)}, dtype=torch.{dt})"
    return f"torch.tensor({_nested(a)}, dtype=torch.{dt})"


def module_source(prog):
    """The program as a torch.nn.Module named Program."""
    out = ["class Program(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    for name, a in prog.params.items():
        if a.dtype.kind == "f":
            out.append(f"        self.{name} = nn.Parameter({literal(a)})")
        else:
            out.append(f"        self.register_buffer({name!r}, {literal(a)})")
    out.append(f"    def forward(self{''.join(', ' + n for n in prog.inputs)}):")
    for s in prog.stmts:
        out.extend("        " + line for line in s.lines)
    out.append(f"        return ({', '.join(prog.outputs)},)")
    return "\n".join(out) + "\n"


HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def snippet(prog, comment=""):
    """A self-contained reproducer: the module, its inputs, and what to run."""
    lines = [comment.rstrip() + "\n" if comment else "", HEADER, "\n", module_source(prog), "\n"]
    lines.append("INPUTS = (\n")
    for n in prog.inputs:
        lines.append(f"    {literal(prog.data[n])},  # {n}\n")
    lines.append(")\n\n")
    lines.append(
        'if __name__ == "__main__":\n'
        "    m = Program().eval()\n"
        "    with torch.no_grad():\n"
        "        print(m(*INPUTS))\n"
        "    ep = torch.export.export(m, INPUTS)\n"
        "    print(ep.graph)\n"
        '    torch.export.save(ep, "repro.pt2")\n')
    return "".join(lines)


def build_module(prog):
    _import_torch()
    ns = {"torch": torch, "nn": torch.nn, "F": F}
    exec(compile(HEADER + module_source(prog), "<program>", "exec"), ns)
    return ns["Program"]().eval()


def torch_inputs(prog):
    return tuple(to_torch(prog.data[n]) for n in prog.inputs)


def evaluate(prog):
    """Every value of the program, eagerly, statement by statement."""
    _import_torch()
    params = types.SimpleNamespace(**{n: to_torch(a) for n, a in prog.params.items()})
    env = {"torch": torch, "F": F, "self": params}
    for n in prog.inputs:
        env[n] = to_torch(prog.data[n])
    with torch.no_grad():
        for s in prog.stmts:
            exec("\n".join(s.lines), env)
    return env


def through_float16(prog, env):
    """Per output: whether a float16 value, input or weight is among what it
    is computed from (its float results then carry float16 rounding).
    With --wide-dtypes, the half dtype ("bfloat16" where a bfloat16 one is
    among them, else "float16") or False."""
    if WIDE:
        rank = {None: 0, "float16": 1, "bfloat16": 2}

        def own(dt):
            return dt if dt in ("float16", "bfloat16") else None

        def worst(*ds):
            return max(ds, key=lambda d: rank[d])
        half = {n: own(prog.data[n].dtype.name) for n in prog.inputs}
        for s in prog.stmts:
            half[s.out] = worst(own(dname(env[s.out])), *(half.get(a) for a in s.args),
                                *(own(prog.params[q].dtype.name) for q in s.params))
        return [half.get(o) or False for o in prog.outputs]
    half = {n: prog.data[n].dtype == np.float16 for n in prog.inputs}
    for s in prog.stmts:
        half[s.out] = (env[s.out].dtype == torch.float16 or any(half.get(a, False) for a in s.args)
                       or any(prog.params[q].dtype == np.float16 for q in s.params))
    return [bool(half.get(o, False)) for o in prog.outputs]


def dce(prog):
    """Drops the statements, inputs and weights no output needs."""
    live = set(prog.outputs)
    keep = []
    for s in reversed(prog.stmts):
        if s.out in live:
            keep.append(s)
            live.update(s.args)
    p = prog.copy()
    p.stmts = keep[::-1]
    used_params = {q for s in p.stmts for q in s.params}
    p.inputs = [n for n in prog.inputs if n in live]
    p.data = {n: prog.data[n] for n in p.inputs}
    p.params = {n: a for n, a in prog.params.items() if n in used_params}
    return p


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def grid(nprng, shape, dtype, scale=1.0):
    """Inputs and weights: multiples of 1/16 in [-2, 2] (x scale), small ints, bools."""
    if WIDE:
        return grid_wide(nprng, shape, dtype, scale)
    if dtype == "bool":
        return np.asarray(nprng.random(shape) < 0.5)
    if dtype == "int64":
        return np.asarray(nprng.integers(-4, 5, size=shape)).astype(np.int64)
    a = np.asarray(nprng.integers(-32, 33, size=shape) / 16.0 * scale)
    return a.astype(dtype)


def grid_wide(nprng, shape, dtype, scale=1.0):
    """grid() in every dtype, with edge values mixed in (--wide-dtypes)."""
    if dtype == "bool":
        return np.asarray(nprng.random(shape) < 0.5)
    if dtype in INTS:
        lo = 0 if dtype == "uint8" else -4
        a = np.asarray(nprng.integers(lo, 5, size=shape)).astype(dtype)
    else:
        a = np.asarray(nprng.integers(-32, 33, size=shape) / 16.0 * scale).astype(np.float64)
    edges = edge_values(dtype)
    if edges and a.size:
        pick = nprng.random(a.shape) < EDGE_FREQ
        which = nprng.integers(0, len(edges), size=a.shape)
        if dtype in INTS:
            e = np.array(edges, dtype=dtype)
        else:
            e = np.array(edges, dtype=np.float64)
        a = np.where(pick, e[which], a)
    if dtype in INTS:
        return np.asarray(a).astype(dtype)
    if dtype == "bfloat16":
        return np.asarray(a).astype(np.float32).astype(np_dtype("bfloat16"))
    return np.asarray(a).astype(dtype)


class Gen:
    def __init__(self, seed):
        _import_torch()
        self.rng = random.Random(seed)
        self.np = np.random.default_rng(self.rng.getrandbits(63))
        self.prog = Prog()
        self.env = {}
        self.nval = 0
        self.nparam = 0
        # a program leans to one float dtype; others come in mixed
        self.float_dtype = "float16" if self.rng.random() < 0.2 else "float32"
        if WIDE:
            self.float_dtype = self.rng.choice(FLOATS)

    # ---- values ---------------------------------------------------------
    def dtype(self):
        r = self.rng.random()
        if WIDE:
            if r < 0.45:
                return self.float_dtype
            if r < 0.6:
                return self.rng.choice([d for d in FLOATS if d != self.float_dtype])
            if r < 0.87:
                return self.rng.choice(INTS)
            return "bool"
        if r < 0.62:
            return self.float_dtype
        if r < 0.72:
            return "float16" if self.float_dtype == "float32" else "float32"
        if r < 0.88:
            return "int64"
        return "bool"

    def shape(self, rank=None):
        if rank is None:
            rank = self.rng.choice([1, 2, 2, 3, 3, 3, 4, 4])
        while True:
            s = [self.rng.choice([1, 2, 2, 3, 3, 4, 5]) for _ in range(rank)]
            if int(np.prod(s)) <= 64:
                return s

    def new_input(self, shape, dtype):
        name = f"x{len(self.prog.inputs)}"
        a = grid(self.np, tuple(shape), dtype)
        self.prog.inputs.append(name)
        self.prog.data[name] = a
        self.env[name] = to_torch(a)
        return name

    def new_param(self, shape, dtype, scale=0.5):
        name = f"w{self.nparam}"
        self.nparam += 1
        self.prog.params[name] = grid(self.np, tuple(shape), dtype, scale)
        return name

    def values(self, pred=None):
        names = [n for n in self.prog.inputs] + [s.out for s in self.prog.stmts]
        return [n for n in names if pred is None or pred(self.env[n])]

    def pick(self, pred=None):
        """A value for the next op: recent ones are likelier (chains)."""
        names = self.values(pred)
        if not names:
            return None
        weights = [(i + 1) ** 2 for i in range(len(names))]
        return self.rng.choices(names, weights)[0]

    # ---- partners -------------------------------------------------------
    def broadcast_shape(self, shape):
        s = list(shape)
        drop = self.rng.choice([0, 0, 0, 1, len(s)]) if s else 0
        s = s[min(drop, len(s)):]
        s = [1 if self.rng.random() < 0.3 else d for d in s]
        if self.rng.random() < 0.12 and len(shape) < MAX_RANK:
            s = [self.rng.choice([1, 2, 3])] + s
        return s

    def partner(self, x, allow_scalar=True, dtype=None, want_float=False):
        """A second operand for x: a value that broadcasts with it, a new
        input or weight of a broadcastable shape, or a Python scalar.
        Returns (code, args, params)."""
        t = self.env[x]
        r = self.rng.random()
        if allow_scalar and r < 0.25:
            if dtype == "bool":
                return self.rng.choice(["True", "False"]), [], []
            if dtype in INTS or (dtype is None and not t.is_floating_point() and self.rng.random() < 0.7):
                return str(self.rng.choice([-2, -1, 1, 2, 3])), [], []
            return repr(self.rng.choice([-1.5, -0.5, 0.25, 0.5, 2.0, 3.0])), [], []
        if r < 0.55:
            def ok(u, t=t):
                if dtype is not None and dname(u) != dtype:
                    return False
                if want_float and not u.is_floating_point():
                    return False
                try:
                    return list(torch.broadcast_shapes(u.shape, t.shape)) == list(t.shape) or self.rng.random() < 0.3
                except RuntimeError:
                    return False
            y = self.pick(ok)
            if y is not None:
                return y, [y], []
        d = dtype or (dname(t) if self.rng.random() < 0.7 else self.dtype())
        if want_float and d not in FLOATS:
            d = self.float_dtype
        shape = self.broadcast_shape(t.shape)
        if d in FLOATS and self.rng.random() < 0.3:
            w = self.new_param(shape, d)
            return f"self.{w}", [], [w]
        y = self.new_input(shape, d)
        return y, [y], []

    # ---- statements ------------------------------------------------------
    def out_name(self):
        return f"v{self.nval}"

    def try_add(self, stmt):
        env = self.env
        saved = {stmt.out: env.get(stmt.out)}
        params = types.SimpleNamespace(**{n: to_torch(a) for n, a in self.prog.params.items()})
        ns = dict(env)
        ns.update({"torch": torch, "F": F, "self": params})
        try:
            with torch.no_grad():
                exec("\n".join(stmt.lines), ns)
        except Exception:
            return False
        v = ns.get(stmt.out)
        del saved
        if not isinstance(v, torch.Tensor) or v.numel() > MAX_NUMEL or v.dim() > MAX_RANK:
            return False
        if WIDE:
            # edge values on purpose: any value torch computes is kept
            if dname(v) not in WIDE_DTYPES:
                return False
            self.env[stmt.out] = v
            self.prog.stmts.append(stmt)
            self.nval += 1
            return True
        if v.dtype not in (torch.float32, torch.float16, torch.int64, torch.bool):
            return False
        if v.is_floating_point() and v.numel() and (not torch.isfinite(v).all() or v.abs().max() > MAX_ABS):
            return False
        if not v.is_floating_point() and v.dtype != torch.bool and v.numel() and v.abs().max() > 10 ** 9:
            return False
        self.env[stmt.out] = v
        self.prog.stmts.append(stmt)
        self.nval += 1
        return True

    def step(self):
        names, weights = zip(*TEMPLATES)
        for _ in range(40):
            name = self.rng.choices(names, weights)[0]
            ninputs, nparams = len(self.prog.inputs), dict(self.prog.params)
            try:
                stmt = getattr(self, "t_" + name)()
            except _Skip:
                stmt = None
            if stmt is not None:
                stmt.params = list(dict.fromkeys(stmt.params + [p for p in self.prog.params if p not in nparams]))
                if self.try_add(stmt):
                    return True
            # roll back inputs and weights made for a refused statement
            for n in self.prog.inputs[ninputs:]:
                del self.prog.data[n]
                del self.env[n]
            del self.prog.inputs[ninputs:]
            self.prog.params = nparams
        return False


class _Skip(Exception):
    pass


def need(cond):
    if not cond:
        raise _Skip()


def dims_code(dims):
    return "(" + ", ".join(map(str, dims)) + ")" if len(dims) != 1 else f"({dims[0]},)"


def _subscript(rank, d, item, ellipsis=False):
    """x[...] selecting `item` on dim d (of rank dims)."""
    if ellipsis and d == rank - 1 and rank > 1:
        return f"[..., {item}]"
    return "[" + ":, " * d + item + "]"


class Templates(Gen):
    # ---------------- views ----------------
    def _view(self, pred, make, kind):
        x = self.pick(pred)
        need(x is not None)
        t = self.env[x]
        code = make(x, t)
        need(code is not None)
        o = self.out_name()
        return Stmt(o, [f"{o} = {code}"], [x], kind, view=True)

    def t_permute(self):
        def make(x, t):
            p = list(range(t.dim()))
            while p == sorted(p):
                self.rng.shuffle(p)
            if self.rng.random() < 0.5:
                return f"{x}.permute({', '.join(map(str, p))})"
            return f"torch.permute({x}, {dims_code(p)})"
        return self._view(lambda t: t.dim() >= 2, make, "permute")

    def t_transpose(self):
        def make(x, t):
            a, b = self.rng.sample(range(t.dim()), 2)
            if self.rng.random() < 0.3:
                a -= t.dim()
            return f"{x}.transpose({a}, {b})"
        return self._view(lambda t: t.dim() >= 2, make, "transpose")

    def t_mT(self):
        return self._view(lambda t: t.dim() >= 2, lambda x, t: f"{x}.mT", "mT")

    def t_t(self):
        return self._view(lambda t: t.dim() == 2, lambda x, t: f"{x}.t()", "t")

    def t_slice(self):
        def make(x, t):
            d = self.rng.randrange(t.dim())
            n = t.shape[d]
            start = self.rng.choice([None, 0, 1, -2, -1]) if n > 1 else None
            stop = self.rng.choice([None, None, n - 1, -1, n + 2])
            step = self.rng.choice([None, 1, 2, 2, 3])
            item = (("" if start is None else str(start)) + ":" + ("" if stop is None else str(stop))
                    + ("" if step is None else f":{step}"))
            if item == ":":
                item = "1:" if n > 1 else ":"
            return f"{x}{_subscript(t.dim(), d, item, self.rng.random() < 0.5)}"
        return self._view(lambda t: t.dim() >= 1 and max(t.shape) > 1, make, "slice")

    def t_select(self):
        def make(x, t):
            d = self.rng.randrange(t.dim())
            i = self.rng.randrange(-t.shape[d], t.shape[d])
            if self.rng.random() < 0.5:
                return f"{x}.select({d - t.dim() if self.rng.random() < 0.3 else d}, {i})"
            return f"{x}{_subscript(t.dim(), d, str(i), self.rng.random() < 0.5)}"
        return self._view(lambda t: t.dim() >= 1 and t.numel() > 0, make, "select")

    def t_narrow(self):
        def make(x, t):
            d = self.rng.randrange(t.dim())
            n = t.shape[d]
            start = self.rng.randrange(n)
            length = self.rng.randint(1, n - start)
            return f"{x}.narrow({d}, {start}, {length})"
        return self._view(lambda t: t.dim() >= 1 and t.numel() > 0, make, "narrow")

    def t_expand(self):
        def make(x, t):
            sizes = []
            for d in t.shape:
                sizes.append(self.rng.choice([2, 3, 4]) if d == 1 and self.rng.random() < 0.8 else -1)
            lead = []
            if self.rng.random() < 0.4 and t.dim() < MAX_RANK:
                lead = [self.rng.choice([1, 2, 3])]
            full = lead + sizes
            need(any(s != -1 for s in full))
            if self.rng.random() < 0.2:
                full = lead + [t.shape[i] if s == -1 else s for i, s in enumerate(sizes)]
            return f"{x}.expand({', '.join(map(str, full))})"
        return self._view(lambda t: t.dim() < MAX_RANK or 1 in t.shape, make, "expand")

    def t_flip(self):
        def make(x, t):
            k = self.rng.randint(1, t.dim())
            dims = sorted(self.rng.sample(range(t.dim()), k))
            return f"{x}.flip({', '.join(map(str, dims))})" if self.rng.random() < 0.5 else \
                f"torch.flip({x}, {dims_code(dims)})"
        return self._view(lambda t: t.dim() >= 1, make, "flip")

    def t_unsqueeze(self):
        def make(x, t):
            d = self.rng.randint(-t.dim() - 1, t.dim())
            return f"{x}.unsqueeze({d})"
        return self._view(lambda t: t.dim() < MAX_RANK, make, "unsqueeze")

    def t_squeeze(self):
        def make(x, t):
            ones = [i for i, s in enumerate(t.shape) if s == 1]
            r = self.rng.random()
            if r < 0.3:
                return f"{x}.squeeze()"
            if r < 0.45 and len(ones) > 1:
                return f"{x}.squeeze({dims_code(ones)})"
            return f"{x}.squeeze({self.rng.choice(ones)})"
        return self._view(lambda t: 1 in t.shape, make, "squeeze")

    def _factor(self, n):
        """A random shape with n elements."""
        dims = []
        rest = n
        while rest > 1 and len(dims) < 4:
            divs = [d for d in range(2, rest + 1) if rest % d == 0]
            d = self.rng.choice(divs)
            dims.append(d)
            rest //= d
        if rest > 1:
            dims[-1] *= rest
        while self.rng.random() < 0.2 and len(dims) < MAX_RANK:
            dims.insert(self.rng.randrange(len(dims) + 1), 1)
        self.rng.shuffle(dims)
        return dims

    def t_reshape(self):
        def make(x, t):
            shape = self._factor(t.numel())
            if shape and self.rng.random() < 0.3:
                shape[self.rng.randrange(len(shape))] = -1
            how = self.rng.random()
            args = ", ".join(map(str, shape))
            if how < 0.25:
                return f"{x}.view({args})"
            if how < 0.35:
                return f"torch.reshape({x}, {dims_code(shape)})"
            return f"{x}.reshape({args})"
        return self._view(lambda t: t.numel() > 0, make, "reshape")

    def t_flatten(self):
        def make(x, t):
            a = self.rng.randrange(t.dim())
            b = self.rng.randrange(a, t.dim())
            return f"{x}.flatten({a}, {b})" if self.rng.random() < 0.7 else f"torch.flatten({x}, {a})"
        return self._view(lambda t: t.dim() >= 2, make, "flatten")

    def t_unflatten(self):
        def make(x, t):
            cands = [i for i, s in enumerate(t.shape) if s in (4, 6, 8, 9, 10, 12, 16, 18, 20)]
            need(cands)
            d = self.rng.choice(cands)
            n = t.shape[d]
            a = self.rng.choice([k for k in range(2, n) if n % k == 0])
            return f"{x}.unflatten({d}, ({a}, {-1 if self.rng.random() < 0.3 else n // a}))"
        return self._view(lambda t: t.dim() < MAX_RANK and t.dim() >= 1, make, "unflatten")

    def t_movedim(self):
        def make(x, t):
            a, b = self.rng.sample(range(t.dim()), 2)
            return f"torch.movedim({x}, {a}, {b})"
        return self._view(lambda t: t.dim() >= 2, make, "movedim")

    def t_diagonal(self):
        def make(x, t):
            a, b = self.rng.sample(range(t.dim()), 2)
            off = self.rng.choice([0, 0, 1, -1])
            return f"{x}.diagonal({off}, {a}, {b})"
        return self._view(lambda t: t.dim() >= 2 and min(t.shape) >= 2, make, "diagonal")

    def t_split(self):
        def make(x, t):
            d = self.rng.choice([i for i, s in enumerate(t.shape) if s >= 2])
            n = t.shape[d]
            r = self.rng.random()
            if r < 0.4:
                k = self.rng.randint(1, n - 1)
                parts = -(-n // k)
                return f"{x}.split({k}, {d})[{self.rng.randrange(-parts, parts)}]"
            if r < 0.7:
                c = self.rng.randint(2, n)
                parts = len(torch.empty(n).chunk(c))
                return f"{x}.chunk({c}, {d})[{self.rng.randrange(parts)}]"
            return f"{x}.unbind({d})[{self.rng.randrange(n)}]"
        return self._view(lambda t: t.dim() >= 1 and max(t.shape) >= 2, make, "split")

    def t_none_index(self):
        def make(x, t):
            forms = [f"{x}[None]", f"{x}[..., None]"]
            if t.dim() >= 1:
                forms += [f"{x}[:, None]", f"{x}[None, ..., ::2]", f"{x}[..., None, :]"]
            return self.rng.choice(forms)
        return self._view(lambda t: t.dim() < MAX_RANK, make, "index_none")

    def t_contiguous(self):
        x = self.pick(lambda t: not t.is_contiguous())
        need(x is not None)
        o = self.out_name()
        form = self.rng.choice([f"{x}.contiguous()", f"{x}.clone()",
                                f"{x}.clone(memory_format=torch.contiguous_format)"])
        return Stmt(o, [f"{o} = {form}"], [x], "contiguous")

    # ---------------- pointwise ----------------
    FLOAT_UNARY = [
        "torch.neg({x})", "{x}.abs()", "torch.relu({x})", "torch.sigmoid({x})", "{x}.tanh()", "torch.sin({x})",
        "torch.cos({x})", "torch.exp({x}.clamp(max=6))", "torch.log({x}.abs() + 0.5)", "({x}.abs() + 0.25).sqrt()",
        "torch.rsqrt({x}.abs() + 0.5)", "torch.reciprocal({x}.abs() + 0.5)", "torch.erf({x})", "F.gelu({x})",
        "F.gelu({x}, approximate='tanh')", "F.silu({x})", "F.elu({x})", "F.leaky_relu({x}, 0.1)",
        "F.hardtanh({x}, -1.0, 1.0)", "F.hardswish({x})", "F.hardsigmoid({x})", "F.softplus({x})",
        "torch.square({x})", "{x}.floor()", "{x}.ceil()", "torch.round({x})", "torch.trunc({x})",
        "torch.sign({x})", "{x}.clamp(-1.0, 1.5)", "{x}.clamp(min=0.25)", "{x}.abs().pow(1.5)", "{x} ** 2",
        "torch.atan({x})", "torch.expm1({x}.clamp(max=4))", "torch.log1p({x}.abs())", "F.relu6({x} * 4)",
        "torch.frac({x})", "F.mish({x})", "torch.nan_to_num({x})", "{x}.sigmoid() * {x}",
    ]
    INT_UNARY = ["torch.neg({x})", "{x}.abs()", "{x} * 3", "{x}.clamp(-2, 2)", "torch.sign({x})", "{x} ** 2",
                 "{x}.clamp(min=0)", "~{x}", "torch.bitwise_not({x})", "{x} // 2", "{x} % 3", "-{x}"]
    BOOL_UNARY = ["~{x}", "torch.logical_not({x})", "{x}.logical_not()", "torch.bitwise_not({x})"]

    def t_unary(self):
        x = self.pick()
        t = self.env[x]
        if t.is_floating_point():
            forms = self.FLOAT_UNARY
        elif t.dtype == torch.bool:
            forms = self.BOOL_UNARY
        else:
            forms = self.INT_UNARY
        form = self.rng.choice(forms)
        o = self.out_name()
        m = re.search(r"(?:torch|F)\.(\w+)|\}\.(\w+)", form)
        label = (m.group(1) or m.group(2)) if m else {"*": "mul", "/": "floordiv", "%": "remainder", "~": "not",
                                                      "-": "neg"}.get(form.replace("{x}", "").strip()[:1], form)
        if "**" in form:
            label = "pow"
        return Stmt(o, [f"{o} = " + form.format(x=x)], [x], "unary:" + label)

    def t_cast(self):
        x = self.pick()
        t = self.env[x]
        to = self.rng.choice([d for d in cast_names() if d != dname(t)])
        form = self.rng.choice(["{x}.to(torch.{d})", "{x}.{m}()", "{x}.to(dtype=torch.{d})", "{x}.type(torch.{d})"])
        m = METHOD[to]
        if (to in INTS or to == "bool") and t.is_floating_point() and self.rng.random() < 0.5:
            x2 = f"({x} * 2)"  # casts truncate: values that are not integers
        else:
            x2 = x
        o = self.out_name()
        return Stmt(o, [f"{o} = " + form.format(x=x2, d=to, m=m)], [x], f"cast:{to}")

    BINARY = [
        ("add", "{a} + {b}", "torch.add({a}, {b})", "torch.add({a}, {b}, alpha=2)"),
        ("sub", "{a} - {b}", "torch.sub({a}, {b})", "{b} - {a}"),
        ("mul", "{a} * {b}", "torch.mul({a}, {b})", "{b} * {a}"),
        ("div", "{a} / ({bpos})", "torch.div({a}, {bpos})", "torch.div({a}, {bpos}, rounding_mode='floor')",
         "torch.div({a}, {bpos}, rounding_mode='trunc')"),
        ("maximum", "torch.maximum({a}, {b})", "torch.minimum({a}, {b})", "torch.fmax({a}, {b})"),
        ("pow", "({a}.abs() + 0.5) ** {bsmall}", "torch.pow({a}, 2) * {b}"),
        ("remainder", "torch.remainder({a}, {bpos})", "torch.fmod({a}, {bpos})", "{a} % ({bpos})"),
        ("atan2", "torch.atan2({a}, {b})",),
        ("floor_divide", "torch.floor_divide({a}, {bpos})", "{a} // ({bpos})"),
    ]
    COMPARE = ["{a} == {b}", "{a} != {b}", "{a} < {b}", "{a} <= {b}", "{a} > {b}", "{a} >= {b}",
               "torch.eq({a}, {b})", "torch.gt({a}, {b})", "{a}.le({b})", "torch.ne({a}, {b})"]
    LOGICAL = ["{a} & {b}", "{a} | {b}", "{a} ^ {b}", "torch.logical_and({a}, {b})", "torch.logical_or({a}, {b})",
               "torch.logical_xor({a}, {b})", "torch.bitwise_and({a}, {b})"]

    def _binary(self, forms, kind, dtype=None, want_float=False, a_pred=None):
        a = self.pick(a_pred)
        need(a is not None)
        b, bargs, bparams = self.partner(a, dtype=dtype, want_float=want_float)
        form = self.rng.choice(forms)
        bt = None if not bargs else self.env[bargs[0]]
        is_scalar = not bargs and not bparams
        if is_scalar:
            if b in ("True", "False"):
                bpos, bsmall = "1.5", "1.0"
            else:
                bpos = str(abs(float(b)) + 0.5) if "." in b else str(abs(int(b)) + 1)
                bsmall = repr(min(abs(float(b)), 2.0))
        else:
            bfloat = bt.is_floating_point() if bt is not None else True
            bpos = f"{b}.abs() + {'0.5' if bfloat else '1'}"
            bsmall = f"{b}.clamp(-2, 2)"
        code = form.format(a=a, b=b, bpos=bpos, bsmall=bsmall)
        o = self.out_name()
        return Stmt(o, [f"{o} = {code}"], [a] + bargs, kind, params=bparams)

    def t_binary(self):
        forms = self.rng.choice(self.BINARY)
        return self._binary(forms[1:], "binary:" + forms[0])

    def t_compare(self):
        return self._binary(self.COMPARE, "compare")

    def t_logical(self):
        d = self.rng.choice(["bool", "bool", "int64"] + (["int32", "int8", "uint8"] if WIDE else []))
        return self._binary(self.LOGICAL, "logical", dtype=d, a_pred=lambda t: dname(t) == d)

    def _bool_value(self, like):
        """A bool operand that broadcasts to `like`'s shape."""
        t = self.env[like]

        def ok(u):
            if u.dtype != torch.bool:
                return False
            try:
                return list(torch.broadcast_shapes(u.shape, t.shape)) == list(t.shape)
            except RuntimeError:
                return False
        c = self.pick(ok)
        if c is not None and self.rng.random() < 0.8:
            return c, [c]
        if self.rng.random() < 0.4:
            # a comparison made on the spot from `like`
            return f"({like} > {self.rng.choice(['0', '0.5', '-0.25', '1'])})", [like]
        shape = self.broadcast_shape(t.shape)
        while len(shape) > t.dim():
            shape = shape[1:]
        c = self.new_input(shape, "bool")
        return c, [c]

    def t_where(self):
        a = self.pick()
        c, cargs = self._bool_value(a)
        b, bargs, bparams = self.partner(a)
        if self.rng.random() < 0.5:
            code = f"torch.where({c}, {a}, {b})"
        else:
            code = f"torch.where({c}, {b}, {a})"
        o = self.out_name()
        return Stmt(o, [f"{o} = {code}"], [a] + cargs + bargs, "where", params=bparams)

    def t_masked_fill(self):
        a = self.pick()
        m, margs = self._bool_value(a)
        t = self.env[a]
        v = {"bool": "True", "int64": "-3", "int32": "-3", "int8": "-3", "uint8": "3"}.get(
            dname(t), self.rng.choice(["-1.5", "0.0", "2.25"]))
        o = self.out_name()
        return Stmt(o, [f"{o} = {a}.masked_fill({m}, {v})"], [a] + margs, "masked_fill")

    # ---------------- reductions ----------------
    def _dims(self, t, allow_none=True):
        r = self.rng.random()
        if t.dim() == 0 or (allow_none and r < 0.15):
            return None
        k = 1 if r < 0.7 or t.dim() == 1 else self.rng.randint(2, t.dim())
        dims = sorted(self.rng.sample(range(t.dim()), k))
        dims = [d - t.dim() if self.rng.random() < 0.25 else d for d in dims]
        return dims

    def t_reduce(self):
        x = self.pick()
        t = self.env[x]
        need(t.numel() > 0)
        dims = self._dims(t)
        keep = self.rng.random() < 0.4
        fl = t.is_floating_point()
        ops = ["sum", "amax", "amin"]
        if fl:
            ops += ["mean", "mean", "std", "var", "logsumexp", "prod", "norm"]
        elif t.dtype == torch.bool:
            ops += ["any", "all", "any", "all"]
        else:
            ops += ["prod", "any"]
        op = self.rng.choice(ops)
        if dims is None:
            dsel = "" if op not in ("logsumexp",) else f"{list(range(t.dim()))}"
            kw = ""
        else:
            dsel = str(dims[0]) if len(dims) == 1 and self.rng.random() < 0.6 else dims_code(dims)
            kw = ", keepdim=True" if keep else ""
        if op in ("prod", "any", "all") and dims is not None:
            dsel = str(dims[0])
        if op == "std" or op == "var":
            corr = self.rng.choice(["", ", correction=0", ", unbiased=False"])
            code = f"{x}.{op}({dsel}{kw}{corr})" if dsel else f"{x}.{op}()"
        elif op == "logsumexp":
            code = f"torch.logsumexp({x}, {dsel}{kw})"
        elif op == "norm":
            code = f"{x}.norm(dim={dsel}{kw})" if dsel else f"{x}.norm()"
        elif op == "sum" and not fl and self.rng.random() < 0.3 and dsel:
            code = f"{x}.sum({dsel}{kw}, dtype=torch.float32)"
        else:
            code = f"{x}.{op}({dsel}{kw})" if dsel else f"{x}.{op}()"
            if op in ("amax", "amin") and not dsel:
                code = f"torch.{op}({x})"
        o = self.out_name()
        return Stmt(o, [f"{o} = {code}"], [x], f"reduce:{op}")

    def t_argmax(self):
        x = self.pick(lambda t: t.numel() > 0 and t.dtype != torch.bool)
        need(x is not None)
        t = self.env[x]
        op = self.rng.choice(["argmax", "argmin", "max", "min"])
        keep = self.rng.random() < 0.4
        if t.dim() == 0 or (op.startswith("arg") and self.rng.random() < 0.2):
            code = f"{x}.{op}()"
        else:
            d = self.rng.randrange(-t.dim(), t.dim())
            kw = ", keepdim=True" if keep else ""
            if op.startswith("arg"):
                code = f"{x}.{op}({d}{kw})"
            else:
                field = self.rng.choice(["values", "indices", "[0]", "[1]"])
                code = f"{x}.{op}({d}{kw})" + (f".{field}" if field[0] != "[" else field)
                op = f"{op}.dim"
        o = self.out_name()
        return Stmt(o, [f"{o} = {code}"], [x], f"reduce:{op}")

    def t_cumsum(self):
        x = self.pick(lambda t: t.dim() >= 1)
        need(x is not None)
        t = self.env[x]
        d = self.rng.randrange(-t.dim(), t.dim())
        op = "cumsum"
        o = self.out_name()
        return Stmt(o, [f"{o} = {x}.{op}({d})"], [x], op)

    def t_softmax(self):
        x = self.pick(lambda t: t.is_floating_point() and t.dim() >= 1)
        need(x is not None)
        t = self.env[x]
        d = self.rng.randrange(-t.dim(), t.dim())
        form = self.rng.choice(["torch.softmax({x}, {d})", "F.softmax({x}, dim={d})", "{x}.log_softmax({d})",
                                "F.log_softmax({x}, dim={d})", "torch.softmax({x}, {d}, dtype=torch.float32)"])
        o = self.out_name()
        return Stmt(o, [f"{o} = " + form.format(x=x, d=d)], [x], "log_softmax" if "log" in form else "softmax")

    def t_layer_norm(self):
        x = self.pick(lambda t: t.is_floating_point() and t.dim() >= 1)
        need(x is not None)
        t = self.env[x]
        k = self.rng.randint(1, min(2, t.dim()))
        shape = list(t.shape[-k:])
        params = []
        w = b = "None"
        if self.rng.random() < 0.7:
            w = self.new_param(shape, dname(t))
            params.append(w)
            w = f"self.{w}"
            if self.rng.random() < 0.7:
                b = self.new_param(shape, dname(t))
                params.append(b)
                b = f"self.{b}"
        eps = self.rng.choice(["1e-05", "0.001"])
        o = self.out_name()
        return Stmt(o, [f"{o} = F.layer_norm({x}, {tuple(shape)}, {w}, {b}, {eps})"], [x], "layer_norm",
                    params=params)

    # ---------------- linear algebra ----------------
    def t_matmul(self):
        x = self.pick(lambda t: t.dim() >= 1 and t.dtype != torch.bool and t.numel() > 0)
        need(x is not None)
        t = self.env[x]
        k = t.shape[-1]
        dt = dname(t)
        r = self.rng.random()
        o = self.out_name()
        if t.dim() >= 2 and r < 0.2:
            # with a view of itself
            form = self.rng.choice(["{x} @ {x}.mT", "torch.matmul({x}.transpose(-1, -2), {x})"])
            return Stmt(o, [f"{o} = " + form.format(x=x)], [x], "matmul")
        m = self.rng.choice([1, 2, 3, 4])
        if t.dim() == 3 and r < 0.35:
            other = self._operand([t.shape[0], k, m], dt)
            return Stmt(o, [f"{o} = torch.bmm({x}, {other[0]})"], [x] + other[1], "bmm", params=other[2])
        if t.dim() == 2 and r < 0.45:
            other = self._operand([k, m], dt)
            return Stmt(o, [f"{o} = torch.mm({x}, {other[0]})"], [x] + other[1], "mm", params=other[2])
        if r < 0.6 and t.is_floating_point():
            w = self._operand([m, k], dt, param=True)
            b = self._operand([m], dt, param=True) if self.rng.random() < 0.6 else ("None", [], [])
            return Stmt(o, [f"{o} = F.linear({x}, {w[0]}, {b[0]})"], [x] + w[1] + b[1], "linear",
                        params=w[2] + b[2])
        if r < 0.75:
            shape = [k] if self.rng.random() < 0.3 else [k, m]
            if t.dim() >= 3 and self.rng.random() < 0.4:
                shape = [self.rng.choice([1, t.shape[-3]])] + [k, m]
            other = self._operand(shape, dt)
            return Stmt(o, [f"{o} = {x} @ {other[0]}"], [x] + other[1], "matmul", params=other[2])
        # x on the right
        n = t.shape[-2] if t.dim() >= 2 else t.shape[0]
        other = self._operand([m, n] if self.rng.random() < 0.7 else [n], dt)
        return Stmt(o, [f"{o} = torch.matmul({other[0]}, {x})"], [x] + other[1], "matmul", params=other[2])

    def _operand(self, shape, dtype, param=None):
        """A tensor of this shape: a value that has it, a weight or an input."""
        y = self.pick(lambda u: list(u.shape) == list(shape) and dname(u) == dtype)
        if y is not None and not param and self.rng.random() < 0.5:
            return y, [y], []
        if dtype in FLOATS and (param or self.rng.random() < 0.5):
            w = self.new_param(shape, dtype)
            return f"self.{w}", [], [w]
        y = self.new_input(shape, dtype)
        return y, [y], []

    # ---------------- convolution and pooling ----------------
    def t_conv(self):
        nd = self.rng.choice([1, 2, 2])
        x = self.pick(lambda t: t.is_floating_point() and t.dim() in (nd + 1, nd + 2) and t.numel() > 0)
        need(x is not None)
        t = self.env[x]
        cin = t.shape[-nd - 1]
        spatial = list(t.shape[-nd:])
        groups = self.rng.choice([g for g in (1, 1, 2, 3) if cin % g == 0])
        cout = groups * self.rng.choice([1, 2, 3])
        ksz = [self.rng.randint(1, min(3, s + 2)) for s in spatial]
        stride = self.rng.choice([1, 1, 2])
        dil = self.rng.choice([1, 1, 1, 2])
        pad = self.rng.choice([0, 0, 1, "'same'", "'valid'", 2])
        if pad == "'same'":
            stride = 1
        transposed = self.rng.random() < 0.15
        dt = dname(t)
        params = []
        if transposed:
            wshape = [cin, cout // groups] + ksz
            pad = self.rng.choice([0, 1]) if pad not in (0, 1) else pad
        else:
            wshape = [cout, cin // groups] + ksz
        w = self.new_param(wshape, dt)
        params.append(w)
        b = "None"
        if self.rng.random() < 0.6:
            b = self.new_param([cout], dt)
            params.append(b)
            b = f"self.{b}"
        o = self.out_name()
        if transposed:
            op = f"conv_transpose{nd}d"
            outpad = self.rng.choice([0, 0, 1]) if stride > 1 else 0
            code = (f"F.{op}({x}, self.{w}, {b}, stride={stride}, padding={pad}, output_padding={outpad}, "
                    f"groups={groups}, dilation={dil})")
        else:
            op = f"conv{nd}d"
            code = f"F.{op}({x}, self.{w}, {b}, stride={stride}, padding={pad}, dilation={dil}, groups={groups})"
        return Stmt(o, [f"{o} = {code}"], [x], op, params=params)

    def t_pool(self):
        nd = self.rng.choice([1, 2, 2])
        x = self.pick(lambda t: t.is_floating_point() and t.dim() in (nd + 1, nd + 2) and t.numel() > 0)
        need(x is not None)
        t = self.env[x]
        spatial = list(t.shape[-nd:])
        kind = self.rng.choice(["max", "max", "avg", "avg", "adaptive_avg", "adaptive_max"])
        o = self.out_name()
        if kind.startswith("adaptive"):
            sizes = [self.rng.randint(1, max(1, s + 1)) for s in spatial]
            arg = sizes[0] if nd == 1 else tuple(sizes)
            code = f"F.{kind}_pool{nd}d({x}, {arg})"
        else:
            k = [self.rng.randint(1, min(3, s + 1)) for s in spatial]
            stride = self.rng.choice([None, 1, 2])
            pad = self.rng.choice([0, 0, 1]) if min(k) >= 2 else 0
            ceil = self.rng.random() < 0.3
            ks = k[0] if nd == 1 or self.rng.random() < 0.3 and len(set(k)) == 1 else tuple(k)
            extra = f", stride={stride}" if stride else ""
            extra += f", padding={pad}" if pad else ""
            extra += ", ceil_mode=True" if ceil else ""
            if kind == "avg" and self.rng.random() < 0.4:
                extra += ", count_include_pad=False"
            if kind == "max" and self.rng.random() < 0.15:
                extra += ", dilation=2"
            code = f"F.{kind}_pool{nd}d({x}, {ks}{extra})"
            if kind == "max" and self.rng.random() < 0.15:
                code = f"F.{kind}_pool{nd}d({x}, {ks}{extra}, return_indices=True)[1]"
        return Stmt(o, [f"{o} = {code}"], [x], f"{kind}_pool{nd}d")

    # ---------------- joining ----------------
    def t_cat(self):
        x = self.pick(lambda t: t.dim() >= 1)
        need(x is not None)
        t = self.env[x]
        d = self.rng.randrange(t.dim())
        r = self.rng.random()
        o = self.out_name()
        if r < 0.25:
            other, args, params = f"{x}.flip({d})", [], []
        else:
            def ok(u):
                return u.dim() == t.dim() and all(u.shape[i] == t.shape[i] for i in range(t.dim()) if i != d)
            y = self.pick(ok) if r < 0.6 else None
            if y is not None:
                other, args, params = y, [y], []
            else:
                shape = list(t.shape)
                shape[d] = self.rng.choice([1, 2, 3])
                dt = dname(t) if self.rng.random() < 0.75 else self.dtype()
                other, args, params = self._operand(shape, dt)
        dd = d - t.dim() if self.rng.random() < 0.3 else d
        parts = [x, other] if self.rng.random() < 0.5 else [other, x]
        if self.rng.random() < 0.2:
            parts.append(x)
        return Stmt(o, [f"{o} = torch.cat([{', '.join(parts)}], {dd})"], [x] + args, "cat", params=params)

    def t_stack(self):
        x = self.pick(lambda t: t.dim() < MAX_RANK)
        need(x is not None)
        t = self.env[x]
        d = self.rng.randint(-t.dim() - 1, t.dim())
        if self.rng.random() < 0.3 and t.dim() >= 1:
            other, args, params = f"{x}.flip(0)", [], []
        else:
            other, args, params = self._operand(list(t.shape), dname(t) if self.rng.random() < 0.8 else self.dtype())
        o = self.out_name()
        return Stmt(o, [f"{o} = torch.stack([{x}, {other}], {d})"], [x] + args, "stack", params=params)

    # ---------------- indexing and the rest ----------------
    def t_index(self):
        x = self.pick(lambda t: t.dim() >= 1 and t.numel() > 0)
        need(x is not None)
        t = self.env[x]
        d = self.rng.randrange(t.dim())
        n = t.shape[d]
        r = self.rng.random()
        o = self.out_name()
        if r < 0.4:
            idx = [self.rng.randrange(n) for _ in range(self.rng.randint(1, 4))]
            return Stmt(o, [f"{o} = {x}.index_select({d}, torch.tensor({idx}))"], [x], "index_select")
        if r < 0.65:
            shape = list(t.shape)
            shape[d] = self.rng.randint(1, 3)
            idx = self.np.integers(0, n, size=shape)
            return Stmt(o, [f"{o} = torch.gather({x}, {d}, {literal(idx.astype(np.int64))})"], [x], "gather")
        # (no boolean-mask indexing: its data-dependent shape is refused by
        # ir2onnx by design)
        idx = [self.rng.randrange(-n, n) for _ in range(self.rng.randint(1, 3))]
        return Stmt(o, [f"{o} = {x}{_subscript(t.dim(), d, str(idx))}"], [x], "index")

    def t_misc(self):
        x = self.pick(lambda t: t.dim() >= 1 and t.numel() > 0)
        need(x is not None)
        t = self.env[x]
        d = self.rng.randrange(t.dim())
        o = self.out_name()
        r = self.rng.random()
        if r < 0.3:
            shift = self.rng.choice([1, -1, 2])
            return Stmt(o, [f"{o} = torch.roll({x}, {shift}, {d})"], [x], "roll")
        if r < 0.5 and t.dim() >= 2:
            op = self.rng.choice(["tril", "triu"])
            return Stmt(o, [f"{o} = torch.{op}({x}, {self.rng.choice([0, 1, -1])})"], [x], op)
        if r < 0.75 and t.dtype != torch.bool:
            k = self.rng.randint(1, t.shape[d])
            largest = self.rng.choice(["", ", largest=False"])
            return Stmt(o, [f"{o} = {x}.topk({k}, {d}{largest}).values"], [x], "topk")
        if t.dtype != torch.bool:
            desc = self.rng.choice(["", ", descending=True"])
            return Stmt(o, [f"{o} = {x}.sort({d}{desc}).values"], [x], "sort")
        return Stmt(o, [f"{o} = {x}.repeat({', '.join(str(self.rng.choice([1, 2])) for _ in range(t.dim()))})"],
                    [x], "repeat")

    def t_inplace(self):
        """A clone updated in place through a view (functionalisation)."""
        x = self.pick(lambda t: t.dim() >= 1 and t.numel() > 0)
        need(x is not None)
        t = self.env[x]
        o = self.out_name()
        d = self.rng.randrange(t.dim())
        n = t.shape[d]
        views = [_subscript(t.dim(), d, f"{self.rng.randrange(n)}"),
                 _subscript(t.dim(), d, "::2"),
                 _subscript(t.dim(), d, f"{self.rng.randrange(n)}:")]
        if t.dim() >= 2:
            views.append(".transpose(0, 1)" + _subscript(t.dim(), 0, "0"))
            views.append(".diagonal()[...]")
        view = self.rng.choice(views)
        fl = t.is_floating_point()
        r = self.rng.random()
        args = [x]
        if r < 0.4:
            val = self.rng.choice(["1.5", "-0.5"]) if fl else ("True" if t.dtype == torch.bool else "7")
            line = f"{o}{view} = {val}"
        elif r < 0.7 and t.dtype != torch.bool:
            op = self.rng.choice(["add_", "mul_", "sub_"] + (["relu_", "neg_"] if fl else []))
            arg = "" if op in ("relu_", "neg_") else ("2" if not fl else "0.5")
            line = f"{o}{view}.{op}({arg})"
        else:
            y = self.pick(lambda u: u.dim() <= 1)
            args.append(y)
            line = f"{o}{view} = {y}"
        form = self.rng.choice([f"{o} = {x}.clone()", f"{o} = {x} + 0" if t.dtype != torch.bool else
                                f"{o} = {x}.clone()"])
        return Stmt(o, [form, line], args, "inplace")


TEMPLATES = [
    # views
    ("permute", 5), ("transpose", 4), ("mT", 1.5), ("t", 1), ("slice", 6), ("select", 3), ("narrow", 2),
    ("expand", 3), ("flip", 2.5), ("unsqueeze", 3), ("squeeze", 2), ("reshape", 4), ("flatten", 1.5),
    ("unflatten", 1), ("movedim", 1), ("diagonal", 1), ("split", 2), ("none_index", 1), ("contiguous", 1),
    # compute
    ("unary", 9), ("cast", 3), ("binary", 11), ("compare", 3), ("logical", 1.5), ("where", 3),
    ("masked_fill", 1.5), ("reduce", 6), ("argmax", 2), ("cumsum", 1), ("softmax", 3), ("layer_norm", 2),
    ("matmul", 4), ("conv", 3), ("pool", 3), ("cat", 3), ("stack", 1.5), ("index", 2), ("misc", 2),
    ("inplace", 2),
]


def generate(seed, max_ops=8):
    g = Templates(seed)
    # inputs: 1-2, some ready for conv/pooling
    for _ in range(g.rng.choice([1, 1, 2, 2, 3])):
        if g.rng.random() < 0.3:
            rank = g.rng.choice([3, 4])
            shape = [g.rng.choice([1, 2]), g.rng.choice([1, 2, 3, 4])] + [g.rng.choice([3, 4, 5, 6])
                                                                           for _ in range(rank - 2)]
            if int(np.prod(shape)) > 96:
                shape = shape[:-1] + [3]
            g.new_input(shape, g.float_dtype)
        else:
            g.new_input(g.shape(), g.dtype())
    n_ops = g.rng.randint(2, max_ops)
    for _ in range(n_ops):
        g.step()
    prog = g.prog
    if not prog.stmts:
        return None
    used = {a for s in prog.stmts for a in s.args}
    leaves = [s.out for s in prog.stmts if s.out not in used]
    last = prog.stmts[-1].out
    others = [v for v in leaves if v != last]
    g.rng.shuffle(others)
    prog.outputs = [last] + others[:2]
    return dce(prog)


# --------------------------------------------------------------------------
# torch: eager, export, save
# --------------------------------------------------------------------------


def same(a, b, float_tol):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    tol = 1e-3 if a.dtype == torch.float16 else 1e-2 if a.dtype == torch.bfloat16 else float_tol
    return torch.allclose(a.double(), b.double(), atol=tol, rtol=tol, equal_nan=True)


def to_numpy(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().copy().view(np_dtype("bfloat16"))
    return t.numpy().copy()


class Verdict:
    """kept: the program passes the torch checks; reason otherwise."""

    def __init__(self, kept, reason=None, ep=None, expected=None, names=None, loose=None):
        self.loose = loose
        self.kept = kept
        self.reason = reason
        self.ep = ep
        self.expected = expected
        self.names = names


def torch_check(prog):
    """Eager run, export, and the exported module against eager."""
    import torch.utils._pytree as pytree

    try:
        mod = build_module(prog)
        args = torch_inputs(prog)
        with torch.no_grad():
            eager = pytree.tree_leaves(mod(*args))
    except Exception as e:  # noqa: BLE001
        return Verdict(False, f"eager: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    if not all(isinstance(t, torch.Tensor) for t in eager):
        return Verdict(False, "eager: an output is no tensor")
    try:
        ep = torch.export.export(build_module(prog), torch_inputs(prog))
    except Exception as e:  # noqa: BLE001
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return Verdict(False, f"export refuses: {type(e).__name__}: {first[:160]}")
    try:
        with torch.no_grad():
            exported = pytree.tree_leaves(ep.module()(*torch_inputs(prog)))
    except Exception as e:  # noqa: BLE001
        return Verdict(False, f"export differs: the exported module fails: {type(e).__name__}")
    if len(exported) != len(eager) or not all(same(a, b, 1e-6) for a, b in zip(exported, eager)):
        return Verdict(False, "export differs: outputs differ from eager")
    from torch.export.graph_signature import InputKind

    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    if len(names) != len(prog.inputs):
        return Verdict(False, "export differs: user inputs dropped")
    loose = through_float16(prog, evaluate(prog))
    return Verdict(True, ep=ep, expected=[to_numpy(t) for t in eager], names=names, loose=loose)


def save_pt2(ep, path, deflate=False):
    torch.export.save(ep, str(path))
    if deflate:
        tmp = Path(str(path) + ".tmp")
        with zipfile.ZipFile(path) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
            for info in zin.infolist():
                data = zin.read(info.filename)
                if info.filename.endswith(".data/serialization_id"):
                    data = b"0" * len(data)  # stable bytes from run to run
                zi = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
                zi.compress_type = zipfile.ZIP_DEFLATED
                zout.writestr(zi, data)
        os.replace(tmp, path)


def save_npz(path, prog, names, expected):
    arrays = {f"in:{n}": prog.data[p] for n, p in zip(names, prog.inputs)}
    arrays.update({f"out:{i}": a for i, a in enumerate(expected)})
    np.savez_compressed(path, **arrays)


def check_program(prog, bin_dir, work, stem, stages="BCD", deflate=False):
    """(verdict, stage results or None)."""
    v = torch_check(prog)
    if not v.kept:
        return v, None
    pt2 = Path(work) / f"{stem}.pt2"
    save_pt2(v.ep, pt2, deflate)
    inputs = {n: prog.data[p] for n, p in zip(v.names, prog.inputs)}
    res = check_random.run_stages(bin_dir, pt2, v.names, inputs, v.expected, work, stages, v.loose)
    return v, res


# --------------------------------------------------------------------------
# Shrinking
# --------------------------------------------------------------------------


def candidates(prog, env):
    """Smaller variants of prog, the larger cuts first."""
    if len(prog.outputs) > 1:
        for o in prog.outputs:
            p = prog.copy()
            p.outputs = [o]
            yield "one output", p
    for i in reversed(range(len(prog.stmts))):
        s = prog.stmts[i]
        v = env[s.out]
        # bypass: the op goes, an argument of the same shape and dtype stands in
        for a in s.args:
            u = env[a]
            if list(u.shape) == list(v.shape) and u.dtype == v.dtype:
                p = prog.copy()
                p.stmts = prog.stmts[:i] + [t.rename(s.out, a) for t in prog.stmts[i + 1:]]
                p.outputs = [a if o == s.out else o for o in prog.outputs]
                if len(set(p.outputs)) == len(p.outputs) and not all(o in p.inputs for o in p.outputs):
                    yield f"bypass {s.kind}", p
    for i in range(len(prog.stmts)):
        s = prog.stmts[i]
        # cut: the value becomes a new input holding what it held
        if s.out in prog.outputs and len(prog.outputs) == 1:
            continue
        p = prog.copy()
        name = f"x{len(prog.inputs)}"
        while name in prog.data:
            name = "x" + name[1:] + "_"
        p.stmts = prog.stmts[:i] + [t.rename(s.out, name) for t in prog.stmts[i + 1:]]
        p.outputs = [name if o == s.out else o for o in prog.outputs]
        if all(o in p.data or o == name for o in p.outputs):
            continue
        p.inputs = prog.inputs + [name]
        p.data = dict(prog.data)
        p.data[name] = to_numpy(env[s.out])
        yield f"cut {s.kind}", p
    for i, s in enumerate(prog.stmts):
        # a view (or any op) replaced by a reshape of its first argument to the same shape
        if not s.args:
            continue
        a = s.args[0]
        u, v = env[a], env[s.out]
        if s.kind in ("reshape",) or u.numel() != v.numel() or u.dtype != v.dtype:
            continue
        p = prog.copy()
        p.stmts = list(prog.stmts)
        p.stmts[i] = Stmt(s.out, [f"{s.out} = {a}.reshape({', '.join(map(str, v.shape))})"], [a], "reshape",
                          view=True)
        yield f"reshape for {s.kind}", p


def shrink(prog, stage, key, bin_dir, work, budget=80, log=None):
    """The smallest variant found that still fails `stage` with `key`."""
    best = dce(prog)
    tries = 0
    progress = True
    while progress and tries < budget:
        progress = False
        env = evaluate(best)
        for what, cand in candidates(best, env):
            cand = dce(cand)
            if not cand.stmts and not cand.outputs:
                continue
            tries += 1
            try:
                v, res = check_program(cand, bin_dir, work, "shrink", stages=stage)
            except Exception:  # noqa: BLE001 - a candidate that breaks the generator is no reproducer
                v, res = None, None
            if res and res[stage] and res[stage][0] == key:
                best = cand
                progress = True
                if log:
                    log(f"    shrink: {what} -> {len(best.stmts)} ops")
                break
            if tries >= budget:
                break
    return best, tries


# --------------------------------------------------------------------------
# Drivers
# --------------------------------------------------------------------------


def program_seed(seed, index):
    return f"{seed}:{index}"


def make_program(seed, index):
    return generate(program_seed(seed, index))


def write_repro(out_dir, stem, prog, stage, message, bin_dir, work):
    """NAME.py (the snippet), NAME.pt2, NAME.npz, NAME.prog.json, NAME.err.txt."""
    out_dir.mkdir(parents=True, exist_ok=True)
    v = torch_check(prog)
    comment = (f"# fuzz_graphs reproducer {stem}: stage {stage} ({check_random.STAGES[stage]}) fails:\n"
               + "".join(f"#   {line}\n" for line in message.strip().splitlines()[:12]))
    (out_dir / f"{stem}.py").write_text(snippet(prog, comment))
    (out_dir / f"{stem}.prog.json").write_text(json.dumps(prog.to_json()) + "\n")
    (out_dir / f"{stem}.err.txt").write_text(message.strip() + "\n")
    if v.kept:
        save_pt2(v.ep, out_dir / f"{stem}.pt2")
        save_npz(out_dir / f"{stem}.npz", prog, v.names, v.expected)
    return v


def manifest_entry(name, prog, names, expected, loose):
    return {
        "name": name,
        "inputs": [{"name": n, "dtype": str(prog.data[p].dtype), "shape": list(prog.data[p].shape)}
                   for n, p in zip(names, prog.inputs)],
        "outputs": [{"dtype": str(a.dtype), "shape": list(a.shape),
                     **({"tolerance": h if isinstance(h, str) else "float16"}
                        if h and a.dtype.kind == "f" and a.dtype != np.float16 else {})}
                    for a, h in zip(expected, loose)],
        "ops": prog.ops(),
        "source": module_source(prog),
    }


def _worker_init():
    _import_torch()
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


_SHRUNK = None


def fuzz_one(task):
    """One program of a batch: generate, check, shrink each failing stage."""
    seed, index, bin_dir, out_dir, shrink_cap, budget = task
    name = f"s{seed}_{index:05d}"
    work = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    started = time.monotonic()
    rec = {"name": name, "index": index}
    try:
        prog = make_program(seed, index)
        if prog is None:
            rec["verdict"] = "empty"
            return rec
        rec["ops"] = prog.ops()
        v, res = check_program(prog, bin_dir, work, name)
        if not v.kept:
            rec["verdict"] = v.reason
            return rec
        rec["verdict"] = "kept"
        rec["stages"] = {s: (None if r is None else list(r)) for s, r in res.items()}
        rec["repros"] = {}
        seen = set()
        for stage, r in res.items():
            if r is None or r[0] in seen:
                continue
            seen.add(r[0])
            sig = f"{stage}|{r[0]}"
            with _SHRUNK.get_lock():
                count = _SHRUNK_COUNTS.get(sig, 0)
                _SHRUNK_COUNTS[sig] = count + 1
            small, tries = (shrink(prog, stage, r[0], bin_dir, work, budget) if count < shrink_cap
                            else (prog, 0))
            stem = f"{name}-{stage}"
            # the message of the reproducer itself
            _, rr = check_program(small, bin_dir, work, "final", stages=stage)
            message = rr[stage][1] if rr and rr[stage] else r[1]
            write_repro(Path(out_dir) / "failures", stem, small, stage, message, bin_dir, work)
            rec["repros"][stage] = {"stem": stem, "ops": len(small.stmts), "from_ops": len(prog.stmts),
                                    "shrunk": count < shrink_cap, "tries": tries}
    except Exception:  # noqa: BLE001 - the generator's own fault: recorded
        rec["verdict"] = "generator error"
        rec["traceback"] = traceback.format_exc()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        rec["seconds"] = round(time.monotonic() - started, 2)
    return rec


_SHRUNK_COUNTS = {}


def _pool_init(counter, counts):
    global _SHRUNK, _SHRUNK_COUNTS
    _SHRUNK = counter
    _SHRUNK_COUNTS = counts
    _worker_init()


def summarize(records, out):
    """The batch summary (by stage and error) as text."""
    verdicts = collections.Counter()
    kept = [r for r in records if r.get("verdict") == "kept"]
    for r in records:
        v = r.get("verdict", "?")
        verdicts["kept" if v == "kept" else v.split(":")[0] + ": " + ":".join(v.split(":")[1:2]).strip()] += 1
    lines = [f"generated: {len(records)}", f"kept: {len(kept)}"]
    lines.append("not kept:")
    for v, n in sorted(verdicts.items(), key=lambda kv: -kv[1]):
        if v != "kept":
            lines.append(f"  {n:6d}  {v}")
    any_fail = sum(1 for r in kept if any(r["stages"].values()))
    lines.append(f"kept programs failing any stage: {any_fail} (passing all: {len(kept) - any_fail})")
    for stage in "BCD":
        fails = [r for r in kept if r["stages"].get(stage)]
        lines.append(f"stage {stage} ({check_random.STAGES[stage]}): {len(kept) - len(fails)} passed, "
                     f"{len(fails)} failed")
        groups = collections.defaultdict(list)
        for r in fails:
            groups[r["stages"][stage][0]].append(r)
        for key, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            repros = [r["repros"][stage] for r in rs if stage in r.get("repros", {})]
            smallest = min(repros, key=lambda x: x["ops"]) if repros else None
            ops = collections.Counter(o for r in rs for o in r["ops"])
            lines.append(f"  {len(rs):5d}  {key}")
            if smallest:
                lines.append(f"         smallest reproducer: failures/{smallest['stem']}.py ({smallest['ops']} ops)")
            lines.append(f"         ops most seen: {', '.join(f'{k}' for k, _ in ops.most_common(5))}")
    errs = [r for r in records if r.get("verdict") == "generator error"]
    if errs:
        lines.append(f"generator errors: {len(errs)} (first: {errs[0]['name']})")
        lines.append(errs[0]["traceback"])
    text = "\n".join(lines) + "\n"
    return text


def batch(args):
    import multiprocessing as mp

    out = Path(args.out)
    if (out / "failures").exists():
        shutil.rmtree(out / "failures")
    (out / "failures").mkdir(parents=True, exist_ok=True)
    ctx = mp.get_context("spawn")
    manager = ctx.Manager()
    counts = manager.dict()
    counter = ctx.Value("i", 0)
    tasks = [(args.seed, i, str(Path(args.bin).resolve()), str(out.resolve()), args.shrink_per_error,
              args.shrink_budget) for i in range(args.start, args.start + args.n)]
    records = []
    started = time.monotonic()
    deadline = started + args.minutes * 60 if args.minutes else None
    with ctx.Pool(args.jobs, initializer=_pool_init, initargs=(counter, counts)) as pool:
        for rec in pool.imap_unordered(fuzz_one, tasks, chunksize=1):
            records.append(rec)
            failed = [s for s, r in rec.get("stages", {}).items() if r]
            if failed:
                what = " ".join(f"{s}: {rec['stages'][s][0]}" for s in failed)
                print(f"{rec['name']}: FAIL {what}", flush=True)
            if len(records) % 100 == 0:
                kept = sum(1 for r in records if r.get("verdict") == "kept")
                print(f"-- {len(records)} generated, {kept} kept, {time.monotonic() - started:.0f} s", flush=True)
            if deadline and time.monotonic() > deadline:
                print(f"-- time is up after {len(records)} programs", flush=True)
                pool.terminate()
                break
    records.sort(key=lambda r: r["index"])
    text = summarize(records, out)
    text += f"seed {args.seed}, programs {args.start}..{args.start + len(records) - 1}, " \
            f"{time.monotonic() - started:.0f} s\n"
    (out / "summary.txt").write_text(text)
    (out / "records.json").write_text(json.dumps(records, indent=0) + "\n")
    # a manifest, so that check_random.py --dir OUT/failures checks every reproducer again
    entries = []
    for r in records:
        for stage, rp in r.get("repros", {}).items():
            stem = rp["stem"]
            if not (out / "failures" / f"{stem}.pt2").exists():
                continue
            prog = Prog.from_json(json.loads((out / "failures" / f"{stem}.prog.json").read_text()))
            with np.load(out / "failures" / f"{stem}.npz") as z:
                names = [k[3:] for k in z.files if k.startswith("in:")]
                expected = [z[k] for k in z.files if k.startswith("out:")]
            entries.append(manifest_entry(stem, prog, names, expected, through_float16(prog, evaluate(prog))))
    (out / "failures" / "manifest.json").write_text(json.dumps({"programs": entries}, indent=1) + "\n")
    print(text, end="")
    return 1 if any(any(r.get("stages", {}).values()) for r in records) else 0


def golden(args):
    """The committed seed set: the first --count programs torch keeps (seed
    --seed), those that pass every stage, plus the fixtures."""
    _worker_init()
    out = Path(args.golden)
    out.mkdir(parents=True, exist_ok=True)
    for f in list(out.glob("*.pt2")) + list(out.glob("*.npz")):
        f.unlink()
    work = Path(tempfile.mkdtemp(prefix="fuzz-golden-"))
    bin_dir = Path(args.bin)
    entries = []
    known = []
    stats = collections.Counter()
    index = 0
    kept = 0
    failed_first = 0
    while kept < args.count:
        name = f"p{index:04d}"
        prog = make_program(args.seed, index)
        index += 1
        stats["generated"] += 1
        if prog is None:
            stats["empty"] += 1
            continue
        v, res = check_program(prog, bin_dir, work, name, deflate=True)
        if not v.kept:
            stats[v.reason.split(":")[0]] += 1
            continue
        kept += 1
        stats["kept"] += 1
        if any(res.values()):
            stats["failed"] += 1
            failed_first += kept <= 300
            stages = {s: r for s, r in res.items() if r}
            print(f"{name}: FAIL " + "; ".join(f"{s}: {r[0]}" for s, r in stages.items()), flush=True)
            # the shrunk reproducer of its first failing stage
            stage, r = next(iter(stages.items()))
            small, _ = shrink(prog, stage, r[0], bin_dir, work, args.shrink_budget)
            _, rr = check_program(small, bin_dir, work, "final", stages=stage)
            known.append((name, stages, stage, small, rr[stage][1] if rr and rr[stage] else r[1]))
            continue
        stats["passed"] += 1
        shutil.move(str(work / f"{name}.pt2"), out / f"{name}.pt2")
        save_npz(out / f"{name}.npz", prog, v.names, v.expected)
        entries.append(manifest_entry(name, prog, v.names, v.expected, v.loose))
    fixtures = sorted(Path(args.fixtures).glob("*.prog.json")) if Path(args.fixtures).is_dir() else []
    for path in fixtures:
        name = "fix_" + path.name[: -len(".prog.json")]
        prog = Prog.from_json(json.loads(path.read_text()))
        v, res = check_program(prog, bin_dir, work, name, deflate=True)
        if not v.kept:
            sys.exit(f"{path}: torch does not keep it: {v.reason}")
        stages = {s: r for s, r in res.items() if r}
        if stages:
            print(f"{name}: FAIL (fixture) " + "; ".join(f"{s}: {r[0]}" for s, r in stages.items()), flush=True)
            stage, r = next(iter(stages.items()))
            known.append((name, stages, stage, prog, r[1]))
            continue
        shutil.move(str(work / f"{name}.pt2"), out / f"{name}.pt2")
        save_npz(out / f"{name}.npz", prog, v.names, v.expected)
        entries.append(manifest_entry(name, prog, v.names, v.expected, v.loose))
        stats["fixtures"] += 1
    shutil.rmtree(work, ignore_errors=True)
    manifest = {
        "torch_version": torch.__version__,
        "generator": f"recipes/checks/fuzz_graphs.py --golden {args.golden} --count {args.count} --seed {args.seed}",
        "stats": dict(stats),
        "failing_among_first_300_kept": failed_first,
        "programs": entries,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    write_known_failures(out / "KNOWN_FAILURES.md", args, known, stats, failed_first)
    print(f"{len(entries)} programs written to {out} ({stats['passed']} of {kept} kept, "
          f"{stats['fixtures']} fixtures); {len(known)} known failures "
          f"({failed_first} among the first 300 kept); stats {dict(stats)}")
    return 0


def write_known_failures(path, args, known, stats, failed_first):
    md = ["# Known failures of the random seed set", "",
          f"`recipes/checks/fuzz_graphs.py --golden golden/random --count {args.count} --seed {args.seed}` checks the "
          f"first {args.count} programs torch keeps; {stats['failed']} of them fail a stage "
          f"({failed_first} of the first 300) and are left out of the set, so that `make test` passes.",
          "Each is listed with what failed, and with the shrunk reproducer of its first failing stage",
          "(the message is the reproducer's). `python recipes/checks/fuzz_graphs.py --show "
          f"{args.seed}:INDEX` prints a whole program.", ""]
    if not known:
        md.append("None.")
    groups = collections.defaultdict(list)
    for item in known:
        groups[(item[2], item[1][item[2]][0])].append(item)
    if known:
        md += ["| stage | failure | programs |", "|---|---|---|"]
        for (stage, key), items in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]))):
            md.append(f"| {stage} | `{key.replace('|', '/')}` | {', '.join(i[0] for i in items)} |")
        md.append("")
    for name, stages, stage, small, message in known:
        md.append(f"## {name}")
        md.append("")
        for s, r in stages.items():
            md.append(f"- stage {s} ({check_random.STAGES[s]}): `{r[0]}`")
        md += ["", f"Reproducer (stage {stage}), {len(small.stmts)} op(s):", "",
               "```", message.strip()[:1500], "```", "",
               "```python", snippet(small).strip(), "```", ""]
    path.write_text("\n".join(md) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release", help="where the pt2kit tools are")
    ap.add_argument("-n", type=int, default=100, help="programs to generate (batch mode)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="index of the first program")
    ap.add_argument("--out", default="fuzz-out", help="batch mode: where failures and the summary go")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--minutes", type=float, default=0, help="stop a batch after this many minutes (0: never)")
    ap.add_argument("--shrink-per-error", type=int, default=1000000,
                    help="shrink at most this many failures of one stage and error (others are written whole)")
    ap.add_argument("--shrink-budget", type=int, default=60, help="candidates tried per shrink")
    ap.add_argument("--golden", help="golden mode: write the seed set to this directory")
    ap.add_argument("--count", type=int, default=330, help="golden mode: how many kept programs to check")
    ap.add_argument("--fixtures", default="golden/random/fixtures",
                    help="golden mode: reproducers (NAME.prog.json) that join the set as fix_NAME")
    ap.add_argument("--show", help="print the source of program SEED:INDEX and exit")
    ap.add_argument("--wide-dtypes", action="store_true",
                    help="programs over every dtype with edge values (see the module docstring)")
    args = ap.parse_args()
    if args.wide_dtypes:
        global WIDE
        WIDE = True
        os.environ["PT2KIT_FUZZ_WIDE_DTYPES"] = "1"  # the spawned workers
    if args.show:
        _worker_init()
        seed, index = args.show.split(":")
        prog = make_program(int(seed), int(index))
        print(snippet(prog) if prog else "(empty)")
        return 0
    if args.golden:
        return golden(args)
    return batch(args)


if __name__ == "__main__":
    sys.exit(main())
