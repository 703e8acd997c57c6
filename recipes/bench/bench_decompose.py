"""Benchmark: `ir-decompose` against torch's `ExportedProgram.run_decompositions()`
on the same model (the TRAINING-dialect archive), in the same run.

    python recipes/bench/bench_decompose.py [--bin target/release] [--runs 5] [MODEL ...]

Models default to bert (the BERT config of the zoo) and resnet50 (`make big`).
The torch side loads the archive once per fresh process and times the
`run_decompositions()` call only. The pt2kit side is `ir-decompose` as a
shell runs it, from reading the IR file to writing the lowered one (pt2ir's
conversion happens once, before timing): with every cleanup pass (the
default) and with `--passes dce` (what run_decompositions() does besides
lowering). Medians of --runs; writes bench/decompose.json.
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
ap.add_argument("models", nargs="*", default=["bert", "resnet50"])
ap.add_argument("--bin", default="target/release")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--json", default="bench/decompose.json")
args = ap.parse_args()

TORCH_SIDE = r"""
import sys, time, torch
ep = torch.export.load(sys.argv[1])
t = time.perf_counter()
ep = ep.run_decompositions()
print(time.perf_counter() - t, len(list(ep.graph.nodes)))
"""


def find(name):
    for d in ("golden/models", "golden/big"):
        p = os.path.join(d, name + ".pt2")
        if os.path.exists(p):
            return p
    sys.exit(f"{name}.pt2 not found: run `make big`")


def ours(ir, out, extra):
    t = time.perf_counter()
    subprocess.run([f"{args.bin}/ir-decompose", ir, "-o", out, *extra], check=True)
    return time.perf_counter() - t


def theirs(pt2):
    r = subprocess.run([sys.executable, "-c", TORCH_SIDE, pt2], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"run_decompositions failed on {pt2}:\n{r.stderr[-2000:]}")
    return float(r.stdout.split()[0])


rows = []
with tempfile.TemporaryDirectory() as tmp:
    for name in args.models:
        pt2 = find(name)
        ir = os.path.join(tmp, name + ".ir")
        subprocess.run([f"{args.bin}/pt2ir", pt2, "-o", ir], check=True)
        out = os.path.join(tmp, name + ".core.ir")
        a, d, t = [], [], []
        for _ in range(args.runs):
            a.append(ours(ir, out, []))
            d.append(ours(ir, out, ["--passes", "dce"]))
            t.append(theirs(pt2))
        row = {
            "model": name, "runs": args.runs,
            "pt2kit_all_passes_s": statistics.median(a),
            "pt2kit_dce_s": statistics.median(d),
            "torch_s": statistics.median(t),
        }
        row["fraction_all_passes"] = row["pt2kit_all_passes_s"] / row["torch_s"]
        row["fraction_dce"] = row["pt2kit_dce_s"] / row["torch_s"]
        rows.append(row)
        print(f"{name}: ir-decompose {row['pt2kit_all_passes_s']:.3f} s (all passes), "
              f"{row['pt2kit_dce_s']:.3f} s (dce); run_decompositions() {row['torch_s']:.3f} s")

os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
json.dump(rows, open(args.json, "w"), indent=1)
