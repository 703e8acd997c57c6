#!/usr/bin/env python3
"""Checks, node by node, that ir2onnx + ONNX Runtime and ir-run agree, and
that the comparison finds a wrong node.

For every fixture NAME of --models (its TRAINING-dialect NAME.pt2, its ATEN
NAME.decomp.pt2, and NAME.pt2 lowered by ir-decompose) on NAME.inputs.npz:

  pt2ir NAME.pt2 -o m.ir                       [| ir-decompose]
  ir2onnx m.ir --intermediates -o m.onnx       every node's tensor an output
  recipes/run/ort_run.py m.onnx -> ort.npz         ONNX Runtime computes them all
  ir-run m.ir --intermediates run.npz          so does ir-run, in node order
  ir-diff run.npz ort.npz --first              exit 0: every shared value agrees

Then the control that the comparison can fail, and fails at the right
place: one node of the ONNX model (the float value halfway through the
shared ones) is made wrong by adding 0.5 to its result; `ir-diff --first`
must exit 1 and name exactly that value as the first to differ.

Tolerances are ir-diff's (atol = rtol = 1e-4), except for the fixtures
computed in float16 or bfloat16 (the meta's converted_outputs), where each
op rounds to that precision: 1e-2. Prints a table and "N passed, M
failed"; exits 1 on any failure.

With --explain-ties (the PT2E int8 models, golden/quant), a rounding where
the two part is checked, not failed: where the first value to differ is
made by QuantizeLinear (a Clip after it included) or Round, and at every
element that differs both results are what the rounding gives for some
input within the tolerance of the one the two agree on (a value on a tie:
ONNX Runtime's int8 kernels and summation orders differ from ir-run's in
the last float32 bits), ir-run's value is fed to ONNX Runtime there and
the comparison goes on after it. Each such cut is listed; any other
difference fails as before.

  python recipes/checks/check_intermediates.py --bin target/release --models golden/models
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
from recipes.run import ort_run  # noqa: E402


def sh(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    return r.returncode, (r.stdout + r.stderr).strip()


def must(cmd):
    rc, out = sh(cmd)
    if rc != 0:
        raise RuntimeError(f"{Path(str(cmd[0])).name} exit {rc}: {out.splitlines()[-1] if out else ''}")
    return out


def perturb(onnx_path, shared, out_path):
    """Adds 0.5 to the float value halfway through `shared` (names in node
    order); returns its name, or None when no float value is shared."""
    import onnx

    model = onnx.load(str(onnx_path))
    floats = {o.name for o in model.graph.output
              if o.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)}
    candidates = [n for n in shared if n in floats]
    if not candidates:
        return None
    target = candidates[len(candidates) // 2]
    elem = next(o.type.tensor_type.elem_type for o in model.graph.output if o.name == target)
    for node in model.graph.node:
        node.output[:] = [target + ".right" if o == target else o for o in node.output]
    half = onnx.helper.make_tensor(target + ".half", elem, [], [0.5])
    model.graph.initializer.append(half)
    model.graph.node.append(onnx.helper.make_node(
        "Add", [target + ".right", target + ".half"], [target], name=target + ".wrong"))
    # Add appended last: ONNX wants nodes in topological order.
    onnx.save(_sorted(model), str(out_path))
    return target


def _sorted(model):
    """The model's nodes in a topological order (the appended Add moves up
    to just after the node it reads)."""
    g = model.graph
    nodes = list(g.node)
    add = nodes.pop()
    src = add.input[0]
    at = next(i for i, n in enumerate(nodes) if src in n.output)
    nodes.insert(at + 1, add)
    del g.node[:]
    g.node.extend(nodes)
    return model


def _producers(model):
    return {o: n for n in model.graph.node for o in n.output}


def _fetch(model, feed, names):
    """Values of `names` (any value of the model) in ONNX Runtime."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None))
    path = Path(tempfile.mkdtemp(prefix="fetch-")) / "m.onnx"
    onnx.save(m, str(path))
    got, arrays = ort_run.run(path, feed, as_torch=True)
    path.unlink()
    path.parent.rmdir()
    values = dict(zip(got, arrays))
    return [values[n] for n in names]


def explained_tie(model, feed, value, ours, theirs, tol):
    """Whether `value`, where ir-run (`ours`) and ONNX Runtime (`theirs`)
    first part, is a rounding that went the other way on an input within
    `tol` of the one they agree on (see --explain-ties)."""
    prod = _producers(model)
    node = prod.get(value)
    if node is None:
        return False
    clip = None
    if node.op_type == "Clip" and node.input[0] in prod and prod[node.input[0]].op_type == "QuantizeLinear":
        clip, node = node, prod[node.input[0]]
    if node.op_type not in ("QuantizeLinear", "Round"):
        return False
    names = list(node.input) + ([i for i in clip.input[1:] if i] if clip is not None else [])
    vals = _fetch(model, feed, names)
    x = vals[0].astype(np.float64)
    t = tol + tol * np.abs(x)
    if node.op_type == "Round":
        def at(v):
            return np.round(v)
    else:
        scale = vals[1].astype(np.float64)
        zp = vals[2].astype(np.float64) if len(node.input) > 2 and node.input[2] else 0.0
        info = np.iinfo(theirs.dtype)
        lo, hi = float(info.min), float(info.max)
        if clip is not None:
            lo, hi = max(lo, float(vals[-2])), min(hi, float(vals[-1]))
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        if scale.ndim == 1 and scale.size > 1:
            shape = [1] * x.ndim
            shape[axis] = -1
            scale = scale.reshape(shape)
            zp = np.asarray(zp).reshape(shape) if np.ndim(zp) else zp

        def at(v):
            return np.clip(np.round(v / scale) + zp, lo, hi)
    a, b = at(x - t), at(x + t)
    lo_q, hi_q = np.minimum(a, b), np.maximum(a, b)
    differ = ours != theirs
    ok = all(((lo_q <= v.astype(np.float64)) & (v.astype(np.float64) <= hi_q))[differ].all() for v in (ours, theirs))
    return bool(ok)


def cut(model, value, array):
    """The model with `value` an input (fed ir-run's values) instead of
    computed: its producer writes `value.cut`, nothing reads that."""
    import onnx

    out = next(o for o in model.graph.output if o.name == value)
    for n in model.graph.node:
        n.output[:] = [value + ".cut" if o == value else o for o in n.output]
    model.graph.input.append(onnx.helper.make_tensor_value_info(
        value, out.type.tensor_type.elem_type, list(array.shape)))
    model.graph.output.remove(out)
    return model


def check(bin_dir, pt2, inputs, lower, tol, work, explain_ties=False):
    ir = work / "m.ir"
    onnx_path = work / "m.onnx"
    must([bin_dir / "pt2ir", pt2, "-o", ir])
    if lower:
        lowered = work / "m.core.ir"
        must([bin_dir / "ir-decompose", ir, "-o", lowered])
        ir = lowered
    must([bin_dir / "ir2onnx", ir, "--intermediates", "-o", onnx_path])
    feed = dict(np.load(inputs))
    names, arrays = ort_run.run(onnx_path, feed, as_torch=True)
    ort_npz = work / "ort.npz"
    with open(ort_npz, "wb") as f:
        np.savez(f, **dict(zip(names, arrays)))
    run_npz = work / "run.npz"
    must([bin_dir / "ir-run", ir, "--inputs", inputs, "--intermediates", run_npz, "-q"])
    tol_args = ["--atol", str(tol), "--rtol", str(tol)]
    rc, out = sh([bin_dir / "ir-diff", run_npz, ort_npz, "--first", *tol_args])
    cuts = []
    while rc != 0 and explain_ties and len(cuts) < 32:
        import onnx

        value = out.splitlines()[0].split(": ", 1)[-1].split(":")[0]
        model = onnx.load(str(onnx_path))
        with np.load(run_npz) as ran:
            ours = ran[value] if value in ran.files else None
        theirs = dict(zip(names, arrays)).get(value)
        if ours is None or theirs is None or not explained_tie(model, feed, value, ours, theirs, tol):
            break
        cuts.append(value)
        feed[value] = ours
        onnx.save(cut(model, value, ours), str(onnx_path))
        names, arrays = ort_run.run(onnx_path, feed, as_torch=True)
        with open(ort_npz, "wb") as f:
            np.savez(f, **dict(zip(names, arrays)))
        rc, out = sh([bin_dir / "ir-diff", run_npz, ort_npz, "--first", *tol_args])
    if rc != 0:
        return f"differs: {out.splitlines()[0]}" + (f" (after ties at {', '.join(cuts)})" if cuts else ""), None
    summary = out.splitlines()[0]
    if cuts:
        summary += f"; rounding ties fed through at {', '.join(cuts)}"
    # The control: a wrong node is found, and it is the one made wrong
    # (one with a finite value: NaN + 0.5 is still NaN).
    with np.load(run_npz) as ran:
        shared = [n for n in ran.files if n in set(names)
                  and (ran[n].dtype.kind != "f" or np.isfinite(ran[n]).any())]
    wrong = work / "wrong.onnx"
    target = perturb(onnx_path, shared, wrong)
    if target is None:
        return None, f"{summary}; no float value to perturb"
    names, arrays = ort_run.run(wrong, feed, as_torch=True)
    with open(ort_npz, "wb") as f:
        np.savez(f, **dict(zip(names, arrays)))
    rc, out = sh([bin_dir / "ir-diff", run_npz, ort_npz, "--first", *tol_args])
    first = out.splitlines()[0] if out else ""
    if rc != 1 or not first.split(": ", 1)[-1].startswith(f"{target}:"):
        return f"control: {target} made wrong, ir-diff --first exit {rc}: {first}", None
    return None, f"{summary}; control found {target}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--models", default="golden/models")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--skip", nargs="*", default=[], help="fixtures not to check (listed as skipped)")
    ap.add_argument("--explain-ties", action="store_true",
                    help="a rounding (QuantizeLinear, Round) where the two part on an input within the "
                         "tolerance is fed through, not failed (PT2E int8 models; see above)")
    args = ap.parse_args()
    bin_dir = Path(args.bin)
    models = Path(args.models)
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="check_intermediates-") as tmp:
        work = Path(tmp)
        for meta_path in sorted(models.glob("*.meta.json")):
            name = meta_path.name[: -len(".meta.json")]
            if args.only and name not in args.only:
                continue
            if name in args.skip:
                print(f"skip {name} (--skip)")
                continue
            meta = json.loads(meta_path.read_text())
            low = bool(meta.get("converted_outputs"))
            tol = 1e-2 if low else 1e-4
            for label, pt2, lower in (("training", models / f"{name}.pt2", False),
                                      ("aten", models / f"{name}.decomp.pt2", False),
                                      ("core", models / f"{name}.pt2", True)):
                if not pt2.exists():
                    continue
                try:
                    err, note = check(bin_dir, pt2, models / f"{name}.inputs.npz", lower, tol, work,
                                      args.explain_ties)
                except Exception as e:  # noqa: BLE001 - reported in the table
                    err, note = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}", None
                if err:
                    failed += 1
                    print(f"FAIL {name} {label}: {err}")
                else:
                    passed += 1
                    print(f"ok   {name} {label}: {note}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
