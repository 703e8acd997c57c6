"""Benchmark: `ir-run --precision bf16` against OpenVINO at bf16, side by side, with each one's error against torch eager.

    .venv/bin/python recipes/bench/bench_bf16.py [--models resnet50 bert] [--batches 1]
        [--threads 2] [--rounds 5] [--iters 5] [--warmup-time 0.3] [--onnx-python .venv/bin/python]
        [--bin target/release] [--scratch bench-scratch] [--json bench/bf16.json]

For each model (bench_compare.py's: full size, random weights, fixed
seeds) and batch size it exports and converts as bench_compare.py does
(reusing its scratch folder where the archive, the IR, the ONNX and the
inputs are there), then:

1. error: the largest absolute difference from torch eager's float32
   outputs (every output, on the same inputs) of `ir-run --precision
   bf16`, of OpenVINO at bf16 (`INFERENCE_PRECISION_HINT=bf16`, on
   `ir2onnx`'s ONNX) and of both at f32;
2. time: `ir-bench` at f32 and at bf16 on the IR as exported (a fresh
   process each round) and OpenVINO at f32 and at bf16 (long-lived
   workers, bench_compare.py's, latency hint, the same thread count),
   rounds interleaved in a rotating order, each a median of --iters runs
   after warm-up; the table shows medians over rounds and paired ratios
   (the median over rounds of ir-run bf16 / OpenVINO bf16, and of each
   runtime's bf16 / its f32). On a machine others share, the paired
   ratios are the figures to read.

Writes bench/bf16.json and prints the Markdown table docs/performance.md
shows.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from recipes.bench import bench_compare as bc  # noqa: E402

ROOT = bc.ROOT

# OpenVINO at bf16, explicitly (its default on a CPU with bf16
# instructions, asked for by name so a CPU without them refuses it).
OV_OUT = """
import sys, numpy as np, openvino as ov
cfg = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": int(sys.argv[3]),
       "INFERENCE_PRECISION_HINT": sys.argv[4]}
c = ov.Core().compile_model(sys.argv[1], "CPU", cfg)
npz = np.load(sys.argv[2])
r = c.create_infer_request().infer({i.get_any_name(): npz[i.get_any_name()] for i in c.inputs})
np.savez(sys.argv[5], *[r[o] for o in c.outputs])
"""


def eager_outputs(name, batch, inputs):
    """torch eager's float32 outputs on the inputs (a list, in order)."""
    import torch
    model, _, _ = bc.build(name, batch)
    with torch.no_grad():
        out = model(*[torch.from_numpy(inputs[k]) for k in inputs.files])
    outs = out if isinstance(out, (tuple, list)) else [out]
    return [o.numpy() for o in outs]


def max_error(got, want):
    import numpy as np
    return max(float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) for g, w in zip(got, want))


def ir_bench_ms(bin_dir, ir, inputs, k, threads, warm, precision):
    r = subprocess.run([str(Path(bin_dir) / "ir-bench"), str(ir), "--inputs", str(inputs),
                        "--iters", str(k), "--warmup", "1", "--warmup-time", str(warm), "--threads", str(threads),
                        "--precision", precision, "--format", "json", "-q"],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout)["median_seconds"] * 1e3


def main():
    import numpy as np
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["resnet50", "bert"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup-time", type=float, default=0.3)
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--onnx-python", default=sys.executable, help="a Python with openvino")
    ap.add_argument("--scratch", default="bench-scratch")
    ap.add_argument("--json", default="bench/bf16.json")
    a = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), RAYON_NUM_THREADS=str(a.threads))
    rows = []
    for name in a.models:
        for batch in a.batches:
            d = ROOT / a.scratch / f"{name}_b{batch}"
            if not all((d / f).exists() for f in ("model.pt2", "model.ir", "model.onnx", "inputs.npz")):
                print(f"== {name} batch {batch}: export and convert", file=sys.stderr, flush=True)
                bc.prepare(name, batch, d, a.bin)
            inputs = d / "inputs.npz"
            want = eager_outputs(name, batch, np.load(inputs))
            row = {"model": name, "batch": batch}
            for precision in ("f32", "bf16"):
                out = d / f"ir_{precision}.npz"
                subprocess.run([str(Path(a.bin) / "ir-run"), str(d / "model.ir"), "--inputs", str(inputs),
                                "--precision", precision, "-o", str(out), "-q"], check=True, env=env)
                got = np.load(out)
                row[f"ir_{precision}_error"] = max_error([got[k] for k in got.files], want)
                out = d / f"ov_{precision}.npz"
                subprocess.run([a.onnx_python, "-c", OV_OUT, str(d / "model.onnx"), str(inputs), str(a.threads),
                                precision, str(out)], check=True, cwd=ROOT, env=env)
                got = np.load(out)
                row[f"ov_{precision}_error"] = max_error([got[k] for k in got.files], want)
            print(f"== {name} batch {batch}: timing", file=sys.stderr, flush=True)
            workers = {}
            order = ["ir_f32", "ir_bf16", "ov", "ov_bf16"]
            rounds = {k: [] for k in order}
            try:
                for k in ("ov", "ov_bf16"):
                    workers[k] = bc.Worker(a.onnx_python, k, d, name, batch, a.threads)
                for r in range(a.rounds):
                    for k in order[r % len(order):] + order[:r % len(order)]:
                        if k.startswith("ir_"):
                            ms = ir_bench_ms(a.bin, d / "model.ir", inputs, a.iters, a.threads, a.warmup_time,
                                             k[3:])
                        else:
                            ms = workers[k].median_ms(a.iters, a.warmup_time)
                        rounds[k].append(ms)
            finally:
                for w in workers.values():
                    w.close()
            for k, v in rounds.items():
                row[f"{k}_ms"] = round(statistics.median(v), 3)
                row[f"{k}_rounds_ms"] = [round(x, 3) for x in v]
            row["ir_bf16_over_ov_bf16"] = bc.paired(rounds["ir_bf16"], rounds["ov_bf16"])
            row["ir_bf16_over_ir_f32"] = bc.paired(rounds["ir_bf16"], rounds["ir_f32"])
            row["ov_bf16_over_ov"] = bc.paired(rounds["ov_bf16"], rounds["ov"])
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    meta = {"date": time.strftime("%Y-%m-%d"), "cpu": bc.cpu_name(), "threads": a.threads, "rounds": a.rounds,
            "iters": a.iters,
            "pt2kit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                     cwd=ROOT).stdout.strip()}
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps({"meta": meta, "results": rows}, indent=1) + "\n")
    print(table(meta, rows))
    return 0


def table(meta, rows):
    lines = [
        f"{meta['date']}, {meta['cpu']}, {meta['threads']} threads each, pt2kit {meta['pt2kit']}; medians of "
        f"{meta['rounds']} interleaved rounds of {meta['iters']} runs.",
        "",
        "| model | batch | ir-run f32 ms | ir-run bf16 ms | OpenVINO f32 ms | OpenVINO bf16 ms "
        "| ir-run bf16 / OpenVINO bf16 | ir-run bf16 / f32 | OpenVINO bf16 / f32 "
        "| max abs error vs eager, bf16 (ir-run / OpenVINO) | f32 (ir-run / OpenVINO) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['ir_f32_ms']:.2f} | {r['ir_bf16_ms']:.2f} | {r['ov_ms']:.2f} "
            f"| {r['ov_bf16_ms']:.2f} | {r['ir_bf16_over_ov_bf16']:.2f}x | {r['ir_bf16_over_ir_f32']:.2f}x "
            f"| {r['ov_bf16_over_ov']:.2f}x | {r['ir_bf16_error']:.3g} / {r['ov_bf16_error']:.3g} "
            f"| {r['ir_f32_error']:.3g} / {r['ov_f32_error']:.3g} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
