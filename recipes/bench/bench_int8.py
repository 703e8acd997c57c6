"""Benchmark: PT2E int8 models on ir-run's int8 kernels against ONNX Runtime's.

    .venv/bin/python recipes/bench/bench_int8.py [--models resnet18 bert] [--batches 1]
        [--threads 2] [--rounds 7] [--iters 5] [--warmup-time 0.3] [--onnx-python .venv/bin/python]
        [--bin target/release] [--scratch bench-scratch/int8] [--json bench/int8.json]

`make bench-int8` runs it. For each model (`bench_compare.build`: torchvision
resnet18 at 224 x 224, transformers BERT-base at sequence 128; random
weights, fixed seeds) and batch size it:

1. exports the float model with torch.export (float.pt2), quantizes it with
   torchao's PT2E flow and X86InductorQuantizer (static: uint8
   activations, int8 per-channel weights; `prepare_pt2e`, four random
   calibration batches, `convert_pt2e`), exports the converted module
   (model.pt2); `pt2ir` makes both IRs, `ir2onnx` the QDQ ONNX of the int8
   one (which ONNX Runtime fuses into QLinearConv, QGemm, MatMulInteger);
2. runs torch eager on the converted module (expected.npz) and compares
   with it: `ir-run` on the int8 IR (its quantized products fused into
   integer ones, `-v` counts them), the same with `PT2KIT_INT8_REFERENCE=1`
   (the graph as written: float32 products between quantize and dequantize
   nodes) and ONNX Runtime on the QDQ ONNX: each output's max abs error,
   and how many elements lie further from eager than float32 rounding
   (1e-4 absolute + 1e-4 relative), which only an intermediate integer one
   step from torch's (a rounding tie) makes;
3. times, each runtime in its own process, with the same thread count:
   `ir-bench` on the int8 IR as exported (a fresh process each round), the
   same as written (`PT2KIT_INT8_REFERENCE=1`), `ir-bench` on the float
   model's IR, and ONNX Runtime on the QDQ ONNX (a long-lived worker of
   `bench_compare`, default graph optimisation); rounds interleaved in a
   rotating order, each round a median of --iters runs after warm-up; the
   table shows medians over rounds and paired ratios (median over rounds
   of ir-run int8 / other).

Writes bench/int8.json (all figures, versions, the machine) and prints the
Markdown table of docs/performance.md. Timings want a quiet machine; on a
shared one the paired ratios are the figures to read.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recipes.bench import bench_compare as bc  # noqa: E402

MODELS = ["resnet18", "bert"]
# Elements further from eager than this are counted (float32 rounding of
# the products' sums stays far inside it; one quantization step does not).
ATOL, RTOL = 1e-4, 1e-4

ORT_OUT = r"""
import sys, numpy as np
from recipes.run import ort_run
_, outs = ort_run.run(sys.argv[1], dict(np.load(sys.argv[2])), threads=int(sys.argv[4]))
np.savez(sys.argv[3], **{f"out_{i}": np.asarray(o) for i, o in enumerate(outs)})
"""


def out_of_place(model):
    """`model` with its in-place ReLUs and residual adds made out of place
    (the same values) and its batch norms folded into the convolutions
    (as `prepare_pt2e` would): X86InductorQuantizer's conv-add-relu
    annotation refuses torchvision's block (one ReLU module called twice,
    `out += identity` after a batch norm: "Input partition has more than
    one output node")."""
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision.models.resnet as tvr

    def basic_forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + identity)
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    def fold(owner, conv, bn):
        setattr(owner, conv, fuse_conv_bn_eval(getattr(owner, conv), getattr(owner, bn)))
        setattr(owner, bn, nn.Identity())
    for m in list(model.modules()):
        if isinstance(m, nn.ReLU):
            m.inplace = False
        if isinstance(m, tvr.BasicBlock):
            m.forward = basic_forward.__get__(m)
            fold(m, "conv1", "bn1")
            fold(m, "conv2", "bn2")
            if m.downsample is not None:
                fold(m.downsample, "0", "1")
        if isinstance(m, tvr.ResNet):
            fold(m, "conv1", "bn1")
    return model


def quantized(model, inputs):
    """`model` through PT2E with X86InductorQuantizer (static), calibrated
    on four random batches shaped like `inputs`."""
    import torch
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
    from torchao.quantization.pt2e import allow_exported_model_train_eval, move_exported_model_to_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    m = torch.export.export(model, inputs).module()
    class Quantizer(xiq.X86InductorQuantizer):
        # its linear + unary pattern fails on transformers' GELU module
        # (IndexError in _get_output_nodes_of_partitions): each linear is
        # annotated alone instead (its output float32, the GELU after it)
        def _annotate_linear_unary(self, *args, **kwargs):
            pass
    quantizer = Quantizer().set_global(xiq.get_default_x86_inductor_quantization_config())
    m = prepare_pt2e(m, quantizer)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _ in range(4):
            m(*[torch.randn(x.shape, generator=g) if x.is_floating_point()
                else torch.randint(0, 1000, x.shape, generator=g) for x in inputs])
    m = convert_pt2e(m)
    move_exported_model_to_eval(m)
    allow_exported_model_train_eval(m)
    return m


def prepare(name, batch, d, bin_dir):
    """Exports, quantizes, converts; writes the inputs and eager's outputs."""
    import numpy as np
    import torch

    d.mkdir(parents=True, exist_ok=True)
    model, inputs, _ = bc.build(name, batch)
    model = out_of_place(model)
    torch.export.save(torch.export.export(model, inputs), str(d / "float.pt2"))
    q = quantized(model, inputs)
    ep = torch.export.export(q, inputs)
    torch.export.save(ep, str(d / "model.pt2"))
    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    np.savez(d / "inputs.npz", **{n: x.numpy() for n, x in zip(user, inputs)})
    with torch.no_grad():
        out = q(*inputs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    np.savez(d / "expected.npz", **{f"out_{i}": o.numpy() for i, o in enumerate(outs)})
    b = Path(bin_dir)
    for cmd in ([b / "pt2ir", d / "model.pt2", "-o", d / "model.ir"],
                [b / "pt2ir", d / "float.pt2", "-o", d / "float.ir"],
                [b / "ir2onnx", d / "model.ir", "-o", d / "model.onnx"]):
        subprocess.run([str(c) for c in cmd], check=True, capture_output=True)


def errors(got, want):
    """Per output: (max abs error, elements further than float32 rounding)."""
    import numpy as np
    rows = []
    for k in sorted(want.files):
        a = np.asarray(got[k], np.float64)
        b = np.asarray(want[k], np.float64)
        diff = np.abs(a - b)
        rows.append((float(diff.max()), int((diff > ATOL + RTOL * np.abs(b)).sum()), int(b.size)))
    return {"max_abs": max(r[0] for r in rows), "off": sum(r[1] for r in rows), "elements": sum(r[2] for r in rows)}


def accuracy(d, bin_dir, onnx_python, threads, env):
    """Each runtime's outputs against eager's, and how many products ir-run fused."""
    import numpy as np
    want = np.load(d / "expected.npz")

    def ir_run(extra_env):
        out = d / "ir_out.npz"
        r = subprocess.run([str(Path(bin_dir) / "ir-run"), str(d / "model.ir"), "--inputs", str(d / "inputs.npz"),
                            "-o", str(out), "-v"],
                           check=True, capture_output=True, text=True, env=dict(env, **extra_env))
        got = np.load(out)
        got = {f"out_{i}": got[k] for i, k in enumerate(got.files)}
        fused = [line for line in r.stderr.splitlines() if "int8: " in line]
        n = int(fused[0].split("int8: ", 1)[1].split()[0]) if fused else 0
        return errors(got, want), n

    row = {}
    (row["ir_run_error"], row["fused_products"]) = ir_run({})
    (row["ir_run_reference_error"], _) = ir_run({"PT2KIT_INT8_REFERENCE": "1"})
    out = d / "ort_out.npz"
    subprocess.run([onnx_python, "-c", ORT_OUT, str(d / "model.onnx"), str(d / "inputs.npz"), str(out),
                    str(threads)], check=True, capture_output=True, cwd=bc.ROOT)
    row["ort_error"] = errors(np.load(out), want)
    return row


# The timed forms: (IR file, extra environment) for ir-bench; "ort" runs
# in a worker.
IR_FORMS = {"ir_run": ("model.ir", {}), "ir_run_reference": ("model.ir", {"PT2KIT_INT8_REFERENCE": "1"}),
            "ir_run_f32": ("float.ir", {})}
LABELS = {"ir_run": "ir-run int8", "ir_run_reference": "ir-run int8 as written",
          "ir_run_f32": "ir-run float32 model", "ort": "ONNX Runtime int8 (QDQ)"}


def time_ir(a, d, form):
    f, extra = IR_FORMS[form]
    saved = dict(os.environ)
    os.environ.update(extra)
    try:
        return bc.ir_bench_ms(a.bin, d / f, d / "inputs.npz", a.iters, a.threads, a.warmup_time)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def table(meta, results):
    head = (f"{meta['date']}, {meta['cpu']} ({meta['machine']}, {meta['isa']}), {meta['threads']} threads each; "
            f"torch {meta['torch']}, ONNX Runtime {meta['onnxruntime']}, pt2kit {meta['pt2kit']}; medians of "
            f"{meta['rounds']} interleaved rounds of {meta['iters']} runs. Error: max abs against torch eager "
            f"of the quantized model / elements further than {ATOL:g} + {RTOL:g} relative.\n\n")
    rows = ["| model | batch | fused products | ir-run int8 ms | as written ms | float32 model ms | ORT int8 ms "
            "| int8 / ORT | int8 / as written | int8 / float32 | error ir-run int8 | error as written | error ORT |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]

    def err(e):
        return f"{e['max_abs']:.2e} / {e['off']} of {e['elements']}"
    for r in results:
        rows.append(
            f"| {r['model']} | {r['batch']} | {r['fused_products']} | {r['ir_run_ms']:.2f} "
            f"| {r['ir_run_reference_ms']:.2f} | {r['ir_run_f32_ms']:.2f} | {r['ort_ms']:.2f} "
            f"| {r['ir_run_over_ort']:.2f}x | {r['ir_run_over_ir_run_reference']:.2f}x "
            f"| {r['ir_run_over_ir_run_f32']:.2f}x | {err(r['ir_run_error'])} | {err(r['ir_run_reference_error'])} "
            f"| {err(r['ort_error'])} |")
    return head + "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--batches", nargs="+", type=int, default=[1])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup-time", type=float, default=0.3)
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--onnx-python", default=".venv/bin/python")
    ap.add_argument("--scratch", default="bench-scratch/int8")
    ap.add_argument("--json", default="bench/int8.json")
    a = ap.parse_args()
    meta = bc.run_meta(a)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), RAYON_NUM_THREADS=str(a.threads))
    os.environ.update(OMP_NUM_THREADS=str(a.threads), RAYON_NUM_THREADS=str(a.threads))
    results = []
    for name in a.models:
        for batch in a.batches:
            d = bc.ROOT / a.scratch / f"{name}_b{batch}"
            print(f"== {name} batch {batch}: quantize, export, convert", file=sys.stderr, flush=True)
            prepare(name, batch, d, a.bin)
            row = {"model": name, "batch": batch, **accuracy(d, a.bin, a.onnx_python, a.threads, env)}
            print(f"== {name} batch {batch}: timing", file=sys.stderr, flush=True)
            order = list(IR_FORMS) + ["ort"]
            rounds = {k: [] for k in order}
            w = bc.Worker(a.onnx_python, "ort", d, name, batch, a.threads)
            try:
                for r in range(a.rounds):
                    for k in order[r % len(order):] + order[:r % len(order)]:
                        rounds[k].append(w.median_ms(a.iters, a.warmup_time) if k == "ort" else time_ir(a, d, k))
            finally:
                w.close()
            for k, v in rounds.items():
                row[f"{k}_ms"] = round(statistics.median(v), 3)
                row[f"{k}_rounds_ms"] = [round(x, 3) for x in v]
            for other in order[1:]:
                row[f"ir_run_over_{other}"] = bc.paired(rounds["ir_run"], rounds[other])
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            Path(a.json).parent.mkdir(parents=True, exist_ok=True)
            Path(a.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(table(meta, results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
