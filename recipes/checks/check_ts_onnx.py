#!/usr/bin/env python3
"""Checks ts2ir's programs through ir2onnx and ONNX Runtime: for every
TorchScript case NAME of a directory (recipes/fixtures/ts_cases.py: NAME.pt,
NAME.inputs.npz, NAME.expected.npz) that ts2ir reads, and every opset:

  ts2ir NAME.pt --example-inputs NAME.inputs.npz [--dynamic for dyn_*] | ir-decompose | ir2onnx --opset N
  onnx.checker.check_model(full_check=True)
  onnxruntime (CPU) on the inputs (tensors, and 0-d arrays for symbolic scalars),
  against NAME.expected.npz; and on NAME.alt.inputs.npz against NAME.alt.expected.npz
  where a case has them (not for traced ones, read with static sizes)

Float outputs within atol 1e-4 + rtol 1e-4, integers and bools exactly.
Cases ts2ir refuses are skipped (bins/tests/ts2ir.rs holds the refusals).
Prints one line per case and opset; the last line is "N passed, M failed";
exits 1 on any failure.

  python recipes/checks/check_ts_onnx.py --bin target/release --cases golden/ts [--opset N ...]
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--opset", type=int, action="append")
    args = ap.parse_args()
    opsets = args.opset or [17]
    tool = lambda name: os.path.join(args.bin, name)  # noqa: E731
    passed = failed = 0
    for pt in sorted(glob.glob(os.path.join(args.cases, "*.pt"))):
        name = os.path.basename(pt)[:-3]
        inputs = os.path.join(args.cases, f"{name}.inputs.npz")
        if not os.path.exists(inputs):
            continue
        dynamic = ["--dynamic"] if name.startswith("dyn_") else []
        read = subprocess.run(
            [tool("ts2ir"), pt, "--example-inputs", inputs, *dynamic], capture_output=True
        )
        if read.returncode != 0:
            print(f"{name}: skipped, ts2ir refuses it")
            continue
        core = subprocess.run(
            [tool("ir-decompose")], input=read.stdout, capture_output=True, check=True
        ).stdout
        runs = [("", dict(np.load(inputs)), load_expected(args.cases, name))]
        alt = os.path.join(args.cases, f"{name}.alt.inputs.npz")
        # Other inputs (other scalar values; other sizes where every dim is
        # symbolic), unless a scalar the import made static is among them.
        if os.path.exists(alt) and not name.endswith("_traced"):
            runs.append((" other inputs", dict(np.load(alt)), load_expected(args.cases, f"{name}.alt")))
        for opset in opsets:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "m.onnx")
                conv = subprocess.run(
                    [tool("ir2onnx"), "--opset", str(opset), "-o", path],
                    input=core,
                    capture_output=True,
                )
                if conv.returncode != 0:
                    print(f"{name} opset {opset}: ir2onnx: {conv.stderr.decode()[:300]}")
                    failed += 1
                    continue
                model = onnx.load(path)
                onnx.checker.check_model(model, full_check=True)
                sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                names = {i.name for i in sess.get_inputs()}
                for what, feed_all, want in runs:
                    if what and not set(feed_all) <= names:
                        # a scalar the import made static: not an input
                        print(f"{name} opset {opset}{what}: skipped, {sorted(set(feed_all) - names)} static")
                        continue
                    feed = {i.name: feed_all[i.name] for i in sess.get_inputs()}
                    got = sess.run(None, feed)[: len(want)]
                    ok, worst = agree(got, want)
                    print(f"{name} opset {opset}{what}: {'ok' if ok else 'FAILED'} (max abs error {worst:.1e})")
                    passed += ok
                    failed += not ok
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def load_expected(cases, stem):
    expected = np.load(os.path.join(cases, f"{stem}.expected.npz"))
    return [expected[k] for k in expected.files]


def agree(got, want):
    """Whether ONNX Runtime's outputs are torch's, and the worst error."""
    ok = len(got) == len(want)
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return False, worst
        if np.issubdtype(w.dtype, np.floating):
            diff = np.abs(g.astype(np.float64) - w)
            if diff.size:
                worst = max(worst, float(diff.max()))
                ok = ok and bool(np.all(diff <= 1e-4 + 1e-4 * np.abs(w)))
        else:
            ok = ok and np.array_equal(g, w)
    return ok, worst


if __name__ == "__main__":
    main()
