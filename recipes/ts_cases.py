"""TorchScript cases for ts2ir: each model saved with torch.jit.save
(traced, scripted and frozen where possible), with its example inputs
and the outputs of the module reloaded with torch.jit.load.

    python recipes/ts_cases.py [OUT_DIR]           # the small committed set (golden/ts)
    python recipes/ts_cases.py --zoo OUT_DIR [vision|nn|hf ...]   # the bigger ones (make zoo-ts)

Writes NAME.pt, NAME.inputs.npz (every forward argument by name; int,
float and bool ones as 0-d arrays) and NAME.expected.npz (the outputs,
flattened in pytree order as arr_0, arr_1, ...). torch.manual_seed(0),
random weights, nothing downloaded.
"""

import os
import sys
import warnings
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
from torch.utils._pytree import tree_flatten

warnings.filterwarnings("ignore")


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x):
        y = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(y, 1)), y.mean([2, 3])


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.norm = nn.LayerNorm(6)

    def forward(self, x):
        return self.norm(x + torch.tanh(self.fc(x)))

    @torch.jit.export
    def scale(self, x: torch.Tensor, k: float) -> torch.Tensor:
        return x * k


class Program(nn.Module):
    """Scripted: a loop over submodules building a list, a while loop
    whose trip count is a scalar argument, an Optional argument, a
    submodule method, tuple / list / dict outputs."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.head = nn.Linear(6, 2)
        self.repeats = 2

    def forward(
        self, x: torch.Tensor, n: int, bias: Optional[torch.Tensor] = None
    ) -> Tuple[torch.Tensor, List[torch.Tensor], Dict[str, torch.Tensor]]:
        states: List[torch.Tensor] = []
        for block in self.blocks:
            x = block(x)
            states.append(x)
        for _ in range(self.repeats):
            x = self.blocks[0].scale(x, 0.5)
        k = n
        while k > 0:
            x = x + 1.0
            k -= 1
        if bias is not None:
            x = x + bias
        out = self.head(x)
        return out, states, {"last": states[-1], "head": out}


class DataIf(nn.Module):
    """Scripted: ifs on tensor data (ts2ir lowers them to cond), one that
    assigns and one that returns."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x)
        if bool(y.mean() > 0):
            z = torch.relu(y)
        else:
            z = y * 2.0 + x
        if bool(x.sum() > 0):
            return z, x * 2
        return z - 1, x


class DataWhile(nn.Module):
    """Scripted: a while loop on tensor data (ts2ir refuses it by line)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while bool(x.sum() > 0):
            x = x - 1.0
        return x


class DataList(nn.Module):
    """Scripted: a list grown in a loop on tensor data, whose length is
    data-dependent (ts2ir refuses it by line)."""

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        out: List[torch.Tensor] = []
        while bool(x.sum() > 0):
            x = x - 1.0
            out.append(x)
        return out


class InPlaceView(nn.Module):
    """Scripted: an in-place write through a view, which changes its base
    too (ts2ir refuses it by line rather than guess)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.view(-1)
        y.add_(1.0)
        return x * 2.0


def save(out, name, module, inputs, names=None):
    path = os.path.join(out, f"{name}.pt")
    torch.jit.save(module, path)
    loaded = torch.jit.load(path)
    # The inputs are named as forward's arguments (after self).
    names = [a.name for a in loaded.forward.schema.arguments[1:]]
    with torch.no_grad():
        result = loaded(*inputs)
    leaves, _ = tree_flatten(result)
    feed = {}
    for n, v in zip(names, inputs):
        if v is None:
            continue
        feed[n] = v.numpy() if isinstance(v, torch.Tensor) else np.array(v)
    np.savez(os.path.join(out, f"{name}.inputs.npz"), **feed)
    np.savez(
        os.path.join(out, f"{name}.expected.npz"),
        *[t.detach().numpy() for t in leaves],
    )
    print(name, os.path.getsize(path), "bytes")


def small(out):
    torch.manual_seed(0)
    mlp = Mlp().eval()
    x = torch.randn(3, 8)
    save(out, "mlp_traced", torch.jit.trace(mlp, (x,)), (x,), ["x"])
    save(out, "mlp_scripted", torch.jit.script(mlp), (x,), ["x"])

    torch.manual_seed(0)
    cnn = Cnn().eval()
    with torch.no_grad():
        cnn.bn.running_mean.uniform_(-0.5, 0.5)
        cnn.bn.running_var.uniform_(0.5, 1.5)
    img = torch.randn(2, 3, 8, 8)
    save(out, "cnn_traced", torch.jit.trace(cnn, (img,)), (img,), ["x"])
    save(out, "cnn_scripted", torch.jit.script(cnn), (img,), ["x"])
    save(out, "cnn_frozen", torch.jit.freeze(torch.jit.script(cnn)), (img,), ["x"])

    torch.manual_seed(0)
    prog = Program().eval()
    x = torch.randn(4, 6)
    bias = torch.randn(6)
    save(out, "program_scripted", torch.jit.script(prog), (x, 3, bias), ["x", "n", "bias"])
    save(
        out,
        "program_frozen",
        torch.jit.freeze(torch.jit.script(prog)),
        (x, 2, None),
        ["x", "n", "bias"],
    )

    torch.manual_seed(0)
    data_if = torch.jit.script(DataIf().eval())
    save(out, "data_if_scripted", data_if, (x,), ["x"])
    save(out, "data_if_neg_scripted", data_if, (-x.abs(),), ["x"])
    save(out, "data_while_scripted", torch.jit.script(DataWhile()), (x.abs() * 2,), ["x"])
    save(out, "data_list_scripted", torch.jit.script(DataList()), (x.abs(),), ["x"])
    save(out, "inplace_view_scripted", torch.jit.script(InPlaceView()), (x.clone(),), ["x"])


def zoo_vision(out):
    import torchvision

    torch.manual_seed(0)
    img = torch.randn(1, 3, 64, 64)
    for name, ctor in [
        ("resnet18", torchvision.models.resnet18),
        ("mobilenet_v2", torchvision.models.mobilenet_v2),
    ]:
        m = ctor().eval()
        save(out, f"{name}_traced", torch.jit.trace(m, (img,)), (img,), ["x"])
        save(out, f"{name}_scripted", torch.jit.script(m), (img,), ["x"])
        save(out, f"{name}_frozen", torch.jit.freeze(torch.jit.script(m)), (img,), ["x"])


def zoo_nn(out):
    torch.manual_seed(0)
    seq = torch.randn(5, 2, 8)
    for name, m in [
        ("lstm", nn.LSTM(8, 16, num_layers=2)),
        ("gru", nn.GRU(8, 16)),
        ("mha", nn.MultiheadAttention(8, 2)),
        ("encoder", nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2)),
    ]:
        m = m.eval()
        args = (seq, seq, seq) if name == "mha" else (seq,)
        names = ["query", "key", "value"] if name == "mha" else ["x"]
        save(out, f"{name}_traced", torch.jit.trace(m, args), args, names)
        try:
            save(out, f"{name}_scripted", torch.jit.script(m), args, names)
        except Exception as e:  # noqa: BLE001 - report and go on
            print(name, "scripted: not scriptable:", type(e).__name__)


def zoo_hf(out):
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

    torch.manual_seed(0)
    ids = torch.randint(0, 100, (1, 12))
    for name, m in [
        ("bert", BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=64, torchscript=True,
                                      return_dict=False))),
        ("gpt2", GPT2Model(GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2,
                                      torchscript=True, return_dict=False, use_cache=False))),
    ]:
        m = m.eval()
        traced = torch.jit.trace(m, (ids,), strict=False)
        save(out, f"{name}_traced", traced, (ids,), ["input_ids"])


ZOO = {"vision": zoo_vision, "nn": zoo_nn, "hf": zoo_hf}


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--zoo"]:
        out = args[1] if len(args) > 1 else "zoo-scratch/ts"
        os.makedirs(out, exist_ok=True)
        for part in args[2:] or list(ZOO):
            ZOO[part](out)
    else:
        out = args[0] if args else "golden/ts"
        os.makedirs(out, exist_ok=True)
        small(out)
