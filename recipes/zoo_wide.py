#!/usr/bin/env python3
"""The wide zoo: models from outside the repo through every pt2kit tool.

For each model of recipes/zoo_wide_models.py (torchvision, transformers,
torch.nn modules, torch's ExportDB examples; random weights, nothing
downloaded) this exports with torch.export.export, saves with
torch.export.save, records torch's eager outputs (eval mode, no_grad), then
checks four stages, each a subprocess of the real binaries with a timeout:

  A  pt2ir model.pt2 -o model.ir                           succeeds
  B  ir-run model.ir --inputs inputs.npz -o out.npz       matches eager
  C  ir-decompose model.ir -o core.ir; ir-run core.ir     matches eager
  D  ir2onnx model.ir --opset 18 -o model.onnx; onnx.checker.check_model(full_check=True);
     ONNX Runtime (CPU) matches eager (run by --onnx-python, in its own process)

Outputs are compared by position with torch's pytree-flattened eager
outputs: float32 within atol 1e-4 and rtol 1e-4, integers and bools exactly
(recipes/check_onnx.py's compare()). B, C and D need A; they do not need each
other.

Exports run in a long-lived worker process (torch imported once) with a
per-model timeout; a worker that hangs or dies is killed and replaced, and
the model is recorded as failed. While the worker exports the next model, a
thread runs the stages of the previous one.

Writes --out/REPORT.md (a table per family, every failure with its stage and
the first line of its error) and --out/results.json. Models, IR, ONNX files
and logs stay in --scratch (git-ignored). With --only or --family, the named
models are rerun and merged into an existing results.json.

  .venv/bin/python recipes/zoo_wide.py [--only NAME ...] [--family F ...]
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
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

EXPORT_TIMEOUT = 600
TOOL_TIMEOUT = 300


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


def _write_set(ep, inputs, eager, d, suffix):
    """Writes one input set and torch's outputs for it (inputs{suffix}.npz,
    expected{suffix}.npz): user inputs in signature order, paired with the
    flattened (args, kwargs). Returns (input shapes, inputs not given,
    converted outputs)."""
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
            arrays[arg_name] = leaf.detach().contiguous().numpy()
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
    return {k: f"{v.dtype}{list(v.shape)}" for k, v in arrays.items()}, skipped, converted


def export_one(name, scratch):
    """Builds, runs eagerly and exports one model into scratch/NAME/. Returns a
    JSON-able dict: status ok, or the torch-side stage that failed."""
    import copy

    import numpy as np
    import torch
    from torch.export.graph_signature import OutputKind

    import zoo_wide_models as Z

    d = Path(scratch) / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    res = {"name": name, "family": Z.REGISTRY[name].family}
    t0 = time.time()
    stage = "build"
    try:
        model, args, kwargs, dyn, config = Z.build(name)
        res["config"] = config
        res["params"] = Z.nparams(model)
        pristine = copy.deepcopy(model)
        inputs_orig = _clone((args, kwargs))

        stage = "eager"
        with torch.no_grad():
            eager = _flatten(copy.deepcopy(pristine)(*_clone(args), **_clone(kwargs)))

        stage = "export"
        t1 = time.time()
        ep = torch.export.export(copy.deepcopy(pristine), _clone(args), _clone(kwargs), dynamic_shapes=dyn)
        res["export_s"] = round(time.time() - t1, 2)

        stage = "save"
        pt2 = d / "model.pt2"
        torch.export.save(ep, str(pt2))
        res["pt2_bytes"] = pt2.stat().st_size

        stage = "inputs"
        res["inputs"], skipped, converted = _write_set(ep, inputs_orig, eager, d, "")
        if skipped:
            res["inputs_not_given"] = skipped  # constants baked into the graph
        res["outputs"] = [f"{v.dtype}{list(v.shape)}" for v in np.load(d / "expected.npz").values()]
        res["converted_outputs"] = converted
        res["user_outputs"] = sum(1 for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT)
        # the other sizes of a dynamic entry: inputs_N.npz, expected_N.npz
        stage = "other sizes"
        res["sizes"] = Z.REGISTRY[name].sizes
        for i in range(1, res["sizes"]):
            _, a_i, k_i, _, _ = Z.build(name, i)
            with torch.no_grad():
                eager_i = _flatten(copy.deepcopy(pristine)(*_clone(a_i), **_clone(k_i)))
            shapes, _, conv_i = _write_set(ep, (a_i, k_i), eager_i, d, f"_{i}")
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


def worker_main(scratch):
    # Results go to the original stdout; everything torch prints goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import torch
    torch.set_num_threads(1)
    import zoo_wide_models  # noqa: F401 - the registry, once
    out.write("READY\n")
    out.flush()
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        print(f"=== {name}", file=sys.stderr, flush=True)
        res = export_one(name, scratch)
        out.write(json.dumps(res) + "\n")
        out.flush()
        import gc
        gc.collect()


class Exporter:
    """A long-lived worker process; restarted after a timeout or a crash."""

    def __init__(self, python, scratch, log):
        self.python, self.scratch, self.log = python, scratch, log
        self.proc = None

    def start(self):
        logf = open(self.log, "a")
        self.proc = subprocess.Popen(
            [self.python, str(Path(__file__).resolve()), "--worker", "--scratch", str(self.scratch)],
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

    from check_onnx import compare, max_diff
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


def check_model(name, exp, opts):
    d = Path(opts.scratch) / name
    b = Path(opts.bin)
    conv = exp.get("converted_outputs", {})
    st = {}

    ok, err, dt = run_tool([b / "pt2ir", d / "model.pt2", "-o", d / "model.ir"], d / "A.log")
    st["A"] = {"ok": ok, "s": dt, **({"error": err} if err else {})}
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
                err, md = compare_outputs(out, d / f"expected{sfx}.npz", conv)
                mds.append(md)
                if err:
                    err = "mismatch: " + err
            if err:
                return at(k, err), total, mds
        return None, total, mds

    def record(stage, err, secs, mds):
        st[stage] = {"ok": err is None, "s": round(secs, 2)}
        if mds and all(m is not None for m in mds):
            st[stage]["max_diff"] = max(mds)
        if err:
            st[stage]["error"] = err

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
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT, cwd=ROOT)
                (d / f"D.ort{sfx}.log").write_text(p.stdout + "\n--- stderr\n" + p.stderr)
                lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
                r = json.loads(lines[-1]) if lines else {"error": "ort-check: " + (first_line(p.stderr) or
                                                                                    f"exit {p.returncode}")}
            except subprocess.TimeoutExpired:
                r = {"error": f"ort-check: timeout after {TOOL_TIMEOUT} s"}
            dt += time.time() - t0
            err = at(k, r.get("error"))
            if err:
                if err.startswith("mismatch") or "mismatch:" in err:
                    err += "; " + locate(b, d, sfx, opts)
                break
            mds.append(r.get("max_diff"))
    record("D", err, dt, mds)
    if opts.prune and all(st[s]["ok"] for s in "ABCD"):
        for f in ("model.pt2", "model.ir", "core.ir", "model.onnx", "model.onnx.data"):
            (d / f).unlink(missing_ok=True)
    return st


def locate(b, d, sfx, opts):
    """Where ONNX Runtime and ir-run part, node by node (ir2onnx
    --intermediates, recipes/ort_run.py, ir-run --intermediates, ir-diff
    --first): the first value that differs, for the failure's line."""
    inputs = d / f"inputs{sfx}.npz"
    steps = [
        [b / "ir2onnx", d / "model.ir", "--opset", "18", "--intermediates", "-o", d / "nodes.onnx"],
        [opts.onnx_python, ROOT / "recipes/ort_run.py", d / "nodes.onnx", "--inputs", inputs,
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


def ort_check_main(onnx_path, inputs, expected, converted):
    """Stage D's second half, in the ONNX environment: prints one JSON line."""
    import onnx

    from check_onnx import run_case
    try:
        onnx.checker.check_model(onnx_path, full_check=True)
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"error": "onnx.checker: " + (first_line(str(e)) or type(e).__name__)}))
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

TORCH_SIDE = {"build_failed": "building the model", "eager_failed": "eager run", "export_failed": "torch.export.export",
              "save_failed": "torch.export.save", "inputs_failed": "pairing inputs with the signature",
              "export_timeout": "export timeout", "worker_crashed": "export worker crashed"}


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
    import zoo_wide_models as Z
    fams = [f for f in Z.FAMILIES if any(r["family"] == f for r in results.values())]
    lines = ["# Wide zoo: models from outside the repo", "",
             "Written by `recipes/zoo_wide.py` (`make zoo`); do not edit. Every model is built from code or a "
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
             "separately below.", "",
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
                marks = ["ok" if r["stages"][s]["ok"] else ("skip" if r["stages"][s].get("skipped") else "FAIL")
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
              "`.venv/bin/python recipes/zoo_wide.py --only NAME ...` or `--family F` "
              "(merged into results.json, this report rewritten).", ""]
    (Path(out_dir) / "REPORT.md").write_text("\n".join(lines))


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
    ap.add_argument("--ort-check", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.ort_check:
        return ort_check_main(*a.ort_check)
    if a.worker:
        return worker_main(a.scratch)

    import zoo_wide_models as Z
    names = list(Z.REGISTRY)
    if a.family:
        bad = [f for f in a.family if f not in Z.FAMILIES]
        if bad:
            ap.error(f"unknown family {bad}; known: {Z.FAMILIES}")
        names = [n for n in names if Z.REGISTRY[n].family in a.family]
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
    for tool in ("pt2ir", "ir-run", "ir-decompose", "ir2onnx"):
        if not (Path(a.bin) / tool).exists():
            ap.error(f"{Path(a.bin) / tool} does not exist (cargo build --release --workspace)")

    if a.report_only:
        data = json.loads((Path(a.out) / "results.json").read_text())
        write_results(Path(a.out) / "results.json", data["meta"], data["models"])
        write_report({r["name"]: r for r in data["models"]}, a.out, data["meta"])
        return 0
    out_dir, scratch = Path(a.out), Path(a.scratch)
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    results_path = out_dir / "results.json"
    results = {}
    partial = bool(a.only or a.family)
    if partial and results_path.exists():
        results = {r["name"]: r for r in json.loads(results_path.read_text())["models"]}
    results = {k: v for k, v in results.items() if k in Z.REGISTRY}

    t_start = time.time()
    exporter = Exporter(sys.executable, scratch, scratch / "export-worker.log")
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
          f"D {c['D']} of {c['exported']}; {wall} s. Report: {out_dir / 'REPORT.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
