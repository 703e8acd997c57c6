#!/usr/bin/env python3
"""Golden-model zoo: exports small PyTorch models to `.pt2` archives.

Usage:
    python recipes/zoo.py --out golden/models [--only NAME ...] [--big] [--big-out DIR]

For every model NAME this writes into --out (large models go to --big-out,
which defaults to a `big` folder next to --out, i.e. golden/big, which git ignores):

    NAME.pt2              torch.export.save(torch.export.export(...))   (TRAINING dialect)
    NAME.decomp.pt2       the same ExportedProgram after .run_decompositions() (ATEN dialect)
    NAME.inputs.npz       example inputs, keyed by user-input name, in signature order
    NAME.expected.npz     eager outputs, pytree-flattened, keys out_0, out_1, ...
    NAME.meta.json        versions, input/output names, op histograms, flags
    NAME.alt.inputs.npz / NAME.alt.expected.npz
                          second input set (other size of the dynamic dim; for `cond`
                          the negated input, so the other branch is taken; for
                          `whileloop` n=0, so the loop body never runs)
    NAME.alt2.inputs.npz / NAME.alt2.expected.npz
                          a third input set (group "dynamic": a third size)

Only torch, torchvision, transformers, torchao (the PT2E quantizers of
group "quant") and numpy are used (transformers models are built from
config objects; nothing is downloaded). Every model is built after
torch.manual_seed(0), and every input set is made after torch.manual_seed(0).

Op histograms count the `call_function` nodes of the graph and of every
nested subgraph (cond branches, while_loop and map bodies). Keys follow
torch's own serializer (`serialize_operator`) with the leading "torch.ops."
removed, so that they equal the `target` strings in models/model.json
minus that prefix: e.g. "aten.addmm.default", "higher_order.cond",
"_operator.mul". FX `getitem` nodes are not counted because the
serializer does not write them (their count is kept in meta as
"fx_getitem_training"/"fx_getitem_decomp").
Every histogram is checked against the JSON inside the saved archive.
"""

import argparse
import collections
import copy
import json
import os
import sys
import zipfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch.export import Dim
from torch.export.graph_signature import InputKind, OutputKind


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.fc = nn.Linear(8, 5)
        with torch.no_grad():
            self.bn.running_mean.copy_(torch.randn(8) * 0.5)
            self.bn.running_var.copy_(torch.rand(8) + 0.5)
            self.bn.weight.copy_(torch.rand(8) + 0.5)
            self.bn.bias.copy_(torch.randn(8) * 0.1)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        h = F.max_pool2d(h, 2)
        h = self.conv2(h)
        h = F.adaptive_avg_pool2d(h, 1)
        h = torch.flatten(h, 1)
        return self.fc(h)


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
            activation="gelu", batch_first=True,
        )

    def forward(self, x):
        return self.layer(x)


class Embedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.fc = nn.Linear(16, 4)

    def forward(self, ids):
        return self.fc(self.emb(ids).mean(dim=1))


class BufConst(nn.Module):
    """Persistent + non-persistent buffers, an aliasing buffer view, a plain
    tensor attribute (-> tensor_constant), an in-place buffer mutation, a
    Linear, a float16 parameter used through .float(), and a float64 round trip."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("scale", torch.rand(8) + 0.5)              # persistent
        self.register_buffer("scale_view", self.scale[4:8])            # alias, offset 4
        self.register_buffer("np_buf", torch.randn(4), persistent=False)  # -> constants
        self.register_buffer("counter", torch.zeros(1))                 # mutated in place
        self.const = torch.randn(4)                                     # tensor_constant
        self.half_w = nn.Parameter(torch.randn(4, 4).half())            # f16 param

    def forward(self, x):
        self.counter.add_(1)
        h = self.lin(x) * self.scale[:4] + self.np_buf + self.const
        h64 = h.to(torch.float64) * 2.0
        h = h64.to(torch.float32) + x @ self.half_w.float()
        return h * self.counter + self.scale_view


class DynSeq(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 8)

    def forward(self, x):  # [2, seq, 16]
        h = self.lin(x)                       # [2, seq, 8]
        w = torch.softmax(h, dim=1)           # softmax over seq
        return (w * h).sum(dim=1)             # [2, 8]


class Cond(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        def true_fn(x):
            return self.lin(x).sin()

        def false_fn(x):
            return self.lin(x).cos()

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class WhileLoop(nn.Module):
    """`while_loop`: a tensor counter and a hidden state carried; the
    bound `n` (a user input), the input `x` (re-injected every step), a
    Linear and a buffer are closed over, so they reach both subgraphs as
    additional inputs."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.lin = nn.Linear(4, 4)
        self.register_buffer("scale", torch.rand(4) + 0.5)

    def forward(self, x, n):  # x f32[3,4], n i64[] (the iteration count)
        from torch._higher_order_ops.while_loop import while_loop

        def cond_fn(i, h):
            return (i < n) & (h.abs().sum() < 1e4)

        def body_fn(i, h):
            return i + 1, torch.tanh(self.lin(h)) * self.scale + x

        i0 = torch.zeros((), dtype=torch.int64)
        i, h = while_loop(cond_fn, body_fn, (i0, self.proj(x)))
        return h, i


class Map(nn.Module):
    """`map` over the leading (dynamic) dim of two tensors, with a user
    input and a Linear closed over; two stacked outputs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, xs, ys, bias):  # xs f32[n,2,4], ys f32[n,4], bias f32[3]
        from torch._higher_order_ops.map import map as map_hop

        def f(pair, bias):
            x, y = pair
            h = F.relu(self.lin(x * y)) + bias
            return h, h.sum(-1)

        return map_hop(f, (xs, ys), bias)


# --------------------------------------------------------------------------
# Composite ops: one module per family of ops that torch's own
# decompositions (or CompositeImplicit kernels) lower, for ir-decompose's
# tests. These go to golden/composite (group="composite"): only their
# lowered graphs are required to run; the raw graphs keep ops the executor
# and ir2onnx need not know.
# --------------------------------------------------------------------------


class OpsActivation(nn.Module):
    def __init__(self):
        super().__init__()
        self.prelu = nn.PReLU(3)

    def forward(self, x):  # f32[2, 3, 4, 6]
        outs = [
            F.selu(x), F.celu(x, 0.7), F.softsign(x), F.softplus(x, beta=2.0, threshold=1.0),
            F.mish(x), F.hardswish(x), F.hardsigmoid(x), F.relu6(x * 4), F.silu(x),
            F.logsigmoid(x), F.glu(x, dim=-1), self.prelu(x), F.hardshrink(x, 0.3),
            F.softshrink(x, 0.3), F.tanhshrink(x), F.threshold(x, 0.1, -2.0),
            torch.logit(torch.sigmoid(x), eps=1e-6), x.square(), 1 - x, x.clamp_min(0.2),
            torch.addcmul(x, x, x, value=0.5), torch.addcdiv(x, x, x.abs() + 1, value=2.0),
            torch.lerp(x, x * 2, 0.3), torch.erfc(x),
        ]
        return tuple(outs)


class OpsShape(nn.Module):
    def forward(self, x, m):  # x f32[2, 8, 6, 6], m f32[5, 5]
        return (
            torch.tril(m), torch.triu(m, diagonal=1), torch.roll(x, shifts=(1, -2), dims=(1, 3)),
            x.narrow(2, 1, 3), F.pixel_shuffle(x, 2), x.repeat_interleave(2, dim=1),
            torch.einsum("bchw,bdhw->bcd", x, x), x.movedim(1, -1), x.swapaxes(0, 2),
            torch.stack(x.unbind(1), dim=-1), torch.cat(x.chunk(3, dim=2), dim=3),
            F.pad(x, (1, 2, 0, 1), mode="reflect"), F.pad(x, (1, 1, 2, 0), mode="replicate"),
            F.interpolate(x, scale_factor=2, mode="nearest"), x.flatten(1).unflatten(1, (4, 2, 36)),
            m.diag(), torch.flip(m, dims=[0]), m.t().contiguous(), m.expand(2, 5, 5).sum(0),
            x.new_zeros(3, 2) + 1, torch.zeros_like(m) - m, torch.full_like(m, 3.5), x.mT.contiguous(),
        )


class OpsNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(4, affine=True)
        self.gnorm = nn.GroupNorm(2, 4)
        self.lnorm = nn.LayerNorm([5, 6], elementwise_affine=False)
        with torch.no_grad():
            self.inorm.weight.uniform_(0.5, 1.5)
            self.inorm.bias.uniform_(-0.5, 0.5)
            self.gnorm.weight.uniform_(0.5, 1.5)
            self.gnorm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):  # f32[2, 4, 5, 6]
        v, mu = torch.var_mean(x, dim=(2, 3), keepdim=True)
        return (
            self.inorm(x), self.gnorm(x), self.lnorm(x), v, mu, x.std(dim=1, unbiased=False),
            torch.linalg.vector_norm(x, dim=-1), x.norm(p=1, dim=1), torch.logsumexp(x, dim=-1),
            F.normalize(x, dim=1), F.cosine_similarity(x[:, 0], x[:, 1], dim=-1),
            F.log_softmax(x, dim=1), F.softmax(x, dim=-1, dtype=torch.float64), x.mean(),
            torch.amax(x, dim=(1, 2)), x.var(dim=-1, correction=0),
        )


class OpsMisc(nn.Module):
    """Aliases, *_copy views, math helpers, losses, recurrent cells."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 5, num_layers=2, batch_first=True, bidirectional=True)
        self.rnn = nn.RNN(4, 3, nonlinearity="relu")
        self.rms = nn.RMSNorm(4)
        with torch.no_grad():
            self.rms.weight.uniform_(0.5, 1.5)

    def forward(self, x, v, ids):  # x f32[2, 3, 4], v f32[4], ids i64[5]
        t = x[0]
        g, hg = self.gru(x)
        r, hr = self.rnn(x)
        return (
            torch.absolute(x), torch.arccos(x.clamp(-0.9, 0.9)), torch.arctan2(x, x + 2), torch.clip(x, -0.5, 0.5),
            torch.concat([x, x], 1), torch.divide(x, 3.0), torch.true_divide(x, x + 5), torch.multiply(x, 2),
            torch.subtract(x, v), torch.negative(x), torch.greater(x, 0.1), torch.less_equal(x, v), torch.not_equal(x, v),
            torch.fix(x * 3), torch.sgn(x), torch.floor_divide(x * 10, 3), torch.max(x, v), torch.min(x, v),
            torch.clamp_min(x, v), torch.clamp_max(x, v), x.std(), x.var(), torch.std_mean(x, dim=1),
            torch.rsub(x, v), torch.lerp(x, x * 2, v.sigmoid()), torch.frac(x * 3), torch.deg2rad(x), torch.rad2deg(x),
            torch.isfinite(x / (x - x[0, 0, 0])), torch.nan_to_num(torch.log(x), nan=0.5, posinf=9.0, neginf=-9.0),
            torch.logaddexp(x, v), torch.sinc(x), torch.xlogy(x.abs(), v.abs() + 1), torch.dot(v, v), torch.mv(t, v),
            torch.outer(v, v), torch.addr(t.T @ t, v, v, beta=0.5, alpha=2.0), x.tile((2, 1, 1)), torch.fliplr(t),
            torch.flipud(t), self.rms(x), F.one_hot(ids, 6), F.mse_loss(x, x.flip(0)), F.l1_loss(x, v, reduction="sum"),
            F.huber_loss(x, x * 0.5, reduction="none", delta=0.3), F.smooth_l1_loss(x, v, beta=0.5),
            F.interpolate(x, scale_factor=2.0, mode="nearest"), torch.all(x > -5, dim=1), torch.all(x > 0),
            torch.count_nonzero(x > 0, dim=2), torch.trace(t.T @ t), torch.eye(3, 4), torch.nansum(torch.log(x)),
            torch.nanmean(torch.log(x), dim=1), torch.broadcast_tensors(v, x)[0] + 0, torch.hstack([t, t]),
            torch.vstack([t, t]), torch.rot90(t, 1, (0, 1)), F.channel_shuffle(x.unsqueeze(-1).repeat(1, 2, 1, 2), 2),
            F.rrelu(x, training=False), g, hg, r, hr, x.type_as(ids), x.new_empty((2, 2)).fill_(1.5),
        )


class OpsMore(nn.Module):
    """Recurrent cells, *_copy views, norms, stacking and products."""

    def __init__(self):
        super().__init__()
        self.lstm_cell = nn.LSTMCell(4, 3)
        self.gru_cell = nn.GRUCell(4, 3)
        self.rnn_cell = nn.RNNCell(4, 3, nonlinearity="tanh")

    def forward(self, x, v, m, ids):  # x f32[2, 3, 4], v f32[4], m f32[4, 4], ids i64[2, 3]
        t = x[0]
        h, c = self.lstm_cell(t)
        return (
            h, c, self.gru_cell(t), self.rnn_cell(t), torch.t_copy(m), torch.transpose_copy(x, 0, 2),
            torch.unsqueeze_copy(v, 0), torch.squeeze_copy(x[:1], 0), torch.expand_copy(v, (3, 4)),
            torch.alias_copy(m), torch.split_with_sizes_copy(v, [1, 3])[1], torch.norm(x, p=3, dim=1),
            torch.norm(x), torch.norm(x, p="fro", dim=(1, 2)),
            F.max_pool1d(x, 2, return_indices=True)[1], torch.logaddexp2(x, v), torch.float_power(x.abs(), 2.5),
            torch.heaviside(x, v), torch.column_stack([v, v]), torch.dstack([t, t]), torch.inner(x, m),
            torch.tensordot(x, m, dims=([2], [0])), torch.aminmax(x, dim=1)[0], torch.linalg.cross(x[..., :3], x[..., 1:]),
            torch.chain_matmul(m, m, m), torch.meshgrid(v, v[:3], indexing="ij")[1] + 0,
            torch.xlogy(2.0, v.abs() + 1), torch.take(m, ids), torch.take_along_dim(x, ids.unsqueeze(-1), dim=2),
            torch.argsort(v, descending=True), torch.msort(m), torch.linspace(-1, 2, 7), torch.isclose(x, x + 1e-9),
            F.pairwise_distance(t, t.flip(0)), torch.kron(m[:2, :2], m[:2, :3]), torch.diag_embed(v),
            x.clone().fill_(v[1]), torch.block_diag(m[:2, :2], m[:1, :3]), x.unfold(2, 2, 1).contiguous(),
        )


class MultiOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        h = self.lin(x)
        return {"sum": h + x, "parts": (F.relu(h), torch.topk(h, 2, dim=-1))}


class Dtypes(nn.Module):
    def __init__(self):
        super().__init__()
        self.w16 = nn.Parameter(torch.randn(4, 4).half())
        self.register_buffer("b_bf16", torch.randn(4).bfloat16())
        self.register_buffer("b_f64", torch.randn(4, dtype=torch.float64))
        self.register_buffer("b_i32", torch.arange(4, dtype=torch.int32) * 3)
        self.register_buffer("b_i8", torch.tensor([-3, 1, -1, 2], dtype=torch.int8))
        self.register_buffer("b_u8", torch.tensor([0, 200, 7, 255], dtype=torch.uint8))
        self.register_buffer("b_mask", torch.tensor([True, False, True, True]))

    def forward(self, x, n):  # x f32[4,4], n i32[4]
        h16 = x.half() * self.w16                            # float16 elementwise
        h = h16.float() + self.b_bf16.float() + self.b_f64.float()
        hb = h.to(torch.bfloat16) * 2                        # bfloat16 output
        idx = n + self.b_i32                                 # int32
        i8 = self.b_i8.to(torch.int32) * idx                 # int8 -> int32
        u8 = self.b_u8.to(torch.float32) / 255.0             # uint8 -> f32
        mask = (h > 0) & self.b_mask                         # bool [4,4]
        out = torch.where(mask, h, u8)                       # where
        d = (h.double() * self.b_f64).sum()                  # float64 0-dim
        cnt = mask.sum(dim=1)                                # int64
        return out, mask, i8 + idx, hb, h16, d, cnt


class ConvPaths(nn.Module):
    """Convolutions and pools in the shapes each of the executor's kernels
    takes, so that each is checked against torch: the direct product over
    few input channels (strides 2 and 3, odd and uneven padding, dilation),
    the packed product with taps over many pixels, im2col with the gemm
    crate below that, the transposed
    product over few columns (pointwise), strided and plain 1x1, pixel rows
    over a small plane (one product a tap), grouped, depthwise (stride, dilation, two outputs per channel) and max
    pools (odd sizes, padding, ceil mode). Batch 2: the per-image loops."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)  # 25x21: direct (few channels), stride 2
        self.wide = nn.Conv2d(3, 8, (5, 3), stride=(1, 3), padding=(0, 2), dilation=(2, 1))  # 41x15: direct
        self.down = nn.Conv2d(3, 4, 1, stride=2)  # strided 1x1 over 525 pixels
        self.mid = nn.Conv2d(16, 12, (3, 5), stride=(1, 3), padding=(2, 1), dilation=(1, 2))  # 27x5: im2col
        self.taps = nn.Conv2d(16, 14, (5, 3), padding=(2, 1))  # 16 x 15 taps over 25x21: packed
        self.few = nn.Conv2d(16, 24, 3, stride=2, padding=2, dilation=2)  # 7x6: im2col
        self.few_pw = nn.Conv2d(24, 40, 1)  # transposed, pointwise
        self.pw = nn.Conv2d(16, 20, 1)  # pointwise, 525 pixels
        self.down_mid = nn.Conv2d(16, 8, 1, stride=2, bias=False)  # strided 1x1, 13x11
        self.grouped = nn.Conv2d(16, 24, 3, padding=1, groups=4)  # 4 channels a group: direct
        self.dw = nn.Conv2d(16, 32, 5, stride=2, padding=2, groups=16)  # depthwise, two per channel
        self.dw_dil = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=16, bias=False)
        self.se = nn.Conv2d(24, 8, 1)  # squeeze-excite's 1x1 over 1x1 pixels: transposed
        self.rows = nn.Conv2d(16, 32, 3, padding=1)  # pixel rows: 13x11, one product a tap

    def forward(self, x):  # f32[2, 3, 49, 41]
        a = F.relu(self.stem(x))
        p = F.max_pool2d(a, 3, stride=2, padding=1)
        d = self.few(p)
        return (a, self.wide(x), self.down(x), self.mid(a), d, self.few_pw(F.relu(d)), self.pw(a),
                self.down_mid(a), self.grouped(a), self.dw(a), self.dw_dil(a), p,
                F.max_pool2d(a, 3, stride=2, ceil_mode=True), F.max_pool2d(x, (2, 3), stride=(2, 1)),
                self.se(F.adaptive_avg_pool2d(d, 1)), self.taps(a), self.rows(p))


class ConvEpilogues(nn.Module):
    """The element-wise chains the executor fuses into the convolution
    before them (run on each block of its output as the kernel finishes
    it): on each kernel (direct with taps, direct pointwise, depthwise,
    packed pointwise over few pixels, the transposed few-pixel product,
    pixel rows with taps), a
    lone relu, a residual add and relu, hardswish, relu6, a chain where the
    convolution's output is the second operand, and two that must not be
    fused: an operand made after the convolution, and a convolution whose
    output is also returned."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(8, 16, 3, padding=1)  # direct, relu
        self.c2 = nn.Conv2d(16, 16, 3, padding=1)  # direct, + residual, relu
        self.pw = nn.Conv2d(16, 24, 1)  # direct pointwise (360 pixels), hardswish
        self.dw = nn.Conv2d(24, 24, 3, padding=1, groups=24)  # depthwise, hardswish
        self.small = nn.Conv2d(24, 32, 1)  # packed pointwise over 6x6, relu6
        self.se = nn.Conv2d(24, 8, 1)  # transposed product over 1x1, relu
        self.sub = nn.Conv2d(16, 16, 3, padding=1)  # a - conv(a): the second operand
        self.late = nn.Conv2d(16, 16, 1)  # its operand is made after it
        self.shown = nn.Conv2d(16, 16, 3, padding=1)  # its output is returned too
        self.rows = nn.Conv2d(16, 32, 3, stride=2, padding=1)  # pixel rows over 10x9, relu
        self.rows2 = nn.Conv2d(32, 32, 3, padding=1)  # pixel rows, + residual, relu

    def forward(self, x):  # f32[2, 8, 20, 18]
        a = F.relu(self.c1(x))
        r = F.relu(self.c2(a) + a)
        h = F.hardswish(self.pw(r))
        d = F.hardswish(self.dw(h))
        s = F.relu6(self.small(F.adaptive_avg_pool2d(d, 6)))
        e = F.relu(self.se(F.adaptive_avg_pool2d(d, 1)))
        t = a - self.sub(a)
        y = self.late(r)
        z = torch.softmax(r, dim=1)  # made after self.late, not fusable
        u = self.shown(a)
        q = F.relu(self.rows(r))
        v = F.relu(self.rows2(q) + q)
        return r, d, s, e, t, y * z, u, F.relu(u), v


class ChannelsLast(nn.Module):
    """Depthwise convolutions whose outputs the executor leaves
    channels-last (the blocked kernel: 16 channels or more, 5x5) and the
    ops after them, which read that layout where it lies or copy it into
    planes first: a MobileNetV3 block at 14x14 (hardswish, the
    squeeze-and-excitation's mean and one scale per image, the projection
    as pixel rows over it, a residual), then at 7x7 a depthwise output
    returned as it is, summed without keepdim, scaled with the operands the
    other way round, added to its scaled self, max-pooled, concatenated,
    and an expansion (pixel rows) over it left channels-last for the 5x5
    after it, which reads it so; last blocks of 8 channels (24 and 40).
    Batch 2."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Conv2d(24, 48, 1)
        self.dw = nn.Conv2d(48, 48, 5, padding=2, groups=48)  # 14x14, blocked
        self.fc1 = nn.Conv2d(48, 16, 1)
        self.fc2 = nn.Conv2d(16, 48, 1)
        self.project = nn.Conv2d(48, 24, 1)  # 14x14 pointwise over a channels-last input
        self.dw2 = nn.Conv2d(24, 24, 5, stride=2, padding=2, groups=24)  # into 7x7
        self.scale = nn.Parameter(torch.randn(24, 1, 1))
        self.dw3 = nn.Conv2d(48, 48, 5, padding=2, groups=48, bias=False)
        self.pw3 = nn.Conv2d(48, 32, 1)  # 7x7: pixel rows
        self.expand2 = nn.Conv2d(24, 40, 1)  # 7x7 pixel rows, read only by dw4
        self.dw4 = nn.Conv2d(40, 40, 5, padding=2, groups=40)

    def forward(self, x):  # f32[2, 24, 14, 14]
        d = F.hardswish(self.dw(F.hardswish(self.expand(x))))
        s = F.hardsigmoid(self.fc2(F.relu(self.fc1(d.mean((2, 3), keepdim=True)))))
        y = self.project(d * s) + x
        e = self.dw2(y)
        z = self.scale * e
        c = torch.cat([e, z + e], 1)
        f = self.dw3(c)
        g = self.dw4(F.relu(self.expand2(e)))
        return e, e.sum((2, 3)), F.max_pool2d(e, 2), self.pw3(f * f.mean((3, 2), keepdim=True)), g


class StemPool(nn.Module):
    """Stems from three colours (the few-channel kernel) whose outputs the
    executor leaves channels-last where only a max pool reads them: ResNet's
    7x7 stride-2 to 64 channels with its relu and 3x3 stride-2 pool, a 5x5
    stride-2 to 32 channels under a 2x2 pool in ceil mode (odd planes: its
    last window hangs over), and a 3x3 to 48 channels read by a pool and a
    sum as well (kept in planes). Batch 2, planes of 45x38."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 7, stride=2, padding=3)
        self.stem2 = nn.Conv2d(3, 32, 5, stride=2, padding=2, bias=False)
        self.stem3 = nn.Conv2d(3, 48, 3, padding=1)

    def forward(self, x):  # f32[2, 3, 45, 38]
        a = F.max_pool2d(F.relu(self.stem(x)), 3, 2, 1)
        b = F.max_pool2d(self.stem2(x), 2, ceil_mode=True)
        c = F.relu(self.stem3(x))
        return a, b, F.max_pool2d(c, 3, 2, 1) + c.sum((2, 3), keepdim=True)


class SeFold(nn.Module):
    """Squeeze-and-excitation scales at batch 1 that the executor folds
    into the convolution after them (its weight's input channels scaled,
    the product over the input never made): MobileNetV3's block at 14x14
    (`d * s` into a 1x1 projection), the operands the other way round into
    a 3x3; and those it must not fold: a scaled input read again (returned
    too), a weight larger than half the input (a 7x7 block's 1x1 from 144
    channels to 96), a depthwise convolution after the scale. Batch 1."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Conv2d(24, 96, 1)
        self.dw = nn.Conv2d(96, 96, 5, padding=2, groups=96)
        self.fc1, self.fc2 = nn.Conv2d(96, 24, 1), nn.Conv2d(24, 96, 1)
        self.project = nn.Conv2d(96, 40, 1)  # folded
        self.taps = nn.Conv2d(96, 8, 3, padding=1)  # folded, s * d
        self.again = nn.Conv2d(96, 16, 1)  # its input returned too: not folded
        self.deep = nn.Conv2d(96, 144, 1, stride=2)
        self.fc3, self.fc4 = nn.Conv2d(144, 16, 1), nn.Conv2d(16, 144, 1)
        self.wide = nn.Conv2d(144, 96, 1)  # 13824 weights over 7056 inputs: not folded
        self.dw2 = nn.Conv2d(96, 96, 3, padding=1, groups=96)  # depthwise: not folded

    def forward(self, x):  # f32[1, 24, 14, 14]
        d = F.hardswish(self.dw(F.hardswish(self.expand(x))))
        s = F.hardsigmoid(self.fc2(F.relu(self.fc1(d.mean((2, 3), keepdim=True)))))
        p = self.project(d * s)
        t = self.taps(s * d)
        r = d * (s + 1)
        a = self.again(r)
        e = F.relu(self.deep(d))
        u = torch.sigmoid(self.fc4(F.relu(self.fc3(e.mean((2, 3), keepdim=True)))))
        w = self.wide(e * u)
        g = self.dw2(d * s.flip(1))
        return p, t, r, a, w, g


class ConvOver(nn.Module):
    """Residual adds whose convolution may write its output over the
    residual (dead after the add, its storage no other live value's, not
    the convolution's own input), on each kernel that does (direct with
    taps, a strided 1x1 whose output is the add's second operand, pixel
    rows of a pointwise product, pixel rows with taps, over the input), and
    those it must not: a residual read again later, a view of a value read
    again later, a buffer."""

    def __init__(self):
        super().__init__()
        conv = nn.Conv2d
        self.c0 = conv(8, 16, 3, padding=1)
        self.c1a, self.c1b = conv(16, 16, 3, padding=1), conv(16, 16, 3, padding=1)  # direct: over a
        self.c2a, self.c2b = conv(16, 16, 3, padding=1), conv(16, 16, 3, padding=1)  # b read later: fresh
        self.c3a, self.c3b = conv(16, 16, 1), conv(16, 16, 1)  # + a view of c, read later: fresh
        self.c4 = conv(16, 16, 3, padding=1)  # + a buffer: fresh
        self.c5a, self.c5b = conv(8, 8, 3, padding=1), conv(8, 8, 3, padding=1)  # + the input: over its copy
        self.main = conv(16, 32, 3, stride=2, padding=1)
        self.ds = conv(16, 32, 1, stride=2)  # strided 1x1, the second operand: over m
        self.pra, self.pr = conv(32, 32, 1), conv(32, 32, 1)  # pixel rows over 4x4: over p
        self.pta, self.pt = conv(32, 32, 3, padding=1), conv(32, 32, 3, padding=1)  # pixel rows with taps: over h
        self.register_buffer("field", torch.randn(2, 16, 24, 24))

    def forward(self, x):  # f32[2, 8, 24, 24]
        a = F.relu(self.c0(x))
        b = F.relu(self.c1b(F.relu(self.c1a(a))) + a)
        c = F.relu(self.c2b(F.relu(self.c2a(b))) + b)
        v = c.view(2, 16, 24, 24)
        d = F.relu(self.c3b(F.relu(self.c3a(c))) + v)
        e = F.relu(self.c4(d) + self.field)
        f = F.relu(self.c5b(F.relu(self.c5a(x))) + x)
        m = self.main(e)
        g = F.relu(m + self.ds(e))
        p = F.avg_pool2d(g, 3)
        h = F.relu(self.pr(F.relu(self.pra(p))) + p)
        k = F.relu(self.pt(F.relu(self.pta(h))) + h)
        return k, f, b * 2, c.mean(dim=1)


class LinearEpilogues(nn.Module):
    """The element-wise chains the executor fuses into the matrix product
    of a linear layer before them (run on each block of its output as the
    kernel finishes it), seen through the view a 3-D input's product
    takes: exact GELU, a residual add (the product first), tanh GELU, a
    relu after a 2-D product (no view), and two that are no chain of steps
    (the group itself runs on each block): a residual add with the product
    as its second operand, and SiLU written out (the product read at two
    steps)."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 48)  # gelu
        self.down = nn.Linear(48, 16)  # + x
        self.b = nn.Linear(16, 24)  # tanh gelu
        self.c = nn.Linear(16, 16)  # x + c(r): the second operand
        self.flat = nn.Linear(16, 8)  # 2-D, relu
        self.e = nn.Linear(16, 12)  # q * sigmoid(q)

    def forward(self, x):  # f32[2, 5, 16]
        h = F.gelu(self.up(x))
        r = self.down(h) + x
        t = F.gelu(self.b(r), approximate="tanh")
        s = x + self.c(r)
        f = F.relu(self.flat(x.reshape(10, 16)))
        q = self.e(r)
        return t, s, f, q * torch.sigmoid(q)


class OddWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_t = nn.Parameter(torch.randn(5, 3).t())       # [3,5], strides (1,3)
        big = torch.randn(100, dtype=torch.float64)          # not registered
        self.register_buffer("view_buf", big[10:14])         # offset 10 in an f64[100] storage
        self.fc1 = nn.Linear(5, 4)
        self.fc2 = nn.Linear(5, 4)
        self.fc2.weight = self.fc1.weight                    # tied weights
        self.register_buffer("temp", torch.tensor(2.5))      # 0-dim
        self.register_buffer("empty", torch.zeros(0, 5))     # empty

    def forward(self, x):  # [2,3]
        h = x @ self.w_t                                     # [2,5]
        h = torch.cat([h, self.empty], dim=0)                # still [2,5]
        a = self.fc1(h)
        b = self.fc2(h)
        v = self.view_buf.float()
        return (a + b) * v / self.temp


def resnet18():
    import torchvision
    return torchvision.models.resnet18(weights=None)


def resnet50():
    import torchvision
    return torchvision.models.resnet50(weights=None)


def mobilenet_v3_small():
    import torchvision
    return torchvision.models.mobilenet_v3_small(weights=None)


def efficientnet_b0():
    import torchvision
    return torchvision.models.efficientnet_b0(weights=None)


def convnext_tiny():
    import torchvision
    return torchvision.models.convnext_tiny(weights=None)


def vit_small():
    import torchvision
    return torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2,
        hidden_dim=32, mlp_dim=64, num_classes=10)


class LSTMHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(input_size=8, hidden_size=16, num_layers=2, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):  # [batch, seq, 8]
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


# Hugging Face transformers models, built from config objects (no downloads).
# The wrappers take only input_ids and return plain tensors/tuples.


class BertWrap(nn.Module):
    def __init__(self, attn):
        super().__init__()
        from transformers import BertConfig, BertModel
        self.m = BertModel(BertConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64, attn_implementation=attn))

    def forward(self, input_ids):
        last_hidden_state, pooler_output = self.m(input_ids=input_ids, return_dict=False)[:2]
        return last_hidden_state, pooler_output


class GPT2Wrap(nn.Module):
    def __init__(self, attn):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel
        self.m = GPT2LMHeadModel(GPT2Config(
            vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64,
            bos_token_id=0, eos_token_id=0, attn_implementation=attn))

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]


class LlamaWrap(nn.Module):
    def __init__(self, attn):
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM
        self.m = LlamaForCausalLM(LlamaConfig(
            vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
            attn_implementation=attn))

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]


# --------------------------------------------------------------------------
# Group "fallback" (golden/fallback): what failed on models from outside
# the repo: composite ops ir-run refused as exported, in-place ops on
# views, strided views (permuted, stepped, flipped) reaching kernels, and
# Hugging Face attention at batch 2. Each runs as exported, lowered, and
# in ONNX Runtime against these eager outputs.
# --------------------------------------------------------------------------


class FbConv(nn.Module):
    """conv1d, max_pool1d, group_norm, reflection/replication pad, conv_transpose2d."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.up = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x, img):
        y = self.gn(F.max_pool1d(self.conv(x), 2))
        r = F.pad(y, (2, 1), mode="reflect")
        p = F.pad(y, (1, 2), mode="replicate")
        u = self.up(img)
        u2 = F.pad(u, (1, 1, 2, 0), mode="reflect")
        u3 = F.pad(u, (1, 1, 2, 0), mode="replicate")
        return r, p, u, u2, u3


class FbShape(nn.Module):
    """chunk, narrow, mT, floor_divide (//), maximum/minimum, clamp_min."""

    def forward(self, x, y):
        a, b, c = x.chunk(3, dim=-1)
        n = x.narrow(1, 1, 2)
        t = x.mT
        fd = torch.floor_divide(x * 5, 2.0)
        mx = torch.maximum(a, b)
        mn = torch.minimum(b, c)
        cm = torch.clamp_min(x, 0.1)
        return a, b, c, n, t, fd, mx, mn, cm, x // (y.abs() + 0.5)


class FbInplace(nn.Module):
    """fill_ on a view, masked_fill_, copy_ into a buffer and a fresh tensor."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(3, 6))

    def forward(self, x):
        y = x.clone()
        y[0].fill_(2.0)
        z = x.clone().masked_fill_(x > 0, -1.0)
        self.state.copy_(x * 2)
        w = torch.empty_like(x).copy_(x + 1)
        return y, z, self.state + 1, w


class FbDist(nn.Module):
    """cdist, pdist, embedding_bag with padding_idx."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0)

    def forward(self, a, b, ids, offs):
        return torch.cdist(a, b), F.pdist(a[0]), self.bag(ids, offs)


class FbBags(nn.Module):
    """embedding_bag in every mode (sum with per-sample weights, mean with
    padding, max with include_last_offset), cdist and pdist at other p."""

    def __init__(self):
        super().__init__()
        self.sum = nn.EmbeddingBag(10, 4, mode="sum")
        self.mean = nn.EmbeddingBag(10, 4, mode="mean", padding_idx=2)
        self.max = nn.EmbeddingBag(10, 4, mode="max", include_last_offset=True)

    def forward(self, a, b, ids, offs, psw):
        return (self.sum(ids, offs, per_sample_weights=psw), self.mean(ids, offs),
                self.max(ids, torch.cat([offs, offs.new_tensor([ids.shape[0]])])),
                torch.cdist(a, b, p=1.0), torch.cdist(a, b, p=float("inf")),
                torch.cdist(a, b, p=0.5), F.pdist(b[1], p=1.0), F.pdist(a[0], p=3.0))


class FbSample(nn.Module):
    """grid_sample in each mode and padding, and nonzero(as_tuple=True)
    (a data-dependent size)."""

    def forward(self, x, grid, m):
        a = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        b = F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True)
        c = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=True)
        rows, cols = torch.nonzero(m > 0, as_tuple=True)
        return a, b, c, rows, cols


class FbArgs(nn.Module):
    """Arguments ir2onnx once refused on ops it has: adaptive pooling to
    sizes that do not divide, avg_pool with divisor_override, index_put
    with a boolean mask, scatter_reduce without self; and fold (col2im),
    masked_scatter, diagonal; the other reduces without self, windows in
    ceil mode past the input with a divisor, a boolean mask after the
    first dim with a tensor of values."""

    def forward(self, x, m, idx, src, cols):
        a = F.adaptive_avg_pool2d(x, (3, 4))
        b = F.adaptive_max_pool2d(x, (4, 3))
        c = F.avg_pool2d(x, 3, stride=2, padding=1, divisor_override=5)
        y = x.clone()
        y[m] = 0.5
        d = torch.zeros(2, 5).scatter_reduce(1, idx, src, reduce="amax", include_self=False)
        e = torch.zeros(2, 5).scatter_reduce(1, idx, src, reduce="mean", include_self=False)
        f = F.fold(cols, output_size=(4, 5), kernel_size=2)
        g = x[:, 0].masked_scatter(m[:, 0], src.reshape(-1).repeat(20)[: 2 * 7 * 9].reshape(2, 7, 9))
        h = torch.diagonal(x, offset=1, dim1=2, dim2=3)
        i = torch.zeros(2, 5).scatter_reduce(1, idx, src, reduce="amin", include_self=False)
        j = torch.ones(2, 5).scatter_reduce(1, idx, src, reduce="prod", include_self=False)
        k = torch.ones(2, 5).scatter_reduce(1, idx, src, reduce="sum", include_self=False)
        l = F.avg_pool2d(x, 2, ceil_mode=True, divisor_override=3)
        z = x.clone()
        z[:, m[0, :, :, 0]] = x[:, :1, 0, :]
        return a, b, c, y, d, e, f, g, h, i, j, k, l, z


class FbZoo(nn.Module):
    """What the wide zoo found (golden/zoo/REPORT.md): negation of int64
    (T5's position buckets), relu of NaN, a dilated kernel whose taps lie in
    the padding (DeepLabV3's atrous branches), weight norm (wav2vec2's
    positional convolution), padding='same' with dilation."""

    def __init__(self):
        super().__init__()
        self.atrous = nn.Conv2d(3, 4, 3, padding=12, dilation=12)
        self.v = nn.Parameter(torch.randn(4, 3, 3))
        self.g = nn.Parameter(torch.randn(1, 1, 3))
        self.same = nn.Conv1d(3, 4, 3, padding="same", dilation=2)

    def forward(self, x, img, pos):
        rel = -torch.min(pos, torch.zeros_like(pos))
        nan = torch.where(x > 1.0, torch.full_like(x, float("nan")), x).relu()
        wn = F.conv1d(x, torch._weight_norm(self.v, self.g, 2), padding=1)
        return rel, nan, self.atrous(img), wn, self.same(x)


class FbDeclines(nn.Module):
    """Arguments an ONNX emitter declines, lowered through the decomposition
    table instead: circular padding (ONNX's Pad wraps from opset 19 only)
    and an LSTM with projections (ONNX's LSTM has no proj_size)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True, proj_size=3)

    def forward(self, img, seq):
        y, (h, c) = self.lstm(seq)
        return F.pad(img, (1, 2, 2, 0), mode="circular"), y, h, c


class FbIntDiv(nn.Module):
    """Integer division with rounding, exact past 2^24 (float32 would round),
    and remainder of integers; a zero divisor is an error at run time."""

    def forward(self, a, b):
        return a // b, torch.remainder(a, b), torch.div(a, b, rounding_mode="trunc")


class FbFft(nn.Module):
    """A real FFT's magnitude: complex values inside, real outside (the
    tools run them as real pairs; golden/complex has more)."""

    def forward(self, x):
        return torch.fft.rfft(x, dim=-1).abs()


class FbRnn(nn.Module):
    """A 2-layer bidirectional LSTM into a bidirectional GRU."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, batch_first=True, bidirectional=True, num_layers=2)
        self.gru = nn.GRU(10, 6, batch_first=True, bidirectional=True)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        z, hg = self.gru(y)
        return y, h, c, z, hg


class FbStrided(nn.Module):
    """Views with steps, permutations and flips reaching kernels; attention
    and matmul on transposed operands."""

    def forward(self, x, q):
        m = x.view(3, 8)
        v = m.permute(1, 0)[1:7:2]
        f = m.t().flip(0)
        cs = m.t().cumsum(0)
        g = m.t()[::2, 1:] * 2
        e = v.unsqueeze(0).expand(2, 3, 3).sum(-1)
        B, L, _ = q.shape
        h = q.view(B, L, 2, 4).transpose(1, 2)
        att = F.scaled_dot_product_attention(h, h.flip(2), h)
        s = h @ h.transpose(-1, -2)
        return v, f, cs, g, e, att, s


class FbUnpool(nn.Module):
    """max_unpool1d/2d/3d from max pooling's indices, with and without
    output_size (for sizes the pooling rounded down)."""

    def __init__(self):
        super().__init__()
        self.p1, self.u1 = nn.MaxPool1d(2, return_indices=True), nn.MaxUnpool1d(2)
        self.p2, self.u2 = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)
        self.p3, self.u3 = nn.MaxPool3d(2, return_indices=True), nn.MaxUnpool3d(2)

    def forward(self, a, b, odd, c):
        y1, i1 = self.p1(a)
        y2, i2 = self.p2(b)
        z2, j2 = self.p2(odd)
        y3, i3 = self.p3(c)
        return (self.u1(y1, i1), self.u1(y1, i1, output_size=a.shape), self.u2(y2, i2),
                self.u2(z2, j2, output_size=odd.shape), self.u3(y3, i3, output_size=c.shape))


class FbAdaptiveMax(nn.Module):
    """adaptive_max_pool1d/2d/3d to sizes that do not divide, values and
    indices (ties: the inputs are whole numbers; NaNs in the 2-D input:
    the last NaN of a window wins), and values alone."""

    def forward(self, a, b, c):
        v1, i1 = F.adaptive_max_pool1d(a, 3, return_indices=True)
        v2, i2 = F.adaptive_max_pool2d(b, (3, 4), return_indices=True)
        v3, i3 = F.adaptive_max_pool3d(c, (2, 2, 3), return_indices=True)
        return v1, i1, v2, i2, v3, i3, F.adaptive_max_pool1d(a, 4), F.adaptive_max_pool3d(c, (3, 4, 2))


class FbIm2col(nn.Module):
    """unfold (im2col) with dilation, padding and stride, and plain."""

    def forward(self, x):
        return F.unfold(x, 3, dilation=2, padding=1, stride=2), F.unfold(x, (2, 3)), F.unfold(x, 2, padding=(1, 0))


class FbUpsample(nn.Module):
    """Every upsampling mode the executor runs, over 1, 2 and 3 spatial
    dims: nearest and nearest-exact, linear/bilinear/trilinear with and
    without aligned corners, by size and by (non-integer) scale."""

    def forward(self, x1, x2, x3):
        F = nn.functional
        return (
            F.interpolate(x1, scale_factor=2.5, mode="nearest"),
            F.interpolate(x1, size=7, mode="nearest-exact"),
            F.interpolate(x1, scale_factor=1.7, mode="linear"),
            F.interpolate(x1, size=11, mode="linear", align_corners=True),
            F.interpolate(x1, scale_factor=0.6, mode="linear"),
            F.interpolate(x2, scale_factor=(1.5, 0.75), mode="nearest"),
            F.interpolate(x2, size=(7, 3), mode="nearest-exact"),
            F.interpolate(x2, scale_factor=1.3, mode="bilinear"),
            F.interpolate(x2, size=(9, 4), mode="bilinear", align_corners=True),
            F.interpolate(x3, scale_factor=2, mode="nearest"),
            F.interpolate(x3, size=(3, 5, 7), mode="nearest-exact"),
            F.interpolate(x3, scale_factor=(1.5, 2.0, 0.5), mode="trilinear"),
            F.interpolate(x3, size=(4, 4, 6), mode="trilinear", align_corners=True),
        )


class FbConv3d(nn.Module):
    """3-D convolution: stride per dim, groups with dilation, no bias,
    padding per dim."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv3d(3, 4, 3, stride=(1, 2, 2), padding=1)
        self.b = nn.Conv3d(4, 4, (1, 3, 3), groups=2, dilation=(1, 2, 2), padding=(0, 2, 2), bias=False)
        self.c = nn.Conv3d(4, 2, 2, padding=(0, 1, 2))

    def forward(self, x):
        y = self.a(x)
        z = self.b(y)
        return y, z, self.c(z)


class FbFractional(nn.Module):
    """fractional_max_pool2d/3d with fixed samples (deterministic), values
    and indices; NaNs and a plane of -inf in the inputs."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.p2 = nn.FractionalMaxPool2d(2, output_size=(5, 6), return_indices=True,
                                         _random_samples=torch.rand(2, 3, 2, generator=g))
        self.q2 = nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5), _random_samples=torch.rand(2, 3, 2, generator=g))
        self.p3 = nn.FractionalMaxPool3d(2, output_size=(3, 4, 4), return_indices=True,
                                         _random_samples=torch.rand(1, 2, 3, generator=g))

    def forward(self, x, v):
        y, i = self.p2(x)
        z, j = self.p3(v)
        return y, i, self.q2(x), z, j


class DistilBertWrap(nn.Module):
    def __init__(self, attn):
        super().__init__()
        from transformers import DistilBertConfig, DistilBertModel
        self.m = DistilBertModel(DistilBertConfig(
            vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
            max_position_embeddings=64, attn_implementation=attn))

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, return_dict=False)[0]


class DynSeqOps(nn.Module):
    """Size arithmetic over a symbolic length (x: [batch, n, 4], both
    dynamic): -1 views, diff with prepend, repeat, expand, reflect padding,
    pooling, linear interpolation, tril/triu."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, padding=1)

    def forward(self, x):
        b, n, c = x.shape
        y = self.conv(x.transpose(1, 2))                    # [b, 6, n]
        d = torch.diff(y, dim=-1, prepend=y[..., :1])         # [b, 6, n]
        r = y.reshape(b, -1, 2)                               # [b, 3n, 2]
        p = nn.functional.pad(y, (1, 2), mode="reflect")      # [b, 6, n+3]
        # (max_pool1d and ceil-mode pooling specialise the length in torch 2.15)
        q = nn.functional.max_pool2d(p.unsqueeze(-1), (2, 1), (2, 1)).squeeze(-1)
        a = nn.functional.avg_pool1d(y, 3, 2, padding=1)
        t = x.repeat(1, 2, 1) + x.unsqueeze(0).expand(2, -1, -1, -1).sum(0).repeat(1, 2, 1)
        u = nn.functional.interpolate(y, scale_factor=2.0, mode="linear")
        g = x @ x.transpose(1, 2)                            # [b, n, n]
        return d, r.flatten(1), q, a, t, u, y.unflatten(1, (2, 3)).mean(-1), g.tril(-1), g.triu(1)


class DynLSTM(nn.Module):
    """A 2-layer bidirectional LSTM over a dynamic batch (torch 2.15 cannot
    export a dynamic sequence length: aten.lstm's decomposition unrolls it)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out, h, c


class DynScanLSTM(nn.Module):
    """An LSTM cell over a dynamic sequence with torch's `scan` (what
    exports a recurrence over a symbolic length in torch 2.15): two carried
    states, batch-first input, weights read from the enclosing scope."""

    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(8, 16)
        self.out = nn.Linear(16, 4)

    def forward(self, x):  # [b, n, 8]
        from torch._higher_order_ops.scan import scan
        b = x.shape[0]
        h0 = torch.zeros(b, 16)
        c0 = torch.zeros(b, 16)

        def step(carry, xt):
            h, c = carry
            h2, c2 = self.cell(xt, (h, c))
            return (h2, c2), self.out(h2)

        (h, c), ys = scan(step, (h0, c0), x.transpose(0, 1))
        return ys.transpose(0, 1), h, c



# --------------------------------------------------------------------------
# The long tail: ops users' exported graphs contain that each tool once
# refused (group="tail", golden/tail; random ops in golden/tail_random,
# whose values are not torch's: only their shapes and distributions are
# checked).
# --------------------------------------------------------------------------


class TailBicubic(nn.Module):
    """F.interpolate(mode="bicubic"): up and down, align_corners both ways,
    by size and by scale factor (DINOv2 / timm position-embedding resizing)."""

    def forward(self, x):  # f32[2, 3, 5, 7]
        return (
            F.interpolate(x, size=(9, 11), mode="bicubic", align_corners=False),
            F.interpolate(x, size=(9, 11), mode="bicubic", align_corners=True),
            F.interpolate(x, size=(3, 4), mode="bicubic", align_corners=False, antialias=False),
            F.interpolate(x, size=(3, 4), mode="bicubic", align_corners=True),
            F.interpolate(x, scale_factor=1.5, mode="bicubic", align_corners=False),
            F.interpolate(x, scale_factor=(0.7, 1.3), mode="bicubic", align_corners=False,
                          recompute_scale_factor=False),
            F.interpolate(x, size=(1, 1), mode="bicubic", align_corners=True),
        )


class TailShape(nn.Module):
    """reshape_as (LeViT, NFNet) over a dynamic batch."""

    def forward(self, x, y):  # f32[b, 12], f32[b, 3, 4]
        return x.reshape_as(y) + y, y.transpose(1, 2).reshape_as(x)


class TailLinalg(nn.Module):
    """nn.Bilinear with and without bias; einsum with diagonals."""

    def __init__(self):
        super().__init__()
        self.bil = nn.Bilinear(4, 3, 5)
        self.bil_nb = nn.Bilinear(4, 4, 2, bias=False)

    def forward(self, a, b, sq):  # f32[2, 4], f32[2, 3], f32[2, 4, 4]
        return (
            self.bil(a, b), self.bil_nb(a, a),
            torch.einsum("bii->b", sq), torch.einsum("ii->i", sq[0]), torch.einsum("ii->", sq[1]),
            torch.einsum("bij,bjj->bi", sq, sq), torch.einsum("bii->bi", sq),
            torch.einsum("iij->ij", sq.permute(1, 2, 0)),
        )


class TailHistc(nn.Module):
    """torch.histc (DeepSeek-V2's MoE expert counts): a given range with
    values on bin edges and outside it, and min == max (the data's range)."""

    def forward(self, x, e):  # f32[24], f32[12]
        return (
            torch.histc(x, bins=5, min=-1.0, max=1.0), torch.histc(x.view(4, 6), bins=7, min=-0.7, max=0.9),
            torch.histc(e, bins=4, min=0.0, max=4.0), torch.histc(e.double(), bins=3, min=1.0, max=3.0),
        )


class TailHistcAuto(nn.Module):
    """torch.histc with min == max: the range is the data's (read at run
    time; ir2onnx refuses it by name)."""

    def forward(self, x, e):  # f32[24], f32[12]
        return torch.histc(x, bins=4), torch.histc(e, bins=3, min=2.0, max=2.0), torch.histc(e * 0 + 1.5, bins=3)


class TailIndexCopy(nn.Module):
    """A KV cache written in place with index_copy_, and index_copy."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 8, 4))

    def forward(self, new, pos, x, idx, src):  # f32[2, 3, 4], i64[3], f32[5, 3], i64[2], f32[2, 3]
        self.cache.index_copy_(1, pos, new)
        y = x.clone()
        y.index_copy_(1, torch.tensor([2, 0]), x[:, :2] * 3.0)
        return self.cache * 1.0, torch.index_copy(x, 0, idx, src), y


class TailInPlace(nn.Module):
    """In-place ops on intermediates, kept as such by the training dialect:
    each runs its functional row and writes back in self's dtype (a half
    tensor added a float one stays half; an int64 one stays int64)."""

    def forward(self, x, h, i):  # f32[3, 5], f16[3, 5], i64[3, 5]
        y = x * 1.0
        y.sigmoid_()
        y.mul_(2.5)
        y.clamp_(0.2, 1.5)
        y.sub_(x)
        y.div_(3.0)
        y.abs_()
        y.sqrt_()
        y.exp_()
        y.neg_()
        y.tanh_()
        y.add_(x, alpha=0.5)
        y.masked_fill_(x > 1.0, -2.0)
        z = h.clone()
        z.add_(x)
        z.mul_(x)
        z.relu_()
        k = i.clone()
        k.add_(3)
        k.mul_(i)
        k.remainder_(5)
        k.sub_(i, alpha=2)
        k.floor_divide_(3)
        k.clamp_(min=1)
        return y, z, k


class TailLstmProj(nn.Module):
    """LSTM with proj_size: h = W_hr (o * tanh(c))."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, proj_size=3, batch_first=True)
        self.lstm2 = nn.LSTM(4, 6, proj_size=3, num_layers=2, bidirectional=True)

    def forward(self, x):  # f32[2, 5, 4]
        out, (h, c) = self.lstm(x)
        out2, (h2, c2) = self.lstm2(x)
        return out, h, c, out2, h2, c2


class TailMask(nn.Module):
    """Bool-mask indexing (data-dependent sizes) and masked_select."""

    def forward(self, x, m):  # f32[3, 4, 5], bool[3, 4]
        return x[x > 0], torch.masked_select(x, x < -0.5), x[m], x[0][m[0] | m[1]] * 2.0


class TailRandom(nn.Module):
    """Random ops in a graph (values differ from torch by design)."""

    def forward(self, x):  # f32[64, 128]
        return (
            torch.randn(400, 500), torch.rand(400, 500), torch.randn_like(x), torch.rand_like(x),
            torch.randint(3, 10, (400, 500)), torch.randn(300, 200, dtype=torch.float64),
        )


# --------------------------------------------------------------------------
# Registry: name -> (builder, make_inputs, dynamic_shapes, make_alt_inputs, big)
# Inputs are returned as a tuple of positional args.
# --------------------------------------------------------------------------


def _randn(*s):
    return torch.randn(*s)


def _set(t, *at, value=float("nan")):
    """`t` with `value` (NaN) at the given indices."""
    for i in at:
        t[i] = value
    return t


MODELS = collections.OrderedDict()


# --------------------------------------------------------------------------
# Higher-order ops torch.export writes (golden/hop, group="hop"): autocast
# regions (disabled, bfloat16, float16; expected outputs are torch's eager
# outputs under the autocast context, casts and all), grad-mode regions,
# associative_scan (its higher-order op, and the generic combine mode that
# leaves functorch's vmap calls), out_dtype, hints_wrapper, and a timm
# EfficientViT (MIT) whose attention runs in a disabled autocast region.
# --------------------------------------------------------------------------


class HopAutocastOff(nn.Module):
    """A Linear + ReLU in a disabled autocast region, between enabled code."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 6)

    def forward(self, x):
        with torch.autocast("cpu", enabled=False):
            y = torch.relu(self.lin(x))
        return y * 2


class HopAutocastBf16(nn.Module):
    """bfloat16 autocast around linear, matmul, conv2d (lower_precision_fp),
    softmax (not in CPU's lists: runs in its input's dtype), an add of
    mixed dtypes, a cat (promote), a float64 matmul (never cast) and a
    disabled region nested inside. Outputs are bfloat16 or float64."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 6)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x, img, d):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.lin(x)                      # bf16
            m = torch.matmul(x, x.transpose(0, 1))  # bf16
            c = self.conv(img)                   # bf16
            p = torch.softmax(h, -1)             # bf16 in, bf16 out
            mixed = h + x[:, :6]                 # bf16 + f32 -> f32
            cat = torch.cat([h, x[:, :6]], 0)    # promote: f32
            dd = torch.mm(d, d)                  # float64 stays
            with torch.autocast("cpu", enabled=False):
                off = torch.mm(x, x.transpose(0, 1))  # f32
        return h, m, c, p, mixed.bfloat16(), cat.bfloat16(), dd, off.bfloat16()


class HopAutocastF16(nn.Module):
    """float16 autocast around a Linear and a conv1d."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 5)
        self.conv = nn.Conv1d(2, 3, 3)

    def forward(self, x, s):
        with torch.autocast("cpu", dtype=torch.float16):
            a = torch.relu(self.lin(x))
            b = self.conv(s)
        return a, b


class HopGrad(nn.Module):
    """torch.no_grad() and torch.enable_grad() regions in forward."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x) * 2
        with torch.enable_grad():
            z = torch.tanh(y) + x
        return z


class HopAssocAdd(nn.Module):
    """associative_scan of a + b over dim 0: a higher-order op."""

    def forward(self, x):
        from torch._higher_order_ops.associative_scan import associative_scan
        return associative_scan(lambda a, b: a + b, x, dim=0)


def _pair_combine(w):
    def comb(a, b):
        # a linear recurrence h_t = g_t * h_{t-1} + u_t, composed (w is
        # 1: an additional input the combine reads, keeping it associative)
        return (a[0] * b[0], a[1] * b[0] * w + b[1])
    return comb


class HopAssocPair(nn.Module):
    """associative_scan of a two-tensor combine over dim 1, with a buffer
    the combine reads (an additional input)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.tensor(1.0))

    def forward(self, g, u):
        from torch._higher_order_ops.associative_scan import associative_scan
        return associative_scan(_pair_combine(self.w), (g, u), dim=1)


class HopVmapAdd(nn.Module):
    """associative_scan, generic combine mode, a + b over dim 0: traced
    through torch.vmap (functorch's _add_batch_dim / _remove_batch_dim)."""

    def forward(self, x):
        from torch._higher_order_ops.associative_scan import associative_scan
        return associative_scan(lambda a, b: a + b, x, dim=0, combine_mode="generic")


class HopVmapPair(nn.Module):
    """The two-tensor combine over dim 1, generic combine mode."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.tensor(1.0))

    def forward(self, g, u):
        from torch._higher_order_ops.associative_scan import associative_scan
        return associative_scan(_pair_combine(self.w), (g, u), dim=1, combine_mode="generic")


class HopOutDtype(nn.Module):
    """out_dtype: an int8 matrix product into int32."""

    def forward(self, a, b):
        from torch._higher_order_ops.out_dtype import out_dtype
        return out_dtype(torch.ops.aten.mm.default, torch.int32, a, b)


class HopHints(nn.Module):
    """hints_wrapper around a body."""

    def forward(self, x):
        from torch._higher_order_ops.hints_wrap import hints_wrapper

        def body(x):
            return torch.sin(x) + 1
        return hints_wrapper(body, (x,), {}, hints={"inner": True})


def hop_efficientvit():
    """timm's EfficientViT (MIT) b0 layout, narrowed: its LiteMLA attention
    runs in `torch.autocast(..., enabled=False)`."""
    import timm
    return timm.create_model("efficientvit_b0", pretrained=False, num_classes=10,
                             widths=(8, 16, 16, 32, 32), depths=(0, 1, 1, 1, 1), head_dim=8,
                             head_widths=(64, 80))


def _reg(name, build, inputs, dyn=None, alt=None, big=False, note=None, group=None, alt2=None, quant_steps=False):
    MODELS[name] = dict(build=build, inputs=inputs, dyn=dyn, alt=alt, alt2=alt2, big=big, note=note, group=group,
                        quant_steps=quant_steps)


_reg("mlp", MLP, lambda: (_randn(2, 4),))
_reg("cnn", CNN, lambda: (_randn(2, 3, 16, 16),))
_reg("conv_paths", ConvPaths, lambda: (_randn(2, 3, 49, 41),))
_reg("conv_epilogues", ConvEpilogues, lambda: (_randn(2, 8, 20, 18),))
_reg("channels_last", ChannelsLast, lambda: (_randn(2, 24, 14, 14),))
_reg("stem_pool", StemPool, lambda: (_randn(2, 3, 45, 38),))
_reg("se_fold", SeFold, lambda: (_randn(1, 24, 14, 14),))
_reg("conv_over", ConvOver, lambda: (_randn(2, 8, 24, 24),))
_reg("linear_epilogues", LinearEpilogues, lambda: (_randn(2, 5, 16),))
_reg("transformer", Transformer, lambda: (_randn(2, 5, 32),))
_reg("embedding", Embedding, lambda: (torch.randint(0, 50, (2, 7), dtype=torch.int64),))
_reg("bufconst", BufConst, lambda: (_randn(3, 4),))
_reg("dynamic", MLP, lambda: (_randn(8, 4),),
     dyn=lambda: {"x": {0: Dim("batch", min=1, max=64)}},
     alt=lambda: (_randn(3, 4),))
_reg("dynseq", DynSeq, lambda: (_randn(2, 10, 16),),
     dyn=lambda: {"x": {1: Dim("seq", min=2, max=128)}},
     alt=lambda: (_randn(2, 17, 16),))


def _cond_inputs():
    x = _randn(3, 4)
    return (x,)


def _cond_alt():
    (x,) = _cond_inputs()
    return (-x,)  # sum flips sign -> the other branch


_reg("cond", Cond, _cond_inputs, alt=_cond_alt,
     note="alt input is the negated input, so the other cond branch runs")


def _while_inputs():
    return (_randn(3, 4), torch.tensor(5, dtype=torch.int64))


def _while_alt():
    (x, _) = _while_inputs()
    return (x, torch.tensor(0, dtype=torch.int64))  # the loop body never runs


_reg("whileloop", WhileLoop, _while_inputs, alt=_while_alt,
     note="alt input has n=0, so the loop body never runs")


def _map_dyn():
    n = Dim("n", min=1, max=32)
    return {"xs": {0: n}, "ys": {0: n}, "bias": None}


_reg("map", Map, lambda: (_randn(5, 2, 4), _randn(5, 4), _randn(3)), dyn=_map_dyn,
     alt=lambda: (_randn(7, 2, 4), _randn(7, 4), _randn(3)))
_reg("multiout", MultiOut, lambda: (_randn(3, 6),))
_reg("dtypes", Dtypes,
     lambda: (_randn(4, 4), torch.randint(-5, 6, (4,), dtype=torch.int32)))
_reg("oddweights", OddWeights, lambda: (_randn(2, 3),))
_reg("resnet18", resnet18, lambda: (_randn(1, 3, 64, 64),), big=True)
_reg("resnet50", resnet50, lambda: (_randn(1, 3, 224, 224),), big=True)
_reg("mobilenet_v3_small", mobilenet_v3_small, lambda: (_randn(1, 3, 64, 64),), big=True)
_reg("efficientnet_b0", efficientnet_b0, lambda: (_randn(1, 3, 64, 64),), big=True)
_reg("convnext_tiny", convnext_tiny, lambda: (_randn(1, 3, 64, 64),), big=True)
_reg("vit_small", vit_small, lambda: (_randn(1, 3, 32, 32),))
_reg("lstm", LSTMHead, lambda: (_randn(2, 5, 8),))
_reg("ops_activation", OpsActivation, lambda: (_randn(2, 3, 4, 6),), group="composite")
_reg("ops_shape", OpsShape, lambda: (_randn(2, 8, 6, 6), _randn(5, 5)), group="composite")
_reg("ops_norm", OpsNorm, lambda: (_randn(2, 4, 5, 6),), group="composite")
_reg("ops_more", OpsMore, lambda: (_randn(2, 3, 4), _randn(4), _randn(4, 4), torch.randint(0, 3, (2, 3))),
     group="composite")
_reg("ops_misc", OpsMisc, lambda: (_randn(2, 3, 4), _randn(4), torch.tensor([0, 5, 2, 2, 1])), group="composite")

_reg("hop_autocast_off", HopAutocastOff, lambda: (_randn(3, 8),), group="hop")
_reg("hop_autocast_bf16", HopAutocastBf16, lambda: (_randn(3, 8), _randn(2, 3, 6, 5),
                                                    _randn(3, 3).double()), group="hop")
_reg("hop_autocast_f16", HopAutocastF16, lambda: (_randn(3, 8), _randn(2, 2, 7)), group="hop")
_reg("hop_grad", HopGrad, lambda: (_randn(3, 4),), group="hop")
_reg("hop_assoc_add", HopAssocAdd, lambda: (_randn(7, 3),), group="hop")
_reg("hop_assoc_pair", HopAssocPair, lambda: (torch.rand(2, 6) + 0.5, _randn(2, 6)), group="hop")
_reg("hop_vmap_add", HopVmapAdd, lambda: (_randn(7, 3),), group="hop")
_reg("hop_vmap_pair", HopVmapPair, lambda: (torch.rand(2, 6) + 0.5, _randn(2, 6)), group="hop")
_reg("hop_out_dtype", HopOutDtype, lambda: (torch.randint(-128, 128, (3, 16), dtype=torch.int8),
                                            torch.randint(-128, 128, (16, 4), dtype=torch.int8)), group="hop")
_reg("hop_hints", HopHints, lambda: (_randn(2, 5),), group="hop")
_reg("hop_efficientvit", hop_efficientvit, lambda: (_randn(1, 3, 64, 64),), group="hop")

_reg("tail_bicubic", TailBicubic, lambda: (_randn(2, 3, 5, 7),), group="tail")
_reg("tail_shape", TailShape, lambda: (_randn(2, 12), _randn(2, 3, 4)),
     dyn=lambda: {"x": {0: Dim("batch", min=1, max=64)}, "y": {0: Dim("batch", min=1, max=64)}},
     alt=lambda: (_randn(5, 12), _randn(5, 3, 4)), group="tail")
_reg("tail_linalg", TailLinalg, lambda: (_randn(2, 4), _randn(2, 3), _randn(2, 4, 4)), group="tail")
_reg("tail_histc", TailHistc, lambda: (
    torch.cat([torch.tensor([-1.0, -0.6, -0.2, 0.2, 0.6, 1.0, -1.5, 2.0, -0.6000001, 0.9999999, 0.0, -1.0]),
               torch.randn(12).clamp(-1.2, 1.2)]),
    torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 4.0, -0.5, 4.5, 0.5, 2.5, 3.0, 1.0])), group="tail")
_reg("tail_histc_auto", TailHistcAuto, lambda: (_randn(24), torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 4.0, -0.5, 4.5])),
     group="tail")
_reg("tail_index_copy", TailIndexCopy, lambda: (_randn(2, 3, 4), torch.tensor([5, 0, 2]), _randn(5, 3),
                                                torch.tensor([3, 1]), _randn(2, 3)), group="tail")
_reg("tail_in_place", TailInPlace, lambda: (_randn(3, 5), _randn(3, 5).half(), torch.randint(-20, 20, (3, 5))),
     group="tail")
_reg("tail_lstm_proj", TailLstmProj, lambda: (_randn(2, 5, 4),), group="tail")
_reg("tail_mask", TailMask, lambda: (_randn(3, 4, 5), torch.rand(3, 4) > 0.5), group="tail")
_reg("tail_random", TailRandom, lambda: (_randn(64, 128),), group="tail_random")

_reg("fb_conv", FbConv, lambda: (_randn(2, 4, 10), _randn(1, 2, 4, 5)), group="fallback")
_reg("fb_shape", FbShape, lambda: (_randn(2, 4, 6), _randn(2, 4, 6)), group="fallback")
_reg("fb_inplace", FbInplace, lambda: (_randn(3, 6),), group="fallback")
_reg("fb_dist", FbDist, lambda: (_randn(2, 5, 3), _randn(2, 4, 3),
                                 torch.tensor([1, 0, 3, 4, 0, 9]), torch.tensor([0, 2, 5])),
     group="fallback")
_reg("fb_bags", FbBags, lambda: (_randn(2, 5, 3), _randn(2, 4, 3),
     torch.tensor([1, 2, 4, 5, 2, 2, 9, 0, 3]), torch.tensor([0, 2, 2, 6]), _randn(9)),
     group="fallback")
_reg("fb_gpt2_sdpa_b2", lambda: GPT2Wrap("sdpa"),
     lambda: (torch.randint(0, 100, (2, 8), dtype=torch.int64),), group="fallback")
_reg("fb_sample", FbSample, lambda: (_randn(2, 3, 5, 6), torch.rand(2, 4, 3, 2) * 2.4 - 1.2,
     _randn(4, 5)), group="fallback")
_reg("fb_args", FbArgs, lambda: (_randn(2, 3, 7, 9), torch.rand(2, 3, 7, 9) > 0.5,
     torch.tensor([[0, 1, 1, 4], [2, 2, 0, 3]]), _randn(2, 4), _randn(1, 12, 12)),
     group="fallback")
_reg("fb_zoo", FbZoo, lambda: (_randn(2, 3, 9), _randn(1, 3, 8, 8),
     torch.arange(-4, 5).reshape(1, 9) * 3), group="fallback")
_reg("fb_declines", FbDeclines, lambda: (_randn(1, 2, 5, 6), _randn(2, 5, 4)), group="fallback")
_reg("fb_intdiv", FbIntDiv, lambda: (torch.tensor([7, -7, 2**40 + 3, 5, -9]),
     torch.tensor([2, 2, 3, 1, -4])), group="fallback")
_reg("fb_fft", FbFft, lambda: (_randn(2, 8),), group="fallback")
_reg("fb_rnn", FbRnn, lambda: (_randn(2, 5, 4),), group="fallback")
_reg("fb_strided", FbStrided, lambda: (_randn(24), _randn(2, 5, 8)), group="fallback")
_reg("fb_unpool", FbUnpool, lambda: (_randn(2, 3, 9), _randn(1, 2, 6, 8), _randn(1, 2, 7, 9), _randn(1, 2, 5, 6, 7)),
     group="fallback")
_reg("fb_adaptive_max", FbAdaptiveMax,
     lambda: ((_randn(2, 3, 10) * 2).round(),
              _set((_randn(1, 3, 7, 10) * 2).round(), (0, 0, 1, 2), (0, 0, 2, 1), (0, 1, 5, 9)),
              (_randn(1, 2, 5, 6, 7) * 2).round()),
     group="fallback")
_reg("fb_im2col", FbIm2col, lambda: (_randn(2, 3, 7, 9),), group="fallback")
_reg("fb_upsample", FbUpsample, lambda: (_randn(2, 3, 6), _randn(1, 2, 5, 6), _randn(1, 2, 3, 4, 5)),
     group="fallback")
_reg("fb_conv3d", FbConv3d, lambda: (_randn(2, 3, 5, 8, 8),), group="fallback")
_reg("fb_fractional", FbFractional,
     lambda: (_set(_set(_randn(2, 3, 9, 11), (0, 0, 3, 4), (1, 2, 0, 0)), (1, 1), value=float("-inf")),
              _set(_randn(1, 2, 6, 8, 7), (0, 1, 2, 2, 2))),
     group="fallback")
_reg("fb_bert_sdpa_b2", lambda: BertWrap("sdpa"),
     lambda: (torch.randint(0, 100, (2, 8), dtype=torch.int64),), group="fallback")
_reg("fb_distilbert_sdpa_b2", lambda: DistilBertWrap("sdpa"),
     lambda: (torch.randint(0, 100, (2, 8), dtype=torch.int64),), group="fallback")


# --------------------------------------------------------------------------
# Numerics (golden/numerics): torch's numbers beyond plain float32, each a
# program that a silent wrong answer was once found in: integers past 2^53
# and their wrap-around, NaN's order, float16 and bfloat16 accumulation,
# fully masked attention rows, 3-D convolutions. Every stage runs them.
# --------------------------------------------------------------------------

BIG = 2**53 + 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


class NumInt64(nn.Module):
    """int64 past 2^53 through every integer op (a float64 would round)."""

    def forward(self, a, b):  # i64[6], i64[6] (b nonzero)
        return (
            a & b, a | b, a ^ b, ~a, a % b, torch.fmod(a, b), a // b,
            torch.div(a, b, rounding_mode="trunc"), a ** 3, torch.pow(b, 2),
            torch.prod(a[:3]), torch.cumsum(a, 0), torch.sort(a).values, torch.sort(a).indices,
            torch.clamp(a, min=BIG), torch.clamp(a, max=-BIG), a == BIG, a != BIG + 1, a > BIG - 1,
            torch.full((2,), 2**62 + 3) + a[:2], a + BIG, a * 3 - b, torch.maximum(a, b), torch.minimum(a, b),
            torch.where(a > 0, a, BIG), torch.abs(a), -a, torch.sign(a), a.sum(), a.amax(), a.argmax(),
            torch.topk(a, 2).values, a << 3, a >> 2,
        )


class NumIntDivEdge(nn.Module):
    """int64 min // -1 (wraps to int64 min, as torch gives) and remainder."""

    def forward(self, a):  # i64[3]
        return a // -1, torch.remainder(a, -1), a * -1, torch.fmod(a, -1)


class NumInt8(nn.Module):
    """Small integer types wrap as torch's: int8 (127 + 1) // 2 is -64."""

    def forward(self, x, u, n):  # i8[6], u8[6], i64[6]
        return (
            (x + 1) // 2, x * 3, x - 100, -x, x.abs(), (u + 200), u * 2, u - 10,
            n.to(torch.int8), n.to(torch.uint8), n.to(torch.int16), (n * 1000).to(torch.int32),
            x.to(torch.int16) * 300, x.sum(), u.sum(), torch.cumsum(x, 0), x & 0x0F, x | -128,
            torch.sort(x).values, torch.clamp(x, min=-5, max=5),
        )


class NumNan(nn.Module):
    """NaN's order: the largest value, and it propagates (topk, sort,
    argmax, amax, max, maximum, clamp)."""

    def forward(self, x, y):  # f32[3, 5] with NaNs, f32[3, 5]
        return (
            torch.topk(x, 3, dim=1), torch.topk(x, 2, dim=1, largest=False), torch.sort(x, dim=1),
            torch.sort(x, dim=1, descending=True), x.argmax(dim=1), x.argmin(dim=1), x.argmax(),
            x.amax(dim=1), x.amin(dim=0), x.max(dim=1), x.min(dim=1), x.max(), torch.maximum(x, y),
            torch.minimum(x, y), torch.clamp(x, min=0.0), torch.clamp(x, -0.5, 0.5), x.clamp(max=y),
            torch.nan_to_num(x, nan=7.0), torch.isnan(x), x.sum(dim=1), x.cumsum(1),
        )


class NumHalfCnn(nn.Module):
    """A small CNN in float16 or bfloat16: convolutions, batch norm, pooling
    and a linear head over long dot products (torch accumulates in float32)."""

    def __init__(self, dtype):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.GELU(),
            nn.Conv2d(64, 64, 3, padding=1, groups=64), nn.Conv2d(64, 96, 1), nn.SiLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(96), nn.Linear(96, 300), nn.ReLU(),
            nn.Linear(300, 10),
        )
        self.to(dtype).eval()

    def forward(self, x):
        h = self.body(x)
        return h, h.softmax(-1), h.sum(), x.mean(dim=(2, 3)), (x @ x.transpose(-1, -2)).sum(dim=1)


class NumSdpaMasked(nn.Module):
    """Scaled dot-product attention where a query row has every key masked
    (a padded batch through sliding-window attention): torch gives 0 there."""

    def forward(self, q, k, v, keep):  # f32[2, 2, 5, 8], f32[2, 2, 6, 8] x2, bool[2, 1, 5, 6]
        neg = torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))
        return (
            F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
            F.scaled_dot_product_attention(q, k, v, attn_mask=neg),
        )


class NumConv3d(nn.Module):
    """3-D convolutions in the layouts of a video ResNet (torchvision r3d_18,
    reduced width): a (3, 7, 7) stem of stride (1, 2, 2), 3x3x3 ones with
    stride 1 and 2, a strided 1x1x1 downsample, odd paddings, and 3x3x3
    ones over a depth of one plane, whose padding holds the kernel's other
    depth taps (2-D kernels once took those and were off by 0.1)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv3d(3, 16, (3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3), bias=False)
        self.c1 = nn.Conv3d(16, 16, 3, padding=1)
        self.c2 = nn.Conv3d(16, 32, 3, stride=2, padding=1)
        self.down = nn.Conv3d(16, 32, 1, stride=2, bias=False)
        self.c3 = nn.Conv3d(32, 32, 3, stride=2, padding=1)
        self.c4 = nn.Conv3d(32, 32, 3, padding=1)
        self.flat = nn.Conv3d(32, 32, 3, padding=1)
        self.odd = nn.Conv3d(32, 8, (2, 3, 1), stride=(1, 2, 1), padding=(0, 2, 0), dilation=(1, 2, 1))
        self.grp = nn.Conv3d(32, 32, 3, padding=1, groups=4)
        self.point = nn.Conv3d(32, 64, 1)
        self.bn = nn.BatchNorm3d(16)
        self.eval()

    def forward(self, x):  # f32[2, 3, 4, 32, 32]
        h = F.relu(self.bn(self.stem(x)))
        h = F.relu(self.c1(h)) + h
        y = self.c2(h) + self.down(h)          # [2, 32, 2, 8, 8]
        z = F.relu(self.c3(y))                 # [2, 32, 1, 4, 4]
        z = self.c4(z) + z                     # 3x3x3 over one plane
        plane = self.flat(y[:, :, :1])         # 3x3x3 over one 8x8 plane
        return z, plane, self.odd(y), self.grp(y), self.point(y), F.adaptive_avg_pool3d(z, 1).flatten(1)


class NumF64Conv(nn.Module):
    """float64 through convolutions and a linear head: ir-run and
    ir-decompose run it; ir2onnx refuses it (ONNX Runtime's CPU provider has
    no float64 Conv, so the file it would write could not be run)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv1d(8, 4, 3, stride=2)
        self.lin = nn.Linear(4, 5)
        self.double().eval()

    def forward(self, x):  # f64[2, 3, 6, 6]
        h = F.relu(self.c1(x)).flatten(2)
        return self.lin(self.c2(h).mean(-1))


def _nan_inputs():
    x = _randn(3, 5)
    x[0, 1] = float("nan")
    x[1, 3] = float("nan")
    x[1, 0] = float("nan")
    x[2, 2] = float("inf")
    y = _randn(3, 5)
    y[2, 4] = float("nan")
    return (x, y)


def _sdpa_masked_inputs():
    keep = torch.rand(2, 1, 5, 6) > 0.3
    keep[0, 0, 1, :] = False  # a row with every key masked
    keep[1, 0, 4, :] = False
    keep[1, 0, 0, :] = True
    return (_randn(2, 2, 5, 8), _randn(2, 2, 6, 8), _randn(2, 2, 6, 8), keep)


_reg("num_int64", NumInt64, lambda: (
    torch.tensor([BIG, -BIG, 2**62 + 5, 7, -2**40 - 3, BIG + 2]),
    torch.tensor([3, -7, BIG, 2, 5, -2**33])), group="numerics")
_reg("num_intdiv_edge", NumIntDivEdge, lambda: (torch.tensor([I64_MIN, I64_MAX, -5]),), group="numerics")
_reg("num_int8", NumInt8, lambda: (
    torch.tensor([127, -128, 100, -1, 0, 64], dtype=torch.int8),
    torch.tensor([255, 0, 56, 200, 1, 128], dtype=torch.uint8),
    torch.tensor([300, -129, 2**40 + 7, 65535, -1, 128])), group="numerics")
_reg("num_nan", NumNan, _nan_inputs, group="numerics")
_reg("num_f16_cnn", lambda: NumHalfCnn(torch.float16), lambda: (_randn(2, 3, 24, 24).half(),), group="numerics")
_reg("num_bf16_cnn", lambda: NumHalfCnn(torch.bfloat16), lambda: (_randn(2, 3, 24, 24).bfloat16(),),
     group="numerics")
_reg("num_sdpa_masked", NumSdpaMasked, _sdpa_masked_inputs, group="numerics")
_reg("num_f64_conv", NumF64Conv, lambda: (_randn(2, 3, 6, 6).double(),), group="numerics")
_reg("num_conv3d", NumConv3d, lambda: (_randn(2, 3, 4, 32, 32),), group="numerics")

# --------------------------------------------------------------------------
# Complex values (golden/complex): FFTs, spectrograms, complex arithmetic
# and models that hold complex buffers. The tools lower complex values to
# real pairs (a trailing dim of 2); every stage runs them against torch.
# cx_io's inputs and outputs are complex: ir-run takes and returns them,
# ir2onnx refuses them (ONNX Runtime takes no complex tensors).
# --------------------------------------------------------------------------


class CxSpectrogram(nn.Module):
    """A power spectrogram (torch.stft, hann window, centered) and torch.istft
    round trips: hop dividing n_fft and not, a shorter window, one-sided and
    two-sided, normalized, a given length."""

    def __init__(self):
        super().__init__()
        self.register_buffer("win", torch.hann_window(32))
        self.register_buffer("win12", torch.hann_window(12))

    def forward(self, x):  # f32[2, 200]
        s = torch.stft(x, 32, hop_length=8, window=self.win, return_complex=True)
        power = s.abs() ** 2
        y = torch.istft(s, 32, hop_length=8, window=self.win, length=200)
        s2 = torch.stft(x, 16, hop_length=5, win_length=12, window=self.win12, center=False,
                        normalized=True, onesided=False, return_complex=True)
        s3 = torch.stft(x[0], 32, hop_length=8, window=self.win, normalized=True, return_complex=True)
        y3 = torch.istft(s3, 32, hop_length=8, window=self.win, normalized=True)
        s4 = torch.stft(x, 24, hop_length=9, window=torch.hann_window(24), pad_mode="constant",
                        return_complex=True)
        y4 = torch.istft(s4, 24, hop_length=9, window=torch.hann_window(24), length=190)
        return power, y, torch.view_as_real(s2), y3, s4.abs(), y4


class CxFft(nn.Module):
    """torch.fft: rfft, irfft, fft, ifft, fft2, fftn, rfft2, irfftn with each
    norm, lengths padded and cut, dims negative and not; fftshift of a
    complex spectrum, ifftshift of a real signal."""

    def forward(self, x, z):  # f32[3, 16], f32[2, 6, 10]
        r = torch.fft.rfft(x)
        return (
            torch.view_as_real(r),
            torch.fft.irfft(torch.fft.rfft(x, norm="ortho"), n=16, norm="ortho"),
            torch.view_as_real(torch.fft.fft(x, norm="forward")),
            torch.fft.ifft(torch.fft.fft(x)).real,
            torch.fft.fft2(z).abs(),
            torch.view_as_real(torch.fft.fft(x, n=20, dim=-1)),
            torch.fft.irfft(r, n=10),
            torch.fft.irfft(r),
            (torch.fft.fftn(z, dim=(0, 2), norm="ortho") * (0.6 + 0.8j)).angle(),
            torch.fft.ifft2(torch.fft.fft2(z, norm="forward"), norm="forward").imag,
            torch.view_as_real(torch.fft.rfft2(z)),
            torch.fft.irfftn(torch.fft.rfftn(z, dim=(1, 2)), s=(6, 10), dim=(1, 2)),
            torch.view_as_real(torch.fft.fft(x, n=7, dim=0, norm="ortho")),
            torch.view_as_real(torch.fft.ifft(x, dim=0).resolve_conj()),
            torch.view_as_real(torch.fft.fftshift(torch.fft.fft2(z), dim=(-2, -1))),
            torch.fft.ifftshift(x),
        )


class CxRope(nn.Module):
    """Meta's original Llama rotary embedding: the query and key as complex
    pairs times freqs_cis, a complex buffer made by torch.polar."""

    def __init__(self, dim=16, seq=6, theta=10000.0):
        super().__init__()
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
        freqs = torch.outer(torch.arange(seq), freqs).float()
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(freqs), freqs))
        self.wq = nn.Linear(32, 4 * dim, bias=False)
        self.wk = nn.Linear(32, 4 * dim, bias=False)

    def forward(self, h):  # f32[2, 6, 32]
        b, s, _ = h.shape
        xq = self.wq(h).view(b, s, 4, -1)
        xk = self.wk(h).view(b, s, 4, -1)
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        freqs_cis = self.freqs_cis[:s]
        shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
        freqs_cis = freqs_cis.view(*shape)
        xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
        xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)


class CxArith(nn.Module):
    """Complex arithmetic between real inputs and outputs: polar, complex,
    angle, conj, abs, real/imag, mul/add/sub/div (complex by complex, by
    real, by a complex scalar), exp, sum and mean, cat and a transpose;
    pow, sqrt (negative reals: the branch cut), log, reciprocal, matrix
    products, an indexed write."""

    def forward(self, a, b):  # f32[3, 4], f32[3, 4]
        z = torch.polar(a.abs() + 0.5, b)
        w = torch.complex(a, b)
        u = z * w + z.conj() - w / (z + 2)
        v = torch.cat([u, w.transpose(0, 1).reshape(3, 4)], dim=1) * 0.5
        return (
            torch.angle(u), u.abs(), u.real, u.imag, torch.view_as_real(u * 1j),
            torch.exp(w).real, torch.view_as_real(v.sum(dim=0)), torch.view_as_real(v.mean(dim=-1)),
            torch.view_as_real(z * a - 3 + 2j), (w * w.conj()).real, torch.angle(-a),
            torch.view_as_real(w[1:, ::2].unsqueeze(0).expand(2, 2, 2).flip(-1)),
            torch.view_as_real(w ** 2), torch.view_as_real(z ** 0.5), torch.view_as_real(torch.sqrt(w)),
            torch.view_as_real(torch.sqrt(torch.complex(-a.abs(), torch.zeros_like(a)))),
            torch.view_as_real(torch.log(z)), torch.view_as_real(torch.reciprocal(w)),
            torch.view_as_real(w @ z.transpose(0, 1)), torch.view_as_real(u @ a.transpose(0, 1).to(torch.complex64)),
            torch.view_as_real(self.scatter(u)),
        )

    def scatter(self, u):
        q = torch.zeros(3, 4, dtype=torch.complex64)
        q[torch.tensor([0, 2])] = u[1:3] * 2
        return q


class CxIo(nn.Module):
    """Complex inputs and outputs (complex64 and complex128); angles of
    spectra at the branch cut."""

    def forward(self, z, x, d):  # c64[3, 4], f32[3, 4], c128[5]
        # the angle of a real signal's spectrum: its DC and Nyquist bins are
        # real, the negative ones at pi (not -pi: their imaginary part is +0)
        return (z * x + z.conj() * 2j, z.abs(), torch.fft.fft(z), d * d, torch.view_as_real(d),
                torch.fft.fft(x).angle(), torch.fft.rfft(x, dim=0).angle())


class CxFNet(nn.Module):
    """Hugging Face FNet (token mixing by a 2-D FFT's real part)."""

    def __init__(self):
        super().__init__()
        from transformers import FNetConfig, FNetModel
        self.m = FNetModel(FNetConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=2, intermediate_size=64,
            max_position_embeddings=32, type_vocab_size=2))

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, return_dict=False)[0]


def _complex(*s, dtype=torch.complex64):
    return torch.complex(torch.randn(*s), torch.randn(*s)).to(dtype)


_reg("cx_spectrogram", CxSpectrogram, lambda: (_randn(2, 200),), group="complex")
_reg("cx_fft", CxFft, lambda: (_randn(3, 16), _randn(2, 6, 10)), group="complex")
_reg("cx_rope", CxRope, lambda: (_randn(2, 6, 32),), group="complex")
_reg("cx_rope_dyn", lambda: CxRope(seq=16), lambda: (_randn(2, 6, 32),),
     dyn=lambda: {"h": {1: Dim("seq", min=2, max=16)}}, alt=lambda: (_randn(2, 11, 32),), group="complex",
     note="dynamic sequence: the complex buffer sliced to it")
_reg("cx_arith", CxArith, lambda: (_randn(3, 4), _randn(3, 4)), group="complex")
_reg("cx_io", CxIo, lambda: (_complex(3, 4), _randn(3, 4), _complex(5, dtype=torch.complex128)),
     group="complex")
_reg("cx_fnet", CxFNet, lambda: (torch.randint(0, 100, (2, 8), dtype=torch.int64),), group="complex")

# --------------------------------------------------------------------------
# PT2E int8 (golden/quant): models quantized by torch's PT2E flow
# (torchao.quantization.pt2e: prepare_pt2e, calibration, convert_pt2e),
# then exported. Their graphs are float ops between quantized_decomposed
# quantize/dequantize nodes (per-tensor and per-channel; choose_qparams for
# dynamic quantization). Two quantizers: torchao's X86InductorQuantizer
# (uint8 activations, int8 per-channel weights) and the XNNPACKQuantizer
# (int8 activations, weights in [-127, 127], per-tensor or per-channel;
# torchao keeps it under torchao.testing.pt2e since it moved to ExecuTorch).
# Expected outputs are torch eager's on the converted module. q_ops calls the
# ops directly on edge values (rounding ties, saturation, a range narrower
# than the dtype's, per-channel along an inner axis, choose_qparams), with
# the quantized integers as outputs.
# --------------------------------------------------------------------------


class QCnn(nn.Module):
    """conv + batch norm + relu, a residual add, max and average pooling, a
    linear head (PT2E folds the batch norm into the convolution)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)
        with torch.no_grad():
            self.bn.running_mean.copy_(torch.randn(16) * 0.2)
            self.bn.running_var.copy_(torch.rand(16) + 0.5)
            self.bn.weight.copy_(torch.rand(16) + 0.5)
            self.bn.bias.copy_(torch.randn(16) * 0.1)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        h = F.relu(self.conv2(h) + h)
        h = F.max_pool2d(h, 2)
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return self.fc(h)


class QMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class QOps(nn.Module):
    """The quantized_decomposed ops called directly: the integers they make
    are outputs (compared exactly), with the values dequantized back."""

    def __init__(self):
        super().__init__()
        import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers torch.ops.quantized_decomposed
        self.register_buffer("scales", torch.tensor([0.5, 0.25, 0.1, 0.0625]))
        self.register_buffer("zps", torch.tensor([0, 3, -2, 10]))
        self.register_buffer("scales_u", torch.tensor([0.02, 0.05, 0.125, 0.35, 0.25]))
        self.register_buffer("zps_u", torch.tensor([128, 0, 100, 7, 255]))

    def forward(self, x):  # f32[2, 4, 5]
        qd = torch.ops.quantized_decomposed
        q_i8 = qd.quantize_per_tensor(x, 0.1, 3, -128, 127, torch.int8)
        q_u8 = qd.quantize_per_tensor(x, 0.05, 128, 0, 255, torch.uint8)
        q_tie = qd.quantize_per_tensor(x, 0.25, 0, -127, 127, torch.int8)  # ties exact; narrow range
        q_4bit = qd.quantize_per_tensor(x, 0.5, -1, -8, 7, torch.int8)  # an int4 range held in int8
        d_i8 = qd.dequantize_per_tensor(q_i8, 0.1, 3, -128, 127, torch.int8)
        d_u8 = qd.dequantize_per_tensor(q_u8, 0.05, 128, 0, 255, torch.uint8)
        d_f64 = qd.dequantize_per_tensor(q_i8, 0.1, 3, -128, 127, torch.int8, out_dtype=torch.float64)
        qc = qd.quantize_per_channel(x, self.scales, self.zps, 1, -128, 127, torch.int8)
        dc = qd.dequantize_per_channel(qc, self.scales, self.zps, 1, -128, 127, torch.int8)
        dc_no_zp = qd.dequantize_per_channel(qc, self.scales, None, 1, -128, 127, torch.int8)
        qc_u = qd.quantize_per_channel(x, self.scales_u, self.zps_u, 2, 0, 255, torch.uint8)
        dc_u = qd.dequantize_per_channel(qc_u, self.scales_u, self.zps_u, 2, 0, 255, torch.uint8)
        s, z = qd.choose_qparams.tensor(x, -128, 127, 2**-12, torch.int8)
        qt = qd.quantize_per_tensor.tensor(x, s, z, -128, 127, torch.int8)
        dt = qd.dequantize_per_tensor.tensor(qt, s, z, -128, 127, torch.int8)
        s_u, z_u = qd.choose_qparams.tensor(F.relu(x) + 0.5, 0, 255, 2**-12, torch.uint8)
        qt_u = qd.quantize_per_tensor.tensor(x, s_u, z_u, 0, 255, torch.uint8)
        dt_u = qd.dequantize_per_tensor.tensor(qt_u, s_u, z_u, 0, 255, torch.uint8)
        return (q_i8, q_u8, q_tie, q_4bit, d_i8, d_u8, d_f64, qc, dc, dc_no_zp, qc_u, dc_u,
                s, z, qt, dt, s_u, z_u, qt_u, dt_u)


def _q_ops_inputs():
    x = _randn(2, 4, 5) * 3
    # rounding ties of the power-of-two scales (x / 0.25 and x / 0.5 at k + 0.5;
    # none a tie of another scale: ONNX Runtime's QuantizeLinear divides by
    # the scale where torch multiplies by its float32 reciprocal, and at a
    # tie of a scale that is not a power of two the two round apart)
    x[0, 0] = torch.tensor([0.125, -0.125, 0.375, -0.625, 0.875])
    x[0, 1] = torch.tensor([0.25, 0.75, -1.25, 2.25, -3.75])
    # saturation at both ends of every range
    x[1, 2] = torch.tensor([100.0, -100.0, 12.7, -12.8, 300.0])
    return (x,)


def _x86_quantizer(dynamic=False):
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
    return xiq.X86InductorQuantizer().set_global(
        xiq.get_default_x86_inductor_quantization_config(is_dynamic=dynamic))


def _xnnpack_quantizer(per_channel, dynamic=False):
    from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
    return XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=dynamic))


def _pt2e(model_cls, shape, quantizer, fold=True):
    """A builder: `model_cls` exported, prepared with `quantizer()`,
    calibrated on four batches of `shape` (their own seed), converted
    (`fold`: weights quantized ahead, as int8 buffers; else the graph
    quantizes its float weights, quantize_per_channel)."""

    def build():
        from torchao.quantization.pt2e import allow_exported_model_train_eval, move_exported_model_to_eval
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        model = model_cls().eval()
        g = torch.Generator().manual_seed(1)
        m = torch.export.export(model, (torch.randn(shape, generator=g),)).module()
        m = prepare_pt2e(m, quantizer())
        with torch.no_grad():
            for _ in range(4):
                m(torch.randn(shape, generator=g))
        m = convert_pt2e(m, fold_quantize=fold)
        move_exported_model_to_eval(m)
        allow_exported_model_train_eval(m)  # export_one calls .eval()
        return m

    return build


_reg("q_cnn_x86", _pt2e(QCnn, (2, 3, 16, 16), _x86_quantizer), lambda: (_randn(2, 3, 16, 16),),
     group="quant", quant_steps=True,
     note="X86InductorQuantizer, static: uint8 activations, int8 per-channel weights")
_reg("q_cnn_xnnpack", _pt2e(QCnn, (2, 3, 16, 16), lambda: _xnnpack_quantizer(False)),
     lambda: (_randn(2, 3, 16, 16),), group="quant", quant_steps=True,
     note="XNNPACKQuantizer, static, per-tensor weights")
_reg("q_cnn_xnnpack_pc", _pt2e(QCnn, (2, 3, 16, 16), lambda: _xnnpack_quantizer(True)),
     lambda: (_randn(2, 3, 16, 16),), group="quant", quant_steps=True,
     note="XNNPACKQuantizer, static, per-channel weights")
_reg("q_mlp_x86", _pt2e(QMlp, (4, 16), _x86_quantizer), lambda: (_randn(4, 16),), group="quant", quant_steps=True,
     note="X86InductorQuantizer, static")
_reg("q_mlp_x86_dyn", _pt2e(QMlp, (4, 16), lambda: _x86_quantizer(True)), lambda: (_randn(4, 16),),
     group="quant", quant_steps=True, note="X86InductorQuantizer, dynamic (choose_qparams, uint8)")
_reg("q_mlp_xnnpack", _pt2e(QMlp, (4, 16), lambda: _xnnpack_quantizer(False)), lambda: (_randn(4, 16),),
     group="quant", quant_steps=True, note="XNNPACKQuantizer, static, per-tensor weights")
_reg("q_mlp_xnnpack_dyn", _pt2e(QMlp, (4, 16), lambda: _xnnpack_quantizer(True, True)),
     lambda: (_randn(4, 16),), group="quant", quant_steps=True,
     note="XNNPACKQuantizer, dynamic (choose_qparams, int8), per-channel")
_reg("q_mlp_xnnpack_unfolded", _pt2e(QMlp, (4, 16), lambda: _xnnpack_quantizer(True), fold=False),
     lambda: (_randn(4, 16),), group="quant", quant_steps=True,
     note="XNNPACKQuantizer, static, per-channel, convert_pt2e(fold_quantize=False): "
          "quantize_per_channel of float weights")
_reg("q_ops", QOps, _q_ops_inputs, group="quant")

# Dynamic shapes (golden/dynamic): one graph, three sizes (the example, alt
# and alt2 inputs), through every stage.
def _ids(b, n):
    return lambda: (torch.randint(0, 100, (b, n), dtype=torch.int64),)


def _batch_seq():
    return {"input_ids": {0: Dim("batch", min=1, max=16), 1: Dim("seq", min=2, max=48)}}


def _seq_only():
    return {"input_ids": {1: Dim("seq", min=2, max=48)}}


_reg("dyn_bert_sdpa", lambda: BertWrap("sdpa"), _ids(2, 8), dyn=_batch_seq, alt=_ids(1, 5), alt2=_ids(3, 13),
     group="dynamic", note="dynamic batch and sequence; reshape with -1 over symbolic sizes")
_reg("dyn_gpt2_eager", lambda: GPT2Wrap("eager"), _ids(2, 8), dyn=_batch_seq, alt=_ids(1, 5), alt2=_ids(3, 13),
     group="dynamic", note="dynamic batch and sequence; split over a symbolic size")
_reg("dyn_llama_sdpa", lambda: LlamaWrap("sdpa"), _ids(2, 8), dyn=_seq_only, alt=_ids(2, 5), alt2=_ids(2, 13),
     group="dynamic", note="dynamic sequence")
_reg("dyn_lstm", DynLSTM, lambda: (_randn(2, 5, 8),), dyn=lambda: {"x": {0: Dim("batch", min=1, max=16)}},
     alt=lambda: (_randn(1, 5, 8),), alt2=lambda: (_randn(3, 5, 8),), group="dynamic", note="dynamic batch")
_reg("dyn_scan_lstm", DynScanLSTM, lambda: (_randn(2, 5, 8),),
     dyn=lambda: {"x": {0: Dim("batch", min=1, max=16), 1: Dim("seq", min=2, max=64)}},
     alt=lambda: (_randn(1, 3, 8),), alt2=lambda: (_randn(3, 11, 8),), group="dynamic",
     note="a recurrence over a dynamic sequence: higher_order.scan of an LSTM cell")
_reg("dyn_seq_ops", DynSeqOps, lambda: (_randn(2, 6, 4),),
     dyn=lambda: {"x": {0: Dim("batch", min=1, max=16), 1: Dim("seq", min=4, max=64)}},
     alt=lambda: (_randn(1, 5, 4),), alt2=lambda: (_randn(3, 9, 4),), group="dynamic",
     note="diff, -1 view, repeat, expand, reflect pad, pooling, interpolation over a dynamic length")


# Symbolic ints (golden/symint): int inputs exported with Dim.DYNAMIC
# (SymInt graph inputs), derived dims (2*s, s + 1), ops whose int arguments
# are symbolic (a tril diagonal, causal attention over a dynamic length),
# each at three sizes.
class SymIntArith(nn.Module):
    """An int input `n` (a SymInt) in arithmetic and as sizes, indices and
    bounds: ones(n), repeat, x[:, :n], arange(n), narrow, select, new_zeros,
    pad."""

    def forward(self, x, n: int):  # x f32[batch, 8]
        return (x * n + torch.ones(n).sum(), x.repeat(n, 1), x[:, :n],
                torch.arange(n, dtype=torch.float32) * 0.5, torch.narrow(x, 1, 1, n),
                x.select(1, n), x.new_zeros(n, 2) + n, F.pad(x, (0, n)))


class DerivedDims(nn.Module):
    """Input dims torch derives from one symbol: x [t + 1, 4], y [4, 2*t]
    (no input has t itself)."""

    def forward(self, x, y):
        d = x[1:] - x[:-1]
        pooled = y.view(4, -1, 2).sum(-1)
        return d + pooled.T, y * 2


class DerivedPool(nn.Module):
    """Spatial dims 2*s, pooled 2x2 by a view over s."""

    def forward(self, x):  # f32[1, 3, 2*s, 2*s]
        b, c, h, w = x.shape
        return x.view(b, c, h // 2, 2, w // 2, 2).mean((3, 5))


class TriSym(nn.Module):
    """tril/triu with a symbolic diagonal (x.shape[1] - x.shape[0]) and a
    tril of ones over a symbolic size."""

    def forward(self, x):
        d = x.shape[1] - x.shape[0]
        return torch.tril(x, diagonal=d), torch.triu(x, diagonal=d), torch.ones(x.shape[0], x.shape[0]).tril()


class CausalSdpa(nn.Module):
    """Causal scaled_dot_product_attention over a dynamic sequence."""

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _qkv(L):
    return lambda: (_randn(1, 2, L, 8), _randn(1, 2, L, 8), _randn(1, 2, L, 8))


def _derived_2s():
    s = Dim("s", min=2, max=32)
    return {"x": {2: 2 * s, 3: 2 * s}}


def _derived_xy():
    t = Dim("t", min=2, max=64)
    return {"x": {0: t + 1}, "y": {1: 2 * t}}


_reg("sym_int_arith", SymIntArith, lambda: (_randn(3, 8), 3),
     dyn=lambda: {"x": {0: Dim("batch", min=1, max=16)}, "n": Dim.DYNAMIC},
     alt=lambda: (_randn(2, 8), 5), alt2=lambda: (_randn(5, 8), 2), group="symint",
     note="an int input (SymInt) in arithmetic and as sizes, indices and bounds")
_reg("sym_derived_dims", DerivedDims, lambda: (_randn(6, 4), _randn(4, 10)), dyn=_derived_xy,
     alt=lambda: (_randn(3, 4), _randn(4, 4)), alt2=lambda: (_randn(10, 4), _randn(4, 18)), group="symint",
     note="derived dims t + 1 and 2*t, t itself no input's dim")
_reg("sym_derived_pool", DerivedPool, lambda: (_randn(1, 3, 8, 8),), dyn=_derived_2s,
     alt=lambda: (_randn(1, 3, 12, 12),), alt2=lambda: (_randn(1, 3, 6, 6),), group="symint",
     note="spatial dims 2*s")
_reg("sym_tri", TriSym, lambda: (_randn(5, 7),),
     dyn=lambda: {"x": {0: Dim("rows", min=2, max=64), 1: Dim("cols", min=2, max=64)}},
     alt=lambda: (_randn(6, 4),), alt2=lambda: (_randn(3, 3),), group="symint",
     note="tril/triu with a symbolic diagonal")
_reg("sym_causal_sdpa", CausalSdpa, _qkv(8),
     dyn=lambda: {"q": {2: Dim("seq", min=2, max=128)}, "k": {2: Dim("seq", min=2, max=128)},
                  "v": {2: Dim("seq", min=2, max=128)}},
     alt=_qkv(13), alt2=_qkv(3), group="symint", note="causal attention over a dynamic sequence")

# HF GPT-2 with SDPA at batch 2 exports, but torch's own run_decompositions()
# fails on it (a view of a non-viewable stride in Conv1D's addmm), so it
# has no ATEN-dialect fixture here.


def _ids():
    return (torch.randint(0, 100, (1, 8), dtype=torch.int64),)


# Both attention implementations export; eager for BERT/GPT-2 (plain
# matmul + softmax attention; `transformer` already covers SDPA), SDPA for Llama.
_reg("bert", lambda: BertWrap("eager"), _ids,
     note="transformers BertModel from config, attn_implementation=eager; "
          "wrapper passes only input_ids and returns (last_hidden_state, pooler_output)")
_reg("gpt2", lambda: GPT2Wrap("eager"), _ids,
     note="transformers GPT2LMHeadModel from config, attn_implementation=eager, "
          "bos/eos_token_id=0; wrapper passes only input_ids, use_cache=False, returns logits")
_reg("llama", lambda: LlamaWrap("sdpa"), _ids,
     note="transformers LlamaForCausalLM from config (GQA: 2 heads, 1 kv head), "
          "attn_implementation=sdpa; wrapper passes only input_ids, use_cache=False, returns logits")
_reg("llama_bf16", lambda: LlamaWrap("sdpa").to(torch.bfloat16), _ids,
     note="the llama fixture in bfloat16 (weights, activations, logits): bfloat16 through every "
          "stage, ONNX's type constraints by opset included (ConstantOfShape takes bfloat16 from 20)")


# --------------------------------------------------------------------------
# torchvision's detection ops (golden/vision, group="vision"): roi_align,
# roi_pool, ps_roi_align, ps_roi_pool, nms (batched_nms as torchvision writes
# it: nms over boxes offset by class), deform_conv2d, and a second-stage
# detector (Faster R-CNN's MultiScaleRoIAlign, box head and predictor, boxes
# decoded, nms per class) on given proposals. Edge cases: boxes partly or
# wholly outside the image, zero-area and flipped boxes, aligned True/False,
# sampling_ratio 0 (adaptive) and 2, spatial_scale 0.5, float64, no boxes;
# nms score ties (kept by index, as torch's stable descending sort), an IoU
# exactly at the threshold (kept: suppression is iou > threshold), classes
# whose every box but the best is suppressed. Torch's export asserts that
# nms keeps at least 2 boxes (its fake kernel's unbacked size), so every
# nms here keeps 2 or more.
# --------------------------------------------------------------------------


def _vision_rois():
    """Boxes (batch index, x1, y1, x2, y2) over 2 images of 12x10 (at scale 1)."""
    return torch.tensor([
        [0, 1.0, 1.5, 6.2, 7.9],     # inside
        [1, -3.0, -2.0, 4.5, 3.5],   # partly outside (top left)
        [1, 7.0, 8.0, 14.0, 15.0],   # partly outside (bottom right)
        [0, 3.0, 3.0, 3.0, 3.0],     # zero area
        [1, 5.5, 2.0, 5.5, 9.0],     # zero width
        [0, 0.0, 0.0, 9.0, 11.0],    # the whole image
        [1, 20.0, 20.0, 24.0, 26.0],  # wholly outside
        [0, 6.0, 5.0, 2.0, 1.0],     # flipped corners
    ])


class TvRoiAlign(nn.Module):
    def forward(self, x, rois, empty):
        from torchvision.ops import roi_align
        outs = []
        for aligned in (False, True):
            for ratio in (0, 2):
                outs.append(roi_align(x, rois, (3, 2), 1.0, ratio, aligned))
        outs.append(roi_align(x, rois * torch.tensor([1.0, 2, 2, 2, 2]), 4, 0.5, 0, True))
        outs.append(roi_align(x, rois * torch.tensor([1.0, 2, 2, 2, 2]), (2, 3), 0.5, -1, False))
        outs.append(roi_align(x, empty, 2, 1.0, 2, False))
        return tuple(outs)


class TvRoiPool(nn.Module):
    def forward(self, x, rois):
        from torchvision.ops import roi_pool
        return (roi_pool(x, rois, (3, 2), 1.0),
                roi_pool(x, rois * torch.tensor([1.0, 2, 2, 2, 2]), 2, 0.5))


class TvPsRoiAlign(nn.Module):
    def forward(self, x, rois):
        from torchvision.ops import ps_roi_align
        return (ps_roi_align(x, rois, 2, 1.0, 0),
                ps_roi_align(x, rois * torch.tensor([1.0, 2, 2, 2, 2]), 2, 0.5, 2),
                ps_roi_align(x[:, :9], rois, 3, 1.0, 1))


class TvPsRoiPool(nn.Module):
    def forward(self, x, rois):
        from torchvision.ops import ps_roi_pool
        return (ps_roi_pool(x, rois, 2, 1.0),
                ps_roi_pool(x[:, :9], rois * torch.tensor([1.0, 2, 2, 2, 2]), 3, 0.5))


def _nms_inputs():
    torch.manual_seed(0)
    xy = torch.rand(24, 2) * 20
    wh = torch.rand(24, 2) * 8 + 1
    boxes = torch.cat([xy, xy + wh], 1)
    scores = torch.rand(24)
    scores[3] = scores[7] = scores[11] = scores[5]  # ties
    # an IoU of exactly 0.5 (inter 2, union 4): both kept at threshold 0.5
    edge = torch.tensor([[30.0, 0, 33, 1], [31.0, 0, 34, 1]])
    boxes = torch.cat([boxes, edge])
    scores = torch.cat([scores, torch.tensor([0.9, 0.8])])
    # three classes; class 2 is one cluster (all but its best suppressed),
    # class 3 the same boxes with tied scores
    labels = torch.randint(0, 2, (26,))
    cluster = torch.tensor([[2.0, 2, 9, 9]]) + torch.rand(5, 4) * 0.3
    boxes = torch.cat([boxes, cluster, cluster])
    scores = torch.cat([scores, torch.rand(5), torch.full((5,), 0.5)])
    labels = torch.cat([labels, torch.full((5,), 2), torch.full((5,), 3)])
    return boxes, scores, labels


class TvNms(nn.Module):
    def forward(self, boxes, scores, labels):
        from torchvision.ops import nms
        keep = nms(boxes, scores, 0.5)
        # batched_nms as torchvision writes it (the coordinate trick; its
        # boxes.numel() == 0 test does not export): boxes offset per class
        offsets = labels.to(boxes) * (boxes.max() + torch.tensor(1.0))
        kept = nms(boxes + offsets[:, None], scores, 0.3)
        return keep, kept, scores[kept]


class TvFloat64(nn.Module):
    """float64 through roi_align, roi_pool and nms (torchvision computes in
    double). ONNX Runtime has no float64 MaxRoiPool or NonMaxSuppression:
    ir2onnx refuses those two by name."""

    def forward(self, x, rois, boxes, scores):
        from torchvision.ops import nms, roi_align, roi_pool
        x, rois = x.double(), rois.double()
        return (roi_align(x, rois, 2, 1.0, 0, True), roi_align(x, rois, 3, 0.5, 2, False),
                roi_pool(x, rois, 4, 1.0),
                nms(boxes.double(), scores.double(), 0.1))


class TvDeformConv(nn.Module):
    def __init__(self):
        super().__init__()
        from torchvision.ops import DeformConv2d
        self.a = DeformConv2d(4, 6, 3, stride=1, padding=1)
        self.b = DeformConv2d(4, 6, (3, 2), stride=2, padding=(1, 0), dilation=(1, 2), groups=2)

    def forward(self, x, off_a, mask_a, off_b):
        return self.a(x, off_a, mask_a), self.b(x, off_b), self.a(x, off_a)


def _deform_inputs():
    x = _randn(2, 4, 9, 8)
    # offsets up to 3 pixels: some samples land outside the image
    return x, _randn(2, 18, 9, 8) * 1.5, torch.rand(2, 9, 9, 8), _randn(2, 24, 5, 3) * 1.5


class TvRoiHeads(nn.Module):
    """Faster R-CNN's second stage on given proposals and features:
    MultiScaleRoIAlign over two levels, TwoMLPHead, FastRCNNPredictor, the
    boxes decoded and clipped, nms per class (torchvision's coordinate
    trick); the score threshold and top-k of `postprocess_detections` do
    not export (a data-dependent emptiness test) and are left out."""

    def __init__(self):
        super().__init__()
        from torchvision.ops import MultiScaleRoIAlign
        from torchvision.models.detection.faster_rcnn import TwoMLPHead, FastRCNNPredictor
        from torchvision.models.detection._utils import BoxCoder
        self.pool = MultiScaleRoIAlign(["0", "1"], 4, 2)
        self.head = TwoMLPHead(8 * 16, 32)
        self.pred = FastRCNNPredictor(32, 3)
        self.coder = BoxCoder((10.0, 10.0, 5.0, 5.0))

    def forward(self, f0, f1, p0, p1):
        from torchvision.ops import nms
        from torchvision.ops.boxes import clip_boxes_to_image
        feats = collections.OrderedDict([("0", f0), ("1", f1)])
        x = self.pool(feats, [p0, p1], [(64, 64), (64, 64)])
        logits, deltas = self.pred(self.head(x))
        boxes = clip_boxes_to_image(self.coder.decode(deltas, [p0, p1]), (64, 64)).reshape(-1, 3, 4)
        scores = torch.softmax(logits, -1)
        b1 = boxes[:, 1:].reshape(-1, 4)
        s1 = scores[:, 1:].reshape(-1)
        labels = torch.arange(1, 3).repeat(boxes.shape[0])
        offsets = labels.to(b1) * (b1.max() + 1)
        keep = nms(b1 + offsets[:, None], s1, 0.5)
        return x, logits, boxes, scores, keep, b1[keep], s1[keep], labels[keep]


def _heads_inputs():
    def props(n):
        xy = torch.rand(n, 2) * 48
        return torch.cat([xy, xy + torch.rand(n, 2) * 30 + 2], 1)
    return _randn(2, 8, 16, 16), _randn(2, 8, 8, 8), props(12), props(10)


_reg("tv_roi_align", TvRoiAlign, lambda: (_randn(2, 3, 12, 10), _vision_rois(), torch.zeros(0, 5)),
     group="vision")
_reg("tv_roi_pool", TvRoiPool, lambda: (_randn(2, 3, 12, 10), _vision_rois()), group="vision")
_reg("tv_ps_roi_align", TvPsRoiAlign, lambda: (_randn(2, 12, 12, 10), _vision_rois()), group="vision")
_reg("tv_ps_roi_pool", TvPsRoiPool, lambda: (_randn(2, 12, 12, 10), _vision_rois()), group="vision")
_reg("tv_nms", TvNms, _nms_inputs, group="vision")
_reg("tv_float64", TvFloat64, lambda: (_randn(2, 3, 12, 10), _vision_rois()) + _nms_inputs()[:2], group="vision")
_reg("tv_deform_conv", TvDeformConv, _deform_inputs, group="vision")
_reg("tv_roi_heads", TvRoiHeads, _heads_inputs, group="vision")


# --------------------------------------------------------------------------
# Mixture-of-experts decoders (golden/moe, group="moe"): every Hugging Face
# MoE block of transformers 5 runs its experts through
# torch.ops.transformers.grouped_mm_fallback(input (S, K) sorted by expert,
# weight (E, K, N), offs (E,) cumulative row counts) on CPU; a tiny Mixtral
# (top-2 of 4 experts, padded batch), a tiny Qwen2-MoE (a shared expert
# beside the routed ones), and the op called directly with an expert that
# gets no rows and rows past the last offset (they stay 0).
# --------------------------------------------------------------------------


class MoeMixtralWrap(nn.Module):
    def __init__(self):
        super().__init__()
        from transformers import MixtralConfig, MixtralForCausalLM
        self.m = MixtralForCausalLM(MixtralConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
            num_local_experts=4, num_experts_per_tok=2))

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                      return_dict=False)[0]


class MoeQwen2Wrap(nn.Module):
    def __init__(self):
        super().__init__()
        from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM
        self.m = Qwen2MoeForCausalLM(Qwen2MoeConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=64, moe_intermediate_size=24,
            shared_expert_intermediate_size=48, max_position_embeddings=64,
            num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1))

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, use_cache=False, attention_mask=attention_mask,
                      return_dict=False)[0]


class MoeGroupedMM(nn.Module):
    """grouped_mm_fallback called directly: 4 experts over 10 rows, offs
    [3, 3, 7, 9] (expert 1 gets no rows, row 9 none), int32 and int64
    offsets, and offsets from an input."""

    def __init__(self):
        super().__init__()
        import transformers.integrations.moe  # noqa: F401 (registers the op)
        self.w = nn.Parameter(torch.randn(4, 6, 5))
        self.register_buffer("offs", torch.tensor([3, 3, 7, 9], dtype=torch.int32))

    def forward(self, x, offs64):
        a = torch.ops.transformers.grouped_mm_fallback(x, self.w, self.offs)
        b = torch.ops.transformers.grouped_mm_fallback(x * 2, self.w, offs64)
        return a, b, a + 1


def _moe_ids():
    ids = torch.randint(0, 64, (2, 8), dtype=torch.int64)
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, :3] = 0  # left padding in the second sequence
    return ids, mask


_reg("moe_mixtral", MoeMixtralWrap, _moe_ids, group="moe",
     note="transformers MixtralForCausalLM from config (4 experts, top 2), eager; input ids (2, 8) with a "
          "left-padded attention mask, use_cache=False, returns logits")
_reg("moe_qwen2", MoeQwen2Wrap, _moe_ids, group="moe",
     note="transformers Qwen2MoeForCausalLM from config (4 experts, top 2, a gated shared expert); input ids "
          "(2, 8) with a left-padded attention mask, use_cache=False, returns logits")
_reg("moe_grouped_mm", MoeGroupedMM,
     lambda: (_randn(10, 6), torch.tensor([2, 2, 2, 8], dtype=torch.int64)), group="moe",
     note="transformers::grouped_mm_fallback called directly: an expert with no rows, rows past the last offset")


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def target_name(target):
    """Mirror torch._export.serde.serialize.serialize_operator, minus 'torch.ops.'."""
    if isinstance(target, str):
        s = target
    elif target.__module__.startswith("torch._ops"):
        s = f"{target.__module__.replace('torch._ops', 'torch.ops')}.{target.__name__}"
    else:
        s = f"{target.__module__}.{target.__name__}"
    if isinstance(target, torch._ops.OpOverload):
        s = "torch.ops." + str(target)
    return s[len("torch.ops."):] if s.startswith("torch.ops.") else s


def fx_histogram(ep):
    hist = collections.Counter()
    getitems = 0
    for m in ep.graph_module.modules():
        if not isinstance(m, torch.fx.GraphModule):
            continue
        for node in m.graph.nodes:
            if node.op != "call_function":
                continue
            if node.target is __import__("operator").getitem:
                getitems += 1
                continue
            hist[target_name(node.target)] += 1
    return dict(sorted(hist.items())), getitems


def json_histogram(pt2_path):
    """Histogram of node targets in models/model.json (all nested graphs)."""
    with zipfile.ZipFile(pt2_path) as z:
        name = [n for n in z.namelist() if n.endswith("/models/model.json")][0]
        model = json.loads(z.read(name))
    hist = collections.Counter()

    def walk_graph(g):
        for node in g["nodes"]:
            t = node["target"]
            hist[t[len("torch.ops."):] if t.startswith("torch.ops.") else t] += 1
            for inp in node["inputs"]:
                walk_arg(inp["arg"])

    def walk_arg(a):
        if isinstance(a, dict) and "as_graph" in a:
            walk_graph(a["as_graph"]["graph"])

    walk_graph(model["graph_module"]["graph"])
    return dict(sorted(hist.items()))


def user_input_names(ep):
    return [s.arg.name for s in ep.graph_signature.input_specs
            if s.kind == InputKind.USER_INPUT]


def user_output_names(ep):
    out = []
    for s in ep.graph_signature.output_specs:
        if s.kind != OutputKind.USER_OUTPUT:
            continue
        a = s.arg
        out.append(a.name if hasattr(a, "name") else repr(getattr(a, "value", a)))
    return out


def to_numpy(t, converted, key):
    t = t.detach().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        converted[key] = str(t.dtype).replace("torch.", "")
        t = t.float()
    return t.contiguous().numpy()


def flatten_outputs(out):
    leaves, _ = pytree.tree_flatten(out)
    return leaves


def input_array(t):
    """An input as numpy holds it: bfloat16 as ml_dtypes writes it (the
    npy dtype '<V2', which the tools read as bfloat16); a Python int,
    float or bool (a SymInt, SymFloat or SymBool input) as a 0-d array."""
    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def save_inputs(path, names, args):
    assert len(names) == len(args), (names, len(args))
    arrays = collections.OrderedDict()
    for n, a in zip(names, args):
        arrays[n] = input_array(a)
    np.savez(path, **arrays)


def save_expected(path, leaves):
    converted = {}
    arrays = collections.OrderedDict()
    for i, leaf in enumerate(leaves):
        key = f"out_{i}"
        if isinstance(leaf, torch.Tensor):
            arrays[key] = to_numpy(leaf, converted, key)
        else:
            arrays[key] = np.asarray(leaf)
    np.savez(path, **arrays)
    return converted


def max_diff(a_leaves, b_leaves):
    worst = 0.0
    for a, b in zip(a_leaves, b_leaves):
        if isinstance(a, torch.Tensor):
            if a.dtype == torch.bool or not a.is_floating_point():
                if not torch.equal(a, b):
                    return float("inf")
            else:
                worst = max(worst, (a.double() - b.double()).abs().max().item()
                            if a.numel() else 0.0)
    return worst


def run_eager(model_fresh, args):
    m = copy.deepcopy(model_fresh)
    with torch.no_grad():
        return flatten_outputs(m(*args))


def run_ep(ep, args):
    m = ep.module()
    with torch.no_grad():
        return flatten_outputs(m(*args))


# --------------------------------------------------------------------------
# Main export
# --------------------------------------------------------------------------


def weight_crcs(ep):
    import zlib
    out = {}
    tensors = dict(ep.state_dict)
    tensors.update({k: v for k, v in ep.constants.items() if isinstance(v, torch.Tensor)})
    for k in sorted(tensors):
        t = tensors[k].detach().contiguous()
        if t.dtype == torch.bfloat16:
            data = t.view(torch.int16).numpy().tobytes()
        else:
            data = t.numpy().tobytes()
        out[k] = "%08x" % zlib.crc32(data)
    return out


def quant_steps(ep):
    """The quantization step of each user output a per-tensor dequantize
    makes (its scale), by output key: where a value lies on a rounding tie,
    float32 ulps (a summation order, ONNX Runtime's int8 kernels) move the
    output one step, and the checks allow that one step."""
    out = ep.graph.output_node().args[0]
    steps = {}
    for i, node in enumerate(out):
        if (isinstance(node, torch.fx.Node) and node.op == "call_function"
                and str(node.target) == "quantized_decomposed.dequantize_per_tensor.default"):
            steps[f"out_{i}"] = float(node.args[1])
    return steps


def export_one(name, spec, out_dir):
    torch.manual_seed(0)
    model = spec["build"]()
    model.eval()
    pristine = copy.deepcopy(model)  # eager runs start from this (mutations!)

    torch.manual_seed(0)
    args = spec["inputs"]()
    dyn = spec["dyn"]() if spec["dyn"] else None

    ep = torch.export.export(copy.deepcopy(model), args, dynamic_shapes=dyn)
    p_train = os.path.join(out_dir, f"{name}.pt2")
    torch.export.save(ep, p_train)

    # torch's own run_decompositions() fails on some models (HF GPT-2 with
    # SDPA at batch 2: a view of the attention output's transposed strides).
    # Such a model keeps its TRAINING archive; the failure goes into meta.
    p_dec = os.path.join(out_dir, f"{name}.decomp.pt2")
    try:
        ep_d = ep.run_decompositions()
        decomp_error = None
    except Exception as e:  # torch's failure, recorded, not ours to hide
        ep_d, decomp_error = None, f"{type(e).__name__}: {str(e).splitlines()[0]}"
        if os.path.exists(p_dec):
            os.remove(p_dec)
    if ep_d is not None:
        torch.export.save(ep_d, p_dec)

    names = user_input_names(ep)
    if ep_d is not None:
        assert names == user_input_names(ep_d), (names, user_input_names(ep_d))

    # eager reference outputs
    leaves = run_eager(pristine, args)
    save_inputs(os.path.join(out_dir, f"{name}.inputs.npz"), names, args)
    converted = save_expected(os.path.join(out_dir, f"{name}.expected.npz"), leaves)

    # other input sets: .alt (and .alt2, a third size of a dynamic dim)
    alts = {}
    for key in ("alt", "alt2"):
        if spec.get(key) is None:
            continue
        torch.manual_seed(0)
        a_args = spec[key]()
        a_leaves = run_eager(pristine, a_args)
        save_inputs(os.path.join(out_dir, f"{name}.{key}.inputs.npz"), names, a_args)
        a_conv = save_expected(os.path.join(out_dir, f"{name}.{key}.expected.npz"), a_leaves)
        alts[key] = (a_args, a_leaves, a_conv)
    alt = bool(alts)

    # self-checks: reload both archives and compare with eager
    diffs = {}
    for tag, path in (("training", p_train), ("decomp", p_dec if ep_d else None)):
        if path is None:
            continue
        loaded = torch.export.load(path)
        diffs[tag] = max_diff(leaves, run_ep(loaded, args))
        for key, (a_args, a_leaves, _) in alts.items():
            diffs[f"{tag}_{key}"] = max_diff(a_leaves, run_ep(loaded, a_args))

    h_train, gi_train = fx_histogram(ep)
    h_dec, gi_dec = fx_histogram(ep_d) if ep_d else ({}, 0)
    j_train, j_dec = json_histogram(p_train), json_histogram(p_dec) if ep_d else {}
    if h_train != j_train or h_dec != j_dec:
        print(f"  WARNING {name}: FX histogram != JSON histogram", file=sys.stderr)
        print(f"    fx  train {h_train}\n    json train {j_train}", file=sys.stderr)
        print(f"    fx  dec {h_dec}\n    json dec {j_dec}", file=sys.stderr)

    meta = collections.OrderedDict()
    meta["torch_version"] = torch.__version__
    meta["user_inputs"] = names
    meta["user_outputs_training"] = user_output_names(ep)
    meta["user_outputs_decomp"] = user_output_names(ep_d) if ep_d else None
    meta["ops_training"] = h_train
    meta["ops_decomp"] = h_dec
    meta["dynamic"] = dyn is not None
    meta["alt"] = alt
    # extras
    meta["num_outputs"] = len(leaves)
    meta["converted_outputs"] = converted  # out_i -> original dtype (stored as float32)
    for key, (_, _, a_conv) in alts.items():
        meta[f"{key}_converted_outputs"] = a_conv
    meta["fx_getitem_training"] = gi_train
    meta["fx_getitem_decomp"] = gi_dec
    meta["max_abs_diff_eager_vs_loaded"] = diffs
    # CRC-32 of each weight's elements in row-major order, as torch holds
    # them: the Rust reader's strided views are checked against these.
    meta["weights_crc32"] = weight_crcs(ep)
    if decomp_error:
        meta["decomp_error"] = decomp_error
    if spec["note"]:
        meta["note"] = spec["note"]
    if spec.get("quant_steps"):
        meta["quant_steps"] = quant_steps(ep)
    with open(os.path.join(out_dir, f"{name}.meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")

    print(f"{name}: pt2={os.path.getsize(p_train)} "
          f"decomp={os.path.getsize(p_dec) if ep_d else decomp_error} "
          f"outs={len(leaves)} diffs={diffs}")
    return meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--big", action="store_true",
                    help="also export the large models (big=True in the registry)")
    ap.add_argument("--big-out", default=None,
                    help="folder for the large models (default: 'big' next to --out)")
    a = ap.parse_args()

    out_dir = a.out
    big_dir = a.big_out or os.path.join(os.path.dirname(os.path.abspath(out_dir)), "big")
    if a.only:
        unknown = [n for n in a.only if n not in MODELS]
        if unknown:
            ap.error(f"unknown model(s): {unknown}; known: {list(MODELS)}")
    failed = []
    for name, spec in MODELS.items():
        if a.only and name not in a.only:
            continue
        if (spec["big"] or spec["group"]) and not ((a.big and spec["big"]) or (a.only and name in a.only)):
            continue
        d = big_dir if spec["big"] else out_dir
        if spec["group"]:
            d = os.path.join(os.path.dirname(os.path.abspath(out_dir)), spec["group"])
        os.makedirs(d, exist_ok=True)
        try:
            export_one(name, spec, d)
        except Exception as e:  # keep going; report at the end
            import traceback
            traceback.print_exc()
            failed.append((name, repr(e)))
    if failed:
        print("FAILED:", failed, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
