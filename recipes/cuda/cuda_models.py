"""The bench models on a GPU: ir-run --device cuda against torch, on the
machine with the GPU (after recipes/cuda/cuda_bundle.sh; .cuda-bundle/run.sh
unpacks the binaries, this script finds them in BIN).

    python3 recipes/cuda/cuda_models.py BIN OUT [MODEL...]

For each model of recipes/bench/bench_compare.py (random weights, fixed seeds)
at batch 1: torch.export there, pt2ir | ir-decompose, then ir-run --device
cuda against torch's own outputs on the CPU (float32; ir-diff, 1e-3), and
the median run of ir-run --device cuda (--repeat 20: inputs copied in,
outputs copied back) beside torch eager on the same GPU (inputs already
there, cuda.synchronize after each run, median of 20 after 3 warm-ups).
Writes OUT/cuda_models.json and prints a table. A model that fails is a
row with its error, never a skipped one.
"""
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recipes.bench.bench_compare import build, MODELS  # noqa: E402


def torch_gpu_ms(model, inputs):
    import torch
    m = model.cuda()
    xs = tuple(x.cuda() for x in inputs)
    with torch.no_grad():
        for _ in range(3):
            m(*xs)
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            t = time.perf_counter()
            m(*xs)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    import numpy as np
    import torch
    b, out = Path(sys.argv[1]), Path(sys.argv[2])
    names = sys.argv[3:] or [m for m in MODELS if m != "mlp"]
    rows = []
    for name in names:
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        row = {"model": name, "batch": 1}
        try:
            model, inputs, _ = build(name, 1)
            ep = torch.export.export(model, inputs)
            torch.export.save(ep, str(d / "model.pt2"))
            user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
            np.savez(d / "inputs.npz", **{n: x.numpy() for n, x in zip(user, inputs)})
            with torch.no_grad():
                want = model(*inputs)
            want = want if isinstance(want, (tuple, list)) else (want,)
            np.savez(d / "expected.npz", **{f"out{i}": w.numpy() for i, w in enumerate(want)})
            subprocess.run([str(b / "pt2ir"), str(d / "model.pt2"), "-o", str(d / "model.ir")], check=True, capture_output=True)
            subprocess.run([str(b / "ir-decompose"), str(d / "model.ir"), "-o", str(d / "core.ir")], check=True, capture_output=True)
            r = subprocess.run([str(b / "ir-run"), str(d / "core.ir"), "--device", "cuda", "--inputs", str(d / "inputs.npz"),
                                "-o", str(d / "out.npz"), "--stats", "--repeat", "20"], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(r.stderr.strip().splitlines()[-1])
            m = re.search(r"run ([0-9.]+) ms \(median", r.stderr)
            row["ir_run_cuda_ms"] = float(m.group(1)) if m else None
            row["host_copies"] = next((l.split(": ", 1)[1] for l in r.stderr.splitlines() if "host in op rows" in l), "")
            diff = subprocess.run([str(b / "ir-diff"), "--by-position", "--atol", "1e-3", "--rtol", "1e-3",
                                   str(d / "out.npz"), str(d / "expected.npz")], capture_output=True, text=True)
            row["agrees_with_torch"] = diff.returncode == 0
            row["diff"] = diff.stdout.strip().splitlines()[:2]
            row["torch_cuda_ms"] = torch_gpu_ms(model, inputs)
            row["ratio"] = row["ir_run_cuda_ms"] / row["torch_cuda_ms"] if row["ir_run_cuda_ms"] else None
        except Exception as e:  # a row with the error, not a skipped model
            row["error"] = str(e)[:300]
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / "cuda_models.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                                      "rows": rows}, indent=1))
    print("| model | ir-run cuda ms | torch cuda ms | ratio | agrees with torch (1e-3) | host copies per run |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | error: {r['error'][:80]} | | | | |")
        else:
            print(f"| {r['model']} | {r['ir_run_cuda_ms']} | {r['torch_cuda_ms']:.2f} | {r['ratio']:.2f}x | "
                  f"{r['agrees_with_torch']} | {r['host_copies']} |")
    sys.exit(0 if all("error" not in r and r["agrees_with_torch"] for r in rows) else 1)


if __name__ == "__main__":
    main()
