#!/usr/bin/env python3
"""The dtype conformance suite (golden/dtypes, recipes/fixtures/dtype_cases.py)
through ir2onnx and ONNX Runtime: each case's program converted
(`pt2ir | ir2onnx --opset N`), run by ONNX Runtime (CPU) on the case's
inputs, and compared with torch's outputs under lib/tests/dtypes.rs's
policy (torch.testing's default tolerances, integers exactly, NaN only
where torch has NaN; the index output of topk/sort/max.dim/min.dim/
kthvalue/median.dim agrees where it points, along the op's dim, at the
value torch returned: torch's sort and topk are not stable, so ties may
be broken either way).

Each case either agrees, is refused (ir2onnx declines it with a message,
or ONNX Runtime cannot load or run the file: a type it has no kernel for),
or is WRONG (ONNX Runtime computes a number torch does not). Prints the
counts and every wrong case; with --report writes the per-op table.

    .venv-onnx/bin/python recipes/checks/check_dtypes_onnx.py --bin target/release [--opset 18] [--only OP ...]
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recipes.run import ort_run  # noqa: E402

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


# Ops whose second output indexes the first input along `dim` (default -1)
# where ties may be broken either way (lib/tests/dtypes.rs's INDEX_OUTPUTS).
INDEX_OUTPUTS = {
    "aten.topk.default",
    "aten.sort.default",
    "aten.sort.stable",
    "aten.max.dim",
    "aten.min.dim",
    "aten.kthvalue.default",
    "aten.median.dim",
}


def op_dim(pt2ir, pt2, op):
    """The `dim` argument of `op`'s node in the archive (-1 when it has
    none), from pt2ir's YAML dump."""
    ns, name, overload = op.split(".")
    y = subprocess.run([pt2ir, str(pt2), "--emit", "yaml"], capture_output=True, text=True).stdout
    for node in re.split(r"\n  - name: ", y)[1:]:
        if not re.search(rf"namespace: {ns}\n\s+name: {name}\n\s+overload: {overload}\n", node):
            continue
        m = re.search(r"- name: dim\n\s+arg:\n\s+kind: int\n\s+value: (-?\d+)", node)
        return int(m.group(1)) if m else -1
    return -1


def indices_point_at_values(x, idx, values, dim):
    """Whether `idx` points, along `dim` of `x`, at elements equal to
    `values` (NaN equal to NaN): lib/tests/dtypes.rs's rule for ties."""
    x, values = np.asarray(x), np.asarray(values)
    idx = np.asarray(idx)
    if x.ndim == 0:
        return True
    if idx.shape != values.shape or idx.ndim != x.ndim or idx.dtype.kind not in "iu":
        return False
    if idx.size and (idx.min() < 0 or idx.max() >= x.shape[dim]):
        return False
    got = np.take_along_axis(x, idx.astype(np.int64), axis=dim)
    if got.dtype.kind in "fc" or values.dtype.kind in "fc":
        g, w = got.astype(np.complex128), values.astype(np.complex128)
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        return bool(np.all(same))
    return bool(np.array_equal(got.astype(np.int64), values.astype(np.int64)))


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
            names, arrays = ort_run.run(onnx_path, inputs, as_torch=True)
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
        for i, ((k, w), g) in enumerate(zip(expected, got)):
            e = agrees(g, w, outs.get(k, ""))
            if e and i == 1 and case["op"] in INDEX_OUTPUTS and not agrees(got[0], expected[0][1], outs.get(expected[0][0], "")):
                # an index of a tie: right when it points at torch's value
                x = next((torch_values(data[f], "") for f in data.files if f.startswith("in:")), None)
                if x is not None:
                    dim = op_dim(f"{args.bin}/pt2ir", root / pt2, case["op"]) % max(x.ndim, 1)
                    if indices_point_at_values(x, g, torch_values(expected[0][1], ""), dim):
                        e = None
            if e and not bad:
                bad = f"{k}: {e}"
        if bad:
            counts["WRONG"] += 1
            wrong.append(f"{case['case']}: {bad}")
        else:
            counts["agree"] += 1
    shutil.rmtree(work, ignore_errors=True)
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
