"""Benchmark: ONNX Runtime on `ir2onnx`'s ONNX against ONNX Runtime on
torch's own export of the same archive (`torch.onnx.export(ep,
dynamo=True)`, its defaults), same inputs and threads, in one run. Where
the two differ by more than noise, that is a finding for `ir2onnx`.

    .venv/bin/python recipes/bench/bench_ort_exports.py [--models mlp resnet18 ...] [--batches 1 8]
        [--threads 2] [--rounds 5] [--iters 5] [--warmup-time 0.3]
        [--onnx-python .venv-onnx/bin/python] [--scratch bench-scratch] [--json bench/ort_exports.json]

`make bench-ort-exports` runs it. It reads what `make bench-compare` left in
bench-scratch/MODEL_bBATCH (model.pt2, model.onnx from `ir2onnx`,
inputs.npz), exports torch's ONNX from model.pt2 into torch.onnx there,
then times the two in two ONNX Runtime processes (default graph
optimisation, intra-op threads = --threads), rounds interleaved in a
rotating order, each round a median of --iters runs after warm-up; the
table shows the medians over rounds, the paired ratio (median over rounds
of ours / torch's), and the largest difference between the two outputs.
Models whose artifacts are gone (bench_compare.py deletes the 3.2 GB
model's) are skipped, and said so.
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recipes.bench import bench_compare as bc  # noqa: E402

AGREE = r"""
import sys, numpy as np, onnxruntime as ort
npz = np.load(sys.argv[3])
outs = []
for f in sys.argv[1:3]:
    s = ort.InferenceSession(f, providers=["CPUExecutionProvider"])
    feeds = {i.name: npz[i.name] for i in s.get_inputs()}
    outs.append(s.run(None, feeds))
print(max(float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max()) for a, b in zip(*outs)))
"""


def table(meta, results):
    head = (f"{meta['date']}, {meta['cpu']} ({meta['machine']}, {meta['isa']}), {meta['threads']} threads; "
            f"torch {meta['torch']}, ONNX Runtime {meta['onnxruntime']}, pt2kit {meta['pt2kit']}; "
            f"medians of {meta['rounds']} interleaved rounds of {meta['iters']} runs.\n\n")
    rows = ["| model | batch | ORT on `ir2onnx`'s ONNX ms | ORT on torch's ONNX ms | ours / torch's | outputs max abs diff |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        rows.append(f"| {r['model']} | {r['batch']} | {r['ort_ms']:.2f} | {r['ort_torch_ms']:.2f} | "
                    f"{r['ours_over_torch']:.2f}x | {r['max_abs_diff']:.1e} |")
    return head + "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=[m for m in bc.MODELS if m not in bc.BIG])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup-time", type=float, default=0.3)
    ap.add_argument("--onnx-python", default=".venv-onnx/bin/python")
    ap.add_argument("--scratch", default="bench-scratch")
    ap.add_argument("--json", default="bench/ort_exports.json")
    a = ap.parse_args()
    meta = bc.run_meta(a)
    results = []
    for name in a.models:
        for batch in a.batches:
            d = bc.ROOT / a.scratch / f"{name}_b{batch}"
            if not all((d / f).exists() for f in ("model.pt2", "model.onnx", "inputs.npz")):
                print(f"== {name} batch {batch}: no artifacts in {d} (make bench-compare first); skipped",
                      file=sys.stderr, flush=True)
                continue
            print(f"== {name} batch {batch}: torch.onnx.export", file=sys.stderr, flush=True)
            subprocess.run([sys.executable, "-c", bc.EXPORT, str(d / "model.pt2"), str(d / "torch.onnx")],
                           check=True, capture_output=True)
            diff = float(subprocess.run([a.onnx_python, "-c", AGREE, str(d / "model.onnx"), str(d / "torch.onnx"),
                                         str(d / "inputs.npz")], check=True, capture_output=True,
                                        text=True).stdout.split()[-1])
            print(f"== {name} batch {batch}: timing", file=sys.stderr, flush=True)
            workers = {k: bc.Worker(a.onnx_python, k, d, name, batch, a.threads) for k in ("ort", "ort_torch")}
            rounds = {k: [] for k in workers}
            order = list(workers)
            try:
                for r in range(a.rounds):
                    for k in order[r % 2:] + order[:r % 2]:
                        rounds[k].append(workers[k].median_ms(a.iters, a.warmup_time))
            finally:
                for w in workers.values():
                    w.close()
            row = {"model": name, "batch": batch, "max_abs_diff": diff}
            for k, v in rounds.items():
                row[f"{k}_ms"] = round(statistics.median(v), 3)
                row[f"{k}_rounds_ms"] = [round(x, 3) for x in v]
            row["ours_over_torch"] = round(statistics.median(
                [x / y for x, y in zip(rounds["ort"], rounds["ort_torch"])]), 3)
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            Path(a.json).parent.mkdir(parents=True, exist_ok=True)
            Path(a.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(table(meta, results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
