#!/usr/bin/env python3
"""Stateful programs step by step against torch (golden/state, written by
recipes/fixtures/state_cases.py), through every tool:

  ir-run        pt2ir NAME.pt2 | ir-run --state S.npz, called once per step
                (S.npz starts absent: the weights), each step's user outputs
                and the state file after it compared with torch's
  decompose     the same after ir-decompose
  onnx          ir2onnx --state-inputs --opset N; ONNX Runtime runs each step,
                feeding the last step's present.<name> outputs back into the
                state inputs; user outputs (first, in torch's order) and the
                present.* outputs compared with torch's

for the TRAINING archive and torch's decomposed one. Needs numpy, onnx and
onnxruntime (the ONNX venv); the tools from --bin.

    python recipes/checks/check_state.py --bin target/release --models golden/state [--opset 18 ...]
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recipes.checks.check_onnx import compare  # noqa: E402


def run(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"{Path(cmd[0]).name} exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p


def compare_all(what, got, want):
    errors = []
    if list(got) != list(want):
        return [f"{what}: names {list(got)}, expected {list(want)}"]
    for k in want:
        e = compare(f"{what} {k}", got[k], want[k], None)
        if e:
            errors.append(e)
    return errors


def by_position(arrays):
    return {f"out_{i}": a for i, a in enumerate(arrays)}


def check_ir_run(b, ir, models, name, meta, work):
    state = work / f"{ir.stem}.state.npz"
    state.unlink(missing_ok=True)
    errors = []
    for k in range(meta["steps"]):
        out = work / f"{ir.stem}.out{k}.npz"
        cmd = [b / "ir-run", ir, "--inputs", models / f"{name}.step{k}.inputs.npz", "-o", out]
        if meta["state"]:
            cmd += ["--state", state]
        run(cmd)
        got = np.load(out)
        errors += compare_all(f"step {k} output", by_position([got[f] for f in got.files]),
                              dict(np.load(models / f"{name}.step{k}.expected.npz")))
        if meta["state"]:
            errors += compare_all(f"step {k} state", dict(np.load(state)),
                                  dict(np.load(models / f"{name}.step{k}.state.npz")))
    return errors


def check_onnx(b, ir, models, name, meta, work, opset):
    import onnxruntime as ort

    onnx_path = work / f"{ir.stem}.opset{opset}.onnx"
    run([b / "ir2onnx", ir, "--state-inputs", "--opset", str(opset), "-o", onnx_path])
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(onnx_path), so)
    outs = [o.name for o in sess.get_outputs()]
    n_user = len(np.load(models / f"{name}.step0.expected.npz").files)
    present = outs[n_user:]
    want_present = [f"present.{s}" for s in meta["state"]]
    if present != want_present:
        return [f"outputs after the user outputs: {present}, expected {want_present}"]
    carried = {}
    errors = []
    for k in range(meta["steps"]):
        feed = dict(np.load(models / f"{name}.step{k}.inputs.npz"))
        for s in meta["state"]:
            if s in carried and s not in meta["user_inputs"]:
                feed[s] = carried[s]
            elif s in carried:
                feed[s] = carried[s]
        got = sess.run(None, feed)
        errors += compare_all(f"step {k} output", by_position(got[:n_user]),
                              dict(np.load(models / f"{name}.step{k}.expected.npz")))
        now = dict(zip(meta["state"], got[n_user:]))
        errors += compare_all(f"step {k} state", now, dict(np.load(models / f"{name}.step{k}.state.npz")))
        carried = now
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--models", default="golden/state")
    ap.add_argument("--opset", type=int, action="append")
    args = ap.parse_args()
    b, models = Path(args.bin), Path(args.models)
    opsets = args.opset or [18]
    rows, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="check_state-") as tmp:
        work = Path(tmp)
        for meta_path in sorted(models.glob("*.meta.json")):
            name = meta_path.name[: -len(".meta.json")]
            meta = json.loads(meta_path.read_text())
            for variant in ("", ".decomp"):
                pt2 = models / f"{name}{variant}.pt2"
                ir = work / f"{name}{variant}.ir"
                core = work / f"{name}{variant}.core.ir"
                stages = [("ir-run", lambda: check_ir_run(b, ir, models, name, meta, work)),
                          ("decompose+ir-run", lambda: check_ir_run(b, core, models, name, meta, work))]
                stages += [(f"onnx{o}", lambda o=o: check_onnx(b, ir, models, name, meta, work, o)) for o in opsets]
                for stage, fn in stages:
                    try:
                        run([b / "pt2ir", pt2, "-o", ir])
                        run([b / "ir-decompose", ir, "-o", core])
                        errors = fn()
                    except Exception as e:  # noqa: BLE001 - reported in the table
                        errors = [str(e).splitlines()[0] if str(e) else type(e).__name__]
                    status = "FAIL" if errors else "ok"
                    failed += bool(errors)
                    rows.append((f"{name}{variant}", stage, f"{meta['steps']}", status, "; ".join(errors)[:300]))
    header = ("fixture", "stage", "steps", "status", "detail")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(4)]
    for r in [header] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
