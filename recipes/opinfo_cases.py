"""Builds an op-conformance suite for the core ATen opset from torch's OpInfo samples.

    python recipes/opinfo_cases.py --out golden/ops [--max-samples 3] [--only aten.add.Tensor ...]

For each overload listed in core_aten_ops.txt (shared/core_aten_ops.txt by default) it takes
sample inputs from the matching OpInfo entries of
`torch.testing._internal.common_methods_invocations.op_db`, turns each sample into a call of
the overload itself (`torch.ops.aten.<op>.<overload>(...)`), wraps that call in a tiny
nn.Module whose inputs are the sample's tensors, exports it with `torch.export.export`
(default, non-strict) and writes

    OUT/<op>.<overload>/<i>.pt2   torch.export.save of the exported program
    OUT/<op>.<overload>/<i>.npz   in:<user input name> (signature order), out:<k> (eager outputs)
    OUT/manifest.json             every case, and a skip reason for each overload with no case

See the "opinfo_cases.py" section of recipes/README.md for the details.
"""
import argparse
import collections
import json
import keyword
import logging
import math
import os
import shutil
import sys
import types
import unittest
import warnings

import numpy as np
import torch
from torch.utils import _pytree as pytree

aten = torch.ops.aten

MAX_IN_ELEMS = 4096  # total elements over all tensor inputs of one case
MAX_OUT_ELEMS = 4 * 4096  # total elements over all tensor outputs of one case
MAX_REF_IN_ELEMS = 256  # the same as MAX_IN_ELEMS, for reference_inputs (a fallback)
MAX_SAMPLES_SEEN = 150  # samples looked at per overload and pass
MAX_EXPORT_FAILURES = 6  # failed exports per overload before giving up on it


def load_op_db():
    """Imports op_db. common_utils imports `expecttest`, which only its TestCase needs;
    when the package is missing a stand-in module is registered instead."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        mod = types.ModuleType("expecttest")

        class TestCase(unittest.TestCase):
            def assertExpectedInline(self, *args, **kwargs):
                raise unittest.SkipTest("expecttest is not installed")

        mod.TestCase = TestCase
        mod.ACCEPT = False
        sys.modules["expecttest"] = mod
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


# ---------------------------------------------------------------------------
# Adapters: (SampleInput, torch.Generator) -> (args, kwargs) for the overload.
# They raise Skip with a reason for samples that do not fit.


class Skip(Exception):
    pass


def ident(s, g):
    return [s.input, *s.args], dict(s.kwargs)


def drop(*keys):
    def f(s, g):
        return [s.input, *s.args], {k: v for k, v in s.kwargs.items() if k not in keys}

    return f


def randn(shape, g, dtype=torch.float32):
    return torch.randn(tuple(shape), generator=g).to(dtype)


def seq(v, n):
    return list(v) if isinstance(v, (list, tuple)) else [v] * n


def named(names, s, defaults=None):
    """Binds the sample's positional args (after input) and kwargs to `names`."""
    p = dict(defaults or {})
    p.update(zip(names, s.args))
    p.update(s.kwargs)
    return p


def call_op(op, args):
    """Calls `op` with a dict of all its schema arguments."""
    pos = [args[a.name] for a in op._schema.arguments if not a.kwarg_only]
    kw = {a.name: args[a.name] for a in op._schema.arguments if a.kwarg_only and a.name in args}
    return op(*pos, **kw)


def bind(op, args, kwargs, fill_defaults=False):
    """Maps a call to {schema argument name: value}; raises TypeError if it does not fit."""
    params = op._schema.arguments
    pos = [a for a in params if not a.kwarg_only]
    if len(args) > len(pos):
        raise TypeError(f"{len(args)} positional arguments, the schema has {len(pos)}")
    out = {a.name: v for a, v in zip(pos, args)}
    names = {a.name for a in params}
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"no argument named {k!r}")
        if k in out:
            raise TypeError(f"argument {k!r} given twice")
        out[k] = v
    for a in params:
        if a.name not in out:
            if fill_defaults and a.has_default_value():
                out[a.name] = a.default_value
            elif not a.has_default_value():
                raise TypeError(f"missing argument {a.name!r}")
    return out


def softmax_like(s, g):
    if s.kwargs.get("dtype") is not None:
        raise Skip("sample asks for a dtype")
    return [s.input, s.args[0], False], {}


def adaptive_avg(nd):
    def f(s, g):
        x = s.input
        size = seq(s.args[0] if s.args else s.kwargs["output_size"], nd)
        size = [x.shape[-nd + i] if v is None else v for i, v in enumerate(size)]
        return [x, size], {}

    return f


def adaptive_avg2d_backward(s, g):
    (x, size), _ = adaptive_avg(2)(s, g)
    y = aten._adaptive_avg_pool2d.default(x, size)
    return [randn(y.shape, g), x], {}


CDIST_MODE = {
    None: None,
    "use_mm_for_euclid_dist_if_necessary": None,
    "use_mm_for_euclid_dist": 1,
    "donot_use_mm_for_euclid_dist": 2,
}


def cdist(s, g):
    p = named(["x2", "p", "compute_mode"], s, {"p": 2.0, "compute_mode": None})
    return [s.input, p["x2"], p["p"], CDIST_MODE[p["compute_mode"]]], {}


def pdist(s, g):
    return [s.input, named(["p"], s, {"p": 2.0})["p"]], {}


EMBEDDING_BAG_MODE = {"sum": 0, "mean": 1, "max": 2}


def padding_idx(p, w):
    i = p.get("padding_idx")
    return -1 if i is None else (i if i >= 0 else w.shape[0] + i)


def embedding_bag(s, g):
    # OpInfo: input = weight, args[0] = indices
    w, idx = s.input, s.args[0]
    p = dict(s.kwargs)
    if p.get("max_norm") is not None:
        raise Skip("max_norm renormalises the weight in place")
    offsets, psw = p.get("offsets"), p.get("per_sample_weights")
    if idx.dim() == 2:
        b, l = idx.shape
        offsets = torch.arange(0, b * l, l, dtype=torch.int64)
        idx = idx.reshape(-1)
        psw = None if psw is None else psw.reshape(-1)
    mode = EMBEDDING_BAG_MODE[p.get("mode", "mean")]
    return [w, idx, offsets, bool(p.get("scale_grad_by_freq", False)), mode,
            bool(p.get("sparse", False)), psw, bool(p.get("include_last_offset", False)),
            padding_idx(p, w)], {}


def embedding(s, g):
    w, idx = s.input, s.args[0]
    p = dict(s.kwargs)
    if p.get("max_norm") is not None:
        raise Skip("max_norm renormalises the weight in place")
    return [w, idx, padding_idx(p, w), bool(p.get("scale_grad_by_freq", False)),
            bool(p.get("sparse", False))], {}


def embedding_dense_backward(s, g):
    (w, idx, pidx, by_freq, _), _ = embedding(s, g)
    grad = randn(tuple(idx.shape) + (w.shape[1],), g)
    return [grad, idx, w.shape[0], pidx, by_freq], {}


FFT_NORM_FORWARD = {None: 0, "backward": 0, "ortho": 1, "forward": 2}
FFT_NORM_INVERSE = {None: 2, "backward": 2, "ortho": 1, "forward": 0}


def fft_r2c(s, g):
    x = s.input
    p = named(["n", "dim", "norm"], s)
    if x.dim() == 0:
        raise Skip("0-dim input")
    dim = p.get("dim")
    dim = (-1 if dim is None else dim) % x.dim()
    if p.get("n") is not None and p["n"] != x.shape[dim]:
        raise Skip("sample pads or trims to n")
    return [x, [dim], FFT_NORM_FORWARD[p.get("norm")], True], {}


def fft_c2r(s, g):
    x = s.input
    p = named(["n", "dim", "norm"], s)
    if x.dim() == 0 or not x.is_complex():
        raise Skip("needs a complex input with a dim")
    dim = p.get("dim")
    dim = (-1 if dim is None else dim) % x.dim()
    n = p.get("n")
    if n is None:
        n = 2 * (x.shape[dim] - 1)
    elif n // 2 + 1 != x.shape[dim]:
        raise Skip("sample pads or trims to n")
    if n < 1:
        raise Skip("empty output")
    return [x, [dim], FFT_NORM_INVERSE[p.get("norm")], n], {}


def batch_norm_no_stats(s, g):
    x, w, b, rm, rv, training, momentum, eps = s.input, *s.args
    return [x, w, b, training, momentum, eps], {}


def batch_norm_no_training(s, g):
    x, w, b, rm, rv, training, momentum, eps = s.input, *s.args
    return [x, w, b, rm, rv, momentum, eps], {}


def to_copy(s, g):
    dt = next((a for a in [*s.args, *s.kwargs.values()] if isinstance(a, torch.dtype)), None)
    if dt is None:
        raise Skip("sample names no dtype")
    kw = {"dtype": dt}
    mf = s.kwargs.get("memory_format")
    if mf is not None and mf != torch.preserve_format:
        kw["memory_format"] = mf
    return [s.input], kw


def to_dtype(dt):
    def f(s, g):
        kw = {"dtype": dt}
        mf = s.kwargs.get("memory_format")
        if mf is not None and mf != torch.preserve_format:
            kw["memory_format"] = mf
        return [s.input], kw

    return f


def with_out(s, g):
    a, b = s.input, s.args[0]
    out = torch.zeros(torch.broadcast_shapes(a.shape, b.shape), dtype=torch.result_type(a, b))
    return [a, b], {"out": out}


def avg_pool2d_backward(s, g):
    p = bind(aten.avg_pool2d.default, [s.input, *s.args], dict(s.kwargs), fill_defaults=True)
    y = call_op(aten.avg_pool2d.default, p)
    return [randn(y.shape, g), s.input, p["kernel_size"], p["stride"], p["padding"],
            p["ceil_mode"], p["count_include_pad"], p["divisor_override"]], {}


def unfold_to_col2im(s, g):
    x = s.input
    p = named(["kernel_size", "dilation", "padding", "stride"], s,
              {"dilation": 1, "padding": 0, "stride": 1})
    k, d, pad, st = (seq(p[n], 2) for n in ("kernel_size", "dilation", "padding", "stride"))
    cols = aten.im2col.default(x, k, d, pad, st)
    return [cols, list(x.shape[-2:]), k, d, pad, st], {}


def constant_pad(s, g):
    p = named(["pad", "mode", "value"], s)
    return [s.input, list(p["pad"]), 0 if p.get("value") is None else p["value"]], {}


def pad_nd(nd):
    def f(s, g):
        pad = list(s.args[0] if s.args else s.kwargs["pad"])
        if len(pad) != 2 * nd:
            raise Skip(f"padding has {len(pad)} entries, not {2 * nd}")
        return [s.input, pad], {}

    return f


def conv(transposed, nd):
    names = (["bias", "stride", "padding", "output_padding", "groups", "dilation"] if transposed
             else ["bias", "stride", "padding", "dilation", "groups"])

    def f(s, g):
        x, w = s.input, s.args[0]
        p = dict(bias=None, stride=1, padding=0, dilation=1, groups=1, output_padding=0)
        p.update(zip(names, s.args[1:]))
        p.update(s.kwargs)
        stride, dil = seq(p["stride"], nd), seq(p["dilation"], nd)
        pad = p["padding"]
        if pad == "valid":
            pad = [0] * nd
        elif pad == "same":
            if any(v != 1 for v in stride):
                raise Skip("padding='same' with stride != 1")
            total = [d * (k - 1) for d, k in zip(dil, w.shape[2:])]
            if any(t % 2 for t in total):
                raise Skip("padding='same' is asymmetric here")
            pad = [t // 2 for t in total]
        else:
            pad = seq(pad, nd)
        return [x, w, p["bias"], stride, pad, dil, transposed,
                seq(p["output_padding"], nd), p["groups"]], {}

    return f


def conv_backward(transposed, nd):
    fwd = conv(transposed, nd)

    def f(s, g):
        args, _ = fwd(s, g)
        x, w, b, stride, pad, dil, tr, opad, groups = args
        y = aten.convolution.default(*args)
        return [randn(y.shape, g), x, w, None if b is None else [b.shape[0]], stride, pad, dil,
                tr, opad, groups, [True, True, b is not None]], {}

    return f


def dropout(s, g):
    p = s.kwargs.get("p", 0.5)
    train = s.kwargs.get("training", True)
    if train and 0 < p < 1:
        raise Skip("random dropout mask")
    return [s.input, p, train], {}


def index_from_index_put(s, g):
    return [s.input, s.args[0]], {}


def max_pool_with_indices(s, g):
    p = named(["kernel_size", "stride", "padding", "dilation", "ceil_mode"], s)
    p.pop("return_indices", None)
    if p.get("stride") is None:
        p["stride"] = []
    return [s.input], p


def max_pool2d_backward(s, g):
    args, kw = max_pool_with_indices(s, g)
    p = bind(aten.max_pool2d_with_indices.default, args, kw, fill_defaults=True)
    y, idx = call_op(aten.max_pool2d_with_indices.default, p)
    return [randn(y.shape, g), s.input, p["kernel_size"], p["stride"], p["padding"],
            p["dilation"], p["ceil_mode"], idx], {}


def group_norm_backward(s, g):
    x, w, b, n, c, hxw, group, eps = s.input, *s.args
    y, mean, rstd = aten.native_group_norm.default(x, w, b, n, c, hxw, group, eps)
    return [randn(y.shape, g), x, mean, rstd, w, n, c, hxw, group,
            [True, w is not None, b is not None]], {}


def layer_norm_backward(s, g):
    x, shape, w, b, eps = s.input, *s.args
    y, mean, rstd = aten.native_layer_norm.default(x, shape, w, b, eps)
    return [randn(y.shape, g), x, shape, mean, rstd, w, b,
            [True, w is not None, b is not None]], {}


def nonzero(s, g):
    if s.kwargs.get("as_tuple"):
        raise Skip("as_tuple=True is nonzero_numpy")
    return [s.input], {}


def rpow(s, g):  # other ** input
    return [s.args[0], s.input], {}


def upsample(nd, align):
    def f(s, g):
        x = s.input
        if x.dim() != nd + 2:
            raise Skip(f"input is not {nd + 2}-d")
        p = named(["size", "scale_factor", "mode", "align_corners", "recompute_scale_factor"], s)
        size, sf = p.get("size"), p.get("scale_factor")
        if size is not None:
            out, scales = seq(size, nd), None
        else:
            sfs = seq(sf, nd)
            if p.get("recompute_scale_factor"):
                out = [math.floor(x.shape[2 + i] * sfs[i]) for i in range(nd)]
                scales = None
            else:
                out, scales = None, [float(v) for v in sfs]
        if align:
            return [x, out, bool(p.get("align_corners") or False), scales], {}
        return [x, out, scales], {}

    return f


def select_to_slice_scatter(s, g):
    x, src, dim, index = s.input, *s.args
    i = index % x.shape[dim]
    return [x, src.unsqueeze(dim), dim, i, i + 1, 1], {}


def narrow_to_slice(s, g):
    dim, start, length = s.args
    if not isinstance(start, int):
        raise Skip("tensor start")
    return [s.input, dim, start, start + length], {}


def where(s, g):
    return [s.args[0], s.input, s.args[1]], {}


# ---------------------------------------------------------------------------
# Which OpInfo samples feed which overload.


class Src:
    def __init__(self, name, variant=None, adapt=ident, dtype=None):
        self.name, self.variant, self.adapt, self.dtype = name, variant, adapt, dtype

    def label(self, oi):
        return oi.name + (f"[{oi.variant_test_name}]" if oi.variant_test_name else "")


NONDETERMINISTIC = "nondeterministic: "
SYMINT = ("SymInt op with no OpInfo: under the static shapes of the default export its value "
          "is specialised to a constant, so no node is emitted")
SKIP = {
    "aten.empty.memory_format": NONDETERMINISTIC + "returns uninitialised memory",
    "aten.empty_strided.default": NONDETERMINISTIC + "returns uninitialised memory",
    "aten.rand.default": NONDETERMINISTIC + "random op",
    "aten.randn.default": NONDETERMINISTIC + "random op",
    "aten.randperm.default": NONDETERMINISTIC + "random op",
    "aten.sym_is_contiguous.default": SYMINT,
    "aten.sym_numel.default": SYMINT,
    "aten.sym_size.int": SYMINT,
    "aten.sym_storage_offset.default": SYMINT,
    "aten.sym_stride.int": SYMINT,
}

F = "nn.functional."
SOURCES = {
    "aten._adaptive_avg_pool2d.default": [Src(F + "adaptive_avg_pool2d", adapt=adaptive_avg(2))],
    "aten._adaptive_avg_pool2d_backward.default": [
        Src(F + "adaptive_avg_pool2d", adapt=adaptive_avg2d_backward)],
    "aten._adaptive_avg_pool3d.default": [Src(F + "adaptive_avg_pool3d", adapt=adaptive_avg(3))],
    "aten._cdist_forward.default": [Src("cdist", adapt=cdist)],
    "aten._embedding_bag.default": [Src(F + "embedding_bag", adapt=embedding_bag)],
    "aten._fft_c2r.default": [Src("fft.irfft", adapt=fft_c2r, dtype=torch.complex64)],
    "aten._fft_r2c.default": [Src("fft.rfft", adapt=fft_r2c)],
    "aten._local_scalar_dense.default": [Src("item")],
    "aten._log_softmax.default": [Src("log_softmax", "", adapt=softmax_like)],
    "aten._native_batch_norm_legit.no_stats": [
        Src("_native_batch_norm_legit", adapt=batch_norm_no_stats)],
    "aten._native_batch_norm_legit_no_training.default": [
        Src("_native_batch_norm_legit", adapt=batch_norm_no_training)],
    "aten._pdist_forward.default": [Src(F + "pdist", adapt=pdist)],
    "aten._softmax.default": [Src("softmax", "", adapt=softmax_like)],
    "aten._to_copy.default": [
        Src("to", adapt=to_copy), Src("long", adapt=to_dtype(torch.int64)),
        Src("bool", adapt=to_dtype(torch.bool)), Src("half", adapt=to_dtype(torch.float16))],
    "aten.adaptive_avg_pool1d.default": [Src(F + "adaptive_avg_pool1d", adapt=adaptive_avg(1))],
    "aten.alias.default": [Src("alias_copy")],
    "aten.atan2.out": [Src("atan2", adapt=with_out)],
    "aten.avg_pool2d_backward.default": [Src(F + "avg_pool2d", adapt=avg_pool2d_backward)],
    "aten.col2im.default": [Src(F + "unfold", adapt=unfold_to_col2im)],
    "aten.constant_pad_nd.default": [
        Src("constant_pad_nd"), Src(F + "pad", "constant", adapt=constant_pad)],
    "aten.convolution.default": [
        Src(F + "conv2d", adapt=conv(False, 2)), Src(F + "conv1d", adapt=conv(False, 1)),
        Src(F + "conv_transpose2d", adapt=conv(True, 2)), Src(F + "conv3d", adapt=conv(False, 3)),
        Src(F + "conv_transpose1d", adapt=conv(True, 1))],
    "aten.convolution_backward.default": [
        Src(F + "conv2d", adapt=conv_backward(False, 2)),
        Src(F + "conv1d", adapt=conv_backward(False, 1)),
        Src(F + "conv_transpose2d", adapt=conv_backward(True, 2))],
    "aten.copy.default": [Src("add", adapt=lambda s, g: ([s.input, s.args[0]], {}))],
    "aten.elu.default": [Src(F + "elu", adapt=drop("inplace"))],
    "aten.embedding.default": [Src(F + "embedding", adapt=embedding)],
    "aten.embedding_dense_backward.default": [
        Src(F + "embedding", adapt=embedding_dense_backward)],
    "aten.hardtanh.default": [Src(F + "hardtanh", adapt=drop("inplace"))],
    "aten.index.Tensor": [Src("index_put", adapt=index_from_index_put)],
    "aten.leaky_relu.default": [Src(F + "leaky_relu", adapt=drop("inplace"))],
    "aten.max_pool2d_with_indices.default": [Src(F + "max_pool2d", adapt=max_pool_with_indices)],
    "aten.max_pool2d_with_indices_backward.default": [
        Src("max_pool2d_with_indices_backward", adapt=max_pool2d_backward)],
    "aten.max_pool3d_with_indices.default": [Src(F + "max_pool3d", adapt=max_pool_with_indices)],
    "aten.native_dropout.default": [Src(F + "dropout", adapt=dropout)],
    "aten.native_group_norm_backward.default": [
        Src("native_group_norm", adapt=group_norm_backward)],
    "aten.native_layer_norm_backward.default": [
        Src("native_layer_norm", adapt=layer_norm_backward)],
    "aten.nonzero.default": [Src("nonzero", adapt=nonzero)],
    "aten.pow.Scalar": [Src("__rpow__", adapt=rpow), Src("pow")],
    "aten.reflection_pad1d.default": [Src(F + "pad", "reflect", adapt=pad_nd(1))],
    "aten.reflection_pad2d.default": [Src(F + "pad", "reflect", adapt=pad_nd(2))],
    "aten.reflection_pad3d.default": [Src(F + "pad", "reflect", adapt=pad_nd(3))],
    "aten.relu.default": [Src(F + "relu", adapt=drop("inplace"))],
    "aten.replication_pad2d.default": [
        Src(F + "pad", "replicate", adapt=pad_nd(2)),
        Src(F + "pad", "replicate_negative", adapt=pad_nd(2))],
    "aten.replication_pad3d.default": [Src(F + "pad", "replicate", adapt=pad_nd(3))],
    "aten.scalar_tensor.default": [Src("scalar_tensor", adapt=drop("requires_grad"))],
    "aten.slice.Tensor": [Src("slice"), Src("narrow", adapt=narrow_to_slice)],
    "aten.slice_scatter.default": [
        Src("slice_scatter"), Src("select_scatter", adapt=select_to_slice_scatter)],
    "aten.upsample_bilinear2d.vec": [Src(F + "interpolate", "bilinear", adapt=upsample(2, True))],
    "aten.upsample_nearest2d.vec": [Src(F + "interpolate", "nearest", adapt=upsample(2, False))],
    "aten.where.self": [Src("where", adapt=where)],
}


def sources_for(qual, by_name):
    if qual in SOURCES:
        out = []
        for src in SOURCES[qual]:
            for oi in by_name.get(src.name, []):
                if src.variant is None or oi.variant_test_name == src.variant:
                    out.append((src, oi))
        return out
    base = qual.split(".")[1]
    seen, out = set(), []
    for key in (base, F + base):
        # by OpInfo name, then by aten_name (keyed ("aten", name) in by_name)
        for oi in by_name.get(key, []) + by_name.get(("aten", key), []):
            if id(oi) not in seen:
                seen.add(id(oi))
                out.append((Src(oi.name, oi.variant_test_name), oi))
    return out


def sample_dtype(src, oi):
    if src.dtype is not None:
        return src.dtype
    try:
        dts = oi.supported_dtypes("cpu")
    except Exception:
        dts = oi.dtypes
    return next((t for t in (torch.float32, torch.int64, torch.bool) if t in dts), None)


# ---------------------------------------------------------------------------
# Turning one adapted call into a case.


def is_number_type(t):
    return t in ("number", "Optional[number]")


def type_problem(op, bound):
    for a in op._schema.arguments:
        if a.name not in bound:
            continue
        v, t = bound[a.name], str(a.type)
        if is_number_type(t) and isinstance(v, torch.Tensor):
            return f"{a.name}: Tensor for Scalar"
        if t == "Tensor" and not isinstance(v, torch.Tensor):
            return f"{a.name}: {type(v).__name__} for Tensor"
        # int and int[] accept bools; such samples meant another overload (var(x, True))
        if "int" in t.lower() and "bool" not in t.lower() and (
                isinstance(v, bool) or isinstance(v, (list, tuple))
                and any(isinstance(x, bool) for x in v)):
            return f"{a.name}: bool for {t}"
    return None


def scalarize(op, bound):
    """Replaces tensors passed for Scalar arguments with their first element."""
    out = dict(bound)
    for a in op._schema.arguments:
        v = out.get(a.name)
        if is_number_type(str(a.type)) and isinstance(v, torch.Tensor):
            if v.numel() == 0:
                return None
            out[a.name] = v.reshape(-1)[0].item()
    return out


def fresh(t):
    return t.detach().resolve_conj().resolve_neg().contiguous().clone()


class Slot:
    def __init__(self, i):
        self.i = i


def make_call(op, bound):
    """Splits bound arguments into tensor inputs (with names) and a call template."""
    names, tensors = [], []
    pos_names = [a.name for a in op._schema.arguments if not a.kwarg_only]
    last = max([i for i, n in enumerate(pos_names) if n in bound], default=-1)
    tmpl_pos, tmpl_kw = [], {}

    def slot(name, t):
        # "self" would clash with the self of the unlifted module's forward (ep.module())
        bad = not name.isidentifier() or keyword.iskeyword(name) or name == "self"
        nm = name + "_" if bad else name
        names.append(nm)
        tensors.append(t)
        return Slot(len(tensors) - 1)

    def conv(name, v):
        if isinstance(v, torch.Tensor):
            return slot(name, v)
        if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
            return [slot(f"{name}_{i}", x) if isinstance(x, torch.Tensor) else x
                    for i, x in enumerate(v)]
        return v

    defaults = {a.name: a.default_value for a in op._schema.arguments if a.has_default_value()}
    for i, n in enumerate(pos_names[: last + 1]):
        tmpl_pos.append(conv(n, bound[n] if n in bound else defaults[n]))
    for a in op._schema.arguments:
        if a.kwarg_only and a.name in bound:
            tmpl_kw[a.name] = conv(a.name, bound[a.name])
    return names, tensors, tmpl_pos, tmpl_kw


def fill(tmpl, ts):
    if isinstance(tmpl, Slot):
        return ts[tmpl.i]
    if isinstance(tmpl, list):
        return [fill(x, ts) for x in tmpl]
    return tmpl


def invoke(op, tmpl_pos, tmpl_kw, ts):
    return op(*[fill(x, ts) for x in tmpl_pos], **{k: fill(v, ts) for k, v in tmpl_kw.items()})


def make_module(op, names, tmpl_pos, tmpl_kw):
    params = ", ".join(names)
    src = f"def forward(_m{', ' if names else ''}{params}):\n    return _m._run([{params}])\n"
    ns = {}
    exec(src, {}, ns)

    def _run(m, ts):
        return invoke(op, tmpl_pos, tmpl_kw, ts)

    cls = type("OpCase", (torch.nn.Module,), {"forward": ns["forward"], "_run": _run})
    return cls()


def describe(v, shapes=True):
    if isinstance(v, torch.Tensor):
        return f"{dtype_name(v.dtype)}[{','.join(map(str, v.shape))}]" if shapes else "T"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(describe(x, shapes) for x in v) + "]"
    if isinstance(v, torch.dtype):
        return dtype_name(v)
    if isinstance(v, float):
        return f"{v:.6g}"
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


DTYPE_SHORT = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
               torch.bfloat16: "bf16", torch.int64: "i64", torch.int32: "i32", torch.int16: "i16",
               torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool",
               torch.complex64: "c64", torch.complex128: "c128"}


def dtype_name(dt):
    return DTYPE_SHORT.get(dt, str(dt).replace("torch.", ""))


def target_name(t):
    if isinstance(t, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
        return str(t)
    return f"{getattr(t, '__module__', None) or '?'}.{getattr(t, '__name__', str(t))}"


def histogram(ep):
    h = collections.Counter()
    for gm in ep.graph_module.modules():
        if isinstance(gm, torch.fx.GraphModule):
            for n in gm.graph.nodes:
                if n.op == "call_function":
                    h[target_name(n.target)] += 1
    return dict(sorted(h.items()))


def flat_outputs(out):
    leaves, _ = pytree.tree_flatten(out)
    return leaves


def same(a, b):
    if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
        return False
    if not isinstance(a, torch.Tensor):
        return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(a, b) or torch.equal(a.isnan(), b.isnan())
                and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))


def max_abs_diff(a_leaves, b_leaves):
    m = 0.0
    for a, b in zip(a_leaves, b_leaves):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape:
                return float("inf")
            if a.numel() == 0:
                continue
            d = (a.to(torch.complex128 if a.is_complex() else torch.float64)
                 - b.to(torch.complex128 if b.is_complex() else torch.float64)).abs()
            equal = a == b  # also equal infinities, whose difference is nan
            if a.is_floating_point() or a.is_complex():
                equal = equal | (a.isnan() & b.isnan())
            d = torch.where(equal, torch.zeros_like(d), d)
            m = max(m, float(torch.nan_to_num(d, nan=float("inf")).max()))
        elif a != b and not (a is None and b is None):
            try:
                m = max(m, abs(float(a) - float(b)))
            except (TypeError, ValueError):
                return float("inf")
    return m


def to_numpy(v):
    """Returns (array, note) for an output leaf; note says how it was converted."""
    if isinstance(v, torch.Tensor):
        t = v.detach().resolve_conj().resolve_neg().cpu()
        note = None
        if t.dtype in (torch.float16, torch.bfloat16):
            t, note = t.float(), f"{dtype_name(v.dtype)} stored as f32"
        # np.ascontiguousarray would turn a 0-d array into shape (1,)
        return t.contiguous().numpy().copy(), note
    return np.asarray(v), f"Python {type(v).__name__} stored as a 0-d array"


def first_line(e):
    s = str(e).strip().splitlines()
    return (type(e).__name__ + ": " + (s[0] if s else "")).strip()[:160]


def run_op(qual, by_name, out_dir, max_samples, log):
    op = getattr(getattr(aten, qual.split(".")[1]), qual.split(".")[2])
    srcs = sources_for(qual, by_name)
    if not srcs:
        return [], "no OpInfo entry maps to this overload"
    reasons = collections.Counter()
    examples = {}

    def why(kind, detail=None):
        reasons[kind] += 1
        if detail and kind not in examples:
            examples[kind] = detail

    cases, seen, export_failures = [], set(), 0
    consts_used = set()
    case_dir = os.path.join(out_dir, qual)
    shutil.rmtree(case_dir, ignore_errors=True)
    # Samples are classed "rich" (some tensor input has a dim), "scalar" (all tensor inputs
    # are 0-d) or "empty" (some tensor input has no elements). The passes, in order:
    #   sample_inputs, rich, non-tensor arguments unlike those of the cases taken so far;
    #   sample_inputs, rich; sample_inputs, scalar; reference_inputs, rich or scalar;
    #   sample_inputs, empty.
    # reference_inputs are held to MAX_REF_IN_ELEMS to keep the files small.
    passes = [("sample_inputs", ("rich",), True, MAX_IN_ELEMS),
              ("sample_inputs", ("rich",), False, MAX_IN_ELEMS),
              ("sample_inputs", ("scalar",), False, MAX_IN_ELEMS),
              ("reference_inputs", ("rich", "scalar"), False, MAX_REF_IN_ELEMS),
              ("sample_inputs", ("empty",), False, MAX_IN_ELEMS)]
    for kind_fn, classes, new_consts, max_in in passes:
        if len(cases) >= max_samples or export_failures >= MAX_EXPORT_FAILURES:
            break
        torch.manual_seed(0)
        gens = []
        for src, oi in srcs:
            dt = sample_dtype(src, oi)
            if dt is None:
                why("OpInfo supports none of float32/int64/bool")
                continue
            gens.append((src, oi, dt, iter_samples(oi, dt, why, kind_fn)))
        looked = 0
        for src, oi, dt, sample in round_robin(gens):
            if len(cases) >= max_samples or export_failures >= MAX_EXPORT_FAILURES:
                break
            looked += 1
            if looked > MAX_SAMPLES_SEEN:
                break
            g = torch.Generator().manual_seed(1000 + looked)
            try:
                args, kwargs = src.adapt(sample, g)
            except Skip as e:
                why("sample does not fit: " + str(e))
                continue
            except Exception as e:
                why("sample does not fit the overload's signature", first_line(e))
                continue
            args, kwargs = pytree.tree_map_only(torch.Tensor, fresh, (list(args), dict(kwargs)))
            try:
                bound = bind(op, args, kwargs)
            except TypeError as e:
                why("sample does not fit the overload's signature", str(e))
                continue
            if type_problem(op, bound):
                bound2 = scalarize(op, bound)
                if bound2 is None or type_problem(op, bound2):
                    why("sample does not fit the overload's signature", type_problem(op, bound))
                    continue
                bound = bound2
            names, tensors, tmpl_pos, tmpl_kw = make_call(op, bound)
            n_in = sum(t.numel() for t in tensors)
            if n_in > max_in:
                why(f"sample too large (> {max_in} input elements)")
                continue
            if any(t.numel() == 0 for t in tensors):
                cls = "empty"
            elif tensors and all(t.dim() == 0 for t in tensors):
                cls = "scalar"
            else:
                cls = "rich"
            if cls not in classes:
                if cls == "empty":
                    why("sample has an empty tensor (used only when too few others)")
                continue
            desc = ", ".join(f"{n}={describe(v)}" for n, v in bound.items())
            if desc in seen:
                continue
            consts = ", ".join(f"{n}={describe(v, shapes=False)}" for n, v in bound.items())
            if new_consts and consts in consts_used:
                continue
            seen.add(desc)
            try:
                ins1 = [fresh(t) for t in tensors]
                with torch.no_grad():
                    out1 = invoke(op, tmpl_pos, tmpl_kw, ins1)
                    out2 = invoke(op, tmpl_pos, tmpl_kw, [fresh(t) for t in tensors])
            except Exception as e:
                why("the overload rejects the sample", first_line(e))
                continue
            leaves1, leaves2 = flat_outputs(out1), flat_outputs(out2)
            if len(leaves1) != len(leaves2) or not all(map(same, leaves1, leaves2)):
                why(NONDETERMINISTIC + "two eager runs differ")
                continue
            # inputs the op wrote to (out=, resize_, batch-norm running stats)
            mutated = {n: fresh(a) for n, t, a in zip(names, tensors, ins1) if not same(t, a)}
            n_out = sum(t.numel() for t in leaves1 if isinstance(t, torch.Tensor))
            if n_out > MAX_OUT_ELEMS:
                why(f"output too large (> {MAX_OUT_ELEMS} elements)")
                continue
            mod = make_module(op, names, tmpl_pos, tmpl_kw)
            try:
                with warnings.catch_warnings(), torch.enable_grad():
                    warnings.simplefilter("ignore")
                    ep = torch.export.export(mod, tuple(fresh(t) for t in tensors))
            except Exception as e:
                export_failures += 1
                why("torch.export.export failed", first_line(e))
                continue
            hist = histogram(ep)
            if qual not in hist:
                export_failures += 1
                ops = ", ".join(k for k in hist if not k.endswith("getitem")) or "nothing"
                why("decomposed by export into " + ops)
                continue
            user_inputs = list(ep.graph_signature.user_inputs)
            if user_inputs != names:
                why("export renamed the inputs", f"{names} -> {user_inputs}")
                continue
            i = len(cases)
            os.makedirs(case_dir, exist_ok=True)
            pt2 = os.path.join(case_dir, f"{i}.pt2")
            torch.export.save(ep, pt2)
            # self-check: the saved archive, loaded back, against the eager outputs
            try:
                with torch.no_grad(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    loaded = torch.export.load(pt2).module()
                    diff = max_abs_diff(leaves1, flat_outputs(loaded(*[fresh(t) for t in tensors])))
            except Exception as e:
                log(f"  {qual}/{i}: reloading the archive failed: {first_line(e)}")
                diff = None
            if diff:
                log(f"  {qual}/{i}: loaded archive differs from eager by {diff}")
            arrays, outputs = {}, []
            for n, t in zip(names, tensors):
                arrays[f"in:{n}"] = to_numpy(t)[0]
            for k, v in enumerate(leaves1):
                if v is None:
                    outputs.append({"key": None, "value": None})
                    continue
                arr, note = to_numpy(v)
                arrays[f"out:{k}"] = arr
                o = {"key": f"out:{k}", "dtype": str(arr.dtype), "shape": list(arr.shape)}
                if note:
                    o["note"] = note
                outputs.append(o)
            for n, t in mutated.items():
                arrays[f"mut:{n}"] = to_numpy(t)[0]
            np.savez(os.path.join(case_dir, f"{i}.npz"), **arrays)
            case = {
                "op": qual,
                "case": f"{qual}/{i}",
                "pt2": f"{qual}/{i}.pt2",
                "npz": f"{qual}/{i}.npz",
                "dtype": str(dt).replace("torch.", ""),
                "sample": desc,
                "source": "opinfo:" + src.label(oi) + (
                    " (reference_inputs)" if kind_fn == "reference_inputs" else ""),
                "inputs": [{"name": n, "dtype": str(to_numpy(t)[0].dtype), "shape": list(t.shape)}
                           for n, t in zip(names, tensors)],
                "outputs": outputs,
                **({"mutated_inputs": list(mutated)} if mutated else {}),
                "ops": hist,
                "max_abs_diff_loaded_vs_eager": diff,
            }
            cases.append(case)
            consts_used.add(consts)
    if cases:
        return cases, None
    return [], summarize(reasons, examples)


# The skip reason for an overload with no case: the kind of failure that got furthest.
REASON_ORDER = ["decomposed by export", "torch.export.export failed", "export renamed",
                NONDETERMINISTIC, "output too large", "the overload rejects", "sample too large",
                "sample has an empty tensor", "sample does not fit", "OpInfo supports none",
                "OpInfo sample_inputs failed", "OpInfo reference_inputs failed"]


def summarize(reasons, examples):
    if not reasons:
        return "OpInfo gave no samples"
    def rank(k):
        return next((i for i, p in enumerate(REASON_ORDER) if k.startswith(p)), len(REASON_ORDER))
    kind = min(reasons, key=lambda k: (rank(k), -reasons[k]))
    msg = f"{kind} ({reasons[kind]} samples)"
    if kind in examples:
        msg += f"; e.g. {examples[kind]}"
    return msg


def iter_samples(oi, dt, why, kind_fn="sample_inputs"):
    try:
        for s in getattr(oi, kind_fn)("cpu", dt):
            yield s
    except Exception as e:
        why(f"OpInfo {kind_fn} failed", first_line(e))


def round_robin(gens):
    live = list(gens)
    while live:
        nxt = []
        for src, oi, dt, it in live:
            # some sample generators yield from inside `with torch.no_grad()`, which would
            # leak into the export (wrap_with_set_grad_enabled) while they are suspended
            grad = torch.is_grad_enabled()
            try:
                s = next(it)
            except StopIteration:
                continue
            finally:
                torch.set_grad_enabled(grad)
            nxt.append((src, oi, dt, it))
            yield src, oi, dt, s
        live = nxt


def manifest_text(m):
    """JSON with one line per case and per skipped overload."""
    lines = ["{"]
    for k in ("torch_version", "max_samples"):
        lines.append(f" {json.dumps(k)}: {json.dumps(m[k])},")
    lines.append(' "cases": [')
    lines.append(",\n".join("  " + json.dumps(c) for c in m["cases"]))
    lines.append(" ],")
    lines.append(' "skipped": {')
    lines.append(",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in m["skipped"].items()))
    lines.append(" }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    # the repository's own copy of torch's core ATen opset
    default_list = os.path.join(here, "..", "lib", "data", "core_aten_ops.txt")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-samples", type=int, default=3)
    ap.add_argument("--only", nargs="+", default=None, metavar="OVERLOAD")
    ap.add_argument("--ops", default=default_list, help="file listing aten.<op>.<overload> lines")
    args = ap.parse_args()

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    ops = [l.strip() for l in open(args.ops) if l.strip() and not l.startswith("#")]
    if args.only:
        unknown = [o for o in args.only if o not in ops]
        if unknown:
            sys.exit(f"not in {args.ops}: {', '.join(unknown)}")
        todo = [o for o in ops if o in args.only]
    else:
        todo = ops

    op_db = load_op_db()
    by_name = collections.defaultdict(list)
    for oi in op_db:
        by_name[oi.name].append(oi)
        if oi.aten_name and oi.aten_name != oi.name:
            by_name[("aten", oi.aten_name)].append(oi)

    os.makedirs(args.out, exist_ok=True)
    man_path = os.path.join(args.out, "manifest.json")
    cases, skipped = {}, {}
    if args.only and os.path.exists(man_path):
        old = json.load(open(man_path))
        for c in old.get("cases", []):
            cases.setdefault(c["op"], []).append(c)
        skipped.update(old.get("skipped", {}))
    else:
        for d in os.listdir(args.out):
            if d.startswith("aten.") and os.path.isdir(os.path.join(args.out, d)):
                shutil.rmtree(os.path.join(args.out, d))

    def log(msg):
        print(msg, flush=True)

    for qual in todo:
        cases.pop(qual, None)
        skipped.pop(qual, None)
        if qual in SKIP:
            shutil.rmtree(os.path.join(args.out, qual), ignore_errors=True)
            skipped[qual] = SKIP[qual]
            log(f"{qual}: skipped: {SKIP[qual]}")
            continue
        try:
            got, reason = run_op(qual, by_name, args.out, args.max_samples, log)
        except Exception as e:
            got, reason = [], "recipe error: " + first_line(e)
        if got:
            cases[qual] = got
            log(f"{qual}: {len(got)} case(s)")
        else:
            skipped[qual] = reason
            log(f"{qual}: skipped: {reason}")

    manifest = {
        "torch_version": torch.__version__,
        "max_samples": args.max_samples,
        "cases": [c for q in ops for c in cases.get(q, [])],
        "skipped": {q: skipped[q] for q in ops if q in skipped},
    }
    with open(man_path, "w") as f:
        f.write(manifest_text(manifest))
    n_ops = sum(1 for q in ops if cases.get(q))
    log(f"{n_ops}/{len(ops)} overloads with cases, {len(manifest['cases'])} cases, "
        f"{len(manifest['skipped'])} skipped -> {man_path}")


if __name__ == "__main__":
    main()
