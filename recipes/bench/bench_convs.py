"""Benchmark: single convolutions (each with its ReLU) in ir-run against ONNX Runtime.

    .venv/bin/python recipes/bench/bench_convs.py [--threads 2] [--batch 1] [--rounds 4] [--iters 30]
        [--onnx-python .venv-onnx/bin/python] [--bin target/release]
        [--scratch bench-scratch/convs] [--json bench/convs.json] [--only NAME ...]

`make bench-convs` runs it. The layers are those where the whole-model
profiles of `make bench-compare` put `ir-run` behind (ResNet's stem,
stride-2 3x3s, pointwise convolutions over 56x56 to 7x7 planes,
MobileNetV3's depthwise and narrow pointwise ones) and, for contrast, 3x3s
of stride 1. Each is a torch module (random weights, seed 0, batch 1)
exported with torch.export; `pt2ir | ir-decompose` and `ir2onnx` make the
IR and the ONNX. `ir-bench` and ONNX Runtime (default graph optimisation,
intra-op threads = --threads, in a fresh process each round) run it in
interleaved rounds, alternating which goes first; each round gives each
its median of --iters runs after 5 warm-up runs; the table shows the
median over rounds, GFLOP/s and the paired ratio (median over rounds of
ir-run / ORT). ONNX Runtime's time includes the reorders to and from its
blocked layout that a lone convolution needs. Writes bench/convs.json.
Timings want a quiet machine.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# name: (in channels, out channels, kernel, stride, padding, groups, input side)
LAYERS = {
    "stem 7x7/2 3->64 @224": (3, 64, 7, 2, 3, 1, 224),
    "stem 3x3/2 3->16 @224": (3, 16, 3, 2, 1, 1, 224),
    "3x3/2 128->128 @56": (128, 128, 3, 2, 1, 1, 56),
    "3x3/2 512->512 @14": (512, 512, 3, 2, 1, 1, 14),
    "3x3 256->256 @14": (256, 256, 3, 1, 1, 1, 14),
    "3x3 512->512 @7": (512, 512, 3, 1, 1, 1, 7),
    "1x1 64->256 @56": (64, 256, 1, 1, 0, 1, 56),
    "1x1 256->128 @56": (256, 128, 1, 1, 0, 1, 56),
    "1x1/2 256->512 @56": (256, 512, 1, 2, 0, 1, 56),
    "1x1 256->1024 @14": (256, 1024, 1, 1, 0, 1, 14),
    "1x1 2048->512 @7": (2048, 512, 1, 1, 0, 1, 7),
    "1x1 16->72 @56": (16, 72, 1, 1, 0, 1, 56),
    "1x1 96->576 @7": (96, 576, 1, 1, 0, 1, 7),
    "1x1 48->288 @14": (48, 288, 1, 1, 0, 1, 14),
    "dw 3x3/2 72 @56": (72, 72, 3, 2, 1, 72, 56),
    "dw 5x5 576 @7": (576, 576, 5, 1, 2, 576, 7),
}

ORT_TIMER = """
import sys, time, numpy as np, onnxruntime as ort
d, n, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
o = ort.SessionOptions(); o.intra_op_num_threads = threads; o.inter_op_num_threads = 1
s = ort.InferenceSession(f"{d}/model.onnx", o, providers=["CPUExecutionProvider"])
x = np.load(f"{d}/inputs.npz")["x"]
feed = {s.get_inputs()[0].name: x}
for _ in range(5):
    s.run(None, feed)
ts = []
for _ in range(n):
    a = time.perf_counter(); s.run(None, feed); ts.append(time.perf_counter() - a)
print(sorted(ts)[len(ts) // 2])
"""


def slug(name):
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


def gflop(cfg, batch):
    ci, co, k, st, p, g, hw = cfg
    oh = (hw + 2 * p - k) // st + 1
    return 2 * batch * co * (ci // g) * k * k * oh * oh / 1e9


def make(cfg, batch, d, bindir):
    import numpy as np
    import torch

    ci, co, k, st, p, g, hw = cfg
    torch.manual_seed(0)

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(ci, co, k, st, p, groups=g)

        def forward(self, x):
            return torch.relu(self.conv(x))

    d.mkdir(parents=True, exist_ok=True)
    x = torch.randn(batch, ci, hw, hw)
    ep = torch.export.export(Layer().eval(), (x,))
    torch.export.save(ep, d / "model.pt2")
    np.savez(d / "inputs.npz", x=x.numpy())
    ir = subprocess.run([bindir / "pt2ir", d / "model.pt2"], capture_output=True, check=True).stdout
    subprocess.run([bindir / "ir-decompose", "-o", d / "core.ir"], input=ir, check=True)
    subprocess.run([bindir / "ir2onnx", d / "core.ir", "-o", d / "model.onnx"], check=True)


def time_ir(d, bindir, iters, threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    out = subprocess.run(
        [bindir / "ir-bench", d / "core.ir", "--inputs", d / "inputs.npz", "--iters", str(iters),
         "--warmup", "5", "--format", "json", "-q"],
        env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["median_seconds"]


def time_ort(d, onnx_python, iters, threads):
    out = subprocess.run([onnx_python, "-c", ORT_TIMER, str(d), str(iters), str(threads)],
                         capture_output=True, text=True, check=True).stdout
    return float(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--onnx-python", default=str(ROOT / ".venv-onnx/bin/python"))
    ap.add_argument("--bin", default=str(ROOT / "target/release"))
    ap.add_argument("--scratch", default=str(ROOT / "bench-scratch/convs"))
    ap.add_argument("--json", default=str(ROOT / "bench/convs.json"))
    ap.add_argument("--only", nargs="*", help="layer names (as in the table) to run")
    args = ap.parse_args()
    bindir, scratch = Path(args.bin), Path(args.scratch)
    layers = {n: c for n, c in LAYERS.items() if not args.only or n in args.only}
    rows = []
    for name, cfg in layers.items():
        d = scratch / (slug(name) + (f"_b{args.batch}" if args.batch > 1 else ""))
        make(cfg, args.batch, d, bindir)
        ours, ort = [], []
        for r in range(args.rounds):
            order = ["ir", "ort"] if r % 2 == 0 else ["ort", "ir"]
            for who in order:
                if who == "ir":
                    ours.append(time_ir(d, bindir, args.iters, args.threads))
                else:
                    ort.append(time_ort(d, args.onnx_python, args.iters, args.threads))
        g = gflop(cfg, args.batch)
        a, b = statistics.median(ours), statistics.median(ort)
        row = {
            "layer": name, "config": dict(zip(["in", "out", "kernel", "stride", "pad", "groups", "side"], cfg)),
            "gflop": g, "ir_run_ms": a * 1e3, "ort_ms": b * 1e3,
            "ir_run_rounds_ms": [t * 1e3 for t in ours], "ort_rounds_ms": [t * 1e3 for t in ort],
            "ir_run_over_ort": statistics.median([x / y for x, y in zip(ours, ort)]),
        }
        rows.append(row)
        print(f"{name:24s} ir-run {a*1e3:7.3f} ms ({g/a:6.1f} GFLOP/s)  ORT {b*1e3:7.3f} ms ({g/b:6.1f})  "
              f"{row['ir_run_over_ort']:.2f}x", file=sys.stderr)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    meta = {"machine": platform.processor() or platform.machine(), "threads": args.threads, "batch": args.batch,
            "rounds": args.rounds, "iters": args.iters, "pt2kit": rev}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"meta": meta, "results": rows}, indent=1) + "\n")
    print(f"| layer | GFLOP | ir-run ms | ONNX Runtime ms | ir-run / ORT |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['layer']} | {r['gflop']:.3f} | {r['ir_run_ms']:.3f} | {r['ort_ms']:.3f} | {r['ir_run_over_ort']:.2f}x |")


if __name__ == "__main__":
    main()
