#!/usr/bin/env python3
"""Stateful programs and in-place writes through views: golden/state/.

    python recipes/state_cases.py --out golden/state [--only NAME ...]

Each case is a small module that torch.export captures with program state
(buffers or user inputs it updates in place: a KV cache, running
statistics, a step counter, a training-mode batch norm) or with in-place
ops written through a view (narrow, contiguous, split pieces, unbind,
diagonal, select). For each it writes

    NAME.pt2              torch.export.save(torch.export.export(...))  (TRAINING dialect)
    NAME.decomp.pt2       after run_decompositions() (ATEN dialect: torch's own
                          functionalisation, mutations as BUFFER_MUTATION outputs)
    NAME.inputs.npz       step 0's user inputs (by signature name)
    NAME.expected.npz     step 0's user outputs (out_0, out_1, ...), as the
                          other fixture groups, for lib/tests and check_onnx.py
    NAME.step<k>.inputs.npz / .expected.npz / .state.npz
                          for k = 0 .. steps-1: the inputs of call k, torch's user
                          outputs of it, and the module's state after it (each
                          updated buffer by its state-dict name, each updated
                          user input by its input name), the module called
                          `steps` times in a row in eager mode
    NAME.meta.json        steps, state names, user inputs, versions

Expected numbers are torch's eager outputs. Models are built after
torch.manual_seed(0), inputs of step k after torch.manual_seed(k).
"""

import argparse
import collections
import copy
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export.graph_signature import InputKind, OutputKind


class KvCacheIndexPut(nn.Module):
    """A decode step: the new key/value written at `pos` into caches held
    in buffers (index_put_ by a position tensor), attention over the
    cache up to that position."""

    def __init__(self, d=8, t=6):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.register_buffer("k_cache", torch.zeros(1, t, d))
        self.register_buffer("v_cache", torch.zeros(1, t, d))
        self.register_buffer("steps", torch.arange(t).view(1, 1, t))

    def forward(self, x, pos):
        self.k_cache[:, pos] = self.k(x)
        self.v_cache[:, pos] = self.v(x)
        mask = self.steps <= pos.view(1, 1, 1)
        att = (self.q(x) @ self.k_cache.transpose(1, 2)).masked_fill(~mask, float("-inf"))
        return att.softmax(-1) @ self.v_cache


class KvCacheSlice(nn.Module):
    """A rolling cache written by slice assignment: the oldest entry
    dropped, the new one appended (copy_ into slices of a buffer)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 5, 3))

    def forward(self, x):
        self.cache[:, :-1] = self.cache[:, 1:].clone()
        self.cache[:, -1:] = x
        return self.cache.mean(1), x + 1


class RunningStats(nn.Module):
    """A step counter and an exponential moving average (add_, mul_)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("n", torch.zeros(()))
        self.register_buffer("avg", torch.zeros(3))

    def forward(self, x):
        self.n.add_(1)
        self.avg.mul_(0.9).add_(0.1 * x.mean(0))
        return x - self.avg / self.n


class UserInputUpdate(nn.Module):
    """ExportDB's user-input mutation: an input updated in place."""

    def forward(self, x, y):
        x.add_(y)
        return x * 2


class BatchNormTrain(nn.Module):
    """Batch norm in training mode (2-D and 1-D): batch statistics, and
    the running mean, running variance and batch count updated."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4, momentum=0.2)
        self.bn1 = nn.BatchNorm1d(5)
        self.bn_free = nn.BatchNorm1d(5, track_running_stats=False)

    def forward(self, x, z):
        return F.relu(self.bn(self.conv(x))), self.bn1(z), self.bn_free(z)


class ViewsInPlace(nn.Module):
    """In-place ops through views torch's functionalisation writes back:
    narrow, a select, a stepped slice, a diagonal, split pieces, an
    unbind piece, detach, contiguous of a tensor that already is, chunk
    pieces."""

    def forward(self, x, y):
        a = x.clone()
        a.narrow(1, 1, 2).mul_(3)
        a[1].add_(1)
        a[:, ::2].sub_(0.5)
        a.diagonal().fill_(0)
        b = y.clone()
        p, q = b.split([2, 3], dim=1)
        q.mul_(-1)
        r = b.unbind(0)[2]
        r.add_(10)
        b.detach().mul_(2)
        b.contiguous().add_(1)
        c = y.clone()
        c.chunk(3, dim=1)[2].mul_(-2)
        c.chunk(2, dim=0)[1].add_(5)
        return a, b, c


class ContiguousCopy(nn.Module):
    """contiguous() of a transposed view is a copy in torch: writing into
    it leaves the base unchanged (BEiT's relative position bias)."""

    def forward(self, x):
        y = x.clone()
        z = y.t().contiguous()
        z.add_(1)
        w = y.view(-1)
        w[::3].mul_(2)
        return y, z


def hf_llama_static_cache():
    """A Hugging Face decoder with its static KV cache in buffers, as
    transformers exports it for on-device decoding (ExecuTorch's path:
    TorchExportableModuleForDecoderOnlyLM; tiny Llama config, GQA)."""
    import transformers as T
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM
    cfg = T.LlamaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64)
    m = T.LlamaForCausalLM(cfg).eval()
    m.generation_config = T.GenerationConfig(use_cache=True, cache_implementation="static", max_length=16,
                                             cache_config={"batch_size": 1, "max_cache_len": 16})
    return TorchExportableModuleForDecoderOnlyLM(m, batch_size=1, max_cache_len=16)


def _hf_export(wrapper, args):
    ids, pos = args
    return wrapper.export(input_ids=ids, cache_position=pos)


CASES = collections.OrderedDict()


def _case(name, build, inputs, steps=3, train=False, export=None):
    """`export`: (model, args) -> ExportedProgram, where the model exports
    itself (transformers' wrappers); its steps then run torch's module of
    the exported program (`ep.module()`), whose buffers carry the names of
    the program's state."""
    CASES[name] = dict(build=build, inputs=inputs, steps=steps, train=train, export=export)


def _randn(*s):
    return torch.randn(*s)


_case("kv_index_put", KvCacheIndexPut, lambda k: (_randn(1, 1, 8), torch.tensor([k])), steps=4)
_case("kv_slice", KvCacheSlice, lambda k: (_randn(2, 1, 3),), steps=4)
_case("running_stats", RunningStats, lambda k: (_randn(5, 3),))
_case("user_input_update", UserInputUpdate, lambda k: (_randn(3), _randn(3)), steps=1)
_case("bn_train", BatchNormTrain, lambda k: (_randn(2, 3, 6, 6), _randn(4, 5)), train=True)
_case("views_in_place", ViewsInPlace, lambda k: (_randn(4, 4), _randn(4, 5)), steps=1)
_case("contiguous_copy", ContiguousCopy, lambda k: (_randn(3, 4),), steps=1)
_case("hf_llama_static_cache", hf_llama_static_cache,
      lambda k: (torch.tensor([[[5, 17, 42, 8][k]]]), torch.tensor([k])), steps=4, export=_hf_export)


def flatten(out):
    import torch.utils._pytree as pytree
    return [x for x in pytree.tree_leaves(out)]


def state_names(ep):
    out = []
    for s in ep.graph_signature.output_specs:
        if s.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION,
                      OutputKind.PARAMETER_MUTATION):
            out.append(s.target)
    return out


def export_case(name, spec, out_dir):
    torch.manual_seed(0)
    model = spec["build"]()
    model.train(spec["train"])
    pristine = copy.deepcopy(model)
    torch.manual_seed(0)
    args0 = spec["inputs"](0)
    if spec["export"]:
        ep = spec["export"](copy.deepcopy(model), tuple(a.clone() for a in args0))
        pristine = ep.module()
    else:
        ep = torch.export.export(copy.deepcopy(model), tuple(a.clone() for a in args0))
    torch.export.save(ep, os.path.join(out_dir, f"{name}.pt2"))
    ep_d = ep.run_decompositions()
    torch.export.save(ep_d, os.path.join(out_dir, f"{name}.decomp.pt2"))
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    # the state torch's functionalisation finds (the decomposed program's
    # mutation outputs): buffers by state-dict name, inputs by input name
    state = state_names(ep_d)
    buffers = dict(pristine.named_buffers())
    params = dict(pristine.named_parameters())

    m = copy.deepcopy(pristine)
    for k in range(spec["steps"]):
        torch.manual_seed(k)
        args = spec["inputs"](k)
        given = [a.clone() for a in args]
        with torch.no_grad():
            # (a program exported from keyword arguments is called so)
            leaves = flatten(m(**dict(zip(names, given))) if spec["export"] else m(*given))
        np.savez(os.path.join(out_dir, f"{name}.step{k}.inputs.npz"),
                 **{n: a.numpy() for n, a in zip(names, args)})
        outs = collections.OrderedDict((f"out_{i}", t.detach().numpy()) for i, t in enumerate(leaves))
        np.savez(os.path.join(out_dir, f"{name}.step{k}.expected.npz"), **outs)
        now = dict(m.named_buffers())
        now.update(dict(m.named_parameters()))
        st = collections.OrderedDict()
        for s in state:
            if s in now:
                st[s] = now[s].detach().numpy().copy()
            elif s in names:
                st[s] = given[names.index(s)].numpy().copy()
            else:
                raise RuntimeError(f"{name}: state {s} is neither a buffer nor an input")
        np.savez(os.path.join(out_dir, f"{name}.step{k}.state.npz"), **st)
        if k == 0:
            np.savez(os.path.join(out_dir, f"{name}.inputs.npz"), **{n: a.numpy() for n, a in zip(names, args)})
            np.savez(os.path.join(out_dir, f"{name}.expected.npz"), **outs)
    # torch's reloaded program against eager at step 0 (its own self-check)
    loaded = torch.export.load(os.path.join(out_dir, f"{name}.pt2")).module()
    torch.manual_seed(0)
    args = spec["inputs"](0)
    with torch.no_grad():
        given = [a.clone() for a in args]
        got = flatten(loaded(**dict(zip(names, given))) if spec["export"] else loaded(*given))
    want = np.load(os.path.join(out_dir, f"{name}.step0.expected.npz"))
    for i, g in enumerate(got):
        np.testing.assert_allclose(g.numpy(), want[f"out_{i}"], rtol=1e-5, atol=1e-6)
    meta = collections.OrderedDict(
        torch_version=torch.__version__,
        steps=spec["steps"],
        user_inputs=names,
        state=state,
        train=spec["train"],
        initial_state={s: list(buffers[s].shape) for s in state if s in buffers}
        | {s: list(params[s].shape) for s in state if s in params},
    )
    with open(os.path.join(out_dir, f"{name}.meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{name}: {spec['steps']} steps, state {state}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="golden/state")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    failed = []
    for name, spec in CASES.items():
        if a.only and name not in a.only:
            continue
        try:
            export_case(name, spec, a.out)
        except Exception as e:  # noqa: BLE001 - reported at the end
            import traceback
            traceback.print_exc()
            failed.append((name, repr(e)))
    if failed:
        print("FAILED:", failed, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
