"""Benchmark: `pt2ir | ir2onnx` against `torch.onnx.export(..., dynamo=True)`
on the same model, in the same run: wall time and peak RSS of each.

    python recipes/bench/bench_onnx.py [--bin target/release] [--runs 3] [MODEL ...]

Models default to resnet50 and gpt2 (the GPT-2 config of the zoo). The
torch side exports the ExportedProgram loaded from the same .pt2 (so both
start from the archive) in a fresh process per run, timed around the export
call only; the pt2kit side is the whole pipeline as a shell runs it.
Prints a Markdown table; writes bench/onnx.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("models", nargs="*", default=["resnet50", "gpt2"])
ap.add_argument("--bin", default="target/release")
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--json", default="bench/onnx.json")
args = ap.parse_args()

TORCH_SIDE = r"""
import resource, sys, time, torch
ep = torch.export.load(sys.argv[1])
t = time.perf_counter()
torch.onnx.export(ep, (), sys.argv[2], dynamo=True, optimize=False, verify=False)
dt = time.perf_counter() - t
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def find(name):
    for d in ("golden/models", "golden/big"):
        p = os.path.join(d, name + ".pt2")
        if os.path.exists(p):
            return p
    sys.exit(f"{name}.pt2 not found: run `make big`")


def ours(pt2, out):
    cmd = f"'{args.bin}/pt2ir' '{pt2}' | '{args.bin}/ir2onnx' -o '{out}'"
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M", "sh", "-c", cmd], capture_output=True, text=True, check=True)
    dt = time.perf_counter() - t
    # /usr/bin/time reports the shell's biggest child (the larger tool)
    return dt, int(r.stderr.strip().splitlines()[-1]) * 1024


def theirs(pt2, out):
    r = subprocess.run([sys.executable, "-c", TORCH_SIDE, pt2, out], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"torch.onnx.export failed on {pt2}:\n{r.stderr[-2000:]}")
    dt, rss = r.stdout.strip().splitlines()[-1].split()
    return float(dt), int(rss)


rows = []
with tempfile.TemporaryDirectory() as tmp:
    for name in args.models:
        pt2 = find(name)
        o, t = [], []
        for i in range(args.runs):
            o.append(ours(pt2, os.path.join(tmp, f"ours{i}.onnx")))
            t.append(theirs(pt2, os.path.join(tmp, f"torch{i}.onnx")))
        row = {
            "model": name, "runs": args.runs,
            "pt2kit_s": statistics.median(x[0] for x in o), "pt2kit_peak_rss": max(x[1] for x in o),
            "torch_s": statistics.median(x[0] for x in t), "torch_peak_rss": max(x[1] for x in t),
        }
        row["speedup"] = row["torch_s"] / row["pt2kit_s"]
        rows.append(row)

os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
json.dump(rows, open(args.json, "w"), indent=1)
print("| model | pt2ir \\| ir2onnx s | torch.onnx.export(dynamo=True) s | speedup | peak RSS MiB (ours / torch) |")
print("|---|---|---|---|---|")
for r in rows:
    print(f"| {r['model']} | {r['pt2kit_s']:.3f} | {r['torch_s']:.3f} | {r['speedup']:.0f}x | "
          f"{r['pt2kit_peak_rss']/2**20:.0f} / {r['torch_peak_rss']/2**20:.0f} |")
