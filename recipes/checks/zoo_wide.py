#!/usr/bin/env python3
"""The wide zoo: models from outside the repo through every pt2kit tool.

For each model of recipes/fixtures/zoo_wide_models.py (torchvision, transformers,
torch.nn modules, torch's ExportDB examples; random weights, nothing
downloaded) this exports with torch.export.export, saves with
torch.export.save, records torch's eager outputs (eval mode, no_grad), then
checks four stages, each a subprocess of the real binaries with a timeout:

  A  pt2ir model.pt2 -o model.ir                           succeeds
  B  ir-run model.ir --inputs inputs.npz -o out.npz       matches eager
  C  ir-decompose model.ir -o core.ir; ir-run core.ir     matches eager
  D  ir2onnx model.ir --opset 18 -o model.onnx; onnx.checker.check_model(full_check=True);
     ONNX Runtime (CPU) matches eager (run by --onnx-python, in its own process)

The ts family (TorchScript, recipes/fixtures/zoo_ts_models.py) is made with
torch.jit.trace / script / freeze instead and saved with torch.jit.save; its
expected outputs are the archive's reloaded with torch.jit.load, and its stage
A is `ts2ir model.pt --example-inputs example.npz -o model.ir` (B, C and D on
the program's user inputs, which ts2ir's listing names). It runs in float32
only.

Outputs are compared by position with torch's pytree-flattened eager
outputs: float32 within atol 1e-4 and rtol 1e-4, integers and bools exactly
(recipes/checks/check_onnx.py's compare()). B, C and D need A; they do not need each
other.

--dtype float16 / bfloat16 runs the same zoo in half precision: each model
is built as above (eval mode), cast with `model.to(dtype)`, and its floating
inputs are cast likewise (integer and bool inputs are kept). Torch's eager
outputs in that dtype are the expected outputs. Half-precision models
accumulate rounding layer after layer, differently in any two correct
implementations, so the comparison also measures torch's own error budget:
the same (cast) model is upcast with `.float()` and run in float32 eager on
the same inputs upcast (so only the arithmetic differs, not the weights),
and per output

    budget = max |eager_half - eager_f32|   (over elements finite in both)

An output of a stage passes when every element satisfies

    |ours - eager_half| <= max(tol, 2 * budget + tol),  tol = atol + rtol * |eager_half|

(that is, 2 * budget + tol), with the torch.testing.assert_close defaults of
the output's dtype: float16 atol 1e-5 rtol 1e-3, bfloat16 atol 1e-5 rtol
1.6e-2 (float32/float64 outputs of a half model: the zoo's atol 1e-4 rtol
1e-4, plus the budget). NaN must be NaN where torch's is, and an infinity
the same infinity, except at elements where torch's half and float32 runs
disagree on being finite (a half-precision overflow): those are not checked,
and are counted in results_<dtype>.json (`unchecked`). Integers and bools
match exactly; where torch's own float32 run gives another integer than its
half run (argmax over a near tie), either of torch's two values is accepted.
Models that torch itself cannot build, run or export in that dtype are
skipped with torch's error ("torch refused"). Inputs are written to .npz as
numpy holds them, bfloat16 as ml_dtypes writes it (descr '<V2', which the
tools read as bfloat16); torch's float32 outputs go to reference.npz beside
expected.npz. Every failed stage is classified: `wrong` (the tool exited 0
with a number outside the bound: the failure that matters), `refused` (the
tool exited non-zero with a message), `timeout`, `crashed` (killed by a
signal), `invalid_onnx` (ir2onnx exited 0 but ONNX's checker or ONNX Runtime
rejected the file). The report and results go to REPORT_<dtype>.md and
results_<dtype>.json (REPORT.md and results.json for float32).

Exports run in a long-lived worker process (torch imported once) with a
per-model timeout; a worker that hangs or dies is killed and replaced, and
the model is recorded as failed. While the worker exports the next model, a
thread runs the stages of the previous one.

Writes --out/REPORT.md (a table per family, every failure with its stage and
the first line of its error) and --out/results.json. Models, IR, ONNX files
and logs stay in --scratch (git-ignored). With --only or --family, the named
models are rerun and merged into an existing results.json.

  .venv/bin/python recipes/checks/zoo_wide.py [--only NAME ...] [--family F ...]
      [--dtype float32|float16|bfloat16] [--prune]
      [--bin target/release] [--onnx-python .venv-onnx/bin/python]
      [--out golden/zoo] [--scratch zoo-scratch]

Internal modes: --worker (the export worker), --ort-check (stage D's
checker and ONNX Runtime run; needs only numpy, onnx and onnxruntime).
"""

import argparse
import collections
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

EXPORT_TIMEOUT = 600
TOOL_TIMEOUT = 300

DTYPES = ("float32", "float16", "bfloat16")
# torch.testing.assert_close's defaults for the half dtypes; float32 and
# float64 outputs at the zoo's float32 tolerance. (atol, rtol)
HALF_TOLERANCE = {"float16": (1e-5, 1e-3), "bfloat16": (1e-5, 1.6e-2),
                  "float32": (1e-4, 1e-4), "float64": (1e-4, 1e-4)}


def report_names(dtype):
    """(REPORT file, results file) of a dtype: the float32 ones keep their names."""
    if dtype == "float32":
        return "REPORT.md", "results.json"
    return f"REPORT_{dtype}.md", f"results_{dtype}.json"


def first_line(text):
    """The first line of an error: the first line naming an error, else the first non-empty one."""
    raw = [ln.rstrip() for ln in (text or "").splitlines() if ln.strip()]
    for i, ln in enumerate(raw):
        if re.search(r"error|Error|panicked|exception", ln):
            ln = ln.strip()
            if "panicked at" in ln and i + 1 < len(raw):
                # a Rust panic: the message is on the next line
                ln = f"{ln} {raw[i + 1].strip()}"
            elif ln.endswith(":"):
                # an indented list follows (ir2onnx: one line per node): its distinct
                # reasons, node names dropped
                items = []
                for more in raw[i + 1:]:
                    if not more.startswith((" ", "\t")):
                        break
                    more = re.sub(r"^node '[^']*' ", "", more.strip())
                    if more not in items:
                        items.append(more)
                ln = ln + " " + "; ".join(items)
            return ln[:400]
    return raw[0].strip()[:400] if raw else ""


# --------------------------------------------------------------------------
# Export worker (torch)
# --------------------------------------------------------------------------


def _flatten(out):
    import torch.utils._pytree as pytree
    return pytree.tree_leaves(out)


def _max_diff(a_leaves, b_leaves):
    import torch
    if len(a_leaves) != len(b_leaves):
        return f"{len(b_leaves)} outputs, eager {len(a_leaves)}"
    worst = 0.0
    for a, b in zip(a_leaves, b_leaves):
        if isinstance(a, torch.Tensor):
            if a.shape != b.shape:
                return f"shape {tuple(b.shape)}, eager {tuple(a.shape)}"
            if a.dtype == torch.bool or not a.is_floating_point():
                if not torch.equal(a, b):
                    return "integer outputs differ"
            elif a.numel():
                worst = max(worst, (a.double() - b.double()).abs().nan_to_num(0.0).max().item())
        elif a != b:
            return f"value {b!r}, eager {a!r}"
    return worst


def _to_numpy(x, converted, key):
    import numpy as np
    import torch
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype in (torch.bfloat16, torch.float16):
            converted[key] = str(x.dtype).replace("torch.", "")
            x = x.float()
        return x.contiguous().numpy()
    return np.asarray(x)


def _clone(tree):
    import torch
    import torch.utils._pytree as pytree
    return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, tree)


def _cast_floats(tree, dtype):
    """Every floating tensor of a pytree cast to dtype; the rest as they are."""
    import torch
    import torch.utils._pytree as pytree
    return pytree.tree_map(
        lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t, tree)


def _input_array(t):
    """An input as numpy holds it: bfloat16 as ml_dtypes writes it (the npy
    dtype '<V2', which the tools read as bfloat16; recipes/fixtures/zoo.py)."""
    import torch
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _write_set(ep, inputs, eager, d, suffix, reference=None):
    """Writes one input set and torch's outputs for it (inputs{suffix}.npz,
    expected{suffix}.npz): user inputs in signature order, paired with the
    flattened (args, kwargs); with `reference` (torch's float32 run of a
    half-precision model), reference{suffix}.npz too. Returns (input shapes,
    inputs not given, converted outputs)."""
    import numpy as np
    import torch
    import torch.utils._pytree as pytree
    from torch.export._tree_utils import reorder_kwargs
    from torch.export.graph_signature import InputKind

    a0, k0 = inputs
    leaves = pytree.tree_leaves((a0, reorder_kwargs(k0, ep.call_spec.in_spec) if k0 else {}))
    specs = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    arrays = collections.OrderedDict()
    skipped = []
    if len(leaves) != len(specs):
        raise RuntimeError(f"{len(leaves)} input leaves for {len(specs)} user inputs")
    for s, leaf in zip(specs, leaves):
        arg_name = getattr(s.arg, "name", None)
        if isinstance(leaf, torch.Tensor) and arg_name:
            arrays[arg_name] = _input_array(leaf)
        elif isinstance(leaf, (int, float, bool)) and arg_name and type(s.arg).__name__.startswith("Sym"):
            arrays[arg_name] = np.asarray(leaf)
        else:
            skipped.append(f"{arg_name or '?'}={leaf!r}"[:80])
    np.savez(d / f"inputs{suffix}.npz", **arrays)
    converted = {}
    expected = collections.OrderedDict()
    for i, leaf in enumerate(eager):
        expected[f"out_{i}"] = _to_numpy(leaf, converted, f"out_{i}")
    np.savez(d / f"expected{suffix}.npz", **expected)
    if reference is not None:
        if len(reference) != len(eager):
            raise RuntimeError(f"float32 run: {len(reference)} outputs, {len(eager)} in the half run")
        ref = collections.OrderedDict()
        for i, leaf in enumerate(reference):
            ref[f"out_{i}"] = _to_numpy(leaf, {}, f"out_{i}")
        np.savez(d / f"reference{suffix}.npz", **ref)
    shapes = {k: f"{'bfloat16' if v.dtype.kind == 'V' else v.dtype}{list(v.shape)}" for k, v in arrays.items()}
    return shapes, skipped, converted


def torch_budget(expected_npz, reference_npz):
    """Per output: torch's own error, max |eager_half - eager_f32| over the
    elements finite in both, and how many elements are finite in one only."""
    import numpy as np
    e, r = np.load(expected_npz), np.load(reference_npz)
    out = []
    for k in e.files:
        w, f = e[k], r[k]
        if w.dtype.kind != "f" or w.shape != f.shape:
            out.append({"output": k, "int_differ": int((w != f).sum()) if w.shape == f.shape else None})
            continue
        w, f = _as_f64(w), _as_f64(f)
        both = np.isfinite(w) & np.isfinite(f)
        out.append({"output": k, "budget": float(np.abs(w[both] - f[both]).max()) if both.any() else 0.0,
                    "max_abs": float(np.abs(w[both]).max()) if both.any() else 0.0,
                    "unchecked": int((np.isfinite(w) != np.isfinite(f)).sum()),
                    "nonfinite": int((~np.isfinite(w)).sum())})
    return out


def export_one(name, scratch, dtype="float32"):
    """Builds, runs eagerly and exports one model into scratch/NAME/. Returns a
    JSON-able dict: status ok, or the torch-side stage that failed. With a
    half dtype, the model and its floating inputs are cast first, and torch's
    float32 run of the cast model (upcast) is recorded as the reference."""
    import copy

    import numpy as np
    import torch
    from torch.export.graph_signature import OutputKind

    from recipes.fixtures import zoo_wide_models as Z

    d = Path(scratch) / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    res = {"name": name, "family": Z.REGISTRY[name].family}
    t0 = time.time()
    if res["family"] == "ts":
        return export_ts(name, d, res, t0)
    stage = "build"
    try:
        model, args, kwargs, dyn, config = Z.build(name)
        res["config"] = config
        res["params"] = Z.nparams(model)
        half = dtype != "float32"
        tdt = getattr(torch, dtype)
        if half:
            stage = "cast"
            model = model.to(tdt)
            args, kwargs = _cast_floats((args, kwargs), tdt)
        pristine = copy.deepcopy(model)
        inputs_orig = _clone((args, kwargs))

        stage = "eager"
        with torch.no_grad():
            eager = _flatten(copy.deepcopy(pristine)(*_clone(args), **_clone(kwargs)))
        reference = None
        if half:
            # torch's own error budget: the same (cast) weights and inputs, upcast, in float32
            stage = "eager_float32"
            upcast = copy.deepcopy(pristine).to(torch.float32)

            def ref_run(a, k):
                with torch.no_grad():
                    return _flatten(upcast(*_cast_floats(_clone(a), torch.float32),
                                           **_cast_floats(_clone(k), torch.float32)))
            reference = ref_run(args, kwargs)

        stage = "export"
        t1 = time.time()
        variant = Z.REGISTRY[name].variant or ""
        how = {}
        if variant == "strict":
            how["strict"] = True
        if variant.startswith("preserve:"):
            how["preserve_module_call_signature"] = (variant.split(":", 1)[1],)
        ep = torch.export.export(copy.deepcopy(pristine), _clone(args), _clone(kwargs), dynamic_shapes=dyn,
                                 **how)
        if variant == "decomposed":
            ep = ep.run_decompositions()
        res["export_s"] = round(time.time() - t1, 2)

        stage = "save"
        pt2 = d / "model.pt2"
        extra = {"README.txt": "made by recipes/checks/zoo_wide.py", "config.json": json.dumps({"name": name})} \
            if variant == "extra_files" else None
        torch.export.save(ep, str(pt2), extra_files=extra)
        res["pt2_bytes"] = pt2.stat().st_size

        stage = "inputs"
        res["inputs"], skipped, converted = _write_set(ep, inputs_orig, eager, d, "", reference)
        if skipped:
            res["inputs_not_given"] = skipped  # constants baked into the graph
        res["outputs"] = [f"{v.dtype}{list(v.shape)}" for v in np.load(d / "expected.npz").values()]
        if half:
            res["budget"] = torch_budget(d / "expected.npz", d / "reference.npz")
        res["converted_outputs"] = converted
        res["user_outputs"] = sum(1 for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT)
        # the other sizes of a dynamic entry: inputs_N.npz, expected_N.npz
        stage = "other sizes"
        res["sizes"] = Z.REGISTRY[name].sizes
        for i in range(1, res["sizes"]):
            _, a_i, k_i, _, _ = Z.build(name, i)
            if half:
                a_i, k_i = _cast_floats((a_i, k_i), tdt)
            with torch.no_grad():
                eager_i = _flatten(copy.deepcopy(pristine)(*_clone(a_i), **_clone(k_i)))
            ref_i = ref_run(a_i, k_i) if half else None
            shapes, _, conv_i = _write_set(ep, (a_i, k_i), eager_i, d, f"_{i}", ref_i)
            res[f"inputs_{i}"] = shapes
            if conv_i != converted:
                raise RuntimeError(f"outputs at size {i} convert differently ({conv_i} vs {converted})")

        nodes = [n for n in ep.graph.nodes if n.op == "call_function"]
        res["nodes"] = len(nodes)

        # torch's own fidelity: the exported program against eager
        stage = "ep.module()"
        try:
            with torch.no_grad():
                got = _flatten(ep.module()(*_clone(args), **_clone(kwargs)))
            res["torch_ep_vs_eager"] = _max_diff(eager, got)
        except Exception as e:  # noqa: BLE001 - recorded; does not stop the checks
            res["torch_ep_vs_eager"] = f"ep.module() failed: {first_line(str(e)) or type(e).__name__}"
        res["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - torch's (or the model's) failure, recorded
        res["status"] = f"{stage}_failed"
        msg = f"{type(e).__name__}: {str(e).strip()}"
        res["error"] = first_line(msg.splitlines()[0] if msg.strip() else type(e).__name__) or type(e).__name__
        (d / "export_error.txt").write_text(traceback.format_exc())
    res["worker_s"] = round(time.time() - t0, 2)
    (d / "export.json").write_text(json.dumps(res, indent=1) + "\n")
    return res


def _ts_leaves(out):
    """A TorchScript module's outputs flattened as torch.export's pytree
    flattens them (tuples, named tuples and lists in order, dicts by their
    values in order, None dropped): its NamedTuple classes are not pytree
    nodes, so this walks them itself."""
    import torch
    if out is None:
        return []
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [leaf for item in out for leaf in _ts_leaves(item)]
    if isinstance(out, dict):
        return [leaf for item in out.values() for leaf in _ts_leaves(item)]
    return [out]


def export_ts(name, d, res, t0):
    """The ts family: builds the model, makes TorchScript of it as the entry's
    variant says (torch.jit.trace / script / freeze), saves it with
    torch.jit.save, reloads it with torch.jit.load and records its outputs
    (no_grad) as the expected ones. Writes model.pt, example.npz (every forward
    argument by name, numbers as 0-d arrays; None left out: ts2ir's
    --example-inputs) and expected.npz; stage A writes inputs.npz, the
    tensors ir-run takes."""
    import numpy as np
    import torch

    from recipes.fixtures import zoo_wide_models as Z

    variant = Z.REGISTRY[name].variant
    stage = "build"
    try:
        model, args, kwargs, _, config = Z.build(name)
        res["config"] = config
        res["params"] = Z.nparams(model)
        stage = "eager"
        with torch.no_grad():
            eager = _ts_leaves(model(*_clone(args)))
        stage = variant
        if variant in ("trace", "freeze_trace"):
            ts = torch.jit.trace(model, _clone(args), check_trace=False)
        else:
            ts = torch.jit.script(model)
        if variant.startswith("freeze"):
            ts = torch.jit.freeze(ts.eval())
        stage = "save"
        pt = d / "model.pt"
        torch.jit.save(ts, str(pt))
        res["pt_bytes"] = pt.stat().st_size
        stage = "load"
        loaded = torch.jit.load(str(pt))
        with torch.no_grad():
            expected = _ts_leaves(loaded(*_clone(args)))
        res["torch_ep_vs_eager"] = _max_diff(eager, expected)
        stage = "inputs"
        names = [a.name for a in loaded.forward.schema.arguments[1:]]
        example = collections.OrderedDict()
        for n, v in zip(names, args):
            if v is None:
                continue
            example[n] = _input_array(v) if isinstance(v, torch.Tensor) else np.asarray(v)
        np.savez(d / "example.npz", **example)
        res["inputs"] = {k: f"{v.dtype}{list(v.shape)}" for k, v in example.items()}
        converted = {}
        np.savez(d / "expected.npz", **{f"out_{i}": _to_numpy(t, converted, f"out_{i}")
                                        for i, t in enumerate(expected)})
        res["outputs"] = [f"{v.dtype}{list(v.shape)}" for v in np.load(d / "expected.npz").values()]
        res["converted_outputs"] = converted
        res["sizes"] = 1
        res["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - torch's (or the model's) failure, recorded
        res["status"] = f"{stage}_failed"
        msg = f"{type(e).__name__}: {str(e).strip()}"
        res["error"] = first_line(msg.splitlines()[0] if msg.strip() else type(e).__name__) or type(e).__name__
        (d / "export_error.txt").write_text(traceback.format_exc())
    res["worker_s"] = round(time.time() - t0, 2)
    (d / "export.json").write_text(json.dumps(res, indent=1) + "\n")
    return res


def ts_user_inputs(listing):
    """The user inputs of a ts2ir listing (`--emit text`), in order."""
    names, inside = [], False
    for line in Path(listing).read_text().splitlines():
        if line == "inputs:":
            inside = True
        elif inside and not line.startswith("  "):
            break
        elif inside:
            m = re.match(r"^\s+%(\S+)\s+user input", line)
            if m:
                names.append(m.group(1))
    return names


def worker_main(scratch, dtype="float32"):
    # Results go to the original stdout; everything torch prints goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import torch
    torch.set_num_threads(1)
    from recipes.fixtures import zoo_wide_models  # noqa: F401 - the registry, once
    out.write("READY\n")
    out.flush()
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        print(f"=== {name}", file=sys.stderr, flush=True)
        res = export_one(name, scratch, dtype)
        out.write(json.dumps(res) + "\n")
        out.flush()
        import gc
        gc.collect()


class Exporter:
    """A long-lived worker process; restarted after a timeout or a crash."""

    def __init__(self, python, scratch, log, dtype="float32"):
        self.python, self.scratch, self.log, self.dtype = python, scratch, log, dtype
        self.proc = None

    def start(self):
        logf = open(self.log, "a")
        self.proc = subprocess.Popen(
            [self.python, str(Path(__file__).resolve()), "--worker", "--scratch", str(self.scratch),
             "--dtype", self.dtype],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logf, text=True, cwd=ROOT,
            start_new_session=True)
        logf.close()
        line = self._readline(300)
        if line != "READY":
            self.kill()
            raise RuntimeError(f"export worker did not start (see {self.log})")

    def _readline(self, timeout):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return None
        return self.proc.stdout.readline().strip()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None

    def export(self, name, timeout):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        line = self._readline(timeout)
        if line:
            return json.loads(line)
        code = self.proc.poll()
        self.kill()
        if code is None:
            return {"name": name, "status": "export_timeout",
                    "error": f"no result within {timeout} s (worker killed)"}
        return {"name": name, "status": "worker_crashed", "error": f"export worker exited with {code}"}


# --------------------------------------------------------------------------
# Stages (the binaries)
# --------------------------------------------------------------------------


def run_tool(cmd, log, timeout=TOOL_TIMEOUT):
    """(ok, first error line, seconds). stdout/stderr go to log."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        Path(log).write_text(f"$ {' '.join(map(str, cmd))}\ntimeout after {timeout} s\n")
        return False, f"{Path(cmd[0]).name}: timeout after {timeout} s", round(time.time() - t0, 2)
    Path(log).write_text(f"$ {' '.join(map(str, cmd))}\nexit {p.returncode}\n--- stdout\n{p.stdout}\n"
                         f"--- stderr\n{p.stderr}")
    dt = round(time.time() - t0, 2)
    if p.returncode != 0:
        msg = first_line(p.stderr) or first_line(p.stdout) or f"exit {p.returncode}"
        if p.returncode < 0:
            msg = f"{Path(cmd[0]).name}: killed by signal {-p.returncode}" + (f" ({msg})" if msg else "")
        return False, msg, dt
    return True, "", dt


def compare_outputs(got_npz, expected_npz, converted):
    """(error or None, max abs diff) comparing by position."""
    import numpy as np

    from recipes.checks.check_onnx import compare, max_diff
    got_f = np.load(got_npz)
    got = [got_f[k] for k in got_f.files]
    exp_f = np.load(expected_npz)
    want = [exp_f[f"out_{i}"] for i in range(len(exp_f.files))]
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}", None
    errors = []
    for i, (g, w) in enumerate(zip(got, want)):
        e = compare(f"out_{i}", g, w, converted.get(f"out_{i}"))
        if e and w.dtype.kind == "f" and g.shape == w.shape:
            gn, wn = np.isnan(g.astype(np.float64)), np.isnan(w)
            if (gn != wn).any():
                e += f" (NaN: {int(gn.sum())} here, {int(wn.sum())} in torch, of {w.size})"
        if e:
            errors.append(e)
    try:
        md = max_diff(got, want)
    except Exception:  # noqa: BLE001 - shapes differ; already reported
        md = None
    return ("; ".join(errors) or None), md


def _as_f64(a):
    """A float array as float64; bfloat16 (ml_dtypes' '<V2', or its dtype) by its bits."""
    import numpy as np
    a = np.asarray(a)
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    elif a.dtype.name == "bfloat16":
        a = a.astype(np.float32)
    return a.astype(np.float64)


def compare_half(name, got, want, ref, torch_dtype):
    """One output of a half-precision model (see the module docstring):
    (error or None, details for results.json)."""
    import numpy as np
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"{name}: shape {got.shape}, expected {want.shape}", {"output": name}
    if want.dtype.kind in "biu":
        if got.dtype != want.dtype:
            return f"{name}: dtype {got.dtype}, expected {want.dtype}", {"output": name}
        bad = got != want
        info = {"output": name}
        if not bad.any():
            return None, info
        if ref is not None and ref.shape == want.shape and ref.dtype == want.dtype:
            ok = ~bad | ((ref != want) & (got == ref))
            info["torch_unstable"] = int((ref != want).sum())
            if ok.all():
                info["as_float32_run"] = int(bad.sum())
                return None, info
        return f"{name}: {int(bad.sum())} of {want.size} elements differ (exact dtype {want.dtype})", info
    atol, rtol = HALF_TOLERANCE.get(torch_dtype or want.dtype.name, (1e-4, 1e-4))
    g, w = _as_f64(got), _as_f64(want)
    wf = np.isfinite(w)
    budget, unchecked = 0.0, np.zeros(w.shape, bool)
    if ref is not None and ref.shape == want.shape:
        r = _as_f64(ref)
        both = wf & np.isfinite(r)
        if both.any():
            budget = float(np.abs(w[both] - r[both]).max())
        unchecked = wf != np.isfinite(r)
    checked = ~unchecked
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(g - w)
        bound = 2 * budget + atol + rtol * np.abs(w)
        fin = wf & checked
        bad_fin = fin & ~(err <= bound)  # NaN or inf where torch is finite: bad
        nonfin = ~wf & checked
        bad_nf = nonfin & ~((np.isnan(w) & np.isnan(g)) | (w == g))
        finite_err = err[fin & np.isfinite(g)]
        max_err = float(finite_err.max()) if finite_err.size else 0.0
        ratio = float((err[fin] / bound[fin]).max()) if fin.any() else 0.0
    info = {"output": name, "dtype": torch_dtype or want.dtype.name, "max_err": max_err, "budget": budget,
            "ratio": ratio if np.isfinite(ratio) else "inf"}
    if unchecked.any():
        info["unchecked"] = int(unchecked.sum())
    nbad = int(bad_fin.sum() + bad_nf.sum())
    if not nbad:
        return None, info
    info["bad"] = nbad
    msg = (f"{name}: max abs diff {max_err:.3g}, torch's budget {budget:.3g} (bound 2*budget + atol {atol} + "
           f"rtol {rtol}*|expected|; worst element at {ratio:.3g}x the bound), {nbad} of {w.size} elements outside")
    gn, wn = np.isnan(g) & checked, np.isnan(w) & checked
    if (gn != wn).any() or bad_nf.any():
        msg += f" (NaN: {int(gn.sum())} here, {int(wn.sum())} in torch; inf: {int(np.isinf(g).sum())} here, " \
               f"{int(np.isinf(w).sum())} in torch)"
    return msg, info


def compare_outputs_half(got, expected_npz, reference_npz, converted):
    """compare_outputs for a half-precision model: (error or None, max abs diff, per-output details)."""
    import numpy as np
    exp_f = np.load(expected_npz)
    want = [exp_f[f"out_{i}"] for i in range(len(exp_f.files))]
    ref = [None] * len(want)
    if Path(reference_npz).exists():
        ref_f = np.load(reference_npz)
        ref = [ref_f[f"out_{i}"] if f"out_{i}" in ref_f.files else None for i in range(len(want))]
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}", None, []
    errors, infos, md = [], [], 0.0
    for i, (g, w, r) in enumerate(zip(got, want, ref)):
        e, info = compare_half(f"out_{i}", g, w, r, converted.get(f"out_{i}"))
        infos.append(info)
        if e:
            errors.append(e)
        if isinstance(info.get("max_err"), float):
            md = max(md, info["max_err"])
    return ("; ".join(errors) or None), md, infos


def check_model(name, exp, opts):
    d = Path(opts.scratch) / name
    b = Path(opts.bin)
    conv = exp.get("converted_outputs", {})
    half = getattr(opts, "dtype", "float32") != "float32"
    details = {}
    st = {}

    if exp.get("family") == "ts":
        ok, err, dt = run_tool([b / "ts2ir", d / "model.pt", "--example-inputs", d / "example.npz",
                                "-o", d / "model.ir"], d / "A.log")
        if ok:
            # ir-run takes the program's user inputs: the tensors (and the
            # numbers ts2ir made inputs), by name, from the example
            ok2, err, dt2 = run_tool([b / "ts2ir", d / "model.pt", "--example-inputs", d / "example.npz",
                                      "--emit", "text", "-o", d / "model.txt"], d / "A.listing.log")
            dt += dt2
            if ok2:
                import numpy as np
                example = np.load(d / "example.npz")
                names = ts_user_inputs(d / "model.txt")
                missing = [n for n in names if n not in example.files]
                if missing:
                    err = f"zoo_wide.py: the program's inputs {missing} are not in example.npz"
                else:
                    np.savez(d / "inputs.npz", **{n: example[n] for n in names})
            ok = not err
    else:
        ok, err, dt = run_tool([b / "pt2ir", d / "model.pt2", "-o", d / "model.ir"], d / "A.log")
    st["A"] = {"ok": ok, "s": dt, **({"error": err, "kind": classify(err)} if err else {})}
    if not ok:
        for s in "BCD":
            st[s] = {"ok": False, "skipped": "A failed"}
        return st

    # Each input set (the dynamic family has three sizes of one graph): the
    # stage passes only when every set matches torch.
    sets = [""] + [f"_{i}" for i in range(1, exp.get("sizes", 1))]

    def at(k, err):
        return f"size {k + 1} of {len(sets)}: {err}" if err and len(sets) > 1 else err

    def run_sets(stage, ir, tag):
        total, mds = 0.0, []
        for k, sfx in enumerate(sets):
            out = d / f"{tag}_out{sfx}.npz"
            ok, err, dt = run_tool([b / "ir-run", ir, "--inputs", d / f"inputs{sfx}.npz", "-o", out],
                                   d / f"{stage}.run{sfx}.log")
            total += dt
            if ok:
                if half:
                    import numpy as np
                    got_f = np.load(out)
                    err, md, infos = compare_outputs_half([got_f[k] for k in got_f.files],
                                                          d / f"expected{sfx}.npz", d / f"reference{sfx}.npz",
                                                          conv)
                    details.setdefault(stage, []).append(infos)
                else:
                    err, md = compare_outputs(out, d / f"expected{sfx}.npz", conv)
                mds.append(md)
                if err:
                    err = "mismatch: " + err
            if err:
                return at(k, err), total, mds
        return None, total, mds

    def record(stage, err, secs, mds, kind=None):
        st[stage] = {"ok": err is None, "s": round(secs, 2)}
        if mds and all(m is not None for m in mds):
            st[stage]["max_diff"] = max(mds)
        if err:
            st[stage]["error"] = err
            st[stage]["kind"] = kind or classify(err)
        if half and details.get(stage):
            st[stage]["outputs"] = details[stage]

    # B
    err, secs, mds = run_sets("B", d / "model.ir", "out")
    record("B", err, secs, mds)

    # C
    ok, err, dt = run_tool([b / "ir-decompose", d / "model.ir", "-o", d / "core.ir"], d / "C.decompose.log")
    mds = []
    if ok:
        err, dt2, mds = run_sets("C", d / "core.ir", "core_out")
        dt += dt2
    record("C", err, dt, mds)

    # D
    ok, err, dt = run_tool([b / "ir2onnx", d / "model.ir", "--opset", "18", "-o", d / "model.onnx"],
                           d / "D.ir2onnx.log")
    mds = []
    if ok:
        for k, sfx in enumerate(sets):
            t0 = time.time()
            cmd = [opts.onnx_python, str(Path(__file__).resolve()), "--ort-check", str(d / "model.onnx"),
                   str(d / f"inputs{sfx}.npz"), str(d / f"expected{sfx}.npz"), json.dumps(conv)]
            ort_out = d / f"ort_out{sfx}.npz"
            if half:
                ort_out.unlink(missing_ok=True)
                cmd += ["--ort-out", str(ort_out)]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT, cwd=ROOT)
                (d / f"D.ort{sfx}.log").write_text(p.stdout + "\n--- stderr\n" + p.stderr)
                lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
                r = json.loads(lines[-1]) if lines else {"error": "ort-check: " + (first_line(p.stderr) or
                                                                                    f"exit {p.returncode}")}
            except subprocess.TimeoutExpired:
                r = {"error": f"ort-check: timeout after {TOOL_TIMEOUT} s"}
            if half and not (r.get("error") or "").startswith(("onnx.checker", "onnxruntime", "ort-check")):
                if ort_out.exists():
                    import numpy as np
                    got_f = np.load(ort_out)
                    e, md, infos = compare_outputs_half([got_f[k] for k in got_f.files], d / f"expected{sfx}.npz",
                                                        d / f"reference{sfx}.npz", conv)
                    details.setdefault("D", []).append(infos)
                    r = {"error": ("mismatch: " + e) if e else None, "max_diff": md}
                else:
                    r = {"error": "ort-check: no outputs written"}
            dt += time.time() - t0
            err = at(k, r.get("error"))
            if err:
                if err.startswith("mismatch") or "mismatch:" in err:
                    err += "; " + locate(b, d, sfx, opts)
                break
            mds.append(r.get("max_diff"))
    record("D", err, dt, mds)
    if opts.prune and all(st[s]["ok"] for s in "ABCD"):
        for f in ("model.pt2", "model.pt", "model.ir", "core.ir", "model.onnx", "model.onnx.data", "nodes.onnx",
                  "nodes.onnx.data"):
            (d / f).unlink(missing_ok=True)
    return st


def classify(err):
    """What a failed stage's error is: wrong (a tool exited 0 with numbers
    outside the bound), refused (a tool exited non-zero), timeout, crashed
    (killed by a signal), invalid_onnx (ir2onnx exited 0, but ONNX's checker
    or ONNX Runtime rejected the file)."""
    if not err:
        return None
    e = re.sub(r"^size \d+ of \d+: ", "", err)
    if e.startswith("mismatch"):
        return "wrong"
    if "timeout after" in e:
        return "timeout"
    if "killed by signal" in e or re.match(r"ort-check: exit -\d+", e):
        return "crashed"  # a tool, or ONNX Runtime on ir2onnx's file (its process killed by a signal)
    if e.startswith(("onnx.checker", "onnxruntime", "ort-check")):
        return "invalid_onnx"
    return "refused"


def locate(b, d, sfx, opts):
    """Where ONNX Runtime and ir-run part, node by node (ir2onnx
    --intermediates, recipes/run/ort_run.py, ir-run --intermediates, ir-diff
    --first): the first value that differs, for the failure's line."""
    inputs = d / f"inputs{sfx}.npz"
    steps = [
        [b / "ir2onnx", d / "model.ir", "--opset", "18", "--intermediates", "-o", d / "nodes.onnx"],
        [opts.onnx_python, ROOT / "recipes/run/ort_run.py", d / "nodes.onnx", "--inputs", inputs,
         "-o", d / f"nodes.ort{sfx}.npz"],
        [b / "ir-run", d / "model.ir", "--inputs", inputs, "--intermediates", d / f"nodes.run{sfx}.npz", "-q"],
    ]
    for i, cmd in enumerate(steps):
        ok, err, _ = run_tool(cmd, d / f"D.locate{i}{sfx}.log")
        if not ok:
            return f"per-node comparison not made: {err}"
    p = subprocess.run([str(b / "ir-diff"), str(d / f"nodes.run{sfx}.npz"), str(d / f"nodes.ort{sfx}.npz"),
                        "--first"], capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    return "per node: " + (first_line(p.stdout) or first_line(p.stderr) or f"ir-diff exit {p.returncode}")


def ort_outputs(onnx_path, inputs_npz, out_npz):
    """Runs the model's user outputs in ONNX Runtime (bfloat16 read as
    float32) and writes them to out_npz in order: for the half-precision
    comparison, made by the driver."""
    import numpy as np

    import onnx
    from recipes.run import ort_run
    from recipes.checks.check_onnx import user_outputs
    names = user_outputs(onnx.load(str(onnx_path), load_external_data=False))
    all_names, arrays = ort_run.run(onnx_path, dict(np.load(inputs_npz)), as_torch=True)
    by_name = dict(zip(all_names, arrays))
    np.savez(out_npz, **{f"out_{i}": by_name[n] for i, n in enumerate(names)})


def ort_check_main(onnx_path, inputs, expected, converted, ort_out=None):
    """Stage D's second half, in the ONNX environment: prints one JSON line."""
    import onnx

    from recipes.checks.check_onnx import run_case
    try:
        onnx.checker.check_model(onnx_path, full_check=True)
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"error": "onnx.checker: " + (first_line(str(e)) or type(e).__name__)}))
        return
    if ort_out:
        try:
            ort_outputs(onnx_path, inputs, ort_out)
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"error": "onnxruntime: " + (first_line(str(e)) or type(e).__name__)}))
            return
        print(json.dumps({"error": None}))
        return
    try:
        err, md = run_case(onnx_path, inputs, expected, json.loads(converted))
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"error": "onnxruntime: " + (first_line(str(e)) or type(e).__name__)}))
        return
    print(json.dumps({"error": ("mismatch: " + err) if err else None, "max_diff": md}))


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------

TORCH_SIDE = {"build_failed": "building the model", "cast_failed": "casting the model",
              "eager_failed": "eager run", "eager_float32_failed": "float32 reference run",
              "export_failed": "torch.export.export",
              "save_failed": "torch.export.save", "inputs_failed": "pairing inputs with the signature",
              "export_timeout": "export timeout", "worker_crashed": "export worker crashed",
              "trace_failed": "torch.jit.trace", "script_failed": "torch.jit.script",
              "freeze_failed": "torch.jit.script + torch.jit.freeze",
              "freeze_trace_failed": "torch.jit.trace + torch.jit.freeze", "load_failed": "torch.jit.load"}


def normalise(msg):
    """An error message with its model-specific parts (node names, thread ids,
    numbers) blanked, for grouping. Source locations of panics are kept."""
    m = re.sub(r"\(nodes [^)]*\)", "(nodes …)", msg)
    m = re.sub(r"thread '[^']*' \(\d+\)", "thread", m)
    m = re.sub(r"Name:'[^']*'", "Name:'…'", m)
    m = re.sub(r"node '[^']*'", "node '…'", m)
    m = re.sub(r"node \w+:", "node …:", m)
    out = []
    for tok in m.split(" "):
        if ".rs:" in tok:
            out.append(re.sub(r"^.*/(\w[\w.-]*-\d[\w.]*/src/)", r"\1", tok))  # registry path -> crate
        else:
            out.append(re.sub(r"(?<![\w.])\d+(\.\d+)?(e-?\d+)?(?![\w])", "N", tok))
    return " ".join(out)


def write_report(results, out_dir, meta):
    from recipes.fixtures import zoo_wide_models as Z
    dtype = meta.get("dtype", "float32")
    fams = [f for f in Z.FAMILIES if any(r["family"] == f for r in results.values())]
    lines = ["# Wide zoo: models from outside the repo" + (f", in {dtype}" if dtype != "float32" else ""), "",
             "Written by `recipes/checks/zoo_wide.py` (`make zoo`); do not edit. Every model is built from code or a "
             "config object with random weights (nothing downloaded), exported with `torch.export.export` "
             "(TRAINING dialect), saved with `torch.export.save`, and checked against torch's eager outputs "
             "(eval, `no_grad`) in four stages, each a run of the real binaries with a timeout:", "",
             "- **A** `pt2ir model.pt2 -o model.ir` succeeds",
             "- **B** `ir-run model.ir --inputs inputs.npz -o out.npz` matches eager",
             "- **C** `ir-decompose model.ir -o core.ir`, then `ir-run core.ir` matches eager",
             "- **D** `ir2onnx model.ir --opset 18`, `onnx.checker.check_model(full_check=True)`, "
             "ONNX Runtime (CPU) matches eager", "",
             "Outputs are compared by position: float32 within atol 1e-4 and rtol 1e-4, integers and bools "
             "exactly. B, C and D each need only A. `torch refused` counts models that torch (or the model code) "
             "itself could not build, run or export: those are not pt2kit failures, and they are listed "
             "separately below.", ""]
    if "ts" in fams:
        lines += ["**The ts family** (TorchScript, `recipes/fixtures/zoo_ts_models.py`) takes another way in: "
                  "each model is made TorchScript by `torch.jit.trace`, `torch.jit.script`, "
                  "`torch.jit.freeze(torch.jit.script(m))` or `torch.jit.freeze(torch.jit.trace(m))` (the name ends "
                  "with `trace`, `script`, `freeze` or `freeze_trace`) and saved with `torch.jit.save`; the expected "
                  "outputs are the archive's reloaded with `torch.jit.load` (`no_grad`), and stage **A** is "
                  "`ts2ir model.pt --example-inputs example.npz -o model.ir` (B, C and D as above, on the program's "
                  "user inputs). For it, `exported` counts the archives torch made, and `torch refused` the models "
                  "torch cannot trace, script or freeze.", ""]
    if dtype != "float32":
        atol, rtol = HALF_TOLERANCE[dtype]
        lines += [f"**In {dtype}** (`recipes/checks/zoo_wide.py --dtype {dtype}`): each model is cast with "
                  f"`model.to(torch.{dtype})` after it is built (eval mode), its floating inputs likewise, and "
                  f"torch's eager run in {dtype} gives the expected outputs (the float32 tolerance above does not "
                  "apply). Two correct implementations of a half-precision model round differently layer after "
                  "layer, so torch's own error is measured too: the same cast model, upcast with `.float()`, runs "
                  "in float32 eager on the same inputs upcast, and per output "
                  "`budget = max |eager_half - eager_f32|` (over elements finite in both). A stage's output passes "
                  "when every element has `|ours - eager_half| <= max(tol, 2 * budget + tol)` with "
                  f"`tol = atol + rtol * |eager_half|`, {dtype} atol {atol} rtol {rtol} (torch.testing.assert_close's "
                  "defaults; float32 outputs of a half model: atol 1e-4 rtol 1e-4). NaN must be NaN and an infinity "
                  "the same infinity, except where torch's half and float32 runs disagree on being finite "
                  "(counted as `unchecked` in the results). Integers and bools exactly (where torch's float32 "
                  "run gives another integer than its half run, either). Models torch cannot build, run or export "
                  f"in {dtype} are counted as torch refused, with torch's error.", "",
                  "Each failed stage is one of: **wrong** (the tool exited 0 and a number is outside the bound: "
                  "the failure that matters), **refused** (the tool exited non-zero with a message), **timeout**, "
                  "**crashed** (killed by a signal), **invalid_onnx** (ir2onnx exited 0 but ONNX's checker or "
                  "ONNX Runtime rejected the file).", ""]
    lines += [
             f"torch {meta.get('torch')}, torchvision {meta.get('torchvision')}, transformers "
             f"{meta.get('transformers')}, onnx {meta.get('onnx')}, onnxruntime {meta.get('onnxruntime')}; "
             f"pt2kit {meta.get('pt2kit')}. Full run: {meta.get('wall_s', '?')} s on this machine.", "",
             "## Summary", "",
             "| family | models | torch refused | exported | A | B | C | D | all four |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    tot = collections.Counter()
    for f in fams:
        rs = [r for r in results.values() if r["family"] == f]
        c = counts(rs)
        tot.update(c)
        lines.append(f"| {f} | {c['models']} | {c['refused']} | {c['exported']} | {c['A']} | {c['B']} | "
                     f"{c['C']} | {c['D']} | {c['all']} |")
    lines.append(f"| **all** | {tot['models']} | {tot['refused']} | {tot['exported']} | {tot['A']} | "
                 f"{tot['B']} | {tot['C']} | {tot['D']} | {tot['all']} |")
    lines += ["", "A, B, C and D count passes among the exported models.", ""]
    if dtype != "float32":
        lines += half_sections(results, fams)

    for f in fams:
        rs = sorted((r for r in results.values() if r["family"] == f), key=lambda r: r["name"])
        c = counts(rs)
        lines += [f"## {f}", "",
                  f"{c['models']} models, {c['refused']} refused by torch, {c['exported']} exported; "
                  f"A {c['A']}, B {c['B']}, C {c['C']}, D {c['D']} passed.", "",
                  "| model | A | B | C | D | configuration |", "|---|:-:|:-:|:-:|:-:|---|"]
        for r in rs:
            if r["status"] != "ok":
                marks = ["—"] * 4
                cfg = f"*torch: {TORCH_SIDE.get(r['status'], r['status'])} failed*; " + r.get("config", "")
            else:
                marks = ["ok" if r["stages"][s]["ok"] else ("skip" if r["stages"][s].get("skipped") else
                                                            mark(r["stages"][s], dtype))
                         for s in "ABCD"]
                cfg = r.get("config", "")
            lines.append(f"| {r['name']} | " + " | ".join(marks) + f" | {md_escape(cfg)} |")
        lines.append("")

    lines += ["## Failures of pt2kit", "",
              "Every failed stage of every exported model (a stage skipped because A failed is not repeated).", ""]
    n = 0
    groups = collections.defaultdict(lambda: collections.defaultdict(list))
    for f in fams:
        for r in sorted((r for r in results.values() if r["family"] == f and r["status"] == "ok"),
                        key=lambda r: r["name"]):
            for s in "ABCD":
                st = r["stages"][s]
                if not st["ok"] and not st.get("skipped"):
                    n += 1
                    lines.append(f"- `{r['name']}` {s}: {md_escape(st.get('error', '?'))}")
                    groups[normalise(st.get("error", "?"))][r["name"]].append(s)
    if not n:
        lines.append("None.")
    lines += ["", "### The same failures grouped by message", "",
              "Node names, thread ids and numbers blanked; models, the stages that failed with that "
              "message, the message.", ""]
    for msg, models in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        stages = sorted({s for ss in models.values() for s in ss})
        lines.append(f"- {len(models)} model{'s' if len(models) > 1 else ''}, {', '.join(stages)}: "
                     f"{md_escape(msg)} ({', '.join(models)})")

    lines += ["", "## Refused by torch", "",
              "Models that never reached pt2kit: building the model, running it eagerly, or "
              "`torch.export.export` / `torch.export.save` failed in torch itself.", ""]
    refused = [r for r in results.values() if r["status"] != "ok"]
    for r in sorted(refused, key=lambda r: (r["family"], r["name"])):
        lines.append(f"- `{r['name']}` ({r['family']}, {TORCH_SIDE.get(r['status'], r['status'])}): "
                     f"{md_escape(r.get('error', ''))}")
    if not refused:
        lines.append("None.")
    lines += ["", "## Notes", "",
              "- `torch_ep_vs_eager` in results.json is torch's own exported program (`ep.module()`) "
              "against eager, for reference.",
              "- Regenerate with `make zoo`; rerun some models with "
              "`.venv/bin/python recipes/checks/zoo_wide.py --only NAME ...` or `--family F` "
              "(merged into results.json, this report rewritten).", ""]
    (Path(out_dir) / report_names(dtype)[0]).write_text("\n".join(lines))


def mark(st, dtype):
    """A failed stage's mark in the family tables."""
    if dtype == "float32":
        return "FAIL"
    kind = st.get("kind") or classify(st.get("error", ""))
    return {"wrong": "**WRONG**", "refused": "refused"}.get(kind, kind)


def stage_kind(st):
    if st["ok"]:
        return "pass"
    if st.get("skipped"):
        return "skipped"
    return st.get("kind") or classify(st.get("error", "")) or "refused"


def half_sections(results, fams):
    """The half-precision report's extra sections: outcomes per stage, every
    wrong number with torch's budget, the refusal reasons with counts."""
    exported = [r for r in results.values() if r["status"] == "ok"]
    kinds = ["pass", "wrong", "refused", "timeout", "crashed", "invalid_onnx", "skipped"]
    lines = ["## Outcomes per stage", "",
             "Among the exported models; `skipped` is B, C or D of a model whose A failed. `crashed` in D "
             "includes ONNX Runtime killed by a signal while loading or running ir2onnx's file.", "",
             "| stage | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
    for s in "ABCD":
        c = collections.Counter(stage_kind(r["stages"][s]) for r in exported)
        lines.append(f"| {s} | " + " | ".join(str(c.get(k, 0)) for k in kinds) + " |")
    lines += ["", "## Wrong numbers (exit 0)", "",
              "Every output of every stage outside the bound: max |ours - eager_half|, torch's budget "
              "max |eager_half - eager_f32|, the worst element's error as a multiple of its bound "
              "(2 * budget + atol + rtol * |eager_half|), and how many elements are outside.", ""]
    n = 0
    for r in sorted(exported, key=lambda r: (fams.index(r["family"]), r["name"])):
        for s in "ABCD":
            st = r["stages"][s]
            if st["ok"] or stage_kind(st) != "wrong":
                continue
            outs = [o for sets in st.get("outputs", []) for o in sets if o.get("bad") or
                    ("max_err" not in o and "torch_unstable" not in o)]
            def ratio(o):
                return o["ratio"] if isinstance(o.get("ratio"), str) else format(o.get("ratio", 0), ".3g")
            detail = "; ".join(
                f"{o['output']} ({o.get('dtype', '?')}): max err {o.get('max_err', float('nan')):.3g}, budget "
                f"{o.get('budget', float('nan')):.3g}, {ratio(o)}x the bound, "
                f"{o.get('bad', '?')} elements" for o in outs if "max_err" in o)
            lines.append(f"- `{r['name']}` {s}: {md_escape(detail or st.get('error', '?'))}")
            n += 1
    if not n:
        lines.append("None.")
    lines += ["", "## Refusals grouped by message", "",
              "Stages that exited non-zero (or timed out, crashed, or made an ONNX file ONNX Runtime "
              "rejected), messages normalised as below; count of (model, stage) pairs.", ""]
    groups = collections.defaultdict(list)
    for r in exported:
        for s in "ABCD":
            st = r["stages"][s]
            k = stage_kind(st)
            if k in ("pass", "wrong", "skipped"):
                continue
            groups[(k, normalise(st.get("error", "?")))].append(f"{r['name']} {s}")
    for (k, msg), who in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"- {len(who)} × {k}: {md_escape(msg)} ({', '.join(who)})")
    if not groups:
        lines.append("None.")
    lines += ["", "## Torch's budget", "",
              "Outputs where torch's own half and float32 runs differ most (the budget that widens the bound), "
              "and elements not checked because torch's half run overflowed where its float32 run did not.", ""]
    budgets = []
    for r in exported:
        for o in r.get("budget", []):
            if "budget" in o:
                budgets.append((o["budget"], r["name"], o["output"], o.get("unchecked", 0)))
    for b, name, out, unchecked in sorted(budgets, reverse=True)[:15]:
        lines.append(f"- `{name}` {out}: budget {b:.3g}" + (f", {unchecked} elements unchecked" if unchecked else ""))
    unchecked = [(name, out, u) for b, name, out, u in budgets if u]
    if unchecked:
        lines.append("")
        lines.append("Unchecked elements (torch's half run non-finite where float32 is finite, or the reverse): " +
                     ", ".join(f"`{n}` {o} ({u})" for n, o, u in unchecked))
    lines.append("")
    return lines


def write_results(path, meta, models):
    """results.json with one model a line (small, and diffs line by line)."""
    body = ",\n".join(json.dumps(m, separators=(",", ":")) for m in models)
    Path(path).write_text(f'{{"meta": {json.dumps(meta)},\n"models": [\n{body}\n]}}\n')


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def counts(rs):
    c = collections.Counter(models=len(rs))
    for r in rs:
        if r["status"] != "ok":
            c["refused"] += 1
            continue
        c["exported"] += 1
        for s in "ABCD":
            if r["stages"][s]["ok"]:
                c[s] += 1
        if all(r["stages"][s]["ok"] for s in "ABCD"):
            c["all"] += 1
    return c


def versions(onnx_python):
    meta = {}
    try:
        import torch
        import torchvision
        import transformers
        meta.update(torch=torch.__version__, torchvision=torchvision.__version__,
                    transformers=transformers.__version__)
    except Exception:  # noqa: BLE001
        pass
    try:
        p = subprocess.run([onnx_python, "-c", "import onnx, onnxruntime; print(onnx.__version__, "
                            "onnxruntime.__version__)"], capture_output=True, text=True, timeout=120)
        meta["onnx"], meta["onnxruntime"] = p.stdout.split()
    except Exception:  # noqa: BLE001
        pass
    try:
        meta["pt2kit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                        cwd=ROOT).stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    return meta


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these models")
    ap.add_argument("--family", action="append", help="run only this family (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--bin", default=str(ROOT / "target/release"), help="where pt2ir, ir-run, ... are")
    ap.add_argument("--onnx-python", default=str(ROOT / ".venv-onnx/bin/python"),
                    help="a Python with numpy, onnx and onnxruntime, for stage D")
    ap.add_argument("--out", default=str(ROOT / "golden/zoo"), help="where REPORT.md and results.json go")
    ap.add_argument("--scratch", default=str(ROOT / "zoo-scratch"), help="models, IR, ONNX files, logs")
    ap.add_argument("--export-timeout", type=int, default=EXPORT_TIMEOUT, help="seconds per model export")
    ap.add_argument("--prune", action="store_true", help="delete the model files of models that pass every stage")
    ap.add_argument("--report-only", action="store_true", help="rewrite REPORT.md from results.json and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dtype", choices=DTYPES, default="float32",
                    help="run the models in this dtype (the half dtypes: see the module docstring)")
    ap.add_argument("--ort-check", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--ort-out", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.ort_check:
        return ort_check_main(*a.ort_check, ort_out=a.ort_out)
    if a.worker:
        return worker_main(a.scratch, a.dtype)

    from recipes.fixtures import zoo_wide_models as Z
    names = list(Z.REGISTRY)
    if a.family:
        bad = [f for f in a.family if f not in Z.FAMILIES]
        if bad:
            ap.error(f"unknown family {bad}; known: {Z.FAMILIES}")
        names = [n for n in names if Z.REGISTRY[n].family in a.family]
    if a.dtype != "float32":
        # TorchScript archives are checked in float32 only
        names = [n for n in names if Z.REGISTRY[n].family != "ts"]
    if a.only:
        bad = [n for n in a.only if n not in Z.REGISTRY]
        if bad:
            import difflib
            hints = {n: difflib.get_close_matches(n, Z.REGISTRY, 3) for n in bad}
            ap.error(f"unknown model(s): {hints}")
        names = [n for n in names if n in a.only]
    if a.list:
        for n in names:
            print(f"{Z.REGISTRY[n].family:13} {n}")
        return 0
    for tool in ("pt2ir", "ts2ir", "ir-run", "ir-decompose", "ir2onnx"):
        if not (Path(a.bin) / tool).exists():
            ap.error(f"{Path(a.bin) / tool} does not exist (cargo build --release --workspace)")

    report_name, results_name = report_names(a.dtype)
    if a.report_only:
        data = json.loads((Path(a.out) / results_name).read_text())
        for r in data["models"]:  # the classification as this script makes it now
            for st in (r.get("stages") or {}).values():
                if st.get("error") and not st.get("skipped"):
                    st["kind"] = classify(st["error"])
        write_results(Path(a.out) / results_name, data["meta"], data["models"])
        write_report({r["name"]: r for r in data["models"]}, a.out, data["meta"])
        return 0
    out_dir, scratch = Path(a.out), Path(a.scratch)
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    results_path = out_dir / results_name
    results = {}
    partial = bool(a.only or a.family)
    if partial and results_path.exists():
        results = {r["name"]: r for r in json.loads(results_path.read_text())["models"]}
    results = {k: v for k, v in results.items() if k in Z.REGISTRY}

    t_start = time.time()
    exporter = Exporter(sys.executable, scratch, scratch / "export-worker.log", a.dtype)
    pool = ThreadPoolExecutor(max_workers=1)
    futures = {}
    lock = threading.Lock()

    def done(name, exp, fut):
        try:
            st = fut.result()
        except Exception as e:  # noqa: BLE001 - a bug of this script, shown as such
            st = {s: {"ok": False, "error": f"zoo_wide.py: {e!r}"} for s in "ABCD"}
        with lock:
            exp["stages"] = st
            results[name] = exp
            marks = " ".join(f"{s}:{'ok' if st[s]['ok'] else 'FAIL'}" for s in "ABCD")
            errs = "; ".join(f"{s}: {st[s]['error']}" for s in "ABCD" if st[s].get("error"))
            print(f"[{time.time() - t_start:6.0f}s] {name:40} {marks}  {errs[:200]}", flush=True)

    try:
        for i, name in enumerate(names):
            exp = exporter.export(name, a.export_timeout)
            exp["family"] = Z.REGISTRY[name].family
            if exp["status"] != "ok":
                exp["stages"] = None
                results[name] = exp
                print(f"[{time.time() - t_start:6.0f}s] {name:40} torch {exp['status']}: "
                      f"{exp.get('error', '')[:200]}", flush=True)
                continue
            fut = pool.submit(check_model, name, exp, a)
            fut.add_done_callback(lambda f, name=name, exp=exp: done(name, exp, f))
            futures[name] = fut
        pool.shutdown(wait=True)
    finally:
        exporter.kill()

    meta = versions(a.onnx_python)
    meta["dtype"] = a.dtype
    wall = round(time.time() - t_start)
    old_meta = {}
    if partial and results_path.exists():
        old_meta = json.loads(results_path.read_text()).get("meta", {})
    meta["wall_s"] = old_meta.get("wall_s", wall) if partial else wall
    ordered = [results[n] for n in Z.REGISTRY if n in results]
    write_results(results_path, meta, ordered)
    write_report({r["name"]: r for r in ordered}, out_dir, meta)
    c = counts(ordered)
    print(f"{c['models']} models, {c['refused']} refused by torch; A {c['A']}, B {c['B']}, C {c['C']}, "
          f"D {c['D']} of {c['exported']}; {wall} s. Report: {out_dir / report_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
