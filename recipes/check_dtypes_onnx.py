#!/usr/bin/env python3
"""The dtype conformance suite (golden/dtypes, recipes/dtype_cases.py)
through ir2onnx and ONNX Runtime: each case's program converted
(`pt2ir | ir2onnx --opset N`), run by ONNX Runtime (CPU) on the case's
inputs, and compared with torch's outputs under lib/tests/dtypes.rs's
policy (torch.testing's default tolerances, integers exactly, NaN only
where torch has NaN).

Each case either agrees, is refused (ir2onnx declines it with a message,
or ONNX Runtime cannot load or run the file: a type it has no kernel for),
or is WRONG (ONNX Runtime computes a number torch does not). Prints the
counts and every wrong case; with --report writes the per-op table.

    .venv-onnx/bin/python recipes/check_dtypes_onnx.py --bin target/release [--opset 18] [--only OP ...]
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_run  # noqa: E402

TOLERANCE = {  # torch.testing.assert_close's defaults
    "float16": (1e-5, 1e-3),
    "bfloat16": (1e-5, 1.6e-2),
    "float32": (1e-5, 1.3e-6),
    "complex64": (1e-5, 1.3e-6),
    "float64": (1e-7, 1e-7),
    "complex128": (1e-7, 1e-7),
}


def torch_values(a, dtype):
    """An npz array as numbers: bfloat16 ('<V2') as float32."""
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return a


def agrees(got, want, dtype):
    got, want = np.asarray(got), torch_values(want, dtype)
    if got.shape != want.shape:
        return f"shape {got.shape}, torch {want.shape}"
    if want.dtype.kind in "biu":
        if got.dtype.kind not in "biu" or not np.array_equal(got.astype(np.int64), want.astype(np.int64)):
            return f"{int(np.sum(got != want))} elements differ (integers)"
        return None
    atol, rtol = TOLERANCE.get(dtype, (1e-5, 1.3e-6))
    g, w = got.astype(np.complex128 if want.dtype.kind == "c" else np.float64), want.astype(
        np.complex128 if want.dtype.kind == "c" else np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if np.any(nan_g != nan_w):
        return f"NaN at {int(np.sum(nan_g != nan_w))} places where torch differs"
    inf = np.isinf(w) | np.isinf(g)
    if np.any(inf & (g != w)):
        return "an infinity where torch differs"
    ok = ~(nan_w | inf)
    if not np.all(np.abs(g[ok] - w[ok]) <= atol + rtol * np.abs(w[ok])):
        return f"max abs diff {np.max(np.abs(g[ok] - w[ok])):.3g}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--dir", default="golden/dtypes")
    ap.add_argument("--opset", type=int, default=18)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    import onnx
    import onnxruntime as ort

    root = Path(args.dir)
    manifest = json.load(open(root / "manifest.json"))
    work = Path(tempfile.mkdtemp(prefix="dtypes-onnx-"))
    converted = {}
    counts = collections.Counter()
    wrong, refusals = [], collections.Counter()
    for case in manifest["cases"]:
        if args.only and case["op"] not in args.only:
            continue
        pt2 = case["pt2"]
        if pt2 not in converted:
            out = work / (str(len(converted)) + ".onnx")
            p = subprocess.run(f"'{args.bin}/pt2ir' '{root / pt2}' | '{args.bin}/ir2onnx' --opset {args.opset} -o '{out}'",
                               shell=True, capture_output=True, text=True)
            converted[pt2] = (out, None) if p.returncode == 0 else (None, (p.stderr.strip().splitlines() or ["?"])[-1][:120])
        onnx_path, why = converted[pt2]
        if onnx_path is None:
            counts["refused by ir2onnx"] += 1
            refusals[why] += 1
            continue
        data = np.load(root / case["npz"])
        inputs = {k[3:]: ort_run.feedable(data[k]) for k in data.files if k.startswith("in:")}
        expected = [(k, data[k]) for k in data.files if k.startswith("out:")]
        try:
            names, arrays = ort_run.run(onnx_path, inputs)
            model = onnx.load(str(onnx_path), load_external_data=False)
            users = [i for i, o in enumerate(model.graph.output) if o.doc_string.startswith("user output")]
            got = [arrays[i] for i in users]
        except Exception as e:  # ONNX Runtime cannot load or run it
            counts["refused by ONNX Runtime"] += 1
            refusals["onnxruntime: " + str(e).splitlines()[0][:100]] += 1
            continue
        outs = {o["key"]: o["dtype"] for o in case["outputs"]}
        bad = None
        if len(got) != len(expected):
            bad = f"{len(got)} outputs, torch has {len(expected)}"
        for (k, w), g in zip(expected, got):
            e = agrees(g, w, outs.get(k, ""))
            if e and not bad:
                bad = f"{k}: {e}"
        if bad:
            counts["WRONG"] += 1
            wrong.append(f"{case['case']}: {bad}")
        else:
            counts["agree"] += 1
    total = sum(counts.values())
    print(f"opset {args.opset}: {total} cases: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    for w in wrong:
        print("WRONG", w)
    print("refusals by reason:")
    for why, n in refusals.most_common(40):
        print(f"  {n:4d}  {why}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
