#!/usr/bin/env python3
"""A Llama-7B-shaped model, and a 4-layer cut of it, as .pt2 archives
(`make huge`; never committed, never in `make test`).

    python recipes/huge.py --out golden/huge [--only llama7b_cut4 llama7b]

Both are transformers' LlamaForCausalLM at Llama-2-7B's widths (hidden
4096, intermediate 11008, 32 heads, vocabulary 32000), in bfloat16 with
random weights (torch.manual_seed(0), normal with std 0.02): llama7b has
the 32 layers (6.7e9 parameters, about 13.5 GB), llama7b_cut4 has 4
(about 1.9 GB). Each is exported by torch.export.export on 8 tokens
(use_cache off) and saved by torch.export.save; NAME.inputs.npz holds the
token ids (input_ids), and for the cut NAME.expected.npz holds torch's
eager logits (out_0, float32 from bfloat16), the reference ir-run and ONNX
Runtime are checked against. The 7B model's eager run is not recorded (it
would take minutes and the memory the test is about).

Peak memory of this recipe: the model in bfloat16 plus export's
bookkeeping, about 15 GiB for the 7B model.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

MODELS = {"llama7b_cut4": 4, "llama7b": 32}
TOKENS = 8


def build(layers):
    import transformers as T

    config = T.LlamaConfig(
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=layers,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=32000,
        max_position_embeddings=2048,
        attn_implementation="sdpa",
        torch_dtype=torch.bfloat16,
    )
    torch.manual_seed(0)
    # built in bfloat16 directly: float32 first would need twice the memory
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = T.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]

    return Wrap(model).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="golden/huge")
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, layers in MODELS.items():
        if args.only and name not in args.only:
            continue
        t0 = time.time()
        model = build(layers)
        torch.manual_seed(0)
        ids = torch.randint(0, 32000, (1, TOKENS))
        np.savez(os.path.join(args.out, f"{name}.inputs.npz"), input_ids=ids.numpy())
        built = time.time()
        if name != "llama7b":
            with torch.no_grad():
                logits = model(ids)
            np.savez(os.path.join(args.out, f"{name}.expected.npz"), out_0=logits.float().numpy())
        ep = torch.export.export(model, (ids,))
        path = os.path.join(args.out, f"{name}.pt2")
        torch.export.save(ep, path)
        meta = {
            "torch": torch.__version__,
            "layers": layers,
            "params": sum(p.numel() for p in model.parameters()),
            "archive_bytes": os.path.getsize(path),
            "build_s": round(built - t0, 1),
            "export_and_save_s": round(time.time() - built, 1),
            "converted_outputs": {"out_0": "bfloat16"},
        }
        with open(os.path.join(args.out, f"{name}.meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(f"{name}: {json.dumps(meta)}", file=sys.stderr, flush=True)
        del ep, model


if __name__ == "__main__":
    main()
