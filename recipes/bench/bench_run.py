"""Benchmark: ir-run CPU latency against torch eager on the same model and
inputs, same thread count, in the same run; batch 1 (the fixtures' inputs).

    python recipes/bench/bench_run.py [--bin target/release] [--threads 2] [--runs 20] [--rounds 5] [MODEL ...]

Models default to mlp resnet18 bert (from golden/models or golden/big; make
them with `make big` / recipes/fixtures/zoo.py). torch eager is the model rebuilt
by recipes/fixtures/zoo.py with the same seed (so the same weights as the archive).
ir-run is timed twice: on the archive's graph as exported, and on the
graph `ir-decompose` makes of it (core ATen, cleanup passes, batch norm
folded into convolutions), the pipeline a deployment would use.
Prints a Markdown table; writes bench/run.json.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recipes.fixtures import zoo  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("models", nargs="*", default=["mlp", "resnet18", "bert"])
ap.add_argument("--bin", default="target/release")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--runs", type=int, default=20)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--json", default="bench/run.json")
args = ap.parse_args()
torch.set_num_threads(args.threads)


def find(name, suffix):
    for d in ("golden/models", "golden/big"):
        p = os.path.join(d, name + suffix)
        if os.path.exists(p):
            return p
    sys.exit(f"{name}{suffix} not found: run `make big` (or recipes/fixtures/zoo.py --only {name})")


def torch_ms(model, inputs):
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            model(*inputs)
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def ir_run_ms(graph, inputs_npz, tmp):
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    out = subprocess.run(
        [os.path.join(args.bin, "ir-run"), graph, "--inputs", inputs_npz,
         "--repeat", str(args.runs), "--stats", "-o", os.path.join(tmp, "o.npz")],
        check=True, capture_output=True, text=True, env=env)
    return float(re.search(r"run ([0-9.]+) ms", out.stderr).group(1))


rows = []
for name in args.models:
    pt2 = find(name, ".pt2")
    inputs_npz = find(name, ".inputs.npz")
    npz = np.load(inputs_npz)
    spec = zoo.MODELS[name]
    torch.manual_seed(0)
    model = spec["build"]().eval()
    inputs = tuple(torch.from_numpy(npz[k]) for k in npz.files)
    with tempfile.TemporaryDirectory() as tmp:
        ir = os.path.join(tmp, "m.ir")
        core = os.path.join(tmp, "m.core.ir")
        subprocess.run([os.path.join(args.bin, "pt2ir"), pt2, "-o", ir], check=True)
        subprocess.run([os.path.join(args.bin, "ir-decompose"), ir, "-o", core], check=True)
        # Rounds interleave the three so that a slow spell of the machine
        # hits all of them; each figure is the median over the rounds.
        t, a, c = [], [], []
        for _ in range(args.rounds):
            t.append(torch_ms(model, inputs))
            a.append(ir_run_ms(ir, inputs_npz, tmp))
            c.append(ir_run_ms(core, inputs_npz, tmp))
    tm, am, cm = statistics.median(t), statistics.median(a), statistics.median(c)
    rows.append({"model": name, "threads": args.threads, "runs": args.runs, "rounds": args.rounds,
                 "torch_eager_ms": tm, "ir_run_ms": am, "ratio": am / tm,
                 "ir_run_core_ms": cm, "ratio_core": cm / tm})

os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
with open(args.json, "w") as f:
    json.dump(rows, f, indent=1)
for r in rows:
    print(f"{r['model']}: torch {r['torch_eager_ms']:.3f} ms, ir-run {r['ir_run_ms']:.3f} ms ({r['ratio']:.2f}x), "
          f"after ir-decompose {r['ir_run_core_ms']:.3f} ms ({r['ratio_core']:.2f}x)")
