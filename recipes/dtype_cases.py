"""Builds a dtype conformance suite for the core ATen opset: every overload crossed with every
dtype torch supports for it on CPU, on plain values, on extremal values, and on empty tensors.

    python recipes/dtype_cases.py --out golden/dtypes [--only aten.add.Tensor ...]
                                  [--dtypes float32 bfloat16 ...]

It reuses recipes/opinfo_cases.py (the OpInfo sources and adapters of each overload, the call
templates, the export). For each overload of core_aten_ops.txt and each dtype of DTYPES that an
OpInfo entry of the overload supports on CPU, it takes the first small OpInfo sample of that
dtype (sample_inputs, then reference_inputs; at most 256 input elements) and writes

    OUT/<overload>/<dtype>.plain.pt2      torch.export.save of the program (the sample as is)
    OUT/<overload>/<dtype>.plain.npz      in:<user input name> (signature order), out:<k>
    OUT/<overload>/<dtype>.extremal.npz   the same program's inputs with extremal values
                                          written over some elements of its data tensors
                                          (NaN, +-inf, -0.0, subnormals, integer min/max,
                                          values past 2^53, ...), and torch's outputs on them
    OUT/<overload>/<dtype>.extremal.pt2   only when the extremal case needs its own program
                                          (another sample, or an extremal Scalar constant)
    OUT/<overload>/<dtype>.empty.pt2/.npz an OpInfo sample with an empty tensor (EMPTY_DTYPES)
    OUT/manifest.json                     every case, every skipped (overload, dtype) with its
                                          reason, every skipped variant with its reason

The manifest's `pt2` and `npz` fields are the paths to use (relative to the manifest): the
plain and extremal cases of one (overload, dtype) usually share `<dtype>.plain.pt2`.
See the "dtype_cases.py" section of recipes/README.md for the details.
"""
import argparse
import collections
import gc
import json
import logging
import math
import os
import shutil
import signal
import sys
import time
import warnings
import zlib

import ml_dtypes
import numpy as np
import torch
from torch.utils import _pytree as pytree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import opinfo_cases as oc  # noqa: E402

aten = torch.ops.aten

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64,
          torch.complex64, torch.complex128]
DTYPE_NAME = {d: str(d).replace("torch.", "") for d in DTYPES}
BY_NAME = {**{v: k for k, v in DTYPE_NAME.items()}, **{oc.dtype_name(d): d for d in DTYPES}}
# the dtype that gets the empty-tensor variant: the first of these the overload supports
EMPTY_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64,
                torch.complex128]

MAX_IN_ELEMS = 256  # total elements over all tensor inputs of one case
MAX_OUT_ELEMS = 2048  # total elements over all tensor outputs of one case
MAX_SAMPLES_SEEN = 60  # samples with no empty tensor looked at per (overload, dtype) and kind
MAX_SAMPLES_ANY = 600  # samples of any kind looked at per (overload, dtype) and kind
MAX_EMPTY = 4  # samples with an empty tensor tried for the empty variant
MAX_CANDIDATES = 24  # samples run eagerly per (overload, dtype) to choose from
GOOD_DATA_ELEMS = 16  # the smallest sample with this many data elements is the one taken
PROBE_TIMEOUT_S = 60

# Tensor arguments that are not data: their values are kept as OpInfo made them, so they stay
# valid (indices, offsets, masks, conditions, sampling grids). Names are the call's input
# names (schema names; list elements are <name>_<i>).
NON_DATA = {"index", "indices", "offsets", "mask", "condition", "grid", "out"}


def is_data(name, t):
    base = name.rstrip("_")
    if "_" in base and base.rsplit("_", 1)[1].isdigit():
        base = base.rsplit("_", 1)[0]
    return base not in NON_DATA and t.dtype in DTYPE_NAME


# ---------------------------------------------------------------------------
# Extremal values.


def extremal_values(dt):
    """The extremal values of dtype `dt`, as Python numbers, in a fixed order."""
    if dt == torch.bool:
        return [True, False]
    if dt.is_floating_point:
        fi = torch.finfo(dt)
        sub = fi.smallest_normal * fi.eps  # the smallest subnormal
        v = [math.nan, math.inf, -math.inf, -0.0, sub, -sub, fi.max, fi.min,
             fi.smallest_normal, -fi.smallest_normal, 2 * fi.smallest_normal, 0.0]
        if dt == torch.float64:
            v += [2.0 ** 53, 2.0 ** 53 + 2, -(2.0 ** 53) - 2]
        return v
    if dt.is_complex:
        fi = torch.finfo(dt)
        sub = fi.smallest_normal * fi.eps
        nan, inf = math.nan, math.inf
        return [complex(nan, 0.0), complex(0.0, nan), complex(inf, 0.0), complex(0.0, -inf),
                complex(-inf, nan), complex(inf, inf), complex(-0.0, -0.0),
                complex(fi.max, -fi.max), complex(sub, -sub), complex(nan, nan)]
    ii = torch.iinfo(dt)
    if dt == torch.uint8:
        return [0, ii.max, 1, 128]
    v = [ii.min, ii.max, -1, 0]
    if dt == torch.int64:
        v += [2 ** 53 + 1, -(2 ** 53) - 1, 2 ** 62 + 3]
    return v


def fmt_value(v):
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, complex):
        return f"({fmt_value(v.real)},{fmt_value(v.imag)})"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v == 0:
            return "-0.0" if math.copysign(1, v) < 0 else "0.0"
        return repr(v)
    return str(v)


def value_order(s):
    """Sorts fmt_value strings: numbers by value, then nan, then complex values."""
    try:
        f = float(s)
    except ValueError:
        return (2, 0.0, s)
    return (1, 0.0, s) if math.isnan(f) else (0, f, s)


def seed_of(*parts):
    return zlib.crc32("/".join(parts).encode())


def with_extremal(t, key, exclude=()):
    """A copy of `t` with extremal values of its dtype (less `exclude`) written over some of its
    elements: half of them, or as many as there are extremal values where that leaves a quarter
    as they were; the positions and the first value come from a seed made of `key`. Elements
    equal to a value of `exclude` get an extremal value too."""
    vals = [v for v in extremal_values(t.dtype) if not any(
        v == x and type(v) is type(x) for x in exclude)]
    n = t.numel()
    out = fresh(t)
    if n == 0:
        return out, []
    s = seed_of(*key)
    k = min(n, max((n + 1) // 2, min(len(vals), (3 * n + 3) // 4)))
    pos = torch.randperm(n, generator=torch.Generator().manual_seed(s))[:k]
    chosen = [vals[(s + i) % len(vals)] for i in range(k)]
    flat = out.view(-1)
    flat[pos] = torch.tensor(chosen, dtype=t.dtype)
    if exclude:  # the elements left as they were may hold an excluded value too
        left = torch.isin(flat, torch.tensor(list(exclude), dtype=t.dtype)).nonzero().view(-1)
        more = [vals[(s + k + i) % len(vals)] for i in range(left.numel())]
        if more:
            flat[left] = torch.tensor(more, dtype=t.dtype)
            chosen += more
    return out, sorted({fmt_value(v) for v in chosen})


# an overload whose tensors are not what its output is made of: its extremal case is an
# extremal Scalar argument instead (baked into the program: the program is exported again)
SCALAR_EXTREMAL = {"aten.full.default": "fill_value", "aten.full_like.default": "fill_value",
                   "aten.fill.Scalar": "value", "aten.scalar_tensor.default": "s"}
# one value per dtype (a case per dtype): the values a JSON number or a float64 cannot carry
SCALAR_EXTREMAL_VALUE = {
    torch.bool: True, torch.uint8: 255, torch.int8: -128, torch.int16: 32767,
    torch.int32: -2 ** 31, torch.int64: 2 ** 53 + 1, torch.float16: math.inf,
    torch.bfloat16: -math.inf, torch.float32: math.nan, torch.float64: -0.0,
    torch.complex64: complex(math.nan, math.inf), torch.complex128: complex(-0.0, -math.inf)}


# ---------------------------------------------------------------------------
# Adapters of opinfo_cases.py that assume float32, made to follow the sample's dtype.


def grad_in_sample_dtype(adapt):
    """The `*_backward` adapters make a float32 grad_output (args[0]); torch wants it in the
    dtype of the sample."""
    def f(s, g):
        args, kw = adapt(s, g)
        x = s.input
        if isinstance(args[0], torch.Tensor) and isinstance(x, torch.Tensor) and (
                args[0].dtype != x.dtype):
            args = [args[0].to(x.dtype), *args[1:]]
        return args, kw
    return f


def atan2_out(s, g):
    """oc.with_out with `out` in atan2's result dtype (float32 for integer inputs)."""
    a, b = s.input, s.args[0]
    out = torch.zeros(torch.broadcast_shapes(a.shape, b.shape), dtype=torch.atan2(a, b).dtype)
    return [a, b], {"out": out}


# _to_copy's target per source dtype: a narrowing or cross-kind cast (never float to integer,
# whose result on NaN, inf or out-of-range values is undefined in C++ and differs by CPU)
TO_COPY_TARGET = {
    torch.bool: torch.bfloat16, torch.uint8: torch.int8, torch.int8: torch.uint8,
    torch.int16: torch.int8, torch.int32: torch.float16, torch.int64: torch.int32,
    torch.float16: torch.bfloat16, torch.bfloat16: torch.float16,
    torch.float32: torch.bfloat16, torch.float64: torch.float32,
    torch.complex64: torch.complex128, torch.complex128: torch.complex64}


def to_target(s, g):
    if not isinstance(s.input, torch.Tensor) or s.input.dtype not in TO_COPY_TARGET:
        raise oc.Skip("no target for this dtype")
    return [s.input], {"dtype": TO_COPY_TARGET[s.input.dtype]}


GRAD_CAST = {"aten._adaptive_avg_pool2d_backward.default", "aten.avg_pool2d_backward.default",
             "aten.max_pool2d_with_indices_backward.default",
             "aten.native_group_norm_backward.default", "aten.native_layer_norm_backward.default",
             "aten.convolution_backward.default", "aten.embedding_dense_backward.default"}


def sources(qual, by_name):
    srcs = oc.sources_for(qual, by_name)
    if qual in GRAD_CAST:
        return [(oc.Src(s.name, s.variant, grad_in_sample_dtype(s.adapt), s.dtype), oi)
                for s, oi in srcs]
    if qual == "aten._to_copy.default":
        return [(oc.Src(s.name, s.variant, to_target, s.dtype), oi)
                for s, oi in srcs]
    if qual == "aten.atan2.out":
        return [(oc.Src(s.name, s.variant, atan2_out, s.dtype), oi) for s, oi in srcs]
    return srcs


# ---------------------------------------------------------------------------
# Tensor files.


def fresh(t):
    return oc.fresh(t)


def to_numpy(v):
    """(array, note) for an input or output leaf, in the numpy dtype of its torch dtype; bf16 as
    an ml_dtypes.bfloat16 array."""
    if isinstance(v, torch.Tensor):
        t = v.detach().resolve_conj().resolve_neg().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy(), None
        return t.numpy().copy(), None
    return np.asarray(v), f"Python {type(v).__name__} stored as a 0-d array"


def npy_descr(a):
    return np.lib.format.dtype_to_descr(a.dtype)


def torch_dtype_of(a):
    """The torch dtype name of a numpy array written here (bf16 arrays are ml_dtypes')."""
    if a.dtype == ml_dtypes.bfloat16:
        return "bfloat16"
    return str(torch.from_numpy(np.zeros(0, a.dtype)).dtype).replace("torch.", "")


# ---------------------------------------------------------------------------
# Running torch safely: some integer kernels trap (INT_MIN / -1 is SIGFPE on x86), so extremal
# inputs are first run in a forked child.


def probe(fn):
    """Runs fn() in a forked child. None if it returned or raised (run it here to see which);
    else a description of how the child died."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            fn()
        except BaseException:
            code = 3
        os._exit(code)
    deadline = time.time() + PROBE_TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return f"torch hung (no result in {PROBE_TIMEOUT_S} s)"
        time.sleep(0.002)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"torch crashed: the process died of {signal.Signals(sig).name}"
    return None


def eager(op, tmpl_pos, tmpl_kw, tensors):
    """(outputs of two runs, inputs after the first run). Raises what torch raises."""
    ins1 = [fresh(t) for t in tensors]
    with torch.no_grad():
        out1 = oc.invoke(op, tmpl_pos, tmpl_kw, ins1)
        out2 = oc.invoke(op, tmpl_pos, tmpl_kw, [fresh(t) for t in tensors])
    return oc.flat_outputs(out1), oc.flat_outputs(out2), ins1


# ---------------------------------------------------------------------------
# Samples.


class Cand:
    """One adapted OpInfo sample: the call, its tensors and what it is."""

    def __init__(self, op, bound, src, oi, kind_fn):
        self.bound = bound
        self.names, self.tensors, self.tmpl_pos, self.tmpl_kw = oc.make_call(op, bound)
        self.src, self.oi, self.kind_fn = src, oi, kind_fn
        self.desc = ", ".join(f"{n}={oc.describe(v)}" for n, v in bound.items())
        self.n_in = sum(t.numel() for t in self.tensors)
        data = [t.numel() for n, t in zip(self.names, self.tensors) if is_data(n, t)]
        self.n_data, self.spread, self.n_out = sum(data), min(data, default=0), 0
        if any(t.numel() == 0 for t in self.tensors):
            self.cls = "empty"
        elif self.tensors and all(t.dim() == 0 for t in self.tensors):
            self.cls = "scalar"
        else:
            self.cls = "rich"

    def source(self):
        return "opinfo:" + self.src.label(self.oi) + f" ({self.kind_fn})"


def supported(oi):
    try:
        return set(oi.supported_dtypes("cpu"))
    except Exception:
        return set(oi.dtypes)


def candidates(op, srcs, dt, why):
    """Yields adapted samples of dtype dt: sample_inputs, then reference_inputs."""
    seen = set()
    for kind_fn in ("sample_inputs", "reference_inputs"):
        torch.manual_seed(0)
        gens = [(src, oi, dt, oc.iter_samples(oi, dt, why, kind_fn)) for src, oi in srcs]
        looked = looked_any = 0
        for src, oi, _, sample in oc.round_robin(gens):
            looked_any += 1
            if looked > MAX_SAMPLES_SEEN or looked_any > MAX_SAMPLES_ANY:
                break
            g = torch.Generator().manual_seed(1000 + looked)
            try:
                args, kwargs = src.adapt(sample, g)
            except oc.Skip as e:
                why("sample does not fit: " + str(e))
                continue
            except Exception as e:
                why("sample does not fit the overload's signature", oc.first_line(e))
                continue
            args, kwargs = pytree.tree_map_only(torch.Tensor, fresh, (list(args), dict(kwargs)))
            try:
                bound = oc.bind(op, args, kwargs)
            except TypeError as e:
                why("sample does not fit the overload's signature", str(e))
                continue
            if oc.type_problem(op, bound):
                bound2 = oc.scalarize(op, bound)
                if bound2 is None or oc.type_problem(op, bound2):
                    why("sample does not fit the overload's signature", oc.type_problem(op, bound))
                    continue
                bound = bound2
            c = Cand(op, bound, src, oi, kind_fn)
            if c.desc in seen:
                continue
            seen.add(c.desc)
            if c.cls != "empty":
                looked += 1
            if c.n_in > MAX_IN_ELEMS:
                why(f"sample too large (> {MAX_IN_ELEMS} input elements)")
                continue
            yield c


# ---------------------------------------------------------------------------
# Writing one case.


class Writer:
    def __init__(self, out_dir, qual, log):
        self.out_dir, self.qual, self.log = out_dir, qual, log
        self.case_dir = os.path.join(out_dir, qual)

    def export(self, op, c, tensors, stem):
        """Exports the call of c on `tensors` to <stem>.pt2; (relative path, op histogram)."""
        mod = oc.make_module(op, c.names, c.tmpl_pos, c.tmpl_kw)
        with warnings.catch_warnings(), torch.enable_grad():
            warnings.simplefilter("ignore")
            ep = torch.export.export(mod, tuple(fresh(t) for t in tensors))
        hist = oc.histogram(ep)
        if self.qual not in hist:
            ops = ", ".join(k for k in hist if not k.endswith("getitem")) or "nothing"
            raise ExportProblem("decomposed by export into " + ops)
        user_inputs = list(ep.graph_signature.user_inputs)
        if user_inputs != c.names:
            raise ExportProblem(f"export renamed the inputs: {c.names} -> {user_inputs}")
        os.makedirs(self.case_dir, exist_ok=True)
        rel = f"{self.qual}/{stem}.pt2"
        torch.export.save(ep, os.path.join(self.out_dir, rel))
        return rel, hist

    def selfcheck(self, pt2, tensors, leaves):
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loaded = torch.export.load(os.path.join(self.out_dir, pt2)).module()
                got = oc.flat_outputs(loaded(*[fresh(t) for t in tensors]))
            return oc.max_abs_diff(leaves, got)
        except Exception as e:
            self.log(f"  {pt2}: running the loaded archive failed: {oc.first_line(e)}")
            return None

    def write(self, stem, c, tensors, leaves, mutated, extras):
        arrays, inputs, outputs = {}, [], []
        for n, t in zip(c.names, tensors):
            a = to_numpy(t)[0]
            arrays[f"in:{n}"] = a
            inputs.append({"name": n, "dtype": DTYPE_NAME.get(t.dtype, str(t.dtype)),
                           "shape": list(t.shape)})
        for k, v in enumerate(leaves):
            if v is None:
                outputs.append({"key": None})
                continue
            a, note = to_numpy(v)
            arrays[f"out:{k}"] = a
            o = {"key": f"out:{k}", "dtype": torch_dtype_of(a), "shape": list(a.shape)}
            if note:
                o["note"] = note
            outputs.append(o)
        for n, t in mutated.items():
            arrays[f"mut:{n}"] = to_numpy(t)[0]
        rel = f"{self.qual}/{stem}.npz"
        os.makedirs(self.case_dir, exist_ok=True)
        np.savez(os.path.join(self.out_dir, rel), **arrays)
        return {"npz": rel, "sample": c.desc, "source": c.source(), "inputs": inputs,
                "outputs": outputs, **({"mutated_inputs": list(mutated)} if mutated else {}),
                **extras}


class ExportProblem(Exception):
    pass


class Refused(Exception):
    pass


def run_checked(op, c, tensors, crash_probe):
    """Torch's outputs for the call of c on tensors: (leaves, mutated). Raises Refused."""
    if crash_probe:
        died = probe(lambda: eager(op, c.tmpl_pos, c.tmpl_kw, tensors))
        if died:
            raise Refused(died)
    try:
        l1, l2, ins1 = eager(op, c.tmpl_pos, c.tmpl_kw, tensors)
    except Exception as e:
        raise Refused("torch refused: " + oc.first_line(e))
    if len(l1) != len(l2) or not all(map(oc.same, l1, l2)):
        raise Refused(oc.NONDETERMINISTIC + "two eager runs differ")
    n_out = sum(t.numel() for t in l1 if isinstance(t, torch.Tensor))
    if n_out > MAX_OUT_ELEMS:
        raise Refused(f"output too large (> {MAX_OUT_ELEMS} elements)")
    mutated = {n: fresh(a) for n, t, a in zip(c.names, tensors, ins1) if not oc.same(t, a)}
    return l1, mutated


def extremal_schemes(qual, dt, c):
    """(scheme name, tensors, {input name: values written}) to try in order for the extremal
    variant of candidate c; [] where c has no data tensor."""
    data = [i for i, (n, t) in enumerate(zip(c.names, c.tensors)) if is_data(n, t)]
    if not data:
        return []

    def make(which, exclude=()):
        ts, placed = list(c.tensors), {}
        for i in which:
            ex = exclude if i != data[0] else ()
            ts[i], vals = with_extremal(c.tensors[i], (qual, DTYPE_NAME[dt], c.names[i]), ex)
            placed[c.names[i]] = vals
        return ts, placed

    out = [("all data tensors", *make(data))]
    if len(data) > 1:
        ints = [i for i in data[1:] if not (c.tensors[i].is_floating_point()
                                             or c.tensors[i].is_complex()
                                             or c.tensors[i].dtype == torch.bool)]
        if ints:  # integer division: 0 raises, INT_MIN / -1 traps
            out.append(("all data tensors, no 0 past the first", *make(data, (0,))))
            out.append(("all data tensors, no 0 or -1 past the first", *make(data, (0, -1))))
        out.append((f"{c.names[data[0]]} only", *make(data[:1])))
        out.append((f"{c.names[data[-1]]} only", *make(data[-1:])))
    return out


def scalar_extremal_cand(op, qual, dt, c):
    """c with its Scalar argument replaced by the extremal value of dt, or None."""
    arg = SCALAR_EXTREMAL.get(qual)
    if arg is None or arg not in c.bound:
        return None, None
    v = SCALAR_EXTREMAL_VALUE[dt]
    bound = dict(c.bound)
    bound[arg] = v
    c2 = Cand(op, bound, c.src, c.oi, c.kind_fn)
    return c2, {arg: [fmt_value(v)]}


# ---------------------------------------------------------------------------
# One (overload, dtype).


def run_pair(qual, op, srcs, dt, want_empty, w, log):
    """Returns (cases, skip reason or None, variant skips {variant: reason})."""
    dname = DTYPE_NAME[dt]
    reasons, examples = collections.Counter(), {}

    def why(kind, detail=None):
        reasons[kind] += 1
        if detail and kind not in examples:
            examples[kind] = detail

    # the samples: `main` (plain, then extremal), `spare` (extremal when main's is refused)
    # and `empties`. `main`: of the samples with GOOD_DATA_ELEMS data elements, the one whose
    # data tensors all have a few elements, then the one with the fewest elements in and out;
    # else the one with the most data elements (a sample with a non-0-d tensor first).
    # reference_inputs are run only when sample_inputs give no sample with GOOD_DATA_ELEMS.
    good, empties = [], []
    enough = lambda: any(g.n_data >= GOOD_DATA_ELEMS for g in good)  # noqa: E731
    grad = torch.is_grad_enabled()
    gen = candidates(op, srcs, dt, why)
    for c in gen:
        if c.kind_fn == "reference_inputs" and enough() and (empties or not want_empty):
            break
        if c.cls == "empty":
            if want_empty and len(empties) < MAX_EMPTY:
                empties.append(c)
            continue
        if len(good) >= MAX_CANDIDATES or (c.kind_fn == "reference_inputs" and enough()):
            continue
        try:
            leaves, _ = run_checked(op, c, c.tensors, False)
            c.n_out = sum(t.numel() for t in leaves if isinstance(t, torch.Tensor))
        except Refused as e:
            msg = str(e)
            if msg.startswith("torch refused"):
                why("the overload rejects the sample", msg)
            else:
                why(msg)
            continue
        good.append(c)
    # OpInfo generators left suspended inside `with torch.no_grad()` would set the grad mode
    # when collected, in the middle of an export (wrap_with_set_grad_enabled)
    gen.close()
    del gen
    gc.collect()
    torch.set_grad_enabled(grad)
    big = [c for c in good if c.n_data >= GOOD_DATA_ELEMS]
    if big:
        # every data tensor with a few elements (both operands of a binary op get several
        # extremal values), then the fewest elements in and out
        main = min(big, key=lambda c: (-min(c.spread, 4), c.n_in + c.n_out))
    else:
        main = max(good, key=lambda c: (c.n_data, c.cls == "rich"), default=None)
    spare = next((c for c in good if c is not main), None)
    cases, vskip = [], {}
    if main is None:
        return [], summarize(reasons, examples, bool(empties)), vskip

    # plain
    base = {"op": qual, "dtype": dname}
    plain_pt2, plain_from = None, None
    export_errors = []
    for c in (main, spare):
        if c is None:
            continue
        try:
            leaves, mutated = run_checked(op, c, c.tensors, False)
            pt2, hist = w.export(op, c, c.tensors, f"{dname}.plain")
        except (Refused, ExportProblem) as e:
            export_errors.append(str(e))
            continue
        except Exception as e:
            export_errors.append("torch.export.export failed: " + oc.first_line(e))
            continue
        diff = w.selfcheck(pt2, c.tensors, leaves)
        cases.append({**base, "variant": "plain", "case": f"{qual}/{dname}.plain", "pt2": pt2,
                      **w.write(f"{dname}.plain", c, c.tensors, leaves, mutated,
                                {"max_abs_diff_loaded_vs_eager": diff})})
        plain_pt2, plain_from = pt2, c
        break
    if plain_pt2 is None:
        return [], export_errors[0], vskip

    # extremal: on the plain case's sample and program first
    ext_errors = []
    order = [plain_from] + [c for c in (main, spare) if c is not None and c is not plain_from]
    done = False
    for c in order:
        schemes = [] if qual in SCALAR_EXTREMAL else extremal_schemes(qual, dt, c)
        c_used = c
        if not schemes:
            c2, placed = scalar_extremal_cand(op, qual, dt, c)
            if c2 is None:
                ext_errors.append("no data tensor (its inputs are indices, or it has none)")
                continue
            c_used, schemes = c2, [(f"Scalar argument {next(iter(placed))}", c2.tensors, placed)]
        for scheme, tensors, placed in schemes:
            try:
                leaves, mutated = run_checked(op, c_used, tensors, True)
            except Refused as e:
                ext_errors.append(f"{scheme}: {e}")
                continue
            values = sorted({v for vs in placed.values() for v in vs}, key=value_order)
            extras = {"extremal": {"scheme": scheme, "values": values,
                                   **({"refused": list(dict.fromkeys(ext_errors))}
                                      if ext_errors else {})}}
            try:
                if c_used is plain_from:
                    pt2 = plain_pt2
                    extras["shares_program_with"] = "plain"
                else:
                    pt2, _ = w.export(op, c_used, tensors, f"{dname}.extremal")
            except Exception as e:
                ext_errors.append(f"{scheme}: torch.export.export failed: {oc.first_line(e)}")
                continue
            diff = w.selfcheck(pt2, tensors, leaves)
            if diff:
                log(f"  {qual}/{dname}.extremal: loaded archive differs from eager by {diff}")
            extras["max_abs_diff_loaded_vs_eager"] = diff
            cases.append({**base, "variant": "extremal", "case": f"{qual}/{dname}.extremal",
                          "pt2": pt2,
                          **w.write(f"{dname}.extremal", c_used, tensors, leaves, mutated,
                                    extras)})
            done = True
            break
        if done:
            break
        if c_used is not c:  # the Scalar variant is tried on the main sample only
            break
    if not done:
        vskip["extremal"] = "; ".join(dict.fromkeys(ext_errors)) or "no sample"

    # empty: the first of the samples with an empty tensor that torch runs and exports
    if want_empty:
        if not empties:
            vskip["empty"] = "OpInfo gives no sample with an empty tensor in this dtype"
        errors = []
        for empty in empties:
            try:
                leaves, mutated = run_checked(op, empty, empty.tensors, True)
                pt2, _ = w.export(op, empty, empty.tensors, f"{dname}.empty")
            except (Refused, ExportProblem) as e:
                errors.append(f"{empty.desc}: {e}")
                continue
            except Exception as e:
                errors.append(f"{empty.desc}: torch.export.export failed: {oc.first_line(e)}")
                continue
            diff = w.selfcheck(pt2, empty.tensors, leaves)
            cases.append({**base, "variant": "empty", "case": f"{qual}/{dname}.empty",
                          "pt2": pt2,
                          **w.write(f"{dname}.empty", empty, empty.tensors, leaves, mutated,
                                    {"max_abs_diff_loaded_vs_eager": diff})})
            break
        else:
            if errors:
                vskip["empty"] = "; ".join(dict.fromkeys(errors))
    return cases, None, vskip


REASON_ORDER = ["torch.export.export failed", "decomposed by export", "export renamed",
                oc.NONDETERMINISTIC, "output too large", "the overload rejects", "torch crashed",
                "sample too large", "sample does not fit", "OpInfo sample_inputs failed",
                "OpInfo reference_inputs failed"]


def summarize(reasons, examples, has_empty):
    if not reasons:
        return ("OpInfo gives only samples with an empty tensor" if has_empty
                else "OpInfo gives no sample in this dtype")

    def rank(k):
        return next((i for i, p in enumerate(REASON_ORDER) if k.startswith(p)), len(REASON_ORDER))

    kind = min(reasons, key=lambda k: (rank(k), -reasons[k]))
    msg = f"{kind} ({reasons[kind]} samples)"
    if kind in examples and examples[kind] != kind:
        msg += f"; e.g. {examples[kind]}"
    return msg


# ---------------------------------------------------------------------------


def manifest_text(m):
    """JSON with one line per case and per skipped (overload, dtype)."""
    lines = ["{"]
    for k, v in m.items():
        if k not in ("cases", "skipped", "variant_skipped"):
            lines.append(f" {json.dumps(k)}: {json.dumps(v)},")
    lines.append(' "cases": [')
    lines.append(",\n".join("  " + json.dumps(c) for c in m["cases"]))
    lines.append(" ],")
    for key in ("skipped", "variant_skipped"):
        lines.append(f' {json.dumps(key)}: [')
        lines.append(",\n".join("  " + json.dumps(s) for s in m[key]))
        lines.append(" ]" + ("," if key == "skipped" else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_list = os.path.join(here, "..", "lib", "data", "core_aten_ops.txt")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="+", default=None, metavar="OVERLOAD")
    ap.add_argument("--dtypes", nargs="+", default=None, metavar="DTYPE",
                    help="torch dtype names (float32, bfloat16, ...) or short ones (f32, bf16)")
    ap.add_argument("--ops", default=default_list, help="file listing aten.<op>.<overload> lines")
    args = ap.parse_args()

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    ops = [l.strip() for l in open(args.ops) if l.strip() and not l.startswith("#")]
    todo = ops
    if args.only:
        unknown = [o for o in args.only if o not in ops]
        if unknown:
            sys.exit(f"not in {args.ops}: {', '.join(unknown)}")
        todo = [o for o in ops if o in args.only]
    dts = DTYPES
    if args.dtypes:
        unknown = [d for d in args.dtypes if d not in BY_NAME]
        if unknown:
            sys.exit(f"unknown dtype(s): {', '.join(unknown)} (known: "
                     f"{', '.join(DTYPE_NAME.values())})")
        wanted = {BY_NAME[d] for d in args.dtypes}
        dts = [d for d in DTYPES if d in wanted]
    dnames = {DTYPE_NAME[d] for d in dts}

    op_db = oc.load_op_db()
    by_name = collections.defaultdict(list)
    for oi in op_db:
        by_name[oi.name].append(oi)
        if oi.aten_name and oi.aten_name != oi.name:
            by_name[("aten", oi.aten_name)].append(oi)

    os.makedirs(args.out, exist_ok=True)
    man_path = os.path.join(args.out, "manifest.json")
    cases, skipped, vskipped = [], [], []
    partial = bool(args.only or args.dtypes)
    if partial and os.path.exists(man_path):
        old = json.load(open(man_path))
        keep = lambda e: not (e["op"] in todo and e["dtype"] in dnames)  # noqa: E731
        cases = [c for c in old["cases"] if keep(c)]
        skipped = [s for s in old["skipped"] if keep(s)]
        vskipped = [s for s in old["variant_skipped"] if keep(s)]
    elif not partial:
        for d in os.listdir(args.out):
            if d.startswith("aten.") and os.path.isdir(os.path.join(args.out, d)):
                shutil.rmtree(os.path.join(args.out, d))

    def log(msg):
        print(msg, flush=True)

    t0 = time.time()
    for qual in todo:
        case_dir = os.path.join(args.out, qual)
        for dt in dts:
            for v in ("plain", "extremal", "empty"):
                for ext in ("pt2", "npz"):
                    p = os.path.join(case_dir, f"{DTYPE_NAME[dt]}.{v}.{ext}")
                    if os.path.exists(p):
                        os.remove(p)
        if qual in oc.SKIP:
            for dt in dts:
                skipped.append({"op": qual, "dtype": DTYPE_NAME[dt], "reason": oc.SKIP[qual]})
            log(f"{qual}: skipped: {oc.SKIP[qual]}")
            continue
        op = getattr(getattr(aten, qual.split(".")[1]), qual.split(".")[2])
        all_srcs = sources(qual, by_name)
        # which dtypes get an empty variant: the first supported one of each EMPTY_DTYPES group
        sup_all = set().union(*[supported(oi) for _, oi in all_srcs]) if all_srcs else set()
        empty_dts = {next((d for d in EMPTY_DTYPES if d in sup_all), None)}
        w = Writer(args.out, qual, log)
        got = collections.Counter()
        for dt in dts:
            dname = DTYPE_NAME[dt]
            if not all_srcs:
                skipped.append({"op": qual, "dtype": dname,
                                "reason": "no OpInfo entry maps to this overload"})
                continue
            srcs = [(s, oi) for s, oi in all_srcs if dt in supported(oi)]
            if not srcs:
                names = sorted({s.label(oi) for s, oi in all_srcs})
                skipped.append({"op": qual, "dtype": dname,
                                "reason": f"no OpInfo dtype: {', '.join(names)} "
                                          f"list(s) no CPU support for {dname}"})
                continue
            try:
                got_cases, reason, vskip = run_pair(qual, op, srcs, dt, dt in empty_dts, w, log)
            except Exception as e:
                got_cases, reason, vskip = [], "recipe error: " + oc.first_line(e), {}
            cases.extend(got_cases)
            for c in got_cases:
                got[c["variant"]] += 1
            if reason:
                skipped.append({"op": qual, "dtype": dname, "reason": reason})
                log(f"  {qual} {dname}: skipped: {reason}")
            for v, r in vskip.items():
                vskipped.append({"op": qual, "dtype": dname, "variant": v, "reason": r})
        if os.path.isdir(case_dir) and not os.listdir(case_dir):
            os.rmdir(case_dir)
        log(f"{qual}: {dict(got)} ({time.time() - t0:.0f} s)")

    # order: the opset's, then DTYPES', then variants'
    o_ix = {q: i for i, q in enumerate(ops)}
    d_ix = {DTYPE_NAME[d]: i for i, d in enumerate(DTYPES)}
    v_ix = {"plain": 0, "extremal": 1, "empty": 2}
    key = lambda e: (o_ix[e["op"]], d_ix[e["dtype"]], v_ix.get(e.get("variant"), 0))  # noqa: E731
    bf = np.zeros(1, ml_dtypes.bfloat16)
    manifest = {
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "ml_dtypes_version": ml_dtypes.__version__,
        "dtypes": [DTYPE_NAME[d] for d in DTYPES],
        "npy_descr": {DTYPE_NAME[d]: npy_descr(to_numpy(torch.zeros(1, dtype=d))[0])
                      for d in DTYPES},
        "bfloat16_note": f"bfloat16 arrays are ml_dtypes.bfloat16 arrays written by np.savez: "
                         f"descr {npy_descr(bf)!r}, a 2-byte void to numpy; the dtype fields "
                         f"here say which arrays are bfloat16",
        "cases": sorted(cases, key=key),
        "skipped": sorted(skipped, key=key),
        "variant_skipped": sorted(vskipped, key=key),
    }
    with open(man_path, "w") as f:
        f.write(manifest_text(manifest))
    by = collections.Counter((c["dtype"], c["variant"]) for c in manifest["cases"])
    log(f"{len(manifest['cases'])} cases, {len(manifest['skipped'])} (overload, dtype) skipped, "
        f"{len(manifest['variant_skipped'])} variants skipped -> {man_path}")
    for d in DTYPES:
        n = DTYPE_NAME[d]
        log(f"  {n:10} " + "  ".join(f"{v} {by[(n, v)]}" for v in ("plain", "extremal", "empty")))


if __name__ == "__main__":
    main()
