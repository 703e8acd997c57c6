#!/usr/bin/env python3
"""Checks ir2onnx against ONNX's checker and ONNX Runtime on the fixtures.

For every fixture NAME (NAME.pt2, the TRAINING dialect; NAME.decomp.pt2,
the ATEN dialect torch's run_decompositions() made; and NAME.pt2 lowered by
ir-decompose, shown as NAME.core) and every requested opset:

  pt2ir NAME.pt2 [| ir-decompose] | ir2onnx --opset N -o tmp.onnx
  onnx.checker.check_model(tmp.onnx, full_check=True)
  onnxruntime (CPU) on NAME.inputs.npz, compared with NAME.expected.npz

and the same with NAME.alt.inputs.npz / NAME.alt.expected.npz where the
fixture has them (the dynamic models at another size, the other cond
branch).

expected.npz holds out_0, out_1, ... for the graph's user outputs in order;
the model's user outputs are the graph outputs ir2onnx documents as
"user output" (a buffer mutation of the ATEN dialect is an extra output
that is not compared).

Tolerances, as data (the ir-run issue's): float32/float64 within atol 1e-4
and rtol 1e-4; integers and bools exactly. Outputs torch computed in float16
or bfloat16 (the fixture's meta lists them as converted_outputs, stored as
float32) compare at that dtype's precision: float16 within 1e-3, bfloat16
within 1e-2 (one unit in the last place of a value near 1 is 9.8e-4 and
7.8e-3): ONNX Runtime may round differently than torch in the last place.
PT2E int8 models (golden/quant): integers exactly, like every fixture; a
float output a per-tensor dequantize makes (the meta's quant_steps, by
output: that dequantize's scale) within the float32 tolerance plus one
step of that quantization. A value on a rounding tie goes either way under
float32 ulps (ONNX Runtime's int8 kernels and its summation orders differ
from torch's; its QuantizeLinear divides by the scale where torch
multiplies by its float32 reciprocal), and moves the output one step.
On a CPU without VNNI, ONNX Runtime's fused int8 kernels add u8 x s8
pairs in saturating 16-bit lanes and give other integers than torch's
(tens of steps on the X86 quantizer's fixtures): there the int8 models
run with the QDQ nodes as written (ORT_ENABLE_BASIC), and the table says
so.

Prints a table; the last line is "N passed, M failed". Exits 1 on any
failure.

  python recipes/checks/check_onnx.py --bin target/release --models golden/models [--opset N ...]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recipes.run import ort_run  # noqa: E402

TOLERANCE = {
    "float32": (1e-4, 1e-4),
    "float64": (1e-4, 1e-4),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
}
# PT2E int8 outputs: one quantization step more on atol, for the outputs
# the fixture's meta names in "quant_steps" (their dequantize's scale).
QUANT_STEPS = "quant_steps"


def convert(bin_dir, pt2, opset, out, decompose=False):
    pt2ir = subprocess.Popen([str(bin_dir / "pt2ir"), str(pt2)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    source = pt2ir.stdout
    lower = None
    if decompose:
        lower = subprocess.Popen([str(bin_dir / "ir-decompose"), "-q"], stdin=pt2ir.stdout,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pt2ir.stdout.close()
        source = lower.stdout
    conv = subprocess.run(
        [str(bin_dir / "ir2onnx"), "--opset", str(opset), "-o", str(out)],
        stdin=source,
        capture_output=True,
    )
    source.close()
    err = pt2ir.stderr.read().decode()
    pt2ir.wait()
    if pt2ir.returncode != 0:
        raise RuntimeError(f"pt2ir failed ({pt2ir.returncode}): {err.strip()}")
    if lower is not None:
        lerr = lower.stderr.read().decode()
        lower.wait()
        if lower.returncode != 0:
            raise RuntimeError(f"ir-decompose failed ({lower.returncode}): {lerr.strip()}")
    if conv.returncode != 0:
        raise RuntimeError(f"ir2onnx failed ({conv.returncode}): {conv.stderr.decode().strip()}")


def user_outputs(model):
    return [o.name for o in model.graph.output if o.doc_string.startswith("user output")]


def compare(name, got, want, torch_dtype, step=0.0):
    """An error message, or None when they match (`step`: a quantization
    step more on atol, for an output a PT2E model dequantizes)."""
    got = np.asarray(got)
    if got.dtype.name == "bfloat16" or torch_dtype == "bfloat16":
        got = got.astype(np.float32)
    if got.shape != want.shape:
        return f"{name}: shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "biu":
        if got.dtype != want.dtype:
            return f"{name}: dtype {got.dtype}, expected {want.dtype}"
        if not np.array_equal(got, want):
            bad = int(np.sum(got != want))
            return f"{name}: {bad} elements differ (exact dtype {want.dtype})"
        return None
    atol, rtol = TOLERANCE.get(torch_dtype or want.dtype.name, (1e-4, 1e-4))
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    if not np.allclose(g, w, atol=atol + step, rtol=rtol, equal_nan=True):
        diff = np.nanmax(np.abs(g - w)) if g.size else 0.0
        plus = f" + one quantization step {step:.3g}" if step else ""
        return f"{name}: max abs diff {diff:.3g} (atol {atol}{plus}, rtol {rtol})"
    return None


def max_diff(got, want):
    out = 0.0
    for g, w in zip(got, want):
        g = np.asarray(g)
        if g.size and w.dtype.kind == "f":
            out = max(out, float(np.nanmax(np.abs(g.astype(np.float64) - w.astype(np.float64)))))
    return out


def run_case(onnx_path, inputs_npz, expected_npz, converted, steps=None):
    import onnxruntime as ort

    import onnx

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    model = onnx.load(str(onnx_path), load_external_data=False)
    # a PT2E int8 model where ONNX Runtime's fused int8 kernels saturate:
    # its QDQ nodes as written (ort_run.exact_int8)
    ort_run.exact_int8(opts, model)
    names = user_outputs(model)
    # onnxruntime's Python API cannot return bfloat16 arrays: read those
    # outputs through a Cast to float32 added to a copy of the model.
    bf16 = {o.name for o in model.graph.output
            if o.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16 and o.name in names}
    # nor take bfloat16 inputs (ort_run.float32_inputs)
    model = onnx.load(str(onnx_path))
    bf16_in = ort_run.float32_inputs(model)
    if bf16:
        for name in sorted(bf16):
            model.graph.node.append(onnx.helper.make_node(
                "Cast", [name], [name + ".float32"], to=onnx.TensorProto.FLOAT))
            model.graph.output.append(onnx.helper.make_tensor_value_info(
                name + ".float32", onnx.TensorProto.FLOAT, None))
        names = [n + ".float32" if n in bf16 else n for n in names]
    if bf16 or bf16_in:
        sess = ort_run.session(model.SerializeToString(), opts)
    else:
        sess = ort_run.session(str(onnx_path), opts)
    inputs = {k: ort_run.feedable(v) for k, v in np.load(inputs_npz).items()}
    feed = {i.name: inputs[i.name] for i in sess.get_inputs()}
    got = sess.run(names, feed)
    expected = np.load(expected_npz)
    want = [expected[f"out_{i}"] for i in range(len(expected.files))]
    if len(got) != len(want):
        return f"{len(got)} user outputs, expected {len(want)}", 0.0
    errors = []
    for i, (g, w) in enumerate(zip(got, want)):
        e = compare(f"out_{i}", g, w, converted.get(f"out_{i}"), (steps or {}).get(f"out_{i}", 0.0))
        if e:
            errors.append(e)
    return ("; ".join(errors) or None), max_diff(got, want)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release", help="where pt2ir and ir2onnx are")
    ap.add_argument("--models", default="golden/models", help="the fixtures")
    ap.add_argument("--opset", type=int, action="append", help="opset to check (repeatable; default 18)")
    ap.add_argument("--only", nargs="*", help="fixture names to check")
    ap.add_argument("--skip", nargs="*", default=[],
                    help="fixture names not to check (each is listed as skipped; say why where you skip)")
    ap.add_argument("--variant", action="append", choices=["training", "decomp", "core"],
                    help="which graphs to check (repeatable; default all three)")
    ap.add_argument("--keep", help="keep the .onnx files in this directory")
    args = ap.parse_args()
    import onnx

    bin_dir = Path(args.bin)
    models = Path(args.models)
    opsets = args.opset or [18]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="check_onnx-"))
    work.mkdir(parents=True, exist_ok=True)

    rows = []
    passed = failed = 0
    skipped = []
    for meta_path in sorted(models.glob("*.meta.json")):
        name = meta_path.name[: -len(".meta.json")]
        if args.only and name not in args.only:
            continue
        if name in args.skip:
            skipped.append(name)
            continue
        meta = json.loads(meta_path.read_text())
        names = {"training": "", "decomp": ".decomp", "core": ".core"}
        for variant in [names[v] for v in (args.variant or ["training", "decomp", "core"])]:
            pt2 = models / f"{name}{'' if variant == '.core' else variant}.pt2"
            if not pt2.exists():
                continue
            dialect = {"": "TRAINING", ".decomp": "ATEN", ".core": "ir-decompose"}[variant]
            for opset in opsets:
                onnx_path = work / f"{name}{variant}.opset{opset}.onnx"
                cases = [("example", models / f"{name}.inputs.npz", models / f"{name}.expected.npz",
                          meta.get("converted_outputs", {}))]
                for key in ("alt", "alt2"):
                    alt_in = models / f"{name}.{key}.inputs.npz"
                    if alt_in.exists():
                        cases.append((key, alt_in, models / f"{name}.{key}.expected.npz",
                                      meta.get(f"{key}_converted_outputs", {})))
                stage = "convert"
                try:
                    convert(bin_dir, pt2, opset, onnx_path, decompose=variant == ".core")
                    stage = "checker"
                    onnx.checker.check_model(str(onnx_path), full_check=True)
                    setup_error = None
                except Exception as e:  # noqa: BLE001 - reported in the table
                    setup_error = f"{stage}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}"
                for label, inputs, expected, converted in cases:
                    if setup_error:
                        status, detail, diff = "FAIL", setup_error, ""
                    else:
                        try:
                            before = len(ort_run.retried)
                            err, d = run_case(onnx_path, inputs, expected, converted,
                                              meta.get(QUANT_STEPS, {}))
                            status, detail, diff = ("FAIL", err, f"{d:.2e}") if err else ("ok", "", f"{d:.2e}")
                            if len(ort_run.retried) > before and not err:
                                detail = "ORT's QDQ propagation disabled (ort_run.ORT_QDQ_BUG)"
                            elif not err and not ort_run.exact_int8_kernels() and ort_run.is_int8(onnx.load(
                                    str(onnx_path), load_external_data=False)):
                                detail = "QDQ as written: this CPU has no VNNI (ort_run.exact_int8_kernels)"
                        except Exception as e:  # noqa: BLE001
                            msg = str(e).strip().splitlines()
                            status, detail, diff = "FAIL", f"onnxruntime: {msg[0] if msg else type(e).__name__}", ""
                    if status == "ok":
                        passed += 1
                    else:
                        failed += 1
                    rows.append((f"{name}{variant}", dialect, str(opset), label, status, diff, detail))

    header = ("fixture", "dialect", "opset", "inputs", "status", "max|diff|", "detail")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header) - 1)]
    for r in [header] + rows:
        line = "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths))
        print(f"{line}  {r[-1]}".rstrip())
    if not args.keep:
        for f in work.iterdir():
            f.unlink()
        work.rmdir()
    if skipped:
        print(f"not checked (--skip): {', '.join(skipped)}")
    print(f"{passed} passed, {failed} failed" + (f", {len(skipped)} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
