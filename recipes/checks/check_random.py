#!/usr/bin/env python3
"""Runs the random programs of golden/random/ through pt2kit, in three stages.

golden/random/ holds programs recipes/checks/fuzz_graphs.py generated (chains of
views feeding compute ops, mixed dtypes, broadcasting), each kept only when
torch eager ran it and torch.export reproduced eager's outputs:

  NAME.pt2     torch.export.save of the program (members re-deflated, to keep the set small)
  NAME.npz     in:<input name> the inputs, in signature order;
               out:<k> torch eager's outputs (under no_grad), k = 0, 1, ...
  manifest.json  per program: inputs, outputs (dtype, shape), the op labels,
               and the module's Python source (to rebuild it with torch)

For every program and stage (the stage letters are fuzz_graphs.py's):

  B  pt2ir NAME.pt2 | ir-run                        (the program as exported)
  C  pt2ir NAME.pt2 | ir-decompose | ir-run         (lowered to core ATen first)
  D  pt2ir NAME.pt2 | ir2onnx --opset 18 | onnx.checker | ONNX Runtime (CPU)

and compares each output with torch's by position: the same shape and
dtype, float32/float64 within atol = rtol = 1e-4, float16 within 1e-2 of
the larger of 1 and the output's largest magnitude (an output computed
by a chain of float16 ops may round differently in the last place at
every op; so are float32 outputs computed from float16 values, marked
"tolerance": "float16" in the manifest), integers and bools exactly; NaNs
must be where torch has them.

Only numpy, onnx and onnxruntime are needed (no torch). Prints one line
per failure, a summary per stage, and a closing line "N passed, M failed"
(a program passes when all three stages do); exits 1 on any failure.

  python recipes/checks/check_random.py --bin target/release [--dir golden/random] [--only NAME ...] [--stages BCD] [-j N]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

STAGES = {
    "B": "ir-run",
    "C": "ir-decompose + ir-run",
    "D": "ir2onnx opset 18 + onnxruntime",
}
OPSET = 18
TIMEOUT_S = 120


class StageError(Exception):
    """A stage did not produce outputs: `key` groups failures of one kind."""

    def __init__(self, key, message):
        super().__init__(message)
        self.key = key
        self.message = message


def normalize(message):
    """A failure message with its program-specific parts (node and value
    names, numbers, shapes) replaced, so that failures of one kind group."""
    lines = message.strip().splitlines() or ["(no message)"]
    line = lines[0]
    if "panicked at" in line and len(lines) > 1:
        line = f"panicked: {lines[1]}"
    elif line.endswith(":") and len(lines) > 1:
        # ir2onnx's list of the nodes it cannot convert: the ops and reasons
        reasons = sorted({re.sub(r"^node '[^']*' ", "", x.strip()) for x in lines[1:] if x.strip().startswith("node ")})
        line = line.split(";")[0] + ": " + "; ".join(reasons)
    line = re.sub(r"^(\S+): \1: ", r"\1: ", line)
    line = re.sub(r"(?<![\w.])/[^\s:'\"]*", "PATH", line)
    line = re.sub(r"`[^`]*`", "`_`", line)
    line = re.sub(r"'[^']*'", "'_'", line)
    line = re.sub(r"\[[-0-9, ]*\]", "[..]", line)
    line = re.sub(r"\b[a-z_]+_\d+\b", "NAME", line)
    line = re.sub(r"\d+", "N", line)
    return line[:200]


def headline(message, width=400):
    """A failure message on one line: its first line, and the line after
    it where that says what (a panic's message, the nodes ir2onnx lists)."""
    lines = [line.strip() for line in message.strip().splitlines()]
    if not lines:
        return ""
    out = lines[0]
    if "panicked at" in out or out.endswith(":"):
        out += " " + " | ".join(line for line in lines[1:4] if line and not line[0].isdigit()
                                 and line != "stack backtrace:")
    return out[:width]


def _tool(bin_dir, name, args, stdin=None):
    """Runs one tool; raises StageError with its message when it fails."""
    try:
        p = subprocess.run([str(bin_dir / name), *args], stdin=stdin, capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise StageError(f"{name}: timeout", f"{name}: no result after {TIMEOUT_S} s") from None
    if p.returncode != 0:
        err = p.stderr.decode(errors="replace").strip()
        if p.returncode < 0:
            err = f"killed by signal {-p.returncode}: {err[-500:]}"
        key = normalize(err)
        raise StageError(key if key.startswith(name) else f"{name}: {key}", f"{name} (exit {p.returncode}): {err}")
    return p


def _read_npz(path):
    with np.load(path) as z:
        return [z[k] for k in z.files]


def _is_bf16(a):
    """bfloat16 as numpy holds it: ml_dtypes' dtype, or its '<V2' in an .npz."""
    return a.dtype.name == "bfloat16" or (a.dtype.kind == "V" and a.dtype.itemsize == 2)


def _bf16_values(a):
    return (np.array(a, order="C").view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(a.shape)


def compare(got, want, loose=False):
    """None when `got` matches `want` (torch's), else (kind, message).
    `loose`: a float output computed from float16 values (float16's
    tolerance); "bfloat16" for one computed from bfloat16 values (8 times
    float16's: bfloat16 has 3 fewer bits). bfloat16 outputs compare at that
    tolerance too; the tools write them as float32 (exactly), so a float32
    array stands for a bfloat16 one."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return "shape", f"shape {list(got.shape)}, expected {list(want.shape)}"
    if _is_bf16(want):
        if not (_is_bf16(got) or got.dtype == np.float32):
            return "dtype", f"dtype {got.dtype}, expected bfloat16"
        want = _bf16_values(want)
        got = _bf16_values(got) if _is_bf16(got) else got
        loose = "bfloat16"
    elif got.dtype != want.dtype:
        return "dtype", f"dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind in "biu":
        if not np.array_equal(got, want):
            bad = int(np.sum(got != want))
            return "values", f"{bad} of {want.size} elements differ (exact dtype {want.dtype})"
        return None
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    if want.dtype == np.float16 or loose:
        scale = max(1.0, float(np.nanmax(np.abs(w[np.isfinite(w)]))) if np.isfinite(w).any() else 1.0)
        atol, rtol = 1e-2 * scale, 1e-2
        if loose == "bfloat16":
            atol, rtol = 8e-2 * scale, 8e-2
    else:
        atol, rtol = 1e-4, 1e-4
    if np.array_equal(np.isnan(g), np.isnan(w)) and np.allclose(g, w, atol=atol, rtol=rtol, equal_nan=True):
        return None
    with np.errstate(invalid="ignore"):
        d = np.abs(g - w)
    worst = float(np.nanmax(d)) if d.size and not np.isnan(d).all() else float("nan")
    return "values", f"max abs diff {worst:.3g} (atol {atol:.3g}, rtol {rtol:g})"


def compare_all(got, want, loose=None):
    if len(got) != len(want):
        return "count", f"{len(got)} outputs, expected {len(want)}"
    errors = []
    kind = None
    for i, (g, w) in enumerate(zip(got, want)):
        e = compare(g, w, bool(loose and loose[i]))
        if e:
            kind = kind or e[0]
            errors.append(f"out {i}: {e[1]}")
    return (kind, "; ".join(errors)) if errors else None


def _onnx_outputs(onnx_path, names, inputs):
    import onnxruntime as ort

    import onnx

    try:
        onnx.checker.check_model(str(onnx_path), full_check=True)
    except Exception as e:  # noqa: BLE001 - the failure is the result
        msg = str(e).strip()
        raise StageError(f"onnx.checker: {normalize(msg)}", f"onnx.checker: {msg}") from None
    model = onnx.load(str(onnx_path))
    users = [o.name for o in model.graph.output if o.doc_string.startswith("user output")]
    # onnxruntime's Python API takes and returns no bfloat16 arrays: through
    # float32 (ort_run.py), exactly
    from recipes.run import ort_run
    bf16_in = ort_run.float32_inputs(model)
    bf16_out = [o.name for o in model.graph.output
                if o.name in users and o.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16]
    for name in bf16_out:
        model.graph.node.append(onnx.helper.make_node("Cast", [name], [name + ".float32"],
                                                      to=onnx.TensorProto.FLOAT))
        model.graph.output.append(onnx.helper.make_tensor_value_info(name + ".float32", onnx.TensorProto.FLOAT,
                                                                     None))
    users = [n + ".float32" if n in bf16_out else n for n in users]
    source = model.SerializeToString() if (bf16_in or bf16_out) else str(onnx_path)
    ort.set_default_logger_severity(4)
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    try:
        sess = ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
        feed = {i.name: ort_run.feedable(inputs[i.name]) for i in sess.get_inputs()}
        return sess.run(users, feed)
    except Exception as e:  # noqa: BLE001
        msg = str(e).strip()
        raise StageError(f"onnxruntime: {normalize(msg)}", f"onnxruntime: {msg}") from None


def run_stages(bin_dir, pt2, names, inputs, expected, work, stages="BCD", loose=None):
    """Runs the stages on one program. `inputs` maps each user input name
    to its array (in `names` order), `expected` lists torch's outputs,
    `loose` which of them are float results computed from float16 values.
    Returns {stage: None (passed) or (key, message)}."""
    bin_dir = Path(bin_dir)
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    stem = Path(pt2).name[: -len(".pt2")]
    ir = work / f"{stem}.ir"
    in_npz = work / f"{stem}.inputs.npz"
    np.savez(in_npz, **{n: inputs[n] for n in names})
    result = {}
    try:
        _tool(bin_dir, "pt2ir", [str(pt2), "-o", str(ir)])
        imported = None
    except StageError as e:
        imported = e

    def ir_run(program, out):
        _tool(bin_dir, "ir-run", [str(program), "--inputs", str(in_npz), "-o", str(out)])
        return _read_npz(out)

    for stage in stages:
        try:
            if imported:
                raise imported
            if stage == "B":
                got = ir_run(ir, work / f"{stem}.B.npz")
            elif stage == "C":
                core = work / f"{stem}.core.ir"
                _tool(bin_dir, "ir-decompose", [str(ir), "-q", "-o", str(core)])
                got = ir_run(core, work / f"{stem}.C.npz")
            elif stage == "D":
                onnx_path = work / f"{stem}.onnx"
                _tool(bin_dir, "ir2onnx", [str(ir), "--opset", str(OPSET), "-o", str(onnx_path)])
                got = _onnx_outputs(onnx_path, names, inputs)
            else:
                raise ValueError(stage)
            bad = compare_all(got, expected, loose)
            result[stage] = (f"mismatch: {bad[0]}", bad[1]) if bad else None
        except StageError as e:
            result[stage] = (e.key, e.message)
    for f in [ir, in_npz, *(work / f"{stem}{ext}" for ext in (".core.ir", ".onnx", ".B.npz", ".C.npz"))]:
        if f.exists():
            f.unlink()
    return result


def load_case(directory, name):
    with np.load(directory / f"{name}.npz") as z:
        inputs = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
        outs = sorted((int(k[4:]), z[k]) for k in z.files if k.startswith("out:"))
    return inputs, [a for _, a in outs]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release", help="where pt2ir, ir-run, ir-decompose and ir2onnx are")
    ap.add_argument("--dir", default="golden/random", help="the programs and their manifest.json")
    ap.add_argument("--only", nargs="*", help="program names to check")
    ap.add_argument("--stages", default="BCD", help="which stages to run (default BCD)")
    ap.add_argument("-j", "--jobs", type=int, default=max(2, os.cpu_count() or 2), help="programs checked at once")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every program, not only failures")
    args = ap.parse_args()

    directory = Path(args.dir)
    manifest = json.loads((directory / "manifest.json").read_text())
    programs = [p for p in manifest["programs"] if not args.only or p["name"] in args.only]
    if args.only:
        missing = sorted(set(args.only) - {p["name"] for p in programs})
        if missing:
            ap.error(f"no such program(s): {', '.join(missing)}")
    stages = [s for s in args.stages.upper() if s in STAGES]
    work = Path(tempfile.mkdtemp(prefix="check_random-"))
    started = time.monotonic()

    def one(p):
        inputs, expected = load_case(directory, p["name"])
        names = [i["name"] for i in p["inputs"]]
        loose = [o.get("tolerance") if o.get("tolerance") in ("float16", "bfloat16") else False
                 for o in p["outputs"]]
        return p["name"], run_stages(args.bin, directory / f"{p['name']}.pt2", names, inputs, expected, work,
                                     stages, loose)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(one, programs))
    try:
        work.rmdir()
    except OSError:
        pass

    passed = failed = 0
    per_stage = {s: [0, 0] for s in stages}
    for name, res in results:
        bad = {s: r for s, r in res.items() if r}
        for s in stages:
            per_stage[s][1 if res[s] else 0] += 1
        if bad:
            failed += 1
            for s, (_key, msg) in bad.items():
                print(f"FAIL {name} {s} ({STAGES[s]}): {headline(msg)}")
        else:
            passed += 1
            if args.verbose:
                print(f"ok   {name}")
    for s in stages:
        print(f"stage {s} ({STAGES[s]}): {per_stage[s][0]} passed, {per_stage[s][1]} failed")
    print(f"{len(results)} programs in {time.monotonic() - started:.1f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
